"""Per-NUMA accounting of exclusive resources: plain data in, figures out, no I/O.

This module implements the data semantics of the product contract (SPEC section 2):

* every CPU, device and memory block is counted once, even where the kubelet reports it twice
  (pod-level ``cpu_ids``/``memory`` overlapping the containers', one device entry per NUMA node);
* an item local to several NUMA nodes is attributed once, to the group ``"0,1"``; an item of
  unknown locality to ``"unknown"``;
* utilization is per single NUMA node, capped at 1, with group memory apportioned in ascending
  node order (an estimate, documented as such); an assigned device counts only while
  ``GetAllocatableResources`` lists it (unhealthy or unregistered devices are counted apart, as
  unavailable, never as inconsistent data);
* alignment: how many NUMA nodes each container's exclusive resources need;
* inconsistent input is counted by kind and never stops the rest of the snapshot.

The work is split so that a refresh costs little when little changed. :func:`pod_figures` is a
pure function of one pod and the topology; a :class:`Ledger` keeps node-wide aggregates (CPU and
device holders, memory sums) and applies only the pods that appeared, left or changed since the
previous snapshot. :func:`account` is the same computation from scratch, for one-off use.

Group labels and ``"unknown"`` are plain strings, used as ``numa_node`` label values directly.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .issues import IssueKind, Issues
from .model import (
    Allocatable,
    ContainerAssignment,
    KubeletSnapshot,
    MemoryBlock,
    NumaIds,
    PodAssignment,
    Topology,
)

UNKNOWN = "unknown"
CPU_RESOURCE = "cpu"

ContainerKey = tuple[str, str, str]  # namespace, pod, container
PodKey = tuple[str, str]  # namespace, pod
Device = tuple[str, str]  # resource, device id
DraKey = tuple[str, str, str]  # driver, pool, device


# ---- small helpers -------------------------------------------------------------------------

def group_label(numa_ids: tuple[int, ...]) -> str:
    """``()`` -> ``"unknown"``, ``(0,)`` -> ``"0"``, ``(0, 1)`` -> ``"0,1"`` (ids sorted)."""
    if not numa_ids:
        return UNKNOWN
    return ",".join(str(i) for i in numa_ids)


def label_ids(label: str) -> tuple[int, ...]:
    """Inverse of :func:`group_label`; ``"unknown"`` -> ``()``."""
    if label == UNKNOWN:
        return ()
    return tuple(int(part) for part in label.split(","))


class TopologyView:
    """The sysfs topology as the accounting asks it: CPU -> NUMA label, NUMA ids -> known ids."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.known = frozenset(topology.numa_nodes)
        self.cpu_label = {cpu: str(numa) for cpu, numa in topology.cpu_to_numa.items()}
        self._resolved: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[str, ...]]] = {}

    def resolve(self, numa_ids: NumaIds) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """(sorted known ids, issue kinds) for reported ids; unknown and negative ids dropped."""
        if not numa_ids:
            return (), ()
        cached = self._resolved.get(numa_ids)
        if cached is None:
            if len(self._resolved) > 4096:  # hostile data: many distinct id lists
                self._resolved = {}
            kept: set[int] = set()
            problems: list[str] = []
            for numa_id in numa_ids:
                if numa_id < 0:
                    problems.append(IssueKind.NEGATIVE_NUMA_ID)
                elif numa_id not in self.known:
                    problems.append(IssueKind.UNKNOWN_NUMA_ID)
                else:
                    kept.add(numa_id)
            cached = self._resolved[numa_ids] = (tuple(sorted(kept)), tuple(problems))
        return cached

    def ids(self, numa_ids: NumaIds, issues: Issues, what: str) -> tuple[int, ...]:
        kept, problems = self.resolve(numa_ids)
        for kind in problems:
            issues.add(kind, f"{what} names NUMA ids {list(numa_ids)}; sysfs knows "
                             f"{sorted(self.known)}")
        return kept


def min_numa_nodes(required: frozenset[int] | set[int], device_sets: list[frozenset[int]]) -> int:
    """Size of the smallest NUMA set containing ``required`` and touching every device set.

    This is the alignment rule: CPUs and memory fix the nodes a container already uses; each
    device only needs one of its local nodes to be among them. A minimum hitting set, found by
    branch and bound: branch on the nodes of the smallest set not yet hit, prune with a lower
    bound (sets that share no node each need their own). Real containers settle in a handful of
    steps; the search is capped so hostile data cannot stall a refresh, and past the cap the
    best cover found so far (at worst a greedy one) is returned.
    """
    chosen = set(required)
    residual = {s for s in device_sets if s and not (s & chosen)}
    if not residual:
        return len(chosen)
    ordered = sorted(residual, key=len)
    minimal: list[frozenset[int]] = []  # hitting a set hits its supersets too
    for candidate in ordered:
        if not any(kept <= candidate for kept in minimal):
            minimal.append(candidate)
    best = [_greedy_cover(minimal)]
    budget = [_SEARCH_BUDGET]

    def search(sets: list[frozenset[int]], depth: int) -> None:
        if not sets:
            best[0] = min(best[0], depth)
            return
        if depth + _disjoint_count(sets) >= best[0] or budget[0] <= 0:
            return
        budget[0] -= 1
        smallest = min(sets, key=len)
        for node in sorted(smallest):
            search([s for s in sets if node not in s], depth + 1)

    search(minimal, 0)
    return len(chosen) + best[0]


_SEARCH_BUDGET = 20_000


def _greedy_cover(sets: list[frozenset[int]]) -> int:
    """An upper bound: repeatedly take the node in the most unhit sets."""
    remaining = list(sets)
    size = 0
    while remaining:
        counts = Counter(node for s in remaining for node in s)
        best = min(counts, key=lambda node: (-counts[node], node))
        remaining = [s for s in remaining if best not in s]
        size += 1
    return size


def _disjoint_count(sets: list[frozenset[int]]) -> int:
    """A lower bound: sets that share no node (picked greedily, smallest first) each need one."""
    used: set[int] = set()
    count = 0
    for s in sorted(sets, key=len):
        if not (s & used):
            used |= s
            count += 1
    return count


def apportion_group_memory(
    allocatable: dict[int, int],
    single: dict[int, int],
    groups: dict[tuple[int, ...], int],
) -> dict[int, int]:
    """Estimate each NUMA node's share of memory blocks that span several nodes.

    The memory manager does not say how a multi-node block is split. We fill each member
    node's allocatable left after the single-node allocations, nodes in ascending id order and
    groups in ascending order of their id lists; what does not fit stays on the highest member.
    Returns the total (single + apportioned) per node.
    """
    left = {node: max(0, allocatable.get(node, 0) - single.get(node, 0)) for node in allocatable}
    total = dict(single)
    for ids in sorted(groups):
        amount = groups[ids]
        for node in ids:
            if amount <= 0:
                break
            take = min(amount, left.get(node, 0))
            if take:
                left[node] -= take
                total[node] = total.get(node, 0) + take
                amount -= take
        if amount > 0:
            top = ids[-1]
            total[top] = total.get(top, 0) + amount
    return total


# ---- one pod -------------------------------------------------------------------------------

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
    issues: Counter = field(default_factory=Counter)
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
    dra_device_info: list[tuple[str, str, str, str, str, str, str, str | None]] = field(
        default_factory=list)


def pod_figures(pod: PodAssignment, view: TopologyView, with_topology: bool = True) -> PodFigures:
    """One pod's contribution; ``with_topology`` is False for v1alpha1 (devices only)."""
    namespace, name = pod.namespace, pod.name
    figures = PodFigures((namespace, name), with_topology)
    issues = Issues()
    where_pod = f"pod {namespace}/{name}"

    # CPUs: the pod-level list includes the containers' own by design
    pod_level_cpus = set(_unique(pod.cpu_ids, issues, f"{where_pod} cpu_ids"))
    container_cpus: dict[str, set[int]] = {}
    container_memory: dict[str, list[MemoryBlock]] = {}
    container_devices: dict[str, dict[Device, set[int]]] = {}
    device_holder: dict[Device, str] = {}
    dra: set[DraKey] = set()
    dra_device_info: set[tuple] = set()
    cpu_holder: dict[int, str] = {}
    names: list[str] = []
    for container in pod.containers:
        ctr = container.name
        where = f"container {namespace}/{name}/{ctr}"
        if ctr in container_cpus:
            issues.add(IssueKind.DUPLICATE_ENTRY, f"{where} listed twice in its pod")
        else:
            names.append(ctr)
            container_cpus[ctr] = set()
            container_memory[ctr] = []
            container_devices[ctr] = {}
        for cpu in _unique(container.cpu_ids, issues, f"{where} cpu_ids"):
            holder = cpu_holder.setdefault(cpu, ctr)
            if holder != ctr:
                issues.add(IssueKind.CPU_MULTIPLE_OWNERS,
                           f"CPU {cpu} assigned to {namespace}/{name}/{holder} and {ctr}")
            container_cpus[ctr].add(cpu)
        blocks = container_memory[ctr]
        for block in container.memory:
            if not block.memory_type:
                issues.add(IssueKind.INVALID_ENTRY, f"{where} has a memory block without memory_type")
            elif block in blocks:
                issues.add(IssueKind.DUPLICATE_ENTRY, f"{where} repeats memory block {block.memory_type}")
            else:
                blocks.append(block)
        mine = container_devices[ctr]
        seen_entries: set = set()
        for entry in container.devices:
            for device_id in entry.device_ids:
                if not entry.resource or not device_id:
                    issues.add(IssueKind.INVALID_ENTRY,
                               f"{where} has a device entry without resource name or device id")
                    continue
                identity = (entry.resource, device_id, entry.numa_ids)
                # v1alpha1 keeps the kubelet's per-NUMA entries without their topology: an id
                # repeated there is one device on several NUMA nodes, not a duplicate
                if with_topology and identity in seen_entries:
                    issues.add(IssueKind.DUPLICATE_ENTRY,
                               f"{where} lists device {entry.resource}/{device_id} twice")
                    continue
                seen_entries.add(identity)
                device = (entry.resource, device_id)
                holder = device_holder.setdefault(device, ctr)
                if holder != ctr:
                    issues.add(IssueKind.DEVICE_MULTIPLE_OWNERS,
                               f"device {entry.resource}/{device_id} assigned to "
                               f"{namespace}/{name}/{holder} and {ctr}")
                raw = mine.setdefault(device, set())
                if entry.numa_ids:
                    raw.update(entry.numa_ids)
        for item in container.dra_devices:
            if not item.driver or not item.device:
                issues.add(IssueKind.INVALID_ENTRY, f"{where} has a DRA device without driver or "
                                                "device name")
                continue
            dra.add((item.driver, item.pool, item.device))
            dra_device_info.add((item.driver, item.pool, item.device, item.claim_name, namespace, name,
                          ctr, item.share_id))
    figures.containers = len(names)
    figures.dra = frozenset(dra)
    figures.dra_device_info = sorted(dra_device_info, key=lambda row: tuple(x or "" for x in row))

    # devices: the pod's union of reported NUMA ids per device; container rows
    pod_devices: dict[Device, set[int]] = {}
    for ctr in names:
        per_group: Counter = Counter()
        for device, raw in container_devices[ctr].items():
            pod_devices.setdefault(device, set()).update(raw)
            label = group_label(view.resolve(tuple(sorted(raw)))[0])
            per_group[(device[0], label)] += 1
            figures.device_info.append((device[0], device[1], label, namespace, name, ctr))
        for (resource, label), count in per_group.items():
            figures.container_devices[(namespace, name, ctr, resource, label)] = count
    figures.device_info.sort()
    for device, raw in pod_devices.items():
        view.ids(tuple(sorted(raw)), issues, f"device {device[0]}/{device[1]}")
    figures.devices = {device: frozenset(raw) for device, raw in pod_devices.items()}

    if with_topology:
        all_cpus = set(pod_level_cpus)
        for ctr in names:
            all_cpus |= container_cpus[ctr]
            for label, count in Counter(_cpu_labels(container_cpus[ctr], view)).items():
                figures.container_cpus[(namespace, name, ctr, label)] = count
        for label, count in Counter(_cpu_labels(pod_level_cpus, view)).items():
            figures.pod_cpus[(namespace, name, label)] = count
        figures.cpus = frozenset(all_cpus)
        figures.pod_level = bool(pod.cpu_ids or pod.memory)
        _pod_memory(figures, pod, names, container_memory, view, issues)
        for ctr in names:
            nodes = _container_numa_nodes(container_cpus[ctr], container_memory[ctr],
                                          container_devices[ctr], view)
            if nodes is not None:
                figures.container_numa_nodes[(namespace, name, ctr)] = nodes
                figures.misaligned += nodes > 1
    figures.issues = issues.counts
    figures.examples = issues.examples
    return figures


def _unique(values: tuple, issues: Issues, what: str) -> tuple:
    """Drop repeated values, counting the repetition as a duplicated entry."""
    if len(set(values)) == len(values):
        return values
    issues.add(IssueKind.DUPLICATE_ENTRY, f"{what} repeats values", count=len(values) - len(set(values)))
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
    pod_level: Counter = Counter()  # (type, known ids) -> size
    seen: list[MemoryBlock] = []
    for block in pod.memory:
        if not block.memory_type:
            issues.add(IssueKind.INVALID_ENTRY, f"pod {namespace}/{name} memory without type")
            continue
        if block in seen:
            issues.add(IssueKind.DUPLICATE_ENTRY,
                       f"pod {namespace}/{name} repeats pod-level block {block.memory_type}")
            continue
        seen.append(block)
        ids = view.ids(block.numa_ids, issues, f"pod memory of {namespace}/{name}")
        pod_level[(block.memory_type, ids)] += block.size
    for (memory_type, ids), size in pod_level.items():
        figures.pod_memory[(namespace, name, group_label(ids), memory_type)] = size
    covered: Counter = Counter()  # pod-level (type, ids) -> container bytes it includes
    for memory_type, ids, size in containers:
        cover = _narrowest_cover(memory_type, ids, pod_level)
        if cover is None:
            key = (group_label(ids), memory_type)
            figures.memory[key] = figures.memory.get(key, 0) + size
        else:
            covered[cover] += size
    for (memory_type, ids), own in pod_level.items():
        included = covered.get((memory_type, ids), 0)
        if 0 < own < included:
            issues.add(IssueKind.POD_MEMORY_BELOW_CONTAINERS,
                       f"pod {namespace}/{name} pod-level {memory_type} on NUMA "
                       f"{group_label(ids)} is {own} bytes, its containers hold {included}")
        key = (group_label(ids), memory_type)
        figures.memory[key] = figures.memory.get(key, 0) + max(own, included)


def _narrowest_cover(memory_type: str, ids: tuple[int, ...],
                     pod_level: Counter) -> tuple[str, tuple[int, ...]] | None:
    """The pod-level block of this type whose NUMA nodes contain ``ids`` with fewest extra."""
    best = None
    for kind, group in pod_level:
        if kind != memory_type:
            continue
        if group == ids or (ids and group and set(ids) <= set(group)):
            if best is None or (len(group), group) < (len(best[1]), best[1]):
                best = (kind, group)
    return best


def _container_numa_nodes(cpus: set[int], blocks: list[MemoryBlock],
                          devices: dict[Device, set[int]], view: TopologyView) -> int | None:
    """The alignment rule; ``None`` when nothing of known locality is exclusive to it."""
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
    if not required and not device_sets:
        return None
    return min_numa_nodes(frozenset(required), device_sets)


# ---- what the kubelet could assign ---------------------------------------------------------

@dataclass(eq=False)
class AllocatableFigures:
    """GetAllocatableResources, attributed to NUMA nodes; computed once per reply."""

    cpus: frozenset[int] | None = None  # None: not reported (policy none, or unknown)
    cpus_by_numa: dict[str, int] | None = None
    memory: dict[tuple[str, str], int] = field(default_factory=dict)
    devices: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, resource)
    device_capacity: Counter = field(default_factory=Counter)  # (single node, resource)
    listed: frozenset[Device] = frozenset()  # every (resource, id) listed as allocatable
    issues: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


def allocatable_figures(allocatable: Allocatable | None, view: TopologyView,
                        with_topology: bool = True) -> AllocatableFigures:
    figures = AllocatableFigures()
    if allocatable is None or not with_topology:
        return figures
    issues = Issues()
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
    memory: Counter = Counter()
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
    seen: set = set()
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
            ids = numa.setdefault((entry.resource, device_id), set())
            if entry.numa_ids:
                ids.update(entry.numa_ids)
    devices: Counter = Counter()
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


# ---- the whole node ------------------------------------------------------------------------

@dataclass(eq=False)
class Accounting:
    """Everything the metrics say about one snapshot, keyed by label values.

    A ``None`` node-level figure means the kubelet did not report that resource at all (so no
    series is exported); an empty dict means it did, with nothing to show. Workload figures
    live in ``pod_figures`` (one :class:`PodFigures` per pod, in label order); the merged dicts
    below are built on first use, for reports and tests.
    """

    api_version: str
    cpus_allocatable: dict[str, int] | None = None
    cpus_allocated: dict[str, int] | None = None
    memory_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)  # (numa, type)
    memory_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    devices_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)  # (numa, resource)
    devices_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    # of those, the ones GetAllocatableResources does not list; None without that call
    devices_allocated_unavailable: dict[tuple[str, str], int] | None = None
    utilization: dict[tuple[str, str], float] = field(default_factory=dict)  # (numa, resource)
    dra_devices_allocated: dict[tuple[str, str], int] = field(default_factory=dict)  # (driver, pool)
    misaligned_containers: int | None = None
    pod_figures: list[PodFigures] = field(default_factory=list)
    data_issues: Counter = field(default_factory=Counter)
    issue_examples: dict[str, str] = field(default_factory=dict)
    pod_level_seen: bool = False
    containers: int = 0

    @property
    def pods(self) -> int:
        return len(self.pod_figures)

    def _merged(self, name: str) -> dict:
        merged: dict = {}
        for pod in self.pod_figures:
            merged.update(getattr(pod, name))
        return merged

    @property
    def container_cpus(self) -> dict:
        return self._merged("container_cpus")

    @property
    def container_memory(self) -> dict:
        return self._merged("container_memory")

    @property
    def container_devices(self) -> dict:
        return self._merged("container_devices")

    @property
    def container_numa_nodes(self) -> dict:
        return self._merged("container_numa_nodes")

    @property
    def pod_cpus(self) -> dict:
        return self._merged("pod_cpus")

    @property
    def pod_memory(self) -> dict:
        return self._merged("pod_memory")

    @property
    def device_info(self) -> list:
        return sorted(row for pod in self.pod_figures for row in pod.device_info)

    @property
    def dra_device_info(self) -> list:
        return sorted((row for pod in self.pod_figures for row in pod.dra_device_info),
                      key=lambda row: tuple(x or "" for x in row))


class Ledger:
    """Node-wide aggregates kept up to date from one snapshot to the next.

    :meth:`update` applies only the pods that appeared, left or changed (pods are compared by
    identity: the decoder hands back the same object for an unchanged pod), then derives the
    node figures from the aggregates. When nothing changed it returns the previous
    :class:`Accounting` object itself, so callers can skip re-rendering.
    """

    def __init__(self):
        self._reset(None, None, "v1")
        self._result: Accounting | None = None
        self._pod_ids: frozenset[int] = frozenset()
        self._allocatable: Allocatable | None = None
        self._allocatable_figures = AllocatableFigures()

    def _reset(self, topology: Topology | None, view: TopologyView | None,
               api_version: str) -> None:
        self._topology = topology
        self._view = view
        self._api_version = api_version
        self._pods: dict[PodKey, tuple[PodAssignment, PodFigures]] = {}
        self._key_of: dict[int, PodKey] = {}  # id of a held pod -> its key
        self._order: list[PodKey] = []  # keys of held pods, sorted
        self._merged: dict[tuple[int, ...], tuple[tuple[PodAssignment, ...], PodAssignment]] = {}
        self._cpu_holders: Counter = Counter()  # cpu -> pods holding it
        self._cpu_extra_holders = 0  # holders beyond the first, summed over CPUs
        self._cpus_by_numa: Counter = Counter()
        self._device_holders: dict[Device, list[PodFigures]] = {}
        self._device_group: dict[Device, tuple[str, tuple[int, ...]]] = {}  # label, ids
        self._devices: Counter = Counter()  # (group, resource)
        # (single node, resource): assigned devices local to it that allocatable lists
        self._device_use: Counter = Counter()
        self._unavailable: Counter = Counter()  # (group, resource): assigned, not listed
        self._device_extra_holders = 0
        self._memory: Counter = Counter()  # (group, type)
        self._memory_holders: Counter = Counter()  # (group, type) -> pods with such a block
        self._dra_holders: Counter = Counter()
        self._dra: Counter = Counter()  # (driver, pool)
        self._issues: Counter = Counter()
        # kind -> the example of each held pod with that kind, oldest first
        self._examples: dict[str, dict[PodKey, str]] = {}
        self._misaligned = 0
        self._pod_level = 0
        self._containers = 0
        self._pod_ids = frozenset()
        self._listed = 0
        self._result = None

    def update(self, pods: Sequence[PodAssignment], allocatable: Allocatable | None,
               topology: Topology, api_version: str = "v1") -> Accounting:
        """The accounting of this snapshot, reusing everything that did not change."""
        ids = frozenset(map(id, pods))
        if (self._result is not None and ids == self._pod_ids and len(ids) == len(pods)
                and len(pods) == self._listed and allocatable is self._allocatable
                and topology is self._topology and api_version == self._api_version):
            return self._result  # the same pods, each listed once, as last time
        if topology is not self._topology or api_version != self._api_version:
            self._reset(topology, TopologyView(topology), api_version)
            self._allocatable = None
            self._allocatable_figures = AllocatableFigures()
        if allocatable is not self._allocatable or self._result is None:
            self._allocatable = allocatable
            self._allocatable_figures = allocatable_figures(allocatable, self._view,
                                                            api_version != "v1alpha1")
            self._recount_device_use()
        repeated = 0 if self._apply_changes(pods, ids) else self._apply_all(pods)
        self._pod_ids = ids
        self._listed = len(pods)
        self._result = self._finish(repeated)
        return self._result

    def _apply_changes(self, pods: Sequence[PodAssignment], ids: frozenset[int]) -> bool:
        """Apply only the pods that left or arrived; False when that is not enough."""
        if len(ids) != len(pods) or self._merged:
            return False  # a pod listed twice: merge in the long way
        gone = {self._key_of[i] for i in self._pod_ids - ids}
        fresh = [pod for pod in pods if id(pod) not in self._pod_ids]
        keys = [(pod.namespace, pod.name) for pod in fresh]
        if len(set(keys)) != len(keys) or any(k in self._pods and k not in gone for k in keys):
            return False  # a new listing of a pod that is still listed
        for key in gone:
            self._forget(key)
        for key, pod in zip(keys, fresh):
            self._hold(key, pod)
        return True

    def _apply_all(self, pods: Sequence[PodAssignment]) -> int:
        """Compare every pod by key (needed when a pod is listed twice); returns repeats."""
        current = self._by_key(pods)
        for key in self._pods.keys() - current.keys():
            self._forget(key)
        for key, pod in current.items():
            held = self._pods.get(key)
            if held is not None and held[0] is pod:
                continue
            if held is not None:
                self._forget(key)
            self._hold(key, pod)
        return len(pods) - len(current)

    def _hold(self, key: PodKey, pod: PodAssignment) -> None:
        figures = pod_figures(pod, self._view, self._api_version != "v1alpha1")
        self._pods[key] = (pod, figures)
        self._key_of[id(pod)] = key
        insort(self._order, key)
        self._add(figures)

    def _forget(self, key: PodKey) -> None:
        pod, figures = self._pods.pop(key)
        del self._key_of[id(pod)]
        del self._order[bisect_left(self._order, key)]
        self._add(figures, sign=-1)

    def _by_key(self, pods: Sequence[PodAssignment]) -> dict[PodKey, PodAssignment]:
        """Pods by (namespace, name); a pod listed twice is merged into one."""
        current: dict[PodKey, PodAssignment] = {}
        repeated: dict[PodKey, list[PodAssignment]] = {}
        for pod in pods:
            key = (pod.namespace, pod.name)
            if key in current:
                repeated.setdefault(key, [current[key]]).append(pod)
            current[key] = pod
        used = {}
        for key, parts in repeated.items():
            identity = tuple(map(id, parts))
            cached = self._merged.get(identity)
            if cached is None:  # the parts are kept with the result: their ids are the key
                cached = (tuple(parts), _merge_pods(parts))
            used[identity] = cached
            current[key] = cached[1]
        self._merged = used
        return current

    def _add(self, figures: PodFigures, sign: int = 1) -> None:
        self._issues.update({k: sign * v for k, v in figures.issues.items()})
        for kind, example in figures.examples.items():
            if sign > 0:
                self._examples.setdefault(kind, {})[figures.key] = example
            else:  # the example leaves with its pod: another holder's takes over
                held = self._examples[kind]
                del held[figures.key]
                if not held:
                    del self._examples[kind]
        self._misaligned += sign * figures.misaligned
        self._pod_level += sign * figures.pod_level
        self._containers += sign * figures.containers
        labels = self._view.cpu_label
        for cpu in figures.cpus:
            before = self._cpu_holders[cpu]
            after = before + sign
            self._cpu_holders[cpu] = after
            if before == 0 or after == 0:
                self._cpus_by_numa[labels.get(cpu, UNKNOWN)] += sign
            else:
                self._cpu_extra_holders += sign
            if after == 0:
                del self._cpu_holders[cpu]
        for key, size in figures.memory.items():
            self._memory[key] += sign * size
            self._memory_holders[key] += sign
        for key in figures.dra:
            before = self._dra_holders[key]
            after = before + sign
            self._dra_holders[key] = after
            if before == 0 or after == 0:
                self._dra[key[:2]] += sign
            if after == 0:
                del self._dra_holders[key]
        for device in figures.devices:
            resource = device[0]
            holders = self._device_holders.setdefault(device, [])
            before = len(holders)
            if sign > 0:
                holders.append(figures)
            else:
                holders.remove(figures)
            self._device_extra_holders += max(0, len(holders) - 1) - max(0, before - 1)
            old = self._device_group.pop(device, None)
            if old is not None:
                self._devices[(old[0], resource)] -= 1
                self._count_use(device, old, -1)
            if holders:
                raw = frozenset().union(*(h.devices[device] for h in holders))
                ids = self._view.resolve(tuple(sorted(raw)))[0]
                group = (group_label(ids), ids)
                self._device_group[device] = group
                self._devices[(group[0], resource)] += 1
                self._count_use(device, group, +1)
            else:
                del self._device_holders[device]

    def _count_use(self, device: Device, group: tuple[str, tuple[int, ...]], sign: int) -> None:
        """An assigned device counts toward utilization while allocatable lists it (an
        unhealthy or unregistered device takes no allocatable capacity); else it is
        unavailable, under the group List attributes it to."""
        if device in self._allocatable_figures.listed:
            for node in group[1]:
                self._device_use[(node, device[0])] += sign
        else:
            self._unavailable[(group[0], device[0])] += sign

    def _recount_device_use(self) -> None:
        """After allocatable changed: which assigned devices it lists, from scratch."""
        self._device_use = Counter()
        self._unavailable = Counter()
        for device, group in self._device_group.items():
            self._count_use(device, group, +1)

    def _finish(self, repeated_pods: int) -> Accounting:
        with_topology = self._api_version != "v1alpha1"
        alloc = self._allocatable_figures
        result = Accounting(api_version=self._api_version)
        issues = Issues()
        issues.counts.update(+self._issues)
        issues.examples.update({kind: next(iter(held.values()))
                                for kind, held in self._examples.items()})
        issues.counts.update(alloc.issues)
        for kind, example in alloc.examples.items():
            issues.examples.setdefault(kind, example)
        if repeated_pods:
            issues.add(IssueKind.DUPLICATE_ENTRY, "a pod is listed twice", count=repeated_pods)
        if self._cpu_extra_holders:
            issues.add(IssueKind.CPU_MULTIPLE_OWNERS, "a CPU is assigned to containers of two pods",
                       count=self._cpu_extra_holders)
        if self._device_extra_holders:
            issues.add(IssueKind.DEVICE_MULTIPLE_OWNERS, "a device is assigned to two pods",
                       count=self._device_extra_holders)

        if with_topology:
            if alloc.cpus_by_numa:
                result.cpus_allocatable = dict(alloc.cpus_by_numa)
            allocated = {label: 0 for label in (result.cpus_allocatable or {})}
            allocated.update({k: v for k, v in self._cpus_by_numa.items() if v})
            result.cpus_allocated = allocated
            unknown = self._cpus_by_numa.get(UNKNOWN, 0)
            if unknown:
                issues.add(IssueKind.UNKNOWN_CPU, "assigned CPUs are not listed under any NUMA node "
                                              "in sysfs", count=unknown)
            if self._allocatable is not None:
                outside = self._cpu_holders.keys() - alloc.cpus
                if outside:
                    issues.add(IssueKind.CPU_NOT_ALLOCATABLE,
                               f"CPUs {sorted(outside)[:8]} are assigned but not allocatable",
                               count=len(outside))
            for label, capacity in (result.cpus_allocatable or {}).items():
                if label != UNKNOWN and capacity > 0:
                    _set_ratio(result, issues, label, CPU_RESOURCE, allocated.get(label, 0),
                               capacity)
            result.memory_allocatable = dict(alloc.memory)
            memory = {key: 0 for key in alloc.memory}
            memory.update({k: self._memory[k] for k, n in self._memory_holders.items() if n})
            result.memory_allocated = memory
            _memory_utilization(result, issues, self._allocatable is not None)
            result.misaligned_containers = self._misaligned
        result.devices_allocatable = dict(alloc.devices)
        devices = {key: 0 for key in alloc.devices}
        devices.update({k: v for k, v in self._devices.items() if v})
        result.devices_allocated = devices
        if self._allocatable is not None and with_topology:
            result.devices_allocated_unavailable = {key: self._unavailable.get(key, 0)
                                                    for key in devices}
        for (node, resource), capacity in sorted(alloc.device_capacity.items()):
            _set_ratio(result, issues, str(node), resource,
                       self._device_use.get((node, resource), 0), capacity)
        if self._allocatable is not None:
            for (node, resource), used in self._device_use.items():
                if used > 0 and (node, resource) not in alloc.device_capacity:
                    _excess(issues, str(node), resource, used)
        result.dra_devices_allocated = {k: v for k, v in self._dra.items() if v}
        pods = self._pods
        result.pod_figures = [pods[key][1] for key in self._order]
        result.containers = self._containers
        result.pod_level_seen = self._pod_level > 0
        result.data_issues = Counter({k: v for k, v in issues.counts.items() if v > 0})
        result.issue_examples = {k: v for k, v in issues.examples.items()
                                 if k in result.data_issues}
        return result


def _merge_pods(parts: list[PodAssignment]) -> PodAssignment:
    """One pod from several listings of it: what a later listing repeats is not added again."""
    containers: dict[str, ContainerAssignment] = {}
    for part in parts:
        for container in part.containers:
            held = containers.get(container.name)
            containers[container.name] = container if held is None else ContainerAssignment(
                container.name,
                _extend(held.cpu_ids, container.cpu_ids),
                _extend(held.memory, container.memory),
                _extend(held.devices, container.devices),
                _extend(held.dra_devices, container.dra_devices))
    first = parts[0]
    cpu_ids, memory = first.cpu_ids, first.memory
    for part in parts[1:]:
        cpu_ids, memory = _extend(cpu_ids, part.cpu_ids), _extend(memory, part.memory)
    return PodAssignment(first.namespace, first.name, tuple(containers.values()), cpu_ids, memory)


def _extend(held: tuple, more: tuple) -> tuple:
    return held + tuple(item for item in more if item not in held)


def _memory_utilization(result: Accounting, issues: Issues, allocatable_known: bool) -> None:
    """Utilization per single node and memory type, with group memory apportioned; memory
    assigned on a node with none allocatable (when allocatable is known) is an excess."""
    types = {memory_type for _, memory_type in result.memory_allocatable}
    if allocatable_known:
        types |= {memory_type for (label, memory_type), size in result.memory_allocated.items()
                  if size and label != UNKNOWN}
    for memory_type in sorted(types):
        capacity: dict[int, int] = {}
        single: dict[int, int] = {}
        groups: dict[tuple[int, ...], int] = {}
        for (label, kind), size in result.memory_allocatable.items():
            if kind == memory_type and label != UNKNOWN and "," not in label:
                capacity[int(label)] = capacity.get(int(label), 0) + size
        for (label, kind), size in result.memory_allocated.items():
            if kind != memory_type or label == UNKNOWN:
                continue
            ids = label_ids(label)
            if len(ids) == 1:
                single[ids[0]] = single.get(ids[0], 0) + size
            elif size:
                groups[ids] = groups.get(ids, 0) + size
        totals = apportion_group_memory(capacity, single, groups)
        for node, size in capacity.items():
            if size > 0:
                _set_ratio(result, issues, str(node), memory_type, totals.get(node, 0), size)
        for node, size in totals.items():
            if size > 0 and capacity.get(node, 0) <= 0:
                _excess(issues, str(node), memory_type, size)


def _excess(issues: Issues, numa: str, resource: str, allocated: int,
            allocatable: int = 0) -> None:
    issues.add(IssueKind.ALLOCATED_EXCEEDS_ALLOCATABLE,
               f"{resource} on NUMA node {numa}: {allocated} allocated, "
               f"{allocatable} allocatable")


def _set_ratio(result: Accounting, issues: Issues, numa: str, resource: str,
               allocated: int, allocatable: int) -> None:
    if allocatable <= 0:
        return
    if allocated > allocatable:
        _excess(issues, numa, resource, allocated, allocatable)
        result.utilization[(numa, resource)] = 1.0
    else:
        result.utilization[(numa, resource)] = allocated / allocatable


def account(snapshot: KubeletSnapshot, topology: Topology) -> Accounting:
    """Turn one kubelet snapshot and the sysfs topology into every exported figure."""
    return Ledger().update(snapshot.pods, snapshot.allocatable, topology, snapshot.api_version)
