"""The fit answers of SPEC 7.3 from a node state, and the state rebuilt from a snapshot; every
figure worked out by hand."""

from __future__ import annotations

import math

from exporter.fit.answers import CAPACITY_CAP, answer, numa_free_series, sentence
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape, single_container
from exporter.fit.state.from_snapshot import node_state
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

from .nodes import GiB, cpus, devices, memory, state

GROUPED = memory({0: 10 * GiB, 1: 10 * GiB}, {0: 0, 1: 8 * GiB},
                 {0: frozenset({0, 1}), 1: frozenset({0, 1})})


def test_numa_free_memory_is_zero_on_a_grouped_node():
    node = state(cpus(4, {0: 1, 1: 3}), GROUPED)
    free = numa_free_series(node)
    assert free[("0", "memory")] == 0 and free[("1", "memory")] == 0
    assert free[("0", "cpu")] == 1 and free[("1", "cpu")] == 3


def test_memory_shape_on_a_grouped_node():
    """Shortfall is the whole request on both nodes; the sentence names the group."""
    node = state(cpus(4, {0: 4, 1: 4}), GROUPED)
    result = answer(single_container("db", {"cpu": 1000, "memory": 2 * GiB}), node, Rules())
    assert not result.verdict.admitted
    assert result.fits == {0: False, 1: False}
    assert {n: s["memory"] for n, s in result.shortfall.items()} == {0: 2 * GiB, 1: 2 * GiB}
    assert result.capacity == 0
    assert result.min_numa_nodes == 2  # best-effort would use the group {0,1}
    text = sentence(result)
    assert "TopologyAffinityError" in text and "single-numa-node, scope container" in text
    assert "NUMA nodes 0 and 1 hold part of a memory block" in text


def test_two_container_shape_admitted_split_with_no_whole_pod_fit():
    """6 VFs per node free; two containers of 4 VFs: a on node 0, b on node 1; the whole pod
    (8) fits on no node alone; one more pod after that? 2 + 2 left: no. Capacity 1."""
    node = state(None, None, {"vf": devices({frozenset({0}): 6, frozenset({1}): 6})})
    pod = PodShape("pair", (ContainerShape("a", {"vf": 4}), ContainerShape("b", {"vf": 4})),
                   qos=BURSTABLE)
    result = answer(pod, node, Rules())
    assert result.verdict.admitted
    assert [p.devices["vf"] for p in result.verdict.placements] == [{0}, {1}]
    assert result.fits == {0: False, 1: False}
    assert result.shortfall == {0: {"vf": 2}, 1: {"vf": 2}}
    assert result.capacity == 1
    assert result.min_numa_nodes == 2
    assert "a on NUMA node 0 and b on NUMA node 1" in sentence(result)


def test_capacity_places_one_pod_after_another():
    """4 free CPUs per node, 3 CPUs a pod: one per node (1 left on each), capacity 2; a
    2-CPU pod: 2 per node, 4."""
    node = state(cpus(4, {0: 4, 1: 4}))
    assert answer(single_container("p", {"cpu": 3000}), node, Rules()).capacity == 2
    assert answer(single_container("p", {"cpu": 2000}), node, Rules()).capacity == 4


def test_capacity_is_capped_and_unbounded_without_aligned_requests():
    node = state(cpus(128, {0: 128, 1: 128}))
    assert answer(single_container("p", {"cpu": 1000}), node, Rules()).capacity == CAPACITY_CAP
    shared = single_container("p", {"cpu": 500})
    assert math.isinf(answer(shared, node, Rules()).capacity)


def test_fits_names_each_node_that_holds_the_whole_pod():
    node = state(cpus(4, {0: 2, 1: 4}))
    result = answer(single_container("p", {"cpu": 3000}), node, Rules())
    assert result.fits == {0: False, 1: True}
    assert result.shortfall == {0: {"cpu": 1}, 1: {"cpu": 0}}
    assert result.verdict.placements[0].cpus == {1}


def test_init_container_pin_is_in_the_sentence():
    node = state(cpus(4, {0: 2, 1: 4}))
    pod = PodShape("p", (ContainerShape("app", {"cpu": 4000}),),
                   (ContainerShape("setup", {"cpu": 1000}),))
    text = sentence(answer(pod, node, Rules()))
    assert "(app) with TopologyAffinityError" in text
    assert "the init container setup's exclusive resources" in text


def topology() -> Topology:
    return Topology.from_nodes([NumaNode(0, frozenset({0, 1, 2, 3})),
                                NumaNode(1, frozenset({4, 5, 6, 7}))])


def test_node_state_from_a_snapshot():
    """CPU 0 reserved (not allocatable), 1 and 4 held; a 6 GiB block across {0,1} fills node 0
    (4 GiB) first then node 1 (2 of 4 GiB); a GPU on node 1 held, one on node 0 free."""
    allocatable = Allocatable(
        cpu_ids=(1, 2, 3, 4, 5, 6, 7),
        memory=(MemoryBlock("memory", 4 * GiB, (0,)), MemoryBlock("memory", 4 * GiB, (1,))),
        devices=(DeviceEntry("gpu", ("g0",), (0,)), DeviceEntry("gpu", ("g1",), (1,))))
    pod = PodAssignment("ns", "db", (ContainerAssignment(
        "c", cpu_ids=(1, 4), memory=(MemoryBlock("memory", 6 * GiB, (0, 1)),),
        devices=(DeviceEntry("gpu", ("g1",), (1,)),)),))
    node = node_state(KubeletSnapshot((pod,), allocatable), topology(), True, True)
    assert node is not None and node.cpu is not None and node.memory is not None
    assert sorted(node.cpu.free) == [2, 3, 5, 6, 7]
    assert node.cpu.online[0] == {0, 1, 2, 3}
    assert {n: m.free["memory"] for n, m in node.memory.items()} == {0: 0, 1: 2 * GiB}
    assert node.memory[0].group == {0, 1} and node.memory[1].group == {0, 1}
    assert node.devices["gpu"].registered == {frozenset({0}): 1, frozenset({1}): 1}
    assert node.devices["gpu"].free == {frozenset({0}): 1}
    free = numa_free_series(node)
    assert free[("0", "memory")] == 0 and free[("1", "memory")] == 0
    assert free[("0", "gpu")] == 1 and free[("1", "gpu")] == 0


def test_a_shape_asking_for_a_device_the_node_lacks_is_out_of_it():
    """The kubelet's predicate would drop the unknown resource, but no scheduler binds the pod
    here: the fit answers say OutOf<resource>, fits nowhere, capacity 0."""
    node = state(cpus(4, {0: 4, 1: 4}))
    result = answer(single_container("p", {"cpu": 1000, "nvidia.com/gpu": 1}), node, Rules())
    verdict = result.verdict
    assert (verdict.admitted, verdict.reason, verdict.blocking_resource) == (
        False, "OutOfnvidia.com/gpu", "nvidia.com/gpu")
    assert result.fits == {0: False, 1: False} and result.capacity == 0
    assert result.shortfall[0]["nvidia.com/gpu"] == 1 and result.min_numa_nodes is None
