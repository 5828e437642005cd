"""What one pod contributes to the node's figures, and what ``GetAllocatableResources`` offers.

:func:`pod_figures` is a pure function of one pod and the topology, computed once per distinct
pod: each CPU, device and memory block counted once even where the kubelet reports it twice
(pod-level lists overlapping the containers', one device entry per NUMA node), inconsistent
entries counted as data issues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..issues import IssueKind, Issues
from ..model import (
    Allocatable,
    CpuRequests,
    DraKey,
    MemoryBlock,
    NumaIds,
    PodAssignment,
    shared,
)
from .dracpus import NO_DRA_CPUS, DraCpuDevices, PodDraCpus, pod_dra_cpus
from .numa import UNKNOWN, TopologyView, group_label, min_numa_nodes

ContainerKey = tuple[str, str, str]  # namespace, pod, container


PodKey = tuple[str, str]  # namespace, pod


Device = tuple[str, str]  # resource, device id


DraShare = tuple[DraKey, str]  # a device and one share_id it is allocated under


DraInfoRow = tuple[str, str, str, str, str, str, str, str, str | None]


T = TypeVar("T")


@dataclass(eq=False)
class PodFigures:
    """Everything one pod contributes; computed once per distinct pod and topology."""

    key: PodKey
    with_topology: bool
    # node-level contributions
    cpus: frozenset[int] = frozenset()  # pod-level and container-level, each CPU once
    devices: dict[Device, frozenset[int]] = field(default_factory=dict)  # -> reported NUMA ids
    memory: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, type) -> bytes
    dra: frozenset[DraKey] = frozenset()
    dra_shares: frozenset[DraShare] = frozenset()
    # CPUs of DRA CPU drivers: by id (a device per CPU), and counted per container and NUMA
    # label (grouped devices, no ids); the CPU requests the count was read from, when it was
    dra_cpu_ids: frozenset[int] = frozenset()
    dra_cpus: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    asked_requests: bool = False
    cpu_requests: CpuRequests | None = None
    issues: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    pod_level: bool = False
    containers: int = 0
    misaligned: int = 0
    # workload series, keyed by their full label values
    container_cpus: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    container_memory: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    container_devices: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    container_numa_nodes: dict[ContainerKey, int] = field(default_factory=dict)
    pod_cpus: dict[tuple[str, str, str], int] = field(default_factory=dict)
    pod_memory: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    device_info: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    dra_device_info: list[DraInfoRow] = field(default_factory=list)


NO_DRA_NUMA: dict[DraKey, tuple[int, ...]] = {}


_NOTHING: frozenset[Any] = frozenset()


def pod_figures(pod: PodAssignment, view: TopologyView, with_topology: bool = True,
                dra_numa: Mapping[DraKey, tuple[int, ...]] = NO_DRA_NUMA,
                dra_cpus: DraCpuDevices = NO_DRA_CPUS, requests: CpuRequests | None = None,
                context: bool = False) -> PodFigures:
    """One pod's contribution; ``with_topology`` is False for v1alpha1 (devices only).

    Each resource is read on its own: CPUs, memory blocks, devices and DRA devices per
    container, then the pod's rows and node-level contributions from them. ``dra_numa``: the
    known NUMA ids of each published DRA device (:func:`dra_figures`); a DRA device not in it
    is of unknown locality. ``dra_cpus``: which DRA devices are CPUs; ``requests``: the pod's
    CPU requests from the pod context (``context``: whether there is one), which count the
    CPUs of grouped DRA CPU devices.
    """
    figures = PodFigures((pod.namespace, pod.name), with_topology)
    issues = Issues()
    for kind, example in pod.oversized:  # parts left out at decoding for their absurd size
        issues.add(IssueKind(kind), example)
    names = _container_names(pod, issues)
    cpus = _read_cpus(pod, names, issues)
    memory = _read_memory(pod, names, issues)
    devices = _read_devices(pod, names, issues, with_topology)
    dra = _dra_figures(figures, pod, issues, dra_numa)
    _device_figures(figures, names, devices, view, issues)
    if with_topology:
        _cpu_figures(figures, pod, cpus, view, issues)
        _dra_cpu_figures(figures, pod_dra_cpus(pod, dra_cpus, dra_numa, requests, context,
                                               issues), cpus, view, requests)
        figures.pod_level = bool(pod.cpu_ids or pod.memory)
        _pod_memory(figures, pod, names, memory, view, issues)
        for ctr in names:
            nodes = _container_numa_nodes(cpus[ctr], memory[ctr], devices[ctr], view,
                                          dra.get(ctr, ()))
            if nodes is not None:
                figures.container_numa_nodes[(pod.namespace, pod.name, ctr)] = nodes
                figures.misaligned += nodes > 1
    figures.containers = len(names)
    figures.issues = issues.counts
    figures.examples = issues.examples
    return figures


def _where(pod: PodAssignment, ctr: str) -> str:
    return f"container {pod.namespace}/{pod.name}/{ctr}"


def _container_names(pod: PodAssignment, issues: Issues) -> list[str]:
    """The pod's container names, each once; a container listed twice is read as one."""
    names: dict[str, None] = {}
    for container in pod.containers:
        if container.name in names:
            issues.add(IssueKind.DUPLICATE_ENTRY,
                       f"{_where(pod, container.name)} listed twice in its pod")
        names[container.name] = None
    return list(names)


def _read_cpus(pod: PodAssignment, names: list[str], issues: Issues) -> dict[str, set[int]]:
    """Each container's exclusive CPUs; a CPU held by two containers of the pod is an issue."""
    cpus: dict[str, set[int]] = {ctr: set() for ctr in names}
    holder_of: dict[int, str] = {}
    for container in pod.containers:
        ctr = container.name
        for cpu in _unique(container.cpu_ids, issues, f"{_where(pod, ctr)} cpu_ids"):
            holder = holder_of.setdefault(cpu, ctr)
            if holder != ctr:
                issues.add(IssueKind.CPU_MULTIPLE_OWNERS,
                           f"CPU {cpu} assigned to {pod.namespace}/{pod.name}/{holder} and {ctr}")
            cpus[ctr].add(cpu)
    return cpus


def _read_memory(pod: PodAssignment, names: list[str],
                 issues: Issues) -> dict[str, list[MemoryBlock]]:
    """Each container's memory blocks, in order, each once."""
    memory: dict[str, list[MemoryBlock]] = {ctr: [] for ctr in names}
    seen: dict[str, set[MemoryBlock]] = {ctr: set() for ctr in names}
    for container in pod.containers:
        ctr = container.name
        for block in container.memory:
            if not block.memory_type:
                issues.add(IssueKind.INVALID_ENTRY,
                           f"{_where(pod, ctr)} has a memory block without memory_type")
            elif block in seen[ctr]:
                issues.add(IssueKind.DUPLICATE_ENTRY,
                           f"{_where(pod, ctr)} repeats memory block {block.memory_type}")
            else:
                memory[ctr].append(block)
                seen[ctr].add(block)
    return memory


def _read_devices(pod: PodAssignment, names: list[str], issues: Issues,
                  with_topology: bool) -> dict[str, dict[Device, set[int]]]:
    """Each container's devices with the union of the NUMA ids their entries report."""
    devices: dict[str, dict[Device, set[int]]] = {ctr: {} for ctr in names}
    holder_of: dict[Device, str] = {}
    for container in pod.containers:
        ctr = container.name
        where = _where(pod, ctr)
        seen: set[tuple[str, str, NumaIds]] = set()
        for entry in container.devices:
            for device_id in entry.device_ids:
                if not entry.resource or not device_id:
                    issues.add(IssueKind.INVALID_ENTRY,
                               f"{where} has a device entry without resource name or device id")
                    continue
                identity = (entry.resource, device_id, entry.numa_ids)
                # v1alpha1 keeps the kubelet's per-NUMA entries without their topology: an id
                # repeated there is one device on several NUMA nodes, not a duplicate
                if with_topology and identity in seen:
                    issues.add(IssueKind.DUPLICATE_ENTRY,
                               f"{where} lists device {entry.resource}/{device_id} twice")
                    continue
                seen.add(identity)
                device = (entry.resource, device_id)
                holder = holder_of.setdefault(device, ctr)
                if holder != ctr:
                    issues.add(IssueKind.DEVICE_MULTIPLE_OWNERS,
                               f"device {entry.resource}/{device_id} assigned to "
                               f"{pod.namespace}/{pod.name}/{holder} and {ctr}")
                reported = devices[ctr].setdefault(device, set())
                if entry.numa_ids:
                    reported.update(entry.numa_ids)
    return devices


def _dra_figures(figures: PodFigures, pod: PodAssignment, issues: Issues,
                 dra_numa: Mapping[DraKey, tuple[int, ...]]) -> dict[str, list[frozenset[int]]]:
    """The DRA devices prepared for the pod's containers, each once, and each share once;
    returns each container's DRA devices of known NUMA node (for the alignment rule)."""
    dra: set[DraKey] = set()
    shares: set[DraShare] = set()
    info: set[DraInfoRow] = set()
    local: dict[str, list[frozenset[int]]] = {}
    for container in pod.containers:
        for item in container.dra_devices:
            if not item.driver or not item.device:
                issues.add(IssueKind.INVALID_ENTRY, f"{_where(pod, container.name)} has a DRA "
                                                    "device without driver or device name")
                continue
            key = (item.driver, item.pool, item.device)
            ids = dra_numa.get(key, ())
            dra.add(key)
            if item.share_id:
                shares.add((key, item.share_id))
            if ids:
                local.setdefault(container.name, []).append(shared(frozenset(ids)))
            info.add((item.driver, item.pool, item.device, group_label(ids), item.claim_name,
                      pod.namespace, pod.name, container.name, item.share_id or None))
    figures.dra = _frozen(dra)
    figures.dra_shares = _frozen(shares)
    figures.dra_device_info = sorted(info, key=lambda row: tuple(x or "" for x in row))
    return local


def _device_figures(figures: PodFigures, names: list[str],
                    devices: dict[str, dict[Device, set[int]]], view: TopologyView,
                    issues: Issues) -> None:
    """Container device rows, and the pod's union of reported NUMA ids per device."""
    namespace, name = figures.key
    pod_devices: dict[Device, set[int]] = {}
    for ctr in names:
        per_group: Counter[tuple[str, str]] = Counter()
        for device, reported in devices[ctr].items():
            pod_devices.setdefault(device, set()).update(reported)
            label = group_label(view.resolve(tuple(sorted(reported)))[0])
            per_group[(device[0], label)] += 1
            figures.device_info.append((device[0], device[1], label, namespace, name, ctr))
        for (resource, label), count in per_group.items():
            figures.container_devices[(namespace, name, ctr, resource, label)] = count
    figures.device_info.sort()
    for device, reported in pod_devices.items():
        view.ids(tuple(sorted(reported)), issues, f"device {device[0]}/{device[1]}")
    figures.devices = {device: shared(frozenset(reported))
                       for device, reported in pod_devices.items()}


def _cpu_figures(figures: PodFigures, pod: PodAssignment, cpus: dict[str, set[int]],
                 view: TopologyView, issues: Issues) -> None:
    """Container and pod-level CPU rows; the pod-level list includes the containers' own."""
    namespace, name = figures.key
    pod_level = set(_unique(pod.cpu_ids, issues, f"pod {namespace}/{name} cpu_ids"))
    every_cpu = set(pod_level)
    for ctr, held in cpus.items():
        every_cpu |= held
        for label, count in Counter(_cpu_labels(held, view)).items():
            figures.container_cpus[(namespace, name, ctr, label)] = count
    for label, count in Counter(_cpu_labels(pod_level, view)).items():
        figures.pod_cpus[(namespace, name, label)] = count
    figures.cpus = _frozen(every_cpu)


def _dra_cpu_figures(figures: PodFigures, found: PodDraCpus, cpus: dict[str, set[int]],
                     view: TopologyView, requests: CpuRequests | None) -> None:
    """The container CPU rows of the pod's DRA CPUs (added to those of its exclusive CPUs,
    if any, a CPU in both counted once), and the node-level contributions: CPU ids and counts
    per NUMA label."""
    namespace, name = figures.key
    rows = figures.container_cpus
    every_id: set[int] = set()
    for ctr, ids in found.ids.items():
        every_id |= ids
        for label, count in Counter(_cpu_labels(ids - cpus.get(ctr, set()), view)).items():
            key = (namespace, name, ctr, label)
            rows[key] = rows.get(key, 0) + count
    for (ctr, label), count in found.counts.items():
        key = (namespace, name, ctr, label)
        rows[key] = rows.get(key, 0) + count
        figures.dra_cpus[key] = count
    figures.dra_cpu_ids = _frozen(every_id)
    if found.asked:
        figures.asked_requests = True
        figures.cpu_requests = requests


def _frozen(items: set[T]) -> frozenset[T]:
    """``items`` frozen; every empty set is one object (an empty frozenset is 216 bytes,
    and most pods hold no DRA device, many no exclusive CPU)."""
    return frozenset(items) if items else _NOTHING


def _unique(values: tuple[T, ...], issues: Issues, what: str) -> tuple[T, ...]:
    """Drop repeated values, counting the repetition as a duplicated entry."""
    if len(set(values)) == len(values):
        return values
    issues.add(IssueKind.DUPLICATE_ENTRY, f"{what} repeats values",
               count=len(values) - len(set(values)))
    return tuple(dict.fromkeys(values))


def _cpu_labels(cpus: Iterable[int], view: TopologyView) -> Iterable[str]:
    labels = view.cpu_label
    return (labels.get(cpu, UNKNOWN) for cpu in cpus)


def _pod_memory(figures: PodFigures, pod: PodAssignment, names: list[str],
                container_memory: dict[str, list[MemoryBlock]], view: TopologyView,
                issues: Issues) -> None:
    """Memory the pod holds per (NUMA group, type), each block counted once.

    A pod-level block includes its containers' blocks of the same type on the nodes it spans;
    a container block is covered by the narrowest pod-level block whose NUMA nodes contain its
    own, and each pod-level block counts as the larger of itself and what it covers. Container
    blocks no pod-level block covers count as they are.
    """
    namespace, name = figures.key
    containers: list[tuple[str, tuple[int, ...], int]] = []  # (type, known ids, size)
    for ctr in names:
        for block in container_memory[ctr]:
            ids = view.ids(block.numa_ids, issues, f"memory of {namespace}/{name}/{ctr}")
            key = (namespace, name, ctr, group_label(ids), block.memory_type)
            figures.container_memory[key] = figures.container_memory.get(key, 0) + block.size
            containers.append((block.memory_type, ids, block.size))
    pod_level: Counter[tuple[str, tuple[int, ...]]] = Counter()  # (type, known ids) -> size
    seen: set[MemoryBlock] = set()
    for block in pod.memory:
        if not block.memory_type:
            issues.add(IssueKind.INVALID_ENTRY, f"pod {namespace}/{name} memory without type")
            continue
        if block in seen:
            issues.add(IssueKind.DUPLICATE_ENTRY,
                       f"pod {namespace}/{name} repeats pod-level block {block.memory_type}")
            continue
        seen.add(block)
        ids = view.ids(block.numa_ids, issues, f"pod memory of {namespace}/{name}")
        pod_level[(block.memory_type, ids)] += block.size
    for (memory_type, ids), size in pod_level.items():
        figures.pod_memory[(namespace, name, group_label(ids), memory_type)] = size
    covered: Counter[tuple[str, tuple[int, ...]]] = Counter()  # -> container bytes included
    by_type: dict[str, list[tuple[tuple[int, ...], frozenset[int]]]] = {}
    for memory_type, ids in pod_level:
        by_type.setdefault(memory_type, []).append((ids, frozenset(ids)))
    for groups in by_type.values():
        groups.sort(key=lambda group: (len(group[0]), group[0]))  # narrowest first
    covers: dict[tuple[str, tuple[int, ...]], tuple[str, tuple[int, ...]] | None] = {}
    for memory_type, ids, size in containers:
        if (memory_type, ids) in covers:
            cover = covers[(memory_type, ids)]
        else:
            cover = covers[(memory_type, ids)] = _narrowest_cover(
                memory_type, ids, by_type.get(memory_type, []))
        if cover is None:
            node_key = (group_label(ids), memory_type)
            figures.memory[node_key] = figures.memory.get(node_key, 0) + size
        else:
            covered[cover] += size
    for (memory_type, ids), own in pod_level.items():
        included = covered.get((memory_type, ids), 0)
        if 0 < own < included:
            issues.add(IssueKind.POD_MEMORY_BELOW_CONTAINERS,
                       f"pod {namespace}/{name} pod-level {memory_type} on NUMA "
                       f"{group_label(ids)} is {own} bytes, its containers hold {included}")
        node_key = (group_label(ids), memory_type)
        figures.memory[node_key] = figures.memory.get(node_key, 0) + max(own, included)


def _narrowest_cover(memory_type: str, ids: tuple[int, ...],
                     groups: list[tuple[tuple[int, ...], frozenset[int]]],
                     ) -> tuple[str, tuple[int, ...]] | None:
    """The pod-level block of this type whose NUMA nodes contain ``ids`` with fewest extra;
    ``groups`` are the pod-level blocks' NUMA ids of this type, narrowest first."""
    wanted = frozenset(ids)
    for group, members in groups:
        if group == ids or (ids and group and wanted <= members):
            return (memory_type, group)
    return None


def _container_numa_nodes(cpus: set[int], blocks: list[MemoryBlock],
                          devices: dict[Device, set[int]], view: TopologyView,
                          dra_sets: Iterable[frozenset[int]] = ()) -> int | None:
    """The alignment rule; ``None`` when nothing of known locality is exclusive to it. DRA
    devices of known NUMA node count like device-plugin devices: the Topology Manager never
    aligns them, which is why a misplaced one must show here."""
    required: set[int] = set()
    for cpu in cpus:
        label = view.cpu_label.get(cpu)
        if label is not None:
            required.add(int(label))
    for block in blocks:
        required.update(view.resolve(block.numa_ids)[0])
    device_sets = []
    for raw in devices.values():
        ids = view.resolve(tuple(sorted(raw)))[0]
        if ids:
            device_sets.append(frozenset(ids))
    device_sets.extend(dra_sets)
    if not required and not device_sets:
        return None
    return min_numa_nodes(frozenset(required), device_sets)


@dataclass(eq=False)
class AllocatableFigures:
    """GetAllocatableResources, attributed to NUMA nodes; computed once per reply."""

    cpus: frozenset[int] | None = None  # None: not reported (policy none, or unknown)
    cpus_by_numa: dict[str, int] | None = None
    memory: dict[tuple[str, str], int] = field(default_factory=dict)
    devices: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, resource)
    device_capacity: Counter[tuple[int, str]] = field(default_factory=Counter)  # (node, resource)
    listed: frozenset[Device] = frozenset()  # every (resource, id) listed as allocatable
    issues: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


def allocatable_figures(allocatable: Allocatable | None, view: TopologyView,
                        with_topology: bool = True) -> AllocatableFigures:
    figures = AllocatableFigures()
    if allocatable is None or not with_topology:
        return figures
    issues = Issues()
    for kind, example in allocatable.oversized:
        issues.add(IssueKind(kind), example)
    if allocatable.cpu_ids:
        cpus = _unique(allocatable.cpu_ids, issues, "allocatable cpu_ids")
        figures.cpus = frozenset(cpus)
        figures.cpus_by_numa = dict(Counter(_cpu_labels(cpus, view)))
        unknown = figures.cpus_by_numa.get(UNKNOWN, 0)
        if unknown:
            issues.add(IssueKind.UNKNOWN_CPU, "allocatable CPUs are not listed under any NUMA node "
                                          "in sysfs", count=unknown)
    else:
        figures.cpus = frozenset()
    memory: Counter[tuple[str, str]] = Counter()
    blocks_seen: set[tuple[str, NumaIds]] = set()
    for block in allocatable.memory:
        if not block.memory_type:
            issues.add(IssueKind.INVALID_ENTRY, "allocatable memory block without memory_type")
            continue
        if (block.memory_type, block.numa_ids) in blocks_seen:  # one per (NUMA node, type)
            issues.add(IssueKind.DUPLICATE_ENTRY, f"allocatable {block.memory_type} listed twice "
                                              f"for NUMA {list(block.numa_ids or ())}")
            continue
        blocks_seen.add((block.memory_type, block.numa_ids))
        label = group_label(view.ids(block.numa_ids, issues, f"allocatable {block.memory_type}"))
        memory[(label, block.memory_type)] += block.size
    figures.memory = dict(memory)
    numa: dict[Device, set[int]] = {}
    seen: set[tuple[str, str, NumaIds]] = set()
    for entry in allocatable.devices:
        for device_id in entry.device_ids:
            if not entry.resource or not device_id:
                issues.add(IssueKind.INVALID_ENTRY, "allocatable device without name or id")
                continue
            identity = (entry.resource, device_id, entry.numa_ids)
            if identity in seen:
                issues.add(IssueKind.DUPLICATE_ENTRY,
                           f"allocatable device {entry.resource}/{device_id} listed twice")
                continue
            seen.add(identity)
            reported = numa.setdefault((entry.resource, device_id), set())
            if entry.numa_ids:
                reported.update(entry.numa_ids)
    devices: Counter[tuple[str, str]] = Counter()
    for (resource, device_id), raw in numa.items():
        ids = view.ids(tuple(sorted(raw)), issues, f"allocatable device {resource}/{device_id}")
        devices[(group_label(ids), resource)] += 1
        for node in ids:
            figures.device_capacity[(node, resource)] += 1
    figures.devices = dict(devices)
    figures.listed = frozenset(numa)
    figures.issues = issues.counts
    figures.examples = issues.examples
    return figures
