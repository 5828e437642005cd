"""The hint providers' own tests (cpumanager/topology_hints_test.go,
memorymanager/policy_static_test.go, devicemanager/topology_hints_test.go), run through
exporter.fit.kubelet.topologymanager.bitmask and exporter.fit.kubelet.podshape: the hints and the
pod-scope requests they assert."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.fit.kubelet.config import Managers
from exporter.fit.kubelet.cpumanager.policy_static import cpu_hints
from exporter.fit.kubelet.cpumanager.state import CpuManagerState
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.devicemanager.topology_hints import device_hints
from exporter.fit.kubelet.memorymanager.policy_static import memory_hints
from exporter.fit.kubelet.memorymanager.state import MemoryNode
from exporter.fit.kubelet.podshape import (
    GUARANTEED,
    ContainerShape,
    PodShape,
    asks,
    pod_effective_ask,
)
from exporter.fit.kubelet.topologymanager.topology_manager import TopologyHint

from .cases import as_yaml, ids, section

PROVIDERS = [c for c in section("hints") if not c.get("kind")]
EFFECTIVE = [c for c in section("hints") if c.get("kind") == "pod_effective_request"]


def readmission(case: dict[str, Any]) -> bool:
    """The container already holds resources (kubelet restart): hints are regenerated from
    that assignment. A new pod never does, so the engine does not model it."""
    if case["provider"] == "cpu":
        return bool((case["state"].get("assignments") or {}).get("this_container"))
    if case["provider"] == "device":
        return bool(case["machine"].get("allocated_to_this_container"))
    return str(case.get("note", "")).lower().startswith("re-admission")


def listed(found: list[TopologyHint] | None) -> list[dict[str, Any]] | None:
    if found is None:
        return None
    return sorted((as_yaml(h) for h in found), key=lambda h: (len(h["numa"] or []), h["numa"]))


def cpu_case(case: dict[str, Any]) -> list[dict[str, Any]] | None:
    machine = case["machine"]
    online = {int(n): frozenset(node["cpus"]) for n, node in machine["numa"].items()}
    cpu_numa = {c: n for n, cpus in online.items() for c in cpus}
    siblings = {c: frozenset(core) for node in machine["numa"].values()
                for core in node.get("smt_siblings", []) for c in core}
    reserved = frozenset(machine.get("reserved_cpus") or ())
    state = CpuManagerState(online, frozenset(case["state"]["free_cpus"]) - reserved, cpu_numa,
                            siblings)
    pod = PodShape("p", (ContainerShape("c", {"cpu": case["request"]["cpu"] * 1000}),),
                   qos=case["request"].get("qos", GUARANTEED))
    request = asks(pod, pod.containers[0], Managers()).cpus
    return listed(cpu_hints(state, request, frozenset(case.get("reusable_cpus") or ())))


def memory_case(case: dict[str, Any]) -> dict[str, Any] | None:
    machine = case["machine"]
    request = case["request"]
    pod = PodShape("p", (ContainerShape("c", {r: v for r, v in request.items()
                                              if r not in ("qos", "limits", "cpu_millis")}),),
                   qos=request["qos"])
    ask = asks(pod, pod.containers[0], Managers())
    nodes = {}
    for n, node in machine["numa"].items():
        types = {r: v for r, v in node.items() if isinstance(v, dict)}
        nodes[int(n)] = MemoryNode({r: v["allocatable"] for r, v in types.items()},
                                   {r: v["free"] for r, v in types.items()},
                                   frozenset(node.get("group") or [int(n)]),
                                   node.get("number_of_assignments", 0))
    found = memory_hints(nodes, ask.memory)
    return None if found is None else {r: listed(h) for r, h in found.items()}


def device_case(case: dict[str, Any]) -> dict[str, Any] | None:
    machine = case["machine"]
    result: dict[str, Any] = {}
    for resource, amount in case["request"].items():
        devices = machine["devices"].get(resource, [])
        taken = set((machine.get("allocated_to_others") or {}).get(resource, []))
        reusable_ids = set((case.get("reusable_devices") or {}).get(resource, []))
        registered: dict[frozenset[int], int] = {}
        free: dict[frozenset[int], int] = {}
        reusable: dict[frozenset[int], int] = {}
        for device in devices:
            numa = frozenset(device["numa"] or ())
            registered[numa] = registered.get(numa, 0) + 1
            if device["id"] in reusable_ids:
                reusable[numa] = reusable.get(numa, 0) + 1
            elif device["id"] not in taken:
                free[numa] = free.get(numa, 0) + 1
        found = device_hints(machine["numa_nodes"], DeviceState(registered, free), amount,
                             reusable)
        result[resource] = listed(found)
    return result


def sorted_expect(expected: Any) -> Any:
    if expected is None:
        return None
    if isinstance(expected, list):
        return sorted(expected, key=lambda h: (len(h["numa"] or []), h["numa"]))
    return {r: sorted_expect(h) for r, h in expected.items()}


@pytest.mark.parametrize("case", PROVIDERS, ids=ids(PROVIDERS))
def test_provider_case(case: dict[str, Any]) -> None:
    if readmission(case):
        pytest.skip("re-admission of a container that already holds resources: a new pod "
                    "never does")
    run = {"cpu": cpu_case, "memory": memory_case, "device": device_case}[case["provider"]]
    got = run(case)
    expected = sorted_expect(case["expect"])
    if case["provider"] == "cpu" and not expected:
        assert not got  # upstream treats nil and empty alike here
        return
    assert got == expected


def effective_pod(case: dict[str, Any]) -> PodShape:
    pod = case["pod"]

    def container(i: int, spec: dict[str, Any]) -> ContainerShape:
        requests = {r: (v * 1000 if r == "cpu" else v) for r, v in spec.items()
                    if r != "sidecar"}
        return ContainerShape(f"c{i}", requests, bool(spec.get("sidecar")))

    inits = tuple(container(i, c) for i, c in enumerate(pod["initContainers"]))
    apps = tuple(container(i, c) for i, c in enumerate(pod["containers"]))
    every = inits + apps
    guaranteed = all(c.requests.get("cpu", 1) > 0 for c in every)
    return PodShape("p", apps, inits, GUARANTEED if guaranteed else "Burstable")


@pytest.mark.parametrize("case", EFFECTIVE, ids=ids(EFFECTIVE))
def test_pod_effective_request(case: dict[str, Any]) -> None:
    ask = pod_effective_ask(effective_pod(case), Managers())
    expected = case["expect"]
    if "pod_guaranteed_cpus" in expected:
        assert ask.cpus == expected["pod_guaranteed_cpus"]
    else:
        assert dict(ask.memory) == expected["pod_requested"]
