"""The Kubernetes-API view (``--kube-api``): what the podresources socket cannot show.

The kubelet's podresources API sees only what its resource managers assign. Three things an
operator also needs are in the Kubernetes API instead: extended resources advertised by patching
the Node with no device plugin behind them (their use shows only in pod requests), stale
extended resources a departed device plugin left at capacity 0, and DRA capacity, which
ResourceSlices publish. Knowing the pods' phases also lets the refresh drop the assignments of
terminated pods that kubelets before 1.34 still list.

One worker thread per resource (this Node, the pods bound to it, its ResourceSlices) lists, then
watches from the list's resourceVersion, re-lists on 410 Gone and backs off with jitter on
errors: the official ``kubernetes`` client is synchronous, so it never runs on the event loop.
The threads hand parsed records to the loop with ``call_soon_threadsafe``; the view's state
changes only on the loop thread, so rendering and the refresh need no lock. The ``kubernetes``
package is imported when a view is built, never otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import socket
import threading
import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily

from . import catalog
from .backoff import BACKOFF_CAP_SECONDS, backoff_delay
from .health import KUBE_API_RESOURCES, Health
from .model import Allocatable, PodAssignment
from .rendering import gauge_family, render_text

log = logging.getLogger(__name__)

NODE, PODS, SLICES = KUBE_API_RESOURCES
# resource.k8s.io versions serving ResourceSlices, newest first, with their client classes
SLICE_VERSIONS = (("v1", "ResourceV1Api"), ("v1beta2", "ResourceV1beta2Api"),
                  ("v1beta1", "ResourceV1beta1Api"))
TERMINAL_PHASES = ("Succeeded", "Failed")
WATCH_SECONDS = (300, 600)  # server-side watch timeout, drawn per watch like client-go's
CONNECT_TIMEOUT_SECONDS = 10
LIST_TIMEOUT_SECONDS = 60
READ_SLACK_SECONDS = 30  # a watch silent this long past its timeout is dead
LIST_PAGE = 100  # bounds the JSON held at once while listing a busy node
MIN_WATCH_SECONDS = 1.0  # a shorter watch without events counts as a failed one
NOT_SERVED_RECHECK_SECONDS = 600.0
JOIN_SECONDS = 2.0


class ViewError(Exception):
    """The view cannot start: the client is missing or there is no API configuration."""


class _Gone(Exception):
    """410 Gone: the resourceVersion expired (or the API version vanished); list again."""


class _NotServed(Exception):
    """The API server serves none of the resource's versions."""


class _LoopClosed(Exception):
    """The event loop is gone: the exporter is shutting down."""


class _WatchFailed(Exception):
    """The API server ended a watch with an ERROR event other than 410."""


# ---- pure parsing -------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)"
                       r"|[eE]([+-]?\d+))?$")
_SUFFIX = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
           "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10),
           "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
           "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def parse_quantity(text) -> float:
    """A Kubernetes quantity (``4``, ``1k``, ``500m``, ``2Gi``, ``1e3``) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix, exponent = match.groups()
    try:
        scale = Decimal(10) ** int(exponent) if exponent else _SUFFIX[suffix or ""]
        return float(Decimal(number) * scale)
    except (InvalidOperation, OverflowError):
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from None


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: ``domain/name`` with a domain outside
    kubernetes.io, not prefixed ``requests.``, and a valid quota name once prefixed."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    parts = ("requests." + name).split("/")
    if len(parts) != 2:
        return False
    prefix, short = parts
    return (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))
            and len(short) <= 63 and bool(_QUALIFIED_NAME.match(short)))


def extended_amounts(resources) -> dict[str, float]:
    """The extended resources of a ``{name: quantity}`` map; unparsable quantities skipped."""
    amounts = {}
    for name, quantity in (resources or {}).items():
        if is_extended_resource(name):
            try:
                amounts[name] = parse_quantity(quantity)
            except ValueError:
                log.debug("skipping %s: bad quantity %r", name, quantity)
    return amounts


def _add(total: dict[str, float], more: dict[str, float]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _raise_to(peak: dict[str, float], other: dict[str, float]) -> None:
    for name, amount in other.items():
        if amount > peak.get(name, 0):
            peak[name] = amount


def _container_requests(container: dict) -> dict[str, float]:
    return extended_amounts((container.get("resources") or {}).get("requests"))


def pod_requests(spec: dict) -> dict[str, float]:
    """The pod's effective extended-resource requests, as the scheduler counts them
    (``resourcehelper.PodRequests``): app containers plus sidecars (restartable init
    containers), or a regular init container plus the sidecars started before it if that is
    more; plus the pod overhead."""
    total: dict[str, float] = {}
    for container in spec.get("containers") or ():
        _add(total, _container_requests(container))
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for container in spec.get("initContainers") or ():
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _raise_to(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    _add(total, extended_amounts(spec.get("overhead")))
    return total


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The Node's extended resources (status.capacity and status.allocatable)."""

    capacity: dict[str, float]
    allocatable: dict[str, float]


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What the view keeps of a pod: terminated or not, and its effective requests."""

    terminated: bool
    requests: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class SliceRecord:
    """What the view keeps of a ResourceSlice: whose pool, which generation, how many devices."""

    driver: str
    pool: str
    generation: int
    devices: int


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def node_record(obj: dict) -> tuple[str, NodeRecord]:
    status = obj.get("status") or {}
    return _name(obj), NodeRecord(extended_amounts(status.get("capacity")),
                                  extended_amounts(status.get("allocatable")))


def pod_record(obj: dict) -> tuple[tuple[str, str], PodRecord]:
    meta = obj.get("metadata") or {}
    terminated = (obj.get("status") or {}).get("phase") in TERMINAL_PHASES
    requests = {} if terminated else pod_requests(obj.get("spec") or {})
    return ((meta.get("namespace", ""), meta.get("name", "")),
            PodRecord(terminated, tuple(sorted(requests.items()))))


def slice_record(obj: dict) -> tuple[str, SliceRecord]:
    spec = obj.get("spec") or {}
    pool = spec.get("pool") or {}
    return _name(obj), SliceRecord(spec.get("driver", ""), pool.get("name", ""),
                                   int(pool.get("generation") or 0), len(spec.get("devices") or ()))


def dra_allocatable(slices) -> dict[tuple[str, str], int]:
    """Devices per (driver, pool), counting only each pool's newest generation (a driver
    publishing a new generation leaves the older slices behind until it deletes them)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    counts = dict.fromkeys(newest, 0)
    for s in slices:
        if s.generation == newest[(s.driver, s.pool)]:
            counts[(s.driver, s.pool)] += s.devices
    return counts


# ---- the view ------------------------------------------------------------------------------

class KubeView:
    """A node-scoped view of the Node, its pods and its ResourceSlices, and its metric families.

    ``allocatable`` returns the refresh loop's latest ``GetAllocatableResources`` view (None
    when the kubelet does not offer it), which decides staleness together with the Node.
    """

    def __init__(self, node_name: str, health: Health,
                 allocatable: Callable[[], Allocatable | None]):
        try:
            from kubernetes import client, config
            from kubernetes.client.exceptions import ApiException
        except ImportError as error:
            raise ViewError(f"cannot import the kubernetes package ({error}); install "
                            "podresources-exporter[kube]") from None
        configuration = client.Configuration()
        try:
            if os.environ.get("KUBECONFIG"):
                config.load_kube_config(config_file=os.environ["KUBECONFIG"],
                                        client_configuration=configuration, persist_config=False)
            else:
                config.load_incluster_config(client_configuration=configuration)
        except (config.ConfigException, OSError, ValueError, TypeError) as error:
            raise ViewError(f"no Kubernetes API configuration: {error}") from None
        # The workers retry with back-off; urllib3's own retries would log each attempt.
        configuration.retries = False
        self.node_name = node_name
        self.health = health
        self.api_exception = ApiException
        self.version = 0  # bumped on every change of the view's state
        self.server = configuration.host
        self._allocatable = allocatable
        self._api = client.ApiClient(configuration)
        self._records: dict[str, dict] = {resource: {} for resource in KUBE_API_RESOURCES}
        self._terminated: set[tuple[str, str]] = set()
        self._states = dict.fromkeys(KUBE_API_RESOURCES, "starting")
        self._rendered = b""
        self._rendered_for: tuple[int, Allocatable | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stopping = threading.Event()
        health.track_kube_api()
        core = client.CoreV1Api(self._api)
        slice_listers = []
        for version, class_name in SLICE_VERSIONS:
            api_class = getattr(client, class_name, None)  # older clients lack newer versions
            if api_class is not None:
                slice_listers.append((version, api_class(self._api).list_resource_slice))
        by_node = f"spec.nodeName={node_name}"
        self._reflectors = [
            _Reflector(self, NODE, [("v1", _selecting(core.list_node,
                                                      f"metadata.name={node_name}"))],
                       node_record),
            _Reflector(self, PODS, [("v1", _selecting(core.list_pod_for_all_namespaces,
                                                      by_node))], pod_record),
            _Reflector(self, SLICES, [(v, _selecting(call, by_node)) for v, call in slice_listers],
                       slice_record, optional=True),
        ]

    # ---- life cycle (loop thread) --------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        log.info("Kubernetes-API view: watching node %s, its pods and ResourceSlices at %s",
                 self.node_name, self.server)
        for reflector in self._reflectors:
            reflector.thread.start()

    def stop(self) -> None:
        """Ask the workers to stop and cut their open watches; returns at once."""
        self.stopping.set()
        for reflector in self._reflectors:
            reflector.interrupt()

    def join(self, timeout: float = JOIN_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        for reflector in self._reflectors:
            if reflector.thread.is_alive():
                reflector.thread.join(max(0.0, deadline - time.monotonic()))
        self._api.close()

    # ---- what the refresh and the scrape ask (loop thread) --------------------------------

    def without_terminated(self, pods: tuple[PodAssignment, ...]) -> tuple[PodAssignment, ...]:
        """The kubelet's pods minus those the API knows as Succeeded or Failed; the same
        objects, so the ledger sees the rest unchanged."""
        terminated = self._terminated
        if not terminated:
            return pods
        return tuple(pod for pod in pods if (pod.namespace, pod.name) not in terminated)

    def render(self) -> bytes:
        """The view's section of /metrics, rendered once per state and allocatable view."""
        allocatable = self._allocatable()
        cached = self._rendered_for
        if cached is None or cached[0] != self.version or cached[1] is not allocatable:
            self._rendered = render_text([f for f in self.families(allocatable) if f.samples])
            self._rendered_for = (self.version, allocatable)
        return self._rendered

    def families(self, allocatable: Allocatable | None) -> list[GaugeMetricFamily]:
        node = self._records[NODE].get(self.node_name)
        capacity = node.capacity if node else {}
        node_allocatable = node.allocatable if node else {}
        advertised = capacity.keys() | node_allocatable.keys()
        requested: dict[str, float] = {}
        for record in self._records[PODS].values():
            _add(requested, dict(record.requests))
        healthy = None if allocatable is None else {d.resource for d in allocatable.devices}
        stale = {name: int(capacity.get(name) == 0
                           or (healthy is not None and name not in healthy
                               and not requested.get(name)))
                 for name in advertised}
        return [
            gauge_family(catalog.EXTENDED_RESOURCE_CAPACITY, capacity),
            gauge_family(catalog.EXTENDED_RESOURCE_ALLOCATABLE, node_allocatable),
            gauge_family(catalog.EXTENDED_RESOURCE_REQUESTED,
                         {name: requested.get(name, 0) for name in advertised | requested.keys()}),
            gauge_family(catalog.EXTENDED_RESOURCE_STALE, stale),
            gauge_family(catalog.DRA_DEVICES_ALLOCATABLE,
                         dra_allocatable(self._records[SLICES].values())),
        ]

    # ---- changes from the workers (run on the loop thread) -------------------------------

    def post(self, callback, *args) -> None:
        """Run ``callback(*args)`` on the loop thread (called from a worker)."""
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed
            raise _LoopClosed from None

    def replaced(self, resource: str, records: dict, detail: str = "") -> None:
        """A fresh list of the resource (the whole state of it)."""
        self._records[resource] = records
        if resource == PODS:
            self._terminated = {key for key, record in records.items() if record.terminated}
        self.version += 1
        self.reached(resource, detail or f"{len(records)} listed")

    def changed(self, resource: str, key, record) -> None:
        """An ADDED or MODIFIED (record) or DELETED (None) watch event."""
        records = self._records[resource]
        if record is None:
            records.pop(key, None)
        else:
            records[key] = record
        if resource == PODS:
            if record is not None and record.terminated:
                self._terminated.add(key)
            else:
                self._terminated.discard(key)
        self.version += 1

    def reached(self, resource: str, detail: str = "") -> None:
        state = self._states[resource]
        if state == "starting":
            log.info("Kubernetes API: %s synced (%s)", resource, detail)
        elif state == "failed":
            log.info("Kubernetes API: %s reachable again; watching", resource)
        self._states[resource] = "ok"
        if self.health.kube_api_up[resource] != 1:
            self.health.kube_api_up[resource] = 1
            self.version += 1

    def failed(self, resource: str, reason: str, down: bool = True) -> None:
        """A failed list or watch attempt; ``down`` unless a running watch merely broke."""
        self.health.kube_api_errors.labels(resource).inc()
        if down:
            if self._states[resource] != "failed":
                log.warning("Kubernetes API: %s unreachable (%s); retrying with back-off, "
                            "keeping the last values", resource, reason)
            self._states[resource] = "failed"
            self.health.kube_api_up[resource] = 0
        else:
            log.debug("Kubernetes API: the watch of %s broke (%s); resuming", resource, reason)
        self.version += 1


def _selecting(call, field_selector: str):
    def selected(**kwargs):
        return call(field_selector=field_selector, **kwargs)
    return selected


def _lines(response) -> Iterator[bytes]:
    """Newline-delimited watch events, as the chunks of the streamed reply arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class _Reflector:
    """List and watch one resource in a worker thread (a small client-go Reflector).

    Lists page by page, then watches from the list's resourceVersion (bookmarks included) and
    resumes each ended watch from the last version seen; a 410 Gone, as a status or as an
    ERROR event, means list again. Every failure backs off exponentially with full jitter (1 s
    floor, 60 s cap), and so does a watch that ends within a second without an event, so a
    misbehaving server never gets a tight loop. With several ``listers`` (API versions, newest
    first) each list uses the first one served; ``optional`` says that none may be.
    """

    def __init__(self, view: KubeView, resource: str, listers: list, parse,
                 optional: bool = False):
        self.view = view
        self.resource = resource
        self.listers = listers
        self.parse = parse
        self.optional = optional
        self.call = listers[0][1] if listers else None
        self.version_in_use: str | None = None
        self.rv: str | None = None
        self.list_current = False  # after a 410: list the current state, not the cache's
        self.attempts = 0
        self.gone_in_a_row = 0
        self.not_served_logged = False
        self.response = None
        self.rng = random.Random()
        self.thread = threading.Thread(target=self._run, name=f"kube-api-{resource}",
                                       daemon=True)

    def interrupt(self) -> None:
        """Unblock a read of the open watch (the worker sees ``stopping`` next)."""
        response = self.response
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _run(self) -> None:
        try:
            while not self.view.stopping.is_set():
                self._cycle()
        except _LoopClosed:
            pass

    def _cycle(self) -> None:
        events, started, gone = 0, time.monotonic(), False
        try:
            if self.rv is None:
                self._list()
            started = time.monotonic()
            events = self._watch()
        except _Gone:
            self.rv, gone, self.list_current = None, True, True
        except _NotServed:
            self._not_served()
            return
        except _LoopClosed:
            raise
        except Exception as error:  # whatever went wrong, the worker goes on, slowly
            if not self.view.stopping.is_set():
                self.view.post(self.view.failed, self.resource, _describe(error))
                self._pause()
            return
        if events or time.monotonic() - started >= MIN_WATCH_SECONDS:
            self.attempts = self.gone_in_a_row = 0
        elif gone and not self.gone_in_a_row:
            self.gone_in_a_row = 1  # the usual expiry: list again at once
        else:
            self._pause()

    def _pause(self) -> None:
        self.attempts += 1
        self.view.stopping.wait(backoff_delay(self.attempts, BACKOFF_CAP_SECONDS, rng=self.rng))

    def _list(self) -> None:
        """List every object (page by page) with the first API version served."""
        for version, call in self.listers:
            try:
                records, rv = self._list_pages(call)
            except self.view.api_exception as error:
                if error.status == 404 and self.optional:
                    continue  # this version is not served
                if error.status == 410:
                    raise _Gone from None  # a continue token expired
                raise
            self._use(version, call)
            self.rv = rv
            self.view.post(self.view.replaced, self.resource, records)
            return
        raise _NotServed

    def _list_pages(self, call) -> tuple[dict, str]:
        """Like client-go's reflector, list from the API server's watch cache (resourceVersion
        0: cheap when every node's exporter starts at once), but after a 410 read the current
        state (the cache may be older than what the expired watch had shown)."""
        options = {"limit": LIST_PAGE, "_preload_content": False,
                   "_request_timeout": (CONNECT_TIMEOUT_SECONDS, LIST_TIMEOUT_SECONDS)}
        if not self.list_current:
            options["resource_version"] = "0"
        records: dict = {}
        while True:
            response = call(**options)
            try:
                body = json.loads(response.data)
            finally:
                response.release_conn()
            records.update(self.parse(obj) for obj in body.get("items") or ())
            meta = body.get("metadata") or {}
            if not meta.get("continue"):
                self.list_current = False
                return records, meta.get("resourceVersion", "")
            options.pop("resource_version", None)  # a continued list takes no version
            options["_continue"] = meta["continue"]

    def _use(self, version: str, call) -> None:
        if self.optional and version != self.version_in_use:
            newest = self.listers[0][0]
            if version != newest:
                log.info("Kubernetes API: %s: resource.k8s.io/%s is not served; using %s",
                         self.resource, newest, version)
            elif self.version_in_use is not None:
                log.info("Kubernetes API: %s: using resource.k8s.io/%s", self.resource, version)
        self.version_in_use, self.call = version, call
        self.not_served_logged = False

    def _not_served(self) -> None:
        """No version served (an older cluster, or DRA off): nothing to count; ask again
        now and then, quietly."""
        if not self.not_served_logged:
            log.info("Kubernetes API: %s: the API server serves none of resource.k8s.io/%s; "
                     "no DRA allocatable series", self.resource,
                     ", ".join(v for v, _ in SLICE_VERSIONS))
            self.not_served_logged = True
        self.version_in_use = None
        self.view.post(self.view.replaced, self.resource, {}, "not served")
        self.view.stopping.wait(NOT_SERVED_RECHECK_SECONDS)

    def _watch(self) -> int:
        """Watch from ``self.rv`` until the server ends the watch; returns the events seen."""
        seconds = self.rng.randint(*WATCH_SECONDS)
        try:
            response = self.call(
                watch=True, resource_version=self.rv, allow_watch_bookmarks=True,
                timeout_seconds=seconds, _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_SECONDS, seconds + READ_SLACK_SECONDS))
        except self.view.api_exception as error:
            if error.status in (404, 410):  # expired, or the API version is gone: list again
                raise _Gone from None
            raise
        self.response = response
        self.view.post(self.view.reached, self.resource)
        events = 0
        try:
            for line in _lines(response):
                if self.view.stopping.is_set():
                    break
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise _WatchFailed(f"watch error {obj.get('code')} {obj.get('reason')}: "
                                       f"{obj.get('message')}")
                if kind in ("ADDED", "MODIFIED"):
                    self.view.post(self.view.changed, self.resource, *self.parse(obj))
                elif kind == "DELETED":
                    self.view.post(self.view.changed, self.resource, self.parse(obj)[0], None)
                self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                events += 1
        except (_Gone, _LoopClosed, _WatchFailed):
            raise
        except Exception as error:  # the connection broke: resume from the last version
            if not self.view.stopping.is_set():
                self.view.post(self.view.failed, self.resource, _describe(error), False)
        finally:
            self.response = None
            response.release_conn()
        return events


def _describe(error: Exception) -> str:
    status = getattr(error, "status", None)
    if status is not None:
        return f"HTTP {status} {getattr(error, 'reason', '') or ''}".strip()
    return f"{type(error).__name__}: {error}"[:300]
