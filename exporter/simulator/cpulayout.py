"""The CPU layout a simulator profile describes beyond its NUMA nodes (profile key
``cpu_layout``): sockets, dies, L3 caches and how ``core_id`` is numbered.

::

    "cpu_layout": {"sockets": {"0": "0-31,64-95", "1": "32-63,96-127"},
                   "l3": {"0": "0-3,64-67", "1": "4-7,68-71"},
                   "dies": {"0": "0-15,64-79"}, "core_id_per_die": false}

Each map names an id and its CPUs. A CPU no socket names sits on a socket of its NUMA node's
id; no die, die 0; no L3, no cache directory (as on some VMs). ``core_id`` is the core's first
thread, or with ``core_id_per_die`` the core's rank in its die (platforms that number cores per
die). :func:`cpu_entries` gives each CPU's sysfs files (``topology/``, ``cache/index3``), which
:mod:`.node.sysfs` writes and the real kubelet's test component is given; :func:`kubelet_topology`
is what cAdvisor and the kubelet's CPU manager make of them (:func:`exporter.topology.cpu_layout`,
the exporter's own reading), which the simulated kubelet picks CPUs by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model import NumaNode, Topology
from ..topology import CacheInfo, cpu_layout, parse_cpulist

L3_SIZE_KB = 32768  # what every described L3 says of its size (nothing decides by it)


class CpuLayoutError(ValueError):
    """A ``cpu_layout`` that does not describe the node's CPUs."""


@dataclass(frozen=True)
class CpuLayoutSpec:
    sockets: Mapping[int, int] = field(default_factory=dict)  # CPU -> physical_package_id
    dies: Mapping[int, int] = field(default_factory=dict)  # CPU -> die_id
    l3: Mapping[int, int] = field(default_factory=dict)  # CPU -> its L3's id
    core_id_per_die: bool = False


class _NumaCpus(Protocol):
    @property
    def numa_id(self) -> int: ...

    @property
    def cpus(self) -> frozenset[int]: ...


class Machine(Protocol):
    """What a layout is laid over (a profile's ``NodeSpec``)."""

    @property
    def cpu_layout(self) -> CpuLayoutSpec: ...

    @property
    def numa_nodes(self) -> Sequence[_NumaCpus]: ...

    @property
    def all_cpus(self) -> frozenset[int]: ...

    def thread_siblings(self) -> dict[int, frozenset[int]]: ...


@dataclass(frozen=True)
class CpuEntry:
    """One CPU's sysfs topology: ``l3`` ``None`` without a cache directory."""

    cpu: int
    numa: int
    core_id: int
    socket: int
    die: int
    l3: int | None


def parse_cpu_layout(data: Any, cpus: frozenset[int]) -> CpuLayoutSpec:
    """The profile's ``cpu_layout`` (absent: one socket per NUMA node, no caches)."""
    if data is None:
        return CpuLayoutSpec()
    if not isinstance(data, dict):
        raise CpuLayoutError("cpu_layout must be a map")

    def owners(key: str) -> dict[int, int]:
        groups = data.get(key) or {}
        if not isinstance(groups, dict):
            raise CpuLayoutError(f"cpu_layout.{key} must map ids to CPU lists")
        owner: dict[int, int] = {}
        for name, text in groups.items():
            try:
                listed = parse_cpulist(str(text))
                number = int(name)
            except ValueError as error:
                raise CpuLayoutError(f"cpu_layout.{key}.{name}: {error}") from None
            if not listed <= cpus:
                raise CpuLayoutError(f"cpu_layout.{key}.{name} names CPUs the node lacks: "
                                     f"{sorted(listed - cpus)}")
            for cpu in listed:
                if cpu in owner:
                    raise CpuLayoutError(f"cpu_layout.{key}: CPU {cpu} is in two of them")
                owner[cpu] = number
        return owner

    return CpuLayoutSpec(owners("sockets"), owners("dies"), owners("l3"),
                         bool(data.get("core_id_per_die", False)))


def cpu_entries(spec: Machine) -> list[CpuEntry]:
    """Every CPU's sysfs topology, NUMA node by NUMA node, ids ascending."""
    layout = spec.cpu_layout
    siblings = spec.thread_siblings()
    core_of = {cpu: min(siblings[cpu]) for cpu in spec.all_cpus}
    if layout.core_id_per_die:
        firsts: dict[int, set[int]] = {}
        for cpu in spec.all_cpus:
            firsts.setdefault(layout.dies.get(cpu, 0), set()).add(core_of[cpu])
        rank = {die: {first: index for index, first in enumerate(sorted(cores))}
                for die, cores in firsts.items()}
        core_of = {cpu: rank[layout.dies.get(cpu, 0)][first] for cpu, first in core_of.items()}
    return [CpuEntry(cpu, numa.numa_id, core_of[cpu], layout.sockets.get(cpu, numa.numa_id),
                     layout.dies.get(cpu, 0), layout.l3.get(cpu))
            for numa in spec.numa_nodes for cpu in sorted(numa.cpus)]


def kubelet_topology(spec: Machine) -> Topology:
    """The node as the kubelet's CPU manager sees the sysfs tree :func:`cpu_entries`
    describes: cores and uncore caches as cAdvisor groups them, sockets."""
    entries = {e.cpu: e for e in cpu_entries(spec)}
    members: dict[int, int] = {}
    for entry in entries.values():
        if entry.l3 is not None:
            members[entry.l3] = members.get(entry.l3, 0) + 1

    def caches(cpu: int) -> list[CacheInfo] | None:
        l3 = entries[cpu].l3
        return None if l3 is None else [CacheInfo(l3, L3_SIZE_KB, 3, "Unified", members[l3])]

    nodes = [NumaNode(n.numa_id, frozenset(n.cpus)) for n in spec.numa_nodes]
    kernel = spec.thread_siblings()
    layout = cpu_layout(nodes, {c: e.core_id for c, e in entries.items()},
                        {c: e.socket for c, e in entries.items()}, caches,
                        lambda missing: {c: kernel[c] for c in missing})
    return Topology.from_nodes(nodes, layout.siblings, layout.packages, layout.uncore)
