"""The CPU manager's ``static`` policy (``cpumanager/policy_static.go``, v1.37.2).

* hints (``GetTopologyHints``, :func:`cpu_hints`: ``generateCPUTopologyHints``) over the NUMA
  nodes that have CPUs: a mask holding every reusable CPU of the pod whose free and reusable
  CPUs reach the request, preferred when as narrow as the fewest nodes whose online CPUs could;
* ``Allocate``: ``full-pcpus-only`` checks first (:func:`smt_check`, ``SMTAlignmentError``),
  then ``allocateCPUs`` (:func:`allocate_cpus`): CPUs on the hint's NUMA nodes (their sockets
  with ``align-by-socket``), then any, each picked as ``takeByTopology`` picks them
  (:mod:`.cpu_assignment`): which CPUs a container gets decides what the next container and
  the next pod find free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..admission.errors import Failure
from ..managers_state import ManagersState
from ..topologymanager.bitmask import (
    MaskTable,
    kept_sums,
    mask_bits,
    mask_table,
    node_sums,
    preferred_hints,
    single_node_hints,
)
from ..topologymanager.topology_manager import Hints, NumaSet
from .cpu_assignment import PACKED, SPREAD, CpuAssignmentError, take_distributed, take_packed
from .policy_options import CpuOptions
from .state import CpuManagerState
from .topology import CpuTopology

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"


def smt_check(cpu: CpuManagerState, request: int) -> Failure | None:
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


def pick_cpus(cpu: CpuManagerState, request: int, hint: NumaSet | None,
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


def with_cpus_taken(state: ManagersState, cpus: frozenset[int]) -> ManagersState:
    assert state.cpu is not None
    return replace(state, cpu=replace(state.cpu, free=state.cpu.free - cpus))


def cpu_hints(cpu: CpuManagerState, request: int, reusable: frozenset[int] = frozenset(),
              single: bool = False, align_by_socket: bool = False) -> Hints:
    """``generateCPUTopologyHints`` over the NUMA nodes that have CPUs. A mask is a hint when
    it holds every reusable CPU of the pod and reusable + free CPUs in it reach the request.
    ``single``: only the single-node hints (see :func:`single_node_hints`; the kubelet refuses
    ``align-by-socket`` with ``single-numa-node``). ``align_by_socket``: a hint spanning as
    few sockets as the narrowest set needs is preferred too (``isHintSocketAligned``)."""
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
    if align_by_socket:
        return _socket_aligned(cpu.cpu_topology(), table, found, min_width)
    return preferred_hints(table, found, min_width)


def _socket_aligned(topology: CpuTopology, table: MaskTable, found: list[int], min_width: int
                    ) -> Hints:
    """``generateCPUTopologyHints`` with ``align-by-socket``: preferred as narrow as
    ``min_width``, or spanning as few sockets as ``ceil(minAffinitySize / (NumNUMANodes /
    NumSockets))`` (``isHintSocketAligned``)."""
    per_socket = topology.numa_nodes_per_socket()
    fewest = (min_width + per_socket - 1) // per_socket if per_socket else -1
    preferred, other = table.hints
    return [preferred[i] if len(table.sets[i]) == min_width
            or len(topology.sockets_of(table.sets[i])) == fewest else other[i] for i in found]


def take_by_topology(topology: CpuTopology, available: Iterable[int], count: int,
                     options: CpuOptions) -> frozenset[int]:
    """``staticPolicy.takeByTopology``: packed, or distributed across NUMA nodes."""
    strategy = SPREAD if options.distribute_across_cores else PACKED
    if options.distribute_across_numa:
        group = topology.cpus_per_core() if options.full_pcpus_only else 1
        return take_distributed(topology, available, count, max(group, 1), strategy,
                                options.distribute_by_socket())
    return take_packed(topology, available, count, strategy,
                       options.prefer_align_by_uncore_cache)


def allocate_cpus(topology: CpuTopology, allocatable: frozenset[int], count: int,
                  hint: frozenset[int] | None, options: CpuOptions) -> frozenset[int]:
    """``staticPolicy.allocateCPUs``: ``allocatable`` is the free CPUs plus this pod's
    reusable ones; CPUs of the hint's NUMA nodes (their sockets with ``align-by-socket``) are
    taken first, then the rest from anywhere."""
    result: frozenset[int] = frozenset()
    if hint is not None:
        if options.align_by_socket:
            sockets = topology.sockets_of(hint)
            aligned = frozenset(c for c in allocatable if topology.socket.get(c) in sockets)
        else:
            aligned = frozenset(c for c in allocatable if topology.numa.get(c) in hint)
        result = take_by_topology(topology, aligned, min(count, len(aligned)), options)
    rest = take_by_topology(topology, allocatable - result, count - len(result), options)
    return result | rest
