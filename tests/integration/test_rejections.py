"""Admission rejections: read from pod objects as the API server shows them, and made by the
simulator's control endpoint the way the kubelet's Topology Manager rejects under
single-numa-node."""

from __future__ import annotations

import pytest
from aiohttp import ClientSession, web

from exporter.podspec import exclusive_requests, is_admission_reason, rejection
from exporter.simulator.control import control_app

from ..support.harness import Node, small_profile

GiB = 1 << 30


def container(name: str, requests: dict[str, str], limits: dict[str, str] | None = None,
              restart_policy: str | None = None) -> dict:
    result: dict = {"name": name, "resources": {"requests": requests,
                                                "limits": requests if limits is None else limits}}
    if restart_policy:
        result["restartPolicy"] = restart_policy
    return result


@pytest.mark.parametrize("reason,expected", [
    ("TopologyAffinityError", True), ("SMTAlignmentError", True),
    ("UnexpectedAdmissionError", True), ("OutOfcpu", True), ("OutOfmemory", True),
    ("OutOfnvidia.com/gpu", True), ("OutOfhugepages-1Gi", True),
    ("OutOfpods", False), ("OutOfephemeral-storage", False), ("Evicted", False),
    ("NodeAffinity", False), (None, False)])
def test_admission_reasons(reason, expected) -> None:
    assert is_admission_reason(reason) is expected


def test_guaranteed_pod_requests_whole_cpus_memory_and_devices() -> None:
    spec = {
        "containers": [container("app", {"cpu": "4", "memory": "8Gi", "hugepages-1Gi": "2Gi",
                                         "nvidia.com/gpu": "1"})],
        # the sidecar runs with the app: 4 + 1 CPUs, 8 + 1 Gi; the regular init container
        # runs with the sidecar started before it: 6 + 1 CPUs (more), 1 + 1 Gi (less)
        "initContainers": [
            container("proxy", {"cpu": "1", "memory": "1Gi"}, restart_policy="Always"),
            container("setup", {"cpu": "6", "memory": "1Gi"})],
    }
    assert dict(exclusive_requests(spec)) == {
        "cpu": 7, "memory": 9 * GiB, "hugepages-1Gi": 2 * GiB, "nvidia.com/gpu": 1}


def test_burstable_pod_requests_only_devices() -> None:
    spec = {"containers": [container("app", {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
                                     limits={"cpu": "8", "memory": "8Gi",
                                             "nvidia.com/gpu": "2"})]}
    assert exclusive_requests(spec) == (("nvidia.com/gpu", 2),)


def test_fractional_cpu_is_shared_pool() -> None:
    spec = {"containers": [container("app", {"cpu": "1500m", "memory": "1Gi"})]}
    assert exclusive_requests(spec) == (("memory", GiB),)


def test_rejection_needs_phase_failed_and_an_admission_reason() -> None:
    obj = {"metadata": {"namespace": "ml", "name": "p", "uid": "u1"},
           "spec": {"containers": [container("c", {"cpu": "2", "memory": "1Gi"})]},
           "status": {"phase": "Failed", "reason": "TopologyAffinityError",
                      "message": "Pod was rejected: Resources cannot be allocated with Topology "
                                 "locality"}}
    found = rejection(obj)
    assert found is not None and found.uid == "u1" and found.reason == "TopologyAffinityError"
    assert dict(found.requests) == {"cpu": 2, "memory": GiB}
    assert rejection({**obj, "status": {"phase": "Pending"}}) is None
    assert rejection({**obj, "status": {"phase": "Failed", "reason": "Evicted"}}) is None


async def test_control_endpoint_admits_or_rejects_like_single_numa_node() -> None:
    # two NUMA nodes of 4 CPUs, CPU 0 reserved: 3 + 4 free
    async with Node(small_profile()) as node:
        runner = web.AppRunner(control_app(node.simulator))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        state = node.simulator.state
        try:
            async with ClientSession() as session:
                async def post(path: str, body: object) -> tuple[int, dict]:
                    async with session.post(base + path, json=body) as response:
                        return response.status, await response.json(content_type=None)

                # 5 CPUs: 7 free on the node, but at most 4 on one NUMA node
                status, answer = await post("/pods", {
                    "namespace": "demo", "name": "wide",
                    "containers": [{"name": "c", "cpus": 5, "memory": "1Gi"}]})
                assert (status, answer["reason"]) == (409, "TopologyAffinityError")
                assert ("demo", "wide") not in state.pods  # nothing assigned
                assert sum(len(cpus) for cpus in state.free_cpus.values()) == 7
                failed = state.rejected_pods[("demo", "wide")]
                assert failed["status"]["phase"] == "Failed"
                assert dict(rejection(failed).requests) == {"cpu": 5, "memory": GiB}
                # 4 CPUs: only node 1 has them
                status, answer = await post("/pods", {
                    "namespace": "demo", "name": "fits",
                    "containers": [{"name": "c", "cpus": 4, "memory": "1Gi"}]})
                assert (status, answer["admitted"]) == (200, True)
                assert state.free_cpus[1] == set()
                assert (await post("/pods", {"namespace": "demo"}))[0] == 400
                assert (await post("/pods/delete", {"namespace": "demo", "name": "wide"}))[0] \
                    == 200
                assert ("demo", "wide") not in state.rejected_pods
                assert (await post("/pods/delete", {"namespace": "demo", "name": "fits"}))[0] \
                    == 200
                assert state.free_cpus[1] == {4, 5, 6, 7}
                async with session.post(base + "/pods/delete",
                                        json={"namespace": "demo", "name": "nope"}) as response:
                    assert response.status == 404
        finally:
            await runner.cleanup()
