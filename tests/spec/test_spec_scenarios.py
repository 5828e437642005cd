"""Black-box checks of SPEC section 2 ("Data semantics") and section 3 (metric names/labels).

Every scenario drives the real exporter (refresh loop + HTTP) against the simulated kubelet over
a real unix socket. Where the simulator's allocator cannot produce the situation (hand-picked
CPU ids, odd device topology, NUMA ids sysfs does not know, duplicates, overlapping pod-level
blocks, ...) the pod's assignment is replaced before the exporter's first refresh; the simulator
still serialises it the way the kubelet does (one device entry per device per NUMA node, in
random order).

Expected values are worked out by hand from SPEC section 2 in the comments, not taken from the
exporter.

Default machine (``small_profile``): NUMA 0 = CPUs 0-3, NUMA 1 = CPUs 4-7, CPU 0 reserved, so
allocatable CPUs are 1-3 on node 0 (3) and 4-7 on node 1 (4); 16Gi of memory and 512 x 2Mi
hugepages (1Gi) per node, memory manager Static.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from exporter.model import (
    ContainerAssignment,
    DraDevice,
)
from exporter.simulator import Faults
from exporter.simulator.profile import parse_pod

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    dev,
    issue,
    issues,
    mem,
    nodes_profile,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)

MiB = 1 << 20
C = ContainerAssignment


# ---- 1. CPUs ------------------------------------------------------------------------------


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


# ---- 2. memory and pod-level memory -------------------------------------------------------


async def test_pod_level_memory_per_type_and_group_takes_the_larger():
    """Per pod, memory type and NUMA group: max(pod-level block, sum of container blocks)."""
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("a", cpu_ids=(1,), memory=(mem(2 * GiB, [1, 0]),)),
                C("b", cpu_ids=(2,), memory=(mem(1 * GiB, [0, 1]),)),
                cpu_ids=(1, 2),
                memory=(mem(4 * GiB, [0, 1]), mem(512 * MiB, [1], "hugepages-2Mi")))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # memory on "0,1": max(4Gi, 2Gi + 1Gi) = 4Gi; hugepages on "1": max(512Mi, 0) = 512Mi
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0, "0,1": 4 * GiB}
    assert s.by("podresources_memory_allocated_bytes", "numa_node",
                memory_type="hugepages-2Mi") == {"0": 0, "1": 512 * MiB}
    assert s.by("podresources_pod_memory_bytes", "numa_node", "memory_type", pod="p") == {
        ("0,1", "memory"): 4 * GiB, ("1", "hugepages-2Mi"): 512 * MiB}
    assert s.by("podresources_container_memory_bytes", "container", "numa_node", pod="p") == {
        ("a", "0,1"): 2 * GiB, ("b", "0,1"): 1 * GiB}
    assert issue(s, "pod_memory_below_containers") == 0
    # 4Gi on 0,1: node 0 has 16Gi left and takes all of it
    assert util(s, "memory") == {"0": 0.25, "1": 0}
    assert util(s, "hugepages-2Mi") == {"0": 0, "1": 0.5}
    # a and b: CPU on node 0 plus a block spanning 0,1 (uses both) -> 2 nodes each
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {"a": 2, "b": 2}


async def test_pod_level_memory_smaller_than_containers_is_an_issue_and_the_sum_counts():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("a", memory=(mem(GiB, [0]),)), C("b", memory=(mem(GiB, [0]),)),
                memory=(mem(GiB, [0]),))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # max(1Gi, 1Gi + 1Gi) = 2Gi, and a data issue
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 2 * GiB, "1": 0}
    assert issue(s, "pod_memory_below_containers") > 0
    assert util(s, "memory")["0"] == pytest.approx(2 / 16)
    # the rest is exported as reported
    assert s.value("podresources_pod_memory_bytes", namespace="ns", pod="p", numa_node="0",
                   memory_type="memory") == GiB


async def test_memory_apportioning_two_overlapping_groups_in_ascending_order():
    """Groups are apportioned in ascending order of their id lists, each filling its member
    nodes' allocatable left after the single-node allocations, lowest id first."""
    async with Node(nodes_profile([0, 1, 2])) as node:  # 10Gi allocatable per node
        put_pod(node, "ns", "single-0", C("c", memory=(mem(6 * GiB, [0]),)))
        put_pod(node, "ns", "single-1", C("c", memory=(mem(2 * GiB, [1]),)))
        put_pod(node, "ns", "g12", C("c", memory=(mem(9 * GiB, [2, 1]),)))
        put_pod(node, "ns", "g01", C("c", memory=(mem(7 * GiB, [0, 1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 6 * GiB, "1": 2 * GiB, "2": 0, "0,1": 7 * GiB, "1,2": 9 * GiB}
    # left after single-node: n0 4, n1 8, n2 10.
    # (0,1) 7Gi first: n0 +4 (full), n1 +3 (5 left). (1,2) 9Gi: n1 +5 (full), n2 +4.
    # -> n0 10/10, n1 10/10, n2 4/10; nothing exceeds allocatable.
    # (Taking (1,2) first would give n2 1/10 and a 3Gi excess on n1.)
    assert util(s, "memory") == {"0": 1.0, "1": 1.0, "2": pytest.approx(0.4)}
    assert issue(s, "allocated_exceeds_allocatable") == 0


async def test_memory_group_order_compares_ids_as_numbers():
    """Ascending order of id lists: (2,3) comes before (2,10)."""
    async with Node(nodes_profile([2, 3, 10])) as node:  # 10Gi per node
        put_pod(node, "ns", "g-2-10", C("c", memory=(mem(6 * GiB, [10, 2]),)))
        put_pod(node, "ns", "g-2-3", C("c", memory=(mem(6 * GiB, [3, 2]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "2": 0, "3": 0, "10": 0, "2,3": 6 * GiB, "2,10": 6 * GiB}
    # (2,3) first: n2 +6 (4 left). (2,10): n2 +4 (full), n10 +2.
    # (string order "2,10" < "2,3" would give n3 0.2 and n10 0)
    assert util(s, "memory") == {"2": 1.0, "3": 0, "10": pytest.approx(0.2)}


async def test_memory_group_excess_stays_on_highest_member_ratio_capped():
    async with Node(small_profile()) as node:  # 16Gi memory, 1Gi of 2Mi pages per node
        put_pod(node, "ns", "s0", C("c", memory=(mem(10 * GiB, [0]),)))
        put_pod(node, "ns", "s1", C("c", memory=(mem(10 * GiB, [1]),)))
        put_pod(node, "ns", "g", C("c", memory=(mem(20 * GiB, [0, 1]),
                                                mem(512 * MiB, [0, 1], "hugepages-2Mi"))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # memory: left n0 6, n1 6; 20Gi -> n0 +6, n1 +6, 8Gi excess on n1 -> n1 24/16, capped at 1
    assert util(s, "memory") == {"0": 1.0, "1": 1.0}
    assert issue(s, "allocated_exceeds_allocatable") > 0
    # hugepages (apportioned per type): 512Mi fits on node 0 -> 0.5, node 1 0
    assert util(s, "hugepages-2Mi") == {"0": 0.5, "1": 0}
    # the allocated series is not capped
    assert s.value("podresources_memory_allocated_bytes", numa_node="0,1",
                   memory_type="memory") == 20 * GiB


async def test_memory_block_attribution_to_group_and_unknown():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("span", cpu_ids=(4,), memory=(mem(3 * GiB, [1, 0]),)),
                C("notopo", cpu_ids=(5,), memory=(mem(GiB, None),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0, "0,1": 3 * GiB, "unknown": GiB}
    assert s.by("podresources_container_memory_bytes", "container", "numa_node", pod="p") == {
        ("span", "0,1"): 3 * GiB, ("notopo", "unknown"): GiB}
    # span: CPU on 1 + block on {0,1} -> 2; notopo: CPU on 1, block of unknown locality -> 1
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "span": 2, "notopo": 1}
    # utilization: 3Gi on 0,1 goes to node 0; the unknown block is not apportioned anywhere
    assert util(s, "memory") == {"0": pytest.approx(3 / 16), "1": 0}


# ---- 3. devices ---------------------------------------------------------------------------


async def test_device_on_two_numa_nodes_is_one_device_in_the_group():
    """The kubelet sends one entry per device per NUMA node; aggregate by (resource, id)."""
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev("vendor.com/accel", "acc-0", [0, 1]), dev("vendor.com/accel", "acc-1", [1, 0]),
            dev("vendor.com/accel", "acc-2", [0])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(1,), devices=(
            dev("vendor.com/accel", "acc-0", [1, 0]), dev("vendor.com/accel", "acc-2", [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    acc = "vendor.com/accel"
    assert s.by("podresources_devices_allocatable", "numa_node", resource=acc) == {
        "0,1": 2, "0": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=acc) == {
        "0,1": 1, "0": 1}
    assert s.by("podresources_container_devices", "numa_node", pod="p", resource=acc) == {
        "0,1": 1, "0": 1}
    assert s.by("podresources_device_info", "device_id", "numa_node", pod="p") == {
        ("acc-0", "0,1"): 1, ("acc-2", "0"): 1}
    # the kubelet's normal shape is not a duplicate
    assert issue(s, "duplicate_entry") == 0
    # node 0: allocated acc-0 + acc-2 = 2 of 3 (acc-0, acc-1, acc-2); node 1: 1 of 2
    assert util(s, acc) == {"0": pytest.approx(2 / 3), "1": 0.5}


async def test_same_device_id_under_two_resources_is_two_devices():
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev("a.com/x", "dev-0", [0]), dev("b.com/y", "dev-0", [0])])
        put_pod(node, "ns", "p", C("c", devices=(dev("a.com/x", "dev-0", [0]),
                                                 dev("b.com/y", "dev-0", [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocated", "numa_node", "resource") == {
        ("0", "a.com/x"): 1, ("0", "b.com/y"): 1}
    assert issue(s, "device_multiple_owners") == 0
    assert issue(s, "duplicate_entry") == 0


async def test_three_node_group_label_and_utilization_on_each_member():
    async with Node(nodes_profile([0, 1, 2, 3])) as node:
        r = "vendor.com/fpga"
        set_allocatable(node, cpu_ids=range(8), devices=[
            dev(r, "f-013", [3, 0, 1]), dev(r, "f-2", [2]), dev(r, "f-0", [0])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(2,), devices=(dev(r, "f-013", [1, 3, 0]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0,1,3": 1, "2": 1, "0": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0,1,3": 1, "2": 0, "0": 0}
    # node 0: (0,1,3) + f-0 -> 1/2; nodes 1 and 3: 1/1; node 2: 0/1
    assert util(s, r) == {"0": 0.5, "1": 1.0, "2": 0, "3": 1.0}
    assert issue(s, "allocated_exceeds_allocatable") == 0
    # CPU 2 is on node 1, a member of the device's set -> aligned
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1


async def test_topologyless_device_is_unknown_and_has_no_utilization():
    async with Node(small_profile(devices=[
            {"resource": "example.com/dongle", "count": 3, "numa": None}])) as node:
        put_pod(node, "ns", "p", C("c", devices=(dev("example.com/dongle", "dongle-1", None),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node",
                resource="example.com/dongle") == {"unknown": 3}
    assert s.by("podresources_devices_allocated", "numa_node",
                resource="example.com/dongle") == {"unknown": 1}
    assert s.by("podresources_device_info", "device_id", "numa_node") == {
        ("dongle-1", "unknown"): 1}
    assert not util(s, "example.com/dongle")
    # the container's only exclusive resource has unknown locality -> no alignment series
    assert not s.series("podresources_container_numa_nodes", pod="p")


async def test_numa_id_absent_from_sysfs_is_dropped():
    """A device local to {0, 7} on a two-node machine is attributed to "0"."""
    r = "vendor.com/nic"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "n-07", [0, 7]), dev(r, "n-7", [7]), dev(r, "n-1", [1])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(5,), devices=(dev(r, "n-07", [7, 0]),),
                                   memory=(mem(2 * GiB, [1, 7]),)))
        put_pod(node, "ns", "q", C("c", devices=(dev(r, "n-7", [7]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0": 1, "1": 1, "unknown": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0": 1, "1": 0, "unknown": 1}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 2 * GiB}
    assert issue(s, "unknown_numa_id") > 0
    assert util(s, r) == {"0": 1.0, "1": 0}
    # p: CPU on 1, memory on {1}, NIC local to {0} -> 2 nodes; q: nothing known -> no series
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 2
    assert not s.series("podresources_container_numa_nodes", pod="q")


async def test_negative_numa_ids_are_dropped():
    r = "vendor.com/nic"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "n-a", [-1, 1]), dev(r, "n-b", [-1])])
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "n-a", [1, -1]), dev(r, "n-b", [-1])),
                                   memory=(mem(GiB, [-2]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "1": 1, "unknown": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "1": 1, "unknown": 1}
    assert s.value("podresources_memory_allocated_bytes", numa_node="unknown",
                   memory_type="memory") == GiB
    assert issue(s, "negative_numa_id") > 0
    for labels in s.series("podresources_device_info"):
        assert "-" not in dict(labels)["numa_node"]
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1


# ---- 4. utilization and the true-zero / nothing-invented rules ------------------------------


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
        pods=[{"namespace": "ns", "name": "p", "numa": 0,
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
        pods=[{"namespace": "ns", "name": "p", "numa": 1, "containers": [
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
        pods=[{"namespace": "ns", "name": "p", "numa": 1,
               "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert util(s, "cpu") == {"1": 0.25}
    assert util(s, "memory") == {"0": 0}
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
        {"namespace": "ns", "name": "p", "numa": 1,
         "containers": [{"name": "c", "cpus": 2, "memory": "1Gi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    for name in ("podresources_cpus_allocatable", "podresources_cpus_allocated",
                 "podresources_container_cpus", "podresources_pod_cpus"):
        assert not s.series(name), name
    assert not util(s, "cpu")
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": GiB}
    # memory alone is an exclusive resource of known locality -> aligned on node 1
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
                            pods=[{"namespace": "ns", "name": "p", "numa": 0, "containers": [
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


# ---- 5. DRA --------------------------------------------------------------------------------


async def test_dra_devices_deduplicated_by_driver_pool_device_with_share_id():
    drv = "gpu.example.com"

    def dra(pool, device, claim, share_id=None, cdi=()):
        return DraDevice(drv, pool, device, claim, "ns", share_id, tuple(cdi))

    async with Node(small_profile()) as node:
        d0 = dra("p1", "d0", "shared-claim", cdi=("x/gpu=d0", "x/gpu=d0"))  # repeated CDI name
        put_pod(node, "ns", "p",
                # d0 repeated in the same claim; d1 a consumable-capacity share
                C("c1", dra_devices=(d0, d0, dra("p1", "d1", "shared-claim", "s-1"))),
                C("c2", dra_devices=(d0, dra("p2", "d0", "other-claim"))),
                C("c3", dra_devices=(dra("p1", "d1", "third-claim", "s-2"),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # distinct (driver, pool, device): p1 {d0, d1}, p2 {d0}
    assert s.by("podresources_dra_devices_allocated", "driver", "pool") == {
        (drv, "p1"): 2, (drv, "p2"): 1}
    info = {(d["container"], d["pool"], d["device"], d["claim"], d.get("share_id", "")): v
            for d, v in ((dict(k), v) for k, v in s.series("podresources_dra_device_info").items())}
    assert info == {("c1", "p1", "d0", "shared-claim", ""): 1,
                    ("c1", "p1", "d1", "shared-claim", "s-1"): 1,
                    ("c2", "p1", "d0", "shared-claim", ""): 1,
                    ("c2", "p2", "d0", "other-claim", ""): 1,
                    ("c3", "p1", "d1", "third-claim", "s-2"): 1}
    # DRA devices carry no NUMA information: no alignment series
    assert not s.series("podresources_container_numa_nodes", pod="p")


# ---- 6. alignment --------------------------------------------------------------------------


async def test_alignment_examples_of_the_spec():
    vf, gpu = "intel.com/vf", "vendor.com/gpu"
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                # CPUs on 0 + a device local to 0,1 -> 1 (aligned)
                C("a", cpu_ids=(1,), devices=(dev(gpu, "g0", [0, 1]),)),
                # CPUs on 1 + a VF on 0 -> 2 (misaligned)
                C("b", cpu_ids=(4,), devices=(dev(vf, "vf0", [0]),)),
                # CPUs on 0 + a memory block spanning 0,1 -> 2 (misaligned)
                C("c", cpu_ids=(2,), memory=(mem(GiB, [0, 1]),)),
                # CPUs on 0 + topology-less device + block without topology -> 1
                C("d", cpu_ids=(3,), devices=(dev("x/y", "xy0", None),),
                  memory=(mem(GiB, None, "hugepages-2Mi"),)),
                # memory only, on node 1 -> 1
                C("e", memory=(mem(GiB, [1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "a": 1, "b": 2, "c": 2, "d": 1, "e": 1}
    assert s.value("podresources_misaligned_containers") == 2


async def test_alignment_is_the_smallest_hitting_set():
    r = "vendor.com/dev"
    async with Node(nodes_profile([0, 1, 2])) as node:  # CPUs: n0 0-1, n1 2-3, n2 4-5
        put_pod(node, "ns", "p",
                # devices on {0,1} and {1,2}: node 1 hits both -> 1
                C("h1", devices=(dev(r, "a1", [0, 1]), dev(r, "b1", [1, 2]))),
                # {0,1} and {2}: no single node -> 2
                C("h2", devices=(dev(r, "a2", [0, 1]), dev(r, "c2", [2]))),
                # CPU on 0 and a device on {1,2} -> 2
                C("h3", cpu_ids=(0,), devices=(dev(r, "b3", [1, 2]),)),
                # {0,1}, {1,2}, {0,2}: pairwise only -> 2
                C("h4", devices=(dev(r, "a4", [0, 1]), dev(r, "b4", [1, 2]),
                                 dev(r, "c4", [0, 2]))),
                # CPU on 1 and devices on {0,1}, {1,2} -> 1
                C("h5", cpu_ids=(2,), devices=(dev(r, "a5", [0, 1]), dev(r, "b5", [1, 2]))),
                # block spanning 0,1 (uses both) + device {1,2} -> {0,1} -> 2
                C("h6", memory=(mem(GiB, [0, 1]),), devices=(dev(r, "b6", [1, 2]),)),
                # block spanning 0,1,2 -> 3
                C("h7", memory=(mem(GiB, [2, 0, 1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "h1": 1, "h2": 2, "h3": 2, "h4": 2, "h5": 1, "h6": 2, "h7": 3}
    assert s.value("podresources_misaligned_containers") == 5


async def test_alignment_series_only_for_containers_with_known_locality():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("cpus-on-0", cpu_ids=(1,)),
                C("unknown-dev", devices=(dev("x/y", "xy0", None),)),
                C("unknown-cpu", cpu_ids=(42,)),
                C("dropped-id", devices=(dev("x/y", "xy1", [9]),)),
                C("nothing"),
                cpu_ids=(1, 5))  # pod-level CPU 5 on node 1 counts toward no container
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {"cpus-on-0": 1}
    assert s.value("podresources_misaligned_containers") == 0


async def test_misaligned_containers_is_zero_with_v1_and_no_pods():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.value("podresources_misaligned_containers") == 0
    assert s.value("podresources_node_info", node="test-node", kubelet_api="v1") == 1


# ---- 7. data issues ------------------------------------------------------------------------


async def test_data_issues_are_counted_by_kind_and_the_rest_exported():
    r = "r/x"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "x0", [0]), dev(r, "x1", [1]), dev(r, "x2", [1])])
        put_pod(node, "ns", "p1", C("a", cpu_ids=(1, 2)))
        put_pod(node, "ns", "p2", C("b", cpu_ids=(2, 3)))  # CPU 2 held twice
        put_pod(node, "ns", "p3", C("c", cpu_ids=(0,)))  # CPU 0 is reserved: not allocatable
        put_pod(node, "ns", "p4", C("d", cpu_ids=(5, 5),  # duplicated CPU
                                    devices=(dev(r, "x1", [1]), dev(r, "x1", [1]))))  # dup entry
        put_pod(node, "ns", "p5", C("e", devices=(dev(r, "x2", [1]),)),
                C("f", devices=(dev(r, "x2", [1]),)))  # one device, two containers
        # the kubelet sends one block per memory type per container: this one twice
        put_pod(node, "ns", "p6", C("g", memory=(mem(GiB, [0]), mem(GiB, [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    for kind in ("cpu_multiple_owners", "cpu_not_allocatable", "duplicate_entry",
                 "device_multiple_owners"):
        assert issue(s, kind) > 0, (kind, issues(s))
    # node 0: {0,1,2,3} = 4 (CPU 2 once); node 1: {5} = 1
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 4, "1": 1}
    # node 1 devices: x1 and x2, each once
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"0": 0, "1": 2}
    assert s.value("podresources_container_cpus", namespace="ns", pod="p4", container="d",
                   numa_node="1") == 1
    assert s.value("podresources_container_devices", namespace="ns", pod="p4", container="d",
                   resource=r, numa_node="1") == 1
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": GiB, "1": 0}
    # node 0: 4 CPUs held against 3 allocatable -> capped at 1
    assert util(s, "cpu") == {"0": 1.0, "1": 0.25}
    assert issue(s, "allocated_exceeds_allocatable") > 0
    assert s.value("podresources_up") == 1


async def test_pod_and_container_listed_twice_are_counted_once():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("c", cpu_ids=(1, 2)), C("c", cpu_ids=(1, 2)))
        state = node.simulator.state
        # the same pod (ns/p) listed a second time by the kubelet
        state.pods[("ns", "p-again")] = dataclasses.replace(state.pods[("ns", "p")])
        state.version += 1
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
            text = s.text
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("p", "c", "0"): 2}
    assert issue(s, "duplicate_entry") > 0
    assert issue(s, "cpu_multiple_owners") == 0
    # a valid exposition: no sample line twice
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == len(set(lines))


# ---- 8. pods coming and going, sidecars, labels, capabilities --------------------------------


async def test_departed_pod_disappears_and_node_figures_return_to_zero():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"1": 2}}], pods=[
        {"namespace": "ns", "name": "p", "numa": 1, "containers": [
            {"name": "c", "cpus": 2, "memory": "2Gi", "devices": {"r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"1": 1}
        node.simulator.state.remove("ns", "p")
        s = await exporter.wait_for(lambda s: not s.series("podresources_device_info"),
                                    what="departed pod to vanish")
    for name in ("podresources_container_cpus", "podresources_container_memory_bytes",
                 "podresources_container_devices", "podresources_container_numa_nodes"):
        assert not s.series(name, pod="p"), name
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"1": 0}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 0}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0}


async def test_sidecars_are_counted_regular_init_containers_are_not():
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p", "numa": 1,
        "init_containers": [{"name": "init", "cpus": 1}],
        "sidecars": [{"name": "side", "cpus": 1}],
        "containers": [{"name": "app", "cpus": 2}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_container_cpus", "container", "numa_node", pod="p") == {
        ("side", "1"): 1, ("app", "1"): 2}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 3}
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "side": 1, "app": 1}


async def test_label_formats_decimal_ids_and_workload_labels():
    r = "vendor.com/nic"
    async with Node(nodes_profile([2, 3, 10])) as node:  # CPUs: n2 0-1, n3 2-3, n10 4-5
        set_allocatable(node, cpu_ids=range(6), memory=[mem(10 * GiB, [n]) for n in (2, 3, 10)],
                        devices=[dev(r, "nic-0", [10, 2])])
        put_pod(node, "team-a", "web-0", C("server", cpu_ids=(4,),
                                           devices=(dev(r, "nic-0", [2, 10]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"2": 2, "3": 2, "10": 2}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"2": 0, "3": 0, "10": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"2,10": 1}
    assert util(s, r) == {"2": 1.0, "10": 1.0}
    ((labels, value),) = s.series("podresources_container_cpus").items()
    assert dict(labels) == {"namespace": "team-a", "pod": "web-0", "container": "server",
                            "numa_node": "10"} and value == 1
    ((labels, value),) = s.series("podresources_device_info").items()
    assert dict(labels) == {"resource": r, "device_id": "nic-0", "numa_node": "2,10",
                            "namespace": "team-a", "pod": "web-0", "container": "server"}
    ((labels, value),) = s.series("podresources_container_numa_nodes").items()
    assert dict(labels) == {"namespace": "team-a", "pod": "web-0", "container": "server"}
    assert value == 1
    # no node label on the exporter's own series
    assert not any("node" in dict(k) for k in s.series("podresources_cpus_allocated"))


@pytest.mark.parametrize("faults, flags", [
    (Faults(get_allocatable="disabled"), ("false", "true")),
    (Faults(get_allocatable="unimplemented"), ("false", "true")),
    (Faults(get="unimplemented"), ("true", "false")),
    (Faults(get="disabled"), ("true", "false")),
])
async def test_kubelet_api_info_capability_flags(faults, flags):
    async with Node(small_profile(), faults=faults) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    get_allocatable, get = flags
    assert s.series("podresources_kubelet_api_info") == {
        (("api_version", "v1"), ("get", get), ("get_allocatable", get_allocatable),
         ("pod_level", "unknown")): 1}


async def test_pod_level_flag_becomes_true_once_seen_and_stays():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="unknown") == 1
        node.simulator.state.admit(parse_pod({
            "namespace": "ns", "name": "p", "pod_level": {"cpus": 1},
            "containers": [{"name": "c", "cpus": 1}]}))
        s = await exporter.wait_for(lambda s: s.series("podresources_pod_cpus"),
                                    what="pod-level pod")
        assert s.series("podresources_kubelet_api_info") == {
            (("api_version", "v1"), ("get", "true"), ("get_allocatable", "true"),
             ("pod_level", "true")): 1}
        node.simulator.state.remove("ns", "p")
        s = await exporter.wait_for(lambda s: not s.series("podresources_pod_cpus"),
                                    what="pod-level pod gone")
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="true") == 1


# ---- 9. further edges ----------------------------------------------------------------------


async def test_memory_only_numa_node_is_a_real_node():
    """A NUMA node without CPUs (CXL/HBM memory) is known to sysfs: its id is not dropped."""
    profile = small_profile(numa_nodes=[
        {"id": 0, "cpus": "0-3", "memory": "16Gi"},
        {"id": 1, "cpus": "4-7", "memory": "16Gi"},
        {"id": 2, "cpus": "", "memory": "64Gi"}])
    async with Node(profile) as node:
        set_allocatable(node, cpu_ids=range(1, 8),
                        memory=[mem(16 * GiB, [0]), mem(16 * GiB, [1]), mem(64 * GiB, [2])],
                        devices=[dev("r/cxl", "cxl0", [0, 2])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(1,), memory=(mem(8 * GiB, [2]),),
                                   devices=(dev("r/cxl", "cxl0", [2, 0]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4, "2": 0}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0, "2": 8 * GiB}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/cxl") == {"0,2": 1}
    assert util(s, "memory") == {"0": 0, "1": 0, "2": 0.125}
    assert util(s, "r/cxl") == {"0": 1.0, "2": 1.0}
    assert issue(s, "unknown_numa_id") == 0
    # CPU on 0, memory on 2 -> 2
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 2


async def test_apportioning_starts_from_zero_when_single_node_allocations_overflow():
    """"Allocatable left" never goes negative: an overfull node takes none of a group."""
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "big", C("c", memory=(mem(20 * GiB, [0]),)))  # 20 of 16 on node 0
        put_pod(node, "ns", "g", C("c", memory=(mem(4 * GiB, [0, 1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # node 0 left = 0 -> the whole 4Gi on node 1
    assert util(s, "memory") == {"0": 1.0, "1": 0.25}
    assert issue(s, "allocated_exceeds_allocatable") > 0


async def test_block_left_with_one_known_id_is_single_node_before_groups():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "s", C("c", memory=(mem(10 * GiB, [7, 1]),)))  # -> node 1
        put_pod(node, "ns", "g", C("c", memory=(mem(20 * GiB, [0, 1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 10 * GiB, "0,1": 20 * GiB}
    # left n0 16, n1 6; group 20Gi: n0 +16, n1 +4 -> n1 14/16
    assert util(s, "memory") == {"0": 1.0, "1": pytest.approx(14 / 16)}
    assert issue(s, "unknown_numa_id") > 0
    assert issue(s, "allocated_exceeds_allocatable") == 0


async def test_cpu_held_by_two_pods_and_negative_cpu_id():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "a", C("c"), cpu_ids=(1, 2))  # pod-level only
        put_pod(node, "ns", "b", C("c", cpu_ids=(2, -1)))  # CPU 2 again (another pod), CPU -1
        put_pod(node, "ns", "s", C("x", cpu_ids=(5,)), C("y", cpu_ids=(5,)))  # same pod, twice
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # node 0 {1,2}; node 1 {5}; -1 is no CPU sysfs knows -> unknown
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 1, "unknown": 1}
    assert issue(s, "cpu_multiple_owners") > 0
    assert issue(s, "unknown_cpu") > 0
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("b", "c", "0"): 1, ("b", "c", "unknown"): 1, ("s", "x", "1"): 1, ("s", "y", "1"): 1}


async def test_pod_level_cpus_of_two_pods_overlapping_are_counted_once_and_flagged():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "a", C("c"), cpu_ids=(1, 2))
        put_pod(node, "ns", "b", C("c"), cpu_ids=(2, 3))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
    assert issue(s, "cpu_multiple_owners") > 0


async def test_dra_device_prepared_for_two_pods_is_one_device():
    d = DraDevice("drv.example.com", "pool", "d0", "claim", "ns", None, ("x/y=d0",))
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "a", C("c", dra_devices=(d,)))
        put_pod(node, "ns", "b", C("c", dra_devices=(d,)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_dra_devices_allocated", "driver", "pool") == {
        ("drv.example.com", "pool"): 1}
    assert s.by("podresources_dra_device_info", "pod", "device") == {("a", "d0"): 1,
                                                                      ("b", "d0"): 1}


async def test_alignment_on_many_numa_nodes_is_exact_and_fast():
    """40 NUMA nodes, devices local to {i, i+1}: the minimum hitting set of a 40-node path is
    20 nodes, and the answer comes without a 2^40 enumeration. (A greedy cover happens to be
    exact on a path; test_alignment_smallest_set_beyond_24_candidate_nodes is the trap.)"""
    async with Node(nodes_profile(list(range(40)), cpus_per_node=1, memory="1Gi")) as node:
        put_pod(node, "ns", "p", C("c", devices=tuple(
            dev("r/x", f"d{i}", [i, i + 1]) for i in range(39))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready(timeout=30)
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 20


async def test_odd_device_id_characters_are_escaped_in_labels():
    weird = 'pci:0000:17"00.1\\fn\nx'
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("c", devices=(dev("r/x", weird, [0]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_device_info", "device_id") == {weird: 1}


async def test_duplicated_allocatable_memory_block_is_counted_once():
    async with Node(small_profile()) as node:
        blocks = small_allocatable_memory()
        set_allocatable(node, cpu_ids=range(1, 8), memory=[*blocks, blocks[0]])  # (0, memory) x2
        put_pod(node, "ns", "p", C("c", memory=(mem(8 * GiB, [0]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # the kubelet reports one block per (NUMA node, memory type): the second one is a duplicate
    assert s.by("podresources_memory_allocatable_bytes", "numa_node", memory_type="memory") == {
        "0": 16 * GiB, "1": 16 * GiB}
    assert util(s, "memory") == {"0": 0.5, "1": 0}
    assert issue(s, "duplicate_entry") > 0


async def test_duplicated_pod_level_memory_block_is_counted_once():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("c", cpu_ids=(1,), memory=(mem(GiB, [0]),)),
                cpu_ids=(1,), memory=(mem(2 * GiB, [0]), mem(2 * GiB, [0])))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # max(pod-level 2Gi, containers 1Gi) = 2Gi, not 4Gi
    assert s.value("podresources_memory_allocated_bytes", numa_node="0",
                   memory_type="memory") == 2 * GiB
    assert s.value("podresources_pod_memory_bytes", namespace="ns", pod="p", numa_node="0",
                   memory_type="memory") == 2 * GiB
    assert issue(s, "duplicate_entry") > 0


_VOLATILE = ("podresources_up", "podresources_last_refresh", "podresources_refresh_duration",
             "podresources_api_request", "podresources_backoff", "podresources_data_issues",
             "podresources_build_info", "process_")


def _figures(s) -> dict:
    return {k: v for k, v in s.samples.items()
            if not k[0].startswith(_VOLATILE) and not k[0].endswith("_created")}


async def test_figures_after_churn_equal_a_fresh_read():
    """Departed pods leave no trace: after churn, and pods that steal CPUs, devices and memory
    from others then leave, the figures equal those of an exporter that starts fresh."""
    async with Node("dual-socket-gpu") as node, \
            Exporter(node.settings(interval=0.05)) as seasoned:
        await seasoned.ready()
        state = node.simulator.state
        for round_ in range(24):
            node.simulator.churn(3)
            if round_ % 4 == 1:
                victim = next(iter(state.pods.values())).assignment.containers[0]
                put_pod(node, "x", f"thief-{round_}", C(
                    "t", cpu_ids=victim.cpu_ids[:2], devices=victim.devices,
                    memory=victim.memory))
            if round_ % 4 == 3:
                for key in [k for k in state.pods if k[0] == "x"]:
                    state.remove(*key)
            await asyncio.sleep(0.1)
        for key in [k for k in state.pods if k[0] == "x"]:
            state.remove(*key)
        async with Exporter(node.settings()) as fresh:
            expected = _figures(await fresh.ready())
        await seasoned.wait_for(lambda s: _figures(s) == expected, timeout=10,
                                what="the seasoned exporter to match a fresh one")


async def test_pod_level_block_spanning_the_containers_groups_is_not_double_counted():
    # The simulator's own allocator (best-effort "spread" placement), no hand edits:
    #   a: 12Gi on (0); b: 12Gi on (0,1) (4Gi left on node 0 + 8Gi from node 1);
    #   pod-level: 25Gi on (0,1) = 12 + 12 + its own 1Gi, including both containers' blocks.
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p", "placement": "spread", "pod_level": {"memory": "1Gi"},
        "containers": [{"name": "a", "memory": "12Gi"}, {"name": "b", "memory": "12Gi"}]}])
    async with Node(profile) as node:
        pod = node.simulator.state.pods[("ns", "p")].assignment
        assert [b.numa_ids for c in pod.containers for b in c.memory] == [(0,), (0, 1)]
        assert pod.memory == (mem(25 * GiB, [0, 1]),)
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    allocated = s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory")
    # 25Gi are assigned on the node, whatever the split between "0" and "0,1"
    assert sum(allocated.values()) == 25 * GiB
    # node 0 full (16Gi), 9Gi on node 1; nothing exceeds allocatable (25 <= 32)
    assert util(s, "memory") == {"0": 1.0, "1": pytest.approx(9 / 16)}
    assert issue(s, "allocated_exceeds_allocatable") == 0


async def test_alignment_smallest_set_beyond_24_candidate_nodes():
    # 25 NUMA nodes. a=0, b=1 hit everything but the pads; t=2 is in the most sets (a trap).
    # sets {0,2,3} {0,2,4} {1,2,5} {1,2,6} {0,7} {1,8} + 8 disjoint pads {9,10} ... {23,24}
    # smallest: {0, 1} + one per pad = 10. Greedy takes 2 first and needs 11.
    sets = [[0, 2, 3], [0, 2, 4], [1, 2, 5], [1, 2, 6], [0, 7], [1, 8]] + [
        [9 + 2 * k, 10 + 2 * k] for k in range(8)]
    async with Node(nodes_profile(list(range(25)), cpus_per_node=1, memory="1Gi")) as node:
        put_pod(node, "ns", "p", C("c", devices=tuple(
            dev("r/x", f"d{i}", ids) for i, ids in enumerate(sets))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 10


# ---- 10. the kubelet as it really behaves (facts 1, 3, 4, 5, 7) ------------------------------

LIFECYCLE_PODS = [
    {"namespace": "ns", "name": "running", "numa": 0,
     "containers": [{"name": "c", "cpus": 2, "memory": "1Gi", "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "pending", "numa": 1, "phase": "Pending",
     "containers": [{"name": "c", "cpus": 1, "memory": "2Gi", "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "terminating", "numa": 1, "terminating": True,
     "containers": [{"name": "c", "cpus": 1}]},
    {"namespace": "ns", "name": "done", "phase": "Succeeded",
     "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]},
]
# Admission in this order: running CPUs {1,2} + x-0 on node 0; pending {4} + x-2 and
# terminating {5} on node 1; done fits node 0 first: {3} + x-1, freed again when it ended.


async def test_pending_and_terminating_pods_hold_resources_terminated_ones_are_gone():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE_PODS)
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert {dict(k)["pod"] for k in s.series("podresources_container_cpus")} == {
        "running", "pending", "terminating"}
    # node 0: {1,2} of {1,2,3}; node 1: {4,5} of {4,5,6,7}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 2}
    assert util(s, "cpu") == {"0": pytest.approx(2 / 3), "1": 0.5}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": GiB, "1": 2 * GiB}
    # x-0 on 0, x-2 on 1: 1 of 2 on each node
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {
        "0": 1, "1": 1}
    assert util(s, "r/x") == {"0": 0.5, "1": 0.5}
    assert sum(issues(s).values()) == 0


async def test_old_kubelet_lists_terminated_pods_without_devices_cpus_linger():
    profile = small_profile(kubernetes_version="1.30",
                            devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE_PODS)
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # done is listed: its CPU 3 lingers (node 0: {1,2,3} = 3 of 3), its device x-1 is gone
    assert s.by("podresources_container_cpus", "pod", "numa_node") == {
        ("running", "0"): 2, ("pending", "1"): 1, ("terminating", "1"): 1, ("done", "0"): 1}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 2}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {
        "0": 1, "1": 1}
    assert {dict(k)["pod"] for k in s.series("podresources_device_info")} == {
        "running", "pending"}
    assert sum(issues(s).values()) == 0


async def test_v1alpha1_repeated_device_ids_are_one_device():
    profile = small_profile(
        devices=[{"resource": "r/m", "count": 2, "numa": [0, 1]},
                 {"resource": "r/x", "per_numa": {"0": 2}}],
        pods=[{"namespace": "ns", "name": "p",
               "sidecars": [{"name": "side", "devices": {"r/x": 1}}],
               "containers": [{"name": "c", "devices": {"r/m": 2, "r/x": 1}}]}])
    async with Node(profile, faults=Faults(v1=False)) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # v1alpha1 shows c only (no sidecars): m-0 and m-1 twice each (two NUMA nodes), one r/x
    # -> 2 distinct r/m and 1 r/x, without topology
    assert s.by("podresources_devices_allocated", "numa_node", "resource") == {
        ("unknown", "r/m"): 2, ("unknown", "r/x"): 1}
    assert s.by("podresources_container_devices", "container", "resource") == {
        ("c", "r/m"): 2, ("c", "r/x"): 1}
    assert not s.series("podresources_devices_allocated_unavailable")  # no allocatable view
    assert issue(s, "duplicate_entry") == 0
    assert sum(issues(s).values()) == 0


async def test_a_dra_claim_named_twice_is_counted_once():
    profile = small_profile(
        dra_pools=[{"driver": "d.example.com", "pool": "p1", "devices": ["a", "b", "c"]}],
        pods=[{"namespace": "ns", "name": "p",
               "claims": [{"name": "pair", "driver": "d.example.com", "count": 2}],
               "containers": [{"name": "c", "claims": ["pair", "pair"]},
                              {"name": "d", "claims": ["pair"]}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # c gets the whole claim {a, b} twice, d once: two distinct devices, one info row per
    # (device, container)
    assert s.by("podresources_dra_devices_allocated", "driver", "pool") == {
        ("d.example.com", "p1"): 2}
    assert s.by("podresources_dra_device_info", "container", "device") == {
        ("c", "a"): 1, ("c", "b"): 1, ("d", "a"): 1, ("d", "b"): 1}
    assert sum(issues(s).values()) == 0


async def test_pod_level_memory_for_some_types_only_is_normal():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("a", cpu_ids=(1,), memory=(mem(2 * GiB, [0]), mem(512 * MiB, [0],
                                                                     "hugepages-2Mi"))),
                C("b", cpu_ids=(2,), memory=(mem(256 * MiB, [0], "hugepages-2Mi"),)),
                cpu_ids=(1, 2, 3), memory=(mem(3 * GiB, [0]),))  # no pod-level hugepages
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # memory on 0: max(pod-level 3Gi, containers 2Gi) = 3Gi -> 3/16
    # hugepages-2Mi on 0: no pod-level block, the containers' 512Mi + 256Mi = 768Mi -> 0.75
    assert s.by("podresources_memory_allocated_bytes", "numa_node", "memory_type") == {
        ("0", "memory"): 3 * GiB, ("1", "memory"): 0,
        ("0", "hugepages-2Mi"): 768 * MiB, ("1", "hugepages-2Mi"): 0}
    assert util(s, "memory") == {"0": pytest.approx(3 / 16), "1": 0}
    assert util(s, "hugepages-2Mi") == {"0": 0.75, "1": 0}
    assert s.by("podresources_pod_memory_bytes", "numa_node", "memory_type", pod="p") == {
        ("0", "memory"): 3 * GiB}
    assert sum(issues(s).values()) == 0


async def test_pod_level_memory_for_some_types_only_from_the_simulator():
    # the simulator's allocator: pod-level names memory only (1Gi beyond the containers'),
    # the container holds 2Gi of memory and 256Mi of 2Mi pages, all on node 0
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p", "numa": 0, "pod_level": {"cpus": 1, "memory": "1Gi"},
        "containers": [{"name": "c", "cpus": 1, "memory": "2Gi", "hugepages-2Mi": "256Mi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # memory: pod-level 3Gi (2 + 1) includes the container's 2Gi; hugepages: 256Mi
    assert s.value("podresources_memory_allocated_bytes", numa_node="0",
                   memory_type="memory") == 3 * GiB
    assert s.value("podresources_memory_allocated_bytes", numa_node="0",
                   memory_type="hugepages-2Mi") == 256 * MiB
    assert sum(issues(s).values()) == 0


async def test_numa_nodes_without_cpus_get_zero_cpus_and_nothing_invented():
    profile = small_profile(numa_nodes=[
        {"id": 0, "cpus": "0-3", "memory": "16Gi"},
        {"id": 1, "cpus": "4-7", "memory": "16Gi"},
        {"id": 2, "cpus": "", "memory": "32Gi"},  # HBM or CXL memory
        {"id": 3, "cpus": "", "memory": "0"}],  # reserved id, nothing behind it
        pods=[{"namespace": "ns", "name": "p", "numa": 0,
               "containers": [{"name": "c", "cpus": 1, "memory": "1Gi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4, "2": 0, "3": 0}
    # no CPU is allocatable on 2 or 3: no CPU series there, not a zero
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 3, "1": 4}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 1, "1": 0}
    assert set(util(s, "cpu")) == {"0", "1"}
    # memory: node 2 has allocatable memory (a true zero allocated), node 3 none (no series)
    assert s.by("podresources_memory_allocatable_bytes", "numa_node", memory_type="memory") == {
        "0": 16 * GiB, "1": 16 * GiB, "2": 32 * GiB}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": GiB, "1": 0, "2": 0}
    assert util(s, "memory") == {"0": 1 / 16, "1": 0, "2": 0}
    assert sum(issues(s).values()) == 0
