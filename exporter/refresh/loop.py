"""The refresh loop: read the kubelet, account, render; never on the scrape path.

One task calls the kubelet (:class:`~exporter.kubelet.reader.KubeletReader` decides which calls),
so there is never more than one call in flight. A refresh runs every ``--interval``, or sooner
when the kubelet's state files change (:mod:`exporter.refresh.watch`). Failures back off
exponentially with full jitter (floored at the base delay, so never a tight loop); the rate
limit may push the delay to a minute, other errors never beyond ``--interval``. The last good
snapshot stays exported meanwhile, and ``podresources_up`` says it is stale.

Logging is by state change only: kubelet lost and back, back-off started and ended, capability
changes, a data issue kind appearing (a kind that comes and goes is logged again only after an
hour without it). A failing poll never logs by itself.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from ..accounting import DEFAULT_CPU_DRIVERS, Accounting, CpuRequestSource
from ..exposition.bodies import Body, Section
from ..exposition.health import Health
from ..exposition.rendering import RenderOptions
from ..exposition.sections import Sections
from ..kubelet import client as kubelet
from ..kubelet.client import KubeletClient, KubeletError
from ..kubelet.decode import Replies
from ..kubelet.reader import KubeletReader
from ..kubelet.status import Capability
from ..model import (
    DraInventory,
    KubeletSnapshot,
    PodAssignment,
    Topology,
)
from ..topology import RereadTopology, read_topology
from .issuelog import IssueLog
from .outcome import Outcome
from .pipeline import Pipeline, Result
from .settings import Settings
from .watch import StateFileWatcher
from .worker import Worker

if TYPE_CHECKING:
    from ..fit.fitview import FitView
    from ..kubeapi.view import KubeView
    from ..nodemap.build import MapInputs
    from ..podsapi.sources import PodSources

log = logging.getLogger(__name__)


class Refresher:
    """Runs refreshes until stopped, and keeps their outcome: the last good snapshot and
    accounting, the kubelet's state (``status``) and the /metrics sections (``sections``).

    ``kube_view``, the Kubernetes-API view (``--kube-api``), ``pod_sources``, where the pods'
    context comes from (the kubelet's Pods API, else the view), and ``fit``, the fit answers,
    are built by the caller around the same ``health``; the loop runs the view's and the Pods
    API's tasks, filters terminated pods through the pod context and has the sections
    rendered.
    """

    def __init__(self, settings: Settings, health: Health | None = None,
                 client: KubeletClient | None = None, topology: Topology | None = None,
                 rng: random.Random | None = None, kube_view: KubeView | None = None,
                 fit: FitView | None = None, pod_sources: PodSources | None = None):
        self.settings = settings
        self.rng = rng or random.Random()
        self.health = health or Health(settings.node_name)
        self.client = client or KubeletClient(settings.socket, settings.max_message_bytes,
                                              settings.timeout, observer=self.health.observe_call)
        self.reader = KubeletReader(self.client, settings.socket, settings.interval,
                                    settings.allocatable_interval, log)
        self.status = self.reader.status  # the health section renders it
        self.topology = topology if topology is not None else read_topology(settings.sysfs_root)
        self.kube_view = kube_view
        self.pod_sources = pod_sources
        self.fit = fit
        self.watcher = StateFileWatcher(settings.watch_path, settings.max_refresh_rate)
        self.sections = Sections(self.health, self.status, kube_view, fit,
                                 lambda: self.reader.allocatable,
                                 pod_sources.labels if pod_sources is not None else None)
        self.core = RefreshCore(settings.render, settings.dra_cpu_drivers)
        self.snapshot: KubeletSnapshot | None = None  # as of the last successful refresh
        self.accounting: Accounting | None = None
        self.dra_inventory: DraInventory | None = None  # the view's, as of that refresh
        self.attempted = False
        self.worker = Worker()  # the heavy part of a refresh, and the node map's drawing
        self._sysfs = RereadTopology(settings.sysfs_root, settings.allocatable_interval,
                                     self.topology)
        self.outcome = Outcome(self.status, self.health, self.client, settings.interval,
                               settings.max_message_bytes, settings.timeout, log)
        self._issue_log = IssueLog(log)
        self._last_started = float("-inf")
        self._stop = asyncio.Event()

    async def run(self) -> None:
        """Refresh until :meth:`stop`; file changes under ``--watch-path`` wake it early."""
        watcher = asyncio.create_task(self.watcher.run()) if self.watcher.path else None
        if self.kube_view is not None:
            self.kube_view.start()
        if self.pod_sources is not None:
            self.pod_sources.start()
        try:
            while not self._stop.is_set():
                refresh = asyncio.ensure_future(self.refresh_once())
                stopping = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait((refresh, stopping), return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if not refresh.done():  # stopped during a refresh: leave the worker be
                    refresh.cancel()
                    await asyncio.gather(refresh, return_exceptions=True)
                    break
                await self._wait(refresh.result())
        finally:
            if self.kube_view is not None:
                self.kube_view.stop()
            if self.pod_sources is not None:
                self.pod_sources.stop()
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            if self.kube_view is not None:
                await self.kube_view.join()
            if self.pod_sources is not None:
                await self.pod_sources.join()

    def stop(self) -> None:
        self._stop.set()

    async def refresh_once(self) -> float:
        """One refresh attempt; returns the delay before the next one. The CPU-heavy part
        (decoding, accounting, rendering, deflating a changed data section) runs in the worker
        thread, in one job, so the event loop keeps serving scrapes meanwhile."""
        started = time.perf_counter()
        self._last_started = time.monotonic()
        data: Section | None = None
        try:
            self.topology = self._sysfs.current()
            files = self.fit.state_files if self.fit is not None else None
            if files is not None:  # --watch-path: the device checkpoint's healthy devices
                self.reader.notice_healthy_devices(files.current().registered)
            replies = await self.reader.read()
            terminated: frozenset[Hashable] = frozenset()
            dra = requests = None
            sources = self.pod_sources
            if sources is not None:  # the view's and the Pods API's state is the loop's
                sources.choose()
                terminated = sources.terminated()
                requests = sources.cpu_requests()
            if self.kube_view is not None:
                dra = self.kube_view.dra_inventory()
            result, data = await self.worker.run(self.core.account, replies, self.topology,
                                                  terminated, dra, requests)
            if self.reader.noted(result.snapshot.pods, result.snapshot.allocatable):
                replies = await self.reader.read_allocatable(replies)  # a new device plugin
                result, again = await self.worker.run(self.core.account, replies,
                                                      self.topology, terminated, dra, requests)
                data = again if again is not None else data
                self.reader.noted(result.snapshot.pods, result.snapshot.allocatable)
            self._publish(result)
            self.dra_inventory = dra
            delay = self.outcome.succeeded()
        except KubeletError as error:
            delay = self._failed(error)
        except Exception as error:  # a bug must not stop the loop or hide behind stale data
            if self.outcome.state != kubelet.ErrorKind.INTERNAL_ERROR:
                log.exception("refresh failed unexpectedly; serving the last good snapshot")
            delay = self._failed(KubeletError("refresh", "INTERNAL", repr(error),
                                              kubelet.ErrorKind.INTERNAL_ERROR), logged=True)
        self.health.refresh_duration.observe(time.perf_counter() - started)
        # the sections as of this attempt (not reached when the refresh was cancelled); the
        # health section is rendered when a scrape asks for it
        fit = self.sections.fit_section(self.snapshot, self.topology, self.accounting)
        self.sections.update(data, fit)
        self.attempted = True
        return delay

    async def _wait(self, delay: float) -> None:
        deadline = time.monotonic() + delay
        changed = self.watcher.changed
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            waiters = [asyncio.ensure_future(self._stop.wait())]
            if self.status.backoff_seconds == 0:  # events never cut a back-off short
                waiters.append(asyncio.ensure_future(changed.wait()))
            _, pending = await asyncio.wait(waiters, timeout=remaining,
                                            return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            if self._stop.is_set():
                return
            if changed.is_set():
                await self.watcher.settle(self._last_started, self._stop, deadline)
                return

    # ---- outcomes ------------------------------------------------------------------------

    def _publish(self, result: Result) -> None:
        self.snapshot = result.snapshot
        self.accounting = result.accounting
        if result.accounting.pod_level_seen:
            self.reader.set_capabilities(pod_level=Capability.TRUE)
        issues, examples = result.issues, result.examples
        self.health.count_issues(dict(issues))
        self._issue_log.note({kind: count for kind, count in issues.items() if count}, examples)

    def _failed(self, error: KubeletError, logged: bool = False) -> float:
        if error.kind == kubelet.ErrorKind.UNAVAILABLE:
            self.reader.kubelet_changed()
        return self.outcome.failed(error, self.rng, logged)

    @property
    def last_error(self) -> KubeletError | None:
        return self.outcome.last_error

    # ---- what the HTTP side serves (web.server.MetricsSource) ----------------------------

    def metrics_body(self, openmetrics: bool, compressed: bool) -> Body:
        return self.sections.metrics_body(openmetrics, compressed)

    def body(self, openmetrics: bool, compressed: bool = False) -> bytes:
        return self.sections.body(openmetrics, compressed)

    @property
    def ready(self) -> bool:
        """Whether the first refresh has been attempted."""
        return self.attempted

    def landing_info(self) -> tuple[str, str]:
        """The kubelet socket and the node name, for the landing page."""
        return self.client.target, self.settings.node_name

    def map_inputs(self) -> MapInputs | None:
        """What the last successful refresh has for the node map (``/numa``,
        :class:`~exporter.nodemap.pagecache.PageCache`; ``snapshot --format svg``); None before
        one."""
        if self.snapshot is None or self.accounting is None:
            return None
        from ..nodemap.build import MapInputs  # only for those who look at the map
        return MapInputs(self.snapshot, self.accounting, self.topology, self.settings.node_name,
                         self.status.last_success or None, bool(self.status.up),
                         self.dra_inventory, self.fit.answers if self.fit is not None else ())


class RefreshCore:
    """The synchronous, CPU-heavy part of a refresh, run in the worker thread: the
    :class:`~exporter.refresh.pipeline.Pipeline` (decode, filter, ledger, render, with their caches)
    and the deflating of a changed data section. Only one call runs at a time."""

    def __init__(self, options: RenderOptions,
                 cpu_drivers: frozenset[str] = DEFAULT_CPU_DRIVERS):
        self.pipeline = Pipeline(options, cpu_drivers)
        self._published: Accounting | None = None

    def account(self, replies: Replies, topology: Topology,
                terminated: frozenset[Hashable] = frozenset(),
                dra: DraInventory | None = None,
                requests: CpuRequestSource | None = None) -> tuple[Result, Section | None]:
        """One refresh through the pipeline (decoding the replies too), and the data section,
        None when it did not change (the ledger returns the same object for an unchanged
        snapshot). ``terminated``: (namespace, name) of listed pods that have ended, as the
        Kubernetes-API view or the Pods API says, left out; ``dra``: the DRA devices the
        node's ResourceSlices publish (None without the view); ``requests``: the pods' CPU
        requests from the pod context (None without one)."""
        keep = None
        if terminated:
            def keep(pods: tuple[PodAssignment, ...]) -> tuple[PodAssignment, ...]:
                return tuple(p for p in pods if (p.namespace, p.name) not in terminated)
        result = self.pipeline.run(replies, topology, keep, dra, requests)
        if result.accounting is self._published:
            return result, None
        self._published = result.accounting
        return result, Section.of(result.section)
