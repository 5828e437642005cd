"""The kubelet's pods, kept current from its Pods API by one ``WatchPods`` stream.

A task on the event loop: while the socket exists it watches; the stream's initial ADDED events
up to INITIAL_SYNC_COMPLETE are the whole state (the server registers the watcher before it
lists, so nothing is lost between), later events change it. No ``ListPods`` is needed here:
it would send the same pods again, and it is the call the kubelet rate-limits.

The kubelet sends DELETED when a pod has *finished* (its status manager's ``TerminatePod``),
not when it leaves the pod manager, and sends nothing when it does. So a DELETED pod is kept,
marked finished (it holds nothing; a rejection stays explained), and the stream is opened
again every 5 to 10 minutes, whose initial events drop what the kubelet no longer has.

Failures (the kubelet restarting, still initializing, dropping a slow watcher) back off with
full jitter (1 s floor, 60 s cap); the last pods are kept meanwhile. Logging is by state change
only. :attr:`PodsApi.on_change` is called after every change of the pods or of the state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..backoff import BACKOFF_CAP_SECONDS, backoff_delay
from ..kubeapi.records import PodRecord, pod_record
from ..kubelet.client import ErrorKind, KubeletError, socket_path
from ..podspec import without_dra_served

if TYPE_CHECKING:
    from .client import PodsApiClient

log = logging.getLogger(__name__)

RESYNC_SECONDS = (300, 600)  # a watch is opened again after this long, drawn per watch
MIN_WATCH_SECONDS = 1.0  # a shorter watch that never synced counts as a failed one
PodKey = tuple[str, str]


class State(StrEnum):
    """The Pods API's state (the ``pods_api`` label of ``podresources_pods_source_info``)."""

    ABSENT = "absent"  # no socket: this kubelet does not serve the Pods API
    STARTING = "starting"  # the socket is there, the first watch has not synced yet
    WATCHING = "watching"
    FAILING = "failing"  # the socket is there, the watch fails; the last pods are kept


def pod_entry(raw: bytes) -> tuple[PodKey, PodRecord]:
    """A pod's bytes as the record the Kubernetes-API view keeps for a pod."""
    from .decode import decode_pod
    return record_of(decode_pod(raw))


def record_of(obj: dict[str, Any]) -> tuple[PodKey, PodRecord]:
    """A pod (API JSON) as the record the Kubernetes-API view keeps for a pod."""
    key, record = pod_record(without_dra_served(obj))
    return (str(key[0]), str(key[1])), record


class PodsApi:
    """The pods of the kubelet's Pods API at ``socket``; the socket is looked for every
    ``check_interval`` seconds while it does not exist."""

    def __init__(self, socket: str, max_message_bytes: int, check_interval: float,
                 timeout: float = 10.0, rng: random.Random | None = None):
        self.path = socket_path(socket)
        self.socket = socket
        self.max_message_bytes = max_message_bytes
        self.timeout = timeout
        # made when the socket first exists: the gRPC stubs and the v1.Pod subset load then
        self.client: PodsApiClient | None = None
        self.check_interval = check_interval
        self.rng = rng or random.Random()
        self.records: dict[PodKey, PodRecord] = {}
        self.version = 0  # bumped on every change of the records
        self.state = State.STARTING if os.path.exists(self.path) else State.ABSENT
        self.synced_once = False
        self.on_change: Callable[[], None] | None = None
        self.reason = ""  # why the last watch failed
        self._attempts = 0
        self._bad_pod_logged = False
        self._synced_watch = False  # whether the current watch reached INITIAL_SYNC_COMPLETE
        self._task: asyncio.Task[None] | None = None

    # ---- life cycle (event loop) ---------------------------------------------------------

    def start(self) -> None:
        if self.state == State.ABSENT:
            self._log_absent()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pods-api")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def join(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self.client is not None:
            await self.client.close()

    def _client(self) -> PodsApiClient:
        """The client, made when first needed: the gRPC stubs and the v1.Pod subset load then."""
        if self.client is None:
            from .client import PodsApiClient
            self.client = PodsApiClient(self.socket, self.max_message_bytes, self.timeout)
        return self.client

    async def list_once(self) -> list[dict[str, Any]]:
        """One ``ListPods`` (a one-off read, no watch): the records, and the pods as API
        JSON (the fields read); none when the socket is absent or the call fails (the state
        says which, and :attr:`reason` why)."""
        from .decode import PodDecodeError, decode_pod
        if not os.path.exists(self.path):
            self._set_state(State.ABSENT)
            return []
        try:
            raws = await self._client().list_pods()
        except KubeletError as error:
            self._failed(why(error))
            return []
        objects = []
        for raw in raws:
            try:
                objects.append(decode_pod(raw))
            except PodDecodeError:
                continue
        self._replace(dict(record_of(obj) for obj in objects))
        return objects

    # ---- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not os.path.exists(self.path):
                self._set_state(State.ABSENT)
                await asyncio.sleep(self.check_interval)
                continue
            if self.state == State.ABSENT:
                if not self.synced_once:  # else "watching again" says it
                    log.info("Pods API: socket %s appeared; watching it", self.path)
                self._set_state(State.STARTING)
            await self._cycle(self._client())

    async def _cycle(self, client: PodsApiClient) -> None:
        started = time.monotonic()
        self._synced_watch = False
        try:
            async with asyncio.timeout(self.rng.uniform(*RESYNC_SECONDS)):
                await self._watch(client)
        except TimeoutError:
            return  # time to open it again: the initial events drop what is gone
        except KubeletError as error:
            self._failed(why(error))
        if self._synced_watch and time.monotonic() - started >= MIN_WATCH_SECONDS:
            return  # a watch that worked and broke: open it again at once
        self._attempts += 1
        await asyncio.sleep(backoff_delay(self._attempts, BACKOFF_CAP_SECONDS, rng=self.rng))

    async def _watch(self, client: PodsApiClient) -> None:
        """One WatchPods stream, until it ends (with a KubeletError)."""
        from .client import ADDED, DELETED, INITIAL_SYNC_COMPLETE, MODIFIED
        from .decode import PodDecodeError
        initial: dict[PodKey, PodRecord] | None = {}
        async for kind, raw in client.watch_pods():
            if kind == INITIAL_SYNC_COMPLETE:
                self._replace(initial or {})
                initial = None
                self._synced_watch = True
                continue
            if kind not in (ADDED, MODIFIED, DELETED):
                continue
            try:
                key, record = pod_entry(raw)
            except PodDecodeError as error:
                if not self._bad_pod_logged:
                    log.warning("Pods API: skipping a pod that cannot be decoded (%s)", error)
                    self._bad_pod_logged = True
                continue
            target = self.records if initial is None else initial
            if kind == DELETED:
                known = target.get(key)
                if known is None or known.terminated:
                    continue
                # finished: it holds nothing now, and the resource-fit predicate counts it no
                # more (the event does not say how it ended); a rejection stays explained
                context = known.context
                if context is not None and not context.terminated:
                    context = replace(context, phase="Succeeded")
                record = replace(known, terminated=True, requests=(), context=context)
            if target.get(key) == record:
                continue
            target[key] = record
            if initial is None:
                self._changed()

    # ---- state ---------------------------------------------------------------------------

    def _replace(self, records: dict[PodKey, PodRecord]) -> None:
        if self.state != State.WATCHING:
            if not self.synced_once:
                log.info("Pods API: watching the kubelet's %d pods at %s", len(records),
                         self.path)
            else:
                log.info("Pods API: watching again (%d pods)", len(records))
        self.synced_once = True
        self._attempts = 0
        if records != self.records:
            self.records = records
            self.version += 1
        self._set_state(State.WATCHING, notify=True)

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def _failed(self, reason: str) -> None:
        self.reason = reason
        if self._synced_watch and self.state == State.WATCHING:
            log.debug("Pods API: the watch broke (%s); opening it again", reason)
            return
        if self.state != State.FAILING:
            log.warning("Pods API: cannot read %s (%s); retrying with back-off%s", self.path,
                        reason, ", keeping the last pods" if self.synced_once else "")
        self._set_state(State.FAILING)

    def _log_absent(self) -> None:
        if self.synced_once:  # a restarting kubelet makes a new one
            log.warning("Pods API: the socket %s is gone; looking for it every %g s, keeping "
                        "the last pods", self.path, self.check_interval)
        else:
            log.info("Pods API: no socket at %s (a kubelet before 1.36, or its PodsAPI feature "
                     "gate off); looking for it every %g s", self.path, self.check_interval)

    def _set_state(self, state: State, notify: bool = False) -> None:
        if state == State.ABSENT and self.state != State.ABSENT:
            self._log_absent()
        if state != self.state:
            self.state = state
            notify = True
        if notify and self.on_change is not None:
            self.on_change()


def why(error: KubeletError) -> str:
    """A failed Pods API call or watch, in a few words."""
    details = " ".join(error.details.split())
    if error.code == "FAILED_PRECONDITION":  # validateReady: not all pod sources seen yet
        return f"the kubelet is initializing: {details}"
    if error.code == "RESOURCE_EXHAUSTED" and "channel closed" in details:
        return f"the kubelet dropped the watch, which fell behind: {details}"
    if error.kind == ErrorKind.TOO_LARGE:
        return f"a reply over --max-message-bytes: {details}"
    return f"{error.code}: {details}"
