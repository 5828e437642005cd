"""The simulator speaks the kubelet's wire shape, checked with the generated gRPC stubs."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from exporter._proto.v1 import api_pb2 as v1
from exporter._proto.v1 import api_pb2_grpc as v1_grpc
from exporter._proto.v1alpha1 import api_pb2 as v1alpha1
from exporter._proto.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from exporter.simulator import Faults, NodeState, load_profile
from exporter.simulator.server import TokenBucket

from .helpers import Node, small_profile



async def stub(node: Node):
    channel = grpc.aio.insecure_channel(f"unix://{node.socket}")
    return channel, v1_grpc.PodResourcesListerStub(channel)


async def test_one_entry_per_device_per_numa_node_in_random_order():
    profile = small_profile(
        devices=[{"resource": "r/multi", "count": 1, "numa": [0, 1]},
                 {"resource": "r/local", "per_numa": {"0": 4}},
                 {"resource": "r/none", "count": 1, "numa": None}],
        pods=[{"namespace": "ns", "name": "p", "containers": [{"name": "c", "devices": {
            "r/multi": 1, "r/local": 4, "r/none": 1}}]}])
    async with Node(profile, qps=1000, burst=1000) as node:
        channel, client = await stub(node)
        orders = set()
        for _ in range(8):
            reply = await client.List(v1.ListPodResourcesRequest())
            devices = reply.pod_resources[0].containers[0].devices
            orders.add(tuple((d.resource_name, d.device_ids[0],
                              tuple(n.ID for n in d.topology.nodes)) for d in devices))
        await channel.close()
    entries = sorted(next(iter(orders)))
    # the multi-NUMA device appears twice, once per node; the topology-less one once, bare
    assert [e for e in entries if e[0] == "r/multi"] == [("r/multi", "multi-0", (0,)),
                                                         ("r/multi", "multi-0", (1,))]
    assert [e for e in entries if e[0] == "r/none"] == [("r/none", "none-0", ())]
    assert all(len(e[2]) <= 1 for e in entries)
    assert len(entries) == 7
    assert len(orders) > 1, "device entries should come in varying order"


async def test_sidecars_first_and_regular_init_containers_never_listed():
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p",
        "init_containers": [{"name": "setup", "cpus": 1}],
        "sidecars": [{"name": "proxy", "cpus": 1}],
        "containers": [{"name": "app", "cpus": 1}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        got = await client.Get(v1.GetPodResourcesRequest(pod_name="p", pod_namespace="ns"))
        await channel.close()
    assert [c.name for c in reply.pod_resources[0].containers] == ["proxy", "app"]
    assert [c.name for c in got.pod_resources.containers] == ["proxy", "app"]


async def test_pod_level_fields_overlap_container_fields():
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p", "numa": 1, "pod_level": {"cpus": 1},
        "containers": [{"name": "a", "cpus": 2}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        await channel.close()
    pod = reply.pod_resources[0]
    assert list(pod.containers[0].cpu_ids) == [4, 5]
    assert list(pod.cpu_ids) == [4, 5, 6]


async def test_allocatable_lists_healthy_devices_and_cpus_minus_reserved():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 3}, "unhealthy": 1}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        await channel.close()
    assert list(reply.cpu_ids) == [1, 2, 3, 4, 5, 6, 7]
    assert sorted(d.device_ids[0] for d in reply.devices) == ["x-0", "x-1"]
    assert sorted((m.memory_type, m.topology.nodes[0].ID) for m in reply.memory) == [
        ("hugepages-2Mi", 0), ("hugepages-2Mi", 1), ("memory", 0), ("memory", 1)]


async def test_dra_claims_and_share_id_presence():
    profile = small_profile(
        dra_pools=[{"driver": "d.example.com", "pool": "p1", "devices": ["a", "b"]}],
        pods=[{"namespace": "ns", "name": "p",
               "claims": [{"name": "one", "driver": "d.example.com", "count": 2},
                          {"name": "shared", "driver": "d.example.com", "count": 1,
                           "shared": True}],
               "containers": [{"name": "c", "claims": ["one", "shared"]}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        await channel.close()
    claims = {d.claim_name: d for d in reply.pod_resources[0].containers[0].dynamic_resources}
    assert set(claims) == {"p-one", "p-shared"}
    assert sorted(r.device_name for r in claims["p-one"].claim_resources) == ["a", "b"]
    assert not any(r.HasField("share_id") for r in claims["p-one"].claim_resources)
    assert all(r.HasField("share_id") for r in claims["p-shared"].claim_resources)


async def test_global_rate_limit_answers_resource_exhausted():
    async with Node(small_profile()) as node:
        channel, client = await stub(node)
        codes = []
        for _ in range(40):  # back to back, like the kubelet's own e2e test
            try:
                await client.List(v1.ListPodResourcesRequest())
                codes.append("OK")
            except grpc.aio.AioRpcError as error:
                codes.append(error.code().name)
                assert error.details() == "rejected by rate limit"
        await channel.close()
    assert codes[0] == "OK"
    assert codes.count("OK") >= 10 and "RESOURCE_EXHAUSTED" in codes
    assert node.simulator.stats.count("List", "RESOURCE_EXHAUSTED") == codes.count(
        "RESOURCE_EXHAUSTED")


def test_token_bucket_refills_at_the_configured_rate(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("exporter.simulator.server.time.monotonic", lambda: now[0])
    bucket = TokenBucket(rate=100, burst=10)
    assert sum(bucket.allow() for _ in range(20)) == 10
    now[0] += 0.0501  # a little over 5 tokens later
    assert sum(bucket.allow() for _ in range(20)) == 5


async def test_get_of_a_missing_pod_is_unknown_not_found():
    async with Node(small_profile()) as node:
        channel, client = await stub(node)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.Get(v1.GetPodResourcesRequest(pod_name="ghost", pod_namespace="ns"))
        await channel.close()
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert caught.value.details() == "pod ghost in namespace ns not found"


@pytest.mark.parametrize("faults, method, code, details", [
    (Faults(get_allocatable="disabled"), "GetAllocatableResources", "UNKNOWN",
     "Pod Resources API GetAllocatableResources disabled"),
    (Faults(get="unimplemented"), "Get", "UNIMPLEMENTED", None),
    (Faults(get="disabled"), "Get", "UNKNOWN", "PodResources API Get method disabled"),
    (Faults(v1=False), "List", "UNIMPLEMENTED", "unknown service v1.PodResourcesLister"),
    (Faults(rate_limit_storm=True), "List", "RESOURCE_EXHAUSTED", "rejected by rate limit"),
])
async def test_fault_switches(faults, method, code, details):
    async with Node(small_profile(), faults=faults) as node:
        channel, client = await stub(node)
        request = {"List": v1.ListPodResourcesRequest(),
                   "GetAllocatableResources": v1.AllocatableResourcesRequest(),
                   "Get": v1.GetPodResourcesRequest(pod_name="x", pod_namespace="y")}[method]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(client, method)(request)
        await channel.close()
    assert caught.value.code().name == code
    if details:
        assert caught.value.details() == details


async def test_v1alpha1_service_is_served_beside_v1():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 1}}], pods=[
        {"namespace": "ns", "name": "p", "containers": [{"name": "c", "devices": {"r/x": 1}}]}])
    async with Node(profile) as node:
        channel = grpc.aio.insecure_channel(f"unix://{node.socket}")
        reply = await v1alpha1_grpc.PodResourcesListerStub(channel).List(
            v1alpha1.ListPodResourcesRequest())
        await channel.close()
    assert [(d.resource_name, list(d.device_ids))
            for d in reply.pod_resources[0].containers[0].devices] == [("r/x", ["x-0"])]


async def test_oversized_replies_exceed_a_small_receive_limit():
    async with Node(small_profile(), faults=Faults(oversize_bytes=64 * 1024)) as node:
        channel = grpc.aio.insecure_channel(
            f"unix://{node.socket}", options=[("grpc.max_receive_message_length", 32 * 1024)])
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await v1_grpc.PodResourcesListerStub(channel).List(v1.ListPodResourcesRequest())
        await channel.close()
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "rate limit" not in caught.value.details()


async def test_restart_removes_and_recreates_the_socket():
    async with Node(small_profile()) as node:
        task = asyncio.create_task(node.simulator.restart(downtime=0.3))
        await asyncio.sleep(0.1)
        assert not node.socket.exists()
        await task
        assert node.socket.exists()


def test_profiles_load_and_fit():
    for name in ("small", "dual-socket-gpu", "large", "huge"):
        state = NodeState(load_profile(name))
        assert state.pods, name
    large = NodeState(load_profile("large"))
    assert len(large.spec.numa_nodes) == 8 and len(large.spec.all_cpus) == 512
    assert len(large.pods) == 500
    assert len(large.devices) == 4096
    assert all(p.spec.sidecars for p in large.pods.values())
    assert any(c.dra_devices for p in large.pods.values() for c in p.assignment.containers)


def test_churn_is_reproducible_with_a_seed():
    def run():
        state = NodeState(load_profile("large"), seed=11)
        return [state.churn(5) for _ in range(3)], sorted(state.pods)
    assert run() == run()
