"""The ``demo`` command (``serve`` from the built-in simulator) and ``simulate`` (the
simulator alone)."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import shlex
from typing import TYPE_CHECKING

from ..refresh.loop import Refresher
from ..refresh.settings import Settings
from .serve import PROG, UsageError, install_signal_handlers, load_web_config, serve

if TYPE_CHECKING:
    from ..simulator import NodeSpec
    from ..simulator.run import SimulateOptions

log = logging.getLogger(__name__)


def load_profile(name: str) -> NodeSpec:
    """A simulator profile by bundled name or path."""
    from ..simulator import ProfileError, load_profile as load
    try:
        return load(name)
    except ProfileError as error:
        raise UsageError(f"--profile: {error}") from None


async def demo(settings: Settings, address: tuple[str, int], profile: str,
               churn_interval: float | None, control_address: tuple[str, int] | None,
               web_config_file: str | None, numa_page: bool = True) -> int:
    """Serve /metrics from the built-in simulator running ``profile``, until SIGTERM/SIGINT."""
    from ..simulator.run import demo_kubelet

    spec = load_profile(profile)
    async with demo_kubelet(spec, control_address, churn_interval) as kubelet_sim:
        # pods from the simulated kubelet's Pods API; the Node's allocatable derived from sysfs
        # and the kubelet config file (no Kubernetes API server: no ResourceSlices either)
        settings = dataclasses.replace(
            settings, socket=str(kubelet_sim.socket_path),
            sysfs_root=str(kubelet_sim.sysfs_root), node_name=spec.name, kube_api=False,
            pods_api=True, pods_api_socket=str(kubelet_sim.pods_api_socket),
            fit_shapes=settings.fit_shapes or str(kubelet_sim.fit_shapes),
            kubelet_config=settings.kubelet_config or str(kubelet_sim.kubelet_config))

        def announce(port: int, refresher: Refresher) -> None:
            log.info("demo: simulated node %s (%s profile) -> %s", spec.name, profile,
                     demo_url(address[0], port))
            if numa_page:
                log.info("demo: see the node's NUMA map in a browser: %s",
                         demo_url(address[0], port, "/numa").split(" (", 1)[0])
            snapshot = (f"{PROG} snapshot --socket {shlex.quote(str(kubelet_sim.socket_path))} "
                        f"--sysfs-root {shlex.quote(str(kubelet_sim.sysfs_root))}")
            log.info("demo: read it once with: %s", snapshot)
            log.info("demo: the kubelet's Pods API at %s; explain a pod the kubelet rejected "
                     "with: %s --pods-api-socket %s --kubelet-config %s --why NAMESPACE/POD",
                     kubelet_sim.pods_api_socket, snapshot,
                     shlex.quote(str(kubelet_sim.pods_api_socket)),
                     shlex.quote(str(kubelet_sim.kubelet_config)))
            log.info("demo: where one more pod of a shape would be admitted, and why: %s "
                     "--kubelet-config %s --fit-shapes %s --shape vf-pair (or a spec such as "
                     "'cpu=4,memory=8Gi')", snapshot, shlex.quote(str(kubelet_sim.kubelet_config)),
                     shlex.quote(str(kubelet_sim.fit_shapes)))
            if control_address is not None and control_address[1]:
                log.info("demo: submit a pod as the kubelet would admit it: curl -s -XPOST "
                         "%s:%d/pods -d '{\"namespace\": \"demo\", \"name\": \"p\", "
                         "\"containers\": [{\"name\": \"c\", \"cpus\": 2, \"memory\": "
                         "\"1Gi\"}]}'", control_address[0] or "127.0.0.1", control_address[1])

        return await serve(settings, address, started=announce,
                           web_config=load_web_config(web_config_file),
                           numa_page=numa_page)


def demo_url(host: str, port: int, path: str = "/metrics") -> str:
    """Where the demo's ``path`` is, and who can reach it, as the listen host says."""
    if host in ("", "0.0.0.0", "::"):
        return (f"http://localhost:{port}{path} (listening on every interface: other machines "
                "can reach it too)")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}" + (" (this machine only)" if loopback else "")


async def simulate(options: SimulateOptions) -> int:
    """Run the simulator alone until SIGTERM/SIGINT."""
    from ..simulator.run import simulate as run_simulator

    spec = load_profile(options.profile)
    stop = asyncio.Event()
    install_signal_handlers(stop)
    await run_simulator(spec, options, stop)
    return 0
