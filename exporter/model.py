"""Plain data the exporter works on: what the kubelet reported, and what sysfs says.

The kubelet's replies are decoded into these types (:mod:`exporter.kubelet.decode`), and
everything downstream (accounting, rendering, the snapshot command) sees only them. Keeping
protobuf out of the accounting makes it testable with hand-written data and independent of the
wire format.

NUMA locality is kept exactly as reported: ``numa_ids`` is ``None`` when the kubelet sent no
topology, otherwise the tuple of ids it named (possibly empty, possibly with unknown or negative
ids). Deciding what an id means is the accounting's job, not the client's.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar, cast

NumaIds = tuple[int, ...] | None


class ApiVersion(StrEnum):
    """A podresources API version the kubelet serves; its value is the ``api_version`` label."""

    V1 = "v1"
    V1ALPHA1 = "v1alpha1"  # devices only: no CPUs, memory or topology


# Parts of a reply left out at decoding for their absurd size: (data issue kind, example)
Oversized = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class DeviceEntry:
    """One ``ContainerDevices`` entry: the kubelet sends one per device per NUMA node."""

    resource: str
    device_ids: tuple[str, ...]
    numa_ids: NumaIds


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One ``ContainerMemory`` block; ``size`` in bytes, possibly spanning NUMA nodes."""

    memory_type: str
    size: int
    numa_ids: NumaIds


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One DRA device prepared for a container, named by (driver, pool, device)."""

    driver: str
    pool: str
    device: str
    claim_name: str
    claim_namespace: str
    share_id: str | None = None
    cdi_devices: tuple[str, ...] = ()


DraKey = tuple[str, str, str]  # driver, pool, device

# DRA device taint effects that keep a device from new claims (KEP-5055); ``None`` only informs
EXCLUDING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class CpuAttributes:
    """What a device of a DRA CPU driver (dra-driver-cpu's ``dra.cpu``) publishes of its CPUs,
    each in the driver's own domain: ``cpuID``, the one CPU of a device per CPU (the driver's
    individual mode); the capacity ``cpu``, the CPUs of a device per NUMA node or socket
    (grouped mode, consumable capacity); ``socketID``, the socket of a device grouped by
    socket, which names no NUMA node. ``None``: the device does not publish it."""

    cpu_id: int | None = None
    cpus: int | None = None
    socket: int | None = None


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    """A device one of this node's ResourceSlices publishes (the newest generation of its pool).

    ``numa_ids`` is the device's NUMA node as its slice (or sysfs, through its PCI address)
    names it, not yet checked against sysfs' NUMA nodes; ``None`` when nothing names one.
    ``effects``: the effects of its taints, from the slice and from DeviceTaintRules.
    ``cpu``: what it publishes of CPUs, read only for the drivers ``--dra-cpu-drivers`` names.
    """

    driver: str
    pool: str
    device: str
    numa_ids: NumaIds = None
    effects: frozenset[str] = frozenset()
    cpu: CpuAttributes | None = None

    @property
    def key(self) -> DraKey:
        return (self.driver, self.pool, self.device)

    @property
    def allocatable(self) -> bool:
        """Offered to new claims: no ``NoSchedule`` or ``NoExecute`` taint."""
        return not (self.effects & EXCLUDING_EFFECTS)


@dataclass(frozen=True, slots=True)
class DraInventory:
    """The DRA devices this node publishes, as the Kubernetes API shows them (``--kube-api``).

    The kubelet's podresources API names DRA devices but says nothing of their locality or
    taints; the accounting takes both from here. One object per state of the slices: the
    accounting recomputes DRA figures only when it is handed a different object.
    """

    devices: tuple[PublishedDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class CpuRequests:
    """A pod's CPU requests as its spec states them, in millicores (from the pod context).

    ``List`` shows the CPUs a DRA CPU driver gives a container from a grouped device (one per
    NUMA node or socket, consumable capacity) as the device only, never their number; the
    driver requires the container's CPU request, or the pod's with pod-level resources, to
    state it. ``containers``: the app containers and sidecars, each with its request (``None``
    when it states none); ``pod``: the pod-level request, ``None`` without one."""

    containers: tuple[tuple[str, int | None], ...] = ()
    pod: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerAssignment:
    """The exclusive resources of one container (sidecars included, in kubelet order)."""

    name: str
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceEntry, ...] = ()
    dra_devices: tuple[DraDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAssignment:
    """A pod from ``List``; ``cpu_ids``/``memory`` are pod-level and overlap the containers'."""

    namespace: str
    name: str
    containers: tuple[ContainerAssignment, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    oversized: Oversized = ()


@dataclass(frozen=True, slots=True)
class Allocatable:
    """``GetAllocatableResources``: what could be assigned (healthy devices only)."""

    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceEntry, ...] = ()
    oversized: Oversized = ()


@dataclass(frozen=True, slots=True)
class KubeletSnapshot:
    """One consistent read of the kubelet.

    ``allocatable`` is ``None`` when the kubelet does not offer ``GetAllocatableResources``
    (old, disabled, or not reached yet). ``api_version``: under
    v1alpha1 only devices are known, without topology.
    """

    pods: tuple[PodAssignment, ...]
    allocatable: Allocatable | None
    api_version: ApiVersion = ApiVersion.V1


@dataclass(frozen=True, slots=True)
class NumaNode:
    """One NUMA node as sysfs describes it."""

    numa_id: int
    cpus: frozenset[int]
    memory_bytes: int | None = None
    # hugepage size in bytes -> number of pages configured on this node
    hugepages: dict[int, int] = field(default_factory=dict)
    # sysfs ``distance``: the ACPI SLIT distance to each online NUMA node, in id order
    distances: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    """The node's NUMA layout from sysfs: which CPU sits on which NUMA node.

    ``cpu_siblings`` maps a CPU to the threads of its core as the kubelet's CPU manager groups
    them (cAdvisor: one ``core_id`` and ``physical_package_id`` within a NUMA node, which is
    ``thread_siblings_list`` wherever ``core_id`` is unique in a package), itself included; a
    CPU missing from it is taken as a core of its own. ``cpu_packages`` maps a CPU to its
    socket (``physical_package_id``), which orders the CPU manager's picks; a CPU missing from
    it counts as on a socket of its NUMA node's own. ``cpu_uncore`` maps a CPU to the uncore
    cache the CPU manager aligns to with ``prefer-align-cpus-by-uncorecache`` (the L3 shared
    by part of a NUMA node; its socket where the L3 holds the whole node or is unknown).
    """

    numa_nodes: dict[int, NumaNode]
    cpu_to_numa: dict[int, int]
    cpu_siblings: dict[int, frozenset[int]] = field(default_factory=dict)
    cpu_packages: dict[int, int] = field(default_factory=dict)
    cpu_uncore: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_nodes(cls, nodes: list[NumaNode],
                   cpu_siblings: dict[int, frozenset[int]] | None = None,
                   cpu_packages: dict[int, int] | None = None,
                   cpu_uncore: dict[int, int] | None = None) -> Topology:
        cpu_to_numa: dict[int, int] = {}
        for node in sorted(nodes, key=lambda n: n.numa_id):
            for cpu in node.cpus:
                cpu_to_numa.setdefault(cpu, node.numa_id)
        return cls({node.numa_id: node for node in nodes}, cpu_to_numa, dict(cpu_siblings or {}),
                   dict(cpu_packages or {}), dict(cpu_uncore or {}))

    def distances(self) -> dict[int, dict[int, int]] | None:
        """distances[i][j] between NUMA nodes, as the kubelet's ``NUMADistances`` holds them
        (the k-th value of a node's list is the distance to the k-th node by id); ``None``
        when sysfs gave none or a list of the wrong length."""
        ids = sorted(self.numa_nodes)
        table: dict[int, dict[int, int]] = {}
        for numa_id in ids:
            row = self.numa_nodes[numa_id].distances
            if len(row) != len(ids):
                return None
            table[numa_id] = dict(zip(ids, row))
        return table

    def siblings(self, cpu: int) -> frozenset[int]:
        """The hardware threads sharing ``cpu``'s physical core, ``cpu`` included."""
        return self.cpu_siblings.get(cpu, frozenset()) | {cpu}


_Shared = TypeVar("_Shared", bound=Hashable)
_SHARED_LIMIT = 4096
_shared_values: dict[Hashable, Hashable] = {}


def shared(value: _Shared) -> _Shared:
    """One object for an immutable value repeated across entries and pods (a resource name, a
    memory type, a set of NUMA ids): protobuf and the accounting would otherwise make each
    entry its own copy, and a large node holds thousands of device entries. Bounded, as a
    hostile reply may send many distinct values."""
    found = _shared_values.get(value)
    if found is None:
        if len(_shared_values) >= _SHARED_LIMIT:
            _shared_values.clear()
        found = _shared_values[value] = value
    return cast(_Shared, found)
