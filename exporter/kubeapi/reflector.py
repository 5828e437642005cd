"""List and watch one Kubernetes resource in a worker thread (a small client-go Reflector).

The official ``kubernetes`` client is synchronous, so each resource gets a thread of its own and
the event loop never blocks on the API server. A reflector knows nothing of what it feeds: it
parses objects with the function it is given and hands records to a :class:`Sink`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Protocol

from ..backoff import BACKOFF_CAP_SECONDS, backoff_delay

log = logging.getLogger(__name__)

WATCH_SECONDS = (300, 600)  # server-side watch timeout, drawn per watch like client-go's
CONNECT_TIMEOUT_SECONDS = 10
LIST_TIMEOUT_SECONDS = 60
READ_SLACK_SECONDS = 30  # a watch silent this long past its timeout is dead
LIST_PAGE = 100  # bounds the JSON held at once while listing a busy node
MIN_WATCH_SECONDS = 1.0  # a shorter watch without events counts as a failed one
NOT_SERVED_RECHECK_SECONDS = 600.0

# A client ``list_*`` call (field selector already applied): lists, or watches with watch=True.
Lister = Callable[..., Any]
# An API object -> (its key in the records, its record)
Parse = Callable[[dict[str, Any]], tuple[Hashable, Any]]


class Sink(Protocol):
    """Where a reflector delivers what it learns.

    Called on the reflector's worker thread: an implementation hands each call over to wherever
    its state lives. Raising :class:`SinkClosed` ends the worker (the exporter is shutting down).
    """

    def replaced(self, resource: str, records: dict[Any, Any], detail: str) -> None:
        """A fresh list: the whole state of the resource (``detail`` for the log line)."""

    def changed(self, resource: str, key: Hashable, record: Any) -> None:
        """A watch event: ADDED or MODIFIED (the record), or DELETED (``None``)."""

    def reached(self, resource: str) -> None:
        """A watch is open: the API server answers."""

    def failed(self, resource: str, reason: str, down: bool) -> None:
        """A failed list or watch attempt; ``down`` unless a running watch merely broke."""


class SinkClosed(Exception):
    """The sink takes nothing more: the worker ends."""


class _Gone(Exception):
    """410 Gone: the resourceVersion expired (or the API version vanished); list again."""


class _NotServed(Exception):
    """The API server serves none of the resource's versions."""


class _WatchFailed(Exception):
    """The API server ended a watch with an ERROR event other than 410."""


def with_field_selector(call: Lister, field_selector: str) -> Lister:
    """``call`` restricted to the objects ``field_selector`` selects (this node's)."""
    def selected(**kwargs: Any) -> Any:
        return call(field_selector=field_selector, **kwargs)
    return selected


class Reflector:
    """List and watch one resource in a worker thread.

    Lists page by page, then watches from the list's resourceVersion (bookmarks included) and
    resumes each ended watch from the last version seen; a 410 Gone, as a status or as an
    ERROR event, means list again. Every failure backs off exponentially with full jitter (1 s
    floor, 60 s cap), and so does a watch that ends within a second without an event, so a
    misbehaving server never gets a tight loop. With several ``listers`` (API versions of
    ``group``, newest first) each list uses the first one served; ``optional`` says that none may
    be, and ``unserved`` what that means, for the log line.
    """

    def __init__(self, resource: str, listers: Sequence[tuple[str, Lister]], parse: Parse,
                 sink: Sink, api_error: type[Exception], *, optional: bool = False,
                 group: str = "", unserved: str = ""):
        self.resource = resource
        self.listers = list(listers)
        self.parse = parse
        self.sink = sink
        self.api_error = api_error  # the client's exception for an HTTP error status
        self.optional = optional
        self.group = group
        self.unserved = unserved
        self.call: Lister | None = self.listers[0][1] if self.listers else None
        self.version_in_use: str | None = None
        self.rv: str | None = None
        self.list_current = False  # after a 410: list the current state, not the cache's
        self.attempts = 0
        self.gone_in_a_row = 0
        self.not_served_logged = False
        self.response: Any = None
        self.rng = random.Random()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"kube-api-{resource}",
                                       daemon=True)

    # ---- life cycle (any thread) ---------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Ask the worker to stop and cut its open watch; returns at once."""
        self.stopping.set()
        self._interrupt()

    def join(self, timeout: float) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _interrupt(self) -> None:
        """Unblock a read of the open watch (the worker sees ``stopping`` next)."""
        response = self.response
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # ---- the worker ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                self._cycle()
        except SinkClosed:
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
        except SinkClosed:
            raise
        except Exception as error:  # whatever went wrong, the worker goes on, slowly
            if not self.stopping.is_set():
                self.sink.failed(self.resource, _describe(error), True)
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
        self.stopping.wait(backoff_delay(self.attempts, BACKOFF_CAP_SECONDS, rng=self.rng))

    def _status(self, error: Exception) -> int | None:
        return getattr(error, "status", None) if isinstance(error, self.api_error) else None

    def _list(self) -> None:
        """List every object (page by page) with the first API version served."""
        for version, call in self.listers:
            try:
                records, rv = self._list_pages(call)
            except Exception as error:
                status = self._status(error)
                if status == 404 and self.optional:
                    continue  # this version is not served
                if status == 410:
                    raise _Gone from None  # a continue token expired
                raise
            self._use(version, call)
            self.rv = rv
            self.sink.replaced(self.resource, records, "")
            return
        raise _NotServed

    def _list_pages(self, call: Lister) -> tuple[dict[Any, Any], str]:
        """Like client-go's reflector, list from the API server's watch cache (resourceVersion
        0: cheap when every node's exporter starts at once), but after a 410 read the current
        state (the cache may be older than what the expired watch had shown)."""
        options: dict[str, Any] = {
            "limit": LIST_PAGE, "_preload_content": False,
            "_request_timeout": (CONNECT_TIMEOUT_SECONDS, LIST_TIMEOUT_SECONDS)}
        if not self.list_current:
            options["resource_version"] = "0"
        records: dict[Any, Any] = {}
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

    def _use(self, version: str, call: Lister) -> None:
        if self.optional and version != self.version_in_use:
            newest = self.listers[0][0]
            if version != newest:
                log.info("Kubernetes API: %s: %s/%s is not served; using %s",
                         self.resource, self.group, newest, version)
            elif self.version_in_use is not None:
                log.info("Kubernetes API: %s: using %s/%s", self.resource, self.group, version)
        self.version_in_use, self.call = version, call
        self.not_served_logged = False

    def _not_served(self) -> None:
        """No version served (an older cluster, or the API group off): nothing to count; ask
        again now and then, quietly."""
        if not self.not_served_logged:
            log.info("Kubernetes API: %s: the API server serves none of %s/%s; %s",
                     self.resource, self.group, ", ".join(v for v, _ in self.listers),
                     self.unserved)
            self.not_served_logged = True
        self.version_in_use = None
        self.sink.replaced(self.resource, {}, "not served")
        self.stopping.wait(NOT_SERVED_RECHECK_SECONDS)

    def _watch(self) -> int:
        """Watch from ``self.rv`` until the server ends the watch; returns the events seen."""
        if self.call is None:
            raise _NotServed
        seconds = self.rng.randint(*WATCH_SECONDS)
        try:
            response = self.call(
                watch=True, resource_version=self.rv, allow_watch_bookmarks=True,
                timeout_seconds=seconds, _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_SECONDS, seconds + READ_SLACK_SECONDS))
        except Exception as error:
            if self._status(error) in (404, 410):  # expired, or the API version is gone
                raise _Gone from None
            raise
        self.response = response
        self.sink.reached(self.resource)
        events = 0
        try:
            for line in _lines(response):
                if self.stopping.is_set():
                    break
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise _WatchFailed(f"watch error {obj.get('code')} {obj.get('reason')}: "
                                       f"{obj.get('message')}")
                if kind in ("ADDED", "MODIFIED"):
                    self.sink.changed(self.resource, *self.parse(obj))
                elif kind == "DELETED":
                    self.sink.changed(self.resource, self.parse(obj)[0], None)
                self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                events += 1
        except (_Gone, SinkClosed, _WatchFailed):
            raise
        except Exception as error:  # the connection broke: resume from the last version
            if not self.stopping.is_set():
                self.sink.failed(self.resource, _describe(error), False)
        finally:
            self.response = None
            response.release_conn()
        return events


def _lines(response: Any) -> Iterator[bytes]:
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


def _describe(error: Exception) -> str:
    status = getattr(error, "status", None)
    if status is not None:
        return f"HTTP {status} {getattr(error, 'reason', '') or ''}".strip()
    return f"{type(error).__name__}: {error}"[:300]
