"""What both Topology Manager scopes share (``topologymanager/scope.go``, v1.37.2).

* the policy, picked by its name as ``NewManager`` picks it (:func:`policy_merge`);
* each container's or the pod's hints from the device, CPU and memory managers, in the order
  the kubelet registers them (:func:`provider_answers`, ``accumulateProvidersHints``);
* ``allocateAlignedResources`` (:func:`allocate_aligned_resources`): the managers' ``Allocate``
  for one container with the merged hint, and what a regular init container leaves reusable
  (:class:`Reuse`: ``cpusToReuse``, ``devicesToReuse``, reusable memory);
* what the scope's ``Admit`` answers (:class:`Verdict`, each container's :class:`Placement`),
  and which resource blocked a rejection (:func:`blocked_resources`: the exporter's reading,
  not the kubelet's, which gives none).

The walks themselves are :mod:`.scope_container` and :mod:`.scope_pod`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..admission.errors import ADMISSION_STALLED, Failure
from ..config import Rules
from ..cpumanager.cpu_assignment import AdmissionStall
from ..cpumanager.policy_static import cpu_hints, pick_cpus, smt_check, with_cpus_taken
from ..devicemanager.manager import allocate_devices
from ..devicemanager.topology_hints import device_hints
from ..managers_state import ManagersState
from ..memorymanager.policy_static import memory_hints, place_memory, take_memory
from ..podshape import Ask, ContainerShape
from .numa_info import Distances, average_distance
from .policy import Policy, provider_lists
from .policy_best_effort import BEST_EFFORT, BestEffortPolicy
from .policy_none import NONE, NonePolicy
from .policy_restricted import RESTRICTED, RestrictedPolicy
from .policy_single_numa_node import (
    SINGLE_NUMA_NODE,
    SingleNumaNodePolicy,
    filter_single_numa_hints,
)
from .topology_manager import NumaSet, ProviderAnswer, TopologyHint

NO_BLOCK, MULTIPLE = "none", "multiple"
# Each policy by its name, as NewManager (topology_manager.go) picks it.
POLICY: dict[str, Policy] = {p.name: p for p in (
    NonePolicy(), BestEffortPolicy(), RestrictedPolicy(), SingleNumaNodePolicy())}
POLICIES = tuple(POLICY)


def policy_merge(policy: str, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
                 distances: Distances | None = None) -> tuple[TopologyHint, bool]:
    """The ``policy``'s ``Merge``: (best hint, admit). ``affinity`` ``None`` means any node."""
    return POLICY[policy].merge(answers, numa_ids, distances)


def merged_hint(policy: str, state: ManagersState, ask: Ask, reuse: Reuse,
                distances: Distances | None, align_by_socket: bool = False
                ) -> tuple[list[ProviderAnswer], TopologyHint, bool]:
    """The providers' answers, the policy's best hint and whether it admits. Under
    ``restricted`` and ``best-effort`` the single-node hints are asked first: when one NUMA
    node has a preferred hint from every provider that answers, the merge's best is that node
    (no preferred outcome is narrower, and among one-node ones the merge takes the nearest to
    itself, then the lowest id), so the hints of every wider set are not computed. A merged
    outcome is preferred only when every provider's hint is preferred and the same set
    (``mergePermutation``), so a one-node preferred outcome is one-node preferred hints of
    every provider, with ``align-by-socket`` too. The answers are the full ones whenever the
    pod is not admitted (they name the blocking resource)."""
    memory: ProviderAnswer | _Unasked = UNASKED
    if policy in (RESTRICTED, BEST_EFFORT):
        single = provider_answers(state, ask, reuse, True, align_by_socket)
        hint = single_node_choice(single, distances)
        if hint is not None:
            return single, hint, True
        if not any(len(h.affinity or ()) == 1 for hints in (single[2] or {}).values()
                   for h in hints or ()):
            memory = single[2]  # no node alone holds it: the memory manager's full answer
    answers = provider_answers(state, ask, reuse, policy == SINGLE_NUMA_NODE, align_by_socket,
                               memory)
    hint, admitted = policy_merge(policy, answers, state.numa_ids, distances)
    return answers, hint, admitted


def single_node_choice(answers: Sequence[ProviderAnswer], distances: Distances | None
                       ) -> TopologyHint | None:
    """The one-node preferred outcome the merge would pick, when there is one: a node with a
    preferred one-node hint (or a preferred "any") in every provider's list; None otherwise,
    and when every provider answers "any"."""
    allowed: set[int] | None = None
    for hints in provider_lists(answers):
        if any(h.affinity is None and h.preferred for h in hints):
            continue
        nodes = {n for h in hints if h.preferred and h.affinity is not None
                 and len(h.affinity) == 1 for n in h.affinity}
        allowed = nodes if allowed is None else allowed & nodes
        if not allowed:
            return None
    if allowed is None:
        return None
    best = min(allowed, key=lambda n: (
        average_distance(frozenset((n,)), distances) if distances is not None else 0.0, n))
    return TopologyHint(frozenset((best,)), True)


def can_admit(policy: str, best: TopologyHint) -> bool:
    """The ``policy``'s ``canAdmitPodResult``."""
    return policy in (NONE, BEST_EFFORT) or best.preferred


@dataclass(frozen=True)
class Placement:
    """Where one container landed: the merged hint (``None``: any node) and the NUMA nodes
    its CPUs, memory and devices went to; ``pinned_by`` names the init container whose
    reusable CPUs or devices the hint had to contain."""

    container: str
    ask: Ask
    hint: NumaSet | None
    cpus: NumaSet = frozenset()
    memory: NumaSet = frozenset()
    devices: Mapping[str, NumaSet] = field(default_factory=dict)
    pinned_by: str | None = None
    before: ManagersState | None = None  # what the container was judged against
    cpu_ids: frozenset[int] = frozenset()  # the exclusive CPUs it got, reused ones included
    # memory per NUMA set it was allocated on (one block per type, as the memory manager's)
    memory_blocks: tuple[tuple[str, int, NumaSet], ...] = ()
    # devices per resource: how many from each NUMA set (reused ones included)
    device_sets: Mapping[str, Mapping[NumaSet, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    reason: str | None = None
    blocking_resource: str = NO_BLOCK
    container: str | None = None  # the container that could not be placed
    message: str = ""
    placements: tuple[Placement, ...] = ()
    state: ManagersState | None = None  # after allocation, when admitted
    pinned_by: str | None = None  # the init container pinning the rejected container
    grouped_nodes: NumaSet = frozenset()  # memory-group nodes refused for single-node memory
    before: ManagersState | None = None  # what the rejected container was judged against
    blocked: tuple[str, ...] = ()  # each resource that alone has no allowed NUMA set


@dataclass
class Reuse:
    """A pod's reusable init-container resources (``cpusToReuse``, ``devicesToReuse``,
    reusable memory), and which init container left them."""

    cpus: frozenset[int] = frozenset()
    devices: dict[str, dict[NumaSet, int]] = field(default_factory=dict)
    memory: dict[NumaSet, dict[str, int]] = field(default_factory=dict)
    owner: str | None = None


def reuse_init_memory(placements: list[Placement], regular_init: list[bool]) -> None:
    """``updateInitContainersMemoryBlocks``: the last placement's memory blocks are cut out
    of the earlier regular init containers' blocks of the same type and NUMA affinity, the
    earliest first, so the pod's blocks add up to what it holds (an init container's block
    can drop to 0)."""
    for memory_type, size, numa in placements[-1].memory_blocks:
        left = size
        for index in range(len(placements) - 1):
            if left == 0:
                break
            if not regular_init[index]:
                continue
            placement = placements[index]
            blocks = []
            for kind, held, nodes in placement.memory_blocks:
                if kind == memory_type and nodes == numa and held:
                    cut = min(held, left)
                    held, left = held - cut, left - cut
                blocks.append((kind, held, nodes))
            placements[index] = replace(placement, memory_blocks=tuple(blocks))


class _Unasked:
    """The memory manager's answer is still to be computed."""


UNASKED = _Unasked()


def provider_answers(state: ManagersState, ask: Ask, reuse: Reuse, single: bool = False,
                     align_by_socket: bool = False,
                     memory_answer: ProviderAnswer | _Unasked = UNASKED) -> list[ProviderAnswer]:
    """Device, CPU and memory managers' hints, in the order the kubelet registers them.
    ``single``: only what ``single-numa-node`` keeps of them (its merge filters every wider
    hint out), which costs one check per NUMA node instead of one per set of them;
    ``align_by_socket``: the CPU manager's option of that name; ``memory_answer``: the memory
    manager's, when already computed (without a node that holds the request alone, its
    single-node answer is the full one)."""
    devices: dict[str, list[TopologyHint] | None] = {}
    for resource, amount in {**ask.hint_devices, **ask.devices}.items():
        known = state.devices.get(resource)
        if known is None:
            continue  # no device plugin: not the device manager's resource
        devices[resource] = device_hints(state.numa_ids, known, amount,
                                         reuse.devices.get(resource),
                                         state.device_hints_on_device_nodes(), single)
    cpu: dict[str, list[TopologyHint] | None] | None = None
    if state.cpu is not None and ask.cpus:
        cpu = {"cpu": cpu_hints(state.cpu, ask.cpus, reuse.cpus, single, align_by_socket)}
    memory: ProviderAnswer = None
    if not isinstance(memory_answer, _Unasked):
        memory = memory_answer
    elif state.memory is not None and ask.memory:
        memory = memory_hints(state.memory, ask.memory, reuse.memory, single)
    return [devices or None, cpu, memory]


def _allowed(policy: str, hints: list[TopologyHint] | None) -> bool:
    """Whether one resource alone leaves the policy something to admit."""
    if hints is None:
        return True
    if policy == SINGLE_NUMA_NODE:
        return bool(filter_single_numa_hints([hints])[0])
    return any(h.preferred for h in hints)


def blocking_resource(policy: str, answers: list[ProviderAnswer], ask: Ask) -> str:
    """The resource no allowed NUMA set has enough of; ``multiple`` when several do, or when
    each alone would fit but no allowed set holds them together."""
    blocked = blocked_resources(policy, answers, ask)
    return blocked[0] if len(blocked) == 1 else MULTIPLE


def blocked_resources(policy: str, answers: list[ProviderAnswer], ask: Ask) -> list[str]:
    """The resources for which, alone, no NUMA set the policy allows has enough (the memory
    types of one container count as ``memory`` when several block)."""
    blocked: list[str] = []
    for answer in answers:
        for resource, hints in (answer or {}).items():
            if not _allowed(policy, hints) and resource not in blocked:
                blocked.append(resource)
    memory_types = [r for r in blocked if r in ask.memory]
    if len(memory_types) > 1:  # one provider answers every memory type alike
        blocked = [r for r in blocked if r not in ask.memory] + ["memory"]
    return blocked


def grouped_refusals(state: ManagersState, ask: Ask) -> NumaSet:
    """The nodes of multi-NUMA memory groups, when the container asks for memory."""
    if state.memory is None or not ask.memory:
        return frozenset()
    return frozenset(n for n, node in state.memory.items() if len(node.group) > 1)


def policy_distances(state: ManagersState, rules: Rules) -> Mapping[int, Mapping[int, int]] | None:
    return state.distances if rules.prefer_closest_numa_nodes else None


def allocate_aligned_resources(state: ManagersState, container: ContainerShape, ask: Ask,
                               hint: TopologyHint, reuse: Reuse, regular_init: bool,
                               pinned: str | None, rules: Rules
                               ) -> tuple[ManagersState, Placement] | Failure:
    """``allocateAlignedResources``: the device, CPU and memory managers' ``Allocate`` for one
    container, in that order."""
    before = state
    affinity = hint.affinity
    devices = dict(state.devices)
    placed_devices: dict[str, NumaSet] = {}
    device_sets: dict[str, dict[NumaSet, int]] = {}
    for resource, amount in ask.devices.items():
        known = devices.get(resource)
        if known is None:
            continue  # no device plugin: the resource-fit predicate drops what the node lacks
        result = allocate_devices(known, amount, affinity, reuse.devices.get(resource, {}))
        if result is None:
            return Failure("UnexpectedAdmissionError", resource,
                           f"requested number of devices unavailable for {resource}. "
                           f"Requested: {amount}, Available: {known.free_total()}")
        devices[resource], taken, from_reuse = result
        placed_devices[resource] = frozenset().union(*taken, *from_reuse)
        sets = device_sets[resource] = dict(taken)
        for numa, n in from_reuse.items():
            sets[numa] = sets.get(numa, 0) + n
        pool = reuse.devices.setdefault(resource, {})
        if regular_init:
            for numa, n in taken.items():
                pool[numa] = pool.get(numa, 0) + n
        else:
            for numa, n in from_reuse.items():
                pool[numa] -= n
    state = replace(state, devices=devices)

    cpu_nodes: NumaSet = frozenset()
    chosen: frozenset[int] = frozenset()
    if ask.cpus and state.cpu is not None:
        cpu = state.cpu
        failure = smt_check(cpu, ask.cpus) if rules.full_pcpus_only else None
        if failure is not None:
            return failure
        options = replace(rules.cpu_options(), kubelet_minor=state.kubelet_minor)
        try:
            picked = pick_cpus(cpu, ask.cpus, affinity, reuse.cpus, options)
        except AdmissionStall as stall:
            return Failure(ADMISSION_STALLED, "cpu",
                           f"the kubelet's CPU manager does not finish: {stall} "
                           "(takeByTopologyNUMADistributed, kubernetes#140730)")
        if picked is None:
            return Failure("UnexpectedAdmissionError", "cpu",
                           f"not enough cpus available to satisfy request: requested="
                           f"{ask.cpus}, available={len(cpu.free | reuse.cpus)}")
        chosen = picked
        state = with_cpus_taken(state, chosen - reuse.cpus)
        cpu_nodes = frozenset(cpu.cpu_numa[c] for c in chosen if c in cpu.cpu_numa)
        # updateCPUsToReuse: a regular init container's CPUs become reusable; any other
        # container, a restartable sidecar included, takes its CPUs out for good
        if regular_init:
            reuse.cpus = reuse.cpus | chosen
        else:
            reuse.cpus = reuse.cpus - chosen

    memory_nodes: NumaSet = frozenset()
    if ask.memory and state.memory is not None:
        placed = place_memory(state.memory, ask.memory, hint, reuse.memory)
        if isinstance(placed, Failure):
            return placed
        memory_nodes = placed
        state = replace(state, memory=take_memory(state.memory, ask.memory, placed,
                                                  reuse.memory))
        if regular_init:
            kept = reuse.memory.setdefault(placed, {})
            for resource, amount in ask.memory.items():
                kept[resource] = max(kept.get(resource, 0), amount)
        elif placed in reuse.memory:
            for resource, amount in ask.memory.items():
                left = reuse.memory[placed].get(resource, 0) - amount
                reuse.memory[placed][resource] = max(0, left)
    if regular_init and (ask.cpus or ask.devices):
        reuse.owner = container.name
    blocks = tuple((resource, amount, memory_nodes) for resource, amount in ask.memory.items()
                   if memory_nodes)
    return state, Placement(container.name, ask, affinity, cpu_nodes, memory_nodes,
                            placed_devices, pinned, before, chosen, blocks, device_sets)
