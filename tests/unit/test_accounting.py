"""Accounting rules (SPEC section 2), one test per rule, expected figures computed by hand.

Machine used unless a test says otherwise: NUMA node 0 holds CPUs 0-3, node 1 holds CPUs 4-7.
"""

from __future__ import annotations

import pytest

from exporter.accounting import (
    Ledger,
    account,
    apportion_group_memory,
    min_numa_nodes,
)
from exporter.issues import IssueKind
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    DeviceEntry as D,
    DraDevice,
    KubeletSnapshot,
    MemoryBlock as M,
    NumaNode,
    PodAssignment as P,
    Topology,
)

GiB = 1 << 30


def topology(*cpus_per_node: range) -> Topology:
    return Topology.from_nodes(
        [NumaNode(numa_id=i, cpus=frozenset(cpus)) for i, cpus in enumerate(cpus_per_node)])


TWO_NODES = topology(range(0, 4), range(4, 8))
ALL_CPUS = Allocatable(cpu_ids=tuple(range(8)))


def snap(*pods: P, allocatable: Allocatable | None = ALL_CPUS, api: str = "v1") -> KubeletSnapshot:
    return KubeletSnapshot(pods=pods, allocatable=allocatable, api_version=api)


# ---- CPUs ---------------------------------------------------------------------------------

def test_exclusive_cpus_are_counted_per_numa_node_and_shared_pool_containers_count_nothing():
    result = account(snap(
        P("ns", "guaranteed", (C("app", cpu_ids=(0, 1, 5)),)),
        P("ns", "burstable", (C("app", cpu_ids=()),)),  # shared pool: empty, never "zero CPUs"
        allocatable=Allocatable(cpu_ids=(1, 2, 3, 4, 5, 6, 7)),  # CPU 0 reserved
    ), TWO_NODES)
    assert result.cpus_allocatable == {"0": 3, "1": 4}
    assert result.cpus_allocated == {"0": 2, "1": 1}
    assert result.container_cpus == {("ns", "guaranteed", "app", "0"): 2,
                                     ("ns", "guaranteed", "app", "1"): 1}
    assert result.utilization[("0", "cpu")] == pytest.approx(2 / 3)
    assert result.utilization[("1", "cpu")] == pytest.approx(1 / 4)
    # CPU 0 is assigned although reserved: inconsistent, counted, still exported
    assert result.data_issues == {IssueKind.CPU_NOT_ALLOCATABLE: 1}


def test_sidecar_containers_are_accounted_like_app_containers():
    result = account(snap(P("ns", "p", (
        C("proxy-sidecar", cpu_ids=(4,)),  # restartable init containers come first
        C("app", cpu_ids=(5, 6)),
    ))), TWO_NODES)
    assert result.cpus_allocated == {"0": 0, "1": 3}
    assert result.container_cpus[("ns", "p", "proxy-sidecar", "1")] == 1
    assert result.container_cpus[("ns", "p", "app", "1")] == 2
    assert result.containers == 2


def test_pod_level_cpus_overlap_container_cpus_and_are_counted_once():
    # Pod-level cpu_ids include the containers' CPUs (0, 1) plus the pod's own pool (2, 3).
    result = account(snap(P("ns", "p", (C("a", cpu_ids=(0, 1)), C("b")), cpu_ids=(0, 1, 2, 3))),
                     TWO_NODES)
    assert result.cpus_allocated == {"0": 4, "1": 0}
    assert result.pod_cpus == {("ns", "p", "0"): 4}
    assert result.container_cpus == {("ns", "p", "a", "0"): 2}
    assert result.pod_level_seen is True
    assert not result.data_issues


def test_a_cpu_assigned_to_two_containers_is_counted_once_and_reported():
    result = account(snap(
        P("ns", "p1", (C("a", cpu_ids=(4, 5)),)),
        P("ns", "p2", (C("b", cpu_ids=(5, 6)),)),
    ), TWO_NODES)
    assert result.cpus_allocated == {"0": 0, "1": 3}
    assert result.data_issues[IssueKind.CPU_MULTIPLE_OWNERS] == 1


def test_cpu_missing_from_sysfs_is_attributed_to_unknown():
    result = account(snap(P("ns", "p", (C("a", cpu_ids=(3, 12)),)),
                          allocatable=Allocatable(cpu_ids=(*range(8), 12))), TWO_NODES)
    assert result.cpus_allocatable == {"0": 4, "1": 4, "unknown": 1}
    assert result.cpus_allocated == {"0": 1, "1": 0, "unknown": 1}
    assert ("unknown", "cpu") not in result.utilization
    assert result.data_issues[IssueKind.UNKNOWN_CPU] >= 1


# ---- devices ------------------------------------------------------------------------------

def test_device_entries_are_aggregated_by_resource_and_id():
    # The kubelet sends one entry per device per NUMA node; gpu-1 is local to both nodes.
    result = account(snap(P("ns", "p", (C("a", devices=(
        D("nvidia.com/gpu", ("gpu-1",), (1,)),
        D("nvidia.com/gpu", ("gpu-0",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (0,)),
    )),)), allocatable=Allocatable(devices=(
        D("nvidia.com/gpu", ("gpu-0",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (1,)),
        D("nvidia.com/gpu", ("gpu-2",), (1,)),
    ))), TWO_NODES)
    assert result.devices_allocated == {("0", "nvidia.com/gpu"): 1, ("0,1", "nvidia.com/gpu"): 1,
                                        ("1", "nvidia.com/gpu"): 0}
    assert result.devices_allocatable == {("0", "nvidia.com/gpu"): 1,
                                          ("0,1", "nvidia.com/gpu"): 1,
                                          ("1", "nvidia.com/gpu"): 1}
    assert sum(result.devices_allocated.values()) == 2
    assert result.container_devices == {("ns", "p", "a", "nvidia.com/gpu", "0"): 1,
                                        ("ns", "p", "a", "nvidia.com/gpu", "0,1"): 1}
    assert result.device_info == [("nvidia.com/gpu", "gpu-0", "0", "ns", "p", "a"),
                                  ("nvidia.com/gpu", "gpu-1", "0,1", "ns", "p", "a")]
    assert not result.data_issues


def test_group_devices_count_toward_each_member_node_on_both_sides_of_utilization():
    # node 0: gpu-0 (local) + gpu-1 (0,1) allocatable; both allocated -> 2/2
    # node 1: gpu-1 (0,1) + gpu-2 allocatable; gpu-1 allocated -> 1/2
    result = account(snap(P("ns", "p", (C("a", devices=(
        D("nvidia.com/gpu", ("gpu-0",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (1,)),
    )),)), allocatable=Allocatable(devices=(
        D("nvidia.com/gpu", ("gpu-0",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (0,)),
        D("nvidia.com/gpu", ("gpu-1",), (1,)),
        D("nvidia.com/gpu", ("gpu-2",), (1,)),
    ))), TWO_NODES)
    assert result.utilization[("0", "nvidia.com/gpu")] == 1.0
    assert result.utilization[("1", "nvidia.com/gpu")] == 0.5


def test_device_without_topology_is_unknown_and_has_no_utilization():
    dongle = D("example.com/dongle", ("d0",), None)
    result = account(snap(P("ns", "p", (C("a", devices=(dongle,)),)),
                          allocatable=Allocatable(devices=(
                              D("example.com/dongle", ("d0",), None),
                              D("example.com/dongle", ("d1",), None))),
                          ), TWO_NODES)
    assert result.devices_allocatable == {("unknown", "example.com/dongle"): 2}
    assert result.devices_allocated == {("unknown", "example.com/dongle"): 1}
    assert not any(resource == "example.com/dongle" for _, resource in result.utilization)
    # unknown locality does not make the container aligned or misaligned: no alignment series
    assert result.container_numa_nodes == {}
    assert result.misaligned_containers == 0


def test_numa_ids_unknown_to_sysfs_are_dropped_and_counted():
    # A device local to {0, 7} on a two-node machine is attributed to "0"; {-1} to unknown.
    result = account(snap(P("ns", "p", (C("a", devices=(
        D("vendor/nic", ("vf-0",), (0,)),
        D("vendor/nic", ("vf-0",), (7,)),
        D("vendor/nic", ("vf-1",), (-1,)),
    )),)), allocatable=None), TWO_NODES)
    assert result.devices_allocated == {("0", "vendor/nic"): 1, ("unknown", "vendor/nic"): 1}
    assert result.data_issues[IssueKind.UNKNOWN_NUMA_ID] == 1
    assert result.data_issues[IssueKind.NEGATIVE_NUMA_ID] == 1


def test_a_device_in_two_containers_is_counted_once_and_reported():
    result = account(snap(
        P("ns", "p1", (C("a", devices=(D("r/x", ("d0",), (0,)),)),)),
        P("ns", "p2", (C("b", devices=(D("r/x", ("d0",), (0,)),)),)),
        allocatable=Allocatable(devices=(D("r/x", ("d0",), (0,)), D("r/x", ("d1",), (0,)))),
    ), TWO_NODES)
    assert result.devices_allocated == {("0", "r/x"): 1}
    assert result.utilization[("0", "r/x")] == 0.5
    assert result.data_issues[IssueKind.DEVICE_MULTIPLE_OWNERS] == 1
    assert len(result.device_info) == 2  # both holders are shown


def test_an_assigned_device_allocatable_does_not_list_is_unavailable_not_an_issue():
    # d1 turned unhealthy (or its plugin is not registered): it leaves allocatable but stays
    # assigned. Node 1: allocatable {d0, d2} = 2; allocated side counts listed assigned
    # devices only, {d0} = 1 -> 1/2 (not {d0, d1} = 2/2). d1 is unavailable on "1".
    result = account(snap(P("ns", "p", (C("a", devices=(
        D("r/x", ("d0",), (1,)), D("r/x", ("d1",), (1,)))),)),
        allocatable=Allocatable(devices=(D("r/x", ("d0",), (1,)), D("r/x", ("d2",), (1,))))),
        TWO_NODES)
    assert result.devices_allocated == {("1", "r/x"): 2}
    assert result.devices_allocated_unavailable == {("1", "r/x"): 1}
    assert result.utilization[("1", "r/x")] == 0.5
    assert not result.data_issues


def test_unavailable_devices_follow_allocatable_changes():
    # The same pods, allocatable read three times: the plugin unregistered (nothing listed),
    # registered again, then one device unhealthy. The ledger recounts on each change.
    pod = P("ns", "p", (C("a", devices=(D("r/x", ("d0",), (0,)), D("r/x", ("d1",), (0,)))),))
    both = Allocatable(devices=(D("r/x", ("d0",), (0,)), D("r/x", ("d1",), (0,)),
                                D("r/x", ("d2",), (0,))))
    ledger = Ledger()
    # nothing listed: 2 unavailable on "0", no allocatable there, so no ratio and no excess
    result = ledger.update((pod,), Allocatable(), TWO_NODES)
    assert result.devices_allocated == {("0", "r/x"): 2}
    assert result.devices_allocated_unavailable == {("0", "r/x"): 2}
    assert ("0", "r/x") not in result.utilization and not result.data_issues
    # all three listed: 0 unavailable, 2/3
    result = ledger.update((pod,), both, TWO_NODES)
    assert result.devices_allocated_unavailable == {("0", "r/x"): 0}
    assert result.utilization[("0", "r/x")] == pytest.approx(2 / 3)
    # d1 unhealthy: listed {d0, d2}; allocated side {d0} -> 1/2; d1 unavailable
    result = ledger.update((pod,), Allocatable(devices=(D("r/x", ("d0",), (0,)),
                                                        D("r/x", ("d2",), (0,)))), TWO_NODES)
    assert result.devices_allocated_unavailable == {("0", "r/x"): 1}
    assert result.utilization[("0", "r/x")] == 0.5
    # and the pod leaving brings every count back to 0
    result = ledger.update((), both, TWO_NODES)
    assert result.devices_allocated == {("0", "r/x"): 0}
    assert result.devices_allocated_unavailable == {("0", "r/x"): 0}


def test_device_listed_on_another_numa_node_than_assigned_is_an_excess():
    # List puts d0 on node 1, allocatable on node 0: node 1 has nothing of r/x allocatable,
    # yet a listed device is counted there -> inconsistent, an excess (no ratio on node 1)
    result = account(snap(P("ns", "p", (C("a", devices=(D("r/x", ("d0",), (1,)),)),)),
                          allocatable=Allocatable(devices=(D("r/x", ("d0",), (0,)),))),
                     TWO_NODES)
    assert result.devices_allocated == {("0", "r/x"): 0, ("1", "r/x"): 1}
    assert result.devices_allocated_unavailable == {("0", "r/x"): 0, ("1", "r/x"): 0}
    assert result.utilization == {("0", "r/x"): 0.0}
    assert result.data_issues == {IssueKind.ALLOCATED_EXCEEDS_ALLOCATABLE: 1}


def test_no_unavailable_figures_without_get_allocatable_or_under_v1alpha1():
    pod = P("ns", "p", (C("a", devices=(D("r/x", ("d0",), (0,)),)),))
    assert account(snap(pod, allocatable=None), TWO_NODES).devices_allocated_unavailable is None
    assert account(snap(pod, allocatable=None, api="v1alpha1"),
                   TWO_NODES).devices_allocated_unavailable is None


def test_v1alpha1_repeated_device_id_is_one_device_not_a_duplicate():
    # v1alpha1 keeps the kubelet's per-NUMA entries without topology: gpu-1 (local to two
    # NUMA nodes) appears twice. Distinct ids: {gpu-0, gpu-1} = 2, under "unknown".
    result = account(snap(P("ns", "p", (C("a", devices=(
        D("nvidia.com/gpu", ("gpu-1",), None), D("nvidia.com/gpu", ("gpu-0",), None),
        D("nvidia.com/gpu", ("gpu-1",), None))),)), allocatable=None, api="v1alpha1"),
        TWO_NODES)
    assert result.devices_allocated == {("unknown", "nvidia.com/gpu"): 2}
    assert result.container_devices == {("ns", "p", "a", "nvidia.com/gpu", "unknown"): 2}
    assert not result.data_issues


def test_true_zero_is_exported_for_every_allocatable_key():
    result = account(snap(P("ns", "idle", (C("app"),)), allocatable=Allocatable(
        cpu_ids=(1, 2, 5),
        memory=(M("memory", 10 * GiB, (0,)), M("hugepages-1Gi", 4 * GiB, (1,))),
        devices=(D("r/x", ("d0",), (1,)),))), TWO_NODES)
    assert result.cpus_allocated == {"0": 0, "1": 0}
    assert result.memory_allocated == {("0", "memory"): 0, ("1", "hugepages-1Gi"): 0}
    assert result.devices_allocated == {("1", "r/x"): 0}
    assert result.utilization == {("0", "cpu"): 0.0, ("1", "cpu"): 0.0, ("0", "memory"): 0.0,
                                  ("1", "hugepages-1Gi"): 0.0, ("1", "r/x"): 0.0}


# ---- memory -------------------------------------------------------------------------------

def test_memory_blocks_spanning_nodes_are_attributed_to_the_group():
    result = account(snap(P("ns", "p", (C("a", memory=(
        M("memory", 12 * GiB, (1, 0)), M("hugepages-2Mi", 512 << 20, (1,)))),)),
        allocatable=Allocatable(memory=(
            M("memory", 10 * GiB, (0,)), M("memory", 10 * GiB, (1,)),
            M("hugepages-2Mi", GiB, (0,)), M("hugepages-2Mi", GiB, (1,))))), TWO_NODES)
    assert result.memory_allocated == {
        ("0", "memory"): 0, ("1", "memory"): 0, ("0,1", "memory"): 12 * GiB,
        ("0", "hugepages-2Mi"): 0, ("1", "hugepages-2Mi"): 512 << 20}
    assert result.container_memory == {("ns", "p", "a", "0,1", "memory"): 12 * GiB,
                                       ("ns", "p", "a", "1", "hugepages-2Mi"): 512 << 20}
    # 12 GiB over {0,1}: node 0 filled (10), 2 GiB to node 1
    assert result.utilization[("0", "memory")] == 1.0
    assert result.utilization[("1", "memory")] == pytest.approx(0.2)
    assert result.utilization[("1", "hugepages-2Mi")] == 0.5
    assert not result.data_issues


def test_group_memory_fills_nodes_left_after_single_node_allocations():
    # node 0: 10 allocatable, 6 single -> 4 left; node 1: 10 allocatable, 8 single -> 2 left.
    # group {0,1} of 5: 4 to node 0, 1 to node 1.
    assert apportion_group_memory({0: 10, 1: 10}, {0: 6, 1: 8}, {(0, 1): 5}) == {0: 10, 1: 9}
    # group of 7 does not fit: 4 + 2, the last 1 stays on the highest member (node 1)
    assert apportion_group_memory({0: 10, 1: 10}, {0: 6, 1: 8}, {(0, 1): 7}) == {0: 10, 1: 11}
    # groups in ascending order of their id lists: (0,1) before (1,2)
    assert apportion_group_memory({0: 4, 1: 4, 2: 4}, {}, {(1, 2): 6, (0, 1): 6}) == \
        {0: 4, 1: 4, 2: 4}


def test_pod_level_memory_is_the_larger_of_pod_block_and_container_sum():
    result = account(snap(
        # pod-level 8 GiB includes the containers' 2 + 3 GiB
        P("ns", "big-pod", (C("a", memory=(M("memory", 2 * GiB, (0,)),)),
                            C("b", memory=(M("memory", 3 * GiB, (0,)),))),
          memory=(M("memory", 8 * GiB, (0,)),)),
        # pod-level 1 GiB is smaller than its container's 3 GiB: an issue; 3 GiB counted
        P("ns", "odd-pod", (C("a", memory=(M("memory", 3 * GiB, (1,)),)),),
          memory=(M("memory", 1 * GiB, (1,)),)),
        allocatable=Allocatable(memory=(M("memory", 16 * GiB, (0,)), M("memory", 16 * GiB, (1,)))),
    ), TWO_NODES)
    assert result.memory_allocated == {("0", "memory"): 8 * GiB, ("1", "memory"): 3 * GiB}
    assert result.pod_memory == {("ns", "big-pod", "0", "memory"): 8 * GiB,
                                 ("ns", "odd-pod", "1", "memory"): 1 * GiB}
    assert result.data_issues == {IssueKind.POD_MEMORY_BELOW_CONTAINERS: 1}
    assert result.utilization[("0", "memory")] == 0.5


def test_nothing_is_invented_without_memory_manager_or_cpu_manager():
    # CPU policy none and memory policy None: empty cpu_ids and memory everywhere.
    result = account(snap(P("ns", "p", (C("a"),)), allocatable=Allocatable()), TWO_NODES)
    assert result.cpus_allocatable is None
    assert result.cpus_allocated == {}
    assert result.memory_allocatable == {} and result.memory_allocated == {}
    assert result.utilization == {}
    assert result.misaligned_containers == 0


def test_v1alpha1_reports_devices_only():
    result = account(KubeletSnapshot(
        pods=(P("ns", "p", (C("a", devices=(D("r/x", ("d0", "d1"), None),)),)),),
        allocatable=None, api_version="v1alpha1"), TWO_NODES)
    assert result.cpus_allocated is None and result.cpus_allocatable is None
    assert result.devices_allocated == {("unknown", "r/x"): 2}
    assert result.misaligned_containers is None
    assert result.container_numa_nodes == {}


# ---- DRA ----------------------------------------------------------------------------------

def test_dra_devices_are_deduplicated_by_driver_pool_device():
    gpu0 = DraDevice("gpu.example.com", "node-a", "gpu-0", "shared-claim", "ns",
                     cdi_devices=("example.com/gpu=gpu-0", "example.com/gpu=gpu-0"))
    gpu0_share = DraDevice("gpu.example.com", "node-a", "gpu-0", "shared-claim", "ns",
                           share_id="7b1e")
    nic = DraDevice("nic.example.com", "node-a", "eth2", "net", "ns")
    result = account(snap(
        P("ns", "p", (C("a", dra_devices=(gpu0, nic)), C("b", dra_devices=(gpu0,)))),
        P("ns", "q", (C("c", dra_devices=(gpu0_share,)),)),
    ), TWO_NODES)
    # without the Kubernetes-API view every DRA device is of unknown NUMA node
    assert result.dra_devices_allocated == {("gpu.example.com", "node-a", "unknown"): 1,
                                            ("nic.example.com", "node-a", "unknown"): 1}
    assert result.dra_device_shares == {("gpu.example.com", "node-a", "unknown"): 1}
    assert result.dra_devices_allocatable is None and result.dra_devices_tainted is None
    assert ("gpu.example.com", "node-a", "gpu-0", "unknown", "shared-claim", "ns", "q", "c",
            "7b1e") in result.dra_device_info
    assert len(result.dra_device_info) == 4
    # podresources carries no NUMA information for DRA: no alignment series from it alone
    assert result.container_numa_nodes == {}


# ---- alignment ----------------------------------------------------------------------------

def test_alignment_counts_the_nodes_a_container_needs():
    result = account(snap(
        # CPUs on node 1 and a VF on node 0: misaligned, needs 2 nodes
        P("ns", "split", (C("a", cpu_ids=(4, 5), devices=(D("vf", ("vf-0",), (0,)),)),)),
        # CPUs on node 0 and a device local to both nodes: aligned
        P("ns", "fine", (C("a", cpu_ids=(0,), devices=(D("gpu", ("g",), (0,)),
                                                           D("gpu", ("g",), (1,)))),)),
        # memory block spanning 0,1 uses both nodes
        P("ns", "wide-memory", (C("a", cpu_ids=(1,), memory=(M("memory", GiB, (0, 1)),)),)),
        # a device only, no CPUs: one node
        P("ns", "gpu-only", (C("a", devices=(D("gpu", ("h",), (1,)),)),)),
        # nothing exclusive: no series
        P("ns", "shared", (C("a"),)),
        allocatable=None,
    ), TWO_NODES)
    assert result.container_numa_nodes == {
        ("ns", "split", "a"): 2, ("ns", "fine", "a"): 1, ("ns", "wide-memory", "a"): 2,
        ("ns", "gpu-only", "a"): 1}
    assert result.misaligned_containers == 2


def test_minimum_node_set_is_a_smallest_hitting_set():
    f = frozenset
    assert min_numa_nodes(f(), [f({0, 1}), f({1, 2})]) == 1  # node 1 touches both
    assert min_numa_nodes(f({0}), [f({1, 2}), f({2, 3})]) == 2  # {0, 2}
    assert min_numa_nodes(f(), [f({0}), f({1}), f({0, 1})]) == 2
    assert min_numa_nodes(f({3}), [f({3}), f({0, 3})]) == 1
    assert min_numa_nodes(f(), [f({0, 1}), f({2, 3}), f({1, 2})]) == 2  # {1, 2}


def test_pod_level_resources_count_toward_no_container():
    result = account(snap(P("ns", "p", (C("a", cpu_ids=(0,)),), cpu_ids=(0, 4))), TWO_NODES)
    # the pod's own CPU 4 sits on node 1 but the container only holds CPU 0
    assert result.container_numa_nodes == {("ns", "p", "a"): 1}
    assert result.misaligned_containers == 0


# ---- robustness ---------------------------------------------------------------------------

def test_duplicated_entries_are_reported_and_not_double_counted():
    result = account(snap(
        P("ns", "p", (C("a", cpu_ids=(0, 0, 1), devices=(
            D("r/x", ("d0",), (0,)), D("r/x", ("d0",), (0,)))),)),
        P("ns", "p", (C("a", cpu_ids=(1,)),)),
        allocatable=None), TWO_NODES)
    assert result.cpus_allocated == {"0": 2}
    assert result.container_cpus == {("ns", "p", "a", "0"): 2}
    assert result.devices_allocated == {("0", "r/x"): 1}
    assert result.data_issues[IssueKind.DUPLICATE_ENTRY] == 3  # repeated CPU, device entry, pod


def test_empty_snapshot_gives_empty_figures():
    result = account(snap(allocatable=None), TWO_NODES)
    assert result.cpus_allocatable is None
    assert result.cpus_allocated == {}
    assert result.devices_allocated == {}
    assert result.misaligned_containers == 0
    assert result.pods == 0


def test_a_pod_listed_twice_does_not_double_its_memory():
    # found by the property tests: the repeated pod repeats its container
    result = account(snap(
        P("ns", "p", (C("a"),)),
        P("ns", "p", (C("a", memory=(M("memory", 2 * GiB, (0,)),)),)),
        allocatable=None), TWO_NODES)
    assert result.memory_allocated == {("0", "memory"): 2 * GiB}
    assert result.data_issues[IssueKind.DUPLICATE_ENTRY] == 1


def test_container_blocks_are_covered_by_the_pod_level_block_that_contains_them():
    # a: 12Gi on (0); b: 12Gi on (0,1); the pod-level 25Gi on (0,1) includes both
    result = account(snap(P("ns", "p", (C("a", memory=(M("memory", 12 * GiB, (0,)),)),
                                         C("b", memory=(M("memory", 12 * GiB, (0, 1)),))),
                             memory=(M("memory", 25 * GiB, (0, 1)),)),
                          allocatable=Allocatable(memory=(M("memory", 16 * GiB, (0,)),
                                                          M("memory", 16 * GiB, (1,))))),
                     TWO_NODES)
    assert result.memory_allocated == {("0", "memory"): 0, ("1", "memory"): 0,
                                       ("0,1", "memory"): 25 * GiB}
    assert result.utilization[("0", "memory")] == 1.0
    assert result.utilization[("1", "memory")] == pytest.approx(9 / 16)
    assert not result.data_issues


def test_memory_on_a_node_with_nothing_allocatable_is_an_excess_a_device_is_unavailable():
    result = account(snap(P("ns", "p", (C("a", memory=(M("hugepages-1Gi", GiB, (1,)),),
                                          devices=(D("r/x", ("d0",), (1,)),)),)),
                          allocatable=Allocatable(memory=(M("hugepages-1Gi", 4 * GiB, (0,)),),
                                                  devices=(D("r/x", ("d1",), (0,)),))),
                     TWO_NODES)
    assert ("1", "hugepages-1Gi") not in result.utilization  # no ratio without allocatable
    assert ("1", "r/x") not in result.utilization
    # the memory block is an excess; d0 is simply not listed as allocatable: unavailable
    assert result.data_issues == {IssueKind.ALLOCATED_EXCEEDS_ALLOCATABLE: 1}
    assert result.devices_allocated_unavailable == {("0", "r/x"): 0, ("1", "r/x"): 1}


def test_smallest_set_search_is_exact_where_greedy_is_not():
    f = frozenset
    # node 2 is in the most sets, but {0, 1} plus one node per pad is smaller
    sets = [f({0, 2, 3}), f({0, 2, 4}), f({1, 2, 5}), f({1, 2, 6}), f({0, 7}), f({1, 8})] + [
        f({9 + 2 * k, 10 + 2 * k}) for k in range(8)]
    assert min_numa_nodes(f(), sets) == 10
    # many disjoint choices: the lower bound settles it without enumerating 2^12 covers
    assert min_numa_nodes(f(), [f({2 * k, 2 * k + 1}) for k in range(12)]) == 12


def test_an_issue_example_leaves_with_the_pod_it_names():
    ledger = Ledger()
    first = P("ns", "first", (C("a", cpu_ids=(0, 0)),))
    second = P("ns", "second", (C("b", cpu_ids=(1, 1)),))
    result = ledger.update((first,), None, TWO_NODES)
    assert "ns/first/a" in result.issue_examples[IssueKind.DUPLICATE_ENTRY]
    result = ledger.update((first, second), None, TWO_NODES)
    assert result.data_issues[IssueKind.DUPLICATE_ENTRY] == 2
    assert "ns/first/a" in result.issue_examples[IssueKind.DUPLICATE_ENTRY]
    result = ledger.update((second,), None, TWO_NODES)  # the named pod left
    assert result.data_issues[IssueKind.DUPLICATE_ENTRY] == 1
    assert "ns/second/b" in result.issue_examples[IssueKind.DUPLICATE_ENTRY]
    result = ledger.update((), None, TWO_NODES)
    assert result.issue_examples == {}
