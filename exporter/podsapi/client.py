"""Client for the kubelet's local Pods API: ``ListPods`` and the ``WatchPods`` stream.

One ``grpc.aio`` channel over the Pods API's own unix socket, set up like the podresources
client's (:class:`exporter.kubelet.client.KubeletClient`): a short reconnect back-off, no
retries of gRPC's own, no waiting for readiness, the same receive limit. Errors are the
podresources client's :class:`~exporter.kubelet.client.KubeletError`, classified the same way
(the Pods API answers its own rate limit with the same ``rejected by rate limit``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from .._proto.pods.v1alpha1 import api_pb2 as pods
from ..kubelet.client import KubeletError, classify, kubelet_channel, socket_target
from . import DEFAULT_SOCKET

METHOD_LIST_PODS = "ListPods"
METHOD_WATCH_PODS = "WatchPods"
_PATH = "/v1alpha1.Pods/"

EventType = pods.EventType
ADDED, MODIFIED, DELETED = pods.ADDED, pods.MODIFIED, pods.DELETED
INITIAL_SYNC_COMPLETE = pods.INITIAL_SYNC_COMPLETE


class PodsApiClient:
    """``ListPods`` (one call, rate-limited by the kubelet) and ``WatchPods`` (a stream the
    kubelet does not rate-limit) on ``socket``."""

    def __init__(self, socket: str = DEFAULT_SOCKET, max_message_bytes: int = 16 << 20,
                 timeout: float = 10.0) -> None:
        self.target = socket_target(socket)
        self.timeout = timeout
        self._channel = kubelet_channel(self.target, max_message_bytes)
        self._list = self._channel.unary_unary(
            _PATH + METHOD_LIST_PODS, request_serializer=_serialize,
            response_deserializer=pods.ListPodsResponse.FromString)
        self._watch = self._channel.unary_stream(
            _PATH + METHOD_WATCH_PODS, request_serializer=_serialize,
            response_deserializer=pods.WatchPodsEvent.FromString)

    async def close(self) -> None:
        await self._channel.close(grace=None)

    async def list_pods(self) -> list[bytes]:
        """Every pod the kubelet's pod manager holds, as ``v1.Pod`` bytes."""
        try:
            reply = await self._list(pods.ListPodsRequest(), timeout=self.timeout,
                                     wait_for_ready=False)
        except grpc.aio.AioRpcError as error:
            raise _error(METHOD_LIST_PODS, error) from None
        return list(reply.pods)

    async def watch_pods(self) -> AsyncIterator[tuple[int, bytes]]:
        """The ``WatchPods`` stream as (event type, pod bytes): an ADDED per pod, then
        INITIAL_SYNC_COMPLETE, then every change, until the stream ends (an error)."""
        call = self._watch(pods.WatchPodsRequest(), wait_for_ready=False)
        try:
            async for event in call:
                yield event.type, event.pod
        except grpc.aio.AioRpcError as error:
            raise _error(METHOD_WATCH_PODS, error) from None
        finally:
            call.cancel()
        raise KubeletError(METHOD_WATCH_PODS, "OK", "the kubelet ended the watch",
                           classify(grpc.StatusCode.OK, ""))


def _error(method: str, error: grpc.aio.AioRpcError) -> KubeletError:
    code = error.code()
    details = error.details() or ""
    return KubeletError(method, code.name, details, classify(code, details))


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())
