"""Copies of a shape placed one after another, replayed on the NUMA nodes' free amounts.

:func:`~exporter.fit.capacity.capacity_by_placement` admits copy after copy with the whole
admission model: every provider's hints, the merge, the managers' allocation, a new state per
copy. Where every copy lands on one NUMA node per container, the kubelet's choices turn on
amounts only, and the copies can be replayed on per-node counts instead (:class:`Free`):

* a container goes to the lowest NUMA node that holds its request — its free CPUs, its memory
  types (the node in no multi-NUMA group) and its devices (those on NUMA sets with the node):
  the narrowest preferred hint under ``single-numa-node``, and under ``restricted`` and
  ``best-effort`` too when one node's capacity holds every request (only single-node hints are
  preferred then; with ``prefer-closest-numa-nodes`` the node nearest itself first);
* there it takes exactly what it asks: CPUs of that node, its memory, its devices as the
  device manager takes them (:func:`~exporter.fit.kubelet.devicemanager.manager.allocate_devices`,
  on counts already); with ``full-pcpus-only`` whole free cores, while the node has them;
* under policy ``none`` nothing is aligned: CPUs and devices come from anywhere, memory goes
  to the lowest node holding it (the memory manager's own best hint);
* a container no node holds ends the copies (the pod is rejected) under ``single-numa-node``
  and ``restricted``; under ``best-effort`` it is admitted on its merged hint (the merge over
  every NUMA set, on the counts): without memory the copies go on while CPUs and devices are
  free node-wide, with memory each is taken on the counts while its CPUs go to one node, the
  hint's; where CPU ids decide, the copies so far are materialized (their CPUs picked node by
  node) and the rest admitted by the whole model (:class:`Handover`).

The replay declines (``None``) whatever it does not model (regular init containers, whose
reusable resources depend on which CPUs were picked; other scopes' init containers; the CPU
options that pick CPUs another way; memory spanning NUMA nodes) and checks itself against the
real admission of the first copy: the first copy replayed must leave the very counts that
admission left, else it declines too. The caller then places copies with the whole model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from .capacity import NodeCounts, capacity_by_placement
from .kubelet.admission.errors import Failure
from .kubelet.allocation.allocation_manager import admit
from .kubelet.config import Rules
from .kubelet.cpumanager.policy_options import CpuOptions
from .kubelet.cpumanager.policy_static import pick_cpus
from .kubelet.cpumanager.state import CpuManagerState
from .kubelet.devicemanager.manager import allocate_devices
from .kubelet.managers_state import ManagersState
from .kubelet.memorymanager.policy_static import memory_hints, place_memory, take_memory
from .kubelet.podshape import Ask, PodShape
from .kubelet.topologymanager.policy_best_effort import BEST_EFFORT
from .kubelet.topologymanager.policy_none import NONE
from .kubelet.topologymanager.policy_restricted import RESTRICTED
from .kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from .kubelet.topologymanager.scope import Reuse, Verdict, merged_hint
from .kubelet.topologymanager.topology_manager import TopologyHint
from .replay_counts import ANY, Free, Step, free_of, same_ask, steps_of, wanted_of


class Declined(Exception):
    """The replay does not model what comes next."""


class Spread(Declined):
    """``best-effort``: no node holds a container; the kubelet admits it on a wider set."""


class Handover(Declined):
    """``best-effort``: where the next copy's CPUs go turns on CPU ids; it and the rest are
    placed by the whole model from the state the copies before it left."""


class Replay:
    """The replay of one shape's copies under ``rules`` on ``state``'s counts."""

    def __init__(self, shape: PodShape, state: ManagersState, rules: Rules, steps: list[Step],
                 kept: NodeCounts | None = None):
        self.shape = shape
        self.state = state
        self.kept = kept  # the refresh's kept counts, where the CPU picks are kept too
        # the CPUs each single-node take asked, per node in order (for materialized)
        self.cpu_takes: dict[int, list[int]] = {}
        self.rules = rules
        self.steps = steps
        self.policy = rules.policy
        self.order = self._node_order()
        self.widest = max((len(c) for c in state.cpu.online.values()), default=0) \
            if state.cpu is not None else 0
        self.threads = max(state.cpu.threads_per_core, 1) if state.cpu is not None else 1
        self.wanted = wanted_of(steps)
        for step in steps:
            self._check_single_node(step.hint)
            self._check_single_node(step.need)

    def _node_order(self) -> list[int]:
        """Single-node hints in the order the merge prefers them: lowest ids, or under
        ``restricted`` and ``best-effort`` with ``prefer-closest-numa-nodes`` the node nearest
        itself first (a one-node set's average distance)."""
        ids = sorted(self.state.numa_ids)
        distances = self.state.distances
        if (self.rules.prefer_closest_numa_nodes and distances is not None
                and self.policy in (RESTRICTED, BEST_EFFORT)):
            return sorted(ids, key=lambda n: (distances.get(n, {}).get(n, 0), n))
        return ids

    def _check_single_node(self, step: Ask) -> None:
        """Under ``restricted`` and ``best-effort`` a single-node hint is preferred only when
        one node's capacity holds the request; else wider sets are preferred too and the copies
        do not go node by node."""
        if self.policy not in (RESTRICTED, BEST_EFFORT):
            return
        state = self.state
        if step.cpus and state.cpu is not None and self.widest < step.cpus:
            raise Declined
        if step.memory and state.memory is not None and not any(
                len(node.group) == 1 and all(node.allocatable.get(t, 0) >= a
                                             for t, a in step.memory.items())
                for node in state.memory.values()):
            raise Declined
        for resource, amount in step.devices.items():
            devices = state.devices.get(resource)
            if devices is None or not devices.topology_aware():
                continue
            if not any(sum(c for numa, c in devices.registered.items() if n in numa) >= amount
                       for n in state.numa_ids):
                raise Declined

    # ---- one container -----------------------------------------------------------------

    def _holds(self, free: Free, numa_id: int, step: Ask) -> bool:
        if step.cpus and free.cpus and free.cpus.get(numa_id, 0) < step.cpus:
            return False
        if step.memory and self.state.memory is not None:
            node = free.memory.get(numa_id)
            if node is None or len(node.group) > 1 or any(
                    node.allocatable.get(t, 0) < a or node.free.get(t, 0) < a
                    for t, a in step.memory.items()):
                return False
        for resource, amount in step.devices.items():
            devices = free.devices.get(resource)
            if devices is None or not devices.topology_aware():
                continue
            if sum(c for numa, c in devices.free.items() if numa_id in numa) < amount:
                return False
        return True

    def _take(self, free: Free, numa_id: int, step: Ask, hint: frozenset[int] | None,
              cpu_node: int | None = None, units: int = 1) -> bool:
        """Take one container's request on ``numa_id`` (its CPUs on ``cpu_node`` when given;
        ``hint``: what the managers get), or ``units`` containers' at once; False when the
        allocation fails (the pod is rejected)."""
        cpu_node = numa_id if cpu_node is None else cpu_node
        for resource, amount in step.devices.items():
            devices = free.devices.get(resource)
            if devices is None:
                continue
            done = allocate_devices(devices, amount, hint, {})
            if done is None:
                return False
            free.devices[resource] = done[0]
        if step.cpus and free.cpus:
            if self.rules.full_pcpus_only:
                assert free.cores is not None
                physical = sum(free.cpus.values()) - sum(free.reserved.values())
                if step.cpus % self.threads or step.cpus > physical:
                    return False  # SMTAlignmentError
                if free.cores.get(cpu_node, 0) < step.cpus:
                    raise Declined  # not whole free cores: which CPUs are taken matters
                free.cores[cpu_node] -= step.cpus
            if free.cpus.get(cpu_node, 0) < step.cpus:
                return False
            free.cpus[cpu_node] -= step.cpus
            if cpu_node != ANY:
                self.cpu_takes.setdefault(cpu_node, []).extend([step.cpus // units] * units)
        if step.memory and self.state.memory is not None:
            placed = place_memory(free.memory, step.memory,
                                  TopologyHint(hint, hint is not None), {})
            if isinstance(placed, Failure):
                return False
            free.memory = take_memory(free.memory, step.memory, placed, {})
        return True

    def spread(self, free: Free, unit: Step) -> int | None:
        """``best-effort`` once no node holds the unit, which asks no memory (none will
        again: free amounts only shrink): each copy is admitted on a wider set, its CPUs and
        devices taken wherever they are free, so copies go on while they are free node-wide.
        None when whole cores decide."""
        step = unit.need
        if self.rules.full_pcpus_only or not same_ask(unit.hint, step):
            return None
        more = []
        if step.cpus and free.cpus:
            more.append(sum(free.cpus.values()) // step.cpus)
        for resource, amount in step.devices.items():
            if resource in free.devices:
                more.append(free.devices[resource].free_total() // amount)
        return min(more) if more else None

    def _constrained(self, free: Free, step: Ask) -> bool:
        """Whether the CPU or the device manager gives ``step`` hints: when the memory manager
        does not care, their node is the hint, and memory that no NUMA set holds is not
        placed on it or around it (the pod is rejected)."""
        return bool((step.cpus and free.cpus) or any(
            resource in free.devices and free.devices[resource].topology_aware()
            for resource in step.devices))

    def _spread_hint(self, free: Free, step: Ask) -> TopologyHint:
        """``best-effort``, no node holds ``step``: the merge over every NUMA set, on the
        counts (hints read counts only)."""
        state = self.state
        cpu = state.cpu
        if cpu is not None and free.cpus:
            chosen: set[int] = set()
            for numa_id, count in free.cpus.items():
                chosen.update(sorted(cpu.online.get(numa_id, ()))[:count])
            cpu = replace(cpu, free=frozenset(chosen))
        counted = replace(state, cpu=cpu, memory=free.memory or state.memory,
                          devices={**state.devices, **free.devices})
        distances = state.distances if self.rules.prefer_closest_numa_nodes else None
        return merged_hint(self.policy, counted, step, Reuse(), distances)[1]

    def _spread_rejected(self, free: Free, step: Ask, hint: TopologyHint) -> bool:
        """``best-effort``, no node holds ``step``, ``hint`` its merged hint: whether the
        kubelet rejects it all the same. The devices and CPUs must be free node-wide and the
        memory manager must place the memory on that hint or a set around it. True: rejected;
        False: admitted."""
        for resource, amount in step.devices.items():
            if resource in free.devices and free.devices[resource].free_total() < amount:
                return True
        if step.cpus and free.cpus:
            if sum(free.cpus.values()) < step.cpus:
                return True
            if self.rules.full_pcpus_only and (
                    step.cpus % self.threads
                    or step.cpus > sum(free.cpus.values()) - sum(free.reserved.values())):
                return True
        if step.memory and self.state.memory is not None:
            return isinstance(place_memory(free.memory, step.memory, hint, {}), Failure)
        return False

    def _spread_copy(self, free: Free, step: Step, hint: TopologyHint) -> None:
        """``best-effort``, a container asking memory that no node holds, admitted on its
        merged ``hint``: taken on the counts where they decide, that is where its CPUs are
        taken on one node, the hint's, which holds them (else the CPU manager picks them, or
        the rest of them, by CPU ids: :class:`Handover`), not as whole cores. The memory
        manager places the memory on the hint or the set it extends it to, the device
        manager takes the devices meeting the hint first."""
        need = step.need
        affinity = hint.affinity
        if self.rules.full_pcpus_only or step.allocations != 1:
            raise Declined
        if need.cpus and free.cpus and (affinity is None or len(affinity) != 1
                                        or free.cpus.get(min(affinity), 0) < need.cpus):
            raise Handover
        for resource, amount in need.devices.items():
            devices = free.devices.get(resource)
            if devices is not None:
                done = allocate_devices(devices, amount, affinity, {})
                if done is None:
                    raise Declined  # free node-wide: cannot happen
                free.devices[resource] = done[0]
        if need.cpus and free.cpus:
            assert affinity is not None
            numa_id = min(affinity)
            free.cpus[numa_id] -= need.cpus
            self.cpu_takes.setdefault(numa_id, []).append(need.cpus)
        placed = place_memory(free.memory, need.memory, hint, {})
        if isinstance(placed, Failure):
            raise Declined  # checked before: cannot happen
        free.memory = take_memory(free.memory, need.memory, placed, {})

    def units_at_once(self, free: Free, unit: Step, most: int) -> int:
        """Units (a one-container pod, or one of a pod's identical containers) on the node the
        next one goes to, taken together: as many as that node holds (what one takes divides
        what the node has free), at most ``most``; 0 when they are not taken together (the
        caller places the next one)."""
        step = unit.need
        if self.policy == NONE:
            numa_id = ANY
            if step.memory and self.state.memory is not None:
                numa_id = next((n for n in self.order if self._holds(free, n, step)), ANY)
                if numa_id == ANY:
                    return 0
        else:
            numa_id = next((n for n in self.order if self._holds(free, n, unit.hint)), ANY)
            if numa_id == ANY or not self._holds(free, numa_id, step):
                return 0
        cpu_node = ANY if self.policy == NONE else numa_id
        many = most
        if step.cpus and free.cpus:
            many = min(many, free.cpus.get(cpu_node, 0) // step.cpus)
            if self.rules.full_pcpus_only:
                assert free.cores is not None
                if step.cpus % self.threads:
                    return 0
                physical = sum(free.cpus.values()) - sum(free.reserved.values())
                many = min(many, free.cores.get(cpu_node, 0) // step.cpus,
                           physical // step.cpus)
        if step.memory and self.state.memory is not None:
            node = free.memory[numa_id]
            many = min(many, *(node.free.get(t, 0) // a for t, a in step.memory.items()))
        one = frozenset((numa_id,))
        for resource, amount in step.devices.items():
            devices = free.devices.get(resource)
            if devices is None:
                continue
            if self.policy == NONE or not devices.topology_aware():
                many = min(many, devices.free_total() // amount)
            else:
                many = min(many, devices.free.get(one, 0) // amount)
        if many < 2:
            return 0
        together = Ask(step.cpus * many, {t: a * many for t, a in step.memory.items()},
                       {r: a * many for r, a in step.devices.items()})
        hint = None if self.policy == NONE else one
        if not self._take(free, numa_id, together, hint, cpu_node, many):
            raise Declined  # the node held them: cannot happen
        self._assigned(free, numa_id, step, many * unit.allocations - 1)
        return many

    def copy(self, free: Free, steps: tuple[Step, ...] | None = None) -> bool:
        """Place one copy (or ``steps`` of it); False when the kubelet rejects it."""
        for step in self.steps if steps is None else steps:
            need = step.need
            if self.policy == NONE:  # no hint: CPUs and devices anywhere, memory where it goes
                if not self._take(free, ANY, need, None, ANY):
                    return False
                continue
            for numa_id in self.order:
                if self._holds(free, numa_id, step.hint):
                    break
            else:
                if self.policy == BEST_EFFORT:
                    if step.hint is not need and not same_ask(step.hint, need):
                        raise Declined
                    merged = self._spread_hint(free, need)
                    if self._spread_rejected(free, need, merged):
                        return False
                    if not (need.memory and self.state.memory is not None):
                        raise Spread  # counted node-wide by the caller (spread)
                    self._spread_copy(free, step, merged)
                    continue
                hint = step.hint
                if (hint.memory and self.state.memory is not None
                        and memory_hints(free.memory, hint.memory) is None
                        and not self._constrained(free, hint)):
                    # no provider cares (the memory manager answers "don't care" when no set
                    # qualifies): admitted on any node, the memory put wherever it goes
                    raise Declined
                return False
            if not self._holds(free, numa_id, need):  # pinned where it cannot fit
                if self.policy == BEST_EFFORT:
                    raise Declined
                return False
            if not self._take(free, numa_id, need, frozenset((numa_id,))):
                return False
            self._assigned(free, numa_id, need, step.allocations - 1)
        return True

    def materialized(self, free: Free) -> ManagersState | None:
        """The state the copies replayed so far left (the Topology Manager's part: no
        requests), their CPU ids picked as the CPU manager picks them: each single-node take
        on its node alone (a copy on one node takes no other node's CPUs, so the nodes' takes
        do not interleave). None if the picks leave other counts than the replay's."""
        state = self.state
        cpu = state.cpu
        if cpu is not None and self.cpu_takes:
            options = replace(self.rules.cpu_options(), kubelet_minor=state.kubelet_minor)
            if self.kept is not None:
                self.kept.same_topology(state)
            free_cpus = set(cpu.free)
            for numa_id, amounts in self.cpu_takes.items():
                # a pick with the node's hint reads the node's free CPUs only
                before = cpu.free & cpu.online.get(numa_id, frozenset())
                pick = partial(_picks, cpu, before, numa_id, tuple(amounts), options)
                after = pick() if self.kept is None else self.kept.node_picks(
                    (numa_id, before, tuple(amounts), options), pick)
                if after is None:
                    return None
                free_cpus -= before - after
            cpu = replace(cpu, free=frozenset(free_cpus))
        memory = state.memory
        if memory is not None and free.memory:
            memory = {n: replace(free.memory[n], free={**node.free, **free.memory[n].free})
                      for n, node in memory.items()}
        left = replace(state, cpu=cpu, memory=memory, devices={**state.devices, **free.devices},
                       requests=None)
        if free_of(left, self.wanted, self.rules).key() != free.key():
            return None
        return left

    def _assigned(self, free: Free, numa_id: int, need: Ask, more: int) -> None:
        """Count ``more`` memory assignments on the node (each container's allocation is
        one)."""
        if more and need.memory and self.state.memory is not None:
            node = free.memory[numa_id]
            free.memory[numa_id] = replace(node, assignments=node.assignments + more)


def _picks(cpu: CpuManagerState, free: frozenset[int], numa_id: int, amounts: tuple[int, ...],
           options: CpuOptions) -> frozenset[int] | None:
    """A node's free CPUs after the CPU manager's picks of ``amounts`` there, one after
    another."""
    node = replace(cpu, free=free)
    for amount in amounts:
        picked = pick_cpus(node, amount, frozenset((numa_id,)), frozenset(), options)
        if picked is None:
            return None
        node = replace(node, free=node.free - picked)
    return node.free


def replayed_copies(shape: PodShape, state: ManagersState, rules: Rules, first: Verdict,
                    bound: int, kept: NodeCounts | None = None) -> int | None:
    """How many copies the Topology Manager and the managers admit one after another, at most
    ``bound`` (the predicate is the caller's), replayed on counts; None when the replay does
    not apply or disagrees with ``first``, the real admission of the first copy."""
    if rules.policy not in (SINGLE_NUMA_NODE, RESTRICTED, BEST_EFFORT, NONE):
        return None
    steps = steps_of(shape, rules)
    if steps is None or not first.admitted or first.state is None:
        return None
    if rules.policy == BEST_EFFORT and any(len(p.cpus) > 1 for p in first.placements):
        return None  # the first copy's CPUs spread already: so do the rest (by CPU ids)
    if not steps:
        return bound  # nothing exclusive: every copy is admitted, to the predicate's limit
    try:
        replay = Replay(shape, state, rules, steps, kept)
        free = free_of(state, replay.wanted, rules)
        if not replay.copy(free) or free.key() != free_of(first.state, replay.wanted,
                                                          rules).key():
            return None
        if all(step == steps[0] for step in steps):
            return _units(replay, free, steps[0], len(steps), bound)
        count = 1
        while count < bound:
            try:
                if not replay.copy(free):
                    break
            except Spread:
                return None  # containers of one copy spread over several nodes
            count += 1
    except Declined:
        return None
    return count


def _units(replay: Replay, free: Free, unit: Step, per_pod: int, bound: int) -> int | None:
    """A pod of ``per_pod`` identical units (its one container, or its identical containers
    under scope ``container``): the units fill the nodes one after another, a pod for every
    ``per_pod`` of them (the first pod's already placed)."""
    units, wanted = per_pod, bound * per_pod
    while units < wanted:
        many = replay.units_at_once(free, unit, wanted - units)
        if many:
            units += many
            continue
        try:
            if not replay.copy(free, (unit,)):
                break
        except Handover:
            return _handed_over(replay, free, units, bound) if per_pod == 1 else None
        except Spread:
            more = replay.spread(free, unit)
            if more is None:
                return None
            units = min(wanted, units + more)
            break
        units += 1
    return units // per_pod


def _handed_over(replay: Replay, free: Free, count: int, bound: int) -> int | None:
    """:class:`Handover` after ``count`` copies: the rest admitted one after another by the
    whole model, from the state those copies left."""
    state = replay.materialized(free)
    if state is None:
        return None
    rest = admit(replay.shape, state, replay.rules)
    return count + capacity_by_placement(replay.shape, state, replay.rules, rest, bound - count)


def replayed_fits(shape: PodShape, state: ManagersState, rules: Rules
                  ) -> Mapping[int, bool] | None:
    """Per NUMA node, whether the Topology Manager and the managers admit a copy on that node
    alone under ``single-numa-node`` (the predicate is the caller's); None when not
    replayed."""
    steps = steps_of(shape, rules)
    if steps is None:
        return None
    try:
        replay = Replay(shape, state, rules, steps)
        whole = free_of(state, replay.wanted, rules)
        found = {}
        for numa_id in state.numa_ids:
            free = whole.alone(numa_id)
            admitted = True
            for step in steps:
                if not replay._holds(free, numa_id, step.hint) or not replay._holds(
                        free, numa_id, step.need) or not replay._take(
                        free, numa_id, step.need, frozenset((numa_id,))):
                    admitted = False
                    break
                replay._assigned(free, numa_id, step.need, step.allocations - 1)
            found[numa_id] = admitted
    except Declined:
        return None
    return found
