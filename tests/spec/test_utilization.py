"""SPEC section 2, utilization: groups on both sides, unhealthy devices, true zeros and nothing
invented (policies none, v1alpha1, no GetAllocatableResources).

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from exporter.simulator import Faults

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    issues,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)


async def test_group_devices_count_toward_each_member_on_both_sides():
    r = "vendor.com/gpu"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "a", [0, 1]), dev(r, "b", [0]), dev(r, "c", [1]), dev(r, "d", [1])])
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "a", [0, 1]), dev(r, "c", [1]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0,1": 1, "0": 1, "1": 2}
    # true zero: node 0 has capacity and nothing single-node assigned -> 0, not absent
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0,1": 1, "0": 0, "1": 1}
    # node 0: (a) / (a, b) = 1/2; node 1: (a, c) / (a, c, d) = 2/3
    assert util(s, r) == {"0": 0.5, "1": pytest.approx(2 / 3)}


async def test_unhealthy_assigned_device_is_unavailable_not_an_issue():
    """Devices the kubelet does not list as allocatable: counted apart, never a data issue."""
    profile = small_profile(
        devices=[{"resource": "r/x", "per_numa": {"0": 3}}],
        pods=[{"namespace": "ns", "name": "p",
               "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 2}}]}])
    async with Node(profile) as node:
        node.simulator.state.mark_unhealthy("x-1")  # leaves allocatable, stays assigned
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # the pod holds x-0 and x-1; allocatable lists the healthy x-0 and x-2
    assert s.by("podresources_devices_allocatable", "numa_node", resource="r/x") == {"0": 2}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"0": 2}
    assert s.by("podresources_devices_allocated_unavailable", "numa_node",
                resource="r/x") == {"0": 1}
    # allocated side: listed assigned devices only, {x-0} = 1, over {x-0, x-2} = 2
    assert util(s, "r/x") == {"0": 0.5}
    assert sum(issues(s).values()) == 0


async def test_device_registered_without_numa_nodes_is_unknown_and_unavailable():
    """A plugin registered its devices with a topology naming no NUMA node: List shows them
    without topology, GetAllocatableResources not at all."""
    profile = small_profile(
        devices=[{"resource": "r/e", "count": 3, "numa": []},
                 {"resource": "r/x", "per_numa": {"1": 2}}],
        pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "cpus": 1, "devices": {"r/e": 2, "r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # nothing of r/e is allocatable anywhere: no allocatable series, no ratio
    assert not s.series("podresources_devices_allocatable", resource="r/e")
    assert not util(s, "r/e")
    # both assigned r/e devices are under "unknown", both unavailable
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/e") == {"unknown": 2}
    assert s.by("podresources_devices_allocated_unavailable", "numa_node", "resource") == {
        ("unknown", "r/e"): 2, ("1", "r/x"): 0}
    assert s.by("podresources_device_info", "device_id", "numa_node", resource="r/e") == {
        ("e-0", "unknown"): 1, ("e-1", "unknown"): 1}
    # r/x on node 1: 1 of 2
    assert util(s, "r/x") == {"1": 0.5}
    # CPU and VF on node 1, the r/e devices of unknown locality are ignored -> 1
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1
    assert sum(issues(s).values()) == 0


async def test_no_utilization_series_where_allocatable_is_zero():
    profile = small_profile(
        numa_nodes=[{"id": 0, "cpus": "0-3", "memory": "16Gi", "hugepages": {"2Mi": 512}},
                    {"id": 1, "cpus": "4-7", "memory": "16Gi"}],
        reserved_cpus="0-3",  # node 0 has no assignable CPU
        reserved_memory={"1": {"memory": "16Gi"}},  # node 1 has no assignable memory
        devices=[{"resource": "r/x", "per_numa": {"1": 1}}],
        # the pod's CPU can only be on node 1, its memory (the 128Mi a Guaranteed container
        # without a limit is given) only on node 0: admitted under policy none
        topology_manager_policy="none",
        pods=[{"namespace": "ns", "name": "p",
               "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert util(s, "cpu") == {"1": 0.25}
    assert util(s, "memory") == {"0": 1 / 128}
    assert util(s, "hugepages-2Mi") == {"0": 0}
    assert util(s, "r/x") == {"1": 1.0}
    assert s.by("podresources_cpus_allocated", "numa_node").get("1") == 1


async def test_true_zero_series_for_every_pair_with_allocatable_capacity():
    profile = small_profile(devices=[
        {"resource": "r/x", "per_numa": {"0": 1, "1": 1}},
        {"resource": "r/g", "count": 1, "numa": [0, 1]},
        {"resource": "r/n", "count": 2, "numa": None}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 0}
    assert util(s, "cpu") == {"0": 0, "1": 0}
    for memory_type in ("memory", "hugepages-2Mi"):
        assert s.by("podresources_memory_allocated_bytes", "numa_node",
                    memory_type=memory_type) == {"0": 0, "1": 0}
        assert util(s, memory_type) == {"0": 0, "1": 0}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {
        "0": 0, "1": 0}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/g") == {"0,1": 0}
    assert util(s, "r/g") == {"0": 0, "1": 0}
    # "unknown" is a numa_node label with allocatable capacity: its allocated series is 0
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/n") == {"unknown": 0}
    assert not util(s, "r/n")
    assert s.value("podresources_misaligned_containers") == 0


async def test_cpu_policy_none_invents_no_cpu_series_but_memory_stays():
    profile = small_profile(cpu_manager_policy="none", pods=[
        {"namespace": "ns", "name": "p",
         "containers": [{"name": "c", "cpus": 2, "memory": "1Gi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    for name in ("podresources_cpus_allocatable", "podresources_cpus_allocated",
                 "podresources_container_cpus", "podresources_pod_cpus"):
        assert not s.series(name), name
    assert not util(s, "cpu")
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4}
    # the memory manager alone aligns: the lowest NUMA node with room
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": GiB, "1": 0}
    # memory alone is an exclusive resource of known locality -> aligned on node 0
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1


async def test_memory_policy_none_invents_no_memory_series():
    profile = small_profile(memory_manager_policy="None", pods=[
        {"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "cpus": 2, "memory": "1Gi", "hugepages-2Mi": "128Mi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    for name in ("podresources_memory_allocatable_bytes", "podresources_memory_allocated_bytes",
                 "podresources_container_memory_bytes", "podresources_pod_memory_bytes"):
        assert not s.series(name), name
    assert set(dict(k)["resource"] for k in s.series("podresources_numa_utilization_ratio")) \
        == {"cpu"}


async def test_v1alpha1_gives_devices_only():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}], pods=[
        {"namespace": "ns", "name": "p",
         "containers": [{"name": "c", "cpus": 1, "memory": "1Gi", "devices": {"r/x": 2}}]}])
    async with Node(profile, faults=Faults(v1=False)) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_devices_allocated", "numa_node", "resource") == {
        ("unknown", "r/x"): 2}
    for name in ("podresources_cpus_allocatable", "podresources_cpus_allocated",
                 "podresources_memory_allocatable_bytes", "podresources_memory_allocated_bytes",
                 "podresources_devices_allocatable", "podresources_numa_utilization_ratio",
                 "podresources_container_cpus", "podresources_container_memory_bytes",
                 "podresources_container_numa_nodes"):
        assert not s.series(name), name
    assert s.value("podresources_kubelet_api_info", api_version="v1alpha1",
                   get_allocatable="false", get="false", pod_level="unknown") == 1


async def test_old_kubelet_without_get_allocatable_has_no_allocatable_or_utilization():
    profile = small_profile(kubernetes_version="1.20", memory_manager_policy="None",
                            devices=[{"resource": "r/x", "per_numa": {"0": 2}}],
                            pods=[{"namespace": "ns", "name": "p", "containers": [
                                {"name": "c", "cpus": 2, "devices": {"r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # 1.20: GetAllocatableResources (1.21) and Get (1.27) answer UNIMPLEMENTED
    assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="false",
                   get="false", pod_level="unknown") == 1
    assert not s.series("podresources_cpus_allocatable")
    assert not s.series("podresources_devices_allocatable")
    assert not s.series("podresources_numa_utilization_ratio")
    assert s.by("podresources_cpus_allocated", "numa_node").get("0") == 2
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"0": 1}
