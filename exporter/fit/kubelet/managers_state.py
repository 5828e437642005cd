"""The node as the kubelet's resource managers hold it, for admission: pure data.

:class:`NodeState` is what the CPU, memory and device managers know when a pod arrives: per
NUMA node, the CPUs (all online ones, for the capacity-based minimum width; the allocatable,
unassigned ones, for hints), each memory type's allocatable and free bytes with the node's
memory group (the memory manager's ``Cells``) and its number of assignments, and every device
with its NUMA nodes (registered ones for the capacity, healthy unassigned ones for hints).
It is built from one snapshot by :mod:`exporter.fit.snapshotstate`, or by hand in tests.
Allocation (:mod:`exporter.fit.kubelet.cpumanager.policy_static`) returns a new state, so repeated
placement never changes the snapshot's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from .cpumanager.cpu_assignment import CpuTopology

NumaSet = frozenset[int]
DEVICE_NODES_MINOR = 37  # kubernetes#138244: device hints over the devices' NUMA nodes


@dataclass(frozen=True)
class CpuState:
    """CPU manager ``static``: ``online`` is every CPU of each NUMA node (reserved ones
    included: the kubelet's ``CPUsInNUMANodes``); ``free`` is allocatable and unassigned
    (the default set minus the reserved CPUs). ``siblings`` maps a CPU to its core's threads;
    ``reserved_cores`` are every thread of a core holding a reserved CPU; ``topology`` is the
    kubelet's ``CPUTopology`` (cores, sockets, NUMA nodes) the CPUs are picked by, built once
    per snapshot (sockets from sysfs ``physical_package_id``)."""

    online: Mapping[int, frozenset[int]]
    free: frozenset[int]
    cpu_numa: Mapping[int, int]
    siblings: Mapping[int, frozenset[int]] = field(default_factory=dict)
    threads_per_core: int = 1
    reserved_cores: frozenset[int] = frozenset()
    topology: CpuTopology | None = field(default=None, compare=False, repr=False)

    def cpu_topology(self) -> CpuTopology:
        if self.topology is not None:
            return self.topology
        return CpuTopology.build(self.cpu_numa, self.siblings)

    def free_on(self, numa_ids: NumaSet) -> int:
        return sum(1 for cpu in self.free if self.cpu_numa.get(cpu) in numa_ids)

    def free_per_node(self) -> Mapping[int, int]:
        return self._free_counts

    @cached_property
    def _free_counts(self) -> dict[int, int]:
        """Counted once per state: every hint, answer and series asks again."""
        counts: dict[int, int] = {}
        for cpu in self.free:
            numa = self.cpu_numa.get(cpu)
            if numa is not None:
                counts[numa] = counts.get(numa, 0) + 1
        return counts

    def free_physical(self) -> int:
        """``GetAvailablePhysicalCPUs``: the default set minus every thread of a reserved
        core, node-wide (what ``full-pcpus-only`` compares a request with)."""
        return len(self.free - self.reserved_cores)

    def core_of(self, cpu: int) -> frozenset[int]:
        return self.siblings.get(cpu, frozenset()) | {cpu}


@dataclass(frozen=True)
class MemoryNode:
    """One NUMA node's memory manager state: per type allocatable and free bytes, ``group``
    (``Cells``: the node itself, or every node of a block spanning several) and how many
    allocations it holds (``NumberOfAssignments``)."""

    allocatable: Mapping[str, int]
    free: Mapping[str, int]
    group: NumaSet
    assignments: int = 0


@dataclass(frozen=True)
class DeviceState:
    """One device-plugin resource, counted per set of NUMA nodes (the empty set: devices
    without topology): every registered device (``allDevices``, unhealthy and assigned ones
    included) and the healthy unassigned ones. Which device of a set the kubelet picks does
    not change admission, so devices are counted, not named."""

    registered: Mapping[NumaSet, int]
    free: Mapping[NumaSet, int]
    # the node's allocatable count (healthy devices) and the devices containers hold, for the
    # resource-fit predicate; None: every registered device is healthy, held = registered - free
    healthy: int | None = None
    held: int | None = None
    # the device manager has the resource but neither API names one of its devices (all of
    # them unhealthy and unassigned): their topology is unknown, and taken as NUMA-aware
    # (deviceHasTopologyAlignment counts unhealthy devices too), so no NUMA set has one free
    registered_unseen: bool = False

    def healthy_total(self) -> int:
        return self.registered_total() if self.healthy is None else self.healthy

    def held_total(self) -> int:
        return self.registered_total() - self.free_total() if self.held is None else self.held

    def topology_aware(self) -> bool:
        """``deviceHasTopologyAlignment``: some device names a NUMA node."""
        return self.registered_unseen or any(numa and count > 0
                                             for numa, count in self.registered.items())

    def free_total(self) -> int:
        return sum(self.free.values())

    def registered_total(self) -> int:
        return sum(self.registered.values())


@dataclass(frozen=True)
class NodeRequests:
    """What the kubelet's resource-fit predicate compares a pod with (``noderesources.Fits``,
    run by ``lifecycle/predicate.go`` after the Topology Manager): the Node's allocatable
    (``cpu`` in millicores, memory types in bytes, ``pods`` and extended resources in units;
    only the resources known), the sum of the admitted pods' requests, and how many pods.
    ``complete``: the allocatable is the Node's own, so a resource it lacks has none."""

    allocatable: Mapping[str, int]
    requested: Mapping[str, int]
    pods: int = 0
    complete: bool = False

    def plus(self, requests: Mapping[str, int]) -> NodeRequests:
        """After one more pod with these requests is admitted."""
        total = dict(self.requested)
        for resource, amount in requests.items():
            total[resource] = total.get(resource, 0) + amount
        return NodeRequests(self.allocatable, total, self.pods + 1, self.complete)


@dataclass(frozen=True)
class NodeState:
    """What the resource managers hold; ``cpu``/``memory`` are ``None`` when that manager
    assigns nothing exclusive (CPU policy ``none``, memory policy ``None``); ``requests`` is
    what the resource-fit predicate counts (``None``: not known, not checked)."""

    numa_ids: tuple[int, ...]
    cpu: CpuState | None = None
    memory: Mapping[int, MemoryNode] | None = None
    devices: Mapping[str, DeviceState] = field(default_factory=dict)
    # sysfs distances[i][j]; None when unknown
    distances: Mapping[int, Mapping[int, int]] | None = None
    requests: NodeRequests | None = None
    # the kubelet's minor version when known (the Node's kubeletVersion): what changed
    # between releases follows it; None: the latest behaviour
    kubelet_minor: int | None = None

    def device_hints_on_device_nodes(self) -> bool:
        """Since 1.37 the device manager builds a resource's hints over the NUMA nodes its
        devices sit on only (``generateDeviceTopologyHints``: ``deviceNUMANodes``); before,
        over every NUMA node of the machine."""
        return self.kubelet_minor is None or self.kubelet_minor >= DEVICE_NODES_MINOR

    def memory_free(self, resource: str, numa_ids: NumaSet) -> int:
        if self.memory is None:
            return 0
        return sum(self.memory[n].free.get(resource, 0) for n in numa_ids if n in self.memory)

    def grouped(self, numa_id: int) -> bool:
        """Part of a memory block spanning several NUMA nodes: no single-node memory here."""
        if self.memory is None or numa_id not in self.memory:
            return False
        return len(self.memory[numa_id].group) > 1
