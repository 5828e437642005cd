"""Admission of whole pods: scopes, policies, init containers, memory groups, full-pcpus-only;
every expected verdict worked out by hand from the kubelet's rules (SPEC 7.2)."""

from __future__ import annotations

from dataclasses import replace

from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Managers, Rules
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape, single_container

from .nodes import GiB, cpus, devices, memory, state


def two_containers(a: int, b: int) -> PodShape:
    return PodShape("p", (ContainerShape("a", {"cpu": a * 1000}),
                          ContainerShape("b", {"cpu": b * 1000})))


def test_container_scope_splits_a_pod_no_node_holds_whole():
    """4 CPUs free on each node; 3 + 3 CPUs: each container is merged alone, a on node 0,
    b on node 1 (node 0 has 1 left)."""
    node = state(cpus(4, {0: 4, 1: 4}))
    verdict = admit(two_containers(3, 3), node, Rules("single-numa-node", "container"))
    assert verdict.admitted
    assert [(p.container, sorted(p.cpus)) for p in verdict.placements] == [("a", [0]),
                                                                           ("b", [1])]


def test_pod_scope_rejects_what_container_scope_splits():
    """Scope pod merges 6 CPUs once: 4-CPU nodes need 2 by capacity, so no single-node
    preferred hint: TopologyAffinityError, blocking cpu."""
    node = state(cpus(4, {0: 4, 1: 4}))
    verdict = admit(two_containers(3, 3), node, Rules("single-numa-node", "pod"))
    assert (verdict.admitted, verdict.reason, verdict.blocking_resource) == (
        False, "TopologyAffinityError", "cpu")


def test_pod_scope_places_every_container_on_one_node():
    """2 free on node 0, 3 on node 1; 2 + 1 CPUs: pod scope takes node 1 for both."""
    node = state(cpus(4, {0: 2, 1: 3}))
    verdict = admit(two_containers(2, 1), node, Rules("single-numa-node", "pod"))
    assert verdict.admitted
    assert {p.container: sorted(p.cpus) for p in verdict.placements} == {"a": [1], "b": [1]}
    split = admit(two_containers(2, 1), node, Rules("single-numa-node", "container"))
    assert {p.container: sorted(p.cpus) for p in split.placements} == {"a": [0], "b": [1]}


def init_then_app() -> PodShape:
    return PodShape("p", (ContainerShape("app", {"cpu": 4000}),),
                    (ContainerShape("setup", {"cpu": 1000}),))


def test_init_container_pins_the_app_container():
    """kubernetes#123816: the init container's CPU lands on node 0 (lowest with 1 free); the
    app container's hint must contain it: {0} has 1 reusable + 1 free < 4, {1} lacks the
    reusable CPU, {0,1} is wider than the capacity needs: TopologyAffinityError, though node 1
    has 4 free. Scope pod merges max(4, 1) = 4 once: node 1."""
    node = state(cpus(4, {0: 2, 1: 4}))
    verdict = admit(init_then_app(), node, Rules("single-numa-node", "container"))
    assert (verdict.admitted, verdict.reason, verdict.container, verdict.pinned_by) == (
        False, "TopologyAffinityError", "app", "setup")
    pod_scope = admit(init_then_app(), node, Rules("single-numa-node", "pod"))
    assert pod_scope.admitted
    assert {p.container: sorted(p.cpus) for p in pod_scope.placements} == {
        "setup": [1], "app": [1]}


def test_app_container_reuses_init_cpus():
    """The init container's CPU is reusable: 1 reusable + 3 free on node 0 hold 4."""
    node = state(cpus(4, {0: 4, 1: 4}))
    verdict = admit(init_then_app(), node, Rules("single-numa-node", "container"))
    assert verdict.admitted
    assert verdict.state is not None and verdict.state.cpu is not None
    assert len(verdict.state.cpu.free) == 4  # node 0's four taken once, node 1 untouched


def test_memory_group_blocks_single_numa_memory():
    """A block across {0,1} groups both nodes: no single-node memory hint; {0,1} is a hint
    but wider than the capacity needs. single-numa-node and restricted reject, blocking
    memory; best-effort admits on {0,1}."""
    mem = memory({0: 10 * GiB, 1: 10 * GiB}, {0: 0, 1: 8 * GiB},
                 {0: frozenset({0, 1}), 1: frozenset({0, 1})})
    node = state(cpus(4, {0: 4, 1: 4}), mem)
    pod = single_container("p", {"cpu": 1000, "memory": GiB})
    for policy in ("single-numa-node", "restricted"):
        verdict = admit(pod, node, Rules(policy))
        assert (verdict.admitted, verdict.reason, verdict.blocking_resource) == (
            False, "TopologyAffinityError", "memory")
        assert verdict.grouped_nodes == {0, 1}
    best = admit(pod, node, Rules("best-effort"))
    assert best.admitted and best.placements[0].memory == {0, 1}


def test_restricted_rejects_fragmentation_best_effort_spreads():
    """10 CPUs on 32-CPU nodes with 5 free each: minimum width 1 by capacity, only {0,1}
    holds it: restricted rejects, best-effort admits on both nodes."""
    node = state(cpus(32, {0: 5, 1: 5}))
    pod = single_container("p", {"cpu": 10000})
    assert admit(pod, node, Rules("restricted")).reason == "TopologyAffinityError"
    best = admit(pod, node, Rules("best-effort"))
    assert best.admitted and best.placements[0].cpus == {0, 1}


def test_restricted_rejects_different_minimum_widths():
    """CPUs fit one node by capacity, 2 GPUs need both (one per node): no permutation is
    preferred with equal masks, restricted rejects, blocking multiple."""
    node = state(cpus(8, {0: 8, 1: 8}), None,
                 {"nvidia.com/gpu": devices({frozenset({0}): 1, frozenset({1}): 1})})
    pod = single_container("p", {"cpu": 2000, "nvidia.com/gpu": 2})
    verdict = admit(pod, node, Rules("restricted"))
    assert (verdict.reason, verdict.blocking_resource) == ("TopologyAffinityError", "multiple")


def test_full_pcpus_only_rejects_with_smt_alignment_error():
    node = state(cpus(8, {0: 8, 1: 8}, threads=2))
    verdict = admit(single_container("p", {"cpu": 3000}), node,
                    Rules("single-numa-node", full_pcpus_only=True))
    assert (verdict.reason, verdict.blocking_resource) == ("SMTAlignmentError", "cpu")
    assert admit(single_container("p", {"cpu": 4000}), node,
                 Rules("single-numa-node", full_pcpus_only=True)).admitted


def test_a_resource_no_device_plugin_offers_is_not_aligned():
    """The device manager skips it and the resource-fit predicate drops a resource the node
    does not list (removeMissingExtendedResources): admitted."""
    node = state(cpus(4, {0: 4, 1: 4}))
    verdict = admit(single_container("p", {"example.com/fpga": 1}), node, Rules())
    assert verdict.admitted and verdict.placements[0].devices == {}


def test_held_devices_gone_unhealthy_do_not_make_the_predicate_say_out_of():
    """3 GPUs registered, 2 healthy (allocatable), 2 held (one of them now unhealthy), 1 free:
    the device manager allocates the free one; the predicate first raises the allocatable to
    the 3 devices now allocated (devicemanager sanitizeNodeAllocatable), so 1 <= 3 - 2 used:
    admitted."""
    gpus = devices({frozenset({0}): 3}, {frozenset({0}): 1})
    node = state(None, None, {"nvidia.com/gpu": gpus.__class__(gpus.registered, gpus.free,
                                                               healthy=2, held=2)})
    pod = PodShape("p", (ContainerShape("c", {"nvidia.com/gpu": 1}),), qos=BURSTABLE)
    assert admit(pod, node, Rules()).admitted


def test_best_effort_device_shortage_is_unexpected_admission_error():
    """Fewer free devices than requested node-wide: empty hints; best-effort admits the
    merge, the device manager's allocation fails."""
    node = state(None, None, {"nvidia.com/gpu": devices({frozenset({0}): 2},
                                                        {frozenset({0}): 1})})
    pod = PodShape("p", (ContainerShape("c", {"nvidia.com/gpu": 2}),), qos=BURSTABLE)
    assert admit(pod, node, Rules("best-effort")).reason == "UnexpectedAdmissionError"
    assert admit(pod, node, Rules("single-numa-node")).reason == "TopologyAffinityError"


def test_policy_none_allocates_without_alignment():
    node = state(cpus(4, {0: 1, 1: 3}))
    verdict = admit(single_container("p", {"cpu": 4000}), node, Rules("none"))
    assert verdict.admitted and verdict.placements[0].cpus == {0, 1}
    assert admit(single_container("p", {"cpu": 5000}), node,
                 Rules("none")).reason == "UnexpectedAdmissionError"


def test_prefer_closest_numa_nodes_picks_the_nearer_pair():
    """4 nodes, 2 free CPUs each, 4 CPUs asked (best-effort: width 2). Without the option the
    lowest ids {0,1}; with distances making {0,2} closest, {0,2}."""
    far = {0: {0: 10, 1: 30, 2: 11, 3: 30}, 1: {0: 30, 1: 10, 2: 30, 3: 11},
           2: {0: 11, 1: 30, 2: 10, 3: 30}, 3: {0: 30, 1: 11, 2: 30, 3: 10}}
    node = state(cpus(2, {0: 2, 1: 2, 2: 2, 3: 2}, numa=4), numa=4)
    pod = single_container("p", {"cpu": 4000})
    assert admit(pod, node, Rules("best-effort")).placements[0].hint == {0, 1}
    closer = admit(pod, node.__class__(node.numa_ids, node.cpu, None, {}, far),
                   Rules("best-effort", prefer_closest_numa_nodes=True))
    assert closer.placements[0].hint == {0, 2}


def test_cpu_manager_none_aligns_no_cpus():
    node = state(None, None, {"nvidia.com/gpu": devices({frozenset({1}): 1})})
    pod = single_container("p", {"cpu": 64000, "nvidia.com/gpu": 1})
    verdict = admit(pod, node, Rules(managers=Managers(cpu_static=False, memory_static=False)))
    assert verdict.admitted and verdict.placements[0].devices == {"nvidia.com/gpu": {1}}


def test_devices_outside_the_hint_come_before_devices_without_topology():
    """VFs only on node 0; one GPU on node 1, one without topology. VF hints {0} (preferred)
    and {0,1}; GPU hints {1} (preferred) and {0,1}. best-effort: no preferred merge; the widest
    narrowest hint is 1 wide, so {0} (VF {0} AND GPU {0,1}). The device manager takes GPUs
    meeting {0} (none), then those with topology outside it (node 1), and only then the one
    without topology (devicemanager filterByAffinity, devicesToAllocate): the topology-less GPU
    stays free. (A 1.34 kubelet: since 1.37 the hints are built over the devices' own NUMA
    nodes, tests/unit/fit/test_kubelet_rules.py.)"""
    node = replace(state(None, None, {"example.com/vf": devices({frozenset({0}): 2}),
                                      "nvidia.com/gpu": devices({frozenset({1}): 1,
                                                                 frozenset(): 1})}),
                   kubelet_minor=34)
    pod = PodShape("p", (ContainerShape("c", {"example.com/vf": 1, "nvidia.com/gpu": 1}),),
                   qos=BURSTABLE)
    verdict = admit(pod, node, Rules("best-effort"))
    assert verdict.admitted and verdict.placements[0].hint == {0}
    assert verdict.placements[0].device_sets["nvidia.com/gpu"] == {frozenset({1}): 1}
    assert verdict.state is not None
    assert verdict.state.devices["nvidia.com/gpu"].free == {frozenset({1}): 0, frozenset(): 1}


def test_memory_extended_beyond_a_preferred_hint_must_be_preferred():
    """Scope pod: a (1 CPU, 2 GiB) and b (4 GiB). Nodes 0 and 1 (4 GiB allocatable each) are
    one memory group with 1 and 2 GiB free: no set holds the pod's 6 GiB, so the memory
    manager has no hint and the CPU's {0} (CPUs free only there) is the preferred merge.
    Allocating a: {0} lacks 2 GiB; the only memory hint containing it is the group {0,1},
    not preferred (one node's 4 GiB would hold 2 GiB), while the merged hint was preferred:
    the memory manager fails a with "failed to find the extended preferred hint"
    (memorymanager/policy_static.go Allocate)."""
    mem = memory({0: 4 * GiB, 1: 4 * GiB}, {0: GiB, 1: 2 * GiB},
                 {0: frozenset({0, 1}), 1: frozenset({0, 1})})
    node = state(cpus(2, {0: 2, 1: 0}), mem)
    pod = PodShape("p", (ContainerShape("a", {"cpu": 1000, "memory": 2 * GiB}),
                         ContainerShape("b", {"memory": 4 * GiB})))
    verdict = admit(pod, node, Rules("restricted", "pod"))
    assert (verdict.admitted, verdict.reason, verdict.container) == (
        False, "UnexpectedAdmissionError", "a")
    assert verdict.message == "[memorymanager] failed to find the extended preferred hint"


def test_later_containers_cut_the_init_containers_memory_blocks():
    """updateInitContainersMemoryBlocks: init-0 512Mi, init-1 256Mi, app 1Gi of memory and
    1Gi of hugepages, all on node 0. init-1's block cuts init-0's to 256Mi; the app's 1Gi
    cuts init-0's 256Mi, then init-1's 256Mi, to 0; the hugepages, a type no init container
    holds, cut nothing."""
    MiB = 1 << 20
    pod = PodShape("p", (ContainerShape("app", {"memory": GiB, "hugepages-1Gi": GiB}),),
                   init_containers=(ContainerShape("init-0", {"memory": 512 * MiB}),
                                    ContainerShape("init-1", {"memory": 256 * MiB})))
    pages = {"hugepages-1Gi": 2 * GiB}
    node = state(mem={n: replace(m, allocatable={**m.allocatable, **pages},
                                 free={**m.free, **pages})
                      for n, m in memory({0: 8 * GiB, 1: 8 * GiB}).items()})
    verdict = admit(pod, node, Rules("single-numa-node", "container",
                                     managers=Managers(cpu_static=False)))
    assert verdict.admitted
    assert [(p.container, sorted(p.memory_blocks)) for p in verdict.placements] == [
        ("init-0", [("memory", 0, frozenset({0}))]),
        ("init-1", [("memory", 0, frozenset({0}))]),
        ("app", [("hugepages-1Gi", GiB, frozenset({0})), ("memory", GiB, frozenset({0}))])]


def test_an_init_containers_block_keeps_what_the_app_does_not_reuse():
    """1Gi init container, 256Mi app container: the init container's block is cut to 768Mi."""
    MiB = 1 << 20
    pod = PodShape("p", (ContainerShape("app", {"memory": 256 * MiB}),),
                   init_containers=(ContainerShape("init", {"memory": GiB}),))
    verdict = admit(pod, state(mem=memory({0: 8 * GiB, 1: 8 * GiB})),
                    Rules("single-numa-node", "container", managers=Managers(cpu_static=False)))
    assert [p.memory_blocks for p in verdict.placements] == [
        (("memory", 768 * MiB, frozenset({0})),), (("memory", 256 * MiB, frozenset({0})),)]
