"""The fake Kubernetes API server (tests/support/fakeapiserver/) shows what the simulated kubelet
has: its node, its pods, and the pods it rejected at admission as the kubelet reports them (no
server started: objects only)."""

from __future__ import annotations

from exporter.simulator import SimulatedNode, load_profile
from exporter.simulator.profile import parse_pod

from ..support.fakeapiserver.cluster import SimulatedCluster
from ..support.fakeapiserver.server import FakeApiServer


def test_node_pods_and_rejections_are_shown_and_follow_changes() -> None:
    state = SimulatedNode(load_profile("dual-socket-gpu"))
    server = FakeApiServer()
    cluster = SimulatedCluster(server, state)
    assert cluster.sync() and not cluster.sync()  # nothing changed in between
    (node,) = server.objects["nodes"].values()
    assert node["metadata"]["name"] == "gpu-node-01"
    # 8 GPUs registered, one unhealthy; 64 CPUs
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    assert node["status"]["capacity"]["cpu"] == "64"
    # what the kubelet's predicate counts against: 64 CPUs less the reserved 0 and 32; 384 GiB
    # less the 4 GiB reserved on node 0; maxPods
    assert node["status"]["allocatable"]["cpu"] == "62000m"
    assert node["status"]["allocatable"]["memory"] == str(380 << 30)
    assert node["status"]["allocatable"]["pods"] == "110"
    assert len(server.objects["resourceslices"]) == 3  # the profile's three DRA pools
    pods = server.objects["pods"]
    assert len(pods) == 16  # every pod of the profile
    train = pods[("ml", "llm-train-0")]
    assert train["status"] == {"phase": "Running"}
    assert train["spec"]["nodeName"] == "gpu-node-01"
    assert train["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert train["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    assert pods[("batch", "etl-job-28391-x7k2p")]["status"]["phase"] == "Succeeded"
    uid = train["metadata"]["uid"]

    # 1 CPU and 32 GiB: node 0 has the memory but no free CPU, node 1 the CPUs but 24 GiB
    result = state.admit(parse_pod({"namespace": "demo", "name": "db-client",
                                    "containers": [{"name": "c", "cpus": 1, "memory": "32Gi"}]}))
    assert result.reason == "TopologyAffinityError"
    assert cluster.sync()
    failed = server.objects["pods"][("demo", "db-client")]
    assert failed["status"] == {
        "phase": "Failed", "reason": "TopologyAffinityError",
        "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}
    assert failed["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": str(32 << 30)},
        "limits": {"cpu": "1", "memory": str(32 << 30)}}
    assert server.objects["pods"][("ml", "llm-train-0")]["metadata"]["uid"] == uid

    state.remove("ml", "llm-train-0")
    state.rejected_pods.pop(("demo", "db-client"))
    state.version += 1
    cluster.sync()
    assert ("ml", "llm-train-0") not in server.objects["pods"]
    assert ("demo", "db-client") not in server.objects["pods"]
    assert [kind for _, _, kind, _ in server.history[-2:]] == ["DELETED", "DELETED"]
