"""The CPU topology the CPU manager picks CPUs by (``cpumanager/topology/topology.go``
``CPUTopology``, v1.34-v1.37): per online CPU its core, socket, NUMA node and uncore cache, and
the CPUs of each, built from sysfs as cAdvisor reads it (:mod:`exporter.topology`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CpuTopology:
    """``topology.CPUTopology``: per online CPU its core, socket, NUMA node and uncore cache,
    and the CPUs of each core, socket, NUMA node and uncore cache."""

    core: Mapping[int, int]
    socket: Mapping[int, int]
    numa: Mapping[int, int]
    by_core: Mapping[int, frozenset[int]]
    by_socket: Mapping[int, frozenset[int]]
    by_numa: Mapping[int, frozenset[int]]
    uncore: Mapping[int, int] = field(default_factory=dict)
    by_uncore: Mapping[int, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, cpu_numa: Mapping[int, int], siblings: Mapping[int, frozenset[int]],
              cpu_socket: Mapping[int, int] | None = None,
              cpu_uncore: Mapping[int, int] | None = None) -> CpuTopology:
        """From sysfs: a CPU's core is its lowest sibling; without a socket map each NUMA node
        is its own socket (what a sysfs tree without ``physical_package_id`` gives); a CPU
        without an uncore cache has its socket's (``getUncoreCacheID``)."""
        core = {cpu: min(siblings.get(cpu, frozenset()) | {cpu}) for cpu in cpu_numa}
        socket = {cpu: (cpu_socket or {}).get(cpu, numa) for cpu, numa in cpu_numa.items()}
        uncore = {cpu: (cpu_uncore or {}).get(cpu, socket[cpu]) for cpu in cpu_numa}
        return cls(core, socket, dict(cpu_numa), _group(core), _group(socket),
                   _group(cpu_numa), uncore, _group(uncore))

    @property
    def num_cores(self) -> int:
        return len(self.by_core)

    @property
    def num_sockets(self) -> int:
        return len(self.by_socket)

    @property
    def num_numa_nodes(self) -> int:
        return len(self.by_numa)

    @property
    def num_cpus(self) -> int:
        return len(self.numa)

    def cpus_per_core(self) -> int:
        """``CPUsPerCore``: NumCPUs / NumCores (the ``full-pcpus-only`` group size)."""
        return self.num_cpus // self.num_cores if self.num_cores else 0

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus_per_uncore(self) -> int:
        """``CPUsPerUncore``: NumCPUs / NumUncoreCache."""
        return self.num_cpus // len(self.by_uncore) if self.by_uncore else 0

    def cpus_in_uncore(self, uncore: int) -> frozenset[int]:
        return self.by_uncore.get(uncore, frozenset())

    def numa_nodes_per_socket(self) -> int:
        """``NumNUMANodes / NumSockets`` (``isHintSocketAligned``)."""
        return self.num_numa_nodes // self.num_sockets if self.num_sockets else 0

    def cpus_in_core(self, core: int) -> frozenset[int]:
        return self.by_core.get(core, frozenset())

    def cpus_in_socket(self, socket: int) -> frozenset[int]:
        return self.by_socket.get(socket, frozenset())

    def cpus_in_numa(self, numa: int) -> frozenset[int]:
        return self.by_numa.get(numa, frozenset())

    def sockets_of(self, numa_ids: Iterable[int]) -> frozenset[int]:
        return frozenset(self.socket[c] for n in numa_ids for c in self.cpus_in_numa(n))


def _group(key: Mapping[int, int]) -> dict[int, frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for cpu, value in key.items():
        groups.setdefault(value, set()).add(cpu)
    return {value: frozenset(cpus) for value, cpus in groups.items()}
