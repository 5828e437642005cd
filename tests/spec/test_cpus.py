"""SPEC section 2, CPUs: exclusive CPUs per NUMA node, the shared pool, pod-level CPUs.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from ..support.harness import Exporter, Node, small_profile
from ..support.spec import (
    C,
    issue,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)


async def test_cpu_attribution_per_numa_and_shared_pool_is_not_zero():
    """cpu_ids are exclusive CPUs; an empty list means "shared pool", never "zero"."""
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "two", C("c", cpu_ids=(1, 2)))
        put_pod(node, "ns", "three", C("c", cpu_ids=(4, 5, 6)))
        put_pod(node, "ns", "shared", C("c"))  # 1500m Guaranteed: shared pool, empty cpu_ids
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4}
    # allocatable = online minus reserved CPU 0: {1,2,3} and {4,5,6,7}
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 3, "1": 4}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 3}
    assert util(s, "cpu") == {"0": pytest.approx(2 / 3), "1": pytest.approx(3 / 4)}
    assert s.by("podresources_container_cpus", "pod", "numa_node") == {
        ("two", "0"): 2, ("three", "1"): 3}
    # the shared-pool container has no exclusive resource: no series at all, not a 0
    assert not s.series("podresources_container_cpus", pod="shared")
    assert not s.series("podresources_container_numa_nodes", pod="shared")


async def test_pod_level_cpus_overlap_container_cpus_counted_once():
    """Pod-level cpu_ids include the containers' own; never count a CPU twice."""
    async with Node(small_profile()) as node:
        # pod-level {1,2,3,4} includes a's {1,2} and b's {4}
        put_pod(node, "ns", "p", C("a", cpu_ids=(1, 2)), C("b", cpu_ids=(4,)),
                cpu_ids=(1, 2, 3, 4))
        # an odd one: the container's CPU 5 is missing from the pod-level list -> the union
        put_pod(node, "ns", "q", C("a", cpu_ids=(5,)), cpu_ids=(6,))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # node 0: {1,2,3} = 3; node 1: {4} + {5,6} = 3 (not 1+2+3+4+... = 7 + 2)
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 3}
    assert s.by("podresources_pod_cpus", "pod", "numa_node") == {
        ("p", "0"): 3, ("p", "1"): 1, ("q", "1"): 1}
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("p", "a", "0"): 2, ("p", "b", "1"): 1, ("q", "a", "1"): 1}
    # the intended overlap is not "a CPU held by two owners"
    assert issue(s, "cpu_multiple_owners") == 0
    # pod-level CPUs count toward no container: a on 0, b on 1, each aligned
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="a") == 1
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="b") == 1
    assert s.value("podresources_misaligned_containers") == 0


async def test_pod_level_cpus_of_a_pod_whose_containers_share_the_pod_pool():
    """Pod-level exclusive CPUs with containers in the pod's shared pool (empty cpu_ids)."""
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("a"), C("b"), cpu_ids=(5, 6))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 2}
    assert s.by("podresources_pod_cpus", "numa_node", pod="p") == {"1": 2}
    assert not s.series("podresources_container_cpus", pod="p")
    # pod-level resources count toward no container -> no alignment series
    assert not s.series("podresources_container_numa_nodes", pod="p")
    assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                   get="true", pod_level="true") == 1


async def test_cpu_unknown_to_sysfs_is_unknown_and_ignored_for_alignment():
    async with Node(small_profile()) as node:
        # CPU 99 does not exist in sysfs (and is outside allocatable)
        put_pod(node, "ns", "p", C("c", cpu_ids=(1, 99)))
        put_pod(node, "ns", "only-unknown", C("c", cpu_ids=(98,)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 1, "1": 0, "unknown": 2}
    assert s.by("podresources_container_cpus", "pod", "numa_node") == {
        ("p", "0"): 1, ("p", "unknown"): 1, ("only-unknown", "unknown"): 1}
    assert issue(s, "unknown_cpu") > 0
    # utilization is per single NUMA node: nothing for "unknown"
    assert set(util(s, "cpu")) == {"0", "1"}
    assert util(s, "cpu")["0"] == pytest.approx(1 / 3)
    # unknown locality is ignored: p needs node 0 only; only-unknown has nothing known
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1
    assert not s.series("podresources_container_numa_nodes", pod="only-unknown")


async def test_allocatable_cpu_unknown_to_sysfs():
    """An allocatable CPU sysfs does not list is attributed to "unknown" (and is a data issue);
    "unknown" then has allocatable capacity, so its allocated series exists with 0."""
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=(1, 2, 3, 4, 5, 6, 7, 99),
                        memory=small_allocatable_memory())
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 3, "1": 4, "unknown": 1}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 0, "unknown": 0}
    assert util(s, "cpu") == {"0": 0, "1": 0}
    assert issue(s, "unknown_cpu") > 0
