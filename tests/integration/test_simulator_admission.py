"""POST /pods on a running simulator admits as the kubelet would, under the Topology Manager
configuration of its profile or the one set at run time with POST /config; what it admits is
listed over the real podresources API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc.aio
from aiohttp import ClientSession, web

from exporter._proto.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc
from exporter.simulator import load_profile
from exporter.simulator.control import control_app

from ..support.harness import GiB, Node, small_profile


@asynccontextmanager
async def controlled(node: Node) -> AsyncIterator[Any]:
    runner = web.AppRunner(control_app(node.simulator))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with ClientSession() as session:
            async def call(method: str, path: str, body: object = None) -> tuple[int, Any]:
                async with session.request(method, base + path, json=body) as response:
                    return response.status, await response.json(content_type=None)

            yield call
    finally:
        await runner.cleanup()


async def listed(node: Node, namespace: str, name: str) -> Any:
    channel = grpc.aio.insecure_channel(f"unix://{node.socket}")
    try:
        client = v1_grpc.PodResourcesListerStub(channel)
        reply = await client.List(v1.ListPodResourcesRequest())
    finally:
        await channel.close()
    return next(p for p in reply.pod_resources if (p.namespace, p.name) == (namespace, name))


DB_CLIENT = {"namespace": "demo", "name": "db-client",
             "containers": [{"name": "c", "cpus": 1, "memory": "1Gi"}]}
# two NUMA nodes of 4 CPUs and 16Gi; analytics/db was admitted when the node ran best-effort:
# its 20Gi fit no node alone, so its block spans both (16Gi from node 0, 4 from node 1)
GROUPED = small_profile(
    numa_nodes=[{"id": 0, "cpus": "0-3", "memory": "16Gi"},
                {"id": 1, "cpus": "4-7", "memory": "16Gi"}],
    pods=[{"namespace": "analytics", "name": "db",
           "admitted_under": {"topologyManagerPolicy": "best-effort"},
           "containers": [{"name": "db", "cpus": 1, "memory": "20Gi"}]}])


async def test_group_rule_rejects_single_numa_memory_then_best_effort_spans_the_group():
    async with Node(GROUPED) as node, controlled(node) as call:
        state = node.simulator.state
        assert (await call("GET", "/config"))[1]["topologyManagerPolicy"] == "single-numa-node"
        # the block groups NUMA nodes 0 and 1: neither serves a single-node memory request
        # any more (memorymanager calculateHints), though node 1 has 12Gi free
        status, answer = await call("POST", "/pods", DB_CLIENT)
        assert (status, answer["reason"]) == (409, "TopologyAffinityError")
        assert answer["message"] == "Resources cannot be allocated with Topology locality"
        failed = state.rejected_pods[("demo", "db-client")]
        assert failed["status"] == {
            "phase": "Failed", "reason": "TopologyAffinityError",
            "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}
        assert ("demo", "db-client") not in state.pods

        status, config = await call("POST", "/config", {"topologyManagerPolicy": "best-effort"})
        assert (status, config["topologyManagerPolicy"], config["topologyManagerScope"]) == (
            200, "best-effort", "container")
        free_before = state.resources.free_memory[(1, "memory")]
        status, answer = await call("POST", "/pods", DB_CLIENT)
        assert status == 200 and answer["admitted"]
        # the memory hint is the group {0,1}; node 0 has no memory left, node 1 gives it
        assert answer["containers"][0]["memory"] == [
            {"type": "memory", "size": GiB, "numa": [0, 1]}]
        assert state.resources.free_memory[(1, "memory")] == free_before - GiB
        assert ("demo", "db-client") not in state.rejected_pods
        pod = await listed(node, "demo", "db-client")
        memory = pod.containers[0].memory
        assert [(m.memory_type, m.size, sorted(n.ID for n in m.topology.nodes))
                for m in memory] == [("memory", GiB, [0, 1])]
        assert list(pod.containers[0].cpu_ids) == answer["containers"][0]["cpus"]
        assert len(pod.containers[0].cpu_ids) == 1


async def test_config_endpoint_refuses_bad_values():
    async with Node(load_profile("small")) as node, controlled(node) as call:
        for body in ({"topologyManagerPolicy": "strict"}, {"topologyManagerScope": "node"},
                     {"cpuManagerPolicyOptions": {"full-pcpus-only": "maybe"}},
                     {"topologyManagerPolicyOptions": {"nope": "true"}}, {"policy": "none"},
                     ["none"]):
            status, answer = await call("POST", "/config", body)
            assert status == 400 and answer["error"], body
        status, config = await call("POST", "/config", {
            "topologyManagerScope": "pod", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}})
        assert status == 200
        assert config["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
        assert config["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "true"}
        assert config["topologyManagerScope"] == "pod"


async def test_full_pcpus_only_set_at_run_time_gives_smt_alignment_error():
    # dual-socket-gpu: 2 threads per core, CPUs 30, 31, 62, 63 free; 1.7 CPUs of the Node's
    # allocatable left unrequested (the resource-fit predicate)
    async with Node(load_profile("dual-socket-gpu")) as node, controlled(node) as call:
        await call("POST", "/config", {"topologyManagerPolicy": "none",
                                       "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}})
        status, answer = await call("POST", "/pods", {
            "namespace": "demo", "name": "odd", "qos": "Burstable",
            "containers": [{"name": "c", "cpus": 1}]})
        assert status == 200  # Burstable: no exclusive CPUs, nothing to align
        status, answer = await call("POST", "/pods", {
            "namespace": "demo", "name": "odd-g", "containers": [{"name": "c", "cpus": 3,
                                                                  "memory": "1Gi"}]})
        assert (status, answer["reason"]) == (409, "SMTAlignmentError")
        assert answer["message"] == ("SMT Alignment Error: requested 3 cpus not multiple cpus "
                                     "per core = 2")
        assert (await call("POST", "/pods", {"namespace": "demo", "name": "q",
                                             "qos": "Platinum", "containers": []}))[0] == 400


async def test_bad_pods_are_answered_400_with_the_reason():
    async with Node(load_profile("small")) as node, controlled(node) as call:
        for body, reason in (
                ({"name": "x", "containers": "abc"}, "containers must be a list"),
                ({"name": "x", "containers": [1]}, "a container is an object with a name"),
                ({"name": "x", "containers": [{"name": "c", "cpus": -2}]}, "bad CPU quantity"),
                ({"name": "x", "containers": [{"name": "c", "devices": ["a"]}]},
                 "devices must map resources to counts"),
                ({"name": 5}, "pod name must be a string"),
                ({"name": "x", "qos": "Gold"}, "bad pod qos")):
            status, answer = await call("POST", "/pods", body)
            assert status == 400 and reason in answer["error"], (body, answer)
        # 1.5 CPUs is a fractional request: the shared pool, nothing exclusive
        status, answer = await call("POST", "/pods", {
            "name": "half", "containers": [{"name": "c", "cpus": "1.5", "memory": "1Gi"}]})
        assert status == 200 and answer["containers"][0]["cpus"] == []
