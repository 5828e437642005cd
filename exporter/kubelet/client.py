"""Client for the kubelet podresources gRPC API: the calls, their raw replies, their errors.

One long-lived ``grpc.aio`` channel over the unix socket. gRPC reconnects on its own when the
kubelet re-creates the socket; the reconnect back-off is kept short so a restarted kubelet is
seen again within seconds. Calls never wait for readiness: a missing kubelet answers
``UNAVAILABLE`` at once instead of holding a call open.

Replies are returned as raw bytes: ``decode.py`` turns them into plain data, reusing what did
not change, and a reply that is not valid protobuf becomes a clear error there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import grpc
import grpc.aio

from .._proto.v1 import api_pb2 as v1
from .._proto.v1alpha1 import api_pb2 as v1alpha1

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_SECONDS = 10.0

METHOD_LIST = "List"
METHOD_GET_ALLOCATABLE = "GetAllocatableResources"
METHOD_GET = "Get"

_PATH_V1 = "/v1.PodResourcesLister/"
_PATH_V1ALPHA1 = "/v1alpha1.PodResourcesLister/"

class ErrorKind(StrEnum):
    """What a failed call means for the exporter (the ``kind`` of a KubeletError)."""

    RATE_LIMITED = "rate_limited"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"
    UNIMPLEMENTED = "unimplemented"
    DISABLED = "disabled"
    NOT_FOUND = "not_found"
    DEADLINE = "deadline"
    INVALID_REPLY = "invalid_reply"
    OTHER = "other"
    INTERNAL_ERROR = "internal_error"  # not the kubelet's: the exporter's own refresh failed


RATE_LIMIT_MESSAGE = "rejected by rate limit"


class KubeletError(Exception):
    """A podresources call that did not produce data, classified by what it means."""

    def __init__(self, method: str, code: str, details: str, kind: ErrorKind):
        super().__init__(f"{method}: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details
        self.kind = kind


def classify(code: grpc.StatusCode, details: str) -> ErrorKind:
    """Map a gRPC status to what it means here (SPEC section 2, "Errors")."""
    text = (details or "").lower()
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        # The same code is used for the kubelet's rate limit and for gRPC's receive limit.
        return ErrorKind.RATE_LIMITED if RATE_LIMIT_MESSAGE in text else ErrorKind.TOO_LARGE
    if code == grpc.StatusCode.UNAVAILABLE:
        return ErrorKind.UNAVAILABLE
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return ErrorKind.UNIMPLEMENTED
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorKind.DEADLINE
    if code == grpc.StatusCode.UNKNOWN and "disabled" in text:
        return ErrorKind.DISABLED
    if code == grpc.StatusCode.UNKNOWN and "not found" in text:
        return ErrorKind.NOT_FOUND
    return ErrorKind.OTHER


def describe(error: KubeletError, target: str, max_message_bytes: int, timeout: float) -> str:
    """What a failed call means, in one line, naming the flag that matters: the refresh loop's
    log and the ``snapshot`` command both say it so."""
    details = " ".join(error.details.split())
    if error.kind == ErrorKind.UNAVAILABLE:
        return (f"kubelet podresources API unreachable at {target}: {error.code} {details} "
                "(check --socket)")
    if error.kind == ErrorKind.TOO_LARGE:
        return (f"the kubelet's reply to {error.method} is larger than --max-message-bytes "
                f"({max_message_bytes}): {details}")
    if error.kind == ErrorKind.RATE_LIMITED:
        return (f"kubelet rate limit hit: the kubelet at {target} refused {error.method} (the "
                "quota is shared by every client on the node)")
    if error.kind == ErrorKind.DEADLINE:
        return (f"the kubelet at {target} did not answer {error.method} within {timeout:g} s "
                "(--timeout)")
    if error.kind == ErrorKind.INVALID_REPLY:
        return (f"the kubelet at {target} sent a reply to {error.method} that is not valid "
                f"protobuf: {details}")
    return f"kubelet call {error.method} to {target} failed: {error.code} {details}"


def socket_target(socket: str) -> str:
    """``/path``, ``unix:/path`` or ``unix:///path`` -> the gRPC target ``unix:///path``."""
    path = socket
    if path.startswith("unix://"):
        path = path[len("unix://"):]
    elif path.startswith("unix:"):
        path = path[len("unix:"):]
    if not path.startswith("/"):
        raise ValueError(f"socket must be an absolute path or unix:// URL, got {socket!r}")
    return "unix://" + path


def socket_path(socket: str) -> str:
    """The filesystem path of the socket named by ``--socket``."""
    return socket_target(socket)[len("unix://"):]


@dataclass(frozen=True, slots=True)
class CallResult:
    """A reply, undecoded (:mod:`exporter.kubelet.decode` decodes it)."""

    raw: bytes


class KubeletClient:
    """The three podresources calls (and the v1alpha1 List), returning the raw replies.

    ``observer(method, code, seconds)`` is called after every call, successful or not, so the
    caller can count requests by gRPC status without this class knowing about metrics.
    """

    def __init__(self, socket: str = DEFAULT_SOCKET,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS,
                 observer: Callable[[str, str, float], None] | None = None) -> None:
        self.target = socket_target(socket)
        self.max_message_bytes = max_message_bytes
        self.timeout = timeout
        self.observer = observer
        self._channel = kubelet_channel(self.target, max_message_bytes)
        raw = None  # no deserializer: replies arrive as bytes
        self._list = self._channel.unary_unary(
            _PATH_V1 + METHOD_LIST, request_serializer=_serialize, response_deserializer=raw)
        self._allocatable = self._channel.unary_unary(
            _PATH_V1 + METHOD_GET_ALLOCATABLE, request_serializer=_serialize,
            response_deserializer=raw)
        self._get = self._channel.unary_unary(
            _PATH_V1 + METHOD_GET, request_serializer=_serialize, response_deserializer=raw)
        self._list_v1alpha1 = self._channel.unary_unary(
            _PATH_V1ALPHA1 + METHOD_LIST, request_serializer=_serialize,
            response_deserializer=raw)

    async def close(self) -> None:
        await self._channel.close(grace=None)

    async def list_pods(self) -> CallResult:
        """v1 ``List``: every active pod with its exclusive assignments."""
        return await self._call(METHOD_LIST, self._list, v1.ListPodResourcesRequest())

    async def list_pods_v1alpha1(self) -> CallResult:
        """v1alpha1 ``List`` (devices only) for kubelets that lack v1."""
        return await self._call(METHOD_LIST, self._list_v1alpha1,
                                v1alpha1.ListPodResourcesRequest())

    async def get_allocatable(self) -> CallResult:
        """``GetAllocatableResources``: what could be assigned (healthy devices only)."""
        return await self._call(METHOD_GET_ALLOCATABLE, self._allocatable,
                                v1.AllocatableResourcesRequest())

    async def get_pod(self, namespace: str, name: str) -> CallResult:
        """``Get`` one pod; used to probe whether the kubelet serves ``Get`` at all."""
        return await self._call(METHOD_GET, self._get,
                                v1.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace))

    async def _call(self, method: str, stub: Any, request: Any) -> CallResult:
        started = time.perf_counter()
        try:
            raw = await stub(request, timeout=self.timeout, wait_for_ready=False)
        except grpc.aio.AioRpcError as error:
            elapsed = time.perf_counter() - started
            code = error.code()
            self._observe(method, code.name, elapsed)
            raise KubeletError(method, code.name, error.details() or "",
                               classify(code, error.details() or "")) from None
        elapsed = time.perf_counter() - started
        self._observe(method, "OK", elapsed)
        return CallResult(raw)

    def _observe(self, method: str, code: str, seconds: float) -> None:
        if self.observer is not None:
            self.observer(method, code, seconds)


def kubelet_channel(target: str, max_message_bytes: int) -> grpc.aio.Channel:
    """A channel to one of the kubelet's unix sockets (podresources, the Pods API)."""
    return grpc.aio.insecure_channel(target, options=[
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", 1024 * 1024),
        # Find a restarted kubelet quickly; gRPC's default back-off grows to 120 s.
        ("grpc.initial_reconnect_backoff_ms", 500),
        ("grpc.min_reconnect_backoff_ms", 500),
        ("grpc.max_reconnect_backoff_ms", 3000),
        # Retries are ours to decide (and to count); never let gRPC repeat a call.
        ("grpc.enable_retries", 0),
        ("grpc.default_authority", "localhost"),
    ])


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())
