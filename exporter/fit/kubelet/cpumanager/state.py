"""What the CPU manager's ``static`` policy holds (``cpumanager/state/state.go``, v1.37.2).

:class:`CpuManagerState`: every online CPU per NUMA node (reserved ones included, for the
capacity-based minimum width), the default set (allocatable, unassigned CPUs: what hints and
allocation take from), SMT siblings and the cores of the reserved CPUs, and the
``CPUTopology`` the CPUs are picked by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ..topologymanager.topology_manager import NumaSet
from .topology import CpuTopology


@dataclass(frozen=True)
class CpuManagerState:
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
