"""Kubelet replies -> plain data, handing back the same object for what did not change.

Decoding is protobuf's (upb, in C). Converting every message into Python objects on every
refresh would cost far more than the decode itself, so each pod is converted once: the reply is
cut into its pods' encoded bytes (by protobuf too, reading the pods as ``repeated bytes``), and
bytes seen before map straight to the earlier :class:`PodAssignment`. The kubelet lists device
entries in a varying order (Go map iteration), so a second, order-free key (the sorted encoded
entries of each container) catches the same pod in a new order. The accounting's
:class:`~exporter.accounting.Ledger` then recognises unchanged pods by identity.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from .._proto.v1 import api_pb2 as v1
from .._proto.v1alpha1 import api_pb2 as v1alpha1
from ..issues import IssueKind
from ..model import Allocatable, ApiVersion, PodAssignment
from .client import ErrorKind, KubeletError
from .convert import (
    allocatable_from_v1,
    capped_allocatable_from_v1,
    capped_pod_from_v1,
    capped_pod_from_v1alpha1,
    pod_from_v1,
    pod_from_v1alpha1,
)
from .limits import (
    MAX_ALLOCATABLE_DEVICE_ENTRIES,
    MAX_CPU_IDS_PER_REPLY,
    SMALLEST_OVERSIZED,
    allocatable_exceeds_limits,
    exceeds_limits_v1,
    exceeds_limits_v1alpha1,
    message_cpus,
    pod_cpus,
)

# Caches are cleaned of departed pods at most this often, and dropped when they grow beyond
# this many entries per listed pod (a container with many devices has many orderings).
PRUNE_SECONDS = 60.0
MAX_VARIANTS_PER_POD = 16


@dataclass(frozen=True, slots=True)
class Replies:
    """The kubelet's raw replies for one refresh.

    ``allocatable_reply`` is ``None`` when ``GetAllocatableResources`` is not offered (or under
    v1alpha1). Passing the same bytes object again (the loop re-reads allocatable resources
    only every ``--allocatable-interval``) costs nothing.
    """

    list_reply: bytes
    api_version: ApiVersion = ApiVersion.V1
    allocatable_reply: bytes | None = None


def invalid_reply(method: str, error: Exception) -> KubeletError:
    return KubeletError(method, "OK", f"reply is not a valid {method} response: {error}",
                        ErrorKind.INVALID_REPLY)


# ---- order-free keys ----------------------------------------------------------------------

_device_bytes = v1.ContainerDevices.SerializeToString
_memory_bytes = v1.ContainerMemory.SerializeToString
_claim_bytes = v1.ClaimResource.SerializeToString
_alpha_device_bytes = v1alpha1.ContainerDevices.SerializeToString


def _claim_key(claim: Any) -> tuple[Any, ...]:
    return (claim.claim_name, claim.claim_namespace,
            tuple(sorted(map(_claim_bytes, claim.claim_resources))))


def order_free_key_v1(pod: Any) -> tuple[Any, ...]:
    """Equal for two listings of the same pod that differ only in the order of entries."""
    return (pod.namespace, pod.name, tuple(pod.cpu_ids), tuple(sorted(map(_memory_bytes,
                                                                           pod.memory))),
            tuple((c.name, tuple(c.cpu_ids), tuple(sorted(map(_memory_bytes, c.memory))),
                   tuple(sorted(map(_device_bytes, c.devices))),
                   tuple(sorted(map(_claim_key, c.dynamic_resources))))
                  for c in pod.containers))


def order_free_key_v1alpha1(pod: Any) -> tuple[Any, ...]:
    return (pod.namespace, pod.name,
            tuple((c.name, tuple(sorted(map(_alpha_device_bytes, c.devices))))
                  for c in pod.containers))


def digest(key: tuple[Any, ...], entries: Sequence[bytes] = ()) -> bytes:
    """What a cache keeps of an order-free key: its 128-bit BLAKE2b digest (the key repeats a
    pod's encoded entries; an allocatable reply's, all of its devices). The key's parts are
    strings, bytes, integers and tuples of them, whose ``repr`` tells any two keys apart;
    ``entries`` (thousands of encoded devices) are hashed as they are, after their lengths."""
    hashed = hashlib.blake2b(repr((key, tuple(map(len, entries)))).encode(), digest_size=16)
    hashed.update(b"".join(entries))
    return hashed.digest()


# ---- decoders -----------------------------------------------------------------------------

def split_repeated_field(raw: bytes, field_number: int = 1) -> list[bytes]:
    """The encoded elements of one repeated message field, without decoding them.

    protobuf (in C) reads the reply as a message whose field ``field_number`` is ``repeated
    bytes``: on the wire an embedded message and a ``bytes`` field are the same, so each pod's
    bytes come back as they were sent, and every other field is skipped as unknown. So each
    pod's bytes can be looked up before anything is decoded. Raises ``ValueError`` on anything
    protobuf does not parse; callers then let protobuf decode the whole.
    """
    try:
        message = _chunk_message(field_number).FromString(raw)
    except DecodeError as error:
        raise ValueError(f"unparsable framing: {error}") from None
    return list(message.chunks)


@functools.cache
def _chunk_message(field_number: int) -> Any:
    """A message type with one field, ``repeated bytes chunks = field_number``."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(chunks_file_descriptor(field_number))
    descriptor = pool.FindMessageTypeByName(f"podresources_exporter.Chunks{field_number}")
    return message_factory.GetMessageClass(descriptor)


def chunks_file_descriptor(field_number: int) -> bytes:
    """The encoded ``FileDescriptorProto`` declaring ``Chunks<n>``, written out field by field:
    building it with ``descriptor_pb2`` would import descriptor.proto's whole schema (about
    0.6 MiB of memory) for five fields."""
    def field(number: int, value: bytes | int) -> bytes:
        if isinstance(value, int):  # a varint field
            return _varint(number << 3) + _varint(value)
        return _varint(number << 3 | 2) + _varint(len(value)) + value

    repeated, type_bytes = 3, 12  # FieldDescriptorProto.LABEL_REPEATED, .TYPE_BYTES
    chunks = (field(1, b"chunks") + field(3, field_number) + field(4, repeated)
              + field(5, type_bytes))  # name, number, label, type
    message = field(1, f"Chunks{field_number}".encode()) + field(2, chunks)  # name, field
    return (field(1, f"podresources_exporter_chunks_{field_number}.proto".encode())
            + field(2, b"podresources_exporter") + field(4, message)
            + field(12, b"proto3"))  # name, package, message_type, syntax


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class ListDecoder:
    """Decodes ``List`` replies; an unchanged pod comes back as the same object."""

    def __init__(self, reply_type: Any, pod_type: Any, convert: Callable[[Any], PodAssignment],
                 order_free_key: Callable[[Any], tuple[Any, ...]],
                 exceeds_limits: Callable[[Any], bool],
                 capped: Callable[[Any], PodAssignment], method: str = "List") -> None:
        self._reply_type = reply_type
        self._pod_type = pod_type
        self._serialize = pod_type.SerializeToString
        self._convert = convert
        self._order_free_key = order_free_key
        self._exceeds_limits = exceeds_limits
        self._capped = capped
        self._method = method
        self._by_bytes: dict[bytes, PodAssignment] = {}
        self._by_key: dict[bytes, PodAssignment] = {}  # order-free key's digest -> pod
        self._cpus: dict[int, int] = {}  # id of a kept pod -> its CPU ids, for the reply limit
        self._pruned_at = time.monotonic()

    @classmethod
    def v1(cls) -> ListDecoder:
        return cls(v1.ListPodResourcesResponse, v1.PodResources, pod_from_v1, order_free_key_v1,
                   exceeds_limits_v1, capped_pod_from_v1)

    @classmethod
    def v1alpha1(cls) -> ListDecoder:
        return cls(v1alpha1.ListPodResourcesResponse, v1alpha1.PodResources, pod_from_v1alpha1,
                   order_free_key_v1alpha1, exceeds_limits_v1alpha1, capped_pod_from_v1alpha1)

    def decode(self, raw: bytes) -> tuple[PodAssignment, ...]:
        try:
            chunks = split_repeated_field(raw)
        except ValueError:
            chunks = self._reserialized(raw)  # framing we do not follow: let protobuf decode
        known = list(map(self._by_bytes.get, chunks))  # known pods, at C speed
        if all(known):
            pods = cast(list[PodAssignment], known)
            if sum(map(self._cpus.__getitem__, map(id, pods))) > MAX_CPU_IDS_PER_REPLY:
                pods = self._within_budget(chunks, known, {})
        else:
            messages = {index: self._parse(chunks[index])
                        for index, pod in enumerate(known) if pod is None}
            total = sum(map(self._cpus.__getitem__, map(id, filter(None, known)))) + sum(
                message_cpus(message, len(chunks[index])) for index, message in messages.items())
            if total > MAX_CPU_IDS_PER_REPLY:
                pods = self._within_budget(chunks, known, messages)
            else:
                pods = [pod if pod is not None else self._learn(chunks[index], messages[index])
                        for index, pod in enumerate(known)]
        self._prune(pods)
        return tuple(pods)

    def _within_budget(self, chunks: list[bytes], known: list[PodAssignment | None],
                       messages: dict[int, Any]) -> list[PodAssignment]:
        """A reply listing more CPU ids in all than a node can have: pods are read in
        (namespace, name) order while their CPU ids fit ``MAX_CPU_IDS_PER_REPLY``; the rest
        are left out (and not kept, as the next reply may differ)."""
        def sort_key(index: int) -> tuple[str, str, bytes]:
            pod = known[index]
            named = pod if pod is not None else messages[index]
            return (named.namespace, named.name, chunks[index])

        def cpus_of(index: int) -> int:
            pod = known[index]
            if pod is not None:
                return self._cpus[id(pod)]
            return message_cpus(messages[index], len(chunks[index]))

        total = sum(map(cpus_of, range(len(chunks))))
        pods: list[PodAssignment | None] = [None] * len(chunks)
        used = 0
        for index in sorted(range(len(chunks)), key=sort_key):
            pod = known[index]
            cpus = cpus_of(index)
            if used + cpus <= MAX_CPU_IDS_PER_REPLY:
                used += cpus
                pods[index] = pod if pod is not None else self._learn(chunks[index],
                                                                      messages[index])
            else:
                namespace, name = sort_key(index)[:2]
                pods[index] = PodAssignment(namespace, name, oversized=((
                    IssueKind.TOO_MANY_CPU_IDS,
                    f"pod {namespace}/{name}: the reply lists {total} CPU ids in all (at most "
                    f"{MAX_CPU_IDS_PER_REPLY} are read); this pod is left out"),))
        return cast(list[PodAssignment], pods)

    def _reserialized(self, raw: bytes) -> list[bytes]:
        try:
            reply = self._reply_type.FromString(raw)
        except (DecodeError, ValueError, RecursionError) as error:
            raise invalid_reply(self._method, error) from None
        return [self._serialize(message) for message in reply.pod_resources]

    def _parse(self, chunk: bytes) -> Any:
        try:
            return self._pod_type.FromString(chunk)
        except (DecodeError, ValueError, RecursionError) as error:
            raise invalid_reply(self._method, error) from None

    def _learn(self, chunk: bytes, message: Any) -> PodAssignment:
        """A pod not seen in these exact bytes: convert it, unless seen in another order."""
        if len(chunk) > SMALLEST_OVERSIZED and self._exceeds_limits(message):
            # no order-free key: it would build what is capped
            pod = self._capped(message)
        else:
            key = digest(self._order_free_key(message))
            found = self._by_key.get(key)
            if found is None:
                found = self._by_key[key] = self._convert(message)
            pod = found
        self._by_bytes[chunk] = pod
        self._cpus[id(pod)] = pod_cpus(pod)
        return pod

    def _prune(self, pods: list[PodAssignment]) -> None:
        limit = MAX_VARIANTS_PER_POD * (len(pods) + 16)
        if len(self._by_bytes) <= limit and time.monotonic() - self._pruned_at < PRUNE_SECONDS:
            return
        self._pruned_at = time.monotonic()
        live = {id(pod) for pod in pods}
        self._by_key = {k: v for k, v in self._by_key.items() if id(v) in live}
        self._by_bytes = {k: v for k, v in self._by_bytes.items() if id(v) in live}
        if len(self._by_bytes) > limit:
            self._by_bytes = {}  # too many orderings to keep: learn them again
        kept = {id(pod) for pod in self._by_key.values()} | {
            id(pod) for pod in self._by_bytes.values()}
        self._cpus = {identity: n for identity, n in self._cpus.items() if identity in kept}


class AllocatableDecoder:
    """Decodes ``GetAllocatableResources``; an unchanged reply comes back as the same object.

    The reply is recognised before it is decoded: its device entries, cut out as they were
    sent (as a ``List`` reply's pods are) and sorted, and the rest of its bytes (CPU ids,
    memory) make an order-free key. The same key as last time is the same allocatable view,
    checked and converted then; anything else is decoded, checked and converted in full.
    """

    def __init__(self) -> None:
        self._key: bytes | None = None  # the digest of the last reply's order-free key
        self._sorted: bytes | None = None  # and of its entries sorted, CPU ids included
        self._value: Allocatable | None = None

    def decode(self, raw: bytes) -> Allocatable:
        key = allocatable_key(raw)
        if key is not None and key == self._key and self._value is not None:
            return self._value
        try:
            reply = v1.AllocatableResourcesResponse.FromString(raw)
        except (DecodeError, ValueError, RecursionError) as error:
            raise invalid_reply("GetAllocatableResources", error) from None
        if allocatable_exceeds_limits(reply):
            self._key, self._sorted, self._value = None, None, capped_allocatable_from_v1(reply)
            return self._value
        # the kubelet lists its allocatable CPUs in a set's order, another at every call
        # (GetAllocatableCPUs().UnsortedList()), which the byte key sees as another reply: the
        # same entries with the CPU ids in another order are the same allocatable
        ordered = digest((tuple(sorted(reply.cpu_ids)), len(reply.memory)),
                         [*sorted(m.SerializeToString(deterministic=True) for m in reply.memory),
                          *sorted(d.SerializeToString(deterministic=True) for d in reply.devices)])
        if ordered == self._sorted and self._value is not None:
            self._key = key
            return self._value
        self._key, self._sorted, self._value = key, ordered, allocatable_from_v1(reply)
        return self._value


def allocatable_key(raw: bytes) -> bytes | None:
    """A ``GetAllocatableResources`` reply's order-free key: the digest of its device entries'
    encoded bytes, sorted (the kubelet lists them in Go map order), and of every other field's
    bytes as sent; None for a reply that does not split, or lists more entries than one is
    read with (:data:`~exporter.kubelet.limits.MAX_ALLOCATABLE_DEVICE_ENTRIES`)."""
    try:
        message = _chunk_message(1).FromString(raw)
    except DecodeError:
        return None
    entries = sorted(message.chunks)
    if len(entries) > MAX_ALLOCATABLE_DEVICE_ENTRIES:
        return None
    message.ClearField("chunks")
    rest = message.SerializeToString()  # what protobuf kept as unknown: CPU ids, memory
    hashed = hashlib.blake2b(rest, digest_size=16)
    hashed.update(struct.pack(f"<I{len(entries)}I", len(rest), *map(len, entries)))
    hashed.update(b"".join(entries))
    return hashed.digest()
