"""The simulated kubelet's local Pods API (``v1alpha1.Pods``), on a socket of its own.

Served as the v1.37 kubelet serves it (``pkg/kubelet/apis/pods/server.go``,
``pkg/kubelet/server/server.go`` ``ListenAndServePodsServer``):

* every pod the pod manager holds, admitted ones in their phase and the ones rejected at
  admission with the status ``rejectPod`` gave them (phase ``Failed``, the reason, ``"Pod was
  rejected: "`` and the message), as ``v1.Pod#Marshal()`` bytes, sorted by UID;
* the status is the kubelet's own, so it carries no ``extendedResourceClaimStatus`` (the
  status manager does not keep the fields it does not own);
* ``ListPods`` and ``GetPod`` behind a token bucket of their own (100 QPS, burst 10, the
  podresources API's figures, not its bucket); ``WatchPods`` is not limited;
* ``WatchPods``: an ADDED per pod, INITIAL_SYNC_COMPLETE, then ADDED, MODIFIED and DELETED (a
  pod with only its name, namespace and UID) as the node changes; a watcher that falls 100
  events behind is dropped (``RESOURCE_EXHAUSTED`` "watch client channel closed");
* ``FAILED_PRECONDITION`` "Kubelet is initializing" while the ``pods_api_initializing`` fault
  is set (``validateReady``: not every pod source seen yet, as after a kubelet restart); with
  the ``garbage`` fault at ``bytes``, one more "pod" whose bytes are no ``v1.Pod``.

Pods are encoded with the subset of core/v1 the exporter compiles (``exporter._proto.k8s``):
what the exporter reads, nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from ..._proto.k8s.api.core.v1 import generated_pb2 as core
from ..._proto.pods.v1alpha1 import api_pb2 as pods
from ..node.book import SimulatedNode
from ..node.faults import DEFAULT_BURST, DEFAULT_QPS, CallStats, Faults, TokenBucket
from ..podobjects import pod_object
from .messages import Obj, kubelet_view, pod_message

log = logging.getLogger(__name__)


RATE_LIMIT_MESSAGE = "rejected by rate limit"


WATCH_BUFFER = 100  # pods/server.go: each watcher's channel


POLL_SECONDS = 0.05  # how often the node's state is compared with what watchers were sent


GARBAGE = b"\x0a\xff\xff\xff\xff\x0f"  # a length that runs past the end: no v1.Pod


PodKey = tuple[str, str]


class _Dropped(Exception):
    """The watcher fell too far behind."""


class PodsApiServer:
    """The Pods API of a simulated node, served on ``socket_path`` while started."""

    def __init__(self, state: SimulatedNode, socket_path: str | os.PathLike[str],
                 faults: Faults, stats: CallStats, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST):
        self.state = state
        self.socket_path = Path(socket_path)
        self.faults = faults
        self.stats = stats
        self.limiter = TokenBucket(qps, burst)
        self.watch_buffer = WATCH_BUFFER
        self._uids: dict[PodKey, str] = {}
        self._shown: dict[PodKey, tuple[str, bytes]] = {}  # key -> (uid, the bytes sent)
        self._version = -1
        self._watchers: set[asyncio.Queue[tuple[Any, bytes] | None]] = set()
        self._server: grpc.aio.Server | None = None
        self._follower: asyncio.Task[None] | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._server is not None:
            return
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._refresh()
        server = grpc.aio.server(options=[("grpc.max_send_message_length", 1 << 30)])
        server.add_generic_rpc_handlers((self._handler(),))
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self._server = server
        self._follower = asyncio.create_task(self._follow())
        log.info("simulated kubelet serving the Pods API on %s", self.socket_path)

    async def stop(self) -> None:
        """Stop serving, end the watches and remove the socket."""
        if self._follower is not None:
            self._follower.cancel()
            self._follower = None
        for queue in list(self._watchers):
            self._drop(queue)
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def drop_watchers(self) -> int:
        """End every watch as the kubelet ends a slow watcher's; returns how many."""
        watchers = list(self._watchers)
        for queue in watchers:
            self._drop(queue)
        return len(watchers)

    # ---- the node's pods -----------------------------------------------------------------

    def objects(self) -> dict[PodKey, Obj]:
        """Every pod the simulated kubelet holds, as its Pods API shows it."""
        node = self.state.spec.name
        wanted: dict[PodKey, Obj] = {}
        for key, sim in self.state.pods.items():
            uid = self._uids.setdefault(key, sim.uid or str(uuid.uuid4()))
            wanted[key] = pod_object(sim.spec, node, sim.spec.phase, uid=uid)
        for key, obj in self.state.rejected_pods.items():
            wanted[key] = json.loads(json.dumps(obj))
        for key in set(self._uids) - set(self.state.pods):
            del self._uids[key]
        return {key: kubelet_view(obj) for key, obj in wanted.items()}

    def _refresh(self) -> None:
        """Bring what watchers were sent up to date: the events that takes go to every
        watcher (one that is ``watch_buffer`` events behind is dropped)."""
        if self.state.version == self._version:
            return
        self._version = self.state.version
        events: list[tuple[Any, bytes]] = []
        current: dict[PodKey, tuple[str, bytes]] = {}
        for key, obj in self.objects().items():
            uid = str((obj.get("metadata") or {}).get("uid", ""))
            current[key] = (uid, pod_message(obj).SerializeToString(deterministic=True))
        for key, (uid, _) in self._shown.items():
            if key not in current or current[key][0] != uid:
                gone = core.Pod()
                gone.metadata.namespace, gone.metadata.name = key
                gone.metadata.uid = uid
                events.append((pods.DELETED, gone.SerializeToString()))
        for key, (uid, raw) in current.items():
            shown = self._shown.get(key)
            if shown is None or shown[0] != uid:
                events.append((pods.ADDED, raw))
            elif shown[1] != raw:
                events.append((pods.MODIFIED, raw))
        self._shown = current
        for event in events:
            for queue in list(self._watchers):
                if queue.qsize() >= self.watch_buffer:
                    self._drop(queue)
                else:
                    queue.put_nowait(event)

    async def _follow(self) -> None:
        while True:
            self._refresh()
            await asyncio.sleep(POLL_SECONDS)

    def _drop(self, queue: asyncio.Queue[tuple[Any, bytes] | None]) -> None:
        if queue in self._watchers:
            self._watchers.discard(queue)
            queue.put_nowait(None)

    def _sorted(self) -> list[bytes]:
        """The pods' bytes sorted by UID, as ListPods and WatchPods send them."""
        self._refresh()
        pods_bytes = [raw for _, raw in sorted(self._shown.values())]
        if self.faults.garbage == "bytes":
            pods_bytes.insert(len(pods_bytes) // 2, GARBAGE)
        return pods_bytes

    # ---- request handling ----------------------------------------------------------------

    def _handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler("v1alpha1.Pods", {
            "ListPods": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=pods.ListPodsRequest.FromString,
                response_serializer=pods.ListPodsResponse.SerializeToString),
            "GetPod": grpc.unary_unary_rpc_method_handler(
                self._get, request_deserializer=pods.GetPodRequest.FromString,
                response_serializer=pods.GetPodResponse.SerializeToString),
            "WatchPods": grpc.unary_stream_rpc_method_handler(
                self._watch, request_deserializer=pods.WatchPodsRequest.FromString,
                response_serializer=pods.WatchPodsEvent.SerializeToString),
        })

    async def _unary_checks(self, method: str, context: grpc.aio.ServicerContext) -> None:
        if not self.limiter.allow():
            await self._abort(method, context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                              RATE_LIMIT_MESSAGE)
        await self._ready(method, context)

    async def _ready(self, method: str, context: grpc.aio.ServicerContext) -> None:
        if self.faults.pods_api_initializing:
            await self._abort(method, context, grpc.StatusCode.FAILED_PRECONDITION,
                              "Kubelet is initializing")

    async def _abort(self, method: str, context: grpc.aio.ServicerContext,
                     code: grpc.StatusCode, details: str) -> None:
        self.stats.add(f"/v1alpha1.Pods/{method}", code.name)
        await context.abort(code, details)

    async def _list(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._unary_checks("ListPods", context)
        self.stats.add("/v1alpha1.Pods/ListPods", "OK")
        return pods.ListPodsResponse(pods=self._sorted())

    async def _get(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._unary_checks("GetPod", context)
        self._refresh()
        for uid, raw in self._shown.values():
            if uid == request.podUID:
                self.stats.add("/v1alpha1.Pods/GetPod", "OK")
                return pods.GetPodResponse(pod=raw)
        await self._abort("GetPod", context, grpc.StatusCode.NOT_FOUND,
                          f"pod with UID {request.podUID} not found")

    async def _watch(self, request: Any,
                     context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await self._ready("WatchPods", context)
        queue: asyncio.Queue[tuple[Any, bytes] | None] = asyncio.Queue()
        self._watchers.add(queue)  # before the initial list, as the kubelet registers first
        try:
            for raw in self._sorted():
                yield pods.WatchPodsEvent(type=pods.ADDED, pod=raw)
            yield pods.WatchPodsEvent(type=pods.INITIAL_SYNC_COMPLETE)
            while True:
                event = await queue.get()
                if event is None:
                    raise _Dropped
                yield pods.WatchPodsEvent(type=event[0], pod=event[1])
        except _Dropped:
            await self._abort("WatchPods", context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                              "watch client channel closed")
        finally:
            self._watchers.discard(queue)
