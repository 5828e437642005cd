"""Simulated pods as the Kubernetes API server shows them (``v1.Pod`` objects as JSON).

The demo's small API server and the rejected-pod records read these: the spec's requests and
limits as the pod was written (a Guaranteed pod's requests equal its limits; a Burstable pod
requests CPU and memory without limits; device-plugin resources are in both, as the API
requires for extended resources), and the status the kubelet posts.
"""

from __future__ import annotations

import uuid
from typing import Any

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
    memory = spec.memory.get("memory", DEFAULT_MEMORY if pod.guaranteed else 0)
    if memory:
        compute["memory"] = str(memory)
    for memory_type, size in spec.memory.items():
        if memory_type != "memory":
            compute[memory_type] = str(size)
    devices = {resource: str(count) for resource, count in spec.devices.items()}
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
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {
        "metadata": {"namespace": pod.namespace, "name": pod.name,
                     "uid": uid or str(uuid.uuid4())},
        "spec": {"nodeName": node_name,
                 "containers": [container(c) for c in pod.containers],
                 "initContainers": [*({**container(c), "restartPolicy": "Always"}
                                      for c in pod.sidecars),
                                    *(container(c) for c in pod.init_containers)]},
        "status": status,
    }
