"""The managers' state kept from one snapshot to the next (exporter/fit/state/incremental.py) equals
the state built from the whole snapshot (exporter/fit/state/from_snapshot.py), after every change:
worked through by hand on a two-node machine, then over random changes.

The machine: NUMA node 0 holds CPUs 0-3, node 1 CPUs 4-7; CPU 0 is reserved (not
allocatable); 4 GiB of memory per node; GPU g0 on node 0, g1 on node 1.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from exporter.fit.state.from_snapshot import node_state
from exporter.fit.state.incremental import ManagersStateCache
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    DeviceEntry,
    KubeletSnapshot,
    MemoryBlock,
    NumaNode,
    PodAssignment,
    Topology,
)

GiB = 1 << 30
TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                NumaNode(1, frozenset(range(4, 8)))])
ALLOCATABLE = Allocatable(
    cpu_ids=tuple(range(1, 8)),
    memory=(MemoryBlock("memory", 4 * GiB, (0,)), MemoryBlock("memory", 4 * GiB, (1,))),
    devices=(DeviceEntry("gpu", ("g0",), (0,)), DeviceEntry("gpu", ("g1",), (1,))))


def pod(name: str, cpus: tuple[int, ...] = (), memory: tuple[MemoryBlock, ...] = (),
        gpus: tuple[tuple[str, int], ...] = ()) -> PodAssignment:
    devices = tuple(DeviceEntry("gpu", (g,), (n,)) for g, n in gpus)
    return PodAssignment("ns", name, (ContainerAssignment("c", cpus, memory, devices),))


def both(cache: ManagersStateCache, *pods: PodAssignment):  # type: ignore[no-untyped-def]
    snapshot = KubeletSnapshot(pods, ALLOCATABLE)
    kept = cache.state(snapshot, TOPOLOGY, True, True)
    assert kept == node_state(snapshot, TOPOLOGY, True, True)
    assert kept is not None and kept.cpu is not None and kept.memory is not None
    assert kept.requests is not None
    return kept


def test_pods_coming_and_going_by_hand():
    cache = ManagersStateCache()
    a = pod("a", (1, 4), (MemoryBlock("memory", 2 * GiB, (0,)),), (("g1", 1),))
    first = both(cache, a)
    assert sorted(first.cpu.free) == [2, 3, 5, 6, 7]
    assert {n: m.free["memory"] for n, m in first.memory.items()} == {0: 2 * GiB, 1: 4 * GiB}
    assert first.devices["gpu"].free == {frozenset({0}): 1}
    assert first.requests.requested == {"gpu": 1, "cpu": 2000, "memory": 2 * GiB}

    # b takes CPU 2 and 1 GiB on node 1; the GPUs are untouched and keep their state object
    b = pod("b", (2,), (MemoryBlock("memory", 1 * GiB, (1,)),))
    second = both(cache, a, b)
    assert sorted(second.cpu.free) == [3, 5, 6, 7]
    assert {n: m.free["memory"] for n, m in second.memory.items()} == {0: 2 * GiB, 1: 3 * GiB}
    assert [second.memory[n].assignments for n in (0, 1)] == [1, 1]
    assert second.devices["gpu"] is first.devices["gpu"]
    assert second.requests.requested == {"gpu": 1, "cpu": 3000, "memory": 3 * GiB}
    assert second.requests.pods == 2

    # a leaves: its CPUs, memory and GPU are free again; no listed pod names gpu any more
    third = both(cache, b)
    assert sorted(third.cpu.free) == [1, 3, 4, 5, 6, 7]
    assert {n: m.free["memory"] for n, m in third.memory.items()} == {0: 4 * GiB, 1: 3 * GiB}
    assert third.devices["gpu"].free == {frozenset({0}): 1, frozenset({1}): 1}
    assert third.requests.requested == {"cpu": 1000, "memory": 1 * GiB}

    # c's 6 GiB block spans both nodes: node 0 gives its 4 GiB, node 1 2 of its 3; both in one
    # group; node 1 counts b's block and c's
    c = pod("c", (5, 6), (MemoryBlock("memory", 6 * GiB, (0, 1)),))
    fourth = both(cache, b, c)
    assert {n: m.free["memory"] for n, m in fourth.memory.items()} == {0: 0, 1: 1 * GiB}
    assert fourth.memory[0].group == fourth.memory[1].group == {0, 1}
    assert [fourth.memory[n].assignments for n in (0, 1)] == [1, 2]


def test_a_snapshot_that_did_not_change_gives_the_same_parts():
    cache = ManagersStateCache()
    a = pod("a", (1,), (MemoryBlock("memory", GiB, (0,)),), (("g0", 0),))
    first = both(cache, a, pod("web"))
    again = both(cache, pod("web-2"), a)  # a pod holding nothing replaced, the order changed
    assert again.cpu is first.cpu and again.memory is first.memory
    assert again.devices["gpu"] is first.devices["gpu"]


def test_a_new_allocatable_list_starts_again():
    cache = ManagersStateCache()
    a = pod("a", (1,), gpus=(("g0", 0),))
    both(cache, a)
    unhealthy = Allocatable(cpu_ids=ALLOCATABLE.cpu_ids, memory=ALLOCATABLE.memory,
                            devices=ALLOCATABLE.devices[:1])  # g1 unhealthy
    snapshot = KubeletSnapshot((a,), unhealthy)
    kept = cache.state(snapshot, TOPOLOGY, True, True)
    assert kept == node_state(snapshot, TOPOLOGY, True, True)
    assert kept is not None and kept.devices["gpu"].free == {}


# ---- random changes ---------------------------------------------------------------------------

MACHINE = Topology.from_nodes([NumaNode(n, frozenset(range(4 * n, 4 * n + 4))) for n in range(3)])
DEVICES = [("gpu", f"g{i}", (i % 3,)) for i in range(4)] + [
    ("nic", f"n{i}", (0, 1) if i == 0 else ()) for i in range(3)]
MACHINE_ALLOCATABLE = Allocatable(
    cpu_ids=tuple(range(1, 12)),
    memory=tuple(MemoryBlock(t, 2 * GiB, (n,)) for n in range(3)
                 for t in ("memory", "hugepages-1Gi")),
    devices=tuple(DeviceEntry(r, (d,), numa) for r, d, numa in DEVICES[:-1]))  # n2 unhealthy

blocks = st.builds(MemoryBlock, st.sampled_from(["memory", "hugepages-1Gi"]),
                   st.integers(0, 3).map(lambda g: g * GiB),
                   st.sampled_from([(0,), (1,), (2,), (0, 1), (1, 2), (7,), ()]))
entries = st.sampled_from(DEVICES).map(lambda d: DeviceEntry(d[0], (d[1],), d[2]))
containers = st.builds(ContainerAssignment, st.just("c"),
                       st.lists(st.integers(0, 11), max_size=3).map(tuple),
                       st.lists(blocks, max_size=2).map(tuple),
                       st.lists(entries, max_size=2).map(tuple))
pods = st.builds(PodAssignment, st.just("ns"), st.text("abc", min_size=1, max_size=3),
                 st.lists(containers, min_size=1, max_size=2).map(tuple),
                 st.lists(st.integers(0, 11), max_size=2).map(tuple),
                 st.lists(blocks, max_size=1).map(tuple))


@settings(max_examples=60, deadline=None)
@given(pool=st.lists(pods, min_size=1, max_size=8),
       steps=st.lists(st.tuples(st.lists(st.integers(0, 7), max_size=8), st.randoms()),
                      min_size=1, max_size=6),
       managers=st.sampled_from([(True, True), (True, False), (False, True)]))
def test_kept_equals_built_from_scratch(pool, steps, managers):  # type: ignore[no-untyped-def]
    """Each step lists some of the pool's pods (each pod object at most once), in a random
    order: the kept state equals the one built from that snapshot alone."""
    cache = ManagersStateCache()
    for chosen, shuffle in steps:
        listed = [pool[i % len(pool)] for i in dict.fromkeys(chosen)]
        listed = list({id(p): p for p in listed}.values())
        shuffle.shuffle(listed)
        snapshot = KubeletSnapshot(tuple(listed), MACHINE_ALLOCATABLE)
        assert (cache.state(snapshot, MACHINE, *managers)
                == node_state(snapshot, MACHINE, *managers))
