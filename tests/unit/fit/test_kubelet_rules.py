"""Kubelet rules the differential test against the real kubelet (v1.37.2, v1.34.4) found the
fit engine without, each stated with values worked out by hand from the kubelet function that
decides it."""

from __future__ import annotations

import json
from dataclasses import replace

from exporter.fit.answers import answer
from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Managers, Rules
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.devicemanager.topology_hints import device_hints
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.kubelet.memorymanager.state import MemoryNode
from exporter.fit.kubelet.podshape import (
    ContainerShape,
    PodShape,
    pod_effective_ask,
    pod_scope_hint_ask,
    single_container,
)
from exporter.fit.state.checkpoints import (
    KubeletState,
    parse_device_checkpoint,
    parse_memory_manager_state,
)
from exporter.fit.state.from_snapshot import kubelet_minor, node_state
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    KubeletSnapshot,
    MemoryBlock,
    NumaNode,
    PodAssignment,
    Topology,
)
from exporter.podcontext import NodeContext, PodContext

from .nodes import GiB, cpus, state

MiB = 1 << 20
POD_SNN = Rules("single-numa-node", "pod")
SNN = Rules("single-numa-node", "container")


# ---- scope pod: the memory manager's pod request holds the app containers' types only ---------

def test_the_pod_hint_leaves_out_memory_types_only_init_containers_ask_for():
    """memorymanager/policy_static.go getPodRequestedResources fills its result from the app
    containers' map: an init container's hugepages-2Mi (128Mi) is not in the pod's request,
    while CPUs (podGuaranteedCPUs) and memory keep the init containers in the maximum."""
    pod = PodShape("p", (ContainerShape("app", {"cpu": 2000, "memory": 256 * MiB}),),
                   (ContainerShape("init", {"cpu": 3000, "memory": 128 * MiB,
                                            "hugepages-2Mi": 128 * MiB}),))
    hint_ask = pod_scope_hint_ask(pod, Managers())
    assert (hint_ask.cpus, dict(hint_ask.memory)) == (3, {"memory": 256 * MiB})
    assert dict(pod_effective_ask(pod, Managers()).memory) == {
        "memory": 256 * MiB, "hugepages-2Mi": 128 * MiB}


def test_an_init_only_memory_type_outside_the_pod_hint_fails_to_extend():
    """Node 0: 1 free CPU, 4Gi of memory and 1Gi of 2Mi hugepages; node 1: 4 free CPUs, 8Gi of
    memory, no hugepages. The pod (scope pod, single-numa-node) asks the hint providers for
    max(2, 1) = 2 CPUs and 256Mi of memory (the init container's hugepages left out): only
    node 1 has 2 free CPUs, so the pod's hint is {1}, preferred. The init container is
    allocated first: its CPU on node 1, then its 128Mi of memory and 128Mi of hugepages with
    hint {1}, where there are no hugepages. The memory manager extends the hint
    (extendTopologyManagerHint): the masks whose allocatable holds both types are {0} (the
    narrowest: preferred) and {0,1}; the one containing {1} is {0,1}, not preferred, while
    the pod's hint was: "failed to find the extended preferred hint". The Topology Manager
    admitted the pod, the memory manager's Allocate refused it: UnexpectedAdmissionError."""
    memory = {0: MemoryNode({"memory": 4 * GiB, "hugepages-2Mi": GiB},
                            {"memory": 4 * GiB, "hugepages-2Mi": GiB}, frozenset({0})),
              1: MemoryNode({"memory": 8 * GiB}, {"memory": 8 * GiB}, frozenset({1}))}
    pod = PodShape("p", (ContainerShape("app", {"cpu": 2000, "memory": 256 * MiB}),),
                   (ContainerShape("init", {"cpu": 1000, "memory": 128 * MiB,
                                            "hugepages-2Mi": 128 * MiB}),))
    verdict = admit(pod, state(cpus(4, {0: 1, 1: 4}), memory), POD_SNN)
    assert (verdict.admitted, verdict.reason, verdict.container) == (
        False, "UnexpectedAdmissionError", "init")
    assert verdict.message == "[memorymanager] failed to find the extended preferred hint"


# ---- a device resource whose every device is unhealthy ----------------------------------------

CHECKPOINT = ('{"Data": {"PodDeviceEntries": null, "RegisteredDevices": '
              '{"example.com/dev": [], "example.com/nic": ["nic-0"]}}, "Checksum": 1}')
TWO_BY_FOUR = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                   NumaNode(1, frozenset(range(4, 8)))])


def test_the_device_checkpoint_names_a_resource_whose_devices_are_all_unhealthy():
    """writeCheckpoint lists every resource of healthyDevices, an empty list when none of its
    devices is healthy."""
    parsed = parse_device_checkpoint(CHECKPOINT)
    assert dict(parsed.registered) == {"example.com/dev": frozenset(),
                                       "example.com/nic": frozenset({"nic-0"})}


def test_a_resource_with_no_healthy_device_fails_in_the_device_manager_not_the_predicate():
    """example.com/dev: registered, its one device unhealthy and unassigned, so neither API
    names it. The kubelet's device manager has it (deviceHasTopologyAlignment counts the
    unhealthy device, taken here as NUMA-aware): no NUMA set has one free, no hint, so
    restricted rejects with TopologyAffinityError; policy none admits at the Topology
    Manager and the device manager's Allocate fails (no healthy devices):
    UnexpectedAdmissionError. The predicate (OutOfexample.com/dev) never gets to speak. Without
    the checkpoint the exporter cannot tell the resource from one the node lacks."""
    listed = KubeletSnapshot((), Allocatable(cpu_ids=tuple(range(8))))
    seeing = node_state(listed, TWO_BY_FOUR, True, False,
                        kubelet=KubeletState(registered=parse_device_checkpoint(
                            CHECKPOINT).registered))
    blind = node_state(listed, TWO_BY_FOUR, True, False)
    assert seeing is not None and blind is not None
    shape = single_container("s", {"cpu": 1000, "example.com/dev": 1})
    assert answer(shape, seeing, Rules("restricted")).verdict.reason == "TopologyAffinityError"
    assert answer(shape, seeing, Rules("none")).verdict.reason == "UnexpectedAdmissionError"
    assert answer(shape, blind, Rules("restricted")).verdict.reason == "OutOfexample.com/dev"


# ---- 1.36 on: device hints over the NUMA nodes the devices sit on -----------------------------

def test_device_hints_span_only_the_nodes_with_devices_since_1_36():
    """Two GPUs on NUMA node 1 and one on node 3, of four NUMA nodes; 3 asked. 1.36 and 1.37
    (generateDeviceTopologyHints over deviceNUMANodes = {1, 3}; every 1.36 patch release has
    it, 1.35's have not): the only mask is {1,3},
    preferred (the narrowest of those nodes' masks holding 3). 1.34 (every NUMA node): {1,3}
    preferred and {0,1,3}, {1,2,3}, {0,1,2,3} not preferred."""
    gpus = DeviceState({frozenset({1}): 2, frozenset({3}): 1}, {frozenset({1}): 2,
                                                                  frozenset({3}): 1})
    new = device_hints((0, 1, 2, 3), gpus, 3, on_device_nodes=True)
    old = device_hints((0, 1, 2, 3), gpus, 3, on_device_nodes=False)
    assert [(sorted(h.affinity or ()), h.preferred) for h in new or ()] == [([1, 3], True)]
    assert [(sorted(h.affinity or ()), h.preferred) for h in old or ()] == [
        ([1, 3], True), ([0, 1, 3], False), ([1, 2, 3], False), ([0, 1, 2, 3], False)]


def test_a_non_preferred_merge_never_reaches_a_node_without_the_devices():
    """The same GPUs, and 3Gi of memory every node holds alone (memory hints: each single node
    preferred, every wider set not). best-effort, scope pod: no preferred merge; the widest of
    the narrowest hints is 2 (the GPUs'). 1.36 on: the GPUs' one hint {1,3} with memory {1,3}
    gives {1,3}. 1.35, 1.34: GPU {0,1,3} AND memory {0,1} gives {0,1}, as wide and lower."""
    gpus = DeviceState({frozenset({1}): 2, frozenset({3}): 1}, {frozenset({1}): 2,
                                                                  frozenset({3}): 1})
    memory = {n: MemoryNode({"memory": 6 * GiB}, {"memory": 6 * GiB}, frozenset({n}))
              for n in range(4)}
    node = ManagersState((0, 1, 2, 3), None, memory, {"example.com/gpu": gpus})
    pod = PodShape("p", (ContainerShape("app", {"cpu": 500, "memory": 3 * GiB,
                                                "example.com/gpu": 3}),))
    rules = Rules("best-effort", "pod", managers=Managers(cpu_static=False))
    assert admit(pod, node, rules).placements[0].hint == {1, 3}
    assert admit(pod, replace(node, kubelet_minor=36), rules).placements[0].hint == {1, 3}
    assert admit(pod, replace(node, kubelet_minor=35), rules).placements[0].hint == {0, 1}


def test_the_kubelet_version_comes_from_the_node():
    assert [kubelet_minor(v) for v in ("v1.34.4", "v1.37.2-eks-4ad1", "1.36.0", "", "x")] == [
        34, 37, 36, None, None]


# ---- the memory manager's own state: init containers of pods not yet started --------------------

def memory_state_file(machine: dict[int, tuple[int, int, list[int], int]],
                      entries: dict[str, dict[str, list[tuple[int, list[int]]]]]) -> str:
    """A V2 memory_manager_state (the payload in ``data``): per node (reserved, free, cells,
    assignments) of 8Gi allocatable memory; per pod and container (bytes, NUMA ids) blocks."""
    payload = {"policyName": "Static", "machineState": {
        str(n): {"numberOfAssignments": count, "cells": cells, "memoryMap": {"memory": {
            "total": 8 * GiB, "systemReserved": 0, "allocatable": 8 * GiB,
            "reserved": reserved, "free": free}}}
        for n, (reserved, free, cells, count) in machine.items()},
        "entries": {uid: {name: [{"numaAffinity": numa, "type": "memory", "size": size}
                                 for size, numa in blocks] for name, blocks in containers.items()}
                    for uid, containers in entries.items()}}
    return json.dumps({"data": json.dumps(payload), "dataChecksum": 1})


MEMORY_LISTED = KubeletSnapshot(
    (PodAssignment("ns", "a", (ContainerAssignment("c", (), memory=(
        MemoryBlock("memory", 512 * MiB, (0,)),)),)),),
    Allocatable(memory=(MemoryBlock("memory", 8 * GiB, (0,)),
                        MemoryBlock("memory", 8 * GiB, (1,)))))


def test_an_init_container_of_a_pod_not_started_holds_its_memory():
    """Pod a, admitted, not started: its init container i (1Gi) and app container c (512Mi)
    were both allocated at admission on node 0; c reuses 512Mi of i's block, which the memory
    manager then cuts to 512Mi (updateInitContainersMemoryBlocks): 1Gi reserved, 7Gi free.
    List shows c's 512Mi only (7.5Gi free by it); the state file says 7Gi."""
    file = parse_memory_manager_state(memory_state_file(
        {0: (GiB, 7 * GiB, [0], 2), 1: (0, 8 * GiB, [1], 0)},
        {"uid-a": {"i": [(512 * MiB, [0])], "c": [(512 * MiB, [0])]}}))
    context = NodeContext("pods-api", (PodContext("ns", "a", "uid-a", "Guaranteed", "Pending"),))
    blind = node_state(MEMORY_LISTED, TWO_BY_FOUR, False, True, context)
    seeing = node_state(MEMORY_LISTED, TWO_BY_FOUR, False, True, context,
                        KubeletState(memory=file))
    assert blind is not None and blind.memory is not None
    assert seeing is not None and seeing.memory is not None
    assert blind.memory[0].free["memory"] == 8 * GiB - 512 * MiB
    assert (seeing.memory[0].free["memory"], seeing.memory[0].assignments) == (7 * GiB, 2)


def test_a_rejected_pods_memory_group_is_released_as_removestalestate_does():
    """Pod r, rejected: its first container got 2Gi on {0,1} (node 0 filled first: 2Gi
    reserved there; both nodes join the group {0,1}, one assignment each). Its UID is no
    active pod's, so the next admission's removeStaleState releases it (releaseMemory): both
    nodes back to no assignment and a group of their own, node 0 8Gi free. A 1Gi single-node
    request under single-numa-node is then admitted on node 0; without pod context the
    group holds and no node serves it."""
    file = parse_memory_manager_state(memory_state_file(
        {0: (2 * GiB, 6 * GiB, [0, 1], 1), 1: (0, 8 * GiB, [0, 1], 1)},
        {"uid-r": {"first": [(2 * GiB, [0, 1])]}}))
    rejected = PodContext("ns", "r", "uid-r", "Guaranteed", "Failed",
                          reason="TopologyAffinityError")
    nothing_listed = KubeletSnapshot((), MEMORY_LISTED.allocatable)
    told = node_state(nothing_listed, TWO_BY_FOUR, False, True,
                      NodeContext("pods-api", (rejected,)), KubeletState(memory=file))
    blind = node_state(nothing_listed, TWO_BY_FOUR, False, True, None,
                       KubeletState(memory=file))
    assert told is not None and told.memory is not None and blind is not None
    assert [(n.free["memory"], sorted(n.group), n.assignments)
            for n in told.memory.values()] == [(8 * GiB, [0], 0), (8 * GiB, [1], 0)]
    shape = single_container("m", {"cpu": 500, "memory": GiB})
    rules = Rules("single-numa-node", managers=Managers(cpu_static=False))
    assert admit(shape, told, rules).placements[0].hint == {0}
    assert admit(shape, blind, rules).reason == "TopologyAffinityError"


# ---- an extended resource DRA serves still asks the device manager for hints -------------------

def test_a_dra_served_extended_resource_needs_a_free_plugin_device_for_its_hint():
    """A Burstable pod's nvidia.com/gpu (1) is served by DRA (its extendedResourceClaimStatus
    maps it). The device manager's GetTopologyHints never checks that (only Allocate does,
    isDRAExtendedResource), so where a device plugin on the node registers nvidia.com/gpu the
    pod needs one of its GPUs free on one NUMA node under single-numa-node. Plugin GPUs: one
    on node 0, held; one on node 1, free: admitted on node 1, and the plugin GPU stays free
    (Allocate skips it). With the node-1 GPU held too: no hint, TopologyAffinityError, blocking
    nvidia.com/gpu. On a node whose plugins do not register the name: no hint asked, admitted
    anywhere."""
    pod = PodShape("p", (ContainerShape("server", {"cpu": 500, "nvidia.com/gpu": 1}),),
                   qos="Burstable", dra_resources=frozenset({"nvidia.com/gpu"}))
    one_free = DeviceState({frozenset({0}): 1, frozenset({1}): 1}, {frozenset({1}): 1})
    verdict = admit(pod, state(devs={"nvidia.com/gpu": one_free}), SNN)
    assert verdict.admitted and verdict.placements[0].hint == {1}
    assert verdict.state is not None
    assert verdict.state.devices["nvidia.com/gpu"].free == {frozenset({1}): 1}
    none_free = DeviceState({frozenset({0}): 1, frozenset({1}): 1}, {})
    refused = admit(pod, state(devs={"nvidia.com/gpu": none_free}), SNN)
    assert (refused.admitted, refused.reason, refused.blocking_resource) == (
        False, "TopologyAffinityError", "nvidia.com/gpu")
    assert admit(pod, state(devs={"example.com/nic": one_free}), SNN).admitted
