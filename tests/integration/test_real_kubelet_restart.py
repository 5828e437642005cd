"""A kubelet restart, on 1.37 and 1.34 (tests/realkubelet/restart.go), and a running exporter
across it.

The node (test_real_kubelet_facts.two_numa_node): 2 NUMA nodes x 8 CPUs (0-7, 8-15), no SMT,
8Gi each, CPU 0 reserved, 1Gi reserved on node 0 (7Gi allocatable there); two GPUs per NUMA
node (gpu-0, gpu-1 on node 0; gpu-2, gpu-3 on node 1); single-numa-node, scope container,
static CPU and memory managers. Pod ``a``: a regular init container (1 CPU, 512Mi) and an app
container (2 CPUs, 1Gi, 1 GPU), started (the init container finished); pod ``b`` (3 CPUs, 1Gi)
admitted and left Pending. Single-numa-node puts both on NUMA node 0, the lowest that holds
them: ``a``'s init container gets CPU 1, its app container reuses it and takes CPU 2 with
gpu-0 (the device manager takes devices in a set's order: one of node 0's two); ``b`` gets
CPUs 3, 4 and 5. The app container's memory came out of the init container's block, which was
released when the app container was added: node 0 holds 2Gi of pods' memory (5Gi free).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ..support.differential.serving import RunningExporter, wait_caught_up
from ..support.differential.steps import restart_refused
from ..support.managerfigures import expected_figures, metrics_figures
from ..support.realkubelet import (
    RELEASES,
    NodeHandle,
    RealKubelet,
    RealKubeletError,
    write_kubelet_config,
)
from .test_real_kubelet_facts import pod, two_numa_node

GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


def two_pods(kubelet: RealKubelet) -> tuple[dict[str, Any], NodeHandle]:
    description = two_numa_node()
    node = kubelet.reset(description)
    a = kubelet.admit(pod("a", {"name": "c", "cpu": 2, "memory": "1Gi", "example.com/gpu": 1},
                          init=({"name": "i", "cpu": 1, "memory": "512Mi"},)))
    assert a.admitted and a.containers["c"].cpus == (1, 2)
    assert a.containers["c"].devices["example.com/gpu"][0] in ("gpu-0", "gpu-1")
    kubelet.start_containers("facts", "a")
    b = kubelet.admit(pod("b", {"name": "c", "cpu": 3, "memory": "1Gi"}))
    assert b.admitted and b.containers["c"].cpus == (3, 4, 5)
    return description, node


def node0_memory(dump: dict[str, Any]) -> int:
    return dump["memory_manager"]["machine_state"]["0"]["memory"]["memory"]["free"]


def held_memory(dump: dict[str, Any]) -> dict[tuple[str, str], int]:
    names = {p["uid"]: p["name"] for p in dump["pods"]}
    return {(names[uid], container): sum(b["size"] for b in blocks)
            for uid, containers in dump["memory_manager"]["assignments"].items()
            for container, blocks in containers.items()}


def test_a_restart_restores_the_managers_and_allocates_a_finished_init_container_again(
        kubelet: RealKubelet) -> None:
    """The CPU and device managers come back exactly as they were (their checkpoints); the
    pods come back active. The memory manager too, but for one thing: ``a``'s init container,
    whose memory was released when its app container was added, is admitted again with its
    pod (HandlePodAdditions runs every container through Allocate, and the memory manager
    finds no block for it: policy_static.go Allocate), so it holds 512Mi on node 0 again, and
    nothing releases it while the pod runs (only the next AddContainer would)."""
    two_pods(kubelet)
    before = kubelet.dump()
    assert node0_memory(before) == 5 * GiB
    assert held_memory(before) == {("a", "c"): GiB, ("b", "c"): GiB}
    kubelet.restart()
    after = kubelet.dump()
    assert after["cpu_manager"] == before["cpu_manager"]
    assert after["device_manager"] == before["device_manager"]
    assert [(p["name"], p["active"], p["phase"]) for p in after["pods"]] == [
        ("a", True, "Running"), ("b", True, "Pending")]
    assert held_memory(after) == {("a", "c"): GiB, ("a", "i"): 512 * MiB, ("b", "c"): GiB}
    assert node0_memory(after) == 5 * GiB - 512 * MiB
    # the next pod finds node 0's last two free CPUs (6, 7) and its 4.5Gi; the one after it
    # goes to node 1
    c = kubelet.admit(pod("c", {"name": "c", "cpu": 2, "memory": "4Gi"}))
    assert c.admitted and c.containers["c"].cpus == (6, 7)
    d = kubelet.admit(pod("d", {"name": "c", "cpu": 1, "memory": "1Gi"}))
    assert d.admitted and d.containers["c"].numa == (1,)


def test_a_pending_pod_is_rejected_when_its_device_plugin_registers_late(
        kubelet: RealKubelet) -> None:
    """Restarted with the GPU plugin not registered yet: the device manager has example.com/gpu
    from its checkpoint with no device (capacity 0). ``a``'s app container, which the runtime
    reports running, keeps gpu-0 (devicesToAllocate: a kubelet restart, the sources not all
    seen); ``e``, admitted with a GPU but never started, is rejected with
    UnexpectedAdmissionError ("no healthy devices present"), and its GPU is freed when the
    plugin is back and the next admission runs."""
    two_pods(kubelet)
    e = kubelet.admit(pod("e", {"name": "c", "cpu": 1, "memory": "256Mi",
                                "example.com/gpu": 1}))
    assert e.admitted
    kubelet.restart(plugins_late=True)
    dump = kubelet.dump()
    assert dump["device_manager"]["capacity"] == {"example.com/gpu": 0}
    states = {p["name"]: (p["active"], p["phase"], p["reason"]) for p in dump["pods"]}
    assert states == {"a": (True, "Running", ""), "b": (True, "Pending", ""),
                      "e": (False, "Failed", "UnexpectedAdmissionError")}
    assert "no healthy devices present" in next(p for p in dump["pods"]
                                                if p["name"] == "e")["message"]
    kubelet.register_plugins()
    dump = kubelet.dump()
    assert dump["device_manager"]["capacity"] == {"example.com/gpu": 4}
    assert kubelet.admit(pod("f", {"name": "c", "cpu": 1, "memory": "256Mi",
                                   "example.com/gpu": 2})).admitted  # node 0's: a's + e's
    dump = kubelet.dump()
    held = sorted(d for p in dump["pods"] if p["active"] for c in p["containers"]
                  for d in c["devices"].get("example.com/gpu", ()))
    assert len(held) == 3 and len(set(held)) == 3


async def test_the_running_exporter_follows_a_restart_and_a_health_change(
        kubelet: RealKubelet, tmp_path: Path) -> None:
    """``serve`` reading the node (--watch-path on the kubelet's root directory, its config
    file, pod context from its Pods API on 1.37, none on 1.34), GetAllocatableResources every
    60 s: after the restart its figures are the managers' again (its socket and the Pods API
    watch opened again), and node 0's free memory is 4.5Gi (the init container's 512Mi again,
    from memory_manager_state). A GPU turning unhealthy reaches /metrics at the next refresh
    (the device checkpoint's healthy devices change), not 60 s later."""
    description, node = two_pods(kubelet)
    config = write_kubelet_config(description, tmp_path / "kubelet-config.yaml")
    argv = ["--socket", node.socket, "--sysfs-root", node.sysfs_root, "--watch-path",
            node.root_dir, "--kubelet-config", str(config), "--interval", "0.05",
            "--allocatable-interval", "60"]
    argv += (["--pods-api-socket", node.pods_api_socket] if node.pods_api_socket
             else ["--no-pods-api"])
    exporter = await RunningExporter(argv).start()
    try:
        async def figures_now() -> tuple[dict[str, Any], Any]:
            dump = kubelet.dump()
            current, lag = await wait_caught_up(exporter, time.monotonic(), dump)
            assert current is not None, lag
            assert metrics_figures(current.scrape) == expected_figures(dump, description)
            return dump, current.scrape

        _, scrape = await figures_now()
        assert scrape.value("podresources_numa_free", numa_node="0", resource="memory") == \
            5 * GiB
        kubelet.restart()
        _, scrape = await figures_now()
        assert scrape.value("podresources_numa_free", numa_node="0", resource="memory") == \
            5 * GiB - 512 * MiB
        assert scrape.value("podresources_devices_allocatable", numa_node="1",
                            resource="example.com/gpu") == 2
        kubelet.set_health("example.com/gpu", "gpu-3", False)
        _, scrape = await figures_now()
        assert scrape.value("podresources_devices_allocatable", numa_node="1",
                            resource="example.com/gpu") == 1
    finally:
        await exporter.stop()


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict-cpu-reservation"])
def test_every_unreserved_cpu_assigned_stops_a_restart_only_under_strict_reservation(
        kubelet: RealKubelet, strict: bool) -> None:
    """Every CPU but the reserved CPU 0 assigned exclusively: ``a`` 7 CPUs on node 0 (1-7),
    ``b`` 8 on node 1 (8-15). The CPU manager's default set keeps CPU 0, and the kubelet
    restarts; with ``strict-cpu-reservation`` the reserved CPUs are not in it, so it is empty,
    and the restarted kubelet refuses to start (policy_static.go validateState: "default
    cpuset cannot be empty" while assignments exist). The sequences do not take a restart
    then (steps.restart_refused, which this checks)."""
    options = {"strict-cpu-reservation": "true"} if strict else {}
    kubelet.reset(two_numa_node(cpu_manager_policy_options=options))
    a = kubelet.admit(pod("a", {"name": "c", "cpu": 7, "memory": "1Gi"}))
    b = kubelet.admit(pod("b", {"name": "c", "cpu": 8, "memory": "1Gi"}))
    assert a.containers["c"].cpus == (1, 2, 3, 4, 5, 6, 7)
    assert b.containers["c"].cpus == tuple(range(8, 16))
    before = kubelet.dump()["cpu_manager"]
    assert before["default_cpu_set"] == ([] if strict else [0])
    assert restart_refused(kubelet) is strict
    if strict:
        with pytest.raises(RealKubeletError, match="default cpuset cannot be empty"):
            kubelet.restart()
    else:
        kubelet.restart()
        assert kubelet.dump()["cpu_manager"] == before
