"""The node as the kubelet's resource managers hold it when a pod arrives: pure data.

The kubelet's container manager (``cm/container_manager_linux.go``, v1.37.2) holds one CPU,
memory and device manager; :class:`ManagersState` holds what each knows
(:class:`~.cpumanager.state.CpuManagerState`, per NUMA node
:class:`~.memorymanager.state.MemoryNode`, per device resource
:class:`~.devicemanager.manager.DeviceState`) and :class:`NodeRequests`, what the resource-fit
predicate counts. It is built from one snapshot by :mod:`exporter.fit.state`, by the simulator
from its books, or by hand in tests. Allocation returns a new state, so repeated placement
never changes the snapshot's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .cpumanager.state import CpuManagerState
from .devicemanager.manager import DeviceState
from .memorymanager.state import MemoryNode
from .topologymanager.topology_manager import NumaSet

DEVICE_NODES_MINOR = 36  # kubernetes#138244: device hints over the devices' NUMA nodes


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
class ManagersState:
    """What the resource managers hold; ``cpu``/``memory`` are ``None`` when that manager
    assigns nothing exclusive (CPU policy ``none``, memory policy ``None``); ``requests`` is
    what the resource-fit predicate counts (``None``: not known, not checked)."""

    numa_ids: tuple[int, ...]
    cpu: CpuManagerState | None = None
    memory: Mapping[int, MemoryNode] | None = None
    devices: Mapping[str, DeviceState] = field(default_factory=dict)
    # sysfs distances[i][j]; None when unknown
    distances: Mapping[int, Mapping[int, int]] | None = None
    requests: NodeRequests | None = None
    # the kubelet's minor version when known (the Node's kubeletVersion): what changed
    # between releases follows it; None: the latest behaviour
    kubelet_minor: int | None = None

    def device_hints_on_device_nodes(self) -> bool:
        """Since 1.36 the device manager builds a resource's hints over the NUMA nodes its
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
