"""Per-NUMA accounting of exclusive resources: pure functions over plain data, no I/O.

This module implements the data semantics of the product contract (SPEC section 2):

* every CPU, device and memory block is counted once, even where the kubelet reports it twice
  (pod-level ``cpu_ids``/``memory`` overlapping the containers', one device entry per NUMA node);
* an item local to several NUMA nodes is attributed once, to the group ``"0,1"``; an item of
  unknown locality to ``"unknown"``;
* utilization is per single NUMA node, capped at 1, with group memory apportioned in ascending
  node order (an estimate, documented as such);
* alignment: how many NUMA nodes each container's exclusive resources need;
* inconsistent input is counted by kind and never stops the rest of the snapshot.

Group labels and the ``"unknown"`` label are plain strings so that the rendering layer can use
them as ``numa_node`` label values directly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations

from .model import (
    Allocatable,
    ContainerAssignment,
    DeviceEntry,
    KubeletSnapshot,
    MemoryBlock,
    NumaIds,
    PodAssignment,
    Topology,
)

UNKNOWN = "unknown"
CPU_RESOURCE = "cpu"

# Data issue kinds (the ``kind`` label of podresources_data_issues_total).
ISSUE_CPU_MULTIPLE_OWNERS = "cpu_multiple_owners"
ISSUE_CPU_NOT_ALLOCATABLE = "cpu_not_allocatable"
ISSUE_UNKNOWN_CPU = "unknown_cpu"
ISSUE_UNKNOWN_NUMA_ID = "unknown_numa_id"
ISSUE_NEGATIVE_NUMA_ID = "negative_numa_id"
ISSUE_DUPLICATE_ENTRY = "duplicate_entry"
ISSUE_INVALID_ENTRY = "invalid_entry"
ISSUE_DEVICE_MULTIPLE_OWNERS = "device_multiple_owners"
ISSUE_POD_MEMORY_BELOW_CONTAINERS = "pod_memory_below_containers"
ISSUE_ALLOCATED_EXCEEDS_ALLOCATABLE = "allocated_exceeds_allocatable"

ContainerKey = tuple[str, str, str]  # namespace, pod, container
PodKey = tuple[str, str]  # namespace, pod


@dataclass
class Accounting:
    """Everything the metrics say about one snapshot, keyed by label values.

    A ``None`` node-level figure means the kubelet did not report that resource at all
    (so no series is exported); an empty dict means it did, with nothing to show.
    """

    api_version: str
    cpus_allocatable: dict[str, int] | None = None
    cpus_allocated: dict[str, int] | None = None
    memory_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)  # (numa, type)
    memory_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    devices_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)  # (numa, resource)
    devices_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    utilization: dict[tuple[str, str], float] = field(default_factory=dict)  # (numa, resource)
    dra_devices_allocated: dict[tuple[str, str], int] = field(default_factory=dict)  # (driver, pool)
    misaligned_containers: int | None = None
    # workload level
    container_cpus: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    container_memory: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    container_devices: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    container_numa_nodes: dict[ContainerKey, int] = field(default_factory=dict)
    pod_cpus: dict[tuple[str, str, str], int] = field(default_factory=dict)
    pod_memory: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    # (resource, device_id, numa, namespace, pod, container)
    device_info: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    # (driver, pool, device, claim, namespace, pod, container, share_id or None)
    dra_device_info: list[tuple[str, str, str, str, str, str, str, str | None]] = field(
        default_factory=list)
    data_issues: Counter = field(default_factory=Counter)
    issue_examples: dict[str, str] = field(default_factory=dict)
    pod_level_seen: bool = False
    pods: int = 0
    containers: int = 0


class _Issues:
    """Collects data issues with one example message per kind."""

    def __init__(self, counter: Counter, examples: dict[str, str]):
        self.counter = counter
        self.examples = examples

    def add(self, kind: str, example: str, count: int = 1) -> None:
        self.counter[kind] += count
        self.examples.setdefault(kind, example)


class _NumaResolver:
    """Turns reported NUMA ids into a ``numa_node`` label, checking them against sysfs."""

    def __init__(self, topology: Topology, issues: _Issues):
        self.known = topology.numa_nodes.keys()
        self.issues = issues
        self._cache: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[str, ...]]] = {}

    def ids(self, numa_ids: NumaIds, what: str) -> tuple[int, ...]:
        """The sorted, de-duplicated known ids; unknown and negative ids are issues."""
        if not numa_ids:
            return ()
        cached = self._cache.get(numa_ids)
        if cached is None:
            kept: set[int] = set()
            problems: list[str] = []
            for numa_id in numa_ids:
                if numa_id < 0:
                    problems.append(ISSUE_NEGATIVE_NUMA_ID)
                elif numa_id not in self.known:
                    problems.append(ISSUE_UNKNOWN_NUMA_ID)
                else:
                    kept.add(numa_id)
            cached = (tuple(sorted(kept)), tuple(problems))
            self._cache[numa_ids] = cached
        kept_ids, problems = cached
        for kind in problems:
            self.issues.add(kind, f"{what} names NUMA ids {list(numa_ids)}; "
                                  f"sysfs knows {sorted(self.known)}")
        return kept_ids

    def known_ids_quiet(self, numa_ids: NumaIds) -> tuple[int, ...]:
        """Known ids without counting issues again (they were counted when attributed)."""
        if not numa_ids:
            return ()
        return tuple(sorted({i for i in numa_ids if i >= 0 and i in self.known}))


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


def min_numa_nodes(required: frozenset[int] | set[int], device_sets: list[frozenset[int]]) -> int:
    """Size of the smallest NUMA set containing ``required`` and touching every device set.

    This is the alignment rule: CPUs and memory fix the nodes a container already uses; each
    device only needs one of its local nodes to be among them. A minimum hitting set, solved
    exactly by search over the few candidate nodes that matter (machines have at most a few
    dozen NUMA nodes, containers a handful of distinct device localities).
    """
    chosen = set(required)
    residual = {s for s in device_sets if s and not (s & chosen)}
    # A device local to a single node forces that node.
    forced = {next(iter(s)) for s in residual if len(s) == 1}
    chosen |= forced
    residual = [s for s in residual if not (s & chosen)]
    if not residual:
        return len(chosen)
    # Drop supersets: hitting the smaller set hits the larger one too.
    residual.sort(key=len)
    minimal: list[frozenset[int]] = []
    for candidate in residual:
        if not any(kept <= candidate for kept in minimal):
            minimal.append(candidate)
    candidates = sorted(set().union(*minimal))
    if len(candidates) > 24:
        # Not expected on real hardware; fall back to a greedy cover (an upper bound).
        extra: set[int] = set()
        remaining = list(minimal)
        while remaining:
            best = max(candidates, key=lambda node: sum(node in s for s in remaining))
            extra.add(best)
            remaining = [s for s in remaining if best not in s]
        return len(chosen) + len(extra)
    for size in range(1, len(minimal) + 1):
        for combo in combinations(candidates, size):
            picked = set(combo)
            if all(s & picked for s in minimal):
                return len(chosen) + size
    return len(chosen) + len(minimal)  # unreachable: one node per set always hits


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


def account(snapshot: KubeletSnapshot, topology: Topology) -> Accounting:
    """Turn one kubelet snapshot and the sysfs topology into every exported figure."""
    result = Accounting(api_version=snapshot.api_version)
    issues = _Issues(result.data_issues, result.issue_examples)
    resolver = _NumaResolver(topology, issues)
    cpu_to_numa = topology.cpu_to_numa
    has_topology = snapshot.api_version != "v1alpha1"

    def cpu_label(cpu: int) -> str:
        numa_id = cpu_to_numa.get(cpu)
        if numa_id is None:
            issues.add(ISSUE_UNKNOWN_CPU, f"CPU {cpu} is not listed under any NUMA node in sysfs")
            return UNKNOWN
        return str(numa_id)

    # ---- walk the pods -------------------------------------------------------------------
    cpu_owner: dict[int, tuple[PodKey, str | None]] = {}  # cpu -> (pod, container or None)
    container_cpu_sets: dict[ContainerKey, set[int]] = defaultdict(set)
    pod_level_cpu_sets: dict[PodKey, set[int]] = defaultdict(set)
    # device (resource, id) -> raw NUMA ids seen anywhere in List, and its owners
    device_numa: dict[tuple[str, str], set[int]] = defaultdict(set)
    device_owners: dict[tuple[str, str], list[ContainerKey]] = defaultdict(list)
    # per container: (resource, id) -> raw ids
    container_devices: dict[ContainerKey, dict[tuple[str, str], set[int]]] = defaultdict(dict)
    container_memory_blocks: dict[ContainerKey, list[MemoryBlock]] = defaultdict(list)
    pod_memory_blocks: dict[PodKey, list[MemoryBlock]] = defaultdict(list)
    pod_containers: dict[PodKey, list[ContainerKey]] = defaultdict(list)
    dra_seen: set[tuple[str, str, str]] = set()
    dra_info: set[tuple[str, str, str, str, str, str, str, str | None]] = set()

    seen_pods: set[PodKey] = set()
    for pod in snapshot.pods:
        pod_key = (pod.namespace, pod.name)
        if pod_key in seen_pods:
            issues.add(ISSUE_DUPLICATE_ENTRY, f"pod {pod.namespace}/{pod.name} listed twice")
        seen_pods.add(pod_key)
        if pod.cpu_ids or pod.memory:
            result.pod_level_seen = True
        for cpu in _unique(pod.cpu_ids, issues, f"pod {pod.namespace}/{pod.name} cpu_ids"):
            _claim_cpu(cpu, pod_key, None, cpu_owner, issues)
            pod_level_cpu_sets[pod_key].add(cpu)
        pod_memory_blocks[pod_key].extend(pod.memory)
        seen_containers: set[str] = set()
        for container in pod.containers:
            key = (pod.namespace, pod.name, container.name)
            if container.name in seen_containers:
                issues.add(ISSUE_DUPLICATE_ENTRY,
                           f"container {key[0]}/{key[1]}/{key[2]} listed twice in its pod")
            if key not in pod_containers[pod_key]:  # a repeated pod repeats its containers
                pod_containers[pod_key].append(key)
            seen_containers.add(container.name)
            where = f"container {key[0]}/{key[1]}/{key[2]}"
            for cpu in _unique(container.cpu_ids, issues, f"{where} cpu_ids"):
                _claim_cpu(cpu, pod_key, container.name, cpu_owner, issues)
                container_cpu_sets[key].add(cpu)
            _collect_container_memory(container, key, container_memory_blocks, issues, where)
            _collect_container_devices(container, key, container_devices, device_numa,
                                       device_owners, issues, where)
            for dra in container.dra_devices:
                if not dra.driver or not dra.device:
                    issues.add(ISSUE_INVALID_ENTRY,
                               f"{where} has a DRA device without driver or device name")
                    continue
                dra_seen.add((dra.driver, dra.pool, dra.device))
                dra_info.add((dra.driver, dra.pool, dra.device, dra.claim_name,
                              pod.namespace, pod.name, container.name, dra.share_id))
    result.pods = len(seen_pods)
    result.containers = sum(len(v) for v in pod_containers.values())

    # ---- CPUs ------------------------------------------------------------------------------
    allocatable = snapshot.allocatable
    allocatable_cpus: set[int] | None = None
    if has_topology and allocatable is not None and allocatable.cpu_ids:
        allocatable_cpus = set(_unique(allocatable.cpu_ids, issues, "allocatable cpu_ids"))
        result.cpus_allocatable = Counter(cpu_label(cpu) for cpu in sorted(allocatable_cpus))
    allocated_cpus = set(cpu_owner)
    if has_topology:
        allocated_by_numa: dict[str, int] = {label: 0 for label in (result.cpus_allocatable or {})}
        for cpu in sorted(allocated_cpus):
            label = cpu_label(cpu)
            allocated_by_numa[label] = allocated_by_numa.get(label, 0) + 1
        result.cpus_allocated = allocated_by_numa
        if allocatable is not None:
            outside = allocated_cpus - (allocatable_cpus or set())
            if outside:
                issues.add(ISSUE_CPU_NOT_ALLOCATABLE,
                           f"CPUs {sorted(outside)[:8]} are assigned but not allocatable",
                           count=len(outside))
        if result.cpus_allocatable:
            for label, capacity in result.cpus_allocatable.items():
                if label != UNKNOWN and capacity > 0:
                    _set_ratio(result, issues, label, CPU_RESOURCE,
                               allocated_by_numa.get(label, 0), capacity)

    # ---- memory ----------------------------------------------------------------------------
    if has_topology:
        _account_memory(result, allocatable, container_memory_blocks, pod_memory_blocks,
                        pod_containers, resolver, issues)

    # ---- devices ---------------------------------------------------------------------------
    _account_devices(result, allocatable if has_topology else None, device_numa, device_owners,
                     resolver, issues)

    # ---- DRA -------------------------------------------------------------------------------
    dra_counts: Counter = Counter((driver, pool) for driver, pool, _ in dra_seen)
    result.dra_devices_allocated = dict(dra_counts)
    result.dra_device_info = sorted(dra_info, key=lambda row: tuple(x or "" for x in row))

    # ---- workload series and alignment -----------------------------------------------------
    for key, cpus in container_cpu_sets.items():
        for label, count in Counter(cpu_label(cpu) for cpu in cpus).items():
            result.container_cpus[(*key, label)] = count
    for pod_key, cpus in pod_level_cpu_sets.items():
        for label, count in Counter(cpu_label(cpu) for cpu in cpus).items():
            result.pod_cpus[(*pod_key, label)] = count
    for key, devices in container_devices.items():
        per_group: Counter = Counter()
        for (resource, device_id), raw_ids in devices.items():
            label = group_label(resolver.known_ids_quiet(tuple(raw_ids)))
            per_group[(resource, label)] += 1
            result.device_info.append((resource, device_id, label, *key))
        for (resource, label), count in per_group.items():
            result.container_devices[(*key, resource, label)] = count
    result.device_info.sort()

    if has_topology:
        misaligned = 0
        all_containers = set(container_cpu_sets) | set(container_devices) | set(
            container_memory_blocks)
        for key in all_containers:
            nodes = _container_numa_nodes(key, container_cpu_sets, container_memory_blocks,
                                          container_devices, cpu_to_numa, resolver)
            if nodes is not None:
                result.container_numa_nodes[key] = nodes
                if nodes > 1:
                    misaligned += 1
        result.misaligned_containers = misaligned
    return result


def _unique(values: tuple, issues: _Issues, what: str) -> tuple:
    """Drop repeated values, counting the repetition as a duplicated entry."""
    if len(set(values)) == len(values):
        return values
    issues.add(ISSUE_DUPLICATE_ENTRY, f"{what} repeats values", count=len(values) - len(set(values)))
    return tuple(dict.fromkeys(values))


def _claim_cpu(cpu: int, pod_key: PodKey, container: str | None,
               cpu_owner: dict[int, tuple[PodKey, str | None]], issues: _Issues) -> None:
    """Record who holds ``cpu``; a second holder is an issue, except the pod-level overlap."""
    owner = cpu_owner.get(cpu)
    if owner is None:
        cpu_owner[cpu] = (pod_key, container)
        return
    owner_pod, owner_container = owner
    if owner_pod == pod_key and (owner_container is None or container is None):
        # Pod-level cpu_ids include the containers' CPUs by design.
        if owner_container is None and container is not None:
            cpu_owner[cpu] = (pod_key, container)
        return
    if owner_pod == pod_key and owner_container == container:
        return  # the same container listed twice; already reported as a duplicate
    issues.add(ISSUE_CPU_MULTIPLE_OWNERS,
               f"CPU {cpu} assigned to {'/'.join(owner_pod)}/{owner_container or '(pod)'} "
               f"and {'/'.join(pod_key)}/{container or '(pod)'}")


def _collect_container_memory(container: ContainerAssignment, key: ContainerKey,
                              blocks: dict[ContainerKey, list[MemoryBlock]], issues: _Issues,
                              where: str) -> None:
    seen: set[MemoryBlock] = set(blocks.get(key, ()))
    for block in container.memory:
        if not block.memory_type:
            issues.add(ISSUE_INVALID_ENTRY, f"{where} has a memory block without memory_type")
            continue
        if block in seen:
            issues.add(ISSUE_DUPLICATE_ENTRY, f"{where} repeats memory block {block.memory_type}")
            continue
        seen.add(block)
        blocks[key].append(block)


def _collect_container_devices(container: ContainerAssignment, key: ContainerKey,
                               container_devices: dict[ContainerKey, dict[tuple[str, str], set[int]]],
                               device_numa: dict[tuple[str, str], set[int]],
                               device_owners: dict[tuple[str, str], list[ContainerKey]],
                               issues: _Issues, where: str) -> None:
    mine = container_devices.setdefault(key, {})
    seen_entries: set[tuple[str, str, NumaIds]] = set()
    for entry in container.devices:
        for device_id in entry.device_ids:
            if not entry.resource or not device_id:
                issues.add(ISSUE_INVALID_ENTRY,
                           f"{where} has a device entry without resource name or device id")
                continue
            identity = (entry.resource, device_id, entry.numa_ids)
            if identity in seen_entries:
                issues.add(ISSUE_DUPLICATE_ENTRY,
                           f"{where} lists device {entry.resource}/{device_id} twice")
                continue
            seen_entries.add(identity)
            device = (entry.resource, device_id)
            raw = mine.get(device)
            if raw is None:
                raw = mine[device] = set()
                owners = device_owners[device]
                if owners and key not in owners:
                    issues.add(ISSUE_DEVICE_MULTIPLE_OWNERS,
                               f"device {entry.resource}/{device_id} assigned to "
                               f"{'/'.join(owners[0])} and {'/'.join(key)}")
                if key not in owners:
                    owners.append(key)
            if entry.numa_ids:
                raw.update(entry.numa_ids)
                device_numa[device].update(entry.numa_ids)
            else:
                device_numa.setdefault(device, set())
    if not mine:
        del container_devices[key]


def _account_memory(result: Accounting, allocatable: Allocatable | None,
                    container_blocks: dict[ContainerKey, list[MemoryBlock]],
                    pod_blocks: dict[PodKey, list[MemoryBlock]],
                    pod_containers: dict[PodKey, list[ContainerKey]],
                    resolver: _NumaResolver, issues: _Issues) -> None:
    # allocatable, by (group label, type)
    allocatable_by_key: Counter = Counter()
    if allocatable is not None:
        for block in allocatable.memory:
            if not block.memory_type:
                issues.add(ISSUE_INVALID_ENTRY, "allocatable memory block without memory_type")
                continue
            label = group_label(resolver.ids(block.numa_ids, f"allocatable {block.memory_type}"))
            allocatable_by_key[(label, block.memory_type)] += block.size
    result.memory_allocatable = dict(allocatable_by_key)

    # per container, per (group, type)
    container_sums: dict[ContainerKey, Counter] = {}
    for key, blocks in container_blocks.items():
        sums: Counter = Counter()
        for block in blocks:
            label = group_label(resolver.ids(block.numa_ids, f"memory of {'/'.join(key)}"))
            sums[(label, block.memory_type)] += block.size
        container_sums[key] = sums
        for (label, memory_type), size in sums.items():
            result.container_memory[(*key, label, memory_type)] = size

    allocated: Counter = Counter({key: 0 for key in allocatable_by_key})
    pods = set(pod_containers) | {k[:2] for k in container_blocks} | set(pod_blocks)
    for pod_key in pods:
        from_containers: Counter = Counter()
        for key in pod_containers.get(pod_key, ()):
            from_containers.update(container_sums.get(key, {}))
        pod_level: Counter = Counter()
        for block in pod_blocks.get(pod_key, ()):
            if not block.memory_type:
                issues.add(ISSUE_INVALID_ENTRY, f"pod {'/'.join(pod_key)} memory without type")
                continue
            label = group_label(resolver.ids(block.numa_ids, f"pod memory of {'/'.join(pod_key)}"))
            pod_level[(label, block.memory_type)] += block.size
        for (label, memory_type), size in pod_level.items():
            result.pod_memory[(*pod_key, label, memory_type)] = size
        for mem_key in set(from_containers) | set(pod_level):
            own = pod_level.get(mem_key, 0)
            summed = from_containers.get(mem_key, 0)
            if 0 < own < summed:
                issues.add(ISSUE_POD_MEMORY_BELOW_CONTAINERS,
                           f"pod {'/'.join(pod_key)} pod-level {mem_key[1]} on NUMA {mem_key[0]} "
                           f"is {own} bytes, its containers hold {summed}")
            allocated[mem_key] += max(own, summed)
    result.memory_allocated = dict(allocated)

    # utilization per single node and memory type, with group apportioning
    types = {memory_type for _, memory_type in allocatable_by_key}
    for memory_type in sorted(types):
        capacity: dict[int, int] = {}
        single: dict[int, int] = {}
        groups: dict[tuple[int, ...], int] = {}
        for (label, kind), size in allocatable_by_key.items():
            if kind == memory_type and label != UNKNOWN and "," not in label:
                capacity[int(label)] = capacity.get(int(label), 0) + size
        for (label, kind), size in allocated.items():
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


def _account_devices(result: Accounting, allocatable: Allocatable | None,
                     device_numa: dict[tuple[str, str], set[int]],
                     device_owners: dict[tuple[str, str], list[ContainerKey]],
                     resolver: _NumaResolver, issues: _Issues) -> None:
    # allocatable: distinct ids per resource, their NUMA ids merged across entries
    allocatable_numa: dict[tuple[str, str], set[int]] = {}
    if allocatable is not None:
        seen_entries: set[tuple[str, str, NumaIds]] = set()
        for entry in allocatable.devices:
            for device_id in entry.device_ids:
                if not entry.resource or not device_id:
                    issues.add(ISSUE_INVALID_ENTRY, "allocatable device without name or id")
                    continue
                identity = (entry.resource, device_id, entry.numa_ids)
                if identity in seen_entries:
                    issues.add(ISSUE_DUPLICATE_ENTRY,
                               f"allocatable device {entry.resource}/{device_id} listed twice")
                    continue
                seen_entries.add(identity)
                ids = allocatable_numa.setdefault((entry.resource, device_id), set())
                if entry.numa_ids:
                    ids.update(entry.numa_ids)

    def groups_of(devices: dict[tuple[str, str], set[int]], what: str) -> dict[tuple[str, str], tuple[int, ...]]:
        return {device: resolver.ids(tuple(sorted(raw)), f"{what} {device[0]}/{device[1]}")
                if raw else () for device, raw in devices.items()}

    allocatable_groups = groups_of(allocatable_numa, "allocatable device")
    allocated_groups = groups_of(device_numa, "device")

    allocatable_counts: Counter = Counter(
        (group_label(ids), resource) for (resource, _), ids in allocatable_groups.items())
    allocated_counts: Counter = Counter({key: 0 for key in allocatable_counts})
    allocated_counts.update(
        (group_label(ids), resource) for (resource, _), ids in allocated_groups.items())
    result.devices_allocatable = dict(allocatable_counts)
    result.devices_allocated = dict(allocated_counts)

    # utilization: a group device counts toward each member node, on both sides
    capacity: Counter = Counter()
    for (resource, _), ids in allocatable_groups.items():
        for node in ids:
            capacity[(node, resource)] += 1
    used: Counter = Counter()
    for (resource, _), ids in allocated_groups.items():
        for node in ids:
            used[(node, resource)] += 1
    for (node, resource), size in sorted(capacity.items()):
        _set_ratio(result, issues, str(node), resource, used.get((node, resource), 0), size)


def _set_ratio(result: Accounting, issues: _Issues, numa: str, resource: str,
               allocated: int, allocatable: int) -> None:
    if allocatable <= 0:
        return
    if allocated > allocatable:
        issues.add(ISSUE_ALLOCATED_EXCEEDS_ALLOCATABLE,
                   f"{resource} on NUMA node {numa}: {allocated} allocated, "
                   f"{allocatable} allocatable")
        result.utilization[(numa, resource)] = 1.0
    else:
        result.utilization[(numa, resource)] = allocated / allocatable


def _container_numa_nodes(key: ContainerKey, cpu_sets: dict[ContainerKey, set[int]],
                          memory_blocks: dict[ContainerKey, list[MemoryBlock]],
                          devices: dict[ContainerKey, dict[tuple[str, str], set[int]]],
                          cpu_to_numa: dict[int, int], resolver: _NumaResolver) -> int | None:
    """The alignment rule; ``None`` when nothing of known locality is exclusive to it."""
    required: set[int] = set()
    for cpu in cpu_sets.get(key, ()):
        numa_id = cpu_to_numa.get(cpu)
        if numa_id is not None:
            required.add(numa_id)
    for block in memory_blocks.get(key, ()):
        required.update(resolver.known_ids_quiet(block.numa_ids))
    device_sets = []
    for raw in devices.get(key, {}).values():
        ids = resolver.known_ids_quiet(tuple(raw))
        if ids:
            device_sets.append(frozenset(ids))
    if not required and not device_sets:
        return None
    return min_numa_nodes(frozenset(required), device_sets)

