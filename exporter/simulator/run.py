"""Running the simulator as a program: the ``simulate`` command, and the kubelet behind ``demo``.

Besides the gRPC endpoint, a running simulator may have an HTTP control endpoint (fault
switches, restarts, churn: :mod:`exporter.simulator.control`), replace pods on a timer, and
keep kubelet-like state files for the exporter's ``--watch-path``.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from .control import control_app
from .node.book import SimulatedNode
from .node.server import DEFAULT_REREGISTER_SECONDS, Simulator
from .node.sysfs import write_kubelet_config, write_sysfs
from .profile import NodeSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulateOptions:
    """What the ``simulate`` command runs: its flags, checked."""

    profile: str  # as given: a bundled profile's name or a path (for the log line)
    socket_path: str
    sysfs_root: str | None
    control_address: tuple[str, int] | None
    churn_interval: float | None
    churn_pods: int
    state_dir: str | None
    seed: int | None
    qps: float
    burst: int
    reregister_seconds: float = DEFAULT_REREGISTER_SECONDS
    pods_api_socket: str | None = None  # serve the Pods API there too


async def simulate(spec: NodeSpec, options: SimulateOptions, stop: asyncio.Event) -> None:
    """Serve the simulated kubelet until ``stop`` is set."""
    if options.sysfs_root:
        write_sysfs(spec, options.sysfs_root)
    simulator = Simulator(SimulatedNode(spec, seed=options.seed), options.socket_path,
                          qps=options.qps, burst=options.burst,
                          reregister_seconds=options.reregister_seconds,
                          pods_api_socket=options.pods_api_socket)
    await simulator.start()
    runner = await start_control(simulator, options.control_address)
    tasks = []
    if options.churn_interval:
        tasks.append(asyncio.create_task(
            churn(simulator, options.churn_interval, options.churn_pods)))
    if options.state_dir:
        tasks.append(asyncio.create_task(simulator.keep_state_files(options.state_dir)))
    log.info("simulating %s (%s): %d pods", spec.name, options.profile,
             len(simulator.state.pods))
    await stop.wait()
    for task in tasks:
        task.cancel()
    if runner is not None:
        await runner.cleanup()
    await simulator.stop()


# The demo's fit shapes. On the dual-socket-gpu node, as the kubelet placed its pods, NUMA node
# 0 has no free CPU and node 1 four; the pods request 60.3 of the Node's 62 CPUs, so
# dpdk-upf-small and inmem-cache, which fit node 1, are refused by the resource-fit predicate
# (OutOfcpu); gpu-infer finds no free GPU; vf-pair (Burstable) takes 12 of node 1's VFs.
# Filling the node through the control endpoint (POST /pods) moves them all.
DEMO_SHAPES = """\
shapes:
  dpdk-upf-small: {cpu: 2, memory: 2Gi, hugepages-1Gi: 4Gi, intel.com/sriov_netdevice: 2}
  gpu-infer: {cpu: 4, memory: 16Gi, nvidia.com/gpu: 1}
  inmem-cache: {cpu: 2, memory: 8Gi}
  vf-pair:
    qos: Burstable
    containers:
      - {name: rx, cpu: 500m, intel.com/sriov_netdevice: 6}
      - {name: tx, cpu: 500m, intel.com/sriov_netdevice: 6}
"""


@dataclass(frozen=True)
class DemoKubelet:
    """Where the demo's simulated kubelet serves podresources and its Pods API (its pods,
    rejected ones too), its fake sysfs tree, its configuration file (the one its admission
    follows, and from which with sysfs the exporter derives the Node's allocatable), and the
    demo's fit shapes."""

    socket_path: Path
    pods_api_socket: Path
    sysfs_root: Path
    kubelet_config: Path
    fit_shapes: Path
    state: SimulatedNode


@asynccontextmanager
async def demo_kubelet(spec: NodeSpec, control_address: tuple[str, int] | None,
                       churn_interval: float | None) -> AsyncIterator[DemoKubelet]:
    """A simulated kubelet in a temporary directory, removed afterwards, serving its Pods API
    beside podresources; one pod replaced every ``churn_interval`` seconds if set. The kubelet
    config file written there is what ``POST /pods`` admits under. No Kubernetes API server:
    the pods come from the Pods API, the Node's allocatable from sysfs and the config file."""
    workdir = Path(tempfile.mkdtemp(prefix="podresources-demo-"))
    try:
        sysfs = write_sysfs(spec, workdir / "sys")
        config = write_kubelet_config(spec, workdir / "config.yaml")
        shapes = workdir / "fit-shapes.yaml"
        shapes.write_text(DEMO_SHAPES)
        state = SimulatedNode(spec)
        simulator = Simulator(state, workdir / "pod-resources" / "kubelet.sock",
                              pods_api_socket=workdir / "pods-api" / "pods-api.sock")
        await simulator.start()
        tasks = []
        control = await start_control(simulator, control_address)
        if churn_interval:
            tasks.append(asyncio.create_task(churn(simulator, churn_interval, 1)))
        try:
            assert simulator.pods_api is not None
            yield DemoKubelet(simulator.socket_path, simulator.pods_api.socket_path, sysfs,
                              config, shapes, state)
        finally:
            for task in tasks:
                task.cancel()
            if control is not None:
                await control.cleanup()
            await simulator.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def churn(simulator: Simulator, interval: float, pods: int) -> None:
    """Replace ``pods`` pods every ``interval`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        gone, added = simulator.churn(pods)
        log.debug("churn: removed %s, added %s", gone, added)


async def start_control(simulator: Simulator,
                        address: tuple[str, int] | None) -> web.AppRunner | None:
    """The simulator's HTTP control endpoint (fault switches, restarts, churn), if asked for."""
    if address is None:
        return None
    runner = web.AppRunner(control_app(simulator), access_log=None)
    await runner.setup()
    host, port = address
    await web.TCPSite(runner, host or "127.0.0.1", port).start()
    log.info("simulator control endpoint on http://%s:%d/state (POST /faults, /restart, "
             "/churn, /health, /pods, /config)", host or "127.0.0.1", runner.addresses[0][1])
    return runner
