"""Decoded protobuf messages -> :mod:`exporter.model` data.

The plain conversion shares repeated values (:func:`~exporter.model.shared`); the capped one,
for a pod or allocatable reply past a limit of :mod:`.limits`, leaves the oversized parts out
and records each as a data issue.
"""

from __future__ import annotations

from typing import Any

from ..issues import MAX_NUMA_IDS, IssueKind
from ..model import (
    Allocatable,
    ContainerAssignment,
    DeviceEntry,
    DraDevice,
    MemoryBlock,
    NumaIds,
    PodAssignment,
    shared,
)
from .limits import (
    MAX_ALLOCATABLE_DEVICE_ENTRIES,
    MAX_ALLOCATABLE_MEMORY_BLOCKS,
    MAX_CPU_IDS,
    MAX_ENTRIES_PER_POD,
    MAX_MEMORY_BLOCKS,
    MAX_MEMORY_TYPES,
    numa_count,
    pod_entries,
)


def _numa_ids(message: Any) -> tuple[int, ...] | None:
    if not message.HasField("topology"):
        return None
    return shared(tuple(node.ID for node in message.topology.nodes))


def _memory(blocks: Any) -> tuple[MemoryBlock, ...]:
    return tuple(MemoryBlock(shared(b.memory_type), b.size, _numa_ids(b)) for b in blocks)


def _devices(entries: Any) -> tuple[DeviceEntry, ...]:
    return tuple(DeviceEntry(shared(e.resource_name), tuple(e.device_ids), _numa_ids(e))
                 for e in entries)


def _dra(dynamic_resources: Any) -> tuple[DraDevice, ...]:
    devices = []
    for claim in dynamic_resources:
        for resource in claim.claim_resources:
            devices.append(DraDevice(
                driver=resource.driver_name,
                pool=resource.pool_name,
                device=resource.device_name,
                claim_name=claim.claim_name,
                claim_namespace=claim.claim_namespace,
                share_id=resource.share_id if resource.HasField("share_id") else None,
                cdi_devices=tuple(dict.fromkeys(c.name for c in resource.cdi_devices)),
            ))
    return tuple(devices)


def pod_from_v1(pod: Any) -> PodAssignment:
    return PodAssignment(
        namespace=shared(pod.namespace),
        name=pod.name,
        containers=tuple(ContainerAssignment(
            name=shared(c.name),  # the same few names (app, istio-proxy) in many pods
            cpu_ids=tuple(c.cpu_ids),
            memory=_memory(c.memory),
            devices=_devices(c.devices),
            dra_devices=_dra(c.dynamic_resources),
        ) for c in pod.containers),
        cpu_ids=tuple(pod.cpu_ids),
        memory=_memory(pod.memory),
    )


def pod_from_v1alpha1(pod: Any) -> PodAssignment:
    return PodAssignment(
        namespace=shared(pod.namespace),
        name=pod.name,
        containers=tuple(ContainerAssignment(
            name=shared(c.name),
            devices=tuple(DeviceEntry(d.resource_name, tuple(d.device_ids), None)
                          for d in c.devices),
        ) for c in pod.containers),
    )


def allocatable_from_v1(reply: Any) -> Allocatable:
    return Allocatable(
        cpu_ids=tuple(reply.cpu_ids),
        memory=_memory(reply.memory),
        devices=_devices(reply.devices),
    )



# ---- past a limit -------------------------------------------------------------------------

class _Capped:
    """Converts the parts of one message within the limits, recording those left out."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.oversized: list[tuple[str, str]] = []

    def left_out(self, kind: IssueKind, what: str, size: int, limit: int) -> None:
        self.oversized.append((kind, f"{self.where}: {what} has {size} (at most {limit} are "
                                     "read); left out"))

    def cpu_ids(self, values: Any, what: str) -> tuple[int, ...]:
        if len(values) > MAX_CPU_IDS:
            self.left_out(IssueKind.TOO_MANY_CPU_IDS, f"{what} cpu_ids", len(values),
                          MAX_CPU_IDS)
            return ()
        return tuple(values)

    def numa_ids(self, message: Any, what: str) -> NumaIds:
        if numa_count(message) > MAX_NUMA_IDS:
            self.left_out(IssueKind.TOO_MANY_NUMA_IDS, f"the topology of {what}",
                          numa_count(message), MAX_NUMA_IDS)
            return None  # its locality is unknown
        return _numa_ids(message)

    def memory(self, blocks: Any, what: str, limit: int) -> tuple[MemoryBlock, ...]:
        types = len({b.memory_type for b in blocks})
        if types > MAX_MEMORY_TYPES:
            self.left_out(IssueKind.TOO_MANY_MEMORY_TYPES, f"the memory of {what}", types,
                          MAX_MEMORY_TYPES)
            return ()
        if len(blocks) > limit:
            self.left_out(IssueKind.TOO_MANY_ENTRIES, f"the memory of {what}", len(blocks), limit)
            return ()
        return tuple(MemoryBlock(shared(b.memory_type), b.size,
                                 self.numa_ids(b, f"memory of {what}"))
                     for b in blocks)

    def devices(self, entries: Any, what: str) -> tuple[DeviceEntry, ...]:
        return tuple(DeviceEntry(shared(e.resource_name), tuple(e.device_ids),
                                 self.numa_ids(e, f"a device entry of {what}"))
                     for e in entries)


def capped_pod_from_v1(pod: Any) -> PodAssignment:
    """:func:`pod_from_v1` for a listing past a limit: the oversized parts are left out."""
    capped = _Capped(f"pod {pod.namespace}/{pod.name}")
    entries = pod_entries(pod)
    if entries > MAX_ENTRIES_PER_POD:  # the whole pod is left out
        capped.left_out(IssueKind.TOO_MANY_ENTRIES, "the listing", entries, MAX_ENTRIES_PER_POD)
        return PodAssignment(pod.namespace, pod.name, oversized=tuple(capped.oversized))
    containers = tuple(ContainerAssignment(
        name=c.name,
        cpu_ids=capped.cpu_ids(c.cpu_ids, f"container {c.name}"),
        memory=capped.memory(c.memory, f"container {c.name}", MAX_MEMORY_BLOCKS),
        devices=capped.devices(c.devices, f"container {c.name}"),
        dra_devices=_dra(c.dynamic_resources),
    ) for c in pod.containers)
    return PodAssignment(pod.namespace, pod.name, containers,
                         capped.cpu_ids(pod.cpu_ids, "the pod-level"),
                         capped.memory(pod.memory, "the pod", MAX_MEMORY_BLOCKS),
                         tuple(capped.oversized))


def capped_pod_from_v1alpha1(pod: Any) -> PodAssignment:
    entries = pod_entries(pod, with_topology=False)
    example = (f"pod {pod.namespace}/{pod.name}: the listing has {entries} (at most "
               f"{MAX_ENTRIES_PER_POD} are read); left out")
    return PodAssignment(pod.namespace, pod.name,
                         oversized=((IssueKind.TOO_MANY_ENTRIES, example),))


def capped_allocatable_from_v1(reply: Any) -> Allocatable:
    """:func:`allocatable_from_v1` for a reply past a limit: the oversized lists are left out."""
    capped = _Capped("GetAllocatableResources")
    entries = len(reply.devices) + sum(len(e.device_ids) for e in reply.devices)
    if entries > MAX_ALLOCATABLE_DEVICE_ENTRIES:
        capped.left_out(IssueKind.TOO_MANY_ENTRIES, "the device list", entries,
                        MAX_ALLOCATABLE_DEVICE_ENTRIES)
        devices: tuple[DeviceEntry, ...] = ()
    else:
        devices = capped.devices(reply.devices, "allocatable")
    return Allocatable(capped.cpu_ids(reply.cpu_ids, "allocatable"),
                       capped.memory(reply.memory, "allocatable",
                                     MAX_ALLOCATABLE_MEMORY_BLOCKS),
                       devices, tuple(capped.oversized))

