"""Which CPUs the static CPU manager takes (``cpumanager/cpu_assignment.go``, v1.37.2), rule for
rule.

The CPUs a container gets decide what the next container, the next pod and the next copy of a
shape find free, so the fit answers pick them as the kubelet does, not merely "enough on the
hint's nodes":

* :func:`take_packed` is ``takeByTopologyNUMAPacked``: whole NUMA nodes and sockets first (in
  the order of the memory hierarchy), then whole cores, then single threads, each level
  visited from the fewest free CPUs up (``cpuAccumulator.sort``), so a 2-CPU container takes a
  whole free core on a quiet node rather than a lone thread on the busiest one only when that
  is what the order says; with ``distribute-cpus-across-cores`` (the spread strategy) whole
  cores are skipped and threads are taken socket by socket;
* :func:`take_distributed` is ``takeByTopologyNUMADistributed``
  (``distribute-cpus-across-numa``): the fewest NUMA nodes across which the request splits
  evenly in groups of ``cpuGroupSize``, the remainder where the standard deviation of what stays
  free is smallest.

``staticPolicy.takeByTopology`` and ``allocateCPUs``, which choose between them, are in
:mod:`.policy_static`.

With ``prefer-align-cpus-by-uncorecache``, :func:`take_packed` takes whole uncore (L3) caches
after whole NUMA nodes and sockets, then a part of one that holds the rest
(``takeUncoreCache``). The topology is the kubelet's ``CPUTopology``: every online CPU
(reserved ones included) with its core (the lowest thread id, as the kubelet's
``getUniqueCoreID``), socket, NUMA node and uncore cache.

Where the kubelet's loop never ends — striping a remainder in whole cores over NUMA nodes whose
leftovers are smaller than a core (kubernetes#140730, in every release up to 1.37) — the
engine raises :class:`AdmissionStall` instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from itertools import combinations

from .topology import CpuTopology

PACKED, SPREAD = "packed", "spread"


class CpuAssignmentError(Exception):
    """Not enough CPUs (the kubelet's ``takeByTopology`` error text)."""


class AdmissionStall(Exception):
    """``takeByTopologyNUMADistributed`` would loop for ever: its remainder loop can take no
    whole group from the NUMA nodes it chose, yet the remainder is not 0."""


def _round3(value: float) -> float:
    """Go's ``math.Round(x*1000)/1000`` (half away from zero) for the non-negative values here."""
    return math.floor(value * 1000 + 0.5) / 1000


def standard_deviation(values: list[int]) -> float:
    """``standardDeviation``: of the free CPUs per NUMA node, each step rounded as Go does."""
    mean = _round3(sum(values) / len(values))
    spread = sum((v - mean) * (v - mean) for v in values)
    return _round3(math.sqrt(spread / len(values)))


class _Accumulator:
    """``cpuAccumulator``: the free CPUs still to choose from and what was taken."""

    def __init__(self, topology: CpuTopology, available: Iterable[int], count: int,
                 strategy: str):
        self.topo = topology
        self.free: set[int] = set(available) & topology.numa.keys()
        self.needed = count
        self.result: set[int] = set()
        self.numa_first = topology.num_sockets >= topology.num_numa_nodes
        self.strategy = strategy

    # ---- counting the free CPUs per level --------------------------------------------------

    def _count(self, key: Mapping[int, int], cpus: Iterable[int] | None = None) -> dict[int, int]:
        counts: dict[int, int] = {}
        for cpu in self.free if cpus is None else cpus:
            counts[key[cpu]] = counts.get(key[cpu], 0) + 1
        return counts

    @staticmethod
    def _sorted(counts: Mapping[int, int], ids: Iterable[int]) -> list[int]:
        """``cpuAccumulator.sort``: fewest free CPUs first, then the lower id."""
        return sorted(ids, key=lambda i: (counts[i], i))

    def _within(self, key: Mapping[int, int], parent: Mapping[int, int], parent_id: int,
                counts: Mapping[int, int]) -> list[int]:
        ids = {key[c] for c in self.free if parent[c] == parent_id}
        return self._sorted(counts, ids)

    def sort_numa_nodes(self) -> list[int]:
        numa_counts = self._count(self.topo.numa)
        if self.numa_first:
            return self._sorted(numa_counts, numa_counts)
        socket_counts = self._count(self.topo.socket)
        return [n for s in self._sorted(socket_counts, socket_counts)
                for n in self._within(self.topo.numa, self.topo.socket, s, numa_counts)]

    def sort_sockets(self) -> list[int]:
        socket_counts = self._count(self.topo.socket)
        if not self.numa_first:
            return self._sorted(socket_counts, socket_counts)
        return [s for n in self.sort_numa_nodes()
                for s in self._within(self.topo.socket, self.topo.numa, n, socket_counts)]

    def sort_cores(self) -> list[int]:
        core_counts = self._count(self.topo.core)
        if self.numa_first:
            parents, parent = self.sort_sockets(), self.topo.socket
        else:
            parents, parent = self.sort_numa_nodes(), self.topo.numa
        return [c for p in parents for c in self._within(self.topo.core, parent, p, core_counts)]

    def sort_uncore_caches(self) -> list[int]:
        """``sortAvailableUncoreCaches``: NUMA node by NUMA node in their order, each node's
        uncore caches by the free CPUs in the whole cache, then id (a cache spanning NUMA nodes
        comes once per node, as in the kubelet)."""
        counts = self._count(self.topo.uncore)
        return [u for n in self.sort_numa_nodes()
                for u in self._within(self.topo.uncore, self.topo.numa, n, counts)]

    def sort_cpus(self) -> list[int]:
        """``sortAvailableCPUsPacked`` (core by core) or ``sortAvailableCPUsSpread`` (socket
        by socket), ids ascending inside."""
        spread = self.strategy == SPREAD
        key = self.topo.socket if spread else self.topo.core
        grouped: dict[int, list[int]] = {}  # free CPUs by socket or core, one pass
        for cpu in sorted(self.free):
            grouped.setdefault(key[cpu], []).append(cpu)
        return [c for group in (self.sort_sockets() if spread else self.sort_cores())
                for c in grouped.get(group, ())]

    # ---- taking -------------------------------------------------------------------------------

    def take(self, cpus: Iterable[int]) -> None:
        taken = set(cpus)
        self.result |= taken
        self.free -= taken
        self.needed -= len(taken)

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.free)

    def _take_whole(self, ordered: list[int], cpus_of: Callable[[int], frozenset[int]],
                    size: int | None = None) -> None:
        """Each of ``ordered`` (one level's ids, in the kubelet's order) whose CPUs are all
        free — or, with ``size``, that many of them (``CPUsPerSocket``, ``CPUsPerCore``: the
        kubelet compares with those) — taken whole while the rest needs all of them."""
        whole = [i for i in ordered if (cpus_of(i) <= self.free if size is None
                                        else len(cpus_of(i) & self.free) == size)]
        for item in whole:
            cpus = cpus_of(item)
            if self.needed >= len(cpus):
                self.take(cpus)

    def take_full_numa_nodes(self) -> None:
        self._take_whole(self.sort_numa_nodes(), self.topo.cpus_in_numa)

    def take_full_sockets(self) -> None:
        self._take_whole(self.sort_sockets(), self.topo.cpus_in_socket,
                         self.topo.cpus_per_socket())

    def take_full_cores(self) -> None:
        self._take_whole(self.sort_cores(), self.topo.cpus_in_core, self.topo.cpus_per_core())

    def take_full_uncore(self) -> None:
        """``takeFullUncore``."""
        self._take_whole(self.sort_uncore_caches(), self.topo.cpus_in_uncore)

    def take_partial_uncore(self, uncore: int) -> None:
        """``takePartialUncore``: the cache's free cores with the lowest ids, as many as the
        rest needs, taken only when their free CPUs are exactly the rest (with SMT and an odd
        rest, the last of them left out)."""
        per_core = self.topo.cpus_per_core()
        cores_needed = (self.needed + per_core - 1) // per_core if per_core else self.needed
        cores = set(sorted({self.topo.core[c] for c in self.free
                            if self.topo.uncore[c] == uncore})[:cores_needed])
        cpus = sorted(c for c in self.free if self.topo.core[c] in cores)
        if self.needed % 2 and per_core > 1 and len(cpus) > self.needed:
            cpus = cpus[:-1]
        if len(cpus) == self.needed:
            self.take(cpus)

    def take_uncore_cache(self) -> None:
        """``takeUncoreCache``: for each uncore cache in order, whole caches while the rest
        needs one, then the rest from this one if it holds it."""
        per_uncore = self.topo.cpus_per_uncore()
        for uncore in self.sort_uncore_caches():
            if self.needed >= per_uncore:
                self.take_full_uncore()
            if self.satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.satisfied():
                return

    def take_remaining(self) -> None:
        for cpu in self.sort_cpus():
            self.take((cpu,))
            if self.satisfied():
                return


def take_packed(topology: CpuTopology, available: Iterable[int], count: int,
                strategy: str = PACKED, uncore_cache: bool = False) -> frozenset[int]:
    """``takeByTopologyNUMAPacked`` (``uncore_cache``: ``preferAlignByUncoreCache``);
    :class:`CpuAssignmentError` when too few are free."""
    if count == 0:  # the accumulator is satisfied before it looks at a CPU
        return frozenset()
    acc = _Accumulator(topology, available, count, strategy)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        raise CpuAssignmentError(f"not enough cpus available to satisfy request: requested="
                                 f"{count}, available={len(acc.free)}")
    first, second = ((acc.take_full_numa_nodes, acc.take_full_sockets) if acc.numa_first
                     else (acc.take_full_sockets, acc.take_full_numa_nodes))
    steps: list[Callable[[], None]] = [first, second]
    if uncore_cache:
        steps.append(acc.take_uncore_cache)
    if strategy != SPREAD:
        steps.append(acc.take_full_cores)
    steps.append(acc.take_remaining)
    for step in steps:
        step()
        if acc.satisfied():
            return frozenset(acc.result)
    raise CpuAssignmentError("failed to allocate cpus")


def _numa_range(acc: _Accumulator, group: int) -> tuple[int, int]:
    """``rangeNUMANodesNeededToSatisfy``."""
    numa_nodes = acc.topo.num_numa_nodes
    available_nodes = len({acc.topo.numa[c] for c in acc.free})
    groups = (acc.topo.num_cpus - 1) // group + 1
    per_node = (groups - 1) // numa_nodes + 1
    needed = (acc.needed - 1) // group + 1
    return (needed - 1) // per_node + 1, min(needed, available_nodes)


def _remainder_choice(free_after: dict[int, int], candidates: list[int], remainder: int,
                      group: int) -> tuple[float, tuple[int, ...] | None]:
    """The subset of ``candidates`` (widest first) whose taking the remainder in groups leaves
    the smallest standard deviation of free CPUs."""
    best: tuple[float, tuple[int, ...] | None] = (math.inf, None)
    for size in range(len(candidates), 0, -1):
        for subset in combinations(candidates, size):
            left = dict(free_after)
            if sum(left[n] for n in subset) < remainder:
                continue
            rest = remainder
            while rest > 0:
                progressed = False
                for numa in subset:
                    if rest == 0:
                        break
                    if left[numa] < group:
                        continue
                    left[numa] -= group
                    rest -= group
                    progressed = True
                if not progressed:
                    raise AdmissionStall(f"{remainder} CPUs to stripe in groups of {group} "
                                         f"over NUMA nodes {list(subset)}, which hold "
                                         f"{sum(free_after[n] for n in subset)} but not in "
                                         "whole groups")
            balance = standard_deviation(list(left.values()))
            if balance < best[0]:
                best = (balance, subset)
    return best


def _distribution(acc: _Accumulator, combo: tuple[int, ...], count: int, group: int,
                  align_by_socket: bool) -> int:
    share = (count // len(combo) // group) * group
    if align_by_socket:
        for numa in combo:
            share = min(share, len(acc.topo.cpus_in_numa(numa) & acc.free) // group * group)
    return share


def take_distributed(topology: CpuTopology, available: Iterable[int], count: int,
                     group: int = 1, strategy: str = PACKED,
                     align_by_socket: bool = False) -> frozenset[int]:
    """``takeByTopologyNUMADistributed`` (KEP-2902)."""
    if count % group:
        return take_packed(topology, available, count, strategy)
    acc = _Accumulator(topology, available, count, strategy)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        raise CpuAssignmentError(f"not enough cpus available to satisfy request: requested="
                                 f"{count}, available={len(acc.free)}")
    numas = acc.sort_numa_nodes()
    low, high = _numa_range(acc, group)
    free_on = {n: len(topology.cpus_in_numa(n) & acc.free) for n in numas}
    for size in range(low, high + 1):
        best_balance, best_remainder, best_combo, best_same_socket = math.inf, None, None, False
        for combo in combinations(numas, size):
            if best_balance == 0 and (not align_by_socket or best_same_socket):
                break
            if sum(free_on[n] for n in combo) < count:
                continue
            if sum(free_on[n] // group for n in combo) * group < count:
                continue
            share = _distribution(acc, combo, count, group, align_by_socket)
            if any(free_on[n] < share for n in combo):
                continue
            after = dict(free_on)
            for numa in combo:
                after[numa] -= share
            remainder = count - share * len(combo)
            local: tuple[float, tuple[int, ...] | None] = (math.inf, None)
            if remainder == 0:
                local = (standard_deviation(list(after.values())), None)
            else:
                local = _remainder_choice(after, [n for n in combo if after[n] >= group],
                                          remainder, group)
            same_socket = align_by_socket and len(topology.sockets_of(combo)) == 1
            better = local[0] < best_balance
            if align_by_socket and same_socket != best_same_socket:
                better = same_socket
            if better:
                best_balance, best_remainder, best_combo = local[0], local[1], combo
                best_same_socket = same_socket if align_by_socket else best_same_socket
        if best_combo is None:
            continue
        share = (count // len(best_combo) // group) * group
        for numa in best_combo:
            share = min(share, len(topology.cpus_in_numa(numa) & acc.free) // group * group)
        for numa in best_combo:
            acc.take(take_packed(topology, topology.cpus_in_numa(numa) & acc.free, share,
                                 strategy))
        remainder = count - share * len(best_combo)
        while remainder > 0:
            if not best_remainder:  # an align-by-socket pick with no remainder set
                raise AdmissionStall(f"{remainder} CPUs left over NUMA nodes "
                                     f"{list(best_combo)} with none to take them from")
            progressed = False
            for numa in best_remainder:
                if remainder == 0:
                    break
                pool = topology.cpus_in_numa(numa) & acc.free
                if len(pool) < group:
                    continue
                acc.take(take_packed(topology, pool, group, strategy))
                remainder -= group
                progressed = True
            if not progressed:
                raise AdmissionStall(f"{remainder} CPUs left over NUMA nodes "
                                     f"{list(best_remainder)} in groups of {group}")
        if acc.needed != 0:
            raise CpuAssignmentError(f"accounting error, not enough CPUs allocated, "
                                     f"remaining: {acc.needed}")
        return frozenset(acc.result)
    return take_packed(topology, available, count, strategy)
