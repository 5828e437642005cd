"""Independent black-box checks of the corrected SPEC section 2 rules (unavailable devices,
device utilization, routine kubelet states that are not data issues, CPU-less NUMA nodes).

Written from the SPEC alone, not from the code; expected numbers are worked out by hand in the
comments.
"""

from __future__ import annotations

from exporter.model import ContainerAssignment, DraDevice
from exporter.simulator import Faults

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    dev,
    issues,
    mem,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)

MiB = 1 << 20
C = ContainerAssignment
UNAVAILABLE = "podresources_devices_allocated_unavailable"


def no_issues(s) -> None:
    assert {k: v for k, v in issues(s).items() if v} == {}


async def test_unavailable_device_takes_no_capacity_and_group_counts_on_both_members():
    r = "vendor.com/gpu"
    async with Node(small_profile()) as node:
        # d (node 1) is unhealthy: assigned, not allocatable
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(),
                        devices=[dev(r, "a", [0, 1]), dev(r, "b", [0]), dev(r, "c", [1])])
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "a", [0, 1]), dev(r, "d", [1]),
                                                 dev(r, "b", [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0,1": 1, "0": 1, "1": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0,1": 1, "0": 1, "1": 1}
    assert s.by(UNAVAILABLE, "numa_node", resource=r) == {"0,1": 0, "0": 0, "1": 1}
    # node 0: allocated and allocatable local to 0 = {a, b} / capacity {a, b} = 1
    # node 1: {a} (d is not allocatable) / capacity {a, c} = 0.5
    assert util(s, r) == {"0": 1.0, "1": 0.5}
    no_issues(s)


async def test_device_listed_without_topology_and_not_allocatable_is_unknown_and_unavailable():
    r = "vendor.com/nt"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[])
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "x", None),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"unknown": 1}
    assert s.by(UNAVAILABLE, "numa_node", resource=r) == {"unknown": 1}
    assert not s.series("podresources_devices_allocatable", resource=r)
    assert not util(s, r)
    no_issues(s)


async def test_v1alpha1_repeated_id_is_one_device_and_no_issue():
    r = "vendor.com/gpu"
    async with Node(small_profile(), faults=Faults(v1=False)) as node:
        # local to two NUMA nodes: two entries with the same id on the wire
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "g0", [0, 1]), dev(r, "g1", [1]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"unknown": 2}
    assert s.by("podresources_container_devices", "pod", "numa_node", resource=r) == {
        ("p", "unknown"): 2}
    assert not s.series(UNAVAILABLE)  # GetAllocatableResources is not available under v1alpha1
    no_issues(s)


async def test_pod_level_memory_without_a_block_for_a_type_the_containers_use():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("c", cpu_ids=(1,), memory=(mem(2 * GiB, [0]),
                                             mem(256 * MiB, [0], "hugepages-2Mi"))),
                cpu_ids=(1, 2), memory=(mem(4 * GiB, [0]),))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # memory: max(pod-level 4Gi, containers 2Gi) = 4Gi; hugepages: containers' 256Mi
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 4 * GiB, "1": 0}
    assert s.by("podresources_memory_allocated_bytes", "numa_node",
                memory_type="hugepages-2Mi") == {"0": 256 * MiB, "1": 0}
    assert util(s, "memory") == {"0": 0.25, "1": 0}  # 4 of 16Gi
    assert util(s, "hugepages-2Mi") == {"0": 0.25, "1": 0}  # 256Mi of 1Gi
    assert s.by("podresources_pod_memory_bytes", "numa_node", "memory_type") == {
        ("0", "memory"): 4 * GiB}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}
    no_issues(s)


async def test_claim_named_twice_by_a_container_is_counted_once():
    drv = "gpu.example.com"
    d0 = DraDevice(drv, "pool", "d0", "claim", "ns", None, ("x/gpu=d0",))
    d1 = DraDevice(drv, "pool", "d1", "claim", "ns", None, ("x/gpu=d0", "x/gpu=d1"))
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("c", dra_devices=(d0, d1, d0, d1)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_dra_devices_allocated", "driver", "pool") == {(drv, "pool"): 2}
    assert s.by("podresources_dra_device_info", "device", "claim") == {
        ("d0", "claim"): 1, ("d1", "claim"): 1}
    no_issues(s)


async def test_cpu_less_numa_node_invents_no_cpu_series():
    profile = small_profile(numa_nodes=[
        {"id": 0, "cpus": "0-3", "memory": "16Gi"},
        {"id": 1, "cpus": "4-7", "memory": "16Gi"},
        {"id": 2, "cpus": "", "memory": "32Gi"}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4, "2": 0}
    # allocatable = online minus reserved CPU 0; node 2 has none: no series for it
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 3, "1": 4}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 0}
    assert util(s, "cpu") == {"0": 0, "1": 0}
    assert s.by("podresources_memory_allocatable_bytes", "numa_node", memory_type="memory") == {
        "0": 16 * GiB, "1": 16 * GiB, "2": 32 * GiB}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0, "2": 0}
    no_issues(s)
