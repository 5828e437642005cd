"""The kubelet's own unit-test tables, run against the simulator's admission model.

``tests/support/kubelet_cases.yaml`` holds cases transcribed from kubernetes/kubernetes
(``pkg/kubelet/cm/topologymanager/policy*_test.go``, ``cpumanager/topology_hints_test.go``,
``cpumanager/policy_static_test.go``, ``memorymanager/policy_static_test.go``,
``devicemanager/topology_hints_test.go``) and kubernetes-sigs/scheduler-plugins
(``pkg/noderesourcetopology/filter_test.go``), each with its ``source`` (repository, path,
commit, test function, case name) and the verdict the upstream test asserts.

Format: ``merge`` cases give per provider ``null``/``{}`` (no hints map) or resource ->
``null`` (don't care) | ``[]`` (unsatisfiable) | ``[{numa, preferred}]``, and the expected best
hint (``expect.numa`` lists all nodes for "any node"). ``hints`` cases give a machine and a
request for one provider and the hints expected (``null``: don't care). ``admission`` cases
give a node, a pod and the verdict. Cases about re-admission after a kubelet restart (hints
regenerated from an existing assignment) are out of the model and skipped by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.simulator.admission import (
    AdmissionConfig,
    AdmissionNode,
    ContainerRequest,
    Device,
    Hint,
    PodRequest,
    admit,
    cpu_hints,
    device_hints,
    effective_request,
    filter_single_numa_hints,
    guaranteed_cpus,
    memory_hints,
    memory_request,
    merge,
)

CASES = yaml.safe_load(
    (Path(__file__).parents[2] / "support" / "kubelet_cases.yaml").read_text())


def _ids(section: str, predicate: Any = lambda case: True) -> list[Any]:
    return [pytest.param(c, id=c["id"]) for c in CASES[section] if predicate(c)]


def _hint(data: dict[str, Any]) -> Hint:
    numa = data["numa"]
    return Hint(None if numa is None else frozenset(numa), bool(data["preferred"]))


def _hints(data: list[dict[str, Any]] | None) -> list[Hint] | None:
    return None if data is None else [_hint(h) for h in data]


def _bare_node(numa_ids: list[int], distances: list[list[int]] | None = None) -> AdmissionNode:
    rows = {}
    if distances:
        rows = {a: {b: distances[i][j] for j, b in enumerate(numa_ids)}
                for i, a in enumerate(numa_ids)}
    return AdmissionNode(numa_ids=tuple(numa_ids), cpu_numa={}, siblings={},
                         reserved_cpus=frozenset(), free_cpus=set(), distances=rows)


def _key(hints: list[Hint] | None) -> list[tuple[tuple[int, ...] | None, bool]] | None:
    if hints is None:
        return None
    return sorted((((None if h.affinity is None else tuple(sorted(h.affinity))), h.preferred)
                   for h in hints), key=lambda k: (k[0] is not None, k[0] or (), k[1]))


# ---- merge ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", _ids("merge", lambda c: "kind" not in c))
def test_merge(case: dict[str, Any]) -> None:
    options = case.get("options") or {}
    node = _bare_node(case["numa_nodes"], options.get("distances"))
    config = AdmissionConfig(case["policy"],
                             prefer_closest_numa_nodes=bool(options.get("prefer-closest-numa-nodes")))
    providers = []
    for provider in case["providers"]:
        if provider is None:
            providers.append(None)
        else:
            providers.append({resource: _hints(hints) for resource, hints in provider.items()})
    best, admitted = merge(node, providers, config)
    expected = case["expect"]
    numa = best.affinity if best.affinity is not None else frozenset(case["numa_nodes"])
    assert sorted(numa) == sorted(expected["numa"])
    assert best.preferred is expected["preferred"]
    assert admitted is expected["admit"]


@pytest.mark.parametrize("case", _ids("merge", lambda c: c.get("kind") == "can_admit_only"))
def test_can_admit(case: dict[str, Any]) -> None:
    # canAdmitPodResult alone: a provider giving exactly the merged hint yields it back
    node = _bare_node(case["numa_nodes"])
    hint = _hint(case["merged_hint"])
    resource_hints = [hint] if hint.affinity is not None or not hint.preferred else None
    if hint.affinity is None and not hint.preferred:
        resource_hints = []  # the only way a provider yields {nil, false}
    _, admitted = merge(node, [{"r": resource_hints}], AdmissionConfig(case["policy"]))
    assert admitted is case["expect"]["admit"]


@pytest.mark.parametrize("case", _ids("merge",
                                      lambda c: c.get("kind") == "filter_single_numa_hints"))
def test_filter_single_numa_hints(case: dict[str, Any]) -> None:
    given = [[_hint(h) for h in hints] for hints in case["resources_hints"]]
    filtered = filter_single_numa_hints(given)
    expected = [_hints(hints) or [] for hints in case["expect"]["filtered"]]
    assert [_key(f) for f in filtered] == [_key(e) for e in expected]


# ---- hint providers ---------------------------------------------------------------------------

def _cpu_machine(machine: dict[str, Any], free: list[int]) -> AdmissionNode:
    numa = {int(n): spec for n, spec in machine["numa"].items()}
    cpu_numa = {cpu: n for n, spec in numa.items() for cpu in spec["cpus"]}
    siblings = {cpu: frozenset(group) for spec in numa.values()
                for group in spec.get("smt_siblings", []) for cpu in group}
    reserved = frozenset(machine.get("reserved_cpus") or ())
    return AdmissionNode(numa_ids=tuple(sorted(numa)), cpu_numa=cpu_numa, siblings=siblings,
                         reserved_cpus=reserved, free_cpus=set(free) - reserved)


def _is_readmission(case: dict[str, Any]) -> bool:
    state = case.get("state", {}).get("assignments") or {}
    machine = case.get("machine", {})
    return bool(state.get("this_container")) or bool(
        machine.get("allocated_to_this_container")) or "re-admission" in case.get("note", "") \
        or "readmission" in case["id"]


@pytest.mark.parametrize("case", _ids("hints", lambda c: c.get("provider") == "cpu"
                                      and c.get("kind") is None))
def test_cpu_hints(case: dict[str, Any]) -> None:
    if _is_readmission(case):
        pytest.skip("re-admission of a container that already holds CPUs is not modelled")
    node = _cpu_machine(case["machine"], case["state"]["free_cpus"])
    hints = cpu_hints(node, case["request"]["cpu"], set(case.get("reusable_cpus") or ()))
    assert _key(hints) == _key(_hints(case["expect"]))


@pytest.mark.parametrize("case", _ids("hints", lambda c: c.get("provider") == "device"))
def test_device_hints(case: dict[str, Any]) -> None:
    if _is_readmission(case):
        pytest.skip("re-admission of a container that already holds devices is not modelled")
    machine = case["machine"]
    node = _bare_node(machine["numa_nodes"])
    node.devices = {resource: [Device(d["id"], None if d["numa"] is None else tuple(d["numa"]))
                               for d in devices]
                    for resource, devices in machine["devices"].items()}
    node.allocated_devices = {(resource, d) for resource, ids in
                              (machine.get("allocated_to_others") or {}).items() for d in ids}
    reusable = case.get("reusable_devices") or {}
    found = {resource: device_hints(node, resource, count, set(reusable.get(resource, ())))
             for resource, count in case["request"].items()}
    expected = case["expect"]
    assert {r: _key(h) for r, h in found.items()} == \
        {r: _key(_hints(h)) for r, h in expected.items()}


@pytest.mark.parametrize("case", _ids("hints", lambda c: c.get("provider") == "memory"
                                      and c.get("kind") is None))
def test_memory_hints(case: dict[str, Any]) -> None:
    if _is_readmission(case):
        pytest.skip("re-admission of a container that already holds memory is not modelled")
    request = case["request"]
    asked = {t: v for t, v in request.items() if t == "memory" or t.startswith("hugepages-")}
    container = ContainerRequest("c", request.get("cpu_millis", 0), asked)
    pod = PodRequest("ns", "p", [container], qos=request["qos"])
    wanted = memory_request(pod, container, AdmissionConfig())
    if case["expect"] is None:
        assert wanted == {}  # not Guaranteed: the provider gives no hints at all
        return
    numa = {int(n): spec for n, spec in case["machine"]["numa"].items()}
    node = _bare_node(sorted(numa))
    for n, spec in numa.items():
        for memory_type, amounts in spec.items():
            if isinstance(amounts, dict) and "allocatable" in amounts:
                node.memory_allocatable[(n, memory_type)] = amounts["allocatable"]
                node.memory_free[(n, memory_type)] = amounts["free"]
        node.memory_cells[n] = frozenset(spec["group"])
        node.memory_assignments[n] = spec["number_of_assignments"]
    found = memory_hints(node, wanted, {})
    assert {t: _key(h) for t, h in found.items()} == \
        {t: _key(_hints(h)) for t, h in case["expect"].items()}


@pytest.mark.parametrize("case", _ids("hints", lambda c: c.get("kind") == "pod_effective_request"))
def test_pod_effective_request(case: dict[str, Any]) -> None:
    pod = case["pod"]
    inits, apps = pod["initContainers"], pod["containers"]
    if case["provider"] == "cpu":
        # a container with cpu 0 makes the pod not Guaranteed (request == limit > 0 otherwise)
        qos = "Guaranteed" if all(c["cpu"] > 0 for c in (*inits, *apps)) else "Burstable"
        request = PodRequest("ns", "p", [ContainerRequest("a", c["cpu"] * 1000) for c in apps],
                             [ContainerRequest("i", c["cpu"] * 1000, sidecar=c.get("sidecar",
                                                                                   False))
                              for c in inits], qos=qos)
        config = AdmissionConfig()
        found = effective_request(
            [(guaranteed_cpus(request, c, config), c.sidecar) for c in request.init_containers],
            [guaranteed_cpus(request, c, config) for c in request.containers])
        assert found == case["expect"]["pod_guaranteed_cpus"]
    else:
        expected = case["expect"]["pod_requested"]
        for memory_type, size in expected.items():
            found = effective_request(
                [(c.get(memory_type, 0), c.get("sidecar", False)) for c in inits],
                [c.get(memory_type, 0) for c in apps])
            assert found == size


# ---- admission --------------------------------------------------------------------------------

def _cpumanager_node(node: dict[str, Any]) -> AdmissionNode:
    machine = {"numa": node["numa"], "reserved_cpus": node.get("reserved_cpus") or []}
    others = {c for cpus in (node.get("assigned_to_other_containers") or {}).values()
              for c in cpus}
    return _cpu_machine(machine, [c for c in node["free_cpus_incl_reserved"] if c not in others])


def _nrt_node(node: dict[str, Any]) -> AdmissionNode:
    """A NodeResourceTopology zone list as a kubelet node: zone CPUs as CPU ids (the first
    ``available`` free), memory types as allocatable/free bytes, other resources as devices of
    that zone (the first ``available`` healthy and free), node-level-only resources as
    devices without topology."""
    zones = {int(n): spec for n, spec in node["numa"].items()}
    result = _bare_node(sorted(zones))
    next_cpu = 0
    for n, spec in sorted(zones.items()):
        for resource, amounts in spec.items():
            capacity, available = amounts["capacity"], amounts["available"]
            if resource == "cpu":
                cpus = list(range(next_cpu, next_cpu + capacity))
                next_cpu += capacity
                result.cpu_numa.update(dict.fromkeys(cpus, n))
                result.free_cpus.update(cpus[:available])
            elif resource == "memory" or resource.startswith("hugepages-"):
                result.memory_allocatable[(n, resource)] = capacity
                result.memory_free[(n, resource)] = available
            else:
                devices = result.devices.setdefault(resource, [])
                for index in range(capacity):
                    device_id = f"{resource}-{n}-{index}"
                    devices.append(Device(device_id, (n,)))
                    if index >= available:
                        result.allocated_devices.add((resource, device_id))
    result.siblings = {cpu: frozenset({cpu}) for cpu in result.cpu_numa}
    for resource, count in (node.get("node_level_only") or {}).items():
        result.devices[resource] = [Device(f"{resource}-{i}", None) for i in range(count)]
    return result


def _pod(pod: dict[str, Any]) -> PodRequest:
    def container(data: dict[str, Any], sidecar: bool = False) -> ContainerRequest:
        requests = data.get("requests", {})
        cpu = requests.get("cpu", 0)
        millis = int(cpu[:-1]) if isinstance(cpu, str) and cpu.endswith("m") else int(
            float(cpu) * 1000)
        memory = {k: int(v) for k, v in requests.items()
                  if k == "memory" or k.startswith("hugepages-")}
        devices = {k: int(v) for k, v in requests.items()
                   if k not in memory and k not in ("cpu", "ephemeral-storage")}
        return ContainerRequest(data.get("name", "c"), millis, memory, devices, sidecar)

    return PodRequest("ns", "p", [container(c) for c in pod["containers"]],
                      [container(c, c.get("restartPolicy") == "Always")
                       for c in pod.get("initContainers", [])], qos=pod["qos"])


@pytest.mark.parametrize("case", _ids("admission"))
def test_admission(case: dict[str, Any]) -> None:
    options = case.get("options") or {}
    config = AdmissionConfig(case["policy"], case["scope"],
                             full_pcpus_only=bool(options.get("full-pcpus-only")))
    build = _cpumanager_node if "cpumanager" in case["id"] else _nrt_node
    node = build(case["node"])
    result = admit(node, _pod(case["pod"]), config)
    expected = case["expect"]
    assert (result.admitted, result.reason) == (expected["admit"], expected["reason"]), \
        result.message
    if expected.get("numa_all_containers"):
        assert {numa for _, numa in result.placements} == {
            frozenset(expected["numa_all_containers"])}
    if expected.get("cpus") is not None:
        assert sorted(c for a in result.allocations for c in a.cpus) == expected["cpus"]
