"""The Node's allocatable, as the kubelet's node status computes it, for the resource-fit
predicate when no Node object is at hand (the Pods API alone, or no pod context).

The kubelet sets ``status.allocatable`` (``nodestatus.MachineInfo``) to its capacity (cAdvisor's
CPUs and memory, the hugepages of every size, ``maxPods``, each device plugin's healthy
devices) less ``GetNodeAllocatableReservation``: ``systemReserved`` + ``kubeReserved`` + the
hard eviction threshold on ``memory.available`` (``cm/helpers.go`` ``hardEvictionReservation``;
the kubelet's default is ``100Mi``); ``reservedSystemCPUs``, when set, replaces the CPU part
(``cmd/kubelet/app/server.go``). Memory allocatable also loses every hugepage
(``MachineInfo``: "Allocatable memory excludes hugepages"). With the kubelet's config file the
exporter computes all of it from sysfs (online CPUs, each NUMA node's ``MemTotal`` and
hugepages); without it, from what ``GetAllocatableResources`` lists (the CPU manager's
allocatable CPUs, the memory manager's allocatable memory), which under the ``none``/``None``
policies is nothing.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from ...model import KubeletSnapshot, Topology
from ...podcontext import quantity
from ...topology import hugepage_resource_name, parse_cpulist
from ..kubelet.podshape import CPU, MEMORY, is_memory_resource

DEFAULT_EVICTION_MEMORY = "100Mi"  # KubeletConfiguration's default evictionHard memory.available
MEMORY_AVAILABLE = "memory.available"


def _float32(value: float) -> float:
    """``value`` rounded to a float32: ``eviction/helpers.go`` ``parsePercentage`` parses a
    percentage with ``ParseFloat(…, 32)`` and divides as float32, so 5% is 0.0500000007, and
    ``GetThresholdQuantity`` multiplies the capacity by that (26 bytes more of 32Gi)."""
    packed: float = struct.unpack("f", struct.pack("f", value))[0]
    return packed


class ReservationError(ValueError):
    """A reservation field of the kubelet's config file that the kubelet would refuse."""


@dataclass(frozen=True)
class Reservation:
    """What the kubelet's config file reserves: CPU in millicores, memory in bytes, and the
    hard eviction threshold on ``memory.available`` (bytes, or a fraction of the capacity)."""

    cpu_millis: int = 0
    memory: int = 0
    eviction_memory: int = 0
    eviction_fraction: float = 0.0

    def memory_total(self, capacity: int) -> int:
        return (self.memory + self.eviction_memory
                + int(float(capacity) * self.eviction_fraction))


# what a config file that says nothing reserves: the default hard eviction threshold only
DEFAULT_RESERVATION = Reservation(eviction_memory=100 << 20)


def _resources(document: Mapping[str, object], key: str) -> dict[str, int]:
    values = document.get(key) or {}
    if not isinstance(values, Mapping):
        raise ReservationError(f"{key} must be a map")
    found: dict[str, int] = {}
    for name, value in values.items():
        if name not in (CPU, MEMORY, "ephemeral-storage", "pid"):
            raise ReservationError(f"{key}: cannot reserve {name!r} resource")
        try:
            found[str(name)] = quantity(str(name), value)
        except ValueError:
            raise ReservationError(f"{key}.{name}: not a quantity: {value!r}") from None
    return found


def parse_reservation(document: Mapping[str, object]) -> Reservation:
    """``reservedSystemCPUs``, ``systemReserved``, ``kubeReserved`` and ``evictionHard`` of a
    KubeletConfiguration (its defaults where they are left out)."""
    system, kube = _resources(document, "systemReserved"), _resources(document, "kubeReserved")
    cpu = system.get(CPU, 0) + kube.get(CPU, 0)
    reserved_cpus = document.get("reservedSystemCPUs")
    if reserved_cpus:
        try:
            count = len(parse_cpulist(str(reserved_cpus)))
        except ValueError:
            raise ReservationError(f"reservedSystemCPUs: not a CPU list: {reserved_cpus!r}") \
                from None
        if count:
            cpu = 1000 * count  # server.go: it replaces systemReserved and kubeReserved cpu
    eviction = document.get("evictionHard")
    if eviction is None:
        eviction = {MEMORY_AVAILABLE: DEFAULT_EVICTION_MEMORY}
    if not isinstance(eviction, Mapping):
        raise ReservationError("evictionHard must be a map")
    threshold = str(eviction.get(MEMORY_AVAILABLE, "0")).strip()
    absolute, fraction = 0, 0.0
    try:
        if threshold.endswith("%"):
            fraction = _float32(_float32(float(threshold[:-1])) / 100)
            if not 0 <= fraction <= 1 or math.isnan(fraction):
                raise ValueError(threshold)
        else:
            absolute = quantity(MEMORY, threshold)
    except ValueError:
        raise ReservationError(f"evictionHard.{MEMORY_AVAILABLE}: not a quantity or "
                               f"percentage: {threshold!r}") from None
    return Reservation(cpu, system.get(MEMORY, 0) + kube.get(MEMORY, 0), absolute, fraction)


def derived_allocatable(snapshot: KubeletSnapshot, topology: Topology | None,
                        max_pods: int | None, reservation: Reservation | None
                        ) -> dict[str, int]:
    """The Node's allocatable without the Node object: from sysfs and the config file's
    ``reservation`` when it was read, else from ``GetAllocatableResources``; ``pods`` from
    ``maxPods`` (unknown without the file); devices: each resource's healthy devices."""
    assert snapshot.allocatable is not None
    derived: dict[str, int] = {} if max_pods is None else {"pods": max_pods}
    machine = _machine(topology, reservation) if reservation is not None else {}
    if machine:
        derived.update(machine)
    else:
        if snapshot.allocatable.cpu_ids:
            derived[CPU] = 1000 * len(set(snapshot.allocatable.cpu_ids))
        for block in snapshot.allocatable.memory:
            if block.size > 0 and is_memory_resource(block.memory_type):
                derived[block.memory_type] = derived.get(block.memory_type, 0) + block.size
    healthy = {(e.resource, d) for e in snapshot.allocatable.devices if e.resource
               for d in e.device_ids}
    for resource, _ in healthy:
        derived[resource] = derived.get(resource, 0) + 1
    return derived


def _machine(topology: Topology | None, reservation: Reservation) -> dict[str, int]:
    """CPUs, memory and hugepages from sysfs less the reservation; empty when sysfs did not
    give every NUMA node's memory."""
    if topology is None or not topology.numa_nodes or any(
            node.memory_bytes is None for node in topology.numa_nodes.values()):
        return {}
    found: dict[str, int] = {}
    if topology.cpu_to_numa:
        found[CPU] = max(0, 1000 * len(topology.cpu_to_numa) - reservation.cpu_millis)
    capacity = sum(node.memory_bytes or 0 for node in topology.numa_nodes.values())
    hugepages: dict[str, int] = {}
    for node in topology.numa_nodes.values():
        for size, pages in node.hugepages.items():
            name = hugepage_resource_name(size)
            hugepages[name] = hugepages.get(name, 0) + size * pages
    found[MEMORY] = max(0, capacity - reservation.memory_total(capacity)
                        - sum(hugepages.values()))
    found.update(hugepages)
    return found
