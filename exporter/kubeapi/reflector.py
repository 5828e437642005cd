"""List and watch one Kubernetes resource on the event loop (a small client-go Reflector).

A reflector is one task: it lists, then watches, waiting on the network without a thread of
its own. It knows nothing of what it feeds: it parses objects with the function it is given
and hands records to a :class:`Sink`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import aiohttp

from ..backoff import BACKOFF_CAP_SECONDS, backoff_delay
from .client import ApiClient, ApiError, describe_failure

log = logging.getLogger(__name__)

WATCH_SECONDS = (300, 600)  # server-side watch timeout, drawn per watch like client-go's
READ_SLACK_SECONDS = 30  # a watch silent this long past its timeout is dead
LIST_PAGE = 100  # bounds the JSON held at once while listing a busy node
MIN_WATCH_SECONDS = 1.0  # a shorter watch without events counts as a failed one
NOT_SERVED_RECHECK_SECONDS = 600.0

# An API object -> (its key in the records, its record)
Parse = Callable[[dict[str, Any]], tuple[Hashable, Any]]


class Sink(Protocol):
    """Where a reflector delivers what it learns (called on the event loop)."""

    def replaced(self, resource: str, records: dict[Any, Any], detail: str) -> None:
        """A fresh list: the whole state of the resource (``detail`` for the log line)."""

    def changed(self, resource: str, key: Hashable, record: Any) -> None:
        """A watch event: ADDED or MODIFIED (the record), or DELETED (``None``)."""

    def reached(self, resource: str) -> None:
        """A watch is open: the API server answers."""

    def failed(self, resource: str, reason: str, down: bool) -> None:
        """A failed list or watch attempt; ``down`` unless a running watch merely broke."""


class _Gone(Exception):
    """410 Gone: the resourceVersion expired (or the API version vanished); list again."""


class _NotServed(Exception):
    """The API server serves none of the resource's versions."""


class _WatchFailed(Exception):
    """The API server ended a watch with an ERROR event other than 410."""


class Reflector:
    """List and watch one resource in a task of its own.

    Lists page by page, then watches from the list's resourceVersion (bookmarks included) and
    resumes each ended watch from the last version seen; a 410 Gone, as a status or as an
    ERROR event, means list again. Every failure backs off exponentially with full jitter (1 s
    floor, 60 s cap), and so does a watch that ends within a second without an event, so a
    misbehaving server never gets a tight loop. With several ``paths`` (API versions of
    ``group``, newest first, each with its collection's path) each list uses the first one
    served; ``optional`` says that none may be, and ``unserved`` what that means, for the log
    line. ``field_selector`` scopes every request (to this node's objects).
    """

    def __init__(self, resource: str, paths: Sequence[tuple[str, str]], field_selector: str,
                 parse: Parse, sink: Sink, client: ApiClient, *, optional: bool = False,
                 group: str = "", unserved: str = ""):
        self.resource = resource
        self.paths = list(paths)
        self.field_selector = field_selector
        self.parse = parse
        self.sink = sink
        self.client = client
        self.optional = optional
        self.group = group
        self.unserved = unserved
        self.path: str | None = self.paths[0][1] if self.paths else None
        self.version_in_use: str | None = None
        self.rv: str | None = None
        self.list_current = False  # after a 410: list the current state, not the cache's
        self.attempts = 0
        self.gone_in_a_row = 0
        self.not_served_logged = False
        self.rng = random.Random()
        self.task: asyncio.Task[None] | None = None

    # ---- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(),
                                                           name=f"kube-api-{self.resource}")

    def stop(self) -> None:
        """Cancel the task: an open watch or a back-off wait ends at once."""
        if self.task is not None:
            self.task.cancel()

    async def join(self) -> None:
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)

    async def list_once(self) -> None:
        """One list, no watch (a one-off read); a failure is reported to the sink. It lists
        the current state, not the watch cache's: no watch follows to bring a lagging cache's
        answer up to date, and one read per command costs the API server nothing."""
        self.list_current = True
        try:
            await self._list()
        except _NotServed:
            self.sink.replaced(self.resource, {}, "not served")
        except Exception as error:
            self.sink.failed(self.resource, describe_failure(error, self.client.config.server),
                             True)

    # ---- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._cycle()

    async def _cycle(self) -> None:
        events, started, gone = 0, time.monotonic(), False
        try:
            if self.rv is None:
                await self._list()
            started = time.monotonic()
            events = await self._watch()
        except _Gone:
            self.rv, gone, self.list_current = None, True, True
        except _NotServed:
            await self._not_served()
            return
        except Exception as error:  # whatever went wrong, the loop goes on, slowly
            self.sink.failed(self.resource, describe_failure(error, self.client.config.server),
                             True)
            await self._pause()
            return
        if events or time.monotonic() - started >= MIN_WATCH_SECONDS:
            self.attempts = self.gone_in_a_row = 0
        elif gone and not self.gone_in_a_row:
            self.gone_in_a_row = 1  # the usual expiry: list again at once
        else:
            await self._pause()

    async def _pause(self) -> None:
        self.attempts += 1
        await asyncio.sleep(backoff_delay(self.attempts, BACKOFF_CAP_SECONDS, rng=self.rng))

    async def _list(self) -> None:
        """List every object (page by page) with the first API version served."""
        for version, path in self.paths:
            try:
                records, rv = await self._list_pages(path)
            except ApiError as error:
                if error.status == 404 and self.optional:
                    continue  # this version is not served
                if error.status == 410:
                    raise _Gone from None  # a continue token expired
                raise
            self._use(version, path)
            self.rv = rv
            self.sink.replaced(self.resource, records, "")
            return
        raise _NotServed

    async def _list_pages(self, path: str) -> tuple[dict[Any, Any], str]:
        """Like client-go's reflector, list from the API server's watch cache (resourceVersion
        0: cheap when every node's exporter starts at once), but after a 410 read the current
        state (the cache may be older than what the expired watch had shown)."""
        params = {"fieldSelector": self.field_selector, "limit": str(LIST_PAGE)}
        if not self.list_current:
            params["resourceVersion"] = "0"
        records: dict[Any, Any] = {}
        while True:
            body = await self.client.list(path, params)
            records.update(self.parse(obj) for obj in body.get("items") or ())
            meta = body.get("metadata") or {}
            if not meta.get("continue"):
                self.list_current = False
                return records, str(meta.get("resourceVersion") or "")
            params.pop("resourceVersion", None)  # a continued list takes no version
            params["continue"] = str(meta["continue"])

    def _use(self, version: str, path: str) -> None:
        if self.optional and version != self.version_in_use:
            newest = self.paths[0][0]
            if version != newest:
                log.info("Kubernetes API: %s: %s/%s is not served; using %s",
                         self.resource, self.group, newest, version)
            elif self.version_in_use is not None:
                log.info("Kubernetes API: %s: using %s/%s", self.resource, self.group, version)
        self.version_in_use, self.path = version, path
        self.not_served_logged = False

    async def _not_served(self) -> None:
        """No version served (an older cluster, or the API group off): nothing to count; ask
        again now and then, quietly."""
        if not self.not_served_logged:
            log.info("Kubernetes API: %s: the API server serves none of %s/%s; %s",
                     self.resource, self.group, ", ".join(v for v, _ in self.paths),
                     self.unserved)
            self.not_served_logged = True
        self.version_in_use = None
        self.sink.replaced(self.resource, {}, "not served")
        await asyncio.sleep(NOT_SERVED_RECHECK_SECONDS)

    async def _watch(self) -> int:
        """Watch from ``self.rv`` until the server ends the watch; returns the events seen."""
        if self.path is None:
            raise _NotServed
        seconds = self.rng.randint(*WATCH_SECONDS)
        params = {"fieldSelector": self.field_selector, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(seconds)}
        if self.rv:
            params["resourceVersion"] = self.rv
        events = 0
        try:
            async with self.client.watch(self.path, params,
                                         seconds + READ_SLACK_SECONDS) as stream:
                self.sink.reached(self.resource)
                try:
                    async for event in stream:
                        self._apply(event)
                        events += 1
                except (_Gone, _WatchFailed):
                    raise
                except (OSError, ValueError, aiohttp.ClientError) as error:
                    # the connection broke: resume from the last version
                    self.sink.failed(self.resource,
                                     describe_failure(error, self.client.config.server), False)
        except ApiError as error:
            if error.status in (404, 410):  # expired, or the API version is gone
                raise _Gone from None
            raise
        return events

    def _apply(self, event: dict[str, Any]) -> None:
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

