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
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .health import Health
from .model import Topology
from .refresh import Refresher, Settings
from .server import make_app, start_http
from .topology import TopologyError, read_topology

if TYPE_CHECKING:
    from .fitview import FitView
    from .kubeapi.view import KubeView
    from .simulator import NodeSpec
    from .simulator.run import SimulateOptions
    from .webconfig import WebConfig

log = logging.getLogger(__name__)

PROG = "podresources-exporter"
SHUTDOWN_SECONDS = 5.0


class UsageError(Exception):
    """A bad flag, environment value or file: the command cannot start (exit status 2)."""


def load_web_config(path: str | None) -> WebConfig | None:
    """The ``--web-config-file`` settings, checked before anything starts."""
    if not path:
        return None
    from . import webconfig  # TLS and bcrypt only for those who configure them
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
    from .fitview import FitSetupError, build_fit_view
    try:
        return build_fit_view(settings.fit_shapes, settings.kubelet_config,
                              settings.full_pcpus_only, health.registry,
                              view.rejections if view is not None else None)
    except FitSetupError as error:
        raise UsageError(str(error)) from None


def build_kube_view(settings: Settings, health: Health) -> KubeView:
    """The Kubernetes-API view of ``settings.node_name``, its API configuration loaded."""
    if not settings.node_name:
        raise UsageError("--kube-api needs the node name: set --node-name or NODE_NAME")
    from .kubeapi.view import KubeView, ViewError
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
                   shape: str | None = None, why: str | None = None) -> int:
    """Read the kubelet once and print the per-NUMA picture (``table`` or ``json``); with
    ``shape`` or ``why``, the fit answer instead (:mod:`exporter.explain`)."""
    from .report import format_json, format_table

    question = _fit_question(shape, why)
    topology = _topology(settings.sysfs_root)
    if log_level == "info":
        logging.getLogger().setLevel(logging.WARNING)  # the report is the output
    refresher = build_refresher(settings, topology)
    try:
        await refresher.refresh_once()
    finally:
        await refresher.client.close()
    if refresher.accounting is None:
        error = refresher.last_error
        print(f"{PROG}: cannot read the kubelet at {refresher.client.target}: "
              f"{error.code if error else ''} {error.details if error else ''}".rstrip(),
              file=sys.stderr)
        return 1
    if question is not None:
        return await _answer(question, refresher, output_format)
    formatter = format_json if output_format == "json" else format_table
    sys.stdout.write(formatter(refresher.accounting, refresher.topology,
                               refresher.health.capabilities, settings.node_name))
    if output_format != "json" and refresher.fit is not None and refresher.fit.free is not None:
        from .explain import free_table, shapes_summary
        sys.stdout.write("\n" + free_table(refresher.fit.free))
        if refresher.fit.fits:
            sys.stdout.write("\n" + shapes_summary(refresher.fit.fits))
    return 0


def _fit_question(shape: str | None, why: str | None) -> object:
    """``--shape`` as a Shape, ``--why`` as (namespace, pod), checked before the kubelet is
    read; None for neither."""
    if shape and why:
        raise UsageError("--shape and --why are two questions: ask one at a time")
    if shape:
        from .shapes import ShapeError, parse_shape_argument
        try:
            return parse_shape_argument(shape, "request")
        except ShapeError as error:
            raise UsageError(f"--shape: {error}") from None
    if why:
        from .explain import parse_pod_name
        try:
            return parse_pod_name(why)
        except ValueError as error:
            raise UsageError(f"--why: {error}") from None
    return None


async def _answer(question: object, refresher: Refresher, output_format: str) -> int:
    from .explain import ExplainError, read_pod, shape_report, why_report
    from .fit import Shape

    free = refresher.fit.free if refresher.fit is not None else None
    if free is None:
        print(f"{PROG}: the kubelet does not report allocatable resources (GetAllocatableResources "
              "unavailable, or API v1alpha1): nothing can be said about fit", file=sys.stderr)
        return 1
    if isinstance(question, Shape):
        sys.stdout.write(shape_report(question, free, output_format))
        return 0
    assert isinstance(question, tuple)
    try:
        pod = await read_pod(*question)
    except ExplainError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(why_report(pod, free, output_format))
    return 0


def load_profile(name: str) -> NodeSpec:
    """A simulator profile by bundled name or path."""
    from .simulator import ProfileError
    from .simulator import load_profile as load
    try:
        return load(name)
    except ProfileError as error:
        raise UsageError(f"--profile: {error}") from None


async def demo(settings: Settings, address: tuple[str, int], profile: str,
               churn_interval: float | None, control_address: tuple[str, int] | None,
               web_config_file: str | None) -> int:
    """Serve /metrics from the built-in simulator running ``profile``, until SIGTERM/SIGINT."""
    from .simulator.run import demo_kubelet

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
            log.info("demo: simulated node %s (%s profile) -> http://localhost:%d/metrics",
                     spec.name, profile, port)

        return await serve(settings, address, started=announce,
                           web_config=load_web_config(web_config_file))


async def simulate(options: SimulateOptions) -> int:
    """Run the simulator alone until SIGTERM/SIGINT."""
    from .simulator.run import simulate as run_simulator

    spec = load_profile(options.profile)
    stop = asyncio.Event()
    install_signal_handlers(stop)
    await run_simulator(spec, options, stop)
    return 0
