"""Whole-pod admission cases: the CPU manager's TestStaticPolicyAdd (Allocate with no NUMA
hint) and scheduler-plugins' NodeResourceTopology filter tests, run through
exporter.fit.kubelet.topologymanager.scope with the verdicts (admitted, reason) they assert.

The filter cases test the scheduler's approximation of ``single-numa-node``: it compares what
is *available* per NUMA zone, with no capacity-based minimum width. Here each zone's
capacity is the managers' capacity and its availability what is free, which under
``single-numa-node`` gives the kubelet's answer too (a single zone's capacity always holds what
it has available). Where a case asserts the CPU ids the CPU manager picks, or every
container's NUMA set, those are compared too."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Managers, Rules
from exporter.fit.kubelet.cpumanager.state import CpuManagerState
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.kubelet.memorymanager.state import MemoryNode
from exporter.fit.kubelet.podshape import ContainerShape, PodShape, is_device_resource

from .cases import ids, section

CASES = section("admission")

# Where the scheduler's filter and the kubelet part ways, the kubelet's answer is asserted.
# Memory that no NUMA set can hold: the memory manager's calculateHints returns an empty map,
# which filterProvidersHints reads as "don't care"; the Topology Manager admits, and the
# memory manager's Allocate fails ("failed to get the default NUMA affinity"), so the pod is
# rejected with UnexpectedAdmissionError, not TopologyAffinityError.
KUBELET_REASON = {
    "admission/nrt/testnoderesourcetopology/guaranteed-qos-hugepages-pod-doesn-t-fit":
        "UnexpectedAdmissionError",
    "admission/nrt/testnoderesourcetopologymulticontainerpodscope/"
    "gu-pod-does-not-fit-not-enough-memory-available-on-any-numa-node":
        "UnexpectedAdmissionError",
}


def container(spec: dict[str, Any], sidecar: bool = False) -> ContainerShape:
    requests = dict(spec.get("requests") or {})
    limits = dict(spec.get("limits") or {})
    amounts: dict[str, int] = {}
    for resource, value in {**requests, **limits}.items():
        if resource == "cpu":
            amounts[resource] = int(requests.get("cpu", value) * 1000)
        elif is_device_resource(resource):
            amounts[resource] = int(limits.get(resource, requests.get(resource, 0)))
        else:
            amounts[resource] = int(requests.get(resource, value))
    amounts.pop("ephemeral-storage", None)
    return ContainerShape(spec.get("name", "c"), amounts, sidecar or bool(spec.get("sidecar")))


def pod(case: dict[str, Any]) -> PodShape:
    spec = case["pod"]
    return PodShape("p", tuple(container(c) for c in spec["containers"]),
                    tuple(container(c) for c in spec.get("initContainers") or ()),
                    qos=spec["qos"])


def cpumanager_node(node: dict[str, Any]) -> ManagersState:
    online = {int(n): frozenset(z["cpus"]) for n, z in node["numa"].items()}
    cpu_numa = {c: n for n, cpus in online.items() for c in cpus}
    siblings = {c: frozenset(core) for z in node["numa"].values()
                for core in z.get("smt_siblings", []) for c in core}
    reserved = frozenset(node.get("reserved_cpus") or ())
    threads = max((len(s) for s in siblings.values()), default=1)
    reserved_cores = frozenset(c for r in reserved for c in siblings.get(r, {r}))
    free = frozenset(node["free_cpus_incl_reserved"]) - reserved
    return ManagersState(tuple(sorted(online)), CpuManagerState(online, free, cpu_numa, siblings,
                                                                threads, reserved_cores))


def nrt_node(node: dict[str, Any]) -> ManagersState:
    numa_ids = tuple(sorted(int(n) for n in node["numa"]))
    online: dict[int, frozenset[int]] = {}
    free: set[int] = set()
    memory: dict[int, MemoryNode] = {}
    registered: dict[str, dict[frozenset[int], int]] = {}
    available: dict[str, dict[frozenset[int], int]] = {}
    next_cpu = 0
    for n in numa_ids:
        zone = node["numa"][n]
        cpus = zone.get("cpu", {"capacity": 0, "available": 0})
        ids_here = list(range(next_cpu, next_cpu + int(cpus["capacity"])))
        next_cpu += len(ids_here)
        online[n] = frozenset(ids_here)
        free.update(ids_here[:int(cpus["available"])])
        types = {r: v for r, v in zone.items() if r == "memory" or r.startswith("hugepages-")}
        memory[n] = MemoryNode({r: v["capacity"] for r, v in types.items()},
                               {r: v["available"] for r, v in types.items()}, frozenset({n}),
                               int(any(v["available"] < v["capacity"] for v in types.values())))
        for resource, amounts in zone.items():
            if is_device_resource(resource):
                key = frozenset({n})
                registered.setdefault(resource, {})[key] = int(amounts["capacity"])
                available.setdefault(resource, {})[key] = int(amounts["available"])
    for resource, amount in (node.get("node_level_only") or {}).items():
        registered.setdefault(resource, {})[frozenset()] = int(amount)
        available.setdefault(resource, {})[frozenset()] = int(amount)
    cpu_numa = {c: n for n, cpus in online.items() for c in cpus}
    devices = {r: DeviceState(registered[r], available[r]) for r in registered}
    return ManagersState(numa_ids, CpuManagerState(online, frozenset(free), cpu_numa), memory,
                         devices)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_admission_case(case: dict[str, Any]) -> None:
    kubelet = case["source"]["repo"] == "kubernetes/kubernetes"
    node = cpumanager_node(case["node"]) if kubelet else nrt_node(case["node"])
    options = case.get("options") or {}
    rules = Rules(case["policy"], case["scope"], bool(options.get("full-pcpus-only")),
                  managers=Managers(cpu_static=True, memory_static=not kubelet))
    verdict = admit(pod(case), node, rules)
    expected = case["expect"]
    reason = KUBELET_REASON.get(case["id"], expected["reason"])
    assert (verdict.admitted, verdict.reason) == (expected["admit"], reason), verdict.message
    if expected.get("cpus") is not None:
        assert sorted(c for p in verdict.placements for c in p.cpu_ids) == expected["cpus"]
    if expected.get("numa_all_containers"):
        assert {p.hint for p in verdict.placements} == {
            frozenset(expected["numa_all_containers"])}
