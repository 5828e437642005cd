"""Pod context from the real v1.37 kubelet's local Pods API, with only the kubelet's sockets:
no kubeconfig, no token, no API server.

The node (the real kubelet's managers, Topology Manager policy single-numa-node, scope
container, static CPU manager with CPU 0 reserved, memory manager Static with 512Mi reserved on
NUMA node 0): NUMA node 0 has CPUs 0-3, node 1 CPUs 4-7. ``ml/trainer`` (2 CPUs, 1Gi) is
admitted first: the kubelet puts it on the lowest NUMA node that holds it, node 0, which keeps
1 free CPU (3 allocatable, 2 taken); node 1 keeps 4. A Guaranteed pod asking for 5 CPUs then
fits no single NUMA node: the real kubelet rejects it with ``TopologyAffinityError`` and the
message ``Resources cannot be allocated with Topology locality`` (``rejectPod`` prefixes
``Pod was rejected: ``), and the resource no allowed NUMA set holds is ``cpu``: short by
5 - 1 = 4 on node 0 and 5 - 4 = 1 on node 1. (The node's 2Mi hugepages, 1Gi per NUMA node, are
outside the 16Gi of memory.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from exporter.simulator.profile import parse_pod, parse_profile

from ..support.harness import REPO, free_port, scrape_port_until, small_profile, stop_popen
from ..support.realkubelet import NodeHandle, RealKubelet, node_description, pod_manifest

NODE = parse_profile(small_profile(reserved_memory={"0": {"memory": "512Mi"}}))
MiB, GiB = 1 << 20, 1 << 30
TRAINER = {"namespace": "ml", "name": "trainer",
           "containers": [{"name": "c", "cpus": 2, "memory": "1Gi"}]}


def wide(name: str) -> dict:
    return {"namespace": "demo", "name": name,
            "containers": [{"name": "c", "cpus": 5, "memory": "1Gi"}]}


def without_cluster_access() -> dict[str, str]:
    """The environment with no way to the API server: no kubeconfig, not in a cluster."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["KUBECONFIG"] = os.devnull
    return env


@pytest.fixture(scope="module")
def kubelet() -> Iterator[RealKubelet]:
    with RealKubelet.start("1.37") as component:
        yield component


@pytest.fixture
def node(kubelet: RealKubelet) -> NodeHandle:
    handle = kubelet.reset(node_description(NODE))
    assert handle.pods_api_socket, "the 1.37 kubelet serves its Pods API (gate PodsAPI on)"
    trainer = kubelet.admit(pod_manifest(parse_pod(TRAINER), NODE.name))
    assert trainer.admitted and trainer.containers["c"].numa == (0,)
    kubelet.start_containers("ml", "trainer")
    return handle


def reject(kubelet: RealKubelet, name: str) -> None:
    verdict = kubelet.admit(pod_manifest(parse_pod(wide(name)), NODE.name))
    assert (verdict.admitted, verdict.reason, verdict.message) == (
        False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality")


def kubelet_flags(node: NodeHandle) -> list[str]:
    assert node.pods_api_socket is not None
    return ["--socket", node.socket, "--sysfs-root", node.sysfs_root,
            "--pods-api-socket", node.pods_api_socket]


def snapshot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter", "snapshot", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False,
                          env=without_cluster_access())


def test_snapshot_why_explains_a_rejection_from_the_pods_api_alone(kubelet, node) -> None:
    reject(kubelet, "wide")
    result = snapshot(*kubelet_flags(node), "--why", "demo/wide", "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["pod"] == "demo/wide"
    assert document["status"] == ("rejected at admission: TopologyAffinityError (Pod was "
                                  "rejected: Resources cannot be allocated with Topology "
                                  "locality)")
    assert (document["admitted"], document["reason"], document["blocking_resource"]) == (
        False, "TopologyAffinityError", "cpu")
    (container,) = document["containers"]
    assert container["request"] == {"cpu": 5, "memory": GiB}
    # memory: node 0's 16Gi less the 512Mi reserved and the trainer's 1Gi; node 1's 16Gi
    assert [(row["numa_node"], row["free"], row["shortfall"]) for row in container["numa"]] == [
        ("0", {"cpu": 1, "memory": 16 * GiB - 512 * MiB - GiB}, {"cpu": 4, "memory": 0}),
        ("1", {"cpu": 4, "memory": 16 * GiB}, {"cpu": 1, "memory": 0})]
    # what it cannot see with the sockets alone: no Node object; no state files either, but no
    # pod has an init container, so there is nothing they would add
    assert document["assumptions"] == ["node_allocatable_derived"]

    text = snapshot(*kubelet_flags(node), "--why", "demo/wide")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(
        "Pod demo/wide (Guaranteed): rejected at admission: TopologyAffinityError (Pod was "
        "rejected: Resources cannot be allocated with Topology locality)"), text.stdout
    assert "the kubelet would reject it with TopologyAffinityError under Topology Manager " \
           "policy single-numa-node, scope container" in text.stdout

    missing = snapshot(*kubelet_flags(node), "--why", "demo/elsewhere")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (f"podresources-exporter: pod demo/elsewhere is not on this node "
                              f"(the kubelet's Pods API at {node.pods_api_socket} does not "
                              "have it)\n")


async def test_serve_counts_the_real_kubelets_rejections(kubelet, node) -> None:
    reject(kubelet, "wide-before")  # rejected before the exporter starts: seen at its start
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", *kubelet_flags(node), "--interval", "0.2",
         "--listen-address", f"127.0.0.1:{port}"], cwd=REPO, env=without_cluster_access(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        scrape = await scrape_port_until(
            port, lambda s: s.series("podresources_admission_failure_info"), 30.0,
            "the first rejection")
        assert dict(*scrape.series("podresources_pods_source_info")) == {
            "source": "pods_api", "pods_api": "watching"}
        assert not scrape.series("podresources_kube_api_up")
        reject(kubelet, "wide-after")  # seen through WatchPods
        scrape = await scrape_port_until(
            port, lambda s: len(s.series("podresources_admission_failure_info")) == 2, 30.0,
            "the second rejection")
    finally:
        stop_popen(proc)
    assert scrape.by("podresources_admission_failure_info", "namespace", "pod", "reason",
                     "blocking_resource") == {
        ("demo", "wide-before", "TopologyAffinityError", "cpu"): 1,
        ("demo", "wide-after", "TopologyAffinityError", "cpu"): 1}
    assert scrape.by("podresources_admission_failures_total", "reason",
                     "blocking_resource") == {("TopologyAffinityError", "cpu"): 2}
