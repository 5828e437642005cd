"""Hand-built node states for the engine's tests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from exporter.fit.answers import answer
from exporter.fit.capacity import NodeCounts
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.cpumanager.state import CpuManagerState
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.kubelet.memorymanager.state import MemoryNode
from exporter.fit.kubelet.podshape import PodShape

GiB = 1 << 30


def cpus(per_numa: int, free: dict[int, int], numa: int = 2, threads: int = 1) -> CpuManagerState:
    """``per_numa`` CPUs on each node, ids numbered node after node; the first ``free[n]`` of
    node n free; SMT siblings are consecutive ids when ``threads`` > 1."""
    online = {n: frozenset(range(n * per_numa, (n + 1) * per_numa)) for n in range(numa)}
    free_ids = frozenset(c for n in range(numa) for c in sorted(online[n])[:free.get(n, 0)])
    siblings = {c: frozenset(range(c - c % threads, c - c % threads + threads))
                for n in range(numa) for c in online[n]}
    return CpuManagerState(online, free_ids, {c: n for n in online for c in online[n]}, siblings,
                           threads)


def memory(allocatable: dict[int, int], free: dict[int, int] | None = None,
           groups: dict[int, frozenset[int]] | None = None,
           kind: str = "memory") -> dict[int, MemoryNode]:
    free = free if free is not None else allocatable
    groups = groups or {}
    return {n: MemoryNode({kind: a}, {kind: free[n]}, groups.get(n, frozenset({n})),
                          int(free[n] < a or len(groups.get(n, {n})) > 1))
            for n, a in allocatable.items()}


def devices(registered: dict[frozenset[int], int],
            free: dict[frozenset[int], int] | None = None) -> DeviceState:
    return DeviceState(registered, registered if free is None else free)


def state(cpu: CpuManagerState | None = None, mem: dict[int, MemoryNode] | None = None,
          devs: dict[str, DeviceState] | None = None, numa: int = 2) -> ManagersState:
    return ManagersState(tuple(range(numa)), cpu, mem, devs or {})


def assert_kept_counts_answer_as_placed(shape: PodShape, node: ManagersState, rules: Rules,
                                        taken: Iterable[int]) -> None:
    """Capacity, fits and the verdict with the counts kept (``NodeCounts``) equal those of
    placing copy by copy, before and after a change (the CPUs ``taken``)."""
    counts = NodeCounts()
    assert node.cpu is not None
    changed = replace(node, cpu=replace(node.cpu, free=node.cpu.free - set(taken)))
    for current in (node, changed):
        kept, placed = answer(shape, current, rules, counts), answer(shape, current, rules)
        assert (kept.capacity, kept.fits, kept.verdict.admitted) == (
            placed.capacity, placed.fits, placed.verdict.admitted)
        counts.forget_unused()
