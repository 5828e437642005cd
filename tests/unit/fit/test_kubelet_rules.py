"""Kubelet rules the differential test against the real kubelet (v1.37.2, v1.34.4) found the
fit engine without, each stated with values worked out by hand from the kubelet function that
decides it."""

from __future__ import annotations

from exporter.fit.admission import Rules, admit
from exporter.fit.nodestate import MemoryNode
from exporter.fit.pod import (
    ContainerShape,
    Managers,
    PodShape,
    pod_effective_ask,
    pod_scope_hint_ask,
)

from .nodes import GiB, cpus, state

MiB = 1 << 20
POD_SNN = Rules("single-numa-node", "pod")


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
