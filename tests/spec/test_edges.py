"""SPEC section 2, further edges: memory-only NUMA nodes, odd ids, duplicates, churn, many NUMA
nodes.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import asyncio

import pytest

from exporter.model import DraDevice

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    issue,
    mem,
    nodes_profile,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)


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


# ... and what the kubelet was once seen to support stays: the pod-level fields of the
# pipeline admitted under scope pod, gone with churn (its copies are admitted under the node's
# scope container, without a pod-level pool)
_VOLATILE = ("podresources_up", "podresources_last_refresh", "podresources_refresh_duration",
             "podresources_api_request", "podresources_backoff", "podresources_data_issues",
             "podresources_build_info", "process_", "podresources_kubelet_api_info")


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
    # The kubelet's own placement, no hand edits: best-effort, scope pod, a pod-level pool
    # (PodLevelResourceManagers): the pod's 24Gi fit no node (16Gi), so its hint is {0,1};
    #   a: 12Gi on (0,1) (node 0 filled first); b: 12Gi on (0,1) (4Gi left on node 0 + 8Gi
    #   from node 1); its own 1Gi beyond them on node 1 (its CPUs' node 0 has no memory
    #   left); pod-level: 25Gi on (0,1), including both containers' blocks.
    profile = small_profile(
        topology_manager_policy="best-effort", topology_manager_scope="pod",
        feature_gates={"PodLevelResourceManagers": True}, pods=[{
            "namespace": "ns", "name": "p", "pod_level": {"memory": "1Gi"},
            "containers": [{"name": "a", "cpus": 1, "memory": "12Gi"},
                           {"name": "b", "cpus": 1, "memory": "12Gi"}]}])
    async with Node(profile) as node:
        pod = node.simulator.state.pods[("ns", "p")].assignment
        assert [b.numa_ids for c in pod.containers for b in c.memory] == [(0, 1), (0, 1)]
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
