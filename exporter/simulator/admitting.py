"""Admitting a pod into a running simulator as the kubelet would (``POST /pods``).

The decision and the placement come from :mod:`exporter.simulator.admission` (the kubelet's
Topology Manager and resource managers as pure functions), run on a view of the simulator's
node; an admitted pod's CPUs, memory and devices are then taken from the node and it is listed
like any other pod. A rejected pod holds nothing and is kept as the API server shows it: phase
``Failed``, ``status.reason`` the kubelet's admission reason, ``status.message``
``"Pod was rejected: "`` followed by the kubelet's message (``kubelet.go`` ``rejectPod``).
"""

from __future__ import annotations

from .admission import (
    AdmissionConfig,
    AdmissionNode,
    AdmissionResult,
    admit,
    node_from_spec,
    pod_from_spec,
    to_assignment,
)
from .allocator import NoFit, SimPod
from .pods import rejected_pod_object
from .profile import PodSpec, ProfileError
from .state import NodeState


def node_from_state(state: NodeState) -> AdmissionNode:
    """What the kubelet's managers know of the simulated node now: the listed pods' memory
    groups, and the free CPUs, memory and devices exactly as the simulator holds them (CPUs
    held by init containers included)."""
    pods = [p.assignment for p in state.listed_pods(active_only=True)]
    node = node_from_spec(state.spec, pods, unregistered=state.unregistered)
    node.free_cpus = set().union(*state.free_cpus.values()) if node.cpu_static else set()
    node.memory_free = dict(state.resources.free_memory)
    by_id = {d.device_id: d for d in state.devices}
    node.allocated_devices = {(by_id[d].resource, d) for d in by_id
                              if d not in state.resources.free_devices and by_id[d].healthy
                              and by_id[d].resource not in state.unregistered}
    node.allocated_devices |= {(d.resource, d.device_id) for p in state.pods.values()
                               if not p.released for d in p.devices}
    return node


def admit_pod(state: NodeState, pod: PodSpec,
              config: AdmissionConfig | None = None) -> AdmissionResult:
    """Admit ``pod`` into ``state`` under ``config`` (default: the state's own). An admitted
    pod is listed with what it got; a rejected one is remembered in ``state.rejected_pods``
    with the kubelet's reason and message. A pod of the same name replaces a rejected one;
    one already admitted is a ProfileError."""
    key = (pod.namespace, pod.name)
    if key in state.pods:
        raise ProfileError(f"pod {pod.namespace}/{pod.name} already exists")
    state.rejected_pods.pop(key, None)
    request = pod_from_spec(pod)
    before = node_from_state(state)
    result = admit(before, request, config or state.admission_config)
    if not result.admitted:
        state.rejected.append(f"{pod.namespace}/{pod.name}: {result.reason}")
        state.rejected_pods[key] = rejected_pod_object(
            pod, result.reason or "", state.spec.name, f"Pod was rejected: {result.message}")
        state.version += 1
        return result
    after = result.node
    sim = SimPod(spec=pod, assignment=to_assignment(request, result))
    taken_cpus = {c for a in result.allocations for c in a.cpus}
    sim.cpus.update(taken_cpus)
    for numa in state.free_cpus:
        state.free_cpus[numa] -= taken_cpus
    for (numa, memory_type), free in before.memory_free.items():
        used = free - after.memory_free.get((numa, memory_type), free)
        if used > 0:
            state.resources.free_memory[(numa, memory_type)] -= used
            sim.memory.append((numa, memory_type, used))
    taken_devices = {(d.resource, i) for a in result.allocations for d in a.devices
                     for i in d.device_ids}
    for device in state.devices:
        if (device.resource, device.device_id) in taken_devices:
            state.resources.free_devices.discard(device.device_id)
            sim.devices.append(device)
    # DRA claims are prepared after admission and never aligned (SPEC section 7.2.1); a
    # claim that cannot be served leaves the pod admitted, as the kubelet would, holding none
    try:
        claims = state.resources._allocate_claims(pod, sim)
    except NoFit:
        claims = {}
    if claims:
        containers = tuple(
            type(c)(c.name, c.cpu_ids, c.memory, c.devices,
                    tuple(d for name in spec.claims for d in claims.get(name, ())))
            for c, spec in zip(sim.assignment.containers,
                               [*pod.sidecars, *pod.containers], strict=True))
        sim.assignment = type(sim.assignment)(pod.namespace, pod.name, containers)
    state.pods[key] = sim
    state.version += 1
    return result
