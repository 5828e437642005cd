"""Hint providers: the CPU, memory and device managers' ``GetTopologyHints``, as functions.

Each returns what its kubelet counterpart does, because the merger reads the three answers
differently (``filterProvidersHints``): ``None`` for "don't care" (the resource is not
managed, or nothing is asked); an empty list when nothing can satisfy the request; otherwise
one hint per NUMA set whose *free* amount suffices, preferred when the set is as narrow as
the fewest nodes whose *capacity* could hold the request (``minAffinitySize``).

Sources (kubernetes/kubernetes ``pkg/kubelet/cm``): ``cpumanager/policy_static.go``
``generateCPUTopologyHints``; ``memorymanager/policy_static.go`` ``calculateHints`` (the group
rule); ``devicemanager/topology_hints.go`` ``generateDeviceTopologyHints``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from ..managers_state import CpuState, DeviceState, MemoryNode, NumaSet


@dataclass(frozen=True)
class TopologyHint:
    """A NUMA set (``None``: any) and whether it is as narrow as the capacity allows."""

    affinity: NumaSet | None
    preferred: bool


Hints = list[TopologyHint] | None  # None: don't care; []: cannot be satisfied


# Beyond this many NUMA nodes the 2^n sets are not enumerated: only single nodes and all of
# them (the kubelet itself refuses a policy on more than 8 unless max-allowable-numa-nodes says
# otherwise, and enumerates every set).
MAX_ENUMERATED_NUMA_NODES = 16


@dataclass(frozen=True)
class MaskTable:
    """Every NUMA set to try, narrowest first then by ids (``bitmask.IterateBitMasks``), as
    frozensets and as bit masks (bit i for NUMA id i), with the subset-sum order for sums."""

    numa_ids: tuple[int, ...]
    sets: tuple[NumaSet, ...]
    bits: tuple[int, ...]
    complete: bool  # every subset is listed: sums by dynamic programming over the bits
    ascending: tuple[int, ...] = ()  # the bit masks in increasing order

    @functools.cached_property
    def hints(self) -> tuple[tuple[TopologyHint, ...], tuple[TopologyHint, ...]]:
        """Every set's hint, preferred and not: built once, shared by every answer."""
        return (tuple(TopologyHint(m, True) for m in self.sets),
                tuple(TopologyHint(m, False) for m in self.sets))

    @property
    def dense(self) -> bool:
        """Every subset listed and the ids small: sums go in a list indexed by bit mask (sparse
        or large NUMA ids would make that list huge; they are summed set by set)."""
        return self.complete and (not self.numa_ids or max(self.numa_ids) <= 16)


@functools.cache
def mask_table(numa_ids: tuple[int, ...]) -> MaskTable:
    ordered = sorted(numa_ids)
    chosen: list[tuple[int, ...]] = []
    complete = len(ordered) <= MAX_ENUMERATED_NUMA_NODES
    if complete:
        for size in range(1, len(ordered) + 1):
            chosen.extend(combinations(ordered, size))
    else:
        chosen = [(n,) for n in ordered] + [tuple(ordered)]
    sets = tuple(frozenset(c) for c in chosen)
    bits = tuple(_bits(s) for s in sets)
    return MaskTable(tuple(ordered), sets, bits, complete, tuple(sorted(bits)))


def _bits(numa: Iterable[int]) -> int:
    value = 0
    for n in numa:
        value |= 1 << n
    return value


def masks(numa_ids: Sequence[int]) -> tuple[NumaSet, ...]:
    """Every non-empty set of ``numa_ids``, narrowest first (``bitmask.IterateBitMasks``)."""
    return mask_table(tuple(sorted(numa_ids))).sets


def node_sums(table: MaskTable, values: Mapping[int, int]) -> dict[int, int] | list[int]:
    """For every mask of the table, the sum of ``values`` over its NUMA nodes (indexed by the
    mask's bits)."""
    if not table.dense:
        return {b: sum(v for n, v in values.items() if b >> n & 1) for b in table.bits}
    sums = [0] * (_bits(table.numa_ids) + 1)
    for b in table.ascending:
        low = b & -b
        sums[b] = sums[b ^ low] + values.get(low.bit_length() - 1, 0)
    return sums


Sums = dict[int, int] | list[int]
_KEPT: dict[tuple[int, ...], tuple[tuple[object, ...], MaskTable, Sums]] = {}


def kept_sums(table: MaskTable, inputs: tuple[object, ...], compute: Callable[[], Sums]
              ) -> Sums:
    """Per-mask sums of what does not change as pods are placed one after another (the online
    CPUs, the allocatable memory, the registered devices), kept while the very same input
    objects are passed again."""
    key = (id(table), *map(id, inputs))
    kept = _KEPT.get(key)
    if kept is not None and kept[1] is table and all(
            a is b for a, b in zip(kept[0], inputs)):
        return kept[2]
    sums = compute()
    if len(_KEPT) > 256:
        _KEPT.clear()
    _KEPT[key] = (inputs, table, sums)
    return sums


def meeting_sums(table: MaskTable, counts: Mapping[NumaSet, int]) -> dict[int, int] | list[int]:
    """For every mask of the table, how many counted items have a NUMA set that meets it (an
    item with an empty set meets none); indexed by the mask's bits. Items inside each subset
    by a zeta transform over the bits: a mask meets everything outside its complement."""
    if not table.dense:
        items = [(_bits(numa), c) for numa, c in counts.items()]
        return {b: sum(c for s, c in items if s & b) for b in table.bits}
    full = _bits(table.numa_ids)
    within = [0] * (full + 1)
    total = 0
    for numa, count in counts.items():
        key = _bits(numa) & full
        if key == 0 and numa:
            continue  # only unknown NUMA ids: meets no mask
        within[key] += count
        total += count
    for n in table.numa_ids:
        bit = 1 << n
        for b in range(full + 1):
            if b & bit:
                within[b] += within[b ^ bit]
    return [total - within[full ^ b] if b & full == b else 0 for b in range(full + 1)]


def capacity_sums(table: MaskTable, registered: Mapping[NumaSet, int]) -> Sums:
    """:func:`meeting_sums` of the registered devices (they do not change as pods are
    placed)."""
    return kept_sums(table, (registered,), lambda: meeting_sums(table, registered))


def _preferred(table: MaskTable, found: list[int], min_width: int) -> list[TopologyHint]:
    """The hints of the sets at ``found`` (indices into the table), preferred when as narrow
    as ``min_width``."""
    preferred, other = table.hints
    sets = table.sets
    return [preferred[i] if len(sets[i]) == min_width else other[i] for i in found]


def single_node_hints(table: MaskTable, one_node_holds: bool, found: Iterable[int]
                      ) -> list[TopologyHint]:
    """The single-node hints among a provider's full answer, for ``single-numa-node`` (whose
    ``filterSingleNumaHints`` keeps nothing else): a node's hint is preferred when the
    narrowest set whose capacity holds the request is one node (``one_node_holds``), or when
    the table has one node only. An empty answer stays empty: the full answer then has no
    preferred single-node hint either, so both filter to nothing."""
    preferred = one_node_holds or len(table.numa_ids) == 1
    return [TopologyHint(frozenset((n,)), preferred) for n in found]


def cpu_hints(cpu: CpuState, request: int, reusable: frozenset[int] = frozenset(),
              single: bool = False) -> Hints:
    """``generateCPUTopologyHints`` over the NUMA nodes that have CPUs. A mask is a hint when
    it holds every reusable CPU of the pod and reusable + free CPUs in it reach the request.
    ``single``: only the single-node hints (see :func:`single_node_hints`)."""
    if request <= 0:
        return None
    table = mask_table(tuple(sorted(n for n, cpus in cpu.online.items() if cpus)))
    if single:
        per_node = cpu.free_per_node()
        pinned_nodes = {cpu.cpu_numa.get(c) for c in reusable} - {None}
        widest = max((len(cpu.online[n]) for n in table.numa_ids), default=0)
        return single_node_hints(
            table, widest >= request,
            (n for n in table.numa_ids if pinned_nodes <= {n}
             and len(reusable) + per_node.get(n, 0) >= request))
    online = kept_sums(table, (cpu.online,), lambda: node_sums(
        table, {n: len(cpu.online[n]) for n in table.numa_ids}))
    free = node_sums(table, cpu.free_per_node())
    pinned = _bits(n for n in (cpu.cpu_numa.get(c) for c in reusable) if n is not None)
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if online[b] >= request and len(numa) < min_width:
            min_width = len(numa)
        if pinned & ~b:
            continue
        if len(reusable) + free[b] >= request:
            found.append(i)
    return _preferred(table, found, min_width)


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
    single_only = _bits(n for n, m in memory.items() if m.assignments > 0 and len(m.group) == 1)
    grouped = {n: _bits(m.group) for n, m in memory.items() if m.assignments > 0}
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if any(allocatable[r][b] < a for r, a in wanted.items()):
            continue
        min_width = min(min_width, len(numa))
        if len(numa) == 1:
            if len(memory[next(iter(numa))].group) > 1:
                continue
        elif b & single_only or any(g != b for n, g in grouped.items() if b >> n & 1):
            continue
        again = (reusable or {}).get(numa, {})
        if all(free[r][b] + again.get(r, 0) >= a for r, a in wanted.items()):
            found.append(i)
    if not found:
        return None
    hints = _preferred(table, found, min_width)
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


def device_hints(numa_ids: Sequence[int], devices: DeviceState, request: int,
                 reusable: Mapping[NumaSet, int] | None = None,
                 on_device_nodes: bool = True, single: bool = False) -> Hints:
    """``generateDeviceTopologyHints``. ``None`` for a resource none of whose devices has
    topology; ``[]`` when fewer devices are free (plus reusable) than requested node-wide. A
    device counts for a mask its NUMA nodes intersect; a topology-less one for none; every
    reusable device with topology must meet the mask. ``on_device_nodes`` (1.37): the masks
    are those of the NUMA nodes the resource's devices sit on (``deviceNUMANodes``), so a
    mask never holds a node without one of its devices; else every NUMA node's. ``single``:
    only the single-node hints (see :func:`single_node_hints`)."""
    if request <= 0 or not devices.topology_aware():
        return None
    again = {numa: n for numa, n in (reusable or {}).items() if n > 0}
    if devices.free_total() + sum(again.values()) < request:
        return []
    if on_device_nodes:
        known = set(numa_ids)
        hosting = {n for numa, count in devices.registered.items() if count > 0 for n in numa
                   if n in known}
        numa_ids = sorted(hosting) or numa_ids
    table = mask_table(tuple(sorted(numa_ids)))
    if single:
        placed_on = [numa for numa, n in again.items() if numa]
        placed_total = sum(n for numa, n in again.items() if numa)
        holds = any(sum(c for numa, c in devices.registered.items() if n in numa) >= request
                    for n in table.numa_ids)
        return single_node_hints(table, holds, (
            n for n in table.numa_ids if all(n in numa for numa in placed_on)
            and placed_total + sum(c for numa, c in devices.free.items() if n in numa)
            >= request))
    capacity = capacity_sums(table, devices.registered)
    free = meeting_sums(table, devices.free)
    placed = [_bits(numa) for numa, n in again.items() if numa]
    placed_count = sum(n for numa, n in again.items() if numa)
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if capacity[b] >= request and len(numa) < min_width:
            min_width = len(numa)
        if placed and any(not (s & b) for s in placed):
            continue
        if placed_count + free[b] >= request:
            found.append(i)
    return _preferred(table, found, min_width)
