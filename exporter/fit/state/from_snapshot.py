"""The resource managers' state, rebuilt from one snapshot (``List``, ``GetAllocatableResources``
and sysfs): what :mod:`exporter.fit.kubelet.topologymanager.scope` judges a pod against. Pure, no
I/O.

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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ...model import ApiVersion, KubeletSnapshot, MemoryBlock, PodAssignment, Topology
from ...podcontext import NodeContext
from ..kubelet.cpumanager.state import CpuManagerState
from ..kubelet.cpumanager.topology import CpuTopology
from ..kubelet.devicemanager.manager import DeviceState
from ..kubelet.managers_state import ManagersState, NodeRequests
from ..kubelet.memorymanager.state import MemoryNode
from ..kubelet.podshape import CPU
from ..kubelet.topologymanager.topology_manager import NumaSet
from .allocatable import Reservation, derived_allocatable
from .checkpoints import POD_LEVEL, KubeletState, MemoryManagerState, Registered


def node_state(snapshot: KubeletSnapshot, topology: Topology, cpu_static: bool,
               memory_static: bool, context: NodeContext | None = None,
               kubelet: KubeletState | None = None, max_pods: int | None = None,
               reservation: Reservation | None = None) -> ManagersState | None:
    """``None`` without ``GetAllocatableResources`` or under v1alpha1: nothing to judge by.

    ``context`` (pod context, when a source gives it): listed pods it knows as finished or
    rejected hold nothing for the next admission (``removeStaleState`` frees them first), and
    the predicate counts its active pods' requests; ``kubelet``: the state files, for the CPUs
    and devices of finished init containers that ``List`` hides; ``max_pods``: the kubelet
    configuration's ``maxPods`` when no Node object says ``pods`` (``None``: not known, the
    pod count is not checked); ``reservation``: what the config file reserves, for the Node's
    allocatable when no Node object gives it (:mod:`exporter.fit.state.allocatable`)."""
    allocatable = snapshot.allocatable
    if allocatable is None or snapshot.api_version != ApiVersion.V1:
        return None
    snapshot = without_finished(snapshot, context)
    numa_ids = tuple(sorted(topology.numa_nodes))
    known = frozenset(numa_ids)
    hidden = hidden_holdings(snapshot, kubelet, context)
    cpu = _cpu_state(snapshot, topology, hidden.cpus) if cpu_static else None
    memory = None
    if memory_static:
        memory = memory_from_state_file(known, kubelet, context)
        if memory is None:
            memory = _memory_state(snapshot, known)
    devices = _device_state(snapshot, known, hidden.devices,
                            kubelet.registered if kubelet is not None else None)
    return ManagersState(numa_ids, cpu, memory, devices, topology.distances(),
                         node_requests(snapshot, context, max_pods, topology, reservation),
                         kubelet_minor(context.kubelet_version) if context is not None else None)


def without_finished(snapshot: KubeletSnapshot, context: NodeContext | None) -> KubeletSnapshot:
    """The listed pods the pod context does not know as finished or rejected."""
    if context is not None:
        gone = {(p.namespace, p.name) for p in context.pods if p.terminated}
        if gone:
            return replace(snapshot, pods=tuple(p for p in snapshot.pods
                                                if (p.namespace, p.name) not in gone))
    return snapshot


def _cpu_state(snapshot: KubeletSnapshot, topology: Topology, hidden: frozenset[int]
               ) -> CpuManagerState:
    assert snapshot.allocatable is not None
    assigned: set[int] = set(hidden)
    for pod in snapshot.pods:
        assigned.update(pod.cpu_ids)
        for container in pod.containers:
            assigned.update(container.cpu_ids)
    base = cpu_base(topology, snapshot.allocatable.cpu_ids)
    return replace(base, free=base.free - assigned)


def cpu_base(topology: Topology, allocatable_cpus: Iterable[int]) -> CpuManagerState:
    """The CPU manager's state with no CPU assigned (free: every allocatable online CPU):
    what does not change while the topology and the allocatable CPUs do not."""
    online = {n: node.cpus for n, node in topology.numa_nodes.items()}
    every = frozenset().union(*online.values()) if online else frozenset()
    allocatable = frozenset(allocatable_cpus) & every
    reserved = every - allocatable
    reserved_cores = frozenset(c for r in reserved for c in topology.siblings(r))
    cpu_topology = CpuTopology.build(topology.cpu_to_numa, topology.cpu_siblings,
                                     topology.cpu_packages, topology.cpu_uncore)
    threads = max(cpu_topology.cpus_per_core(), 1)
    return CpuManagerState(online, allocatable, dict(topology.cpu_to_numa),
                           dict(topology.cpu_siblings), threads, reserved_cores, cpu_topology)


def _ids(numa_ids: tuple[int, ...] | None, known: NumaSet) -> NumaSet:
    return frozenset(i for i in numa_ids or () if i in known)


def memory_from_state_file(known: NumaSet, kubelet: KubeletState | None,
                           context: NodeContext | None) -> dict[int, MemoryNode] | None:
    """The memory manager's state from its file when it was read, under ``Static``, for
    every NUMA node; ``None``: from ``List`` instead."""
    file = kubelet.memory if kubelet is not None else None
    if file is None or file.policy != "Static" or not known <= set(file.machine):
        return None
    return memory_from_file(file, known, _active_uids(context))


def pod_blocks(pod: PodAssignment) -> tuple[MemoryBlock, ...]:
    """A pod's memory blocks: its pod-level ones when present, else its containers'."""
    return pod.memory or tuple(b for c in pod.containers for b in c.memory)


def _listed_blocks(snapshot: KubeletSnapshot) -> Iterable[MemoryBlock]:
    for pod in snapshot.pods:
        yield from pod_blocks(pod)


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


def _device_state(snapshot: KubeletSnapshot, known: NumaSet,
                  hidden: Mapping[tuple[str, str], frozenset[int]],
                  registry: Registered | None = None) -> dict[str, DeviceState]:
    """Per resource, the devices either API or the state files name; a resource the device
    manager's checkpoint registers with none of them named (every device unhealthy) is there
    too, with nothing free."""
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
    for key, numa in hidden.items():
        held.add(key)
        where.setdefault(key, set()).update(numa & known)
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
    states = {r: DeviceState(registered[r], free.get(r, {}), healthy_count.get(r, 0),
                             held_count.get(r, 0)) for r in registered}
    for resource in registry or ():
        if resource not in states:
            states[resource] = DeviceState({}, {}, 0, 0, registered_unseen=True)
    return dict(sorted(states.items()))


def kubelet_minor(version: str) -> int | None:
    """The minor of a ``kubeletVersion`` (``v1.34.4`` -> 34, ``v1.37.2-eks-1`` -> 37)."""
    match = re.match(r"v?1\.(\d+)", version.strip())
    return int(match.group(1)) if match else None


def _active_uids(context: NodeContext | None) -> frozenset[str] | None:
    return frozenset(p.uid for p in context.active()) if context is not None else None


def memory_from_file(file: MemoryManagerState, known: NumaSet,
                     active: frozenset[str] | None) -> dict[int, MemoryNode]:
    """The memory manager's own machine state (``memory_manager_state``): each node's
    allocatable and free bytes per type, its group (``cells``) and assignments, init
    containers' blocks included, which ``List`` does not show. The blocks of a pod UID no
    active pod has are released first, as the next admission's ``removeStaleState`` does
    (``releaseMemory``: free back up to what is reserved, node by node; a node left with no
    assignment leaves its group); a pod's pod-level blocks stand for its containers'.
    Without pod context (``active`` None) every entry holds."""
    tables = {n: {t: [m.allocatable, m.reserved, m.free] for t, m in cell.tables.items()}
              for n, cell in file.machine.items()}
    cells = {n: set(cell.cells) for n, cell in file.machine.items()}
    assignments = {n: cell.assignments for n, cell in file.machine.items()}
    for uid, containers in file.entries.items():
        if active is None or uid in active:
            continue
        stale = (containers[POD_LEVEL] if POD_LEVEL in containers
                 else [b for blocks in containers.values() for b in blocks])
        for memory_type, size, numa_ids in stale:
            released = size
            for numa in numa_ids:
                if numa not in tables:
                    continue
                assignments[numa] -= 1
                if assignments[numa] <= 0:
                    assignments[numa], cells[numa] = 0, {numa}
                table = tables[numa].get(memory_type)
                if table is None or released == 0 or table[1] == 0:
                    continue
                back = min(table[1], released)
                table[1] -= back
                table[2] += back
                released -= back
    return {n: MemoryNode({t: v[0] for t, v in tables[n].items()},
                          {t: v[2] for t, v in tables[n].items()},
                          frozenset(cells[n]), assignments[n]) for n in sorted(known)}


@dataclass(frozen=True)
class Hidden:
    """Exclusive CPUs and devices the CPU and device managers hold for containers ``List``
    does not show (finished regular init containers, not reused by the pod's later
    containers): (resource, device id) -> NUMA ids."""

    cpus: frozenset[int] = frozenset()
    devices: Mapping[tuple[str, str], frozenset[int]] = field(default_factory=dict)


def hidden_holdings(snapshot: KubeletSnapshot, kubelet: KubeletState | None,
                    context: NodeContext | None) -> Hidden:
    """What the state files hold beyond ``List``. A pod UID the pod context does not know as
    active is stale: the next admission's ``removeStaleState`` frees it, but for a pod-level CPU
    set alone (seen on 1.37 with ``PodLevelResourceManagers`` on, after a rejected pod's first
    container failed: every later admission finds those CPUs taken). Without pod context
    every UID counts (a stale one lasts until the CPU manager's next reconcile, 10 s)."""
    if kubelet is None:
        return Hidden()
    active = {p.uid for p in context.active()} if context is not None else None
    listed_cpus: set[int] = set()
    listed_devices: set[tuple[str, str]] = set()
    for pod in snapshot.pods:
        listed_cpus.update(pod.cpu_ids)
        for container in pod.containers:
            listed_cpus.update(container.cpu_ids)
            listed_devices.update((e.resource, d) for e in container.devices
                                  for d in e.device_ids)
    cpus: set[int] = set()
    for uid, containers in (kubelet.cpus or {}).items():
        # removeStaleState removes container entries only, and the last one's removal frees
        # the pod-level set (policy_static.go RemoveContainer): a stale pod-level set with no
        # container entry (a pod rejected before any container got CPUs) is never freed
        if active is None or uid in active or set(containers) == {POD_LEVEL}:
            for held in containers.values():
                cpus.update(held)
    devices: dict[tuple[str, str], frozenset[int]] = {}
    for uid, per_container in (kubelet.devices or {}).items():
        if active is not None and uid not in active:
            continue
        for per_resource in per_container.values():
            for resource, ids in per_resource.items():
                for device, numa in ids.items():
                    if (resource, device) not in listed_devices:
                        devices[(resource, device)] = numa
    return Hidden(frozenset(cpus - listed_cpus), devices)


def node_requests(snapshot: KubeletSnapshot, context: NodeContext | None,
                  max_pods: int | None, topology: Topology | None = None,
                  reservation: Reservation | None = None,
                  derived: Mapping[str, int] | None = None,
                  listed: Mapping[str, int] | None = None) -> NodeRequests:
    """What the resource-fit predicate counts. The Node's allocatable from the pod context's
    source when it has the Node; else derived (:func:`derived_allocatable`: from sysfs and the
    config file, else from ``GetAllocatableResources``). The admitted pods' requests from the
    pod context; else what ``List`` shows (exclusive CPUs, memory blocks and devices: the
    Guaranteed pods' requests, a lower bound). ``derived`` and ``listed``: the derived
    allocatable and the listed pods' requests when already known."""
    assert snapshot.allocatable is not None
    if context is not None and context.allocatable is not None:
        allocatable = dict(context.allocatable)
        complete = True
    else:
        allocatable = (dict(derived) if derived is not None
                       else derived_allocatable(snapshot, topology, max_pods, reservation))
        complete = False
    if context is not None:
        requested: dict[str, int] = {}
        active = context.active()
        for pod in active:
            for resource, amount in pod.requests().items():
                requested[resource] = requested.get(resource, 0) + amount
        return NodeRequests(allocatable, requested, len(active), complete)
    requested = dict(listed) if listed is not None else _listed_requests(snapshot)
    return NodeRequests(allocatable, requested, len(snapshot.pods), complete)


def _listed_requests(snapshot: KubeletSnapshot) -> dict[str, int]:
    requested: dict[str, int] = {}
    for pod in snapshot.pods:
        for resource, amount in listed_pod_requests(pod):
            requested[resource] = requested.get(resource, 0) + amount
    return requested


def listed_pod_requests(pod: PodAssignment) -> list[tuple[str, int]]:
    """What one listed pod is taken to request: its exclusive CPUs, devices and memory. A
    device is counted once: ``List`` names it once per NUMA node of its topology
    (``container_manager.go`` ``containerDevicesFromResourceDeviceInstances``)."""
    found: list[tuple[str, int]] = []
    cpus = set(pod.cpu_ids)
    for container in pod.containers:
        cpus.update(container.cpu_ids)
        devices: dict[str, set[str]] = {}
        for entry in container.devices:
            devices.setdefault(entry.resource, set()).update(entry.device_ids)
        found.extend((resource, len(ids)) for resource, ids in devices.items())
    if cpus:
        found.append((CPU, 1000 * len(cpus)))
    found.extend((block.memory_type, block.size) for block in pod_blocks(pod))
    return found
