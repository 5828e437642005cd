"""The Topology Manager's hint merger (``topologymanager/policy.go``, v1.37.2), as pure
functions.

:class:`Policy` is what each ``policy_*`` module implements. :func:`provider_lists` reads each
provider's answer as ``filterProvidersHints`` does: no map or a resource with ``None`` is one
preferred "any" hint; an empty list is one non-preferred "any" hint (it cannot be satisfied).
:func:`merge` ANDs every permutation (one hint per resource); a merged hint is preferred only if
every hint is preferred *and* every non-``None`` mask is the same set. The best merged hint
(``HintMerger.compare``): preferred beats not; among preferred ones the narrowest, then the lowest
NUMA ids (``bitmask.IsNarrowerThan``), or with ``prefer-closest-numa-nodes`` the smallest average
distance between equally wide sets (``NUMAInfo.Closest``). Among non-preferred ones the kubelet does
*not* simply take the narrowest: it steers towards ``maxOfMinAffinityCounts`` (the largest, over
resources, of each resource's narrowest hint), keeping a candidate of that width over narrower or
wider ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import product
from typing import Protocol

from .bitmask import intersections
from .numa_info import Distances, average_distance
from .topology_manager import NumaSet, ProviderAnswer, TopologyHint


class Policy(Protocol):
    """``Policy``: a Topology Manager policy, by its name (policy_*.py)."""

    name: str

    def merge(self, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
              distances: Distances | None = None) -> tuple[TopologyHint, bool]:
        """(best hint, admit) from the hint providers' answers."""
        ...

def provider_lists(answers: Sequence[ProviderAnswer]) -> list[list[TopologyHint]]:
    """``filterProvidersHints``: one list of hints per (provider, resource)."""
    lists: list[list[TopologyHint]] = []
    for answer in answers:
        if not answer:
            lists.append([TopologyHint(None, True)])
            continue
        for hints in answer.values():
            if hints is None:
                lists.append([TopologyHint(None, True)])
            elif not hints:
                lists.append([TopologyHint(None, False)])
            else:
                lists.append(list(hints))
    return lists


@lru_cache(maxsize=1024)  # a merge asks it for every hint of every list
def _mask_value(mask: NumaSet) -> int:
    return sum(1 << n for n in mask)


def _better_mask(current: TopologyHint, candidate: TopologyHint,
                 distances: Distances | None) -> TopologyHint:
    """``compareNUMAAffinityMasks``: narrower, then (closest option) nearer, then lower ids."""
    cur, cand = current.affinity or frozenset(), candidate.affinity or frozenset()
    if cur == cand:
        return current
    if len(cand) != len(cur):
        return candidate if len(cand) < len(cur) else current
    if distances is not None:
        a, b = average_distance(cur, distances), average_distance(cand, distances)
        if a != b:
            return candidate if b < a else current
    return candidate if _mask_value(cand) < _mask_value(cur) else current


def _best_non_preferred_count(lists: list[list[TopologyHint]]) -> int:
    """``maxOfMinAffinityCounts``."""
    best = 0
    for hints in lists:
        widths = [len(h.affinity) for h in hints if h.affinity is not None]
        if widths:
            best = max(best, min(widths))
    return best


def _compare(current: TopologyHint | None, candidate: TopologyHint, best_count: int,
             distances: Distances | None) -> TopologyHint | None:
    """``HintMerger.compare``."""
    cand = len(candidate.affinity or ())
    if cand == 0:
        return current
    if current is None:
        return candidate
    if candidate.preferred != current.preferred:
        return candidate if candidate.preferred else current
    if current.preferred:
        return _better_mask(current, candidate, distances)
    cur = len(current.affinity or ())
    if cur > best_count:
        return _better_mask(current, candidate, distances)
    if cur == best_count:
        return current if cand != best_count else _better_mask(current, candidate, distances)
    if cand > best_count:
        return current
    if cand == best_count:
        return candidate
    if cand > cur:
        return candidate
    if cand < cur:
        return current
    return _better_mask(current, candidate, distances)


def merge_permutation(everything: NumaSet, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """AND of the masks; preferred only if all are preferred and all masks are equal."""
    preferred = True
    merged = everything
    first: NumaSet | None = None
    for hint in permutation:
        if hint.affinity is not None:
            if first is None:
                first = hint.affinity
            elif hint.affinity != first:
                preferred = False
            merged = merged & hint.affinity
        if not hint.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


def merge_by_permutation(lists: list[list[TopologyHint]], numa_ids: Sequence[int],
                         distances: Distances | None = None) -> TopologyHint:
    """``HintMerger.Merge`` literally: every permutation, folded with ``compare``. Its cost is
    the product of the list lengths (255 hints per resource on 8 NUMA nodes), so
    :func:`merge` computes the same answer another way; this one stays as its reference."""
    everything = frozenset(numa_ids)
    best_count = _best_non_preferred_count(lists)
    best: TopologyHint | None = None
    for permutation in product(*lists):
        best = _compare(best, merge_permutation(everything, permutation), best_count, distances)
    return best if best is not None else TopologyHint(everything, False)


def _key(mask: int, preferred: bool, best_count: int, distances: Distances | None,
         ids: dict[int, NumaSet]) -> tuple[int, int, int, float, int]:
    """``compare`` is a total preorder: preferred first; among preferred the narrowest;
    among non-preferred the width ``best_count``, then narrower ones from widest down, then
    wider ones from narrowest up; then the average distance (closest option), then the
    lowest NUMA ids."""
    width = mask.bit_count()
    if preferred:
        rank = (0, width)
    elif width == best_count:
        rank = (1, 0)
    elif width < best_count:
        rank = (2, -width)
    else:
        rank = (3, width)
    distance = average_distance(ids[mask], distances) if distances is not None else 0.0
    return (rank[0], rank[1], 0, distance, mask)


# Below this many hints a merge costs less than its key: long lists (8 NUMA nodes give up to
# 255 a resource) come back unchanged from one refresh or copy to the next, and are remembered.
REMEMBERED_FROM_HINTS = 128


def merge(lists: list[list[TopologyHint]], numa_ids: Sequence[int],
          distances: Distances | None = None) -> TopologyHint:
    """``HintMerger.Merge`` (:func:`merge_lists`), the long ones remembered."""
    if sum(len(hints) for hints in lists) < REMEMBERED_FROM_HINTS:
        return merge_lists(lists, numa_ids, distances)
    rows = None if distances is None else tuple(
        (n, tuple(sorted(row.items()))) for n, row in sorted(distances.items()))
    return _remembered(tuple(tuple(hints) for hints in lists), tuple(numa_ids), rows)


@lru_cache(maxsize=64)
def _remembered(lists: tuple[tuple[TopologyHint, ...], ...], numa_ids: tuple[int, ...],
                distances: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] | None
                ) -> TopologyHint:
    return merge_lists([list(hints) for hints in lists], numa_ids,
                       None if distances is None else {n: dict(row) for n, row in distances})


def merge_lists(lists: list[list[TopologyHint]], numa_ids: Sequence[int],
                distances: Distances | None = None) -> TopologyHint:
    """``HintMerger.Merge`` without enumerating permutations: a preferred outcome is a set M
    every list can agree on (a preferred hint of exactly M, or a preferred "any"); otherwise
    the reachable intersections are built list by list (at most 2^n of them). Then the best
    by ``compare``'s order. Every NUMA node, not preferred, when nothing is reachable."""
    everything = frozenset(numa_ids)
    full = _mask_value(everything)
    best_count = _best_non_preferred_count(lists)
    ids: dict[int, NumaSet] = {}

    def as_int(mask: NumaSet | None) -> int:
        return full if mask is None else _mask_value(mask) & full

    ids[full] = everything
    if any(not hints for hints in lists):
        return TopologyHint(everything, False)
    outcomes: set[tuple[int, bool]] = set()
    any_ok = [any(h.affinity is None and h.preferred for h in hints) for hints in lists]
    preferred_sets = [{as_int(h.affinity) for h in hints if h.affinity is not None and h.preferred}
                      for hints in lists]
    if all(any_ok):
        outcomes.add((full, True))
    for candidate in set().union(*preferred_sets) if preferred_sets else set():
        if candidate and all(candidate in p or ok for p, ok in zip(preferred_sets, any_ok)):
            outcomes.add((candidate, True))
    if not outcomes:
        reachable = {full}
        for hints in lists:
            reachable = intersections(reachable, {as_int(h.affinity) for h in hints}, full)
            reachable.discard(0)
            if not reachable:
                break
        outcomes = {(mask, False) for mask in reachable}
    if not outcomes:
        return TopologyHint(everything, False)
    for mask, _ in outcomes:
        if mask not in ids:
            ids[mask] = frozenset(n for n in everything if mask >> n & 1)
    mask, preferred = min(outcomes, key=lambda o: _key(o[0], o[1], best_count, distances, ids))
    return TopologyHint(ids[mask], preferred)
