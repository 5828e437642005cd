"""The simulator speaks the kubelet's wire shape, checked with the generated gRPC stubs."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from exporter._proto.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc
from exporter._proto.v1alpha1 import api_pb2 as v1alpha1, api_pb2_grpc as v1alpha1_grpc
from exporter.simulator import Faults, SimulatedNode, load_profile, parse_profile, write_sysfs
from exporter.simulator.node.faults import TokenBucket
from exporter.simulator.profile import parse_pod
from exporter.topology import read_topology

from ..support.harness import GiB, Node, small_profile


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
    # a pod-level pool (PodLevelResourceManagers, scope pod) on node 0, the lowest that holds
    # it: the container's 2 CPUs and the pod's own third one
    profile = small_profile(topology_manager_scope="pod",
                            feature_gates={"PodLevelResourceManagers": True}, pods=[{
                                "namespace": "ns", "name": "p", "pod_level": {"cpus": 1},
                                "containers": [{"name": "a", "cpus": 2}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        await channel.close()
    pod = reply.pod_resources[0]
    assert list(pod.containers[0].cpu_ids) == [1, 2]
    assert list(pod.cpu_ids) == [1, 2, 3]


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
    monkeypatch.setattr("exporter.simulator.node.faults.time.monotonic", lambda: now[0])
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
    """Every bundled profile's pods are admitted by the kubelet's rules but those it says are
    rejected (dual-socket-gpu's dra-infer-0: its nvidia.com/gpu, served by DRA, still asks the
    device manager for a free plugin GPU on one NUMA node, and none is); the large one's 500
    pods within its maxPods and CPU allocatable (predicate.go)."""
    expected = {"dual-socket-gpu": ["ml/dra-infer-0: TopologyAffinityError"]}
    for name in ("small", "dual-socket-gpu", "huge", "gb200-tray"):
        state = SimulatedNode(load_profile(name))
        assert state.pods and state.rejected == expected.get(name, []), (name,
                                                                         state.rejected[:3])
    large = SimulatedNode(load_profile("large"))
    assert not large.rejected
    # the fit engine's state carried from one admission to the next is the one rebuilt
    carried = large.managers()
    large._managers = None
    assert large.managers() == carried
    assert len(large.spec.numa_nodes) == 8 and len(large.spec.all_cpus) == 512
    assert len(large.pods) == 500
    assert len(large.devices) == 4096
    assert all(p.spec.sidecars for p in large.pods.values())
    assert any(c.dra_devices for p in large.pods.values() for c in p.assignment.containers)


def test_churn_is_reproducible_with_a_seed():
    def run():
        state = SimulatedNode(load_profile("large"), seed=11)
        return [state.churn(5) for _ in range(3)], sorted(state.pods)
    assert run() == run()


# ---- kubelet behaviours of SPEC section 2 ----------------------------------------------------

# admitted in this order on the lowest NUMA node that holds each: running CPU 1 + x-0,
# pending 2 + x-1, terminating 3 on node 0 (CPU 0 reserved); done 4 + x-2 on node 1
LIFECYCLE = [
    {"namespace": "ns", "name": "running",
     "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "pending", "phase": "Pending",
     "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]},
    {"namespace": "ns", "name": "terminating", "terminating": True,
     "containers": [{"name": "c", "cpus": 1}]},
    {"namespace": "ns", "name": "done", "phase": "Succeeded",
     "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 1}}]},
]


async def test_list_has_pending_and_terminating_pods_in_a_varying_order():
    """Fact 1: every admitted, non-terminal pod (and a terminal one still terminating), in a
    random pod order on every call; Get still knows the terminated pod."""
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE)
    async with Node(profile, qps=1000, burst=1000) as node:
        channel, client = await stub(node)
        orders = set()
        for _ in range(12):
            reply = await client.List(v1.ListPodResourcesRequest())
            orders.add(tuple(p.name for p in reply.pod_resources))
        got = await client.Get(v1.GetPodResourcesRequest(pod_name="done", pod_namespace="ns"))
        await channel.close()
    assert {frozenset(order) for order in orders} == {
        frozenset({"running", "pending", "terminating"})}
    assert len(orders) > 1, "pods should come in varying order"
    assert got.pod_resources.name == "done"
    # the Pending pod holds what admission gave it
    state = node.simulator.state
    assert state.pods[("ns", "pending")].assignment.containers[0].cpu_ids == (2,)


async def test_old_kubelet_lists_terminated_pods_without_devices():
    """Before 1.34 List also has terminated pods; their devices are garbage-collected first,
    other assignments linger."""
    profile = small_profile(kubernetes_version="1.30",
                            devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}],
                            pods=LIFECYCLE)
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        alpha = await v1alpha1_grpc.PodResourcesListerStub(channel).List(
            v1alpha1.ListPodResourcesRequest())
        await channel.close()
    pods = {p.name: p.containers[0] for p in reply.pod_resources}
    assert set(pods) == {"running", "pending", "terminating", "done"}
    assert not pods["done"].devices
    # done took CPU 4 (released, still reported)
    assert list(pods["done"].cpu_ids) == [4]
    assert [d.device_ids[0] for d in pods["running"].devices] == ["x-0"]
    alpha_pods = {p.name: p.containers[0] for p in alpha.pod_resources}
    assert set(alpha_pods) == set(pods) and not alpha_pods["done"].devices


async def test_v1alpha1_keeps_one_entry_per_device_per_numa_node():
    """Fact 4: v1alpha1 converts the v1 entries one to one, without topology."""
    profile = small_profile(
        devices=[{"resource": "r/multi", "count": 1, "numa": [0, 1]},
                 {"resource": "r/local", "per_numa": {"1": 1}}],
        pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "devices": {"r/multi": 1, "r/local": 1}}]}])
    async with Node(profile) as node:
        channel = grpc.aio.insecure_channel(f"unix://{node.socket}")
        reply = await v1alpha1_grpc.PodResourcesListerStub(channel).List(
            v1alpha1.ListPodResourcesRequest())
        await channel.close()
    entries = sorted((d.resource_name, tuple(d.device_ids))
                     for d in reply.pod_resources[0].containers[0].devices)
    assert entries == [("r/local", ("local-0",)), ("r/multi", ("multi-0",)),
                       ("r/multi", ("multi-0",))]


async def test_device_registered_with_a_topology_naming_no_numa_node():
    """Fact 4: List shows one entry without topology, GetAllocatableResources none."""
    profile = small_profile(
        devices=[{"resource": "r/e", "count": 2, "numa": []}],
        pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "devices": {"r/e": 1}}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        listed = await client.List(v1.ListPodResourcesRequest())
        allocatable = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        await channel.close()
    (entry,) = listed.pod_resources[0].containers[0].devices
    assert (entry.resource_name, list(entry.device_ids)) == ("r/e", ["e-0"])
    assert not entry.HasField("topology")
    assert not allocatable.devices


async def test_restart_unregisters_device_plugins_until_they_register_again():
    """Fact 5: after a restart no device of a plugin is allocatable until it registers again;
    List keeps the assignments."""
    profile = small_profile(
        devices=[{"resource": "r/x", "per_numa": {"0": 2}}, {"resource": "r/y", "count": 1,
                                                               "numa": [0]}],
        pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "devices": {"r/x": 1, "r/y": 1}}]}])
    async with Node(profile, reregister_seconds=1.0) as node:
        await node.simulator.restart(downtime=0.1)
        channel, client = await stub(node)
        during = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        listed = await client.List(v1.ListPodResourcesRequest())
        plugins_during = node.simulator.describe()["device_plugins"]
        await asyncio.sleep(1.5)
        after = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        await channel.close()
    assert not during.devices
    assert list(during.cpu_ids) == [1, 2, 3, 4, 5, 6, 7]  # CPUs and memory are unaffected
    assert len(during.memory) == 4
    assert sorted(d.resource_name for d in listed.pod_resources[0].containers[0].devices) == [
        "r/x", "r/y"]
    assert plugins_during == {"r/x": False, "r/y": False}
    assert sorted(d.device_ids[0] for d in after.devices) == ["x-0", "x-1", "y-0"]
    assert node.simulator.describe()["restarts"] == 1


async def test_plugin_disconnect_fault():
    """One resource's devices leave allocatable, its assignments stay, others are untouched,
    and no new pod gets one of its devices."""
    profile = small_profile(
        devices=[{"resource": "r/x", "per_numa": {"0": 2}}, {"resource": "r/y", "count": 2,
                                                               "numa": [0]}],
        pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "devices": {"r/x": 1, "r/y": 1}}]}])
    async with Node(profile) as node:
        simulator = node.simulator
        with pytest.raises(ValueError, match="no device plugin serves 'r/z'"):
            simulator.set_faults({"plugin_disconnect": "r/z"})
        simulator.set_faults({"plugin_disconnect": "r/x"})
        channel, client = await stub(node)
        allocatable = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        listed = await client.List(v1.ListPodResourcesRequest())
        admitted = simulator.state.admit(parse_pod({"namespace": "ns", "name": "q", "containers": [
            {"name": "c", "devices": {"r/x": 1}}]}))
        simulator.set_faults({"plugin_disconnect": ""})
        back = await client.GetAllocatableResources(v1.AllocatableResourcesRequest())
        await channel.close()
    assert sorted(d.device_ids[0] for d in allocatable.devices) == ["y-0", "y-1"]
    assert sorted(d.resource_name for d in listed.pod_resources[0].containers[0].devices) == [
        "r/x", "r/y"]
    assert not admitted  # admission fails while the plugin is away
    assert sorted(d.device_ids[0] for d in back.devices) == ["x-0", "x-1", "y-0", "y-1"]


async def test_container_naming_a_claim_twice_gets_the_whole_claim_twice():
    """Fact 7: the kubelet appends the claim's entry once per reference."""
    profile = small_profile(
        dra_pools=[{"driver": "d.example.com", "pool": "p1", "devices": ["a", "b", "c"]}],
        pods=[{"namespace": "ns", "name": "p",
               "claims": [{"name": "pair", "driver": "d.example.com", "count": 2}],
               "containers": [{"name": "c", "claims": ["pair", "pair"]}]}])
    async with Node(profile) as node:
        channel, client = await stub(node)
        reply = await client.List(v1.ListPodResourcesRequest())
        await channel.close()
    claims = reply.pod_resources[0].containers[0].dynamic_resources
    assert [c.claim_name for c in claims] == ["p-pair", "p-pair"]
    assert [sorted(r.device_name for r in c.claim_resources) for c in claims] == [
        ["a", "b"], ["a", "b"]]


def test_pod_level_memory_names_only_the_types_given_at_pod_level():
    """Fact 3: pod-level memory may list some memory types only (a pod-level pool:
    PodLevelResourceManagers, scope pod)."""
    state = SimulatedNode(parse_profile(small_profile(
        topology_manager_scope="pod", feature_gates={"PodLevelResourceManagers": True}, pods=[{
            "namespace": "ns", "name": "p", "pod_level": {"cpus": 1, "memory": "1Gi"},
            "containers": [{"name": "c", "cpus": 1, "memory": "2Gi",
                            "hugepages-2Mi": "256Mi"}]}])))
    pod = state.pods[("ns", "p")].assignment
    assert [(b.memory_type, b.size) for b in pod.memory] == [("memory", 3 * GiB)]
    assert sorted(b.memory_type for b in pod.containers[0].memory) == ["hugepages-2Mi", "memory"]


def test_gb200_profile_has_numa_nodes_without_cpus(tmp_path):
    spec = load_profile("gb200-tray")
    topology = read_topology(write_sysfs(spec, tmp_path))
    assert len(topology.numa_nodes) == 34
    assert {n: len(node.cpus) for n, node in topology.numa_nodes.items() if node.cpus} == {
        0: 72, 1: 72}
    assert (tmp_path / "devices/system/node/node2/cpulist").read_text() == "\n"
    allocatable = SimulatedNode(spec).allocatable()
    assert sorted({b.numa_ids[0] for b in allocatable.memory}) == [0, 1, 2, 10, 18, 26]


async def test_control_endpoint_validates_its_input():
    from aiohttp import ClientSession, web

    from exporter.simulator.control import control_app

    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 1}}])
    async with Node(profile) as node:
        runner = web.AppRunner(control_app(node.simulator))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        answers = {}
        async with ClientSession() as session:
            for name, path, body in [
                    ("unknown switch", "/faults", {"nope": True}),
                    ("string for a bool", "/faults", {"v1": "false"}),
                    ("bad mode", "/faults", {"get": "maybe"}),
                    ("negative", "/faults", {"slow_seconds": -1}),
                    ("unknown plugin", "/faults", {"plugin_disconnect": "r/zz"}),
                    ("not an object", "/faults", [1]),
                    ("bad downtime", "/restart", {"downtime": "soon"}),
                    ("bad reregister", "/restart", {"reregister_seconds": -2}),
                    ("bad churn", "/churn", {"pods": "3"}),
                    ("no device", "/health", {"healthy": True}),
                    ("unknown device", "/health", {"device": "x-9"}),
                    ("disconnect", "/faults", {"plugin_disconnect": "r/x"})]:
                async with session.post(base + path, json=body) as response:
                    answers[name] = (response.status, await response.text())
            async with session.post(base + "/faults", data="{not json") as response:
                answers["not json"] = (response.status, await response.text())
        await runner.cleanup()
        faults = node.simulator.faults
    statuses = {name: status for name, (status, _) in answers.items()}
    assert statuses == {"unknown switch": 400, "string for a bool": 400, "bad mode": 400,
                        "negative": 400, "unknown plugin": 400, "not an object": 400,
                        "bad downtime": 400, "bad reregister": 400, "bad churn": 400,
                        "no device": 400, "unknown device": 404, "disconnect": 200,
                        "not json": 400}
    assert "r/zz" in answers["unknown plugin"][1]
    # nothing half-applied by the rejected requests
    assert (faults.v1, faults.get, faults.slow_seconds) == (True, "ok", 0.0)
    assert faults.plugin_disconnect == "r/x"
