"""The fit engine (SPEC section 7) against figures computed by hand from the SPEC.

The machine of most tests: three NUMA nodes of 8 logical CPUs, 2 threads per core, numbered
as Linux does on x86 (24 CPUs, core k holds CPUs k and k+12):

    node 0: CPUs 0-3,12-15    node 1: CPUs 4-7,16-19    node 2: CPUs 8-11,20-23

CPU 0 and its sibling 12 are reserved (not allocatable).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from exporter.accounting import account
from exporter.fit.engine import FreeCapacity, Shape, evaluate, free_capacity, verdict
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    DeviceEntry as D,
    KubeletSnapshot,
    MemoryBlock as M,
    NumaNode,
    PodAssignment as P,
    Topology,
)
from exporter.simulator import load_profile
from exporter.simulator.profile import parse_pod
from exporter.simulator.state import NodeState

GiB = 1 << 30
GPU = "nvidia.com/gpu"
NT = "example.com/nt"  # a device plugin reporting no topology


def smt_topology() -> Topology:
    nodes = [NumaNode(0, frozenset([0, 1, 2, 3, 12, 13, 14, 15])),
             NumaNode(1, frozenset([4, 5, 6, 7, 16, 17, 18, 19])),
             NumaNode(2, frozenset([8, 9, 10, 11, 20, 21, 22, 23]))]
    siblings = {cpu: frozenset({cpu % 12, cpu % 12 + 12}) for cpu in range(24)}
    return Topology.from_nodes(nodes, siblings)


def scenario() -> tuple[KubeletSnapshot, Topology]:
    allocatable = Allocatable(
        cpu_ids=tuple(c for c in range(24) if c not in (0, 12)),
        memory=(M("memory", 10 * GiB, (0,)), M("memory", 10 * GiB, (1,)),
                M("memory", 10 * GiB, (2,)),
                M("hugepages-1Gi", 4 * GiB, (0,)), M("hugepages-1Gi", 4 * GiB, (1,))),
        devices=(D(GPU, ("g0",), (0,)), D(GPU, ("g1",), (0,)), D(GPU, ("g2",), (1,)),
                 # g3 is local to nodes 0 and 1: one entry per NUMA node, as the kubelet sends
                 D(GPU, ("g3",), (0,)), D(GPU, ("g3",), (1,)),
                 # g4 (node 2) is unhealthy: not listed; g5 is healthy
                 D(GPU, ("g5",), (2,)),
                 D(NT, ("n0",), None), D(NT, ("n1",), None)))
    pods = (
        P("ml", "p1", (C("a", cpu_ids=(1, 13, 2),
                         memory=(M("memory", 4 * GiB, (0,)), M("hugepages-1Gi", 2 * GiB, (0,))),
                         devices=(D(GPU, ("g0",), (0,)), D(NT, ("n0",), None))),)),
        P("ml", "p2", (C("a", cpu_ids=(4, 5, 6, 7, 16, 17),
                         memory=(M("memory", 12 * GiB, (0, 1)),)),)),
        P("ml", "p3", (C("a", memory=(M("memory", 3 * GiB, (1, 2)),),
                         devices=(D(GPU, ("g4",), (2,)),)),)),
    )
    return KubeletSnapshot(pods, allocatable), smt_topology()


def free_of(full_pcpus_only: bool = False) -> FreeCapacity:
    snapshot, topology = scenario()
    free = free_capacity(snapshot, topology, account(snapshot, topology), full_pcpus_only)
    assert free is not None
    return free


def test_numa_free_by_hand() -> None:
    free = free_of()
    # CPUs: node 0 allocatable 1-3,13-15 minus 1,2,13 -> 3,14,15; node 1 allocatable 8 minus 6
    # memory: node 0 keeps 10-4 = 6 after its single block; the (0,1) block of 12 fills node 0's
    # 6 and takes 6 of node 1; the (1,2) block of 3 fits in node 1's remaining 4 -> 1 left
    # gpu: free g1 (0), g2 (1), g3 (0,1), g5 (2); g0 assigned, g4 unhealthy
    assert free.series() == {
        ("0", "cpu"): 3, ("1", "cpu"): 2, ("2", "cpu"): 8,
        ("0", "memory"): 0, ("1", "memory"): 1 * GiB, ("2", "memory"): 10 * GiB,
        ("0", "hugepages-1Gi"): 2 * GiB, ("1", "hugepages-1Gi"): 4 * GiB,
        ("2", "hugepages-1Gi"): 0,
        ("0", GPU): 2, ("1", GPU): 2, ("2", GPU): 1,
        ("unknown", NT): 1,
    }
    # whole free cores: node 0 only core 3 (3,15); node 1 none (6 and 7 taken); node 2 all
    assert free.full_cores_series() == {"0": 2, "1": 0, "2": 8}


def test_shape_with_gpus_memory_and_cpus() -> None:
    fit = evaluate(Shape("train", {"cpu": 2, "memory": GiB, GPU: 2}), free_of())
    assert fit.fits == {0: False, 1: True, 2: False}
    assert fit.shortfall == {0: {"cpu": 0, "memory": GiB, GPU: 0},
                             1: {"cpu": 0, "memory": 0, GPU: 0},
                             2: {"cpu": 0, "memory": 0, GPU: 1}}
    # node 1 takes g2 and the shared g3, its 2 CPUs and its 1Gi: one pod, then nothing
    assert fit.capacity == 1
    assert fit.min_numa_nodes == 1
    assert fit.blocking() == []


def test_shape_that_fits_nowhere() -> None:
    fit = evaluate(Shape("big", {"cpu": 4, GPU: 3}), free_of())
    assert fit.fits == {0: False, 1: False, 2: False}
    assert {n: fit.shortfall[n] for n in (0, 1, 2)} == {
        0: {"cpu": 1, GPU: 1}, 1: {"cpu": 2, GPU: 1}, 2: {"cpu": 0, GPU: 2}}
    assert fit.blocking() == [GPU]  # node 2 has the CPUs, no node has 3 GPUs
    assert fit.capacity == 0
    # nodes 0+1: 5 CPUs, and g1, g2, g3 are local to one of them
    assert fit.min_numa_nodes == 2
    assert verdict(fit) == (
        "no NUMA node has 3 free nvidia.com/gpu together with 4 CPUs: node 0 lacks "
        "1 nvidia.com/gpu and 1 CPU, node 1 lacks 1 nvidia.com/gpu and 2 CPUs, node 2 lacks 2 "
        "nvidia.com/gpu; 2 NUMA nodes together would hold it (restricted or best-effort policy)")


def test_greedy_capacity_cpus_only() -> None:
    fit = evaluate(Shape("two", {"cpu": 2}), free_of())
    assert fit.capacity == 1 + 1 + 4  # 3//2, 2//2, 8//2


def test_full_pcpus_only_counts_whole_cores() -> None:
    fit = evaluate(Shape("two", {"cpu": 2}), free_of(full_pcpus_only=True))
    assert fit.fits == {0: True, 1: False, 2: True}
    assert fit.shortfall[1] == {"cpu": 2}
    assert fit.capacity == 1 + 0 + 4
    odd = evaluate(Shape("three", {"cpu": 3}), free_of(full_pcpus_only=True))
    assert odd.smt_misaligned and odd.capacity == 0 and odd.min_numa_nodes is None
    assert odd.fits == {0: False, 1: False, 2: False}
    assert "SMTAlignmentError" in verdict(odd)


def test_hugepages_and_a_resource_without_topology() -> None:
    free = free_of()
    huge = evaluate(Shape("dpdk", {"hugepages-1Gi": 3 * GiB}), free)
    assert huge.fits == {0: False, 1: True, 2: False}
    assert [huge.shortfall[n]["hugepages-1Gi"] for n in (0, 1, 2)] == [GiB, 0, 3 * GiB]
    assert huge.capacity == 1
    # n1 has no locality: it serves any NUMA node, but it is one device
    nt = evaluate(Shape("nt", {NT: 1}), free)
    assert nt.fits == {0: True, 1: True, 2: True}
    assert nt.capacity == 1


def test_unmanaged_resources_are_no_constraint() -> None:
    topology = smt_topology()
    snapshot = KubeletSnapshot((), Allocatable(devices=(D(GPU, ("g0",), (2,)),)))
    free = free_capacity(snapshot, topology, account(snapshot, topology))
    assert free is not None
    # CPU policy none and memory policy None: only the GPU decides
    fit = evaluate(Shape("s", {"cpu": 64, "memory": 512 * GiB, GPU: 1}), free)
    assert fit.constrained == (GPU,) and fit.unmanaged == ("cpu", "memory")
    assert fit.fits == {0: False, 1: False, 2: True}
    assert free.series() == {("0", GPU): 0, ("1", GPU): 0, ("2", GPU): 1}
    assert free.full_cores_series() == {}


def test_unknown_device_resource_lacks_everywhere() -> None:
    fit = evaluate(Shape("fpga", {"xilinx.com/fpga": 1}), free_of())
    assert fit.fits == {0: False, 1: False, 2: False}
    assert fit.min_numa_nodes is None and fit.capacity == 0


def test_nothing_without_allocatable_or_under_v1alpha1() -> None:
    snapshot, topology = scenario()
    accounting = account(snapshot, topology)
    assert free_capacity(KubeletSnapshot(snapshot.pods, None), topology, accounting) is None
    assert free_capacity(KubeletSnapshot(snapshot.pods, snapshot.allocatable, "v1alpha1"),
                         topology, accounting) is None


def test_pod_level_cpus_count_once() -> None:
    topology = smt_topology()
    snapshot = KubeletSnapshot(
        (P("ns", "p", (C("a", cpu_ids=(8, 20)),), cpu_ids=(8, 20, 9)),),
        Allocatable(cpu_ids=tuple(range(8, 12)) + tuple(range(20, 24))))
    free = free_capacity(snapshot, topology, account(snapshot, topology))
    assert free is not None
    assert free.series()[("2", "cpu")] == 5  # 8 allocatable - {8, 9, 20}
    assert free.full_cores_series()["2"] == 4  # cores 10 and 11; 9's sibling 21 is free alone


# ---- a shape that fits, once admitted, never makes capacity rise ---------------------------

def _snapshot_of(state: NodeState) -> KubeletSnapshot:
    pods = tuple(p.assignment for p in state.listed_pods(active_only=True))
    return KubeletSnapshot(pods, state.allocatable())


def _capacity(state: NodeState, topology: Topology, shape: Shape) -> tuple[int, bool]:
    snapshot = _snapshot_of(state)
    free = free_capacity(snapshot, topology, account(snapshot, topology))
    assert free is not None
    fit = evaluate(shape, free)
    assert fit.capacity is not None
    return fit.capacity, any(fit.fits.values())


_STATES: dict[str, NodeState] = {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cpus=st.integers(1, 20), memory_gib=st.integers(0, 64), gpus=st.integers(0, 3),
       vfs=st.integers(0, 6), hugepages=st.integers(0, 8), rounds=st.integers(1, 4))
def test_admitting_a_fitting_shape_never_raises_capacity(cpus: int, memory_gib: int, gpus: int,
                                                         vfs: int, hugepages: int,
                                                         rounds: int) -> None:
    spec = load_profile("dual-socket-gpu")
    state = NodeState(spec)
    topology = Topology.from_nodes(
        [NumaNode(n.numa_id, n.cpus) for n in spec.numa_nodes], spec.thread_siblings())
    requests = {"cpu": cpus}
    container: dict[str, object] = {"name": "c", "cpus": cpus, "devices": {}}
    if memory_gib:
        requests["memory"] = memory_gib * GiB
        container["memory"] = f"{memory_gib}Gi"
    if hugepages:
        requests["hugepages-1Gi"] = hugepages * GiB
        container["hugepages-1Gi"] = f"{hugepages}Gi"
    devices: dict[str, int] = {}
    if gpus:
        requests[GPU] = devices[GPU] = gpus
    if vfs:
        requests["intel.com/sriov_netdevice"] = devices["intel.com/sriov_netdevice"] = vfs
    container["devices"] = devices
    shape = Shape("s", requests)
    before, fits = _capacity(state, topology, shape)
    for index in range(rounds):
        if not fits:
            assert before == 0
            break
        admitted = state.admit(parse_pod({"namespace": "fit", "name": f"s-{index}",
                                          "containers": [container]}))
        assert admitted, "the simulator's allocator refused a shape the fit engine placed"
        after, fits = _capacity(state, topology, shape)
        assert after <= before
        before = after


@pytest.mark.parametrize("amount,text", [(64 * GiB, "64Gi"), (512 << 20, "512Mi"),
                                         (3 * GiB // 2, "1536Mi")])
def test_amounts_in_words(amount: int, text: str) -> None:
    from exporter.fit.engine import format_amount
    assert format_amount("memory", amount) == text


def test_cpu_less_numa_nodes_and_ids_sysfs_does_not_know() -> None:
    """A GB200-like tray: nodes 0 and 1 with CPUs 0-3 and 4-7, nodes 2 and 3 memory only.
    A GPU local to {1, 7} (7 unknown to sysfs) is local to node 1; one local to {-1} only has
    no known locality, but its resource has local devices, so it serves no node."""
    topology = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                    NumaNode(1, frozenset(range(4, 8))),
                                    NumaNode(2, frozenset()), NumaNode(3, frozenset())])
    snapshot = KubeletSnapshot(
        (P("ml", "a", (C("c", cpu_ids=(1, 2), memory=(M("memory", 6 * GiB, (2, 3)),)),)),),
        Allocatable(cpu_ids=tuple(range(1, 8)),
                    memory=tuple(M("memory", 4 * GiB, (n,)) for n in range(4)),
                    devices=(D(GPU, ("g0",), (1,)), D(GPU, ("g0",), (7,)),
                             D(GPU, ("g1",), (-1,)), D(GPU, ("g2",), (0,)))))
    free = free_capacity(snapshot, topology, account(snapshot, topology))
    assert free is not None
    # memory: the (2,3) block of 6Gi fills node 2's 4Gi, 2Gi on node 3
    assert free.series() == {
        ("0", "cpu"): 1, ("1", "cpu"): 4, ("2", "cpu"): 0, ("3", "cpu"): 0,
        ("0", "memory"): 4 * GiB, ("1", "memory"): 4 * GiB, ("2", "memory"): 0,
        ("3", "memory"): 2 * GiB,
        ("0", GPU): 1, ("1", GPU): 1, ("2", GPU): 0, ("3", GPU): 0}
    # 3 CPUs, 6Gi and 2 GPUs: on one node never; nodes 0+1 have 5 CPUs, 8Gi and g0, g2
    fit = evaluate(Shape("s", {"cpu": 3, "memory": 6 * GiB, GPU: 2}), free)
    assert fit.fits == {0: False, 1: False, 2: False, 3: False}
    assert fit.shortfall[3] == {"cpu": 3, "memory": 4 * GiB, GPU: 2}
    assert fit.min_numa_nodes == 2
    assert fit.blocking() == ["memory", GPU]


def test_greedy_capacity_shares_a_group_device_once() -> None:
    """g0 local to node 0, g1 to node 1, g2 to both. One GPU per pod: node 0 takes g0, then
    g2; node 1 is left g1: 3 pods. Two GPUs per pod: node 0 takes g0 and g2, node 1 has only
    g1: 1 pod, though nodes 0 and 1 each see 2 free."""
    topology = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                    NumaNode(1, frozenset(range(4, 8)))])
    snapshot = KubeletSnapshot((), Allocatable(devices=(
        D(GPU, ("g0",), (0,)), D(GPU, ("g1",), (1,)), D(GPU, ("g2",), (0,)),
        D(GPU, ("g2",), (1,)))))
    free = free_capacity(snapshot, topology, account(snapshot, topology))
    assert free is not None
    assert evaluate(Shape("one", {GPU: 1}), free).capacity == 3
    two = evaluate(Shape("two", {GPU: 2}), free)
    assert two.fits == {0: True, 1: True} and two.capacity == 1
