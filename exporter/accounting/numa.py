"""NUMA attribution: group labels, sysfs ids as the accounting asks for them, alignment and
the apportioning of memory that spans NUMA nodes (SPEC section 2). Pure functions, no I/O.

Group labels and ``"unknown"`` are plain strings, used as ``numa_node`` label values directly.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

from ..issues import MAX_NUMA_IDS, IssueKind, Issues
from ..model import NumaIds, Topology

# known NUMA ids, sorted; and the data issues (kind, count) met resolving them
Resolved = tuple[tuple[int, ...], tuple[tuple[IssueKind, int], ...]]

UNKNOWN = "unknown"
CPU_RESOURCE = "cpu"


@functools.lru_cache(maxsize=1024)
def group_label(numa_ids: tuple[int, ...]) -> str:
    """``()`` -> ``"unknown"``, ``(0,)`` -> ``"0"``, ``(0, 1)`` -> ``"0,1"`` (ids sorted).
    Cached: one string per group for every row and key that names it, not one per row."""
    if not numa_ids:
        return UNKNOWN
    return ",".join(str(i) for i in numa_ids)


def label_ids(label: str) -> tuple[int, ...]:
    """Inverse of :func:`group_label`; ``"unknown"`` -> ``()``."""
    if label == UNKNOWN:
        return ()
    return tuple(int(part) for part in label.split(","))


class TopologyView:
    """The sysfs topology as the accounting asks it: CPU -> NUMA label, NUMA ids -> known ids."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.known = frozenset(topology.numa_nodes)
        self.cpu_label = {cpu: str(numa) for cpu, numa in topology.cpu_to_numa.items()}
        self._resolved: dict[tuple[int, ...], Resolved] = {}

    def resolve(self, numa_ids: NumaIds) -> Resolved:
        """(sorted known ids, issue counts by kind) for reported ids; unknown and negative ids
        are dropped, and an item naming more than ``MAX_NUMA_IDS`` ids keeps none (its
        locality is unknown). Linear in the number of ids."""
        if not numa_ids:
            return (), ()
        cached = self._resolved.get(numa_ids)
        if cached is not None:
            return cached
        if len(numa_ids) > MAX_NUMA_IDS:
            return (), ((IssueKind.TOO_MANY_NUMA_IDS, 1),)
        kept = self.known.intersection(numa_ids)
        problems: list[tuple[IssueKind, int]] = []
        if len(kept) < len(numa_ids):
            negative = sum(1 for numa_id in numa_ids if numa_id < 0)
            unknown = sum(1 for numa_id in numa_ids if numa_id >= 0 and numa_id not in kept)
            if negative:
                problems.append((IssueKind.NEGATIVE_NUMA_ID, negative))
            if unknown:
                problems.append((IssueKind.UNKNOWN_NUMA_ID, unknown))
        result = (tuple(sorted(kept)), tuple(problems))
        if len(numa_ids) <= _CACHED_IDS:
            if len(self._resolved) > 4096:  # hostile data: many distinct id lists
                self._resolved = {}
            self._resolved[numa_ids] = result
        return result

    def ids(self, numa_ids: NumaIds, issues: Issues, what: str) -> tuple[int, ...]:
        kept, problems = self.resolve(numa_ids)
        for kind, count in problems:
            issues.add(kind, f"{what} names NUMA ids {_some(numa_ids or ())}; sysfs knows "
                             f"{_some(sorted(self.known))}", count)
        return kept


_CACHED_IDS = 64  # longer id lists are resolved each time, not kept


def _some(ids: Sequence[int], shown: int = 16) -> str:
    """A list of ids for a message, shortened: a hostile item may name thousands."""
    if len(ids) <= shown:
        return str(list(ids))
    return f"[{', '.join(map(str, ids[:shown]))}, ... ({len(ids)} ids)]"


def min_numa_nodes(required: frozenset[int] | set[int], device_sets: list[frozenset[int]]) -> int:
    """Size of the smallest NUMA set containing ``required`` and touching every device set.

    This is the alignment rule: CPUs and memory fix the nodes a container already uses; each
    device only needs one of its local nodes to be among them. A minimum hitting set, found by
    branch and bound: branch on the nodes of the smallest set not yet hit, prune with a lower
    bound (sets that share no node each need their own). Real containers settle in a handful of
    steps; the search is capped so hostile data cannot stall a refresh, and past the cap the
    best cover found so far (at worst a greedy one) is returned.
    """
    chosen = set(required)
    residual = {s for s in device_sets if s and not (s & chosen)}
    if not residual:
        return len(chosen)
    ordered = sorted(residual, key=len)
    if len(ordered) > _EXACT_SETS:  # only a sysfs with very many NUMA nodes allows this many
        return len(chosen) + _greedy_cover(ordered)
    minimal: list[frozenset[int]] = []  # hitting a set hits its supersets too
    for candidate in ordered:
        if not any(kept <= candidate for kept in minimal):
            minimal.append(candidate)
    best = [_greedy_cover(minimal)]
    _search(minimal, 0, best, [_SEARCH_BUDGET])
    return len(chosen) + best[0]


def _search(sets: list[frozenset[int]], depth: int, best: list[int], budget: list[int]) -> None:
    """One step of :func:`min_numa_nodes`' branch and bound (a function of its own, not a
    recursive closure: that would be a reference cycle left for the garbage collector)."""
    if not sets:
        best[0] = min(best[0], depth)
        return
    if depth + _disjoint_count(sets) >= best[0] or budget[0] <= 0:
        return
    budget[0] -= len(sets)  # the work of one step
    smallest = min(sets, key=len)
    for node in sorted(smallest):
        _search([s for s in sets if node not in s], depth + 1, best, budget)


_SEARCH_BUDGET = 320_000  # set operations; a step costs one per set left
_EXACT_SETS = 1024  # distinct device NUMA sets beyond which the greedy cover is the answer


def _greedy_cover(sets: list[frozenset[int]]) -> int:
    """An upper bound: repeatedly take the node in the most unhit sets."""
    remaining = list(sets)
    size = 0
    while remaining:
        counts = Counter(node for s in remaining for node in s)
        best = min(counts, key=lambda node: (-counts[node], node))
        remaining = [s for s in remaining if best not in s]
        size += 1
    return size


def _disjoint_count(sets: list[frozenset[int]]) -> int:
    """A lower bound: sets that share no node (picked greedily, smallest first) each need one."""
    used: set[int] = set()
    count = 0
    for s in sorted(sets, key=len):
        if not (s & used):
            used |= s
            count += 1
    return count


def apportion_group_memory(
    allocatable: dict[int, int],
    single: dict[int, int],
    groups: dict[tuple[int, ...], int],
) -> dict[int, int]:
    """Estimate each NUMA node's share of memory blocks that span several nodes.

    The memory manager does not say how a multi-node block is split. We fill each member
    node's allocatable left after the single-node allocations, nodes in ascending id order and
    groups in ascending order of their id lists; what does not fit stays on the highest member.
    Returns the total (single + apportioned) per node.
    """
    left = {node: max(0, allocatable.get(node, 0) - single.get(node, 0)) for node in allocatable}
    total = dict(single)
    for ids in sorted(groups):
        amount = groups[ids]
        for node in ids:
            if amount <= 0:
                break
            take = min(amount, left.get(node, 0))
            if take:
                left[node] -= take
                total[node] = total.get(node, 0) + take
                amount -= take
        if amount > 0:
            top = ids[-1]
            total[top] = total.get(top, 0) + amount
    return total
