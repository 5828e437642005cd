"""Kubelet behaviours the first runs against the real kubelet found missing (SPEC 7.5), each
with values worked out by hand from the kubelet's code: the sidecar and the reusable set
(``policy_static.go`` ``updateCPUsToReuse``), init-container CPUs ``List`` hides (the CPU
manager's state file), pods rejected at admission, the resource-fit predicate after the Topology
Manager (``lifecycle/predicate.go``), and which CPUs ``takeByTopology`` picks."""

from __future__ import annotations

from exporter.fit.answers import answer, where
from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape, single_container
from exporter.fit.state.checkpoints import KubeletState, parse_cpu_manager_state
from exporter.fit.state.from_snapshot import node_state
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    KubeletSnapshot,
    NumaNode,
    PodAssignment,
    Topology,
)
from exporter.podcontext import ContainerContext, NodeContext, PodContext

from .nodes import GiB, cpus, state

SNN = Rules("single-numa-node", "container")
# two NUMA nodes of 4 CPUs, no SMT: node 0 is CPUs 0-3, node 1 CPUs 4-7
TWO_BY_FOUR = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                   NumaNode(1, frozenset(range(4, 8)))])


def snapshot(*pods: PodAssignment) -> KubeletSnapshot:
    return KubeletSnapshot(pods, Allocatable(cpu_ids=tuple(range(8))))


def pod(name: str, **containers: tuple[int, ...]) -> PodAssignment:
    return PodAssignment("ns", name, tuple(ContainerAssignment(c, ids)
                                           for c, ids in containers.items()))


# ---- a sidecar takes its CPUs out of the reusable set ---------------------------------------

def test_a_sidecar_takes_reusable_cpus_out_for_good_and_what_stays_still_pins():
    """Init container `setup` (2 CPUs) gets CPUs 0, 1 on node 0; they become reusable. The
    sidecar `proxy` (1 CPU) must lie on node 0 and takes CPU 0 (takeByTopology, lowest core);
    updateCPUsToReuse treats it as an app container: CPU 0 leaves the reusable set for good.
    The app container (4 CPUs) must contain CPU 1 (still reusable): node 0 has 1 reusable + 2
    free (2, 3) = 3 < 4, {0,1} is wider than its capacity needs: TopologyAffinityError, pinned
    by `setup`. (Had the sidecar left CPU 0 reusable, node 0 would hold 2 + 2 = 4: admitted.)"""
    shape = PodShape("p", (ContainerShape("app", {"cpu": 4000}),),
                     (ContainerShape("setup", {"cpu": 2000}),
                      ContainerShape("proxy", {"cpu": 1000}, sidecar=True)))
    verdict = admit(shape, state(cpus(4, {0: 4, 1: 4})), SNN)
    assert [(p.container, sorted(p.cpu_ids)) for p in verdict.placements] == [
        ("setup", [0, 1]), ("proxy", [0])]
    assert (verdict.admitted, verdict.reason, verdict.container, verdict.pinned_by) == (
        False, "TopologyAffinityError", "app", "setup")


def test_an_app_container_after_a_sidecar_reuses_what_is_left():
    """Same pod with a 3-CPU app container: node 0 holds 1 reusable + 2 free = 3: admitted on
    node 0 with CPUs 1, 2, 3; node 0 ends with nothing free, node 1 untouched."""
    shape = PodShape("p", (ContainerShape("app", {"cpu": 3000}),),
                     (ContainerShape("setup", {"cpu": 2000}),
                      ContainerShape("proxy", {"cpu": 1000}, sidecar=True)))
    verdict = admit(shape, state(cpus(4, {0: 4, 1: 4})), SNN)
    assert verdict.admitted and sorted(verdict.placements[-1].cpu_ids) == [1, 2, 3]
    assert verdict.state is not None and verdict.state.cpu is not None
    assert sorted(verdict.state.cpu.free) == [4, 5, 6, 7]


# ---- finished init containers keep CPUs List does not show ---------------------------------

STATE_FILE = ('{"policyName":"static","defaultCpuSet":"2-7","entries":{"uid-p":{"setup":"0-1",'
              '"app":"1"}},"checksum":1}')
THREE_CPUS = single_container("three", {"cpu": 3000})


def test_the_cpu_manager_state_shows_init_container_cpus_list_hides():
    """Pod p's init container `setup` got CPUs 0-1; its app container reused CPU 1; List shows
    only `app` with CPU 1. Allocatable - listed says node 0 has 0, 2, 3 free and a 3-CPU pod
    would go there; the CPU manager still holds CPU 0, so node 0 has 2 free and the pod goes
    to node 1."""
    listed = snapshot(pod("p", app=(1,)))
    blind = node_state(listed, TWO_BY_FOUR, True, False)
    seeing = node_state(listed, TWO_BY_FOUR, True, False,
                        kubelet=KubeletState(parse_cpu_manager_state(STATE_FILE)))
    assert blind is not None and blind.cpu is not None and sorted(blind.cpu.free) == [
        0, 2, 3, 4, 5, 6, 7]
    assert seeing is not None and seeing.cpu is not None and sorted(seeing.cpu.free) == [
        2, 3, 4, 5, 6, 7]
    assert where(admit(THREE_CPUS, blind, SNN).placements[0]) == {0}
    assert where(admit(THREE_CPUS, seeing, SNN).placements[0]) == {1}


def test_the_v4_checkpoint_is_read_from_its_data():
    """1.37 writes the V2 fields and the authoritative copy as a JSON string in `data`."""
    v4 = ('{"policyName":"static","defaultCpuSet":"2-7","entries":{},"checksum":1,'
          '"data":"{\\"policyName\\":\\"static\\",\\"defaultCpuSet\\":\\"2-7\\",\\"entries\\":'
          '{\\"uid-p\\":{\\"setup\\":\\"0-1\\"}},\\"podEntries\\":{\\"uid-q\\":{\\"cpuSet\\":'
          '\\"6\\"}}}","dataChecksum":2}')
    assert parse_cpu_manager_state(v4) == {"uid-p": {"setup": frozenset({0, 1})},
                                           "uid-q": {"": frozenset({6})}}


def context(*pods: PodContext, allocatable: dict[str, int] | None = None) -> NodeContext:
    return NodeContext("test", pods, allocatable)


def test_state_of_a_pod_the_context_does_not_know_as_active_is_free():
    """The next admission's removeStaleState frees the CPUs of a UID no active pod has."""
    other = PodContext("ns", "p", "uid-other", "Guaranteed", "Running")
    seen = node_state(snapshot(pod("p", app=(1,))), TWO_BY_FOUR, True, False,
                      context(other), KubeletState(parse_cpu_manager_state(STATE_FILE)))
    assert seen is not None and seen.cpu is not None and 0 in seen.cpu.free


def test_a_stale_pod_level_cpu_set_without_container_entries_is_never_freed():
    """removeStaleState walks container entries only; the last one's RemoveContainer frees the
    pod-level set. The real 1.37 kubelet with PodLevelResourceManagers on keeps a rejected
    pod's pod-level set (CPUs 2, 3) with no container entry: no later admission gets them.
    With a container entry beside it, the next admission frees both."""
    other = PodContext("ns", "p", "uid-other", "Guaranteed", "Running")
    alone = ('{"policyName":"static","defaultCpuSet":"0-1,4-7","podEntries":{"uid-gone":'
             '{"cpuSet":"2-3"}},"checksum":1}')
    seen = node_state(snapshot(), TWO_BY_FOUR, True, False, context(other),
                      KubeletState(parse_cpu_manager_state(alone)))
    assert seen is not None and seen.cpu is not None and sorted(seen.cpu.free) == [
        0, 1, 4, 5, 6, 7]
    assert where(admit(THREE_CPUS, seen, SNN).placements[0]) == {1}
    with_container = ('{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"uid-gone":'
                      '{"app":"2"}},"podEntries":{"uid-gone":{"cpuSet":"2-3"}},"checksum":1}')
    freed = node_state(snapshot(), TWO_BY_FOUR, True, False, context(other),
                       KubeletState(parse_cpu_manager_state(with_container)))
    assert freed is not None and freed.cpu is not None and sorted(freed.cpu.free) == list(
        range(8))


# ---- a pod rejected at admission holds nothing for the next one -----------------------------

def test_a_listed_pod_the_context_knows_as_rejected_holds_nothing():
    """Before 1.37 List shows a pod the kubelet rejected, with the CPUs its first container
    was given (0-3); the next admission frees them (removeStaleState): all 8 free."""
    rejected = PodContext("ns", "r", "uid-r", "Guaranteed", "Failed",
                          reason="TopologyAffinityError")
    listed = snapshot(pod("r", first=(0, 1, 2, 3)))
    blind = node_state(listed, TWO_BY_FOUR, True, False)
    told = node_state(listed, TWO_BY_FOUR, True, False, context(rejected))
    assert blind is not None and blind.cpu is not None and len(blind.cpu.free) == 4
    assert told is not None and told.cpu is not None and len(told.cpu.free) == 8


# ---- the resource-fit predicate counts every pod's requests --------------------------------

def burstable(name: str, cpu_millis: int, memory: int = 0) -> PodContext:
    requests = {"cpu": cpu_millis, **({"memory": memory} if memory else {})}
    return PodContext("ns", name, f"uid-{name}", BURSTABLE, "Running",
                      containers=(ContainerContext("c", requests),))


def test_burstable_requests_leave_no_room_out_of_cpu():
    """Node allocatable 8 CPUs; a Burstable pod requests 6.5. A Guaranteed 2-CPU pod gets its
    exclusive CPUs from the Topology Manager, then the predicate: 2000 > 8000 - 6500:
    OutOfcpu, with the kubelet's message."""
    node = node_state(snapshot(), TWO_BY_FOUR, True, False,
                      context(burstable("web", 6500),
                              allocatable={"cpu": 8000, "memory": 16 * GiB, "pods": 110}))
    assert node is not None
    verdict = admit(single_container("g", {"cpu": 2000, "memory": GiB}), node, SNN)
    assert (verdict.admitted, verdict.reason, verdict.blocking_resource, verdict.message) == (
        False, "OutOfcpu", "cpu",
        "Node didn't have enough resource: cpu, requested: 2000, used: 6500, capacity: 8000")


def test_the_topology_manager_speaks_first():
    """The same node, 5 CPUs asked: no NUMA node has 5 (4 each), so the Topology Manager
    rejects before the predicate would: TopologyAffinityError, not OutOfcpu."""
    node = node_state(snapshot(), TWO_BY_FOUR, True, False,
                      context(burstable("web", 6500), allocatable={"cpu": 8000, "pods": 110}))
    assert node is not None
    assert admit(single_container("g", {"cpu": 5000}), node, SNN).reason == \
        "TopologyAffinityError"


def test_out_of_memory_and_out_of_pods():
    """Memory: 16Gi allocatable, 15Gi requested by a Burstable pod; a 2Gi pod: OutOfmemory.
    Pods: allocatable 1 pod, one running: OutOfpods before anything else."""
    node = node_state(snapshot(), TWO_BY_FOUR, True, False,
                      context(burstable("db", 1000, 15 * GiB),
                              allocatable={"cpu": 8000, "memory": 16 * GiB, "pods": 110}))
    assert node is not None
    small = PodShape("b", (ContainerShape("c", {"cpu": 500, "memory": 2 * GiB}),), qos=BURSTABLE)
    assert admit(small, node, SNN).reason == "OutOfmemory"
    full = node_state(snapshot(), TWO_BY_FOUR, True, False,
                      context(burstable("db", 1000), allocatable={"cpu": 8000, "pods": 1}))
    assert full is not None and admit(small, full, SNN).reason == "OutOfpods"


def test_capacity_counts_the_predicate():
    """Burstable 1.5-CPU pods, 8 CPUs allocatable, 2 requested: (8000 - 2000) // 1500 = 4
    more (no exclusive resource bounds it; before the predicate this was +Inf)."""
    node = node_state(snapshot(), TWO_BY_FOUR, True, False,
                      context(burstable("web", 2000), allocatable={"cpu": 8000, "pods": 110}))
    assert node is not None
    shape = PodShape("b", (ContainerShape("c", {"cpu": 1500}),), qos=BURSTABLE)
    assert answer(shape, node, SNN).capacity == 4


def test_without_pod_context_list_gives_the_requests_it_knows():
    """No pod context: the listed exclusive CPUs (4) count as requests, the allocatable is the
    listed allocatable CPUs (8): a Burstable 4.5-CPU pod is OutOfcpu (4500 > 8000 - 4000)."""
    node = node_state(snapshot(pod("g", app=(0, 1, 2, 3))), TWO_BY_FOUR, True, False)
    assert node is not None
    shape = PodShape("b", (ContainerShape("c", {"cpu": 4500}),), qos=BURSTABLE)
    assert admit(shape, node, SNN).reason == "OutOfcpu"


# ---- which CPUs are picked -------------------------------------------------------------------

def test_policy_none_takes_a_whole_free_core_not_a_lone_thread():
    """SMT 2: node 0 has one lone free thread (CPU 1; 0, 2, 3 taken), node 1 is free. Policy
    none, 2 CPUs: takeByTopologyNUMAPacked takes whole cores before single threads: core
    {4, 5} on node 1, not CPU 1 plus another."""
    node = state(cpus(4, {0: 0, 1: 4}, threads=2))
    assert node.cpu is not None
    node = node.__class__(node.numa_ids, node.cpu.__class__(
        node.cpu.online, node.cpu.free | {1}, node.cpu.cpu_numa, node.cpu.siblings, 2))
    verdict = admit(single_container("p", {"cpu": 2000}), node, Rules("none"))
    assert sorted(verdict.placements[0].cpu_ids) == [4, 5]
    assert where(verdict.placements[0]) == {1}
