"""The resource managers' state, rebuilt from one snapshot (``List``, ``GetAllocatableResources``
and sysfs): what :mod:`exporter.fit.admission` judges a pod against. Pure, no I/O.

* CPUs (when CPU manager ``static``): every online CPU of each NUMA node from sysfs (the
  capacity), the allocatable CPUs no pod or container holds (free), SMT siblings, and the cores
  of the reserved CPUs (online but not allocatable).
* Memory (when memory manager ``Static``): each node's allocatable per type from its single-node
  blocks; ``List``'s blocks taken off as the memory manager does (a block spanning nodes fills
  them in id order) and every node of such a block in one group (``Cells``), each node counting
  its assignments. A pod's pod-level blocks stand for its containers' when present (they
  overlap, SPEC section 2).
* Devices: per resource, the devices either API names (registered), and the allocatable ones no
  container holds (free), counted per set of NUMA nodes. An unhealthy unassigned device is in
  neither API and is missed (SPEC 7.4).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import ApiVersion, KubeletSnapshot, MemoryBlock, Topology
from .cpuassign import CpuTopology
from .nodestate import CpuState, DeviceState, MemoryNode, NodeState, NumaSet


def node_state(snapshot: KubeletSnapshot, topology: Topology, cpu_static: bool,
               memory_static: bool) -> NodeState | None:
    """``None`` without ``GetAllocatableResources`` or under v1alpha1: nothing to judge by."""
    allocatable = snapshot.allocatable
    if allocatable is None or snapshot.api_version != ApiVersion.V1:
        return None
    numa_ids = tuple(sorted(topology.numa_nodes))
    known = frozenset(numa_ids)
    cpu = _cpu_state(snapshot, topology) if cpu_static else None
    memory = _memory_state(snapshot, known) if memory_static else None
    return NodeState(numa_ids, cpu, memory, _device_state(snapshot, known),
                     topology.distances())


def _cpu_state(snapshot: KubeletSnapshot, topology: Topology) -> CpuState:
    assert snapshot.allocatable is not None
    assigned: set[int] = set()
    for pod in snapshot.pods:
        assigned.update(pod.cpu_ids)
        for container in pod.containers:
            assigned.update(container.cpu_ids)
    online = {n: node.cpus for n, node in topology.numa_nodes.items()}
    every = frozenset().union(*online.values()) if online else frozenset()
    allocatable = frozenset(snapshot.allocatable.cpu_ids) & every
    reserved = every - allocatable
    reserved_cores = frozenset(c for r in reserved for c in topology.siblings(r))
    cpu_topology = CpuTopology.build(topology.cpu_to_numa, topology.cpu_siblings,
                                     topology.cpu_packages)
    threads = max(cpu_topology.cpus_per_core(), 1)
    return CpuState(online, allocatable - assigned, dict(topology.cpu_to_numa),
                    dict(topology.cpu_siblings), threads, reserved_cores, cpu_topology)


def _ids(numa_ids: tuple[int, ...] | None, known: NumaSet) -> NumaSet:
    return frozenset(i for i in numa_ids or () if i in known)


def _listed_blocks(snapshot: KubeletSnapshot) -> Iterable[MemoryBlock]:
    for pod in snapshot.pods:
        if pod.memory:
            yield from pod.memory
            continue
        for container in pod.containers:
            yield from container.memory


def _memory_state(snapshot: KubeletSnapshot, known: NumaSet) -> dict[int, MemoryNode]:
    assert snapshot.allocatable is not None
    allocatable: dict[int, dict[str, int]] = {n: {} for n in known}
    for block in snapshot.allocatable.memory:
        ids = _ids(block.numa_ids, known)
        if len(ids) == 1 and block.size > 0:
            per_type = allocatable[next(iter(ids))]
            per_type[block.memory_type] = per_type.get(block.memory_type, 0) + block.size
    free = {n: dict(types) for n, types in allocatable.items()}
    group: dict[int, set[int]] = {n: {n} for n in known}
    assignments = dict.fromkeys(known, 0)
    for block in _listed_blocks(snapshot):
        ids = _ids(block.numa_ids, known)
        if not ids:
            continue
        need = block.size
        for n in sorted(ids):
            assignments[n] += 1
            have = free[n].get(block.memory_type, 0)
            if need > 0 and have > 0:
                use = min(have, need)
                free[n][block.memory_type] = have - use
                need -= use
        if len(ids) > 1:
            merged = set().union(*(group[n] for n in ids))
            for n in merged:
                group[n] = merged
    return {n: MemoryNode(allocatable[n], free[n], frozenset(group[n]), assignments[n])
            for n in sorted(known)}


def _device_state(snapshot: KubeletSnapshot, known: NumaSet) -> dict[str, DeviceState]:
    assert snapshot.allocatable is not None
    where: dict[tuple[str, str], set[int]] = {}
    healthy: set[tuple[str, str]] = set()
    held: set[tuple[str, str]] = set()
    for entry in snapshot.allocatable.devices:
        for device_id in entry.device_ids:
            if entry.resource and device_id:
                key = (entry.resource, device_id)
                healthy.add(key)
                where.setdefault(key, set()).update(_ids(entry.numa_ids, known))
    for pod in snapshot.pods:
        for container in pod.containers:
            for entry in container.devices:
                for device_id in entry.device_ids:
                    if entry.resource and device_id:
                        key = (entry.resource, device_id)
                        held.add(key)
                        where.setdefault(key, set()).update(_ids(entry.numa_ids, known))
    registered: dict[str, dict[NumaSet, int]] = {}
    free: dict[str, dict[NumaSet, int]] = {}
    healthy_count: dict[str, int] = {}
    held_count: dict[str, int] = {}
    for resource, _ in healthy:
        healthy_count[resource] = healthy_count.get(resource, 0) + 1
    for resource, _ in held:
        held_count[resource] = held_count.get(resource, 0) + 1
    for (resource, device_id), ids in where.items():
        numa = frozenset(ids)
        counts = registered.setdefault(resource, {})
        counts[numa] = counts.get(numa, 0) + 1
        pool = free.setdefault(resource, {})
        if (resource, device_id) in healthy and (resource, device_id) not in held:
            pool[numa] = pool.get(numa, 0) + 1
    return {r: DeviceState(registered[r], free.get(r, {}), healthy_count.get(r, 0),
                           held_count.get(r, 0)) for r in sorted(registered)}
