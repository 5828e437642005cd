"""``shape_capacity`` counted NUMA node by NUMA node (exporter/fit/capacity.py) equals the count
by placing copies one after another: worked through by hand, then over random nodes, shapes and
rules; and a node whose own state did not change is not placed again."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from exporter.fit.answers import answer
from exporter.fit.capacity import NodeCounts
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.managers_state import ManagersState, NodeRequests
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape, single_container

from .nodes import GiB, assert_kept_counts_answer_as_placed, cpus, memory, state

SNN = Rules("single-numa-node", "container")


def test_copies_fill_the_nodes_in_id_order():
    """Node 0 has 4 free CPUs, node 1 two: a 1-CPU shape fits 4 times on node 0 and twice on
    node 1, 6 in all; a 3-CPU shape once on node 0 only (node 1's 2 are too few)."""
    node = state(cpus(4, {0: 4, 1: 2}))
    counts = NodeCounts()
    assert answer(single_container("one", {"cpu": 1000}), node, SNN, counts).capacity == 6
    three = answer(single_container("three", {"cpu": 3000}), node, SNN, counts)
    assert (three.capacity, three.fits) == (1, {0: True, 1: False})


def test_only_the_node_that_changed_is_placed_again():
    """With CPUs picked another way (distribute-cpus-across-cores: copies are not replayed on
    counts, exporter/fit/replay.py), each node's count is kept: after CPU 4 on node 1 is taken,
    node 0's count (4) is kept; node 1 now holds 1."""
    counts = NodeCounts()
    shape = single_container("one", {"cpu": 1000})
    before = state(cpus(4, {0: 4, 1: 2}))
    rules = replace(SNN, distribute_cpus_across_cores=True)
    assert answer(shape, before, rules, counts).capacity == 6
    counts.forget_unused()
    kept = dict(counts.counts)
    assert sorted(c for c, _ in kept.values()) == [2, 4]
    after = replace(before, cpu=replace(before.cpu, free=before.cpu.free - {4}))
    assert answer(shape, after, rules, counts).capacity == 5
    counts.forget_unused()
    (node0,) = [k for k, v in kept.items() if v[0] == 4]
    assert counts.counts[node0] == kept[node0]  # the same entry: node 0 not placed again
    assert sorted(c for c, _ in counts.counts.values()) == [1, 4]


def test_the_predicate_limits_the_copies_the_nodes_hold():
    """Eight free CPUs and 8 GiB of hugepages-1Gi on each node would hold eight 1-CPU, 1 GiB
    copies, but the Node's allocatable the predicate counts has 2.5 GiB of hugepages-1Gi and
    1 GiB is requested already: the first copy fits (1 + 1 <= 2.5), the second does not
    (1 + 1 + 1 > 2.5): OutOfhugepages-1Gi, capacity 1."""
    requests = NodeRequests({"hugepages-1Gi": 5 * GiB // 2}, {"hugepages-1Gi": GiB}, 1, False)
    hugepages = memory({0: 8 * GiB, 1: 8 * GiB}, kind="hugepages-1Gi")
    node = replace(state(cpus(4, {0: 4, 1: 4}), hugepages), requests=requests)
    shape = single_container("hp", {"cpu": 1000, "hugepages-1Gi": GiB})
    assert answer(shape, node, SNN, NodeCounts()).capacity == 1
    assert answer(shape, node, SNN).capacity == 1
    # 4.5 GiB: copies 1-3 fit (1 + 3 <= 4.5), the fourth does not
    roomier = replace(node, requests=replace(requests, allocatable={"hugepages-1Gi": 9 * GiB // 2}))
    assert answer(shape, roomier, SNN, NodeCounts()).capacity == 3
    assert answer(shape, roomier, SNN).capacity == 3


def test_a_device_on_two_nodes_is_taken_once():
    """One GPU, on NUMA nodes 0 and 1 both: each node alone would hold a 1-CPU, 1-GPU copy,
    but the first copy (on node 0) takes the GPU for both: capacity 1, copy by copy."""
    gpu = DeviceState({frozenset({0, 1}): 1}, {frozenset({0, 1}): 1})
    node = state(cpus(4, {0: 4, 1: 4}), devs={"gpu": gpu})
    shape = single_container("g", {"cpu": 1000, "gpu": 1})
    result = answer(shape, node, SNN, NodeCounts())
    assert (result.capacity, result.fits) == (1, {0: True, 1: True})


def test_identical_containers_fill_container_by_container():
    """Scope container, two 3-CPU containers per pod: node 0 (4 free) holds one container,
    node 1 (5 free) one: one pod, its containers on nodes 0 and 1; no node holds a whole pod."""
    pod = PodShape("pair", (ContainerShape("a", {"cpu": 3000}),
                            ContainerShape("b", {"cpu": 3000})))
    node = state(cpus(8, {0: 4, 1: 5}))
    result = answer(pod, node, SNN, NodeCounts())
    assert (result.capacity, result.fits) == (1, {0: False, 1: False})
    assert answer(pod, node, SNN).capacity == 1


# ---- random nodes, shapes and rules -----------------------------------------------------------

RULES = [SNN, Rules("single-numa-node", "pod"), Rules("restricted", "container"),
         Rules("best-effort", "pod"), replace(SNN, full_pcpus_only=True),
         replace(SNN, distribute_cpus_across_numa=True), replace(SNN, align_by_socket=True)]


@st.composite
def nodes(draw: st.DrawFn) -> ManagersState:
    numa = draw(st.integers(1, 4))
    per_numa = draw(st.sampled_from([4, 8]))
    free = {n: draw(st.integers(0, per_numa)) for n in range(numa)}
    threads = draw(st.sampled_from([1, 2]))
    mem = memory({n: 8 * GiB for n in range(numa)},
                 {n: draw(st.integers(0, 8)) * GiB for n in range(numa)})
    registered = {frozenset({n}): draw(st.integers(0, 3)) for n in range(numa)}
    if draw(st.booleans()) and numa > 1:  # a device on two nodes: not decomposable
        registered[frozenset({0, 1})] = 1
    registered = {k: v for k, v in registered.items() if v}
    free_devices = {k: draw(st.integers(0, v)) for k, v in registered.items()}
    devices = {"gpu": DeviceState(registered, {k: v for k, v in free_devices.items() if v})}
    node = state(cpus(per_numa, free, numa, threads), mem, devices if registered else {}, numa)
    if draw(st.booleans()):
        node = replace(node, requests=NodeRequests(
            {"cpu": draw(st.integers(0, 40)) * 1000, "pods": draw(st.integers(0, 30))},
            {"cpu": 0}, 0, False))
    return node


@st.composite
def shapes(draw: st.DrawFn) -> PodShape:
    requests = {"cpu": draw(st.sampled_from([500, 1000, 2000, 3000]))}
    if draw(st.booleans()):
        requests["memory"] = draw(st.integers(1, 4)) * GiB
    if draw(st.booleans()):
        requests["gpu"] = draw(st.integers(1, 2))
    qos = draw(st.sampled_from(["Guaranteed", "Guaranteed", BURSTABLE]))
    count = draw(st.integers(1, 2))
    same = draw(st.booleans())
    containers = tuple(ContainerShape(f"c{i}", dict(requests) if same or i == 0
                                      else {"cpu": 1000}) for i in range(count))
    return PodShape("s", containers, qos=qos)


@settings(max_examples=150, deadline=None)
@given(node=nodes(), shape=shapes(), rules=st.sampled_from(RULES),
       taken=st.lists(st.integers(0, 31), max_size=6))
def test_node_by_node_equals_copy_by_copy(node, shape, rules, taken):  # type: ignore[no-untyped-def]
    """The same answers, with the counts kept across a change (some CPUs taken)."""
    assert_kept_counts_answer_as_placed(shape, node, rules, taken)
