"""The refresh loop: read the kubelet, account, render; never on the scrape path.

One task calls the kubelet, so there is never more than one call in flight. ``List`` runs every
``--interval``; ``GetAllocatableResources`` every ``--allocatable-interval`` and whenever
``List`` names a device resource the allocatable view lacks. Failures back off exponentially
with full jitter (floored at the base delay, so never a tight loop); the rate limit may push the
delay to a minute, other errors never beyond ``--interval``. The last good snapshot stays
exported meanwhile, and ``podresources_up`` says it is stale.

Logging is by state change only: kubelet lost and back, back-off started and ended, capability
changes, a data issue kind appearing (a kind that comes and goes is logged again only after an
hour without it). A failing poll never logs by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..accounting import Accounting
from ..backoff import BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS, backoff_delay
from ..exposition.bodies import Body, Exposition, HealthSections, Section
from ..exposition.health import Health
from ..exposition.rendering import RenderOptions
from ..issues import IssueKind
from ..kubelet import client as kubelet
from ..kubelet.client import KubeletClient, KubeletError
from ..kubelet.status import CAPABILITY_NAMES, KubeletStatus
from ..model import Allocatable, KubeletSnapshot, PodAssignment, Topology
from ..topology import TopologyError, read_topology
from .issuelog import IssueLog
from .pipeline import Pipeline, Replies, Result
from .worker import Worker

if TYPE_CHECKING:
    from ..fit.section import FitView
    from ..kubeapi.view import KubeView

log = logging.getLogger(__name__)

WATCH_POLL_SECONDS = 0.2
WATCH_DEBOUNCE_SECONDS = 0.1
# Files the kubelet rewrites when it assigns or frees exclusive resources.
WATCHED_FILES = ("cpu_manager_state", "memory_manager_state", "dra_manager_state",
                 "device-plugins/kubelet_internal_checkpoint")
PROBE_POD = ("kube-system", "podresources-exporter-get-probe")
INTERNAL_ERROR = "internal_error"


@dataclass
class Settings:
    """What the refresh loop needs to know; the CLI fills it from flags."""

    socket: str = kubelet.DEFAULT_SOCKET
    sysfs_root: str = "/sys"
    interval: float = 10.0
    allocatable_interval: float = 60.0
    watch_path: str | None = None
    max_refresh_rate: float = 1.0
    max_message_bytes: int = kubelet.DEFAULT_MAX_MESSAGE_BYTES
    timeout: float = kubelet.DEFAULT_TIMEOUT_SECONDS
    node_name: str = ""
    kube_api: bool = False
    render: RenderOptions = field(default_factory=RenderOptions)
    # the fit answers (SPEC section 7)
    fit_shapes: str | None = None
    full_pcpus_only: bool = False
    kubelet_config: str | None = None
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None


class Refresher:
    """Owns the kubelet client, the topology and the current exposition.

    ``kube_view``, the Kubernetes-API view (``--kube-api``), is built by the caller around the
    same ``health``; the loop runs its workers, filters terminated pods through it and adds its
    section to ``/metrics``.
    """

    def __init__(self, settings: Settings, health: Health | None = None,
                 client: KubeletClient | None = None, topology: Topology | None = None,
                 rng: random.Random | None = None, kube_view: KubeView | None = None):
        self.settings = settings
        self.rng = rng or random.Random()
        self.health = health or Health(settings.node_name)
        self.status = KubeletStatus()  # written here only; the health section renders it
        self.client = client or KubeletClient(settings.socket, settings.max_message_bytes,
                                              settings.timeout, observer=self.health.observe_call)
        self.topology = topology if topology is not None else read_topology(settings.sysfs_root)
        self.accounting: Accounting | None = None
        self.attempted = False
        self.last_error: KubeletError | None = None
        self.exposition = Exposition()
        self.core = RefreshCore(settings.render)
        self._worker = Worker()
        self._allocatable: Allocatable | None = None
        self._allocatable_reply: bytes | None = None
        self._allocatable_at = float("-inf")
        self._allocatable_missing: frozenset[str] = frozenset()
        self._missing_wait = settings.interval  # re-read delay while a resource stays missing
        self._topology_at = time.monotonic()
        self._redetect = True
        self._socket_id: tuple[int, int, int] | None = None  # the kubelet's socket, as last seen
        self._v1_probed_at = float("-inf")
        self._get_probed = False
        self._get_probed_at = float("-inf")
        self._attempts = 0
        self._state = "starting"
        self._issue_log = IssueLog(log)
        self._last_started = float("-inf")
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self.kube_view = kube_view
        self._view_key: tuple[int, Allocatable | None] | None = None
        self.fit: FitView | None = None  # the fit answers (SPEC section 7), set by the app
        self._fit_text = b""
        self.snapshot: KubeletSnapshot | None = None  # as of the last successful refresh
        self.exposition.update(view=self._view_section(), health=self._health_sections())

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Refresh until :meth:`stop`; file changes under ``--watch-path`` wake it early."""
        watcher = None
        if self.settings.watch_path:
            watcher = asyncio.create_task(self._watch(Path(self.settings.watch_path)))
        if self.kube_view is not None:
            self.kube_view.start()
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
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            if self.kube_view is not None:
                await self.kube_view.join()

    def stop(self) -> None:
        self._stop.set()

    async def refresh_once(self) -> float:
        """One refresh attempt; returns the delay before the next one. The CPU-heavy parts
        (decoding, accounting, rendering, deflating) run in the worker thread, so the event
        loop keeps serving scrapes meanwhile."""
        started = time.perf_counter()
        self._last_started = time.monotonic()
        data: Section | None = None
        try:
            self._maybe_reread_topology()
            replies = await self._read_kubelet()
            kept = None
            if self.kube_view is not None:  # the view's state is the loop's: filter here
                kept = self.kube_view.without_terminated(
                    self.core.decode_list(replies.list_reply, replies.api_version))
            result, data = await self._worker.run(self.core.account, replies, self.topology,
                                                  kept)
            self._publish(result)
            delay = self._succeeded()
        except KubeletError as error:
            delay = self._failed(error)
        except Exception as error:  # a bug must not stop the loop or hide behind stale data
            if self._state != INTERNAL_ERROR:
                log.exception("refresh failed unexpectedly; serving the last good snapshot")
            delay = self._failed(KubeletError("refresh", "INTERNAL", repr(error), INTERNAL_ERROR),
                                 logged=True)
        self.health.refresh_duration.observe(time.perf_counter() - started)
        # the health section as of this attempt (not reached when the refresh was cancelled);
        # the sections are replaced together, so a scrape never sees new data with old health
        fit = self._fit_section()  # before the health section: it counts rejections
        health = await self._worker.run(self._health_sections)
        self.exposition.update(data=data, fit=fit, view=self._view_section(), health=health)
        self.attempted = True
        return delay

    async def _wait(self, delay: float) -> None:
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            waiters = [asyncio.ensure_future(self._stop.wait())]
            if self.status.backoff_seconds == 0:  # events never cut a back-off short
                waiters.append(asyncio.ensure_future(self._changed.wait()))
            _, pending = await asyncio.wait(waiters, timeout=remaining,
                                            return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            if self._stop.is_set():
                return
            if self._changed.is_set():
                self._changed.clear()
                earliest = self._last_started + 1.0 / self.settings.max_refresh_rate
                pause = max(WATCH_DEBOUNCE_SECONDS, earliest - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=pause)
                self._changed.clear()  # changes during the pause are covered by this refresh
                return

    async def _watch(self, directory: Path) -> None:
        """Poll the kubelet's state files' mtimes; cheap, and needs no inotify."""
        targets = ([directory] if directory.is_file()
                   else [directory / name for name in WATCHED_FILES])
        last = [_stat(path) for path in targets]
        while True:
            await asyncio.sleep(WATCH_POLL_SECONDS)
            current = [_stat(path) for path in targets]
            if current != last:
                last = current
                self._changed.set()

    # ---- reading the kubelet -------------------------------------------------------------

    async def _read_kubelet(self) -> Replies:
        caps = self.status.capabilities  # as of the previous refresh
        self._notice_restart()
        if caps.api_version == "v1alpha1" and \
                time.monotonic() - self._v1_probed_at >= self.settings.allocatable_interval:
            self._redetect = True  # a lowered capability is probed again: is v1 served now?
        if self._redetect or caps.api_version == "v1":
            try:
                raw = (await self.client.list_pods()).raw
                pods = await self._decode_list(raw, "v1")
                if caps.api_version != "v1":  # first contact, or an upgraded kubelet
                    self._get_probed = False
                    self._allocatable_at = float("-inf")
                self._set_capabilities(api_version="v1")
            except KubeletError as error:
                if error.kind != kubelet.UNIMPLEMENTED:
                    raise
                self._v1_probed_at = time.monotonic()
                raw = (await self.client.list_pods_v1alpha1()).raw
                pods = await self._decode_list(raw, "v1alpha1")
                self._set_capabilities(api_version="v1alpha1", get_allocatable="false",
                                       get="false",
                                       pod_level="unknown")  # v1alpha1 cannot carry it
        else:
            raw = (await self.client.list_pods_v1alpha1()).raw
            pods = await self._decode_list(raw, "v1alpha1")
        self._redetect = False
        if self.status.capabilities.api_version != "v1":
            return Replies(raw, "v1alpha1")
        await self._probe_get(pods)
        await self._refresh_allocatable(pods)
        return Replies(raw, "v1", self._allocatable_reply)

    async def _decode_list(self, raw: bytes, api_version: str) -> tuple[PodAssignment, ...]:
        return await self._worker.run(self.core.decode_list, raw, api_version)

    async def _probe_get(self, pods: tuple[PodAssignment, ...]) -> None:
        """Whether ``Get`` is served: asked once per kubelet, and again at least every
        ``--allocatable-interval`` while the answer is no (an upgraded kubelet may serve it)."""
        if self._get_probed and (
                self.status.capabilities.get != "false"
                or time.monotonic() - self._get_probed_at < self.settings.allocatable_interval):
            return
        namespace, name = (pods[0].namespace, pods[0].name) if pods else PROBE_POD
        try:
            await self.client.get_pod(namespace, name)
            supported = "true"
        except KubeletError as error:
            if error.kind in (kubelet.NOT_FOUND,):
                supported = "true"
            elif error.kind in (kubelet.UNIMPLEMENTED, kubelet.DISABLED):
                supported = "false"
            else:
                return  # transient: ask again on the next refresh
        self._get_probed = True
        self._get_probed_at = time.monotonic()
        self._set_capabilities(get=supported)

    async def _refresh_allocatable(self, pods: tuple[PodAssignment, ...]) -> None:
        caps = self.status.capabilities
        now = time.monotonic()
        due = now - self._allocatable_at >= self.settings.allocatable_interval
        named = {d.resource for p in pods for c in p.containers for d in c.devices if d.resource}
        known = {d.resource for d in self._allocatable.devices} if self._allocatable else set()
        missing = frozenset(named - known)
        if not missing:
            self._allocatable_missing = missing  # so the next missing resource counts as new
        elif caps.get_allocatable != "false":
            if missing != self._allocatable_missing:
                due = True  # a new device resource appeared: re-read allocatable for it
                self._missing_wait = self.settings.interval
            elif now - self._allocatable_at >= self._missing_wait:
                # still missing, e.g. its plugin not registered again yet after a kubelet
                # restart: ask again, less and less often, at least every allocatable interval
                due = True
                self._missing_wait = min(2 * self._missing_wait,
                                         self.settings.allocatable_interval)
        if not due:
            return
        try:
            raw = (await self.client.get_allocatable()).raw
            self._allocatable = await self._worker.run(self.core.decode_allocatable, raw)
            self._allocatable_reply = raw
            self._set_capabilities(get_allocatable="true")
        except KubeletError as error:
            if error.kind not in (kubelet.UNIMPLEMENTED, kubelet.DISABLED):
                raise
            self._allocatable = self._allocatable_reply = None
            self._set_capabilities(get_allocatable="false")
        self._allocatable_at = now
        self._allocatable_missing = missing

    def _maybe_reread_topology(self) -> None:
        """CPUs can be hot-plugged; re-read sysfs as often as allocatable resources."""
        now = time.monotonic()
        if now - self._topology_at < self.settings.allocatable_interval:
            return
        self._topology_at = now
        try:
            topology = read_topology(self.settings.sysfs_root)
        except TopologyError as error:
            log.warning("keeping the previous NUMA topology: %s", error)
            return
        if topology.numa_nodes != self.topology.numa_nodes:
            log.info("NUMA topology changed: %d NUMA nodes, %d CPUs",
                     len(topology.numa_nodes), len(topology.cpu_to_numa))
            self.topology = topology  # only a real change makes the accounting start over

    # ---- outcomes ------------------------------------------------------------------------

    def _publish(self, result: Result) -> None:
        self.snapshot = result.snapshot
        self.accounting = result.accounting
        if result.accounting.pod_level_seen:
            self._set_capabilities(pod_level="true")
        issues, examples = result.issues, result.examples
        self.health.count_issues(dict(issues))
        self._issue_log.note({kind: count for kind, count in issues.items() if count}, examples)

    def _succeeded(self) -> float:
        if self._state == kubelet.RATE_LIMITED:
            log.info("back-off ended: the kubelet answered again")
        elif self._state == "starting":
            log.info("kubelet podresources API reached at %s (API %s)", self.client.target,
                     self.status.capabilities.api_version)
        elif self._state != "ok":
            log.info("kubelet podresources API reachable again")
        self._state = "ok"
        self._attempts = 0
        self.status.up = 1
        self.status.last_success = time.time()
        self.status.backoff_seconds = 0.0
        return self.settings.interval

    def _failed(self, error: KubeletError, logged: bool = False) -> float:
        self.last_error = error
        self.status.up = 0
        self._attempts += 1
        kind = error.kind
        if kind == kubelet.RATE_LIMITED:
            delay = backoff_delay(self._attempts, BACKOFF_CAP_SECONDS, rng=self.rng)
        else:
            delay = backoff_delay(self._attempts, max(self.settings.interval,
                                                      BACKOFF_BASE_SECONDS), rng=self.rng)
        if kind == kubelet.UNAVAILABLE:
            self._kubelet_changed()
        if kind == kubelet.TOO_LARGE:
            self.health.count_issues({IssueKind.MESSAGE_TOO_LARGE: 1})
        if kind == kubelet.INVALID_REPLY:
            self.health.count_issues({IssueKind.INVALID_REPLY: 1})
        if kind != self._state and not logged:
            self._log_failure(error, delay)
        self._state = kind
        self.status.backoff_seconds = delay
        return delay

    def _kubelet_changed(self) -> None:
        """The kubelet may come back as another version: detect everything again."""
        self._redetect = True
        self._get_probed = False
        self._allocatable_at = float("-inf")

    def _notice_restart(self) -> None:
        """A restarted kubelet re-creates its socket. A restart shorter than ``--interval``
        fails no call, so the socket's identity is compared on every refresh."""
        path = kubelet.socket_path(self.settings.socket)
        identity = _socket_identity(path)
        if identity == self._socket_id:
            return
        previous, self._socket_id = self._socket_id, identity
        if identity is None:
            return  # gone: the next call fails and says so
        self._kubelet_changed()
        if previous is not None:
            log.info("kubelet socket %s was re-created (kubelet restarted); detecting its "
                     "capabilities again", path)

    def _log_failure(self, error: KubeletError, delay: float) -> None:
        kind = error.kind
        if kind == kubelet.RATE_LIMITED:
            log.warning("kubelet rate limit hit (%s); backing off (next try in %.1fs, up to "
                        "%.0fs); serving the last good snapshot", error.method, delay,
                        BACKOFF_CAP_SECONDS)
        elif kind == kubelet.TOO_LARGE:
            log.error("kubelet reply to %s exceeds the receive limit (%s); raise "
                      "--max-message-bytes (now %d)", error.method, error.details,
                      self.settings.max_message_bytes)
        elif kind == kubelet.UNAVAILABLE:
            log.warning("kubelet podresources API unreachable at %s: %s; retrying, serving "
                        "the last good snapshot", self.client.target, error.details)
        elif kind == kubelet.DEADLINE:
            log.warning("kubelet did not answer %s within %.1fs; retrying", error.method,
                        self.settings.timeout)
        elif kind == kubelet.INVALID_REPLY:
            log.error("kubelet sent a reply that is not valid protobuf: %s", error.details)
        else:
            log.warning("kubelet call %s failed: %s %s", error.method, error.code, error.details)

    def _set_capabilities(self, **found: str) -> None:
        """Record what was found out (``name=value`` per capability), logging each change."""
        before = self.status.capabilities
        self.status.capabilities = after = replace(before, **found)
        for name, old, value in zip(CAPABILITY_NAMES, before.labels(), after.labels()):
            if old == value:
                continue
            if old not in ("none", "unknown"):
                log.info("kubelet capability %s changed: %s -> %s", name, old, value)
            elif name == "api_version" and value == "v1alpha1":
                log.warning("kubelet does not serve podresources v1; using v1alpha1 "
                            "(devices only, no CPU, memory or topology data)")
            elif value == "false":
                log.info("kubelet does not offer %s; related series are not exported", name)

    # ---- exposition ----------------------------------------------------------------------

    def metrics_body(self, openmetrics: bool, compressed: bool) -> Body:
        """The /metrics body: the data section as of the last successful refresh, the
        Kubernetes-API view's section and the health section as of the last refresh attempt or
        change of the view, whichever came last. Assembled when they change, not here, except
        that a change of the view is noticed here (the view changes between refreshes)."""
        if self._view_changed():
            self.exposition.update(view=self._view_section(), health=self._health_sections())
        return self.exposition.body(openmetrics, compressed)

    def body(self, openmetrics: bool, compressed: bool = False) -> bytes:
        """:meth:`metrics_body` in one piece."""
        return bytes(self.metrics_body(openmetrics, compressed))

    def _view_changed(self) -> bool:
        """Whether the view's section is due again: the view or the allocatable view it
        depends on changed since it was last taken."""
        view, taken = self.kube_view, self._view_key
        return view is not None and (taken is None or taken[0] != view.version
                                     or taken[1] is not self._allocatable)

    def _view_section(self) -> Section | None:
        """The view's section when it changed since the last one taken, else None."""
        view = self.kube_view
        if view is None or not self._view_changed():
            return None
        self._view_key = (view.version, self._allocatable)
        return Section.of(view.render(self._allocatable))

    def _fit_section(self) -> Section | None:
        """The fit answers' section (SPEC section 7) when it changed, else None. Computed here,
        on the loop: it reads the Kubernetes-API view's rejected pods, which the loop owns."""
        if self.fit is None or self.snapshot is None or self.accounting is None:
            return None
        text = self.fit.update(self.snapshot, self.topology, self.accounting)
        if text is self._fit_text:
            return None
        self._fit_text = text
        return Section.of(text)

    def _health_sections(self) -> HealthSections:
        return HealthSections.of(*self.health.render_both(self.status))


class RefreshCore:
    """The synchronous, CPU-heavy part of a refresh, run in the worker thread: the
    :class:`~exporter.refresh.pipeline.Pipeline` (decode, filter, ledger, render, with their caches)
    and the deflating of a changed data section. Only one call runs at a time."""

    def __init__(self, options: RenderOptions):
        self.pipeline = Pipeline(options)
        self._published: Accounting | None = None

    def decode_list(self, raw: bytes, api_version: str) -> tuple[PodAssignment, ...]:
        """The pods of a reply; the same reply object again costs nothing (the pipeline keeps
        the last one decoded)."""
        return self.pipeline.pods(raw, api_version)

    def decode_allocatable(self, raw: bytes) -> Allocatable:
        return self.pipeline.allocatable(raw)

    def account(self, replies: Replies, topology: Topology,
                kept: tuple[PodAssignment, ...] | None) -> tuple[Result, Section | None]:
        """One refresh through the pipeline, and the data section, None when it did not change
        (the ledger returns the same object for an unchanged snapshot). ``kept``: the listed
        pods that have not ended, as the Kubernetes-API view says (None: all of them)."""
        result = self.pipeline.run(replies, topology,
                                   (lambda _pods: kept) if kept is not None else None)
        if result.accounting is self._published:
            return result, None
        self._published = result.accounting
        return result, Section.of(result.section)


def _socket_identity(path: str) -> tuple[int, int, int] | None:
    """(device, inode, change time) of the socket file, None when it is absent."""
    try:
        result = os.stat(path)
    except OSError:
        return None
    return (result.st_dev, result.st_ino, result.st_ctime_ns)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        result = os.stat(path)
    except OSError:
        return None
    return (result.st_mtime_ns, result.st_size)
