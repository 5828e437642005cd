"""The exporter against the real kubelet: every simulator profile the real managers can hold,
its pods admitted through the kubelet's own code (1.34 to 1.37), and every per-NUMA and
per-container figure of ``snapshot --format json`` equal to what the managers' dump says.

The expected figures are worked out from the dump with plain counting (which CPU sits on
which NUMA node comes from the node description; tests/support/managerfigures.py), never from
the exporter's accounting. DRA is outside the real component: the profiles' DRA claims are not
there, and a device plugin resource the scheduler served through DRA is left to DRA (1.37) as
the kubelet does.

The simulator admits the same pods by the fit engine's rules: the real kubelet rejects the
pods it rejects, with the same reasons, and places every other pod's containers where it
places them (CPU ids, memory NUMA nodes, device NUMA nodes where the policy aligns), but for
the named pods admitted under another configuration (PLACED_ELSEWHERE).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from exporter.simulator import SimulatedNode, load_profile
from exporter.simulator.profile import NodeSpec, PodSpec

from ..support.managerfigures import (
    expected_figures,
    label,
    listed_containers,
    reported_figures,
)
from ..support.realkubelet import (
    RELEASES,
    Admission,
    RealKubelet,
    node_description,
    pod_manifest,
)

# large (500 pods) and huge (2,000 pods) on 4,096 devices: through the real device manager (255
# NUMA masks times every device of a resource, per request) they take minutes per release (large:
# 10 minutes on a busy 2-core machine), so they run on request only
# (PODRESOURCES_REALKUBELET_ALL_PROFILES=1)
PROFILES = ("small", "dual-socket-gpu", "epyc-nps4", "gb200-tray") + (
    ("large", "huge") if os.environ.get("PODRESOURCES_REALKUBELET_ALL_PROFILES") == "1" else ())
# gb200-tray's 34 NUMA nodes with the memory manager Static: its Allocate (policy none:
# getDefaultHint -> calculateHints) walks every one of the 2^34 NUMA masks for each Guaranteed
# container, so the real kubelet never finishes admitting the first pod; run with the memory
# manager None instead
OVERRIDES = {"gb200-tray": {"memory_manager_policy": "None"}}
# feature gates a release does not have: its kubelet refuses a configuration naming them
# ("unrecognized feature gate"), so the profile runs there without them (1.34 and 1.35 have no
# PodLevelResourceManagers: a pod with pod-level resources gets no exclusive CPUs or memory)
MISSING_GATES = {"1.34": ("PodLevelResourceManagers",), "1.35": ("PodLevelResourceManagers",)}
# pods the real kubelet rejects and the simulator admits. (dra-infer-0's nvidia.com/gpu
# is served by DRA, but the node's device plugin serves that name too: the device manager's
# GetTopologyHints does not skip a DRA-backed extended resource, only its Allocate does
# (topology_hints.go / manager.go isDRAExtendedResource), so the pod needs a free plugin GPU on
# one NUMA node when it is admitted: the profile admits it while llm-infer-1's GPU is free.)
# On 1.36, whose PodLevelResourceManagers is alpha, the memory manager's Allocate of a container
# that requests no memory in a Guaranteed pod with pod-level resources asks getDefaultHint for
# nothing and fails ("failed to get the default NUMA affinity"); 1.37 skips such a container
# (getContainerRequestedResources empty). The simulator follows 1.37: pipeline-0's stage-b.
REAL_ONLY_REJECTIONS: dict[tuple[str, str], dict[str, str]] = {
    ("dual-socket-gpu", "1.36"): {"batch/pipeline-0": "UnexpectedAdmissionError"},
}
# pods the real kubelet places elsewhere than the simulator. The component runs one
# configuration: a pod the profile admitted under another (admitted_under) is admitted under
# the node's, as a kubelet restarted with the new configuration admits it again, so
# - mpi-rank-0 (admitted under policy none: CPUs on node 1, memory and VF on node 0) is
#   aligned on node 1 by single-numa-node;
# - 1.37, PodLevelResourceManagers on: pipeline-0 (admitted under scope pod, which allocates
#   its pod-level pool of 2 more CPUs) gets its container's CPUs only under scope container,
#   so the next pods' whole cores come one core earlier (inmem-db-0: 28,60, not 29,61;
#   etl-job: 29,61, not 30,62). On 1.34 pod-level resources get no exclusive CPUs at all.
PLACED_ELSEWHERE = {
    ("dual-socket-gpu", "1.37"): {"hpc/mpi-rank-0", "analytics/inmem-db-0",
                                  "batch/etl-job-28391-x7k2p"},
    # 1.36 rejects pipeline-0 (REAL_ONLY_REJECTIONS): the next pods' cores come earlier too
    ("dual-socket-gpu", "1.36"): {"hpc/mpi-rank-0", "analytics/inmem-db-0",
                                  "batch/etl-job-28391-x7k2p"},
    ("dual-socket-gpu", "1.35"): {"hpc/mpi-rank-0"},
    ("dual-socket-gpu", "1.34"): {"hpc/mpi-rank-0"},
}


def simulated_pods(state: SimulatedNode) -> list[PodSpec]:
    """The pods the simulator tried on the node, in the order it admitted them: the
    profile's, rejected ones included, then the generated ones it admitted."""
    named = {(p.namespace, p.name) for p in state.spec.pods}
    generated = [sim.spec for key, sim in state.pods.items() if key not in named]
    return list(state.spec.pods) + generated


def run_pods(kubelet: RealKubelet, spec: NodeSpec, pods: list[PodSpec],
             admitted: dict[str, Admission] | None = None) -> dict[str, str]:
    """Each pod admitted, then taken through its life as the profile says (started, ended,
    terminating, or still Pending); returns the rejections (``namespace/name`` -> reason),
    and puts each admitted pod's verdict in ``admitted``."""
    rejected = {}
    for pod in pods:
        verdict = kubelet.admit(pod_manifest(pod, spec.name))
        if not verdict.admitted:
            rejected[f"{pod.namespace}/{pod.name}"] = verdict.reason
            continue
        if admitted is not None:
            admitted[f"{pod.namespace}/{pod.name}"] = verdict
        if pod.phase != "Pending":
            kubelet.start_containers(pod.namespace, pod.name)
        if pod.phase in ("Succeeded", "Failed") or pod.terminating:
            kubelet.set_phase(pod.namespace, pod.name,
                              pod.phase if pod.phase in ("Succeeded", "Failed") else "",
                              terminating=pod.terminating)
    return rejected


def snapshot(socket: str, sysfs_root: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "snapshot", "--format", "json", "--socket", socket,
         "--sysfs-root", sysfs_root], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def expected_holdings(dump: dict[str, Any], node: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    """Per listed container holding anything exclusive: its CPUs, memory blocks and devices."""
    cpu_numa = {cpu["id"]: cpu["numa"] for cpu in node["cpus"]}
    holdings = {}
    for pod, container in listed_containers(dump):
        memory = sorted((label(b["numa"]), b["type"], b["size"]) for b in container["memory"]
                        ) if dump["memory_manager"]["policy"] == "Static" else []
        devices = sorted((resource, device_id) for resource, ids in container["devices"].items()
                         for device_id in ids)
        if not (container["cpus"] or memory or devices):
            continue
        holdings[(pod["namespace"], pod["name"], container["name"])] = {
            "cpus": sorted((str(cpu_numa[c]), c) for c in container["cpus"]),
            "memory": memory, "devices": devices}
    return holdings


def reported_holdings(document: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    holdings = {}
    for pod in document["pods"]:
        for container in pod["containers"]:
            cpus = sorted((row["numa_node"], cpu) for row in container["cpus_by_numa_node"]
                          for cpu in _cpulist(row["cpus"]))
            memory = sorted((row["numa_node"], row["memory_type"], row["bytes"])
                            for row in container["memory"])
            devices = sorted((row["resource"], row["device_id"]) for row in container["devices"])
            holdings[(pod["namespace"], pod["pod"], container["container"])] = {
                "cpus": cpus, "memory": memory, "devices": devices}
    return holdings


def _cpulist(text: str) -> list[int]:
    cpus = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


@pytest.mark.parametrize("profile", PROFILES)
def test_exporter_equals_the_managers_state(kubelet: RealKubelet, profile: str) -> None:
    spec = load_profile(profile)
    for key, value in OVERRIDES.get(profile, {}).items():
        setattr(spec, key, value)
    for gate in MISSING_GATES.get(kubelet.release, ()):
        spec.feature_gates.pop(gate, None)
    state = SimulatedNode(spec)
    simulator_rejected = dict(line.split(": ", 1) for line in state.rejected)
    description = node_description(spec)
    node = kubelet.reset(description)
    admitted: dict[str, Admission] = {}
    real_rejected = run_pods(kubelet, spec, simulated_pods(state), admitted)
    dump = kubelet.dump()
    document = snapshot(node.socket, node.sysfs_root)

    expected = expected_figures(dump, description)
    reported = reported_figures(document)
    for kind in expected:
        assert reported[kind] == expected[kind], f"{kind} ({profile}, {kubelet.release})"
    assert reported_holdings(document) == expected_holdings(dump, description)
    assert document["data_issues"] == [], document["data_issues"]
    assert real_rejected == {**simulator_rejected,
                             **REAL_ONLY_REJECTIONS.get((profile, kubelet.release), {})}
    placed_elsewhere = {pod for pod, container in placement_differences(state, admitted,
                                                                        description)}
    assert placed_elsewhere == PLACED_ELSEWHERE.get((profile, kubelet.release), set()), \
        placement_differences(state, admitted, description)


def placement_differences(state: SimulatedNode, admitted: dict[str, Admission],
                          node: dict[str, Any]) -> list[tuple[str, str]]:
    """(pod, container) of every listed container the simulator and the real kubelet placed
    differently: CPU ids; each memory block's type and NUMA nodes (memory manager Static);
    each device's NUMA nodes where the Topology Manager aligns (under policy none the device
    manager takes devices in map order: only how many of each resource)."""
    aligned = node["kubelet"]["topology_manager_policy"] != "none"
    static_memory = node["kubelet"]["memory_manager_policy"] == "Static"
    device_numa = {(d["resource"], d["id"]): tuple(d["numa"] or ()) for d in node["devices"]}
    differ = []
    for key, verdict in admitted.items():
        namespace, name = key.split("/")
        sim = state.pods[(namespace, name)]
        simulated = {c.name: c for c in sim.assignment.containers}
        for container in verdict.containers.values():
            if container.kind == "init":
                continue
            mine = simulated[container.name]
            real_devices = sorted((r, device_numa[(r, i)] if aligned else ())
                                  for r, ids in container.devices.items() for i in ids)
            sim_devices = sorted((e.resource, tuple(sorted(e.numa_ids or ())) if aligned else ())
                                 for e in mine.devices for _ in e.device_ids)
            real_memory = sorted((t, tuple(sorted(n))) for t, _, n in container.memory
                                 ) if static_memory else []
            sim_memory = sorted((b.memory_type, tuple(sorted(b.numa_ids or ())))
                                for b in mine.memory) if static_memory else []
            if (sorted(container.cpus) != sorted(mine.cpu_ids) or real_memory != sim_memory
                    or real_devices != sim_devices):
                differ.append((key, container.name))
    return differ
