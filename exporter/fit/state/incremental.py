"""The resource managers' state kept from one snapshot to the next, updated from the pods that
came and went: what :func:`~exporter.fit.state.from_snapshot.node_state` builds from the whole
snapshot, equal to it, at the cost of the change.

The decoder hands back the same object for an unchanged pod, so pods are compared by
identity, as the accounting's ledger does. What each listed pod holds (its exclusive CPUs,
devices with their NUMA nodes, memory blocks, and the requests they stand for) is read once,
when the pod appears, and added to running totals; a pod that leaves is taken off them. From
the totals, only the parts a change touched are made again: the free CPUs when a pod held
CPUs, the device resources whose devices it held, the memory manager's state when it held
memory (its blocks fill the nodes in the order ``List`` gives, so that part is recomputed over
the pods holding memory), the predicate's requests. Untouched parts stay the same objects, so
comparing two states, and every answer keyed by those objects, stays cheap. Anything else
changing (topology, allocatable, configuration, state files) builds the totals again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...model import ApiVersion, KubeletSnapshot, PodAssignment, Topology
from ...podcontext import NodeContext
from ..kubelet.cpumanager.state import CpuManagerState
from ..kubelet.devicemanager.manager import DeviceState
from ..kubelet.managers_state import ManagersState, NodeRequests
from ..kubelet.memorymanager.state import MemoryNode
from ..kubelet.topologymanager.topology_manager import NumaSet
from .allocatable import Reservation, derived_allocatable
from .checkpoints import KubeletState, Registered
from .from_snapshot import (
    Hidden,
    _ids,
    _memory_state,
    cpu_base,
    hidden_holdings,
    kubelet_minor,
    listed_pod_requests,
    memory_from_state_file,
    node_requests,
    node_state,
    pod_blocks,
    without_finished,
)

DeviceKey = tuple[str, str]  # (resource, device id)


@dataclass(frozen=True)
class Holding:
    """What one listed pod holds, read once per pod object."""

    cpus: tuple[int, ...]
    devices: tuple[tuple[DeviceKey, NumaSet], ...]
    memory: tuple[tuple[NumaSet, str, int], ...]  # (NUMA nodes, type, bytes) per block
    requests: tuple[tuple[str, int], ...]

    @property
    def holds_memory(self) -> bool:
        return bool(self.memory)


class NumaSets:
    """One frozenset per distinct NUMA set (thousands of devices share a handful), and the
    known NUMA ids of a ``List`` entry read once per distinct tuple."""

    def __init__(self, known: NumaSet) -> None:
        self.known = known
        self._of: dict[tuple[int, ...] | None, NumaSet] = {}
        self._sets: dict[NumaSet, NumaSet] = {}

    def of(self, numa_ids: tuple[int, ...] | None) -> NumaSet:
        found = self._of.get(numa_ids)
        if found is None:
            found = self._of[numa_ids] = self.one(_ids(numa_ids, self.known))
        return found

    def one(self, numa: NumaSet) -> NumaSet:
        return self._sets.setdefault(numa, numa)


def holding(pod: PodAssignment, sets: NumaSets) -> Holding:
    cpus = set(pod.cpu_ids)
    devices: list[tuple[DeviceKey, NumaSet]] = []
    for container in pod.containers:
        cpus.update(container.cpu_ids)
        for entry in container.devices:
            numa = sets.of(entry.numa_ids)
            devices.extend(((entry.resource, d), numa) for d in entry.device_ids
                           if entry.resource and d)
    memory = tuple((sets.of(b.numa_ids), b.memory_type, b.size) for b in pod_blocks(pod))
    return Holding(tuple(sorted(cpus)), tuple(devices), memory, tuple(listed_pod_requests(pod)))


Contribution = tuple[NumaSet, bool, bool]  # (NUMA set, free, held)


class DeviceTable:
    """Per device resource, the registered and free devices counted per NUMA set, from the
    allocatable list, the listed pods' devices and the hidden ones; a device is settled again
    only when something about it changed. A listed device nothing holds (most of them) is
    counted as free on its listed NUMA set without an entry of its own."""

    def __init__(self, snapshot: KubeletSnapshot, sets: NumaSets) -> None:
        assert snapshot.allocatable is not None
        self.sets = sets
        # resource -> device id -> NUMA set (no key tuple per listed device)
        self.listed: dict[str, dict[str, NumaSet]] = {}
        for entry in snapshot.allocatable.devices:
            numa = sets.of(entry.numa_ids)
            ids = self.listed.setdefault(entry.resource, {}) if entry.resource else {}
            for device_id in entry.device_ids:
                if entry.resource and device_id:
                    known = ids.get(device_id)
                    ids[device_id] = numa if known is None else sets.one(known | numa)
        self.listed = {r: ids for r, ids in self.listed.items() if ids}
        self.healthy_count = {r: len(ids) for r, ids in self.listed.items()}
        self.held_by_pods: dict[DeviceKey, tuple[NumaSet, ...]] = {}
        self.hidden: Mapping[DeviceKey, frozenset[int]] = {}
        self.settled: dict[DeviceKey, Contribution] = {}  # all but listed, unheld devices
        self._kinds: dict[Contribution, Contribution] = {}
        self.registered: dict[str, dict[NumaSet, int]] = {}
        self.free: dict[str, dict[NumaSet, int]] = {}
        self.held_count: dict[str, int] = {}
        self.states: dict[str, DeviceState] = {}
        self.touched: set[str] = set()
        for resource, ids in self.listed.items():
            for numa in ids.values():
                self._count(resource, numa, True, False, 1)

    def hold(self, key: DeviceKey, numa: NumaSet, sign: int) -> None:
        """One more (``sign`` 1) or one fewer listed pod entry holding the device on ``numa``."""
        held = self.held_by_pods.get(key, ())
        if sign > 0:
            self.held_by_pods[key] = (*held, numa)
            return
        at = held.index(numa)
        rest = held[:at] + held[at + 1:]
        if rest:
            self.held_by_pods[key] = rest
        else:
            del self.held_by_pods[key]

    def set_hidden(self, hidden: Mapping[DeviceKey, frozenset[int]]) -> None:
        previous, self.hidden = self.hidden, hidden
        for key in set(previous) | set(hidden):
            self.settle(key)

    def settle(self, key: DeviceKey) -> None:
        """The device's NUMA set, health and holder, counted again."""
        resource = key[0]
        listed = self.listed.get(resource, {}).get(key[1])
        old = self.settled.pop(key, None)
        if old is None and listed is not None:
            old = (listed, True, False)
        if old is not None:
            self._count(resource, *old, -1)
        by_pods = self.held_by_pods.get(key)
        hidden = self.hidden.get(key)
        if listed is None and by_pods is None and hidden is None:
            return
        held = by_pods is not None or hidden is not None
        where = listed or frozenset()
        if held:
            where = where.union(*(by_pods or ()))
            if hidden is not None:
                where = where | (hidden & self.sets.known)
            where = self.sets.one(where)
        new = (where, listed is not None and not held, held)
        if listed is None or held:
            self.settled[key] = self._kinds.setdefault(new, new)
        self._count(resource, *new, 1)

    def _count(self, resource: str, numa: NumaSet, free: bool, held: bool, sign: int) -> None:
        self.touched.add(resource)
        _add(self.registered.setdefault(resource, {}), numa, sign)
        if free:
            _add(self.free.setdefault(resource, {}), numa, sign)
        if held:
            self.held_count[resource] = self.held_count.get(resource, 0) + sign

    def device_states(self, registry: Registered | None) -> dict[str, DeviceState]:
        """Per resource, its :class:`DeviceState`; unchanged resources keep theirs."""
        for resource in self.touched:
            counts = self.registered.get(resource)
            if counts:
                self.states[resource] = DeviceState(
                    dict(counts), dict(self.free.get(resource, {})),
                    self.healthy_count.get(resource, 0), self.held_count.get(resource, 0))
            else:
                self.states.pop(resource, None)
        self.touched.clear()
        states = dict(self.states)
        for resource in registry or ():
            if resource not in states:
                states[resource] = DeviceState({}, {}, 0, 0, registered_unseen=True)
        return dict(sorted(states.items()))


def _add(counts: dict[NumaSet, int], numa: NumaSet, sign: int) -> None:
    counts[numa] = counts.get(numa, 0) + sign
    if counts[numa] == 0:
        del counts[numa]


class ManagersStateCache:
    """:func:`~exporter.fit.state.from_snapshot.node_state`, updated from the pods that changed."""

    def __init__(self) -> None:
        self._base: tuple[object, ...] | None = None
        self._holdings: dict[int, tuple[PodAssignment, Holding]] = {}
        self._cpus: dict[int, int] = {}
        self._requested: dict[str, list[int]] = {}  # resource -> [sum, pods contributing]
        self._devices: DeviceTable | None = None
        self._sets = NumaSets(frozenset())
        self._cpu_base: CpuManagerState | None = None
        self._cpu: CpuManagerState | None = None
        self._hidden_cpus: frozenset[int] | None = None
        self._memory_pods: tuple[int, ...] | None = None
        self._memory: dict[int, MemoryNode] | None = None
        self._memory_changed = True
        # single-node blocks' bytes per (node, type), blocks per node, blocks on several nodes
        self._memory_used: dict[tuple[int, str], int] = {}
        self._assignments: dict[int, int] = {}
        self._spanning = 0
        self._memory_allocatable: dict[int, MemoryNode] = {}
        self._derived: dict[str, int] = {}
        self._requests: NodeRequests | None = None
        self._distances: Mapping[int, Mapping[int, int]] | None = None

    def state(self, snapshot: KubeletSnapshot, topology: Topology, cpu_static: bool,
              memory_static: bool, context: NodeContext | None = None,
              kubelet: KubeletState | None = None, max_pods: int | None = None,
              reservation: Reservation | None = None) -> ManagersState | None:
        """What :func:`~exporter.fit.state.from_snapshot.node_state` returns for the same
        arguments."""
        allocatable = snapshot.allocatable
        if allocatable is None or snapshot.api_version != ApiVersion.V1:
            self._base = None
            return None
        snapshot = without_finished(snapshot, context)
        if len({id(p) for p in snapshot.pods}) != len(snapshot.pods):  # a pod object twice
            self._base = None
            return node_state(snapshot, topology, cpu_static, memory_static, context, kubelet,
                              max_pods, reservation)
        numa_ids = tuple(sorted(topology.numa_nodes))
        known = frozenset(numa_ids)
        base = (topology, allocatable, cpu_static, memory_static, max_pods, reservation)
        last = self._base
        if (last is None or last[0] is not topology or last[1] is not allocatable
                or last[2:] != base[2:]):
            self._start(snapshot, topology, known, base)
            self._derived = derived_allocatable(snapshot, topology, max_pods, reservation)
        cpus_changed, pods_changed = self._apply(snapshot.pods, known)
        hidden = (hidden_holdings(snapshot, kubelet, context) if kubelet is not None
                  else Hidden())
        cpu = self._cpu_state(cpu_static, cpus_changed, hidden.cpus)
        memory = None
        if memory_static:
            memory = memory_from_state_file(known, kubelet, context)
            if memory is None:
                memory = self._listed_memory(snapshot, known)
        assert self._devices is not None
        if hidden.devices != self._devices.hidden:
            self._devices.set_hidden(hidden.devices)
        registry = kubelet.registered if kubelet is not None else None
        devices = self._devices.device_states(registry)
        return ManagersState(numa_ids, cpu, memory, devices, self._distances,
                             self._node_requests(snapshot, context, pods_changed),
                             kubelet_minor(context.kubelet_version) if context is not None
                             else None)

    def _start(self, snapshot: KubeletSnapshot, topology: Topology, known: NumaSet,
               base: tuple[object, ...]) -> None:
        assert snapshot.allocatable is not None
        self._base = base
        self._holdings.clear()
        self._cpus.clear()
        self._requested.clear()
        self._memory_used.clear()
        self._assignments.clear()
        self._spanning = 0
        self._memory_changed = True
        self._memory_allocatable = _memory_state(replace(snapshot, pods=()), known)
        self._sets = NumaSets(known)
        self._devices = DeviceTable(snapshot, self._sets)
        self._cpu_base = cpu_base(topology, snapshot.allocatable.cpu_ids)
        self._cpu = self._hidden_cpus = self._memory_pods = self._memory = None
        self._requests = None
        self._distances = topology.distances()

    def _apply(self, pods: tuple[PodAssignment, ...], known: NumaSet) -> tuple[bool, bool]:
        """Totals updated from the pods that came and went: (CPUs changed, anything the
        predicate counts changed)."""
        current = {id(p): p for p in pods}
        changed: list[Holding] = []
        for key in [k for k in self._holdings if k not in current]:
            _, held = self._holdings.pop(key)
            self._count(held, -1)
            changed.append(held)
        for key, pod in current.items():
            if key not in self._holdings:
                held = holding(pod, self._sets)
                self._holdings[key] = (pod, held)
                self._count(held, 1)
                changed.append(held)
        self._memory_changed = self._memory_changed or any(h.memory for h in changed)
        return any(h.cpus for h in changed), bool(changed)

    def _count(self, held: Holding, sign: int) -> None:
        for cpu in held.cpus:
            left = self._cpus.get(cpu, 0) + sign
            if left:
                self._cpus[cpu] = left
            else:
                del self._cpus[cpu]
        devices = self._devices
        assert devices is not None
        for key, numa in held.devices:
            devices.hold(key, numa, sign)
        for key in dict.fromkeys(k for k, _ in held.devices):
            devices.settle(key)
        for numa, memory_type, size in held.memory:
            for numa_id in numa:
                self._assignments[numa_id] = self._assignments.get(numa_id, 0) + sign
            if len(numa) > 1:
                self._spanning += sign
            elif numa:
                where = (next(iter(numa)), memory_type)
                self._memory_used[where] = self._memory_used.get(where, 0) + sign * size
        for resource in dict.fromkeys(r for r, _ in held.requests):  # pods naming it
            self._requested.setdefault(resource, [0, 0])[1] += sign
        for resource, amount in held.requests:
            self._requested[resource][0] += sign * amount
        for resource in dict.fromkeys(r for r, _ in held.requests):
            if self._requested[resource][1] == 0:
                del self._requested[resource]

    def _cpu_state(self, cpu_static: bool, changed: bool, hidden: frozenset[int]
                   ) -> CpuManagerState | None:
        if not cpu_static:
            return None
        assert self._cpu_base is not None
        if self._cpu is None or changed or hidden != self._hidden_cpus:
            base = self._cpu_base
            self._cpu = replace(base, free=base.free.difference(self._cpus, hidden))
            self._hidden_cpus = hidden
        return self._cpu

    def _listed_memory(self, snapshot: KubeletSnapshot, known: NumaSet) -> dict[int, MemoryNode]:
        """The memory manager's state from the listed blocks. Single-node blocks only: each
        node's free bytes are its allocatable less its blocks' (down to 0), in any order, so
        from the totals when a pod holding memory came or went. A block on several nodes
        fills them in id order, in ``List``'s order of pods: computed over the pods holding
        memory again whenever they, or their order, are not those of last time."""
        if not self._spanning:
            self._memory_pods = None
            if self._memory is None or self._memory_changed:
                self._memory = {n: MemoryNode(
                    node.allocatable,
                    {t: max(0, a - self._memory_used.get((n, t), 0))
                     for t, a in node.allocatable.items()},
                    frozenset((n,)), self._assignments.get(n, 0))
                    for n, node in self._memory_allocatable.items()}
            self._memory_changed = False
            return self._memory
        holding_memory = tuple(p for p in snapshot.pods if self._holdings[id(p)][1].memory)
        order = tuple(id(p) for p in holding_memory)
        if self._memory is None or order != self._memory_pods:
            self._memory = _memory_state(replace(snapshot, pods=holding_memory), known)
            self._memory_pods = order
        self._memory_changed = False
        return self._memory

    def _node_requests(self, snapshot: KubeletSnapshot, context: NodeContext | None,
                       changed: bool) -> NodeRequests:
        if context is not None:
            return node_requests(snapshot, context, None, derived=self._derived)
        if self._requests is None or changed:
            listed = {r: total[0] for r, total in self._requested.items()}
            self._requests = node_requests(snapshot, None, None, derived=self._derived,
                                           listed=listed)
        return self._requests
