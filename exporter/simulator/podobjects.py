"""Simulated pods as the Kubernetes API server shows them (``v1.Pod`` objects as JSON).

Admission, the Pods API and the rejected-pod records read these (:func:`pod_object`, and
:func:`rejected_pod_object` for a pod the kubelet refused): the spec's requests and
limits as the pod was written (a Guaranteed pod's requests equal its limits; a Burstable pod
requests CPU and memory without limits; device-plugin resources are in both, as the API
requires for extended resources), and the status the kubelet posts. An extended resource the
scheduler served through DRA (KEP-5004: a claim with ``extended_resource``) is in the spec as
written (``nvidia.com/gpu: 1``) and named in ``status.extendedResourceClaimStatus``, as the
scheduler records it; its devices reach the kubelet as the claim's DRA devices.
"""

from __future__ import annotations

import uuid
from typing import Any

from .node.podmaker import _ADMISSION_MESSAGES
from .profile import ContainerSpec, PodSpec

# A Guaranteed container must name a memory limit; a profile container without one has this.
DEFAULT_MEMORY = 128 << 20


def _cpu(spec: ContainerSpec) -> str | None:
    if spec.cpu_millis <= 0:
        return None
    if spec.cpu_millis % 1000 == 0:
        return str(spec.cpu_millis // 1000)
    return f"{spec.cpu_millis}m"


def _resources(pod: PodSpec, spec: ContainerSpec) -> dict[str, dict[str, str]]:
    compute: dict[str, str] = {}
    cpu = _cpu(spec)
    if cpu is not None:
        compute["cpu"] = cpu
    # a pod with pod-level resources is Guaranteed by them: its containers need no limits
    default = DEFAULT_MEMORY if pod.guaranteed and not pod.uses_pod_level else 0
    memory = spec.memory.get("memory", default)
    if memory:
        compute["memory"] = str(memory)
    for memory_type, size in spec.memory.items():
        if memory_type != "memory":
            compute[memory_type] = str(size)
    devices = {resource: str(count) for resource, count in spec.devices.items()}
    for claim in pod.claims:
        if claim.extended_resource and claim.name in spec.claims:
            devices[claim.extended_resource] = str(claim.count)
    if pod.guaranteed:
        return {"requests": {**compute, **devices}, "limits": {**compute, **devices}}
    resources: dict[str, dict[str, str]] = {}
    if compute or devices:
        resources["requests"] = {**compute, **devices}
    if devices:
        resources["limits"] = dict(devices)
    return resources


def pod_object(pod: PodSpec, node_name: str, phase: str, reason: str | None = None,
               message: str | None = None, uid: str | None = None) -> dict[str, Any]:
    """``pod`` bound to ``node_name`` in ``phase``; sidecars are init containers with
    ``restartPolicy: Always``, listed before the regular init containers."""

    def container(spec: ContainerSpec) -> dict[str, Any]:
        return {"name": spec.name, "resources": _resources(pod, spec)}

    status: dict[str, Any] = {"phase": phase}
    served = _served_by_dra(pod)
    if served:
        status["extendedResourceClaimStatus"] = served
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    spec: dict[str, Any] = {"nodeName": node_name,
                            "containers": [container(c) for c in pod.containers],
                            "initContainers": [*({**container(c), "restartPolicy": "Always"}
                                                 for c in pod.sidecars),
                                               *(container(c) for c in pod.init_containers)]}
    if pod.uses_pod_level:
        spec["resources"] = _pod_resources(pod)
    return {
        "metadata": {"namespace": pod.namespace, "name": pod.name,
                     "uid": uid or str(uuid.uuid4())},
        "spec": spec,
        "status": status,
    }


def _pod_resources(pod: PodSpec) -> dict[str, dict[str, str]]:
    """``spec.resources`` of a pod with pod-level resources: its containers' CPUs and memory
    plus what the pod has beyond them (``pod_level``), requests equal to limits."""
    everything = [*pod.sidecars, *pod.containers]
    totals = {"cpu": f"{sum(c.cpu_millis for c in everything) + 1000 * pod.pod_cpus}m"}
    for memory_type in sorted({"memory", *pod.pod_memory}):
        size = sum(c.memory.get(memory_type, 0) for c in everything)
        size += pod.pod_memory.get(memory_type, 0)
        totals[memory_type] = str(size)
    return {"requests": dict(totals), "limits": dict(totals)}


def _served_by_dra(pod: PodSpec) -> dict[str, Any] | None:
    """``status.extendedResourceClaimStatus`` of a pod whose extended resources a claim
    serves: the claim's name and, per container and resource, the claim's request."""
    mappings: list[dict[str, str]] = []
    claim_name = None
    for index, container in enumerate(pod.containers):
        for claim in pod.claims:
            if claim.extended_resource and claim.name in container.claims:
                claim_name = f"{pod.name}-{claim.name}"
                mappings.append({"containerName": container.name,
                                 "resourceName": claim.extended_resource,
                                 "requestName": f"container-{index}-request-{len(mappings)}"})
    if not mappings:
        return None
    return {"resourceClaimName": claim_name, "requestMappings": mappings}


def rejected_pod_object(pod: PodSpec, reason: str, node_name: str,
                        message: str | None = None) -> dict[str, object]:
    """The pod as the API server shows it after the kubelet rejected it at admission:
    ``status.phase`` Failed, ``status.reason`` the admission reason, ``status.message`` the
    kubelet's (``"Pod was rejected: "`` and the reason's message)."""
    return pod_object(pod, node_name, "Failed", reason,
                      message or _ADMISSION_MESSAGES.get(reason, "Pod was rejected"))
