"""SPEC section 2, the kubelet as it really behaves (facts 1, 3, 4, 5, 7): pending, terminating
and terminated pods, repeated ids, pod-level memory for some types only.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from exporter.simulator import Faults

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    MiB,
    issue,
    issues,
    mem,
    put_pod,
    util,
)

LIFECYCLE_PODS = [
    {"namespace": "ns", "name": "running",
     "containers": [{"name": "c", "cpus": 2, "memory": "1Gi", "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "pending", "phase": "Pending",
     "containers": [{"name": "c", "cpus": 1, "memory": "2Gi", "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "terminating", "terminating": True,
     "containers": [{"name": "c", "cpus": 1}]},
    {"namespace": "ns", "name": "done", "phase": "Succeeded",
     "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]},
]
# Admitted in this order, each on the lowest NUMA node that holds it (single-numa-node):
# running CPUs {1,2} + x-0 and pending {3} + x-1 on node 0; terminating {4} and done {5} + x-2
# on node 1, with the 128Mi a Guaranteed container without a memory limit is given; done is
# freed again when it ended.


async def test_pending_and_terminating_pods_hold_resources_terminated_ones_are_gone():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE_PODS)
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert {dict(k)["pod"] for k in s.series("podresources_container_cpus")} == {
        "running", "pending", "terminating"}
    # node 0: {1,2,3} of {1,2,3}; node 1: {4} of {4,5,6,7}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 1}
    assert util(s, "cpu") == {"0": 1.0, "1": 0.25}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 3 * GiB, "1": 128 * MiB}
    # x-0 and x-1 on 0; done's x-2 is free again
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {
        "0": 2, "1": 0}
    assert util(s, "r/x") == {"0": 1.0, "1": 0}
    assert sum(issues(s).values()) == 0


async def test_old_kubelet_lists_terminated_pods_without_devices_cpus_linger():
    profile = small_profile(kubernetes_version="1.30",
                            devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE_PODS)
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    # done is listed: its CPU 5 lingers (node 1: {4,5}), its device x-2 is gone
    assert s.by("podresources_container_cpus", "pod", "numa_node") == {
        ("running", "0"): 2, ("pending", "0"): 1, ("terminating", "1"): 1, ("done", "1"): 1}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 2}
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {
        "0": 2, "1": 0}
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
    # a pod-level pool (PodLevelResourceManagers, scope pod) names memory only (1Gi beyond
    # the containers'), the container holds 2Gi of memory and 256Mi of 2Mi pages, all on
    # node 0, the lowest that holds the pod
    profile = small_profile(topology_manager_scope="pod",
                            feature_gates={"PodLevelResourceManagers": True}, pods=[{
        "namespace": "ns", "name": "p", "pod_level": {"cpus": 1, "memory": "1Gi"},
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
        pods=[{"namespace": "ns", "name": "p",
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
