"""The resource managers' ``Allocate``, on a :class:`NodeState`: a new state, or the error the
kubelet would give. Pure functions.

* devices (``devicemanager`` ``devicesToAllocate``): reusable devices of the pod first, then
  devices meeting the hint, then those with topology outside it, then those without
  (``filterByAffinity``); fewer free than requested is an error
  (``UnexpectedAdmissionError``); a resource no device plugin registered is left to the
  resource-fit predicate (``OutOf<resource>``).
* CPUs (``cpumanager/policy_static.go`` ``Allocate``, ``allocateCPUs``): ``full-pcpus-only``
  checks first (``SMTAlignmentError``), then CPUs on the hint's NUMA nodes, then any, each
  picked as ``takeByTopology`` picks them (:mod:`exporter.fit.kubelet.cpumanager.cpu_assignment`):
  which CPUs a container gets decides what the next container and the next pod find free.
* memory (``memorymanager/policy_static.go`` ``Allocate``): no hint means the manager's own
  best hint; a hint that does not hold the request is extended to the best hint containing it
  (one not preferred where the hint was is an error); a hint violating the group rule fails;
  each NUMA node of the hint is filled in id order, and every node of it joins the group
  ``Cells`` = the hint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..managers_state import CpuState, DeviceState, MemoryNode, NodeState, NumaSet
from ..memorymanager.policy_static import memory_hints
from ..topologymanager.bitmask import (
    kept_sums,
    mask_bits,
    mask_table,
    node_sums,
    preferred_hints,
    single_node_hints,
)
from ..topologymanager.topology_manager import Hints, TopologyHint
from .cpu_assignment import CpuAssignmentError, CpuOptions, allocate_cpus

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class Failure:
    """An allocation the kubelet would refuse: the admission reason, the resource, why."""

    reason: str
    resource: str
    message: str


# ---- devices ---------------------------------------------------------------------------------

def allocate_devices(devices: DeviceState, request: int, hint: NumaSet | None,
                     reusable: Mapping[NumaSet, int]) -> tuple[DeviceState, dict[NumaSet, int],
                                                                 dict[NumaSet, int]] | None:
    """(new state, devices taken from the free pool per NUMA set, reusable ones taken);
    ``None`` when fewer are free than requested."""
    need = request
    from_reuse: dict[NumaSet, int] = {}
    for numa in sorted(reusable, key=_set_order):
        take = min(need, reusable[numa])
        if take > 0:
            from_reuse[numa] = take
            need -= take
    if need > devices.free_total():
        return None
    free = dict(devices.free)
    taken: dict[NumaSet, int] = {}
    if need:
        def order(numa: NumaSet) -> tuple[int, int, tuple[int, ...]]:
            # filterByAffinity: devices meeting the hint (those inside it first), then those
            # with topology outside it, then those without topology
            aligned = hint is None or bool(numa & hint)
            inside = hint is not None and bool(numa) and numa <= hint
            rank = 0 if inside else 1 if aligned and numa else 2 if numa else 3
            return (rank, len(numa), tuple(sorted(numa)))
        for numa in sorted(free, key=order):
            take = min(need, free[numa])
            if take > 0:
                taken[numa] = take
                free[numa] -= take
                need -= take
            if not need:
                break
    held = devices.held_total() + sum(taken.values())
    return replace(devices, free=free, held=held), taken, from_reuse


def _set_order(numa: NumaSet) -> tuple[int, tuple[int, ...]]:
    return (len(numa), tuple(sorted(numa)))


# ---- CPUs ------------------------------------------------------------------------------------

def smt_check(cpu: CpuState, request: int) -> Failure | None:
    """``full-pcpus-only``: a request not a multiple of the threads per core, or more than the
    free physical CPUs node-wide."""
    threads = max(cpu.threads_per_core, 1)
    if request % threads:
        return Failure(SMT_ALIGNMENT_ERROR, "cpu",
                       f"{request} CPUs is not a multiple of the {threads} threads per core")
    available = cpu.free_physical()
    if request > available:
        return Failure(SMT_ALIGNMENT_ERROR, "cpu",
                       f"{request} CPUs asked, {available} free physical CPUs on the node")
    return None


def pick_cpus(cpu: CpuState, request: int, hint: NumaSet | None,
              reusable: frozenset[int], options: CpuOptions | None = None
              ) -> frozenset[int] | None:
    """Which CPUs ``allocateCPUs`` takes from the free and this pod's reusable CPUs, as
    ``takeByTopology`` picks them (:mod:`exporter.fit.kubelet.cpumanager.cpu_assignment`);
    ``None``: not enough."""
    allocatable = cpu.free | reusable
    if len(allocatable) < request:
        return None
    try:
        return allocate_cpus(cpu.cpu_topology(), allocatable, request, hint,
                             options or CpuOptions())
    except CpuAssignmentError:
        return None


# ---- memory ----------------------------------------------------------------------------------

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
        calculated = memory_hints(memory, request, reusable) or {}
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


def with_cpus_taken(state: NodeState, cpus: frozenset[int]) -> NodeState:
    assert state.cpu is not None
    return replace(state, cpu=replace(state.cpu, free=state.cpu.free - cpus))


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
    pinned = mask_bits(n for n in (cpu.cpu_numa.get(c) for c in reusable) if n is not None)
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if online[b] >= request and len(numa) < min_width:
            min_width = len(numa)
        if pinned & ~b:
            continue
        if len(reusable) + free[b] >= request:
            found.append(i)
    return preferred_hints(table, found, min_width)
