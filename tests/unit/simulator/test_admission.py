"""The simulated kubelet admits through the fit engine's rules, on its own books: every expected
value is worked out by hand from the kubelet's code (the function named in each comment), and
what an admitted pod gets is checked in the simulator's state afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.model import MemoryBlock
from exporter.simulator import ProfileError, load_profile, parse_profile
from exporter.simulator.node.admissionconfig import (
    AdmissionConfig,
    config_from_spec,
    updated_config,
)
from exporter.simulator.node.book import SimulatedNode
from exporter.simulator.profile import PodSpec, parse_pod

GiB = 1 << 30
SNN = AdmissionConfig("single-numa-node")


def node(cpus_per_node: int = 4, threads: int = 1, memory: str = "16Gi",
         **extra: Any) -> SimulatedNode:
    """Two NUMA nodes, CPUs 0..n-1 on node 0 and n..2n-1 on node 1, nothing reserved, no pod;
    single-numa-node, scope container, static CPU and memory managers."""
    n = cpus_per_node
    return SimulatedNode(parse_profile({
        "name": "t", "threads_per_core": threads,
        "numa_nodes": [{"id": 0, "cpus": f"0-{n - 1}", "memory": memory},
                       {"id": 1, "cpus": f"{n}-{2 * n - 1}", "memory": memory}], **extra}))


def held(state: SimulatedNode, *cpus: int) -> SimulatedNode:
    """``state`` with ``cpus`` held by some container already (not free)."""
    for numa in state.free_cpus:
        state.free_cpus[numa] -= set(cpus)
    state.version += 1
    return state


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        sidecars: tuple[dict[str, Any], ...] = (), **extra: Any) -> PodSpec:
    return parse_pod({"namespace": "ns", "name": extra.pop("name", "p"),
                      "containers": list(containers), "init_containers": list(init),
                      "sidecars": list(sidecars), **extra})


def c(name: str = "c", cpus: int | str = 0, memory: str | None = None,
      devices: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "devices": devices or {}}
    if cpus:
        body["cpus"] = cpus
    if memory:
        body["memory"] = memory
    return body


def free(state: SimulatedNode) -> set[int]:
    return set().union(*state.free_cpus.values())


def placed(result: Any) -> dict[str, tuple[list[int], tuple[int, ...]]]:
    return {p.name: (sorted(p.numa), p.cpus) for p in result.containers}


# ---- memory groups: formed by the kubelet's own rules ---------------------------------------

def test_a_block_spanning_both_nodes_groups_them_and_single_numa_memory_is_refused():
    state = node(memory="16Gi")
    # 20 GiB: no node's 16 GiB holds it, so the memory hint {0,1} is preferred (minimum width
    # 2), the CPU's preferred hints are single nodes: no merge is preferred; best-effort takes
    # the widest narrowest hint, {0,1} (policy.go maxOfMinAffinityCounts)
    wide = state.admit(pod(c("db", 1, "20Gi"), name="db"),
                       AdmissionConfig("best-effort"))
    assert wide and placed(wide) == {"db": ([0, 1], (0,))}
    assert wide.containers[0].memory == (MemoryBlock("memory", 20 * GiB, (0, 1)),)
    # filled in id order (memorymanager updateMachineState): 16 GiB from node 0, 4 from 1
    assert state.resources.free_memory == {(0, "memory"): 0, (1, "memory"): 12 * GiB}
    # single-numa-node: {1} has 12 GiB free, but a node of a multi-node group gives no
    # single-node hint (memorymanager calculateHints): TopologyAffinityError
    before = (free(state), dict(state.resources.free_memory))
    rejected = state.admit(pod(c("c", 1, "1Gi"), name="db-client"), SNN)
    assert (rejected.admitted, rejected.reason, rejected.message) == (
        False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")
    # a rejected pod holds nothing, and is kept as the API shows it (kubelet.go rejectPod)
    assert (free(state), dict(state.resources.free_memory)) == before
    assert ("ns", "db-client") not in state.pods
    assert state.rejected_pods[("ns", "db-client")]["status"] == {
        "phase": "Failed", "reason": "TopologyAffinityError",
        "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}
    # best-effort: the group {0,1} is the only memory hint; the block takes node 1's memory
    again = state.admit(pod(c("c", 1, "1Gi"), name="db-client"), AdmissionConfig("best-effort"))
    assert again.containers[0].memory == (MemoryBlock("memory", GiB, (0, 1)),)
    assert state.resources.free_memory[(1, "memory")] == 11 * GiB
    assert ("ns", "db-client") not in state.rejected_pods


def test_a_node_with_single_node_blocks_never_joins_a_group():
    """Both nodes hold a single-node block: {0,1} breaks the group rule (calculateHints), so a
    request no single node has free gets no memory hint at all; best-effort admits the merge
    and the memory manager cannot extend it (UnexpectedAdmissionError)."""
    state = node(memory="16Gi")
    assert state.admit(pod(c("a", 1, "10Gi"), name="a"), SNN)  # node 0: 6 GiB left
    assert state.admit(pod(c("b", 1, "10Gi"), name="b"), SNN)  # node 1: 6 GiB left
    result = state.admit(pod(c("c", 1, "8Gi")), AdmissionConfig("best-effort"))
    assert (result.reason, result.message) == (
        "UnexpectedAdmissionError", "Allocate failed due to [memorymanager] failed to find NUMA "
        "nodes to extend the current topology hint, which is unexpected")


# ---- policies and CPU assignment -------------------------------------------------------------

def test_restricted_rejects_what_fragmentation_forces_over_more_nodes():
    three = pod(c(cpus=3))
    # capacity: one node (4 CPUs) holds 3, so only single-node hints are preferred; free: only
    # {0,1} has 3 (2 + 2)
    for policy in ("restricted", "single-numa-node"):
        result = held(node(), 0, 1, 4, 5).admit(three, AdmissionConfig(policy))
        assert (result.admitted, result.reason) == (False, "TopologyAffinityError")
    # best-effort: {0,1}; takeByTopologyNUMAPacked takes whole cores (one CPU each here) from
    # the NUMA node with the fewest free CPUs first, the lower id on a tie: 2, 3, then 6
    spread = held(node(), 0, 1, 4, 5).admit(three, AdmissionConfig("best-effort"))
    assert placed(spread) == {"c": ([0, 1], (2, 3, 6))}
    plain = held(node(), 0, 1, 4, 5).admit(three, AdmissionConfig("none"))
    assert placed(plain) == {"c": ([], (2, 3, 6))}


def test_single_numa_node_places_on_the_lowest_node_that_fits():
    state = held(node(), 0, 1, 2)  # node 0: CPU 3 free, node 1: 4 free
    result = state.admit(pod(c(cpus=2, memory="1Gi"), name="two"), SNN)
    assert placed(result) == {"c": ([1], (4, 5))}
    assert result.containers[0].memory == (MemoryBlock("memory", GiB, (1,)),)
    assert state.pods[("ns", "two")].assignment.containers[0].cpu_ids == (4, 5)
    assert free(state) == {3, 6, 7}
    one = state.admit(pod(c(cpus=1), name="one"), SNN)
    assert placed(one) == {"c": ([0], (3,))}


def test_a_request_larger_than_the_node():
    # policy none: no hint; allocateCPUs fails (cpu_assignment.go takeByTopology)
    result = node().admit(pod(c(cpus=9)), AdmissionConfig("none"))
    assert (result.reason, result.message) == (
        "UnexpectedAdmissionError", "Allocate failed due to not enough cpus available to "
        "satisfy request: requested=9, available=8, which is unexpected")
    # any other policy: no CPU hint at all, the merge is not preferred
    assert node().admit(pod(c(cpus=9)), SNN).reason == "TopologyAffinityError"
    # best-effort admits the merge, then the allocation fails
    assert node().admit(pod(c(cpus=9)), AdmissionConfig("best-effort")).reason \
        == "UnexpectedAdmissionError"


def test_prefer_closest_numa_nodes_picks_the_nearest_pair():
    distances = [[10, 30, 12, 30], [30, 10, 30, 12], [12, 30, 10, 30], [30, 12, 30, 10]]
    # memory manager None: the CPUs alone decide (a Guaranteed pod's memory would be asked for
    # on one node, its CPUs on two: restricted would reject the different minimum widths)
    spec = {"name": "t", "memory_manager_policy": "None",
            "numa_nodes": [{"id": i, "cpus": f"{4 * i}-{4 * i + 3}",
                            "distances": distances[i]} for i in range(4)]}
    six = pod(c(cpus=6))  # 4 CPUs per node: every pair is a preferred hint
    assert placed(SimulatedNode(parse_profile(spec)).admit(six, AdmissionConfig("best-effort"))
                  )["c"][0] == [0, 1]
    # average distances: {0,2} and {1,3} 11, the others 20; equal: the lower ids
    closest = AdmissionConfig("best-effort", prefer_closest_numa_nodes=True)
    assert placed(SimulatedNode(parse_profile(spec)).admit(six, closest))["c"][0] == [0, 2]
    restricted = AdmissionConfig("restricted", prefer_closest_numa_nodes=True)
    assert placed(SimulatedNode(parse_profile(spec)).admit(six, restricted))["c"][0] == [0, 2]


def test_full_pcpus_only_gives_the_kubelets_smt_alignment_errors():
    # 2 threads per core, siblings k and k+4: node 0 holds cores {0,4},{1,5}, node 1 {2,6},{3,7}
    spec = {"name": "t", "threads_per_core": 2, "reserved_cpus": "0",
            "numa_nodes": [{"id": 0, "cpus": "0-1,4-5"}, {"id": 1, "cpus": "2-3,6-7"}]}
    config = AdmissionConfig("single-numa-node", full_pcpus_only=True)
    odd = SimulatedNode(parse_profile(spec)).admit(pod(c(cpus=3, memory="1Gi")), config)
    assert (odd.reason, odd.message) == (
        "SMTAlignmentError", "SMT Alignment Error: requested 3 cpus not multiple cpus per "
                             "core = 2")
    # 7 free CPUs, 6 outside the reserved CPU's core {0,4}; best-effort admits the merge
    # without a CPU hint, the CPU manager refuses (policy_static.go SMTAlignmentError)
    wide = SimulatedNode(parse_profile(spec)).admit(
        pod(c(cpus=8, memory="1Gi")), AdmissionConfig("best-effort", full_pcpus_only=True))
    assert (wide.reason, wide.message) == (
        "SMTAlignmentError", "SMT Alignment Error: not enough free physical CPUs: available "
        "physical CPUs = 6, requested CPUs = 8, CPUs per core = 2")
    # 2 CPUs: node 0 (free 1, 4, 5) is the lowest that fits: its whole free core {1,5}
    two = SimulatedNode(parse_profile(spec)).admit(pod(c(cpus=2, memory="1Gi")), config)
    assert placed(two) == {"c": ([0], (1, 5))}


# ---- scopes, init containers and sidecars ----------------------------------------------------

def test_an_init_container_pins_the_app_container_under_container_scope():
    app = pod(c("app", 4), init=(c("init", 2),))
    # init: 2 CPUs on node 0 (3 free, the lowest): 0, 1, reusable. app: a hint must hold CPUs
    # 0 and 1; {0} has 2 reusable + 1 free = 3 < 4, {0,1} is not preferred: rejected, though
    # node 1 alone has 4 free (kubernetes#123816)
    result = held(node(), 3).admit(app, SNN)
    assert (result.admitted, result.reason) == (False, "TopologyAffinityError")
    # scope pod: one merge over max(4, 2) = 4 CPUs, node 1 for both; the app container reuses
    # the init container's CPUs
    state = held(node(), 3)
    scoped = state.admit(app, AdmissionConfig("single-numa-node", "pod"))
    assert placed(scoped) == {"init": ([1], (4, 5)), "app": ([1], (4, 5, 6, 7))}
    assert free(state) == {0, 1, 2}
    # List shows the app container only; the finished init container is kept for the
    # kubelet's state files
    sim = state.pods[("ns", "p")]
    assert [x.name for x in sim.assignment.containers] == ["app"]
    assert [(x.name, x.cpu_ids) for x in sim.init_containers] == [("init", (4, 5))]


def test_a_sidecar_takes_reusable_cpus_out_for_good():
    state = node()
    result = state.admit(pod(c("app", 2), init=(c("setup", 2),), sidecars=(c("proxy", 1),)))
    # sidecars are started first: proxy gets CPU 0; setup 1, 2 (reusable); the app's hint must
    # hold them (node 0) and it reuses them (cpumanager updateCPUsToReuse): 1, 2; 3..7 free
    assert placed(result) == {"proxy": ([0], (0,)), "setup": ([0], (1, 2)),
                              "app": ([0], (1, 2))}
    assert free(state) == {3, 4, 5, 6, 7}
    init_first = node()
    result = init_first.admit(pod(c("app", 2), init=(c("setup", 2),)))
    assert placed(result) == {"setup": ([0], (0, 1)), "app": ([0], (0, 1))}


def test_pod_scope_counts_sidecars_started_before_an_init_container():
    # a profile starts its sidecars before its init containers: max(app 2 + sidecars 1 + 1,
    # sidecars 1 + 1 + init 4 = 6) = 6 (cpumanager podGuaranteedCPUs): only node 1 (6 free)
    state = held(node(cpus_per_node=6), 0)
    shaped = parse_pod({"namespace": "ns", "name": "p", "containers": [c("app", 2)],
                        "sidecars": [c("s1", 1), c("s2", 1)], "init_containers": [c("big", 4)]})
    result = state.admit(shaped, AdmissionConfig("single-numa-node", "pod"))
    assert result and {p.name: sorted(p.numa) for p in result.containers} == {
        "s1": [1], "s2": [1], "big": [1], "app": [1]}


# ---- who asks for what -----------------------------------------------------------------------

def test_only_guaranteed_whole_cpus_get_exclusive_cpus():
    # a fractional CPU: the shared pool; memory still asked for by a Guaranteed pod's container
    fractional = node().admit(pod(c(cpus="1500m", memory="1Gi")), SNN)
    assert fractional.containers[0].cpus == ()
    assert fractional.containers[0].memory == (MemoryBlock("memory", GiB, (0,)),)
    burstable = node().admit(pod(c(cpus=2, memory="1Gi"), qos="Burstable"), SNN)
    assert placed(burstable) == {"c": ([], ())} and burstable.containers[0].memory == ()


def test_pod_level_resources_need_the_gate_and_scope_pod_for_a_pool():
    level = pod(c("a", 2, "1Gi"), c("b"), pod_level={"cpus": 1, "memory": "1Gi"})
    # without PodLevelResourceManagers the CPU and memory managers skip the pod
    plain = node().admit(level, SNN)
    assert plain and [(p.cpus, p.memory) for p in plain.containers] == [((), ()), ((), ())]
    # with it, under scope container, its containers are aligned as usual and no pod pool
    gated = AdmissionConfig("single-numa-node", pod_level_resource_managers=True)
    state = node()
    assert placed(state.admit(level, gated))["a"] == ([0], (0, 1))
    assert state.pods[("ns", "p")].assignment.cpu_ids == ()
    # under scope pod the pod holds its own CPU and memory too: List's pod-level fields cover
    # its containers' (SPEC section 2)
    pooled = node()
    pooled.admit(level, AdmissionConfig("single-numa-node", "pod",
                                         pod_level_resource_managers=True))
    assignment = pooled.pods[("ns", "p")].assignment
    assert assignment.cpu_ids == (0, 1, 2)
    assert assignment.memory == (MemoryBlock("memory", 2 * GiB, (0,)),)
    assert pooled.resources.free_memory[(0, "memory")] == 14 * GiB


# ---- devices and the resource-fit predicate --------------------------------------------------

def test_topology_less_devices_count_for_no_numa_node():
    devices = [{"resource": "x.io/nic", "numa": [0], "count": 1, "id_prefix": "n"},
               {"resource": "x.io/nic", "count": 3}]
    # 2 NICs: 4 free node-wide, only one meets any NUMA set: no hint at all
    assert node(devices=devices).admit(pod(c(devices={"x.io/nic": 2}), qos="BestEffort"),
                                       SNN).reason == "TopologyAffinityError"
    one = node(devices=devices).admit(pod(c(devices={"x.io/nic": 1}), qos="BestEffort"), SNN)
    assert placed(one) == {"c": ([0], ())}
    assert one.containers[0].devices[0].device_ids == ("n0",)
    # a resource none of whose devices has topology does not care: admitted, aligned nowhere
    loose = node(devices=[{"resource": "x.io/fpga", "count": 2}]).admit(
        pod(c(devices={"x.io/fpga": 2}), qos="BestEffort"), SNN)
    assert placed(loose) == {"c": ([], ())}


def test_a_device_local_to_two_nodes_counts_for_each():
    result = node(devices=[{"resource": "x.io/gpu", "numa": [0, 1], "count": 2}]).admit(
        pod(c(cpus=1, devices={"x.io/gpu": 2})), SNN)
    assert placed(result) == {"c": ([0], (0,))}


def test_a_held_device_gone_unhealthy_does_not_make_out_of_resource():
    state = node(devices=[{"resource": "x.io/gpu", "per_numa": {"0": 2}}])
    assert state.admit(pod(c(devices={"x.io/gpu": 1}), qos="BestEffort", name="a"), SNN)
    state.mark_unhealthy("gpu-0")
    # the predicate raises the allocatable (1 healthy) to the 2 devices allocated once gpu-1
    # is (devicemanager sanitizeNodeAllocatable): 1 requested + 1 used <= 2, admitted
    second = state.admit(pod(c(devices={"x.io/gpu": 1}), qos="BestEffort", name="b"), SNN)
    assert second and second.containers[0].devices[0].device_ids == ("gpu-1",)
    # now none is free: the device manager's hints are empty
    third = state.admit(pod(c(devices={"x.io/gpu": 1}), qos="BestEffort", name="c"), SNN)
    assert third.reason == "TopologyAffinityError"


def test_every_pods_requests_count_for_out_of_cpu_and_pods():
    state = node(max_pods=3)  # 8 CPUs allocatable: 8000m
    assert state.admit(pod(c(cpus="6500m"), qos="Burstable", name="busy"), SNN)
    # 2 exclusive CPUs are free for the CPU manager; the predicate then counts 6500m + 2000m
    # (noderesources.Fits after the Topology Manager)
    result = state.admit(pod(c(cpus=2, memory="1Gi"), name="two"), SNN)
    assert (result.reason, result.message) == (
        "OutOfcpu", "Node didn't have enough resource: cpu, requested: 2000, used: 6500, "
                    "capacity: 8000")
    assert free(state) == set(range(8))
    assert state.admit(pod(c(cpus="500m"), qos="Burstable", name="b"), SNN)
    assert state.admit(pod(c(cpus="500m"), qos="Burstable", name="c"), SNN)
    assert state.admit(pod(c(cpus="100m"), qos="Burstable", name="d"), SNN).reason == "OutOfpods"


def test_a_plugin_that_is_not_registered_serves_no_device():
    state = node(devices=[{"resource": "x.io/gpu", "per_numa": {"0": 1}}])
    state.unregistered = frozenset({"x.io/gpu"})
    # its devices are known but none is healthy: no hint under single-numa-node, and the
    # device manager's devicesToAllocate refuses under none
    assert state.admit(pod(c(devices={"x.io/gpu": 1}), qos="BestEffort"), SNN).reason == \
        "TopologyAffinityError"
    result = state.admit(pod(c(devices={"x.io/gpu": 1}), qos="BestEffort"),
                         AdmissionConfig("none"))
    assert result.message == ("Allocate failed due to no healthy devices present; cannot "
                              "allocate unhealthy devices x.io/gpu, which is unexpected")


# ---- profiles and configuration --------------------------------------------------------------

def two_node_profile(**extra: Any) -> dict[str, Any]:
    return {"name": "t", "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "16Gi"},
                                        {"id": 1, "cpus": "4-7", "memory": "16Gi"}], **extra}


def test_a_profile_pod_admitted_under_an_earlier_configuration():
    spec = parse_profile(two_node_profile(pods=[
        {"namespace": "ns", "name": "db", "admitted_under": {
            "topologyManagerPolicy": "best-effort"}, "containers": [c("db", 1, "20Gi")]}]))
    state = SimulatedNode(spec)
    assert state.admission_config.topology_manager_policy == "single-numa-node"
    assert state.pods[("ns", "db")].assignment.containers[0].memory == (
        MemoryBlock("memory", 20 * GiB, (0, 1)),)
    # single-numa-node would have rejected it: the profile says so
    with pytest.raises(ProfileError, match="the kubelet rejects pod ns/db: "
                                           "TopologyAffinityError"):
        SimulatedNode(parse_profile(two_node_profile(pods=[
            {"namespace": "ns", "name": "db", "containers": [c("db", 1, "20Gi")]}])))
    for bad, reason in (({"numa": 1}, "'numa' is gone"), ({"placement": "spread"}, "is gone"),
                        ({"admitted_under": ["none"]}, "admitted_under must be an object")):
        with pytest.raises(ProfileError, match=reason):
            parse_pod({"name": "p", "containers": [], **bad})
    with pytest.raises(ProfileError, match="admitted_under: unknown setting"):
        SimulatedNode(parse_profile(two_node_profile(pods=[
            {"name": "p", "admitted_under": {"policy": "none"}, "containers": []}])))


def test_config_from_profile_and_updates():
    spec = parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0-3"}],
                          "topology_manager_policy": "restricted",
                          "topology_manager_scope": "pod",
                          "cpu_manager_policy_options": {"full-pcpus-only": "true",
                                                         "align-by-socket": "true"}})
    config = config_from_spec(spec)
    assert config == AdmissionConfig("restricted", "pod", full_pcpus_only=True,
                                     align_by_socket=True)
    assert config.rules(spec).align_by_socket and config.rules(spec).full_pcpus_only
    changed = updated_config(config, {"topologyManagerPolicy": "best-effort",
                                      "topologyManagerPolicyOptions":
                                          {"prefer-closest-numa-nodes": "true"}})
    assert changed == AdmissionConfig("best-effort", "pod", True, True, align_by_socket=True)
    assert changed.document()["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true",
                                                             "align-by-socket": "true"}
    for bad in ({"topologyManagerPolicy": "strict"}, {"topologyManagerScope": "node"},
                {"cpuManagerPolicyOptions": {"full-pcpus-only": "yes"}},
                {"cpuManagerPolicyOptions": {"no-such-option": "true"}},
                {"topologyManagerPolicyOptions": []}, {"policy": "none"}):
        with pytest.raises(ValueError):
            updated_config(config, bad)


def test_a_policy_needs_max_allowable_numa_nodes_beyond_eight():
    data = {"name": "t", "numa_nodes": [{"id": i, "cpus": str(i)} for i in range(9)]}
    # nine NUMA nodes: the profile's default policy is none (topology_manager.go NewManager)
    state = SimulatedNode(parse_profile(data))
    assert state.admission_config.topology_manager_policy == "none"
    with pytest.raises(ProfileError, match="restricted on a machine with 9 NUMA nodes"):
        SimulatedNode(parse_profile({**data, "topology_manager_policy": "restricted"}))
    allowed = SimulatedNode(parse_profile({
        **data, "topology_manager_policy": "single-numa-node",
        "topology_manager_policy_options": {"max-allowable-numa-nodes": "9"}}))
    assert placed(allowed.admit(pod(c(cpus=1)))) == {"c": ([0], (0,))}
    # gb200-tray: 34 NUMA nodes, so its profile runs the Topology Manager with policy none
    assert SimulatedNode(load_profile("gb200-tray")).admission_config.topology_manager_policy \
        == "none"


def test_a_profile_pod_as_the_kubelet_reads_it():
    state = SimulatedNode(load_profile("small"))
    shape = state.kubelet.shape(load_profile("dual-socket-gpu").pods[0])  # ml/llm-train-0
    assert [(x.name, x.sidecar) for x in shape.init_containers] == [("log-shipper", True)]
    assert shape.qos == "Guaranteed"
    trainer = shape.containers[0].requests
    assert (trainer["cpu"], trainer["memory"], trainer["nvidia.com/gpu"]) == (
        16000, 96 * GiB, 4)


def test_the_kubelet_config_file_says_what_admission_follows(tmp_path):
    import yaml

    from exporter.simulator.node.sysfs import write_kubelet_config

    spec = parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0-3"}],
                          "topology_manager_scope": "pod", "max_pods": 250,
                          "cpu_manager_policy_options": {"full-pcpus-only": "true"},
                          "topology_manager_policy_options": {
                              "prefer-closest-numa-nodes": "true"},
                          "feature_gates": {"PodLevelResourceManagers": True, "Get": True}})
    written = yaml.safe_load(write_kubelet_config(spec, tmp_path / "config.yaml").read_text())
    assert written["featureGates"] == {"PodLevelResourceManagers": True}
    assert written["maxPods"] == 250
    # the Node's allocatable the simulator shows reserves no memory here and has no eviction
    # threshold (the kubelet's default would reserve 100Mi)
    assert (written["systemReserved"], written["evictionHard"]) == ({"memory": "0"}, {})
    settings = {k: written[k] for k in ("topologyManagerPolicy", "topologyManagerScope",
                                        "cpuManagerPolicyOptions",
                                        "topologyManagerPolicyOptions", "featureGates")}
    from_file = updated_config(AdmissionConfig(), settings)
    assert from_file == SimulatedNode(spec).admission_config == AdmissionConfig(
        "single-numa-node", "pod", full_pcpus_only=True, prefer_closest_numa_nodes=True,
        pod_level_resource_managers=True)


def test_profile_distances_reach_sysfs(tmp_path):
    from exporter.simulator import write_sysfs

    data = {"name": "t", "numa_nodes": [
        {"id": i, "cpus": f"{4 * i}-{4 * i + 3}",
         "distances": [[10, 30, 12, 30], [30, 10, 30, 12], [12, 30, 10, 30],
                       [30, 12, 30, 10]][i]} for i in range(4)]}
    root = write_sysfs(parse_profile(data), tmp_path)
    assert (root / "devices/system/node/node2/distance").read_text() == "12 30 10 30\n"
    with pytest.raises(ProfileError, match="distances must name all 2"):
        parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0", "distances": [10]},
                                                    {"id": 1, "cpus": "1"}]})


# ---- the managers' state and the kubelet's state files ---------------------------------------

@pytest.mark.parametrize("profile", ["small", "dual-socket-gpu", "gb200-tray"])
def test_the_managers_state_carried_from_admission_equals_one_rebuilt(profile):
    """Admission carries the fit engine's state from one pod to the next; rebuilt from the
    simulator's books it is the same (the large profile: tests/integration/test_simulator)."""
    state = SimulatedNode(load_profile(profile))
    carried = state.managers()
    state._managers = None
    assert state.managers() == carried


def test_the_cpu_manager_state_holds_the_finished_init_containers_cpus(tmp_path):
    from exporter.fit.state.checkpoints import parse_cpu_manager_state
    from exporter.simulator.node.checkpoints import write_state_files

    state = node()
    state.admit(pod(c("app", 1), init=(c("setup", 2),)))
    # setup: 0, 1; app reuses 0 (takeByTopology from the reusable and free CPUs of node 0)
    uid = state.pods[("ns", "p")].uid
    write_state_files(state, tmp_path)
    entries = parse_cpu_manager_state((tmp_path / "cpu_manager_state").read_text())
    assert entries == {uid: {"setup": frozenset({0, 1}), "app": frozenset({0})}}
    assert free(state) == {2, 3, 4, 5, 6, 7}


def test_the_config_file_and_sysfs_give_the_nodes_allocatable(tmp_path):
    """Without a Node object the exporter computes the Node's allocatable from sysfs and the
    config file as the kubelet's node status does: for dual-socket-gpu it is the Node the
    simulator shows (62 CPUs: 64 less CPUs 0 and 32; memory: 380Gi, each node's memory less the
    4Gi reserved on node 0; the hugepages)."""
    import yaml

    from exporter.fit.state.allocatable import derived_allocatable, parse_reservation
    from exporter.model import Allocatable, KubeletSnapshot
    from exporter.simulator import write_sysfs
    from exporter.simulator.node.admitting import simulated_node_allocatable
    from exporter.simulator.node.sysfs import write_kubelet_config
    from exporter.topology import read_topology

    spec = load_profile("dual-socket-gpu")
    config = yaml.safe_load(write_kubelet_config(spec, tmp_path / "config.yaml").read_text())
    derived = derived_allocatable(KubeletSnapshot((), Allocatable()),
                                  read_topology(write_sysfs(spec, tmp_path / "sys")),
                                  config["maxPods"], parse_reservation(config))
    shown = simulated_node_allocatable(spec, (), frozenset())
    assert derived == shown
    assert (derived["cpu"], derived["memory"]) == (62000, 380 * GiB)
