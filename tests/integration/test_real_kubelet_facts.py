"""Facts of the real kubelet's podresources API and resource managers, on 1.34 to 1.37, and
how the exporter takes each: ``Get`` of an unknown pod, ``List``'s order and unsorted CPU ids,
rejected pods, a finished init container's CPUs and memory, what a rejected pod keeps, a
device plugin whose ``Allocate`` answers no container, and a device on several NUMA nodes.

Each node is a small simulator profile spelled out for the real kubelet; the expected values
are worked out by hand from the requests below.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from exporter._proto.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc
from exporter.simulator.profile import parse_profile

from ..support.realkubelet import (
    RELEASES,
    NodeHandle,
    RealKubelet,
    node_description,
    write_kubelet_config,
)

GiB, MiB = 1 << 30, 1 << 20


def two_numa_node(**overrides: Any) -> dict[str, Any]:
    """2 NUMA nodes x 8 CPUs (0-7, 8-15), no SMT, 8Gi each, CPU 0 reserved, 1Gi reserved on
    node 0; two GPUs per NUMA node; single-numa-node, scope container, static managers."""
    profile = {"name": "facts", "node_name": "facts-node",
               "numa_nodes": [{"id": 0, "cpus": "0-7", "memory": "8Gi"},
                              {"id": 1, "cpus": "8-15", "memory": "8Gi"}],
               "reserved_cpus": "0", "reserved_memory": {"0": {"memory": "1Gi"}},
               "devices": [{"resource": "example.com/gpu", "per_numa": {"0": 2, "1": 2}}],
               "topology_manager_policy": "single-numa-node"}
    profile.update(overrides)
    return node_description(parse_profile(profile))


def pod(name: str, *containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        qos: str = "Guaranteed") -> dict[str, Any]:
    def spec(c: dict[str, Any]) -> dict[str, Any]:
        requests = {k: str(v) for k, v in c.items() if k not in ("name", "restartPolicy")}
        resources = {"requests": requests, "limits": requests} if qos == "Guaranteed" else \
            {"requests": requests}
        entry = {"name": c["name"], "image": "pause", "resources": resources}
        if "restartPolicy" in c:
            entry["restartPolicy"] = c["restartPolicy"]
        return entry
    return {"metadata": {"name": name, "namespace": "facts"},
            "spec": {"containers": [spec(c) for c in containers],
                     "initContainers": [spec(c) for c in init]},
            "status": {"phase": "Pending"}}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


async def list_pods(node: NodeHandle) -> list[Any]:
    async with grpc.aio.insecure_channel(f"unix://{node.socket}") as channel:
        reply = await v1_grpc.PodResourcesListerStub(channel).List(v1.ListPodResourcesRequest())
    return list(reply.pod_resources)


async def get_error(node: NodeHandle, pod_name: str) -> grpc.aio.AioRpcError:
    """The error a ``Get`` of ``facts/<pod_name>`` answers (the test fails if it succeeds)."""
    async with grpc.aio.insecure_channel(f"unix://{node.socket}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await v1_grpc.PodResourcesListerStub(channel).Get(
                v1.GetPodResourcesRequest(pod_name=pod_name, pod_namespace="facts"))
    return raised.value


async def test_get_of_an_unknown_pod_answers_unknown(kubelet: RealKubelet) -> None:
    error = await get_error(kubelet.reset(two_numa_node()), "nope")
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == "pod nope in namespace facts not found"


async def test_list_order_and_cpu_ids_are_unsorted(kubelet: RealKubelet) -> None:
    """Pods come in the pod manager's map order and CPU ids in a set's order: both vary from
    one call to the next."""
    node = kubelet.reset(two_numa_node())
    for i in range(8):
        assert kubelet.admit(pod(f"p{i}", {"name": "c", "cpu": 1, "memory": "256Mi"})).admitted
    assert kubelet.admit(pod("wide", {"name": "c", "cpu": 6, "memory": "256Mi"})).admitted
    orders, cpu_orders = set(), set()
    for _ in range(30):
        await asyncio.sleep(0.02)  # the kubelet's rate limit: 100 QPS, burst 10
        pods = await list_pods(node)
        orders.add(tuple(p.name for p in pods))
        wide = next(p for p in pods if p.name == "wide")
        cpu_orders.add(tuple(wide.containers[0].cpu_ids))
    assert len(orders) > 1
    assert len(cpu_orders) > 1 and any(list(o) != sorted(o) for o in cpu_orders)
    assert {len(o) for o in cpu_orders} == {6}


async def test_a_rejected_pod_is_not_listed_and_keeps_its_first_containers_cpus(
        kubelet: RealKubelet) -> None:
    """The first container gets its CPUs, the second cannot be placed: the pod is rejected and
    not listed (it is Failed, so not active, on both releases), while the CPU manager still
    holds the first container's CPUs until the next admission's removeStaleState."""
    node = kubelet.reset(two_numa_node())
    verdict = kubelet.admit(pod("half", {"name": "a", "cpu": 4, "memory": "256Mi"},
                                {"name": "b", "cpu": 9, "memory": "256Mi"}))
    assert (verdict.admitted, verdict.reason) == (False, "TopologyAffinityError")
    assert len(verdict.containers["a"].cpus) == 4 and verdict.containers["b"].cpus == ()
    dumped = kubelet.dump()
    held = {c for containers in dumped["cpu_manager"]["assignments"].values()
            for cpus in containers.values() for c in cpus}
    assert held == set(verdict.containers["a"].cpus)
    assert [p.name for p in await list_pods(node)] == []
    # the next admission gives them back first
    assert kubelet.admit(pod("next", {"name": "c", "cpu": 1, "memory": "256Mi"})).admitted
    dumped = kubelet.dump()
    assert [p["name"] for p in dumped["pods"] if p["active"]] == ["next"]
    assert sum(len(cpus) for containers in dumped["cpu_manager"]["assignments"].values()
               for cpus in containers.values()) == 1


async def test_get_of_a_rejected_pod(kubelet: RealKubelet) -> None:
    """Since 1.35 the pods provider filters inactive pods in Get too (kubelet.go
    kubeletPodsProvider.GetPodByName); 1.34's answers for them."""
    node = kubelet.reset(two_numa_node())
    assert not kubelet.admit(pod("big", {"name": "c", "cpu": 9, "memory": "256Mi"})).admitted
    if kubelet.release != "1.34":
        assert (await get_error(node, "big")).code() == grpc.StatusCode.UNKNOWN
    else:
        async with grpc.aio.insecure_channel(f"unix://{node.socket}") as channel:
            reply = await v1_grpc.PodResourcesListerStub(channel).Get(
                v1.GetPodResourcesRequest(pod_name="big", pod_namespace="facts"))
            assert reply.pod_resources.name == "big"
            assert list(reply.pod_resources.containers[0].cpu_ids) == []


async def test_a_finished_init_container_keeps_the_cpus_the_app_did_not_reuse(
        kubelet: RealKubelet) -> None:
    """init: 4 CPUs and 1Gi, app: 2 CPUs and 256Mi. The app reuses 2 of the init container's
    CPUs; the other 2 stay with the init container for the pod's life, in no List reply, still
    allocatable. The app's memory comes out of the init container's block (1Gi - 256Mi left
    there), which is released when the app container is added."""
    node = kubelet.reset(two_numa_node())
    verdict = kubelet.admit(pod("p", {"name": "app", "cpu": 2, "memory": "256Mi"},
                                init=({"name": "init", "cpu": 4, "memory": "1Gi"},)))
    assert verdict.admitted
    init_cpus = set(verdict.containers["init"].cpus)
    assert len(init_cpus) == 4 and set(verdict.containers["app"].cpus) <= init_cpus
    assert [b[1] for b in verdict.containers["init"].memory] == [GiB - 256 * MiB]
    assert [b[1] for b in verdict.containers["app"].memory] == [256 * MiB]
    kubelet.start_containers("facts", "p")
    dumped = kubelet.dump()
    held = {c for cpus in next(iter(dumped["cpu_manager"]["assignments"].values())).values()
            for c in cpus}
    assert held == init_cpus
    assert not set(dumped["cpu_manager"]["default_cpu_set"]) & init_cpus
    containers = {c["name"]: c for c in dumped["pods"][0]["containers"]}
    assert containers["init"]["memory"] == []  # released at the app's AddContainer
    listed = await list_pods(node)
    assert [(c.name, len(c.cpu_ids)) for c in listed[0].containers] == [("app", 2)]


def test_a_plugin_allocate_without_container_responses_is_rejected(
        kubelet: RealKubelet) -> None:
    """The stub plugin's default Allocate answers no container: the device manager fails the
    allocation and the kubelet rejects the pod with UnexpectedAdmissionError."""
    description = two_numa_node()
    for device in description["devices"]:
        device["plugin_default_allocate"] = True
    kubelet.reset(description)
    verdict = kubelet.admit(pod("p", {"name": "c", "cpu": 1, "memory": "256Mi",
                                      "example.com/gpu": 1}))
    assert (verdict.admitted, verdict.reason) == (False, "UnexpectedAdmissionError")
    assert "Allocate failed due to" in verdict.message


async def test_get_with_its_gate_off_answers_unknown(kubelet: RealKubelet) -> None:
    """1.34 and 1.35 have the KubeletPodResourcesGet gate (beta, on); off, Get answers
    Unknown. Since 1.36 it is GA and locked on."""
    if kubelet.release not in ("1.34", "1.35"):
        pytest.skip(f"KubeletPodResourcesGet is locked on in {kubelet.release}")
    description = two_numa_node()
    description["kubelet"]["feature_gates"]["KubeletPodResourcesGet"] = False
    node = kubelet.reset(description)
    assert kubelet.admit(pod("p", {"name": "c", "cpu": 1, "memory": "256Mi"})).admitted
    error = await get_error(node, "p")
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == "PodResources API Get method disabled"
    kubelet.reset(two_numa_node())  # the gates go back to the release's defaults

async def test_a_device_on_several_numa_nodes_is_listed_once_per_numa_node(
        kubelet: RealKubelet, tmp_path: Path) -> None:
    """8 NUMA nodes; example.com/acc has a device local to NUMA nodes 0-3, one local to 4-7 and
    one without topology; Topology Manager policy none. ``List`` (like
    ``GetAllocatableResources``) names a device once per NUMA node of its topology
    (container_manager.go containerDevicesFromResourceDeviceInstances), so a pod holding two of
    them shows at least 4 entries for 2 devices. The kubelet admits a pod asking for the third
    under every release (the device manager takes any free device when nothing is aligned:
    filterByAffinity), and so does the exporter, which counts each device once for the
    resource-fit predicate: before, with no pod context, it counted List's entries (5 used of
    3) and answered OutOfexample.com/acc."""
    profile = {"name": "facts", "node_name": "facts-node",
               "numa_nodes": [{"id": n, "cpus": f"{2 * n},{2 * n + 1}", "memory": "4Gi"}
                              for n in range(8)],
               "reserved_cpus": "0", "topology_manager_policy": "none",
               "memory_manager_policy": "None",
               "devices": [{"resource": "example.com/acc", "id_prefix": "low-",
                            "numa": [0, 1, 2, 3], "count": 1},
                           {"resource": "example.com/acc", "id_prefix": "high-",
                            "numa": [4, 5, 6, 7], "count": 1},
                           {"resource": "example.com/acc", "id_prefix": "flat-", "count": 1}]}
    description = node_description(parse_profile(profile))
    node = kubelet.reset(description)
    held = kubelet.admit(pod("two", {"name": "c", "cpu": 1, "memory": "256Mi",
                                     "example.com/acc": 2}))
    assert held.admitted
    listed = await list_pods(node)
    entries = [d.device_ids[0] for d in listed[0].containers[0].devices]
    assert sorted(set(entries)) == sorted(held.containers["c"].devices["example.com/acc"])
    assert len(entries) >= 5  # one multi-NUMA device at least: 4 entries, and the other
    config = write_kubelet_config(description, tmp_path / "kubelet-config.json")
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "snapshot", "--format", "json", "--socket",
         node.socket, "--sysfs-root", node.sysfs_root, "--kubelet-config", str(config),
         "--shape", "cpu=1,memory=256Mi,example.com/acc=1"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    third = kubelet.admit(pod("third", {"name": "c", "cpu": 1, "memory": "256Mi",
                                        "example.com/acc": 1}))
    assert third.admitted
    assert set(third.containers["c"].devices["example.com/acc"]) == {
        "low-0", "high-0", "flat-0"} - set(held.containers["c"].devices["example.com/acc"])
    assert (answer["admitted"], answer["reason"], answer["capacity"]) == (True, None, 1)
