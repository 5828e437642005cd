"""The wiring: what each command builds from its settings, how it runs and how it stops.

``serve`` builds the refresh loop and the HTTP server and runs them until SIGTERM or SIGINT;
``snapshot`` reads the kubelet once; ``demo`` serves from the built-in simulator; ``simulate``
runs the simulator alone. Anything that keeps them from starting as configured is a
:class:`UsageError` (exit status 2, one line).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import ipaddress
import logging
import shlex
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..exposition.health import Health
from ..kubelet import client as kubelet
from ..kubelet.client import KubeletError
from ..model import DeviceEntry, KubeletSnapshot, MemoryBlock, Topology
from ..refresh.loop import Refresher, Settings
from ..topology import TopologyError, format_cpulist, read_topology
from ..web.server import make_app, start_http

if TYPE_CHECKING:
    from ..fit.section import FitView
    from ..kubeapi.view import KubeView
    from ..simulator import NodeSpec
    from ..simulator.run import SimulateOptions
    from ..web.webconfig import WebConfig

log = logging.getLogger(__name__)

PROG = "podresources-exporter"
SHUTDOWN_SECONDS = 5.0


class UsageError(Exception):
    """A bad flag, environment value or file: the command cannot start (exit status 2)."""


def load_web_config(path: str | None) -> WebConfig | None:
    """The ``--web-config-file`` settings, checked before anything starts."""
    if not path:
        return None
    from ..web import webconfig  # TLS and bcrypt only for those who configure them
    try:
        return webconfig.load(path)
    except webconfig.WebConfigError as error:
        raise UsageError(f"--web-config-file: {error}") from None


def _topology(sysfs_root: str) -> Topology:
    try:
        return read_topology(sysfs_root)
    except TopologyError as error:
        raise UsageError(f"--sysfs-root: {error}") from None


def build_refresher(settings: Settings, topology: Topology | None = None) -> Refresher:
    """The refresh loop, with the Kubernetes-API view if asked for; both report into one
    :class:`Health`."""
    health = Health(settings.node_name)
    view = build_kube_view(settings, health) if settings.kube_api else None
    refresher = Refresher(settings, health, topology=topology, kube_view=view)
    refresher.fit = build_fit(settings, health, view)
    return refresher


def build_fit(settings: Settings, health: Health, view: KubeView | None) -> FitView:
    """The fit answers: shapes, the kubelet's configuration, rejections from the view."""
    from ..fit.section import FitSetupError, build_fit_view
    try:
        return build_fit_view(settings.fit_shapes, settings.kubelet_config,
                              settings.full_pcpus_only, health.registry,
                              view.rejections if view is not None else None,
                              settings.topology_manager_policy,
                              settings.topology_manager_scope)
    except FitSetupError as error:
        raise UsageError(str(error)) from None


def build_kube_view(settings: Settings, health: Health) -> KubeView:
    """The Kubernetes-API view of ``settings.node_name``, its API configuration loaded."""
    if not settings.node_name:
        raise UsageError("--kube-api needs the node name: set --node-name or NODE_NAME")
    from ..kubeapi.view import KubeView, ViewError
    try:
        return KubeView(settings.node_name, health)
    except ViewError as error:
        raise UsageError(f"--kube-api: {error}") from None


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (where this thread may handle signals)."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, stop.set)


async def serve(settings: Settings, address: tuple[str, int],
                stop: asyncio.Event | None = None,
                started: Callable[[int, Refresher], None] | None = None,
                web_config: WebConfig | None = None) -> int:
    """Run the exporter until SIGTERM/SIGINT (or ``stop``); returns the exit status."""
    topology = _topology(settings.sysfs_root)
    if settings.watch_path and not Path(settings.watch_path).exists():
        raise UsageError(f"--watch-path: {settings.watch_path} does not exist")
    stop = stop or asyncio.Event()
    refresher = build_refresher(settings, topology)
    install_signal_handlers(stop)
    host, port = address
    try:
        runner, bound = await start_http(
            make_app(refresher, web_config.middlewares() if web_config else ()), host, port,
            web_config.ssl_context() if web_config else None)
    except OSError as error:
        await refresher.client.close()
        if isinstance(error, socket.gaierror):  # a name that resolves to nothing: bad value
            raise UsageError(f"--listen-address: cannot resolve {host!r}: "
                             f"{error.strerror or error}") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--listen-address: {host} is not an address of this machine") \
                from None
        log.error("cannot listen on %s:%d: %s", host or "*", port, error.strerror or error)
        return 1
    log.info("podresources-exporter %s listening on %s:%d; kubelet socket %s; %d NUMA nodes",
             __version__, host or "*", bound, refresher.client.target,
             len(topology.numa_nodes))
    if web_config is not None:
        log.info("web config %s: %s, basic auth %s", web_config.path,
                 "HTTPS" if web_config.tls else "plain HTTP",
                 f"for {len(web_config.users)} users" if web_config.users else "off")
    if started is not None:
        started(bound, refresher)
    loop_task = asyncio.create_task(refresher.run())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([loop_task, stopper], return_when=asyncio.FIRST_COMPLETED)
    log.info("shutting down")
    refresher.stop()
    try:
        await asyncio.wait_for(asyncio.gather(loop_task, return_exceptions=True),
                               timeout=SHUTDOWN_SECONDS / 2)
    except TimeoutError:
        loop_task.cancel()
    stopper.cancel()
    await refresher.client.close()
    await runner.cleanup()
    if loop_task.done() and not loop_task.cancelled() and loop_task.exception():
        log.error("refresh loop failed: %r", loop_task.exception())
        return 1
    return 0


async def snapshot(settings: Settings, output_format: str, log_level: str,
                   shape: str | None = None, why: str | None = None,
                   sysfs_given: bool = True) -> int:
    """Read the kubelet once and print the per-NUMA picture (``table`` or ``json``); with
    ``shape`` or ``why``, the fit answer instead (:mod:`exporter.fit.explain`).

    A failed call is reported in one line and exits 1: there is no retry and no earlier
    snapshot here, so the refresh loop's own messages (which say both) are kept out.
    ``sysfs_given``: whether ``--sysfs-root`` was chosen, not defaulted (see
    :func:`_foreign_kubelet`).
    """
    from .report import format_json, format_table

    question = _fit_question(shape, why)
    topology = _topology(settings.sysfs_root)
    if log_level == "info":
        logging.getLogger().setLevel(logging.WARNING)  # the report is the output
    refresher = build_refresher(settings, topology)
    refresh_log = logging.getLogger("exporter.refresh.loop")
    saved = refresh_log.level
    if log_level != "debug":
        refresh_log.setLevel(logging.CRITICAL)  # its failure lines speak of retrying
    try:
        await refresher.refresh_once()
    finally:
        refresh_log.setLevel(saved)
        await refresher.client.close()
    if refresher.accounting is None or refresher.snapshot is None:
        reason = _one_shot_failure(refresher.last_error, settings, refresher.client.target)
        print(f"{PROG}: {reason}", file=sys.stderr)
        return 1
    foreign = _foreign_kubelet(refresher.snapshot, refresher.topology)
    if foreign:
        where = (f"the kubelet at {refresher.client.target} reports {foreign} that "
                 f"{settings.sysfs_root} does not have")
        if not sysfs_given:
            raise UsageError(
                f"--sysfs-root: {where}, so the two are not the same machine (a simulated "
                "kubelet's socket?); give the --sysfs-root that goes with the socket (the demo "
                "prints the whole snapshot command)")
        print(f"{PROG}: warning: {where}; they are counted under NUMA node \"unknown\" and as "
              "data issues below", file=sys.stderr)
    if question is not None:
        return await _answer(question, refresher, output_format)
    formatter = format_json if output_format == "json" else format_table
    sys.stdout.write(formatter(refresher.accounting, refresher.topology,
                               refresher.status.capabilities, settings.node_name,
                               pods=refresher.snapshot.pods))
    if output_format != "json" and refresher.fit is not None and refresher.fit.state is not None:
        from ..fit.explain import free_table, shapes_summary
        sys.stdout.write("\n" + free_table(refresher.fit.state))
        if refresher.fit.answers:
            sys.stdout.write("\n" + shapes_summary(refresher.fit.answers))
    return 0


def _fit_question(shape: str | None, why: str | None) -> object:
    """``--shape`` as a Shape, ``--why`` as (namespace, pod), checked before the kubelet is
    read; None for neither."""
    if shape and why:
        raise UsageError("--shape and --why are two questions: ask one at a time")
    if shape:
        from ..fit.shapes import ShapeError, ShapeName, parse_shape_argument
        if "=" not in shape:
            return ShapeName(shape.strip())  # a shape of --fit-shapes, looked up later
        try:
            return parse_shape_argument(shape, "request")
        except ShapeError as error:
            raise UsageError(f"--shape: {error}") from None
    if why:
        from ..fit.explain import parse_pod_name
        try:
            return parse_pod_name(why)
        except ValueError as error:
            raise UsageError(f"--why: {error}") from None
    return None


async def _answer(question: object, refresher: Refresher, output_format: str) -> int:
    from ..fit.explain import ExplainError, read_pod, shape_report, why_report
    from ..fit.pod import PodShape
    from ..fit.shapes import ShapeName

    fit = refresher.fit
    if fit is None or fit.state is None or fit.config is None:
        print(f"{PROG}: the kubelet does not report allocatable resources (GetAllocatableResources "
              "unavailable, or API v1alpha1): nothing can be said about fit", file=sys.stderr)
        return 1
    if isinstance(question, ShapeName):
        named = {shape.name: shape for shape in fit.current_shapes()}
        if question not in named:
            known = ", ".join(sorted(named)) or "none (no --fit-shapes)"
            raise UsageError(f"--shape: no shape named {question!r} in --fit-shapes (known: "
                             f"{known}); or give RESOURCE=QUANTITY,...")
        question = named[question]
    if isinstance(question, PodShape):
        sys.stdout.write(shape_report(question, fit.state, fit.config, output_format))
        return 0
    assert isinstance(question, tuple)
    try:
        pod = await read_pod(*question)
    except ExplainError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(why_report(pod, fit.state, fit.config, output_format))
    return 0


def _one_shot_failure(error: KubeletError | None, settings: Settings, target: str) -> str:
    """Why a single read of the kubelet failed, in one line."""
    if error is None:
        return f"cannot read the kubelet at {target}"
    details = " ".join(error.details.split())
    if error.kind == kubelet.UNAVAILABLE:
        return f"cannot read the kubelet at {target}: {error.code} {details} (check --socket)"
    if error.kind == kubelet.TOO_LARGE:
        return (f"the kubelet's reply to {error.method} is larger than --max-message-bytes "
                f"({settings.max_message_bytes}): {details}")
    if error.kind == kubelet.RATE_LIMITED:
        return (f"the kubelet at {target} refused {error.method}: rate limited (the quota is "
                "shared by every client on the node); try again in a few seconds")
    if error.kind == kubelet.DEADLINE:
        return (f"the kubelet at {target} did not answer {error.method} within "
                f"{settings.timeout:g} s (--timeout)")
    if error.kind == kubelet.INVALID_REPLY:
        return f"the kubelet at {target} sent a reply to {error.method} that is not valid " \
               f"protobuf: {details}"
    return f"cannot read the kubelet at {target}: {error.method} failed: {error.code} {details}"


def _foreign_kubelet(snapshot: KubeletSnapshot, topology: Topology) -> str:
    """What the kubelet reports that the sysfs tree does not have ("" when nothing).

    A kubelet reports only CPUs and NUMA nodes of its own machine; a socket whose kubelet names
    others belongs to another machine, usually a simulator's, whose sysfs tree is elsewhere.
    """
    cpus: set[int] = set()
    numa_ids: set[int] = set()
    located: list[MemoryBlock | DeviceEntry] = []
    if snapshot.allocatable is not None:
        cpus.update(snapshot.allocatable.cpu_ids)
        located += [*snapshot.allocatable.memory, *snapshot.allocatable.devices]
    for pod in snapshot.pods:
        cpus.update(pod.cpu_ids)
        for container in pod.containers:
            cpus.update(container.cpu_ids)
            located += [*container.memory, *container.devices]
    for item in located:
        numa_ids.update(item.numa_ids or ())
    unknown_cpus = cpus - topology.cpu_to_numa.keys()
    unknown_numa = {n for n in numa_ids if n >= 0} - topology.numa_nodes.keys()
    parts = []
    if unknown_cpus:
        cpulist = format_cpulist(frozenset(unknown_cpus))
        if len(cpulist) > 60:  # a hostile reply may name thousands: the line stays short
            cpulist = f"{cpulist[:60].rsplit(',', 1)[0]},... ({len(unknown_cpus)} in all)"
        parts.append(f"CPUs {cpulist}")
    if unknown_numa:
        shown = sorted(unknown_numa)[:8]
        more = f" and {len(unknown_numa) - 8} more" if len(unknown_numa) > 8 else ""
        parts.append(f"NUMA node{'s' if len(unknown_numa) > 1 else ''} "
                     f"{', '.join(str(n) for n in shown)}{more}")
    return " and ".join(parts)


def load_profile(name: str) -> NodeSpec:
    """A simulator profile by bundled name or path."""
    from ..simulator import ProfileError, load_profile as load
    try:
        return load(name)
    except ProfileError as error:
        raise UsageError(f"--profile: {error}") from None


async def demo(settings: Settings, address: tuple[str, int], profile: str,
               churn_interval: float | None, control_address: tuple[str, int] | None,
               web_config_file: str | None) -> int:
    """Serve /metrics from the built-in simulator running ``profile``, until SIGTERM/SIGINT."""
    from ..simulator.run import demo_kubelet

    spec = load_profile(profile)
    async with demo_kubelet(spec, control_address, churn_interval) as kubelet_sim:
        settings = dataclasses.replace(
            settings, socket=str(kubelet_sim.socket_path),
            sysfs_root=str(kubelet_sim.sysfs_root), node_name=settings.node_name or spec.name,
            fit_shapes=settings.fit_shapes or str(kubelet_sim.fit_shapes),
            kubelet_config=settings.kubelet_config or str(kubelet_sim.kubelet_config))

        def announce(port: int, refresher: Refresher) -> None:
            if refresher.fit is not None and refresher.fit.rejections is None:
                # no Kubernetes API in the demo: the simulator's rejected pods stand in for it
                refresher.fit.rejections = kubelet_sim.rejections
            log.info("demo: simulated node %s (%s profile) -> %s", spec.name, profile,
                     demo_url(address[0], port))
            log.info("demo: read it once with: %s snapshot --socket %s --sysfs-root %s", PROG,
                     shlex.quote(str(kubelet_sim.socket_path)),
                     shlex.quote(str(kubelet_sim.sysfs_root)))

        return await serve(settings, address, started=announce,
                           web_config=load_web_config(web_config_file))


def demo_url(host: str, port: int) -> str:
    """Where the demo's /metrics is, and who can reach it, as the listen host says."""
    if host in ("", "0.0.0.0", "::"):
        return (f"http://localhost:{port}/metrics (listening on every interface: other machines "
                "can reach it too)")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics" + (" (this machine only)" if loopback else "")


async def simulate(options: SimulateOptions) -> int:
    """Run the simulator alone until SIGTERM/SIGINT."""
    from ..simulator.run import simulate as run_simulator

    spec = load_profile(options.profile)
    stop = asyncio.Event()
    install_signal_handlers(stop)
    await run_simulator(spec, options, stop)
    return 0
