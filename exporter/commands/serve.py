"""The ``serve`` command: the refresh loop and the HTTP server, run until SIGTERM or SIGINT.

The ``build_*`` functions are shared with ``snapshot`` and ``demo``. Anything that keeps a
command from starting as configured is a :class:`UsageError` (exit status 2, one line).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..exposition.health import Health
from ..model import Topology
from ..nodemap.pagecache import PageCache
from ..refresh.loop import Refresher
from ..refresh.settings import Settings
from ..topology import TopologyError, read_topology
from ..web.server import make_app, start_http

if TYPE_CHECKING:
    from ..fit.fitview import FitView, PodContextSource, Rejections
    from ..kubeapi.view import KubeView
    from ..podsapi.sources import PodSources
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


def read_sysfs_topology(sysfs_root: str) -> Topology:
    try:
        return read_topology(sysfs_root)
    except TopologyError as error:
        raise UsageError(f"--sysfs-root: {error}") from None


def build_refresher(settings: Settings, topology: Topology | None = None,
                    kube_environ: Mapping[str, str] | None = None) -> Refresher:
    """The refresh loop, with the Kubernetes-API view if asked for, the pod context (the
    kubelet's Pods API, else the view) and the fit answers; all report into one
    :class:`Health`. ``kube_environ``: the environment the view finds its API configuration in
    (``$KUBECONFIG``; the process environment when None)."""
    health = Health(settings.node_name)
    view = build_kube_view(settings, health, kube_environ) if settings.kube_api else None
    sources = build_pod_sources(settings, view)
    fit = build_fit(settings, health, sources.rejections if sources is not None else None,
                    sources.node_context if sources is not None else None)
    return Refresher(settings, health, topology=topology, kube_view=view, fit=fit,
                     pod_sources=sources)


def build_pod_sources(settings: Settings, view: KubeView | None) -> PodSources | None:
    """Where pod context comes from: the kubelet's Pods API (unless ``--no-pods-api``), else
    the view; None when neither may be used."""
    if not settings.pods_api and view is None:
        return None
    from ..podsapi.source import PodsApi
    from ..podsapi.sources import PodSources
    pods_api = None
    if settings.pods_api:
        pods_api = PodsApi(settings.pods_api_socket, settings.max_message_bytes,
                           check_interval=settings.interval, timeout=settings.timeout)
    return PodSources(pods_api, view)


def build_fit(settings: Settings, health: Health, rejections: Rejections | None,
              pod_context: PodContextSource | None = None) -> FitView:
    """The fit answers: shapes, the kubelet's configuration, rejections and pod context (from
    the kubelet's Pods API or the view), the kubelet's state files (under ``--watch-path``)."""
    from ..fit.fitview import FitSetupError, build_fit_view
    try:
        return build_fit_view(settings.fit_shapes, settings.kubelet_config,
                              settings.full_pcpus_only, health.count_admission_failure,
                              rejections,
                              settings.topology_manager_policy,
                              settings.topology_manager_scope, settings.watch_path,
                              pod_context)
    except FitSetupError as error:
        raise UsageError(str(error)) from None


def build_kube_view(settings: Settings, health: Health,
                    environ: Mapping[str, str] | None = None) -> KubeView:
    """The Kubernetes-API view of ``settings.node_name``, its API configuration loaded (from
    ``environ``, the process environment when None)."""
    if not settings.node_name:
        raise UsageError("--kube-api needs the node name: set --node-name or NODE_NAME")
    from ..kubeapi.view import KubeView, ViewError
    try:
        return KubeView(settings.node_name, health, environ, sysfs_root=settings.sysfs_root)
    except ViewError as error:
        raise UsageError(f"--kube-api: {error}") from None


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (where this thread may handle signals)."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, stop.set)


def numa_page_of(refresher: Refresher) -> PageCache:
    """``/numa``: the node map of ``refresher``'s last refresh, drawn in its worker thread."""
    return PageCache(refresher.map_inputs, refresher.worker.run, refresher.settings.interval)


async def serve(settings: Settings, address: tuple[str, int],
                stop: asyncio.Event | None = None,
                started: Callable[[int, Refresher], None] | None = None,
                web_config: WebConfig | None = None,
                kube_environ: Mapping[str, str] | None = None, numa_page: bool = True) -> int:
    """Run the exporter until SIGTERM/SIGINT (or ``stop``); returns the exit status.
    ``kube_environ`` as for :func:`build_refresher`; ``numa_page`` False
    (``--no-numa-page``) serves no ``/numa``."""
    topology = read_sysfs_topology(settings.sysfs_root)
    if settings.watch_path and not Path(settings.watch_path).exists():
        raise UsageError(f"--watch-path: {settings.watch_path} does not exist")
    stop = stop or asyncio.Event()
    refresher = build_refresher(settings, topology, kube_environ)
    install_signal_handlers(stop)
    host, port = address
    try:
        runner, bound = await start_http(
            make_app(refresher, web_config.middlewares() if web_config else (),
                     numa_page_of(refresher) if numa_page else None),
            host, port,
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
        log.info("web config %s: %s", web_config.path, web_config.summary())
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
