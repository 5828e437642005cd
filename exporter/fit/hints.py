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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from .nodestate import CpuState, DeviceState, MemoryNode, NumaSet


@dataclass(frozen=True)
class TopologyHint:
    """A NUMA set (``None``: any) and whether it is as narrow as the capacity allows."""

    affinity: NumaSet | None
    preferred: bool


Hints = list[TopologyHint] | None  # None: don't care; []: cannot be satisfied


def masks(numa_ids: Sequence[int]) -> Iterator[NumaSet]:
    """Every non-empty set of ``numa_ids``, narrowest first (``bitmask.IterateBitMasks``)."""
    ordered = sorted(numa_ids)
    for size in range(1, len(ordered) + 1):
        for chosen in combinations(ordered, size):
            yield frozenset(chosen)


def _preferred(candidates: list[NumaSet], min_width: int) -> list[TopologyHint]:
    return [TopologyHint(mask, len(mask) == min_width) for mask in candidates]


def cpu_hints(cpu: CpuState, request: int, reusable: frozenset[int] = frozenset()) -> Hints:
    """``generateCPUTopologyHints`` over the NUMA nodes that have CPUs. A mask is a hint when
    it holds every reusable CPU of the pod and reusable + free CPUs in it reach the request."""
    if request <= 0:
        return None
    nodes = [n for n, cpus in cpu.online.items() if cpus]
    online = {n: len(cpu.online[n]) for n in nodes}
    free = cpu.free_per_node()
    reusable_nodes = {cpu.cpu_numa.get(c) for c in reusable}
    min_width = len(nodes)
    found: list[NumaSet] = []
    for mask in masks(nodes):
        if sum(online[n] for n in mask) >= request and len(mask) < min_width:
            min_width = len(mask)
        if not reusable_nodes <= mask:
            continue
        if len(reusable) + sum(free.get(n, 0) for n in mask) >= request:
            found.append(mask)
    return _preferred(found, min_width)


def memory_hints(memory: Mapping[int, MemoryNode], request: Mapping[str, int],
                 reusable: Mapping[NumaSet, Mapping[str, int]] | None = None
                 ) -> dict[str, list[TopologyHint]] | None:
    """``calculateHints``: for every mask with enough *allocatable* of each requested type
    (the narrowest such is the minimum width), skip a single node that is part of a
    multi-NUMA group, and a multi-node mask whose members with assignments are single-node or
    in a group other than exactly this mask; then require free (+ this pod's reusable memory on
    the same mask) for every type. All types get the same hints. ``None`` (don't care) when
    nothing is asked — and also when no mask qualifies: the kubelet returns an empty map then,
    which the merger reads as "don't care" (allocation fails later)."""
    wanted = {r: a for r, a in request.items() if a > 0}
    if not wanted:
        return None
    nodes = sorted(memory)
    min_width = len(nodes)
    found: list[NumaSet] = []
    for mask in masks(nodes):
        if any(sum(memory[n].allocatable.get(r, 0) for n in mask) < a for r, a in wanted.items()):
            continue
        min_width = min(min_width, len(mask))
        if len(mask) == 1:
            if len(memory[next(iter(mask))].group) > 1:
                continue
        elif any(memory[n].assignments > 0 and (len(memory[n].group) == 1
                                                 or memory[n].group != mask) for n in mask):
            continue
        again = (reusable or {}).get(mask, {})
        if all(sum(memory[n].free.get(r, 0) for n in mask) + again.get(r, 0) >= a
               for r, a in wanted.items()):
            found.append(mask)
    if not found:
        return None
    hints = _preferred(found, min_width)
    return {r: list(hints) for r in wanted}


def device_hints(numa_ids: Sequence[int], devices: DeviceState, request: int,
                 reusable: Mapping[NumaSet, int] | None = None) -> Hints:
    """``generateDeviceTopologyHints``. ``None`` for a resource none of whose devices has
    topology; ``[]`` when fewer devices are free (plus reusable) than requested node-wide. A
    device counts for a mask its NUMA nodes intersect; a topology-less one for none; every
    reusable device with topology must meet the mask."""
    if request <= 0 or not devices.topology_aware():
        return None
    again = {numa: n for numa, n in (reusable or {}).items() if n > 0}
    if devices.free_total() + sum(again.values()) < request:
        return []
    min_width = len(numa_ids)
    found: list[NumaSet] = []
    for mask in masks(numa_ids):
        capacity = sum(n for numa, n in devices.registered.items() if numa & mask)
        if capacity >= request and len(mask) < min_width:
            min_width = len(mask)
        placed = {numa: n for numa, n in again.items() if numa}
        if any(not (numa & mask) for numa in placed):
            continue
        matching = sum(placed.values()) + sum(n for numa, n in devices.free.items()
                                              if numa & mask)
        if matching >= request:
            found.append(mask)
    return _preferred(found, min_width)
