"""The memory manager's ``Static`` policy (``memorymanager/policy_static.go``, v1.37.2).

* hints (``GetTopologyHints``, ``calculateHints``): every NUMA set with enough *allocatable* of
  each requested type sets the minimum width; a single node of a multi-NUMA group and a set
  breaking the group rule are skipped; the others need enough free memory;
* ``Allocate`` (:func:`place_memory`, :func:`take_memory`): no hint means the manager's own
  best hint (``findBestHint``); a hint that does not hold the request is extended to the best
  hint containing it (one not preferred where the hint was is an error); a hint violating the
  group rule fails (``isAffinityViolatingNUMAAllocations``); each NUMA node of the hint is
  filled in id order, and every node of it joins the group ``Cells`` = the hint.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from ..admission.errors import UNEXPECTED_ADMISSION_ERROR, Failure
from ..topologymanager.bitmask import (
    MaskTable,
    Sums,
    kept_sums,
    mask_bits,
    mask_table,
    node_sums,
    preferred_hints,
)
from ..topologymanager.topology_manager import NumaSet, TopologyHint
from .state import MemoryNode


def memory_hints(memory: Mapping[int, MemoryNode], request: Mapping[str, int],
                 reusable: Mapping[NumaSet, Mapping[str, int]] | None = None,
                 single: bool = False) -> dict[str, list[TopologyHint]] | None:
    """``calculateHints``: for every mask with enough *allocatable* of each requested type
    (the narrowest such is the minimum width), skip a single node that is part of a
    multi-NUMA group, and a multi-node mask whose members with assignments are single-node or
    in a group other than exactly this mask; then require free (+ this pod's reusable memory on
    the same mask) for every type. All types get the same hints. ``None`` (don't care) when
    nothing is asked — and also when no mask qualifies: the kubelet returns an empty map then,
    which the merger reads as "don't care" (allocation fails later). ``single``: only the
    single-node hints, unless no single node qualifies (whether a wider set does decides
    between "don't care" and no preferred hint)."""
    wanted = {r: a for r, a in request.items() if a > 0}
    if not wanted:
        return None
    if single:
        singles = single_memory_hints(memory, wanted, reusable or {})
        if singles:
            return {r: list(singles) for r in wanted}
    table = mask_table(tuple(sorted(memory)))
    nodes = tuple(m.allocatable for m in memory.values())
    allocatable = {r: kept_sums(table, (*nodes, r),
                                functools.partial(_allocatable_sums, table, memory, r))
                   for r in wanted}
    free = {r: node_sums(table, {n: m.free.get(r, 0) for n, m in memory.items()})
            for r in wanted}
    # a multi-node mask is skipped when a member with assignments is in another group (a
    # single-node one included): its members with assignments must all be grouped as it
    assigned = mask_bits(n for n, m in memory.items() if m.assignments > 0)
    grouped_as: dict[int, int] = {}
    for n, m in memory.items():
        if m.assignments > 0:
            group = mask_bits(m.group)
            grouped_as[group] = grouped_as.get(group, 0) | 1 << n
    in_multi = mask_bits(n for n, m in memory.items() if len(m.group) > 1)
    asked = list(wanted.items())
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if any(allocatable[r][b] < a for r, a in asked):
            continue
        min_width = min(min_width, len(numa))
        if len(numa) == 1:
            if b & in_multi:
                continue
        elif b & assigned & ~grouped_as.get(b, 0):
            continue
        again = (reusable or {}).get(numa, {})
        if all(free[r][b] + again.get(r, 0) >= a for r, a in wanted.items()):
            found.append(i)
    if not found:
        return None
    hints = preferred_hints(table, found, min_width)
    return {r: list(hints) for r in wanted}


def single_memory_hints(memory: Mapping[int, MemoryNode], wanted: Mapping[str, int],
                         reusable: Mapping[NumaSet, Mapping[str, int]]) -> list[TopologyHint]:
    """:func:`memory_hints`' single-node hints: a node that holds the request in allocatable
    makes the minimum width one, so every single-node hint found is preferred."""
    found: list[TopologyHint] = []
    for n in sorted(memory):
        node = memory[n]
        if len(node.group) > 1 or any(node.allocatable.get(r, 0) < a for r, a in wanted.items()):
            continue
        again = reusable.get(frozenset((n,)), {})
        if all(node.free.get(r, 0) + again.get(r, 0) >= a for r, a in wanted.items()):
            found.append(TopologyHint(frozenset((n,)), True))
    return found


def _allocatable_sums(table: MaskTable, memory: Mapping[int, MemoryNode], resource: str
                      ) -> Sums:
    return node_sums(table, {n: m.allocatable.get(resource, 0) for n, m in memory.items()})


def _best_of(hints: list[TopologyHint]) -> TopologyHint | None:
    """``findBestHint``: preferred first, then the narrower (lower ids on a tie)."""
    best: TopologyHint | None = None
    for hint in hints:
        better = best is None or (hint.preferred and not best.preferred) or (
            hint.preferred == best.preferred and _narrower(hint.affinity, best.affinity))
        if better:
            best = hint
    return best


def _narrower(a: NumaSet | None, b: NumaSet | None) -> bool:
    a, b = a or frozenset(), b or frozenset()
    if len(a) != len(b):
        return len(a) < len(b)
    return sum(1 << n for n in a) < sum(1 << n for n in b)


def violates_groups(memory: Mapping[int, MemoryNode], mask: NumaSet) -> bool:
    """``isAffinityViolatingNUMAAllocations`` (a single-node hint never violates here)."""
    if len(mask) == 1:
        return False
    for numa in mask:
        node = memory.get(numa)
        if node is None or node.assignments == 0:
            continue
        if len(node.group) == 1 or node.group != mask:
            return True
    return False


def place_memory(memory: Mapping[int, MemoryNode], request: Mapping[str, int],
                 hint: TopologyHint, reusable: Mapping[NumaSet, Mapping[str, int]]
                 ) -> NumaSet | Failure:
    """The NUMA set the memory manager would allocate ``request`` on, or why it cannot."""
    preferred = hint.preferred
    if hint.affinity is None:
        # getDefaultHint's findBestHint takes the narrowest preferred hint, the lowest id on a
        # tie: a single node holding the request is it, so the wider sets are not computed
        calculated = memory_hints(memory, request, reusable, single=True) or {}
        best = _best_of(next(iter(calculated.values()), []))
        if best is None or best.affinity is None:
            return Failure(UNEXPECTED_ADMISSION_ERROR, _first(request),
                           "[memorymanager] failed to get the default NUMA affinity, no NUMA "
                           "nodes with enough memory is available")
        if not best.preferred and preferred:
            return Failure(UNEXPECTED_ADMISSION_ERROR, _first(request),
                           "[memorymanager] failed to find the default preferred hint")
        mask, preferred = best.affinity, best.preferred
    else:
        mask = hint.affinity
    if not _satisfies(memory, mask, request, reusable):
        calculated = memory_hints(memory, request, reusable) or {}
        around = [h for h in calculated.get("memory", []) if h.affinity and mask <= h.affinity]
        extended = _best_of(around)
        if extended is None or extended.affinity is None:
            return Failure(UNEXPECTED_ADMISSION_ERROR, _first(request),
                           "[memorymanager] failed to find NUMA nodes to extend the current "
                           "topology hint")
        if not extended.preferred and preferred:
            return Failure(UNEXPECTED_ADMISSION_ERROR, _first(request),
                           "[memorymanager] failed to find the extended preferred hint")
        mask = extended.affinity
    if violates_groups(memory, mask):
        return Failure(UNEXPECTED_ADMISSION_ERROR, _first(request),
                       "[memorymanager] preferred hint violates NUMA node allocation")
    return mask


def _first(request: Mapping[str, int]) -> str:
    return "memory" if "memory" in request else next(iter(request))


def _satisfies(memory: Mapping[int, MemoryNode], mask: NumaSet, request: Mapping[str, int],
               reusable: Mapping[NumaSet, Mapping[str, int]]) -> bool:
    again = reusable.get(mask, {})
    return all(sum(memory[n].free.get(r, 0) for n in mask if n in memory) + again.get(r, 0) >= a
               for r, a in request.items())


def take_memory(memory: Mapping[int, MemoryNode], request: Mapping[str, int], mask: NumaSet,
                reusable: Mapping[NumaSet, Mapping[str, int]]) -> dict[int, MemoryNode]:
    """Fill the hint's nodes in id order (reusable memory of the pod on the same set first);
    every node of the hint counts one more assignment and joins the group of the hint."""
    nodes = dict(memory)
    again = reusable.get(mask, {})
    for resource, amount in request.items():
        need = max(0, amount - again.get(resource, 0))
        for numa in sorted(mask):
            if numa not in nodes or need <= 0:
                continue
            node = nodes[numa]
            have = node.free.get(resource, 0)
            if have <= 0:
                continue
            use = min(have, need)
            nodes[numa] = replace(node, free={**node.free, resource: have - use})
            need -= use
    for numa in mask:
        if numa in nodes:
            node = nodes[numa]
            nodes[numa] = replace(node, group=mask, assignments=node.assignments + 1)
    return nodes
