"""``podresources_shape_capacity``: how many more pods of a shape the kubelet would admit.

The definition is repeated placement: pods admitted one after another, each placed as the
kubelet places it and taken off the state before the next, its requests added to what the
resource-fit predicate counts (:func:`capacity_by_placement`); bounded by
:data:`CAPACITY_CAP`, by the node-wide free amount of each aligned resource and by the
predicate's room (pods, CPU and memory requests).

The count is the Topology Manager's and the managers' alone; the resource-fit predicate, the
same for every copy, is applied to it afterwards (:func:`predicate_limit`). Three ways to it,
the first that applies:

* the copies replayed on the NUMA nodes' free amounts (:mod:`exporter.fit.replay`): wherever
  every container lands on one node, as under ``single-numa-node``, under ``restricted`` and
  ``best-effort`` while one node's capacity holds each request (and under ``best-effort``
  after, while the counts decide), and under ``none``; checked against the real admission of
  the first copy;
* node by node (:func:`per_node_unit`, :class:`NodeCounts`), for a memory-less shape whose
  CPUs are picked another way (``distribute-cpus-across-*``): each copy goes to the lowest
  node that holds it whole and changes no other node, so the nodes fill in id order and each
  node's count is kept while that node's own free CPUs and devices are the same;
* copy by copy with the whole admission model (:func:`capacity_by_placement`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace

from .kubelet.allocation.allocation_manager import admit
from .kubelet.config import CONTAINER, Rules
from .kubelet.devicemanager.manager import DeviceState
from .kubelet.lifecycle.predicate import predicate
from .kubelet.managers_state import ManagersState, NodeRequests
from .kubelet.podshape import CPU, Ask, PodShape, asks, is_memory_resource, pod_effective_ask
from .kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from .kubelet.topologymanager.scope import Verdict

# Placements tried for podresources_shape_capacity; a shape that fits this many more times is
# reported as this many (the answer is "at least"): each placement costs one admission.
CAPACITY_CAP = 64


def restrict(state: ManagersState, numa_id: int) -> ManagersState:
    """The state with nothing free outside one NUMA node (capacities unchanged, so the minimum
    widths stay the kubelet's): admission under ``single-numa-node`` then succeeds only on
    that node."""
    cpu = state.cpu
    if cpu is not None:
        cpu = replace(cpu, free=cpu.free & cpu.online.get(numa_id, frozenset()))
    memory = None
    if state.memory is not None:
        memory = {n: node if n == numa_id else replace(node, free={})
                  for n, node in state.memory.items()}
    devices = {r: d if not d.topology_aware() else replace(d, free={
        numa: count for numa, count in d.free.items() if not numa or numa_id in numa})
        for r, d in state.devices.items()}
    return replace(state, cpu=cpu, memory=memory, devices=devices)


def capacity_bound(shape: PodShape, state: ManagersState, ask: Ask) -> int:
    """:data:`CAPACITY_CAP`, the node-wide free amount of each asked resource, and the
    predicate's own bounds on pods, CPU and memory requests."""
    bound = CAPACITY_CAP
    for resource in ask.resources():
        amount = ask.amount(resource)
        if amount:
            bound = min(bound, node_wide_free(state, resource) // amount)
    node = state.requests
    if node is not None:
        if "pods" in node.allocatable:
            bound = min(bound, max(0, node.allocatable["pods"] - node.pods))
        for resource, amount in shape.requests().items():
            if amount > 0 and resource in (CPU, "memory") and resource in node.allocatable:
                left = node.allocatable[resource] - node.requested.get(resource, 0)
                bound = min(bound, max(0, left) // amount)
    return bound


def node_wide_free(state: ManagersState, resource: str) -> int:
    if resource == CPU:
        return len(state.cpu.free) if state.cpu is not None else 0
    if is_memory_resource(resource):
        return state.memory_free(resource, frozenset(state.numa_ids))
    devices = state.devices.get(resource)
    return devices.free_total() if devices is not None else 0


def capacity_by_placement(shape: PodShape, state: ManagersState, rules: Rules, first: Verdict,
                          bound: int) -> int:
    """Pods admitted one after another, from ``first`` (the verdict on ``state``)."""
    count = 0
    verdict = first
    while verdict.admitted and verdict.state is not None and count < bound:
        count += 1
        if count < bound:  # the copy after the bound is never counted: not admitted
            verdict = admit(shape, verdict.state, rules)
    return count


@dataclass(frozen=True)
class Unit:
    """What one NUMA node is filled with, one after another: the whole pod (one container, or
    scope ``pod``), or one of its identical containers (scope ``container``), ``per_pod``
    units making a pod; ``ask`` is what one unit asks the managers for, ``pod_ask`` what one
    pod does."""

    shape: PodShape
    per_pod: int
    ask: Ask
    pod_ask: Ask


def per_node_unit(shape: PodShape, state: ManagersState, rules: Rules) -> Unit | None:
    """The unit the shape decomposes into by NUMA node under ``rules``, ``None`` when its
    copies are not placed node by node (see the module's docstring)."""
    if (rules.policy != SINGLE_NUMA_NODE or shape.init_containers or not shape.containers
            or rules.full_pcpus_only or rules.align_by_socket):
        return None
    container_asks = [asks(shape, c, rules.managers) for c in shape.containers]
    pod_ask = pod_effective_ask(shape, rules.managers)
    if rules.scope == CONTAINER and len(shape.containers) > 1:
        if any(a != container_asks[0] for a in container_asks[1:]):
            return None
        unit = Unit(replace(shape, containers=shape.containers[:1]), len(shape.containers),
                    container_asks[0], pod_ask)
    else:
        unit = Unit(shape, 1, pod_ask, pod_ask)
    every = container_asks
    if all(a.is_empty() for a in every) or any(a.hint_devices for a in every):
        return None
    for one in every:
        if one.cpus and state.cpu is None:
            return None
        if one.memory:  # the memory manager "does not care" once no set holds it (see replay)
            return None
        for resource, amount in one.devices.items():
            devices = state.devices.get(resource)
            if amount and (devices is None or not _per_node(devices)):
                return None
    return unit


def _per_node(devices: DeviceState) -> bool:
    """Topology-aware, each device on at most one NUMA node (a device on several would count
    for each of them, so taking it on one changes another)."""
    return devices.topology_aware() and all(len(numa) <= 1 for numa in devices.registered)


def _node_key(state: ManagersState, unit: Unit, numa_id: int) -> Hashable:
    """What node ``numa_id`` alone holds that a unit's admission there reads."""
    cpu = state.cpu
    cpus = None
    if cpu is not None and unit.ask.cpus:
        cpus = cpu.free & cpu.online.get(numa_id, frozenset())
    memory = None
    if state.memory is not None and unit.ask.memory and numa_id in state.memory:
        node = state.memory[numa_id]
        memory = (tuple(sorted(node.free.items())), tuple(sorted(node.allocatable.items())),
                  node.group, node.assignments)
    one = frozenset((numa_id,))
    devices = tuple(state.devices[r].free.get(one, 0) if r in state.devices else None
                    for r in sorted(unit.ask.devices))
    return (numa_id, cpus, memory, devices)


def _static_key(state: ManagersState, unit: Unit, rules: Rules) -> Hashable:
    """What every node's count reads besides the node itself: the shape, the rules, the NUMA
    nodes, the kubelet's release, and each asked device resource's registered devices."""
    shape = unit.shape
    containers = tuple((c.name, tuple(sorted(c.requests.items())), c.sidecar)
                       for c in shape.containers)
    registered = tuple((r, tuple(sorted((tuple(sorted(s)), n)
                                        for s, n in state.devices[r].registered.items())))
                       for r in sorted(unit.ask.devices) if r in state.devices)
    return (shape.name, shape.qos, shape.pod_level_resources, shape.dra_resources,
            containers, unit.per_pod, rules, state.numa_ids, state.kubelet_minor, registered)


@dataclass
class NodeCounts:
    """Units each NUMA node admits alone, kept from one state to the next: a node whose own
    free CPUs, memory and devices did not change is not placed again. Entries hold the
    count and the limit it was counted up to (a count equal to its limit is "at least").
    Cleared when the CPU topology the counts were placed with is another object."""

    counts: dict[Hashable, tuple[int, int]] = field(default_factory=dict)
    _topology: tuple[object, object] | None = None
    _seen: set[Hashable] = field(default_factory=set)
    _statics: dict[Hashable, int] = field(default_factory=dict)
    # a NUMA node's free CPUs after the replay's picks there (exporter.fit.replay), by the
    # node's free CPUs before, the amounts and the CPU options
    picks: dict[Hashable, frozenset[int] | None] = field(default_factory=dict)
    _picked: set[Hashable] = field(default_factory=set)

    def static(self, state: ManagersState, unit: Unit, rules: Rules) -> int:
        """A small number for what every node's count reads besides the node (hashed once
        per answer, not once per node)."""
        return self._statics.setdefault(_static_key(state, unit, rules), len(self._statics))

    def same_topology(self, state: ManagersState) -> None:
        cpu = state.cpu
        topology = (cpu.online, cpu.topology) if cpu is not None else (None, None)
        last = self._topology
        if last is None or last[0] is not topology[0] or last[1] is not topology[1]:
            self.counts.clear()
            self._statics.clear()
            self.picks.clear()
            self._topology = topology

    def node_picks(self, key: Hashable, pick: Callable[[], frozenset[int] | None]
                   ) -> frozenset[int] | None:
        """``pick()``, kept under ``key`` while it is read (the topology the same)."""
        self._picked.add(key)
        if key not in self.picks:
            self.picks[key] = pick()
        return self.picks[key]

    def count(self, state: ManagersState, unit: Unit, rules: Rules, numa_id: int, limit: int,
              static: int) -> int:
        """Units node ``numa_id`` admits alone, up to ``limit``."""
        key = (static, _node_key(state, unit, numa_id))
        self._seen.add(key)
        known = self.counts.get(key)
        if known is not None and (known[0] < known[1] or known[1] >= limit):
            return min(known[0], limit)
        alone = replace(restrict(state, numa_id), requests=None)  # the Topology Manager only
        placed = 0
        verdict = admit(unit.shape, alone, rules)
        if verdict.admitted and verdict.state is not None and limit > 0:
            more = _more_units(alone, verdict.state, unit.ask, numa_id, rules)
            if more is not None:
                placed = min(limit, 1 + more)
            else:
                while verdict.admitted and verdict.state is not None and placed < limit:
                    placed += 1
                    verdict = admit(unit.shape, verdict.state, rules)
        self.counts[key] = (placed, limit)
        return placed

    def forget_unused(self) -> None:
        """Drop the counts nothing read since the last call (the nodes' earlier states)."""
        for key in [k for k in self.counts if k not in self._seen]:
            del self.counts[key]
        self._seen.clear()
        for key in [k for k in self.picks if k not in self._picked]:
            del self.picks[key]
        self._picked.clear()
        if len(self._statics) > 1024:  # shapes come and go with their file: start again
            self._statics.clear()
            self.counts.clear()


def _more_units(before: ManagersState, after: ManagersState, ask: Ask, numa_id: int, rules: Rules
                ) -> int | None:
    """After one unit was admitted on node ``numa_id`` alone, how many more the node holds:
    whether a unit fits there turns only on the node's free amounts reaching the unit's
    (its capacities, groups and hints' preference stay as they were), and each unit takes
    exactly its amounts from the node, so the rest is division. ``None`` when the first
    unit did not take exactly its amounts there, or the CPUs are picked by a strategy that
    can fail with enough free (placed one by one then)."""
    if rules.distribute_cpus_across_numa or rules.distribute_cpus_across_cores:
        return None
    one = frozenset((numa_id,))
    left: list[int] = []
    if ask.cpus:
        assert before.cpu is not None and after.cpu is not None
        if len(before.cpu.free) - len(after.cpu.free) != ask.cpus:
            return None
        left.append(len(after.cpu.free) // ask.cpus)
    for memory_type, amount in ask.memory.items():
        assert before.memory is not None and after.memory is not None
        was = before.memory[numa_id].free.get(memory_type, 0)
        now = after.memory[numa_id].free.get(memory_type, 0)
        if was - now != amount or after.memory[numa_id].group != one:
            return None
        left.append(now // amount)
    for resource, amount in ask.devices.items():
        free_before = before.devices[resource].free.get(one, 0)
        free_after = after.devices[resource].free.get(one, 0)
        if free_before - free_after != amount:
            return None
        left.append(free_after // amount)
    return min(left) if left else None


def capacity_by_node(shape: PodShape, state: ManagersState, rules: Rules, first: Verdict,
                     bound: int, unit: Unit, counts: NodeCounts) -> int | None:
    """:func:`capacity_by_placement`'s count from each node's count: the Topology Manager
    admits copies while the nodes hold units for them (in id order), the predicate while its
    room lasts. ``None`` if the nodes hold no copy although ``first`` was admitted (never, if
    the shape decomposes: the caller then places copy by copy)."""
    counts.same_topology(state)
    static = counts.static(state, unit, rules)
    units, wanted = 0, bound * unit.per_pod
    for numa_id in state.numa_ids:
        units += counts.count(state, unit, rules, numa_id, wanted - units, static)
        if units >= wanted:
            break
    admitted = min(bound, units // unit.per_pod)
    if admitted < 1:
        return None
    return predicate_limit(shape, state, unit.pod_ask, admitted)


def nodes_admitting(shape: PodShape, state: ManagersState, single: Rules, unit: Unit,
                    counts: NodeCounts) -> dict[int, bool]:
    """Per NUMA node, the whole pod admitted on it alone under ``single-numa-node``: the node
    holds a pod's units, and the predicate admits the pod on the state restricted to the
    node (the same on every node when each device resource's held count is known)."""
    counts.same_topology(state)
    static = counts.static(state, unit, single)
    everywhere: bool | None = None
    found: dict[int, bool] = {}
    for numa_id in state.numa_ids:
        if counts.count(state, unit, single, numa_id, unit.per_pod, static) < unit.per_pod:
            found[numa_id] = False
            continue
        if everywhere is not None:
            found[numa_id] = everywhere
            continue
        alone = restrict(state, numa_id)
        admitted = predicate(shape, alone, copies_placed(shape, alone, unit.pod_ask, 1)) is None
        if all(d.held is not None for d in state.devices.values()):
            everywhere = admitted
        found[numa_id] = admitted
    return found


def admitted_alone(shape: PodShape, state: ManagersState, held: Mapping[int, bool], ask: Ask
                   ) -> dict[int, bool]:
    """Per NUMA node, the pod admitted on it alone: the Topology Manager and the managers
    hold it there (``held``), and the predicate admits it on the state restricted to the node
    (the same on every node when each device resource's held count is known)."""
    everywhere: bool | None = None
    found: dict[int, bool] = {}
    for numa_id in state.numa_ids:
        if not held.get(numa_id):
            found[numa_id] = False
        elif everywhere is not None:
            found[numa_id] = everywhere
        else:
            alone = restrict(state, numa_id)
            found[numa_id] = predicate(shape, alone, copies_placed(shape, alone, ask, 1)) is None
            if all(d.held is not None for d in state.devices.values()):
                everywhere = found[numa_id]
    return found


def _held(devices: DeviceState, more: int) -> DeviceState:
    return replace(devices, held=devices.held_total() + more)


def copies_placed(shape: PodShape, state: ManagersState, ask: Ask, placed: int) -> ManagersState:
    """What the predicate reads of the state after ``placed`` copies (each taking ``ask``'s
    devices and adding its requests): the requests and the device resources' held counts."""
    devices = dict(state.devices)
    for resource, amount in ask.devices.items():
        if resource in devices and amount:
            devices[resource] = _held(devices[resource], placed * amount)
    requests = state.requests
    if requests is not None and placed:
        total = dict(requests.requested)
        for resource, amount in shape.requests().items():
            total[resource] = total.get(resource, 0) + placed * amount
        requests = NodeRequests(requests.allocatable, total, requests.pods + placed,
                                requests.complete)
    return replace(state, devices=devices, requests=requests)


def predicate_limit(shape: PodShape, state: ManagersState, ask: Ask, admitted: int) -> int:
    """Of ``admitted`` copies the Topology Manager admits (the first of them admitted whole),
    how many the resource-fit predicate lets in: copy ``j`` is checked against the requests
    of the ``j - 1`` before it. From the second copy on the predicate's room only shrinks
    (every figure it compares grows by the same amount per copy), so the last copy it admits
    is found by bisection."""

    def admits(j: int) -> bool:
        before = copies_placed(shape, state, ask, j - 1)
        return predicate(shape, before, copies_placed(shape, state, ask, j)) is None

    if admitted == 1 or admits(admitted):
        return admitted
    low, high = 1, admitted - 1  # copy `low` is admitted; find the last admitted up to `high`
    while low < high:
        middle = (low + high + 1) // 2
        if admits(middle):
            low = middle
        else:
            high = middle - 1
    return low
