"""The fit answers of one shape against one node state (SPEC 7.3), and their words.

* admitted / rejection reason / blocking resource:
  :func:`exporter.fit.kubelet.topologymanager.scope.admit` under the kubelet's policy, scope and
  options;
* fits per NUMA node: the whole pod admitted on that node alone under ``single-numa-node``;
* free and shortfall per NUMA node for the pod's effective request (memory on a node of a
  multi-NUMA memory group is 0 free: the memory manager serves no single-node request there);
* capacity: pods of the shape admitted one after another, each placed as the kubelet places it
  and taken off the state before the next, its requests added to what the resource-fit
  predicate counts; bounded by :data:`CAPACITY_CAP`, by the node-wide free amount of each
  aligned resource and by the predicate's room (pods, CPU and memory requests); ``+Inf`` only
  when nothing bounds it (no exclusive request and no predicate figures);
* min NUMA nodes: the narrowest NUMA set every provider has a hint for (what ``best-effort``
  aligns to).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .capacity import (
    CAPACITY_CAP,
    NodeCounts,
    admitted_alone,
    capacity_bound,
    capacity_by_node,
    capacity_by_placement,
    node_wide_free,
    nodes_admitting,
    per_node_unit,
    predicate_limit,
    restrict,
)
from .kubelet.allocation.allocation_manager import admit
from .kubelet.config import Rules
from .kubelet.managers_state import ManagersState
from .kubelet.memorymanager.policy_static import single_memory_hints
from .kubelet.podshape import CPU, Ask, PodShape, is_memory_resource, pod_effective_ask
from .kubelet.topologymanager.bitmask import masks
from .kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from .kubelet.topologymanager.scope import NO_BLOCK, Placement, Reuse, Verdict, provider_answers
from .kubelet.topologymanager.topology_manager import NumaSet
from .replay import replayed_copies, replayed_fits

UNKNOWN = "unknown"
__all__ = ["CAPACITY_CAP", "ShapeAnswer", "answer", "node_wide_free", "restrict"]


@dataclass(frozen=True)
class ShapeAnswer:
    shape: PodShape
    rules: Rules
    verdict: Verdict
    request: Ask  # the pod's effective request
    aligned: tuple[str, ...]  # requested resources the kubelet aligns, in display order
    not_aligned: tuple[str, ...]
    fits: Mapping[int, bool]
    free: Mapping[int, Mapping[str, int]]
    shortfall: Mapping[int, Mapping[str, int]]
    grouped: NumaSet  # nodes of a multi-NUMA memory group
    capacity: float
    min_numa_nodes: int | None
    node_free: Mapping[str, int] = field(default_factory=dict)  # node-wide free per resource
    assumptions: tuple[str, ...] = ()  # what the answer rests on (exporter.fit.assumptions)


def free_on(state: ManagersState, resource: str, numa_id: int) -> int:
    """What a new single-node request of ``resource`` could get on ``numa_id``."""
    if resource == CPU:
        return state.cpu.free_per_node().get(numa_id, 0) if state.cpu is not None else 0
    if is_memory_resource(resource):
        if state.memory is None or numa_id not in state.memory or state.grouped(numa_id):
            return 0
        return state.memory[numa_id].free.get(resource, 0)
    devices = state.devices.get(resource)
    if devices is None:
        return 0
    if not devices.topology_aware():
        return devices.free_total()
    return sum(n for numa, n in devices.free.items() if numa_id in numa)


def is_aligned(state: ManagersState, resource: str) -> bool:
    if resource == CPU:
        return state.cpu is not None
    if is_memory_resource(resource):
        return state.memory is not None
    devices = state.devices.get(resource)
    return devices is None or devices.topology_aware()


def numa_free_series(state: ManagersState) -> dict[tuple[str, str], int]:
    """``podresources_numa_free`` as {(numa_node, resource): amount}."""
    values: dict[tuple[str, str], int] = {}
    types = sorted({t for node in (state.memory or {}).values() for t in node.allocatable})
    for numa_id in state.numa_ids:
        label = str(numa_id)
        if state.cpu is not None:
            values[(label, CPU)] = free_on(state, CPU, numa_id)
        for memory_type in types:
            values[(label, memory_type)] = free_on(state, memory_type, numa_id)
        for resource, devices in state.devices.items():
            if devices.topology_aware():
                values[(label, resource)] = free_on(state, resource, numa_id)
    for resource, devices in state.devices.items():
        if not devices.topology_aware():
            values[(UNKNOWN, resource)] = devices.free_total()
    return values


def full_cores_series(state: ManagersState) -> dict[str, int]:
    """``podresources_numa_free_full_cores``: free CPUs whose SMT siblings are all free."""
    cpu = state.cpu
    if cpu is None:
        return {}
    whole = [c for c in cpu.free if cpu.core_of(c) <= cpu.free]
    counts = dict.fromkeys((str(n) for n in state.numa_ids), 0)
    for c in whole:
        label = str(cpu.cpu_numa.get(c))
        if label in counts:
            counts[label] += 1
    return counts


def shape_min_numa_nodes(state: ManagersState, ask: Ask) -> int | None:
    """The narrowest NUMA set every provider has a hint for; ``None`` when none does. One
    NUMA node is tried first with the single-node hints alone (the usual answer)."""
    if _one_node_holds(state, ask):
        return 1
    answers = provider_answers(state, ask, Reuse())
    if state.memory is not None and ask.memory and answers[2] is None:
        return None  # no NUMA set holds the memory (the provider's empty map)
    allowed: list[set[NumaSet]] = []
    for answer in answers:
        for hints in (answer or {}).values():
            if hints is None:
                continue
            if not hints:
                return None
            allowed.append({h.affinity for h in hints if h.affinity is not None})
    if not allowed:
        return 1
    for mask in masks(state.numa_ids):
        if all(mask in found for found in allowed):
            return len(mask)
    return None


def _one_node_holds(state: ManagersState, ask: Ask) -> bool:
    """Some NUMA node has a single-node hint from every provider that answers (the memory
    manager's single-node hints alone: without one, the full answer decides)."""
    common = set(state.numa_ids)
    answered = False
    lists = [hints for answer in provider_answers(state, replace(ask, memory={}), Reuse(), True)
             for hints in (answer or {}).values() if hints is not None]
    wanted = {r: a for r, a in ask.memory.items() if a > 0}
    if state.memory is not None and wanted:
        lists.append(single_memory_hints(state.memory, wanted, {}))
    for hints in lists:
        answered = True
        common &= {n for h in hints if h.affinity is not None and len(h.affinity) == 1
                   for n in h.affinity}
    return answered and bool(common)


def capacity(shape: PodShape, state: ManagersState, rules: Rules, first: Verdict, ask: Ask,
             counts: NodeCounts | None = None) -> float:
    """Pods admitted one after another (:mod:`exporter.fit.capacity`); with ``counts`` (the
    refresh's, kept from one state to the next), replayed on counts or node by node where that
    gives the same answer; without, copy by copy (what the tests compare them with)."""
    if ask.is_empty() and state.requests is None:
        return math.inf
    bound = capacity_bound(shape, state, ask)
    if first.admitted and bound == 1:
        return 1.0  # the first copy is the last the node-wide amounts or the predicate allow
    if counts is not None and first.admitted and bound > 0:
        replayed = replayed_copies(shape, state, rules, first, bound, counts)
        if replayed is not None:
            return float(predicate_limit(shape, state, ask, replayed))
        unit = per_node_unit(shape, state, rules)
        if unit is not None:
            count = capacity_by_node(shape, state, rules, first, bound, unit, counts)
            if count is not None:
                return float(count)
    return float(capacity_by_placement(shape, state, rules, first, bound))


def fits(shape: PodShape, state: ManagersState, rules: Rules, counts: NodeCounts | None
         ) -> dict[int, bool]:
    """Per NUMA node, the whole pod admitted on it alone under ``single-numa-node``."""
    single = replace(rules, policy=SINGLE_NUMA_NODE)
    if counts is not None:
        replayed = replayed_fits(shape, state, single)
        if replayed is not None:
            return admitted_alone(shape, state, replayed, pod_effective_ask(shape, rules.managers))
        unit = per_node_unit(shape, state, single)
        if unit is not None:
            return nodes_admitting(shape, state, single, unit, counts)
    return {n: admit(shape, restrict(state, n), single).admitted for n in state.numa_ids}


def absent(state: ManagersState, ask: Ask) -> Verdict | None:
    """A device resource the node has not one device of: the kubelet's resource-fit predicate
    would drop it (``removeMissingExtendedResources``, for cluster-level resources), but no
    scheduler binds such a pod here; for the fit answers the node's allocatable count, 0, is
    exceeded: ``OutOf<resource>`` (SPEC 7.2.3)."""
    for resource, amount in ask.devices.items():
        if amount and resource not in state.devices:
            return Verdict(False, f"OutOf{resource}", resource, None,
                           f"the node has no {resource}", before=state)
    return None


def answer(shape: PodShape, state: ManagersState, rules: Rules,
           counts: NodeCounts | None = None) -> ShapeAnswer:
    """The shape's answers on ``state``; ``counts``: each NUMA node's count of copies, kept
    from the previous state (:class:`~exporter.fit.capacity.NodeCounts`)."""
    ask = pod_effective_ask(shape, rules.managers)
    missing = absent(state, ask)
    verdict = missing if missing is not None else admit(shape, state, rules)
    requested = ask.resources()
    aligned = tuple(sorted((r for r in requested if is_aligned(state, r)), key=resource_order))
    not_aligned = tuple(r for r in shape.resources()
                        if r not in aligned and (r not in requested or not is_aligned(state, r)))
    room = capacity(shape, state, rules, verdict, ask, counts)
    alone = (fits(shape, state, rules, counts) if aligned and missing is None
             else dict.fromkeys(state.numa_ids, False))
    free: dict[int, dict[str, int]] = {}
    shortfall: dict[int, dict[str, int]] = {}
    for numa_id in state.numa_ids:
        free[numa_id] = {r: free_on(state, r, numa_id) for r in aligned}
        shortfall[numa_id] = {r: max(0, ask.amount(r) - free[numa_id][r]) for r in aligned}
    grouped = frozenset(n for n in state.numa_ids if state.grouped(n))
    return ShapeAnswer(shape, rules, verdict, ask, aligned, not_aligned, alone, free, shortfall,
                       grouped, room,
                       shape_min_numa_nodes(state, ask) if aligned and missing is None else None,
                       {r: node_wide_free(state, r) for r in aligned})


# ---- words -----------------------------------------------------------------------------------

def resource_order(resource: str) -> tuple[int, str]:
    """Devices first (they are what operators name), then CPUs, then memory."""
    if resource == CPU:
        return (1, resource)
    if is_memory_resource(resource):
        return (2, resource)
    return (0, resource)


def format_amount(resource: str, amount: float) -> str:
    """A resource amount as an operator writes it: ``8``, ``64Gi``, ``512Mi``."""
    if resource == CPU or not is_memory_resource(resource):
        return str(int(amount)) if amount == int(amount) else str(amount)
    amount = int(amount)
    for unit, suffix in ((1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    if amount >= 1 << 30:
        return f"{amount / (1 << 30):.1f}Gi"
    if amount >= 1 << 20:
        return f"{amount / (1 << 20):.1f}Mi"
    return str(amount)


def noun(resource: str, amount: int) -> str:
    if resource == CPU:
        return f"{amount} CPU" + ("" if amount == 1 else "s")
    if is_memory_resource(resource):
        return f"{format_amount(resource, amount)} of {resource}"
    return f"{amount} {resource}"


def join(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def nodes_text(numa: NumaSet | None) -> str:
    if numa is None:
        return "any NUMA node"
    ids = sorted(numa)
    return f"NUMA node{'s' if len(ids) > 1 else ''} {join([str(i) for i in ids])}"


def where(placement: Placement) -> NumaSet | None:
    """The NUMA nodes a container is aligned to: the merged hint; without one (policy none),
    wherever its CPUs, memory and devices went."""
    if placement.hint is not None:
        return placement.hint
    used = placement.cpus | placement.memory | frozenset().union(*placement.devices.values())
    return used or None


def placement_text(result: ShapeAnswer) -> str:
    parts = []
    for placement in result.verdict.placements:
        if placement.ask.is_empty():
            continue
        parts.append(f"{placement.container} on {nodes_text(where(placement))}")
    return join(parts)


def sentence(result: ShapeAnswer) -> str:
    """The verdict in one sentence, naming the policy and scope it assumed."""
    rules = result.rules
    under = f"under Topology Manager policy {rules.policy}, scope {rules.scope}"
    if rules.full_pcpus_only:
        under += ", full-pcpus-only"
    verdict = result.verdict
    if verdict.admitted:
        where = placement_text(result)
        if not result.aligned:
            return (f"the kubelet would admit it {under}: it asks for nothing the kubelet "
                    "aligns to NUMA nodes")
        text = f"the kubelet would admit it {under}" + (f": {where}" if where else "")
        if math.isfinite(result.capacity):
            more = int(result.capacity)
            text += (f"; {more}{'+' if more >= CAPACITY_CAP else ''} more pod"
                     f"{'' if more == 1 else 's'} of this shape would be admitted")
        return text
    who = f" ({verdict.container})" if verdict.container and (
        len(result.shape.containers) + len(result.shape.init_containers) > 1) else ""
    text = f"the kubelet would reject it{who} with {verdict.reason} {under}"
    reasons: list[str] = []
    blocking = verdict.blocking_resource
    if verdict.pinned_by:
        reasons.append(f"the init container {verdict.pinned_by}'s exclusive resources are "
                       f"reusable only where they are, which pins {verdict.container or 'it'}"
                       " to their NUMA node")
    if verdict.grouped_nodes and (blocking in ("memory", "multiple")
                                  or is_memory_resource(blocking)):
        holds = "hold" if len(verdict.grouped_nodes) > 1 else "holds"
        reasons.append(f"{nodes_text(verdict.grouped_nodes)} {holds} part of a memory block "
                       "spanning several NUMA nodes, so the memory manager serves no "
                       "single-NUMA memory request there")
    if verdict.reason is not None and (verdict.reason == "SMTAlignmentError"
                                       or verdict.reason.startswith("OutOf")):
        reasons.append(verdict.message)
    elif blocking not in (NO_BLOCK, "multiple") and not reasons:
        lacks = [f"node {n} has {format_amount(blocking, result.free[n].get(blocking, 0))}"
                 for n in result.free if blocking in result.free[n]]
        reasons.append(f"no NUMA set the policy allows has enough {blocking}"
                       + (f" ({', '.join(lacks)} free)" if lacks else ""))
    elif blocking == "multiple":
        others = [r for r in verdict.blocked
                  if not (verdict.grouped_nodes and (r == "memory" or is_memory_resource(r)))]
        if len(verdict.blocked) > 1 and others:
            named = ["CPUs" if r == CPU else r for r in others]
            reasons.append("no NUMA set the policy allows has enough " + named[0]
                           + "".join(f", nor enough {r}" for r in named[1:]))
        elif not reasons:
            reasons.append("no NUMA set the policy allows holds "
                           + join([noun(r, result.request.amount(r)) for r in result.aligned])
                           + " together")
    if reasons:
        text += ": " + "; ".join(reasons)
    if result.min_numa_nodes is not None and rules.policy != SINGLE_NUMA_NODE:
        text += f" ({result.min_numa_nodes} NUMA nodes together would hold it now)"
    return text
