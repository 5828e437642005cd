"""The node map as plain data: what the picture shows, before any drawing.

One :class:`NodeMap` per refresh, built by :mod:`exporter.nodemap.build` from that refresh's
snapshot, accounting and topology; :mod:`exporter.nodemap.svg` draws it. Every string in it
came from the kubelet, sysfs or a configuration file and is escaped only when drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class CpuState(StrEnum):
    """What one logical CPU is, as far as the kubelet tells (a ``data-state`` value)."""

    HELD = "held"  # exclusive to a container (or to a pod, pod-level)
    FREE = "free"  # allocatable and not assigned: in the shared pool until the CPU manager
    RESERVED = "reserved"  # online but not allocatable: the kubelet's reserved CPUs
    SHARED = "shared"  # CPU manager hands out no exclusive CPUs (policy none): shared pool
    UNKNOWN = "unknown"  # GetAllocatableResources unavailable: reserved or free is not known


class ChipState(StrEnum):
    """What one device is (a ``data-state`` value)."""

    HELD = "held"
    FREE = "free"
    UNAVAILABLE = "unavailable"  # assigned, not listed as allocatable (unhealthy, unregistered)
    TAINTED = "tainted"  # a DRA device kept from new claims by a NoSchedule/NoExecute taint


class CpuMode(StrEnum):
    """What the CPU manager's allocatable list says about the node's CPUs."""

    STATIC = "static"  # allocatable CPUs listed: reserved and free are known
    NONE = "none"  # listed empty: no exclusive CPUs, everything is the shared pool
    DRA = "dra"  # listed empty, and a DRA CPU driver allocates exclusive CPUs
    UNKNOWN = "unknown"  # no GetAllocatableResources (old, disabled, or API v1alpha1)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a CPU or device: a container, or a pod (pod-level, ``container`` None)."""

    namespace: str
    pod: str
    container: str | None = None

    @property
    def name(self) -> str:
        return "/".join(part for part in (self.namespace, self.pod, self.container)
                        if part is not None)

    @property
    def pod_key(self) -> tuple[str, str]:
        return (self.namespace, self.pod)


@dataclass(frozen=True, slots=True)
class Cpu:
    cpu: int
    state: CpuState
    holders: tuple[Holder, ...] = ()  # more than one is inconsistent kubelet data
    straddles: bool = False  # a holder's exclusive resources span NUMA nodes
    driver: str = ""  # the DRA CPU driver that allocated it ("": the CPU manager, or none)


@dataclass(frozen=True, slots=True)
class DraCpus:
    """CPUs a container holds from a DRA CPU device that groups CPUs (one per NUMA node or
    socket): how many, as its CPU request states, but not which."""

    holder: Holder
    count: int


@dataclass(frozen=True, slots=True)
class Core:
    """A physical core: its hardware threads (SMT siblings) on this NUMA node."""

    cpus: tuple[Cpu, ...]


@dataclass(frozen=True, slots=True)
class MemoryBar:
    """One memory type on one NUMA node (bytes). ``group_share`` is this node's estimated part
    of blocks spanning several NUMA nodes (the metrics' apportioning); ``allocatable`` None:
    the kubelet lists none for this node and type."""

    memory_type: str
    allocatable: int | None
    allocated: int
    group_share: int = 0

    @property
    def free(self) -> int | None:
        if self.allocatable is None:
            return None
        return max(0, self.allocatable - self.allocated - self.group_share)


@dataclass(frozen=True, slots=True)
class Chip:
    """One device: a device-plugin device (``resource``, ``device`` id) or a DRA device
    (``resource`` the driver, ``device`` pool/device)."""

    dra: bool
    resource: str
    device: str
    numa: str  # the NUMA label the metrics use: "0", "0,1", "unknown"
    state: ChipState
    holders: tuple[Holder, ...] = ()
    straddles: bool = False
    shares: int = 0  # DRA allocations of a consumable device, one per share id


@dataclass(frozen=True, slots=True)
class MemoryGroup:
    """Memory blocks spanning several NUMA nodes, per type: the memory manager serves no
    single-NUMA request on their member nodes."""

    memory_type: str
    size: int
    holders: tuple[Holder, ...]


@dataclass(frozen=True, slots=True)
class NumaBox:
    """One NUMA node (``numa`` its id), a set of them (``"0,1"``: what spans them), or
    ``"unknown"``: CPUs sysfs does not know and devices without topology."""

    numa: str
    cores: tuple[Core, ...] = ()
    memory: tuple[MemoryBar, ...] = ()
    chips: tuple[Chip, ...] = ()
    groups: tuple[MemoryGroup, ...] = ()
    memory_sysfs: int | None = None  # MemTotal
    in_memory_group: bool = False
    fits: tuple[tuple[str, bool], ...] = ()  # (shape, fits on this node alone)
    dra_cpus: tuple[DraCpus, ...] = ()  # held through DRA, CPU ids unknown

    @property
    def cpus(self) -> tuple[Cpu, ...]:
        return tuple(cpu for core in self.cores for cpu in core.cpus)


@dataclass(frozen=True, slots=True)
class ShapeLine:
    """One configured shape's answer (SPEC 7.3), in words."""

    name: str
    admitted: bool
    reason: str | None
    blocking: str
    capacity: float
    sentence: str


@dataclass(frozen=True, slots=True)
class Straddler:
    holder: Holder
    numa_nodes: int  # the alignment rule's count


@dataclass(frozen=True)
class NodeMap:
    node_name: str
    api_version: str
    cpu_mode: CpuMode
    refreshed_at: float | None  # wall-clock time of the refresh drawn
    kubelet_up: bool
    numa: tuple[NumaBox, ...]  # single NUMA nodes, by id
    spanning: tuple[NumaBox, ...] = ()  # sets of NUMA nodes, by their ids
    apart: NumaBox | None = None  # "unknown": no NUMA node known
    pods: tuple[tuple[str, str], ...] = ()  # holders' pods, colour order
    straddlers: tuple[Straddler, ...] = ()
    shapes: tuple[ShapeLine, ...] = ()
    issues: dict[str, int] = field(default_factory=dict)
    memory_mode: str = "unknown"  # "static", "none", "unknown", as for CPUs
    cpu_drivers: tuple[str, ...] = ()  # the DRA CPU drivers allocating CPUs here
