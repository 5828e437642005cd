"""DRA devices per NUMA node (SPEC section 2, rule "DRA devices per NUMA node"), by hand.

Machine: NUMA node 0 holds CPUs 0-3, node 1 holds CPUs 4-7. The inventory stands for what the
node's ResourceSlices publish (the Kubernetes-API view); figures are computed by hand.
"""

from __future__ import annotations

from exporter.accounting import Ledger, account
from exporter.issues import IssueKind
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    DraDevice,
    DraInventory,
    KubeletSnapshot,
    NumaNode,
    PodAssignment as P,
    PublishedDevice as Pub,
    Topology,
)

GPU, NIC = "gpu.example.com", "nic.example.com"
TWO_NODES = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                 NumaNode(1, frozenset(range(4, 8)))])
ALL_CPUS = Allocatable(cpu_ids=tuple(range(8)))


def snap(*pods: P) -> KubeletSnapshot:
    return KubeletSnapshot(pods=pods, allocatable=ALL_CPUS)


def gpu(device: str, claim: str = "c", share_id: str | None = None) -> DraDevice:
    return DraDevice(GPU, "pool-a", device, claim, "ns", share_id=share_id)


# gpu-0, gpu-1 on node 0; gpu-2, gpu-3 on node 1; gpu-4 NoSchedule on node 1; gpu-5 NUMA 7
# (sysfs does not know it); gpu-6 with no locality; nic-0 on node 1 with a None-effect taint
INVENTORY = DraInventory((
    Pub(GPU, "pool-a", "gpu-0", (0,)),
    Pub(GPU, "pool-a", "gpu-1", (0,)),
    Pub(GPU, "pool-a", "gpu-2", (1,)),
    Pub(GPU, "pool-a", "gpu-3", (1,)),
    Pub(GPU, "pool-a", "gpu-4", (1,), frozenset({"NoSchedule"})),
    Pub(GPU, "pool-a", "gpu-5", (7,)),
    Pub(GPU, "pool-a", "gpu-6", None),
    Pub(NIC, "pool-n", "nic-0", (1,), frozenset({"None"})),
))


def test_published_devices_per_numa_node_tainted_ones_outside_allocatable():
    result = account(snap(), TWO_NODES, INVENTORY)
    assert result.dra_devices_allocatable == {
        (GPU, "pool-a", "0"): 2, (GPU, "pool-a", "1"): 2, (GPU, "pool-a", "unknown"): 2,
        (NIC, "pool-n", "1"): 1}  # the None-effect taint keeps nic-0 allocatable
    assert result.dra_devices_tainted == {(GPU, "pool-a", "1", "NoSchedule"): 1,
                                          (NIC, "pool-n", "1", "None"): 1}
    # true zeros wherever devices are allocatable
    assert result.dra_devices_allocated == {
        (GPU, "pool-a", "0"): 0, (GPU, "pool-a", "1"): 0, (GPU, "pool-a", "unknown"): 0,
        (NIC, "pool-n", "1"): 0}
    # NUMA 7 is not in sysfs: dropped (gpu-5 is "unknown") and counted
    assert result.data_issues[IssueKind.UNKNOWN_NUMA_ID] == 1
    assert result.utilization[("0", GPU)] == 0.0
    assert result.utilization[("1", NIC)] == 0.0


def test_a_shared_device_counts_once_with_one_share_per_share_id():
    result = account(snap(
        P("ns", "a", (C("x", dra_devices=(gpu("gpu-2", "ca", "s-1"),)),)),
        P("ns", "b", (C("y", dra_devices=(gpu("gpu-2", "cb", "s-2"),)),)),
        # the same share seen from two containers of a pod is one share
        P("ns", "c", (C("u", dra_devices=(gpu("gpu-0", "cc"),)),
                      C("v", dra_devices=(gpu("gpu-0", "cc"),)))),
    ), TWO_NODES, INVENTORY)
    assert result.dra_devices_allocated[(GPU, "pool-a", "1")] == 1
    assert result.dra_devices_allocated[(GPU, "pool-a", "0")] == 1
    assert result.dra_device_shares == {(GPU, "pool-a", "1"): 2}
    # node 1: gpu-2 used of gpu-2, gpu-3 allocatable (gpu-4 is tainted): 1/2
    assert result.utilization[("1", GPU)] == 0.5
    assert result.utilization[("0", GPU)] == 0.5
    assert (GPU, "pool-a", "gpu-2", "1", "ca", "ns", "a", "x", "s-1") in result.dra_device_info


def test_a_tainted_device_in_use_counts_as_allocated_not_toward_utilization():
    result = account(snap(P("ns", "a", (C("x", dra_devices=(gpu("gpu-4"),)),))),
                     TWO_NODES, INVENTORY)
    assert result.dra_devices_allocated[(GPU, "pool-a", "1")] == 1
    assert result.dra_devices_allocatable[(GPU, "pool-a", "1")] == 2
    assert result.utilization[("1", GPU)] == 0.0


def test_a_container_whose_dra_gpu_sits_on_another_node_than_its_cpus_is_misaligned():
    result = account(snap(
        P("ns", "split", (C("a", cpu_ids=(0, 1), dra_devices=(gpu("gpu-3"),)),)),
        P("ns", "fine", (C("a", cpu_ids=(2,), dra_devices=(gpu("gpu-1"),)),)),
        # unknown locality is ignored: CPUs on node 1 and gpu-6 stay aligned
        P("ns", "blind", (C("a", cpu_ids=(4,), dra_devices=(gpu("gpu-6"),)),)),
    ), TWO_NODES, INVENTORY)
    assert result.container_numa_nodes == {("ns", "split", "a"): 2, ("ns", "fine", "a"): 1,
                                           ("ns", "blind", "a"): 1}
    assert result.misaligned_containers == 1


def test_a_dra_device_alone_gives_an_alignment_series_of_one():
    result = account(snap(P("ns", "p", (C("a", dra_devices=(gpu("gpu-0"),)),))),
                     TWO_NODES, INVENTORY)
    assert result.container_numa_nodes == {("ns", "p", "a"): 1}


def test_without_the_view_the_same_pods_are_unknown_and_aligned():
    pods = snap(P("ns", "split", (C("a", cpu_ids=(0, 1), dra_devices=(gpu("gpu-3"),)),)))
    result = account(pods, TWO_NODES)
    assert result.dra_devices_allocated == {(GPU, "pool-a", "unknown"): 1}
    assert result.misaligned_containers == 0
    assert not any(resource == GPU for _, resource in result.utilization)


def test_the_ledger_recounts_when_the_inventory_changes():
    ledger = Ledger()
    pods = snap(P("ns", "a", (C("x", cpu_ids=(0,), dra_devices=(gpu("gpu-3"),)),)))
    first = ledger.update(pods.pods, pods.allocatable, TWO_NODES, "v1", INVENTORY)
    assert first.dra_devices_allocated[(GPU, "pool-a", "1")] == 1
    assert first.misaligned_containers == 1
    assert ledger.update(pods.pods, pods.allocatable, TWO_NODES, "v1", INVENTORY) is first
    moved = DraInventory((Pub(GPU, "pool-a", "gpu-3", (0,)),))
    second = ledger.update(pods.pods, pods.allocatable, TWO_NODES, "v1", moved)
    assert second.dra_devices_allocated == {(GPU, "pool-a", "0"): 1}
    assert second.dra_devices_allocatable == {(GPU, "pool-a", "0"): 1}
    assert second.utilization[("0", GPU)] == 1.0
    assert second.misaligned_containers == 0
    # and the same from scratch
    assert account(pods, TWO_NODES, moved).dra_devices_allocated == \
        second.dra_devices_allocated


def test_a_device_published_twice_in_a_pool_generation_counts_once():
    twice = DraInventory((Pub(GPU, "pool-a", "gpu-0", (0,)), Pub(GPU, "pool-a", "gpu-0", (1,))))
    result = account(snap(), TWO_NODES, twice)
    assert result.dra_devices_allocatable == {(GPU, "pool-a", "0"): 1}
    assert result.data_issues[IssueKind.DUPLICATE_ENTRY] == 1
