"""The simulator's admission model on hand-built nodes: every expected value is worked out from
the kubelet's rules (SPEC section 7.2) in the comments, not read back from the code."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.model import MemoryBlock
from exporter.simulator import ProfileError, load_profile, parse_profile
from exporter.simulator.admission import (
    AdmissionConfig,
    AdmissionNode,
    ContainerRequest,
    PodRequest,
    admit,
    config_from_spec,
    node_from_spec,
    pod_from_object,
    pod_from_spec,
    updated_config,
)
from exporter.simulator.state import NodeState

GiB = 1 << 30
SNN = AdmissionConfig("single-numa-node")


def two_nodes(cpus_per_node: int = 4, threads: int = 1, memory: str = "16Gi",
              **extra: Any) -> AdmissionNode:
    """Two NUMA nodes, CPUs 0..n-1 on node 0 and n..2n-1 on node 1, nothing reserved."""
    n = cpus_per_node
    data = {"name": "t", "threads_per_core": threads,
            "numa_nodes": [{"id": 0, "cpus": f"0-{n - 1}", "memory": memory},
                           {"id": 1, "cpus": f"{n}-{2 * n - 1}", "memory": memory}],
            **extra}
    return node_from_spec(parse_profile(data))


def pod(*containers: ContainerRequest, init: tuple[ContainerRequest, ...] = (),
        qos: str = "Guaranteed", pod_level: bool = False) -> PodRequest:
    return PodRequest("ns", "p", list(containers), list(init), qos, pod_level)


def c(name: str = "c", cpu: int = 0, memory: int = 0, sidecar: bool = False,
      devices: dict[str, int] | None = None) -> ContainerRequest:
    return ContainerRequest(name, cpu * 1000, {"memory": memory} if memory else {},
                            devices or {}, sidecar)


def numa_of(result_node: AdmissionNode, cpus: tuple[int, ...]) -> set[int]:
    return {result_node.cpu_numa[cpu] for cpu in cpus}


# ---- the scenario: a multi-NUMA memory block blocks single-NUMA memory ---------------

def test_multi_numa_block_refuses_single_numa_memory_on_both_nodes() -> None:
    state = NodeState(load_profile("dual-socket-gpu"))
    # analytics/inmem-db-0 holds 150 GiB over NUMA nodes 0 and 1: both are one memory group
    db = state.pods[("analytics", "inmem-db-0")].assignment.containers[0].memory
    assert db == (MemoryBlock("memory", 150 * GiB, (0, 1)),)
    node = node_from_spec(state.spec, [p.assignment for p in state.pods.values()
                                       if p.spec.active])
    assert node.memory_cells == {0: frozenset({0, 1}), 1: frozenset({0, 1})}
    # node 1 has 192 - 0.25 - 32 - 32 - 0.125 - 4 - 2 - 4 (pipeline's pod level)
    # - (150 - 76.3125) GiB free: plenty for 1 GiB, yet {1} is no hint (group rule)
    assert node.memory_free[(1, "memory")] == int(43.9375 * GiB)
    small = pod(c(cpu=1, memory=GiB))
    result = admit(node, small, SNN)
    assert (result.admitted, result.reason) == (False, "TopologyAffinityError")
    assert result.message == "Resources cannot be allocated with Topology locality"
    # best-effort: the only memory hint is the group {0,1}, so the block goes there
    result = admit(node, small, AdmissionConfig("best-effort"))
    assert result.admitted
    assert result.allocations[0].memory == (MemoryBlock("memory", GiB, (0, 1)),)
    # memory is not asked for by a Burstable pod: no memory hint, admitted on its devices
    burstable = pod(c(cpu=1, memory=GiB, devices={"intel.com/sriov_netdevice": 1}), qos="Burstable")
    assert admit(node, burstable, SNN).admitted


def test_group_forms_when_a_block_spans_nodes_and_blocks_later_pods() -> None:
    node = two_nodes(memory="16Gi")
    # 20 GiB: no single node's 16 GiB allocatable holds it, so the memory hint {0,1} is
    # preferred (minimum width 2) while the 1 CPU's preferred hints are single nodes: no
    # permutation is preferred with equal masks, so restricted rejects it
    wide = pod(c(cpu=1, memory=20 * GiB))
    assert admit(node, wide, AdmissionConfig("restricted")).reason == "TopologyAffinityError"
    # best-effort: among non-preferred merges, the width of the widest narrowest hint (2)
    big = admit(node, wide, AdmissionConfig("best-effort"))
    assert big.admitted and big.placements == (("c", frozenset({0, 1})),)
    assert big.allocations[0].memory == (MemoryBlock("memory", 20 * GiB, (0, 1)),)
    after = big.node
    # filled in NUMA order: 16 GiB from node 0, 4 from node 1
    assert after.memory_free[(0, "memory")] == 0
    assert after.memory_free[(1, "memory")] == 12 * GiB
    assert after.memory_cells == {0: frozenset({0, 1}), 1: frozenset({0, 1})}
    rejected = admit(after, pod(c(cpu=1, memory=GiB)), SNN)
    assert rejected.reason == "TopologyAffinityError"
    assert big.node is not node and node.memory_free[(0, "memory")] == 16 * GiB  # input intact


# ---- policies --------------------------------------------------------------------------------

def fragmented() -> AdmissionNode:
    # 2 of the 4 CPUs of each node taken: 2 + 2 free
    node = two_nodes()
    node.free_cpus -= {0, 1, 4, 5}
    return node


def test_restricted_rejects_what_fragmentation_forces_over_more_nodes() -> None:
    three = pod(c(cpu=3))
    # capacity: one node (4 CPUs) holds 3, so only a 1-node hint is preferred; free: only
    # {0,1} has 3 free, a non-preferred hint
    for policy in ("restricted", "single-numa-node"):
        result = admit(fragmented(), three, AdmissionConfig(policy))
        assert (result.admitted, result.reason) == (False, "TopologyAffinityError")
    spread = admit(fragmented(), three, AdmissionConfig("best-effort"))
    assert spread.admitted and spread.placements == (("c", frozenset({0, 1})),)
    assert numa_of(spread.node, spread.allocations[0].cpus) == {0, 1}
    plain = admit(fragmented(), three, AdmissionConfig("none"))
    assert plain.admitted and plain.placements == (("c", frozenset()),)
    assert len(plain.allocations[0].cpus) == 3


def test_single_numa_node_places_on_the_lowest_node_that_fits() -> None:
    node = two_nodes()
    node.free_cpus -= {0, 1, 2}  # node 0: 1 free, node 1: 4 free
    result = admit(node, pod(c(cpu=2, memory=GiB)), SNN)
    assert result.placements == (("c", frozenset({1})),)
    assert result.allocations[0].cpus == (4, 5)
    assert result.allocations[0].memory == (MemoryBlock("memory", GiB, (1,)),)
    one = admit(node, pod(c(cpu=1)), SNN)
    assert one.placements == (("c", frozenset({0})),) and one.allocations[0].cpus == (3,)


def test_request_larger_than_the_node_is_unexpected_under_none() -> None:
    node = two_nodes()
    result = admit(node, pod(c(cpu=9)), AdmissionConfig("none"))
    assert result.reason == "UnexpectedAdmissionError"
    assert result.message == ("Allocate failed due to not enough cpus available to satisfy "
                              "request: requested=9, available=8, which is unexpected")
    # any other policy: no CPU hint at all ([]), so the merge is not preferred
    assert admit(node, pod(c(cpu=9)), SNN).reason == "TopologyAffinityError"
    # best-effort admits the merge, then the allocation fails
    assert admit(node, pod(c(cpu=9)), AdmissionConfig("best-effort")).reason \
        == "UnexpectedAdmissionError"


def test_prefer_closest_numa_nodes_picks_the_nearest_pair() -> None:
    data = {"name": "t", "numa_nodes": [{"id": i, "cpus": f"{4 * i}-{4 * i + 3}"}
                                        for i in range(4)]}
    node = node_from_spec(parse_profile(data))
    node.distances = {0: {1: 30, 2: 12, 3: 30}, 1: {0: 30, 2: 30, 3: 12},
                      2: {0: 12, 1: 30, 3: 30}, 3: {0: 30, 1: 12, 2: 30}}
    six = pod(c(cpu=6))  # 4 CPUs per node: every pair is a preferred hint
    assert admit(node, six, AdmissionConfig("best-effort")).placements[0][1] == {0, 1}
    closest = AdmissionConfig("best-effort", prefer_closest_numa_nodes=True)
    # average distances: {0,2} and {1,3} 11, the others 20; equal: the lower ids win
    assert admit(node, six, closest).placements[0][1] == {0, 2}
    assert admit(node, six, AdmissionConfig("restricted", prefer_closest_numa_nodes=True)
                 ).placements[0][1] == {0, 2}


# ---- scopes and init containers --------------------------------------------------------------

def test_init_container_pins_the_app_container_under_container_scope() -> None:
    node = two_nodes()
    node.free_cpus -= {3}  # node 0: 3 free, node 1: 4 free
    app = pod(c("app", cpu=4), init=(c("init", cpu=2),))
    # init: 2 CPUs fit either node, lowest {0}: CPUs 0,1 (reusable). app: a hint must hold
    # CPUs 0,1; {0} has 2 reusable + 1 free = 3 < 4, {0,1} is not preferred -> rejected,
    # although node 1 alone has 4 free
    result = admit(node, app, SNN)
    assert (result.admitted, result.reason) == (False, "TopologyAffinityError")
    # pod scope: one merge over max(4, 2) = 4 CPUs -> node 1 for every container
    scoped = admit(node, app, AdmissionConfig("single-numa-node", "pod"))
    assert scoped.admitted
    assert scoped.placements == (("init", frozenset({1})), ("app", frozenset({1})))
    # the app container reuses the init container's CPUs: 4 CPUs taken in all
    assert scoped.allocations[1].cpus == (4, 5, 6, 7)
    assert set(scoped.allocations[0].cpus) <= {4, 5, 6, 7}
    assert scoped.node.free_cpus == {0, 1, 2}


def test_init_container_cpus_are_reused_and_sidecar_cpus_are_not() -> None:
    node = two_nodes()
    app = pod(c("app", cpu=2), init=(c("setup", cpu=2), c("proxy", cpu=1, sidecar=True)))
    result = admit(node, app, SNN)
    assert result.admitted
    by_name = {a.name: a.cpus for a in result.allocations}
    # setup: 0,1 (reusable). The sidecar's hint must hold 0,1 too (node 0); it may take a
    # reusable CPU (allocateCPUs takes from free + reusable) and what it takes is no longer
    # reusable: CPU 0. The app: its hint must hold CPU 1; node 0 has 1 + 2 free -> 1, 2
    assert by_name["setup"] == (0, 1) and by_name["proxy"] == (0,)
    assert by_name["app"] == (1, 2)
    assert result.node.free_cpus == {3, 4, 5, 6, 7}


def test_pod_scope_effective_request_counts_sidecars_started_before_an_init() -> None:
    node = two_nodes(cpus_per_node=6)
    node.free_cpus -= {0}  # node 0: 5 free, node 1: 6 free
    # max(app 2 + sidecars 1 + 1, sidecar 1 + init 5 = 6) = 6: only node 1
    shaped = pod(c("app", cpu=2),
                 init=(c("s1", cpu=1, sidecar=True), c("big", cpu=5), c("s2", cpu=1,
                                                                         sidecar=True)))
    result = admit(node, shaped, AdmissionConfig("single-numa-node", "pod"))
    assert result.admitted and {n for _, n in result.placements} == {frozenset({1})}


# ---- who asks for what -----------------------------------------------------------------------

def test_only_guaranteed_whole_cpus_get_exclusive_cpus() -> None:
    node = two_nodes()
    fractional = PodRequest("ns", "p", [ContainerRequest("c", 1500, {"memory": GiB})])
    result = admit(node, fractional, SNN)
    # no CPU hint; memory still asked for by every container of a Guaranteed pod
    assert result.allocations[0].cpus == ()
    assert result.allocations[0].memory == (MemoryBlock("memory", GiB, (0,)),)
    burstable = admit(node, pod(c(cpu=2, memory=GiB), qos="Burstable"), SNN)
    assert burstable.allocations[0].cpus == () and burstable.allocations[0].memory == ()
    assert burstable.placements == (("c", frozenset()),)
    level = admit(node, pod(c(cpu=2, memory=GiB), pod_level=True), SNN)
    assert level.allocations[0].cpus == () and level.allocations[0].memory == ()
    gated = admit(node, pod(c(cpu=2, memory=GiB), pod_level=True),
                  AdmissionConfig("single-numa-node", pod_level_resource_managers=True))
    assert gated.allocations[0].cpus == (0, 1)


# ---- devices ---------------------------------------------------------------------------------

def with_devices(groups: list[dict[str, Any]]) -> AdmissionNode:
    return two_nodes(devices=groups)


def test_topology_less_devices_count_for_no_numa_node() -> None:
    node = with_devices([{"resource": "x.io/nic", "numa": [0], "count": 1, "id_prefix": "n"},
                         {"resource": "x.io/nic", "count": 3}])  # no topology
    # 2 NICs: 4 available node-wide, but only one meets any NUMA set -> no hint at all
    result = admit(node, pod(c(devices={"x.io/nic": 2}), qos="BestEffort"), SNN)
    assert result.reason == "TopologyAffinityError"
    one = admit(node, pod(c(devices={"x.io/nic": 1}), qos="BestEffort"), SNN)
    assert one.placements == (("c", frozenset({0})),)
    assert one.allocations[0].devices[0].device_ids == ("n0",)
    # a resource whose devices all lack topology does not care: admitted, placed nowhere
    plain = with_devices([{"resource": "x.io/fpga", "count": 2}])
    loose = admit(plain, pod(c(devices={"x.io/fpga": 2}), qos="BestEffort"), SNN)
    assert loose.admitted and loose.placements == (("c", frozenset()),)


def test_device_local_to_two_nodes_counts_for_each() -> None:
    node = with_devices([{"resource": "x.io/gpu", "numa": [0, 1], "count": 2}])
    result = admit(node, pod(c(cpu=1, devices={"x.io/gpu": 2})), SNN)
    # both GPUs meet {0}: the whole pod on node 0
    assert result.admitted and result.placements == (("c", frozenset({0})),)


def test_device_predicate_out_of_resource() -> None:
    node = with_devices([{"resource": "x.io/gpu", "per_numa": {"0": 2}}])
    node.allocated_devices.add(("x.io/gpu", "gpu-0"))
    node.devices["x.io/gpu"][0].healthy = False  # assigned, then went unhealthy
    # allocation finds gpu-1 free, then the predicate: 1 requested + 1 used > 1 allocatable
    result = admit(node, pod(c(devices={"x.io/gpu": 1}), qos="BestEffort"), SNN)
    assert result.reason == "OutOfx.io/gpu"
    assert result.message == ("Node didn't have enough resource: x.io/gpu, requested: 1, "
                              "used: 1, capacity: 1")


# ---- full-pcpus-only -------------------------------------------------------------------------

def test_full_pcpus_only() -> None:
    # 2 threads per core, siblings k and k+4: node 0 holds cores {0,4},{1,5}, node 1
    # {2,6},{3,7}
    node = node_from_spec(parse_profile({
        "name": "t", "threads_per_core": 2, "reserved_cpus": "0",
        "numa_nodes": [{"id": 0, "cpus": "0-1,4-5"}, {"id": 1, "cpus": "2-3,6-7"}]}))
    config = AdmissionConfig("single-numa-node", full_pcpus_only=True)
    odd = admit(node, pod(c(cpu=3)), config)
    assert (odd.reason, odd.message) == (
        "SMTAlignmentError", "SMT Alignment Error: requested 3 cpus not multiple cpus per "
                             "core = 2")
    # 7 free CPUs, 6 outside the reserved CPU's core {0,4}: 8 is too many (best-effort admits
    # the merge without a CPU hint; the CPU manager's Allocate refuses)
    wide = admit(node, pod(c(cpu=8)), AdmissionConfig("best-effort", full_pcpus_only=True))
    assert wide.reason == "SMTAlignmentError"
    assert wide.message.endswith("available physical CPUs = 6, requested CPUs = 8, CPUs per "
                                 "core = 2")
    # 2 CPUs: node 0 (free 1, 4, 5) is the lowest that fits -> its whole free core {1,5}
    two = admit(node, pod(c(cpu=2)), config)
    assert two.admitted and two.allocations[0].cpus == (1, 5)


# ---- configuration ---------------------------------------------------------------------------

def test_config_from_profile_and_updates() -> None:
    spec = parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0-3"}],
                          "topology_manager_policy": "restricted",
                          "topology_manager_scope": "pod",
                          "cpu_manager_policy_options": {"full-pcpus-only": "true"}})
    config = config_from_spec(spec)
    assert config == AdmissionConfig("restricted", "pod", full_pcpus_only=True)
    changed = updated_config(config, {"topologyManagerPolicy": "best-effort",
                                      "topologyManagerPolicyOptions":
                                          {"prefer-closest-numa-nodes": "true"}})
    assert changed == AdmissionConfig("best-effort", "pod", True, True)
    for bad in ({"topologyManagerPolicy": "strict"}, {"topologyManagerScope": "node"},
                {"cpuManagerPolicyOptions": {"full-pcpus-only": "yes"}},
                {"cpuManagerPolicyOptions": {"no-such-option": "true"}},
                {"topologyManagerPolicyOptions": []}, {"policy": "none"}):
        with pytest.raises(ValueError):
            updated_config(config, bad)


def test_pod_from_profile_spec() -> None:
    spec = load_profile("dual-socket-gpu").pods[0]  # ml/llm-train-0
    request = pod_from_spec(spec)
    assert [x.name for x in request.init_containers] == ["log-shipper"]
    assert request.init_containers[0].sidecar
    trainer = request.containers[0]
    assert (trainer.cpu_millis, trainer.memory["memory"], trainer.devices["nvidia.com/gpu"]) \
        == (16000, 96 * GiB, 4)


def test_a_policy_needs_max_allowable_numa_nodes_beyond_eight() -> None:
    data = {"name": "t", "numa_nodes": [{"id": i, "cpus": str(i)} for i in range(9)]}
    node = node_from_spec(parse_profile(data))
    with pytest.raises(ValueError, match="9 NUMA nodes"):
        admit(node, pod(c(cpu=1)), SNN)
    allowed = updated_config(SNN, {"topologyManagerPolicyOptions":
                                   {"max-allowable-numa-nodes": "9"}})
    assert admit(node, pod(c(cpu=1)), allowed).placements == (("c", frozenset({0})),)
    assert admit(node, pod(c(cpu=1)), AdmissionConfig("none")).admitted
    # gb200-tray: 34 NUMA nodes, so its profile runs the Topology Manager with policy none
    tray = NodeState(load_profile("gb200-tray"))
    assert tray.admission_config.topology_manager_policy == "none"
    with pytest.raises(ProfileError, match="restricted on a machine with 9 NUMA nodes"):
        NodeState(parse_profile({**data, "topology_manager_policy": "restricted"}))


def test_pod_from_api_object() -> None:
    def container(name: str, requests: dict[str, str], limits: dict[str, str],
                  restart: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "resources": {"requests": requests,
                                                            "limits": limits}}
        if restart:
            body["restartPolicy"] = restart
        return body

    whole = {"cpu": "4", "memory": "8Gi", "hugepages-1Gi": "2Gi", "nvidia.com/gpu": "1"}
    obj = {"metadata": {"namespace": "ml", "name": "p"},
           "spec": {"containers": [container("app", {}, whole)],  # requests from limits
                    "initContainers": [
                        container("proxy", {"cpu": "500m", "memory": "1Gi"},
                                  {"cpu": "500m", "memory": "1Gi"}, "Always")]}}
    request = pod_from_object(obj)
    assert (request.namespace, request.name, request.qos) == ("ml", "p", "Guaranteed")
    app = request.containers[0]
    assert (app.cpu_millis, dict(app.memory), dict(app.devices)) == (
        4000, {"memory": 8 * GiB, "hugepages-1Gi": 2 * GiB}, {"nvidia.com/gpu": 1})
    assert request.init_containers[0].sidecar and request.init_containers[0].cpu_millis == 500
    # CPU limit above the request: Burstable; devices only: BestEffort
    burst = {**obj, "spec": {"containers": [container("app", {"cpu": "2", "memory": "1Gi"},
                                                      {"cpu": "4", "memory": "1Gi"})]}}
    assert pod_from_object(burst).qos == "Burstable"
    loose = {**obj, "spec": {"containers": [container("app", {}, {"x.io/nic": "2"})]}}
    assert pod_from_object(loose).qos == "BestEffort"
    assert dict(pod_from_object(loose).containers[0].devices) == {"x.io/nic": 2}


def test_the_kubelet_config_file_says_what_admission_follows(tmp_path) -> None:
    import yaml

    from exporter.simulator.sysfs import write_kubelet_config

    spec = parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0-3"}],
                          "topology_manager_scope": "pod",
                          "cpu_manager_policy_options": {"full-pcpus-only": "true"},
                          "topology_manager_policy_options": {
                              "prefer-closest-numa-nodes": "true"},
                          "feature_gates": {"PodLevelResourceManagers": True, "Get": True}})
    written = yaml.safe_load(write_kubelet_config(spec, tmp_path / "config.yaml").read_text())
    assert written["featureGates"] == {"PodLevelResourceManagers": True}
    settings = {k: written[k] for k in ("topologyManagerPolicy", "topologyManagerScope",
                                        "cpuManagerPolicyOptions",
                                        "topologyManagerPolicyOptions", "featureGates")}
    from_file = updated_config(AdmissionConfig(), settings)
    assert from_file == NodeState(spec).admission_config == AdmissionConfig(
        "single-numa-node", "pod", full_pcpus_only=True, prefer_closest_numa_nodes=True,
        pod_level_resource_managers=True)


def test_profile_distances_reach_sysfs_and_admission(tmp_path) -> None:
    from exporter.simulator import write_sysfs

    data = {"name": "t", "numa_nodes": [
        {"id": i, "cpus": f"{4 * i}-{4 * i + 3}",
         "distances": [[10, 30, 12, 30], [30, 10, 30, 12], [12, 30, 10, 30],
                       [30, 12, 30, 10]][i]} for i in range(4)]}
    spec = parse_profile(data)
    root = write_sysfs(spec, tmp_path)
    assert (root / "devices/system/node/node2/distance").read_text() == "12 30 10 30\n"
    closest = AdmissionConfig("best-effort", prefer_closest_numa_nodes=True)
    # 6 CPUs need two nodes; {0,2} and {1,3} are the close pairs, {0,2} the lower
    assert admit(node_from_spec(spec), pod(c(cpu=6)), closest).placements[0][1] == {0, 2}
    plain = node_from_spec(parse_profile({"name": "t", "numa_nodes": [
        {"id": 0, "cpus": "0"}, {"id": 1, "cpus": "1"}]}))
    assert plain.distances == {0: {0: 10, 1: 20}, 1: {0: 20, 1: 10}}
    with pytest.raises(ProfileError, match="distances must name all 2"):
        parse_profile({"name": "t", "numa_nodes": [{"id": 0, "cpus": "0", "distances": [10]},
                                                    {"id": 1, "cpus": "1"}]})
