"""SPEC section 2, memory: pod-level memory, NUMA groups and how memory is apportioned to them.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    MiB,
    issue,
    mem,
    nodes_profile,
    put_pod,
    util,
)


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
