"""NUMA sets as bit masks (``topologymanager/bitmask/bitmask.go``, v1.37.2), and sums over them.

:func:`mask_table` lists every NUMA set narrowest first, then by ids (``IterateBitMasks``),
once per set of NUMA ids; the hint providers sum free and allocatable amounts over every mask
of it at once (:func:`node_sums`, :func:`meeting_sums`, kept while their inputs stay the same:
:func:`kept_sums`) and turn the masks that hold a request into hints
(:func:`preferred_hints`: preferred when as narrow as the capacity allows; for
``single-numa-node``, :func:`single_node_hints`). The merger's reachable intersections of
long hint lists are taken as bitsets (:func:`intersections`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from .topology_manager import NumaSet, TopologyHint

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
    bits = tuple(mask_bits(s) for s in sets)
    return MaskTable(tuple(ordered), sets, bits, complete, tuple(sorted(bits)))


def mask_bits(numa: Iterable[int]) -> int:
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
    sums = [0] * (mask_bits(table.numa_ids) + 1)
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
        items = [(mask_bits(numa), c) for numa, c in counts.items()]
        return {b: sum(c for s, c in items if s & b) for b in table.bits}
    full = mask_bits(table.numa_ids)
    within = [0] * (full + 1)
    total = 0
    for numa, count in counts.items():
        key = mask_bits(numa) & full
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


def preferred_hints(table: MaskTable, found: list[int], min_width: int) -> list[TopologyHint]:
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


# Below this many pairs (or over this many bit positions) the intersections are taken pair by
# pair; above, as a bitset (8 NUMA nodes' 255 masks by 200: a third of the time).
PAIRWISE_INTERSECTIONS = 4096
BITSET_POSITIONS_BITS = 10


def intersections(reachable: Iterable[int], masks: Iterable[int], full: int) -> set[int]:
    """Every ``r & m`` of a mask in ``reachable`` and one in ``masks`` (both within ``full``).

    Taken many at once, ``reachable`` is one integer with bit ``p`` set for mask ``p``, and a
    mask's bits are applied one NUMA node at a time, the masks agreeing on the nodes so far
    sharing the work: keeping node ``b`` leaves the set as it is, clearing it moves every
    reachable mask with bit ``b`` down by ``1 << b``."""
    reachable, masks = list(reachable), list(masks)
    positions = full.bit_length()
    if len(reachable) * len(masks) < PAIRWISE_INTERSECTIONS or positions > BITSET_POSITIONS_BITS:
        return {r & m for r in reachable for m in masks}
    with_bit = _with_bit(positions)
    layer = [(sum(1 << r for r in set(reachable)), masks)]
    for b in range(positions):
        if not full >> b & 1:
            continue
        kept, cleared = with_bit[b], 1 << b
        following = []
        for bits, group in layer:
            on = [m for m in group if m >> b & 1]
            off = [m for m in group if not m >> b & 1]
            if on:
                following.append((bits, on))
            if off:
                following.append(((bits & ~kept) | ((bits & kept) >> cleared), off))
        layer = following
    found = 0
    for bits, _ in layer:
        found |= bits
    return {p for p in range(1 << positions) if found >> p & 1}


@functools.cache
def _with_bit(positions: int) -> tuple[int, ...]:
    """Per NUMA node ``b``, the positions (masks) with bit ``b``, as one integer."""
    return tuple(sum(1 << p for p in range(1 << positions) if p >> b & 1)
                 for b in range(positions))
