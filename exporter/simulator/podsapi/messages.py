"""Pods as the kubelet's local Pods API writes them: ``v1.Pod`` protobuf messages built from the
simulator's pod objects, and the view of a pod the kubelet has (``kubelet_view``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._proto.k8s.api.core.v1 import generated_pb2 as core
from ...podspec import is_guaranteed

Obj = dict[str, Any]


def _quantities(target: Any, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        target[name].string = str(value)


def _resources(target: Any, resources: Mapping[str, Any]) -> None:
    _quantities(target.limits, resources.get("limits") or {})
    _quantities(target.requests, resources.get("requests") or {})


def _container(target: Any, container: Mapping[str, Any]) -> None:
    target.name = container.get("name", "")
    if container.get("restartPolicy"):
        target.restartPolicy = container["restartPolicy"]
    if "resources" in container:
        target.resources.SetInParent()
        _resources(target.resources, container["resources"])


def pod_message(obj: Mapping[str, Any]) -> Any:
    """A pod object (API JSON) as ``v1.Pod``, the fields the exporter reads."""
    pod = core.Pod()
    meta, spec, status = (obj.get(part) or {} for part in ("metadata", "spec", "status"))
    for name in ("name", "namespace", "uid"):
        if meta.get(name):
            setattr(pod.metadata, name, meta[name])
    if spec.get("nodeName"):
        pod.spec.nodeName = spec["nodeName"]
    for container in spec.get("containers") or ():
        _container(pod.spec.containers.add(), container)
    for container in spec.get("initContainers") or ():
        _container(pod.spec.initContainers.add(), container)
    _quantities(pod.spec.overhead, spec.get("overhead") or {})
    if "resources" in spec:
        pod.spec.resources.SetInParent()
        _resources(pod.spec.resources, spec["resources"])
    for name in ("phase", "reason", "message", "qosClass"):
        if status.get(name):
            setattr(pod.status, name, status[name])
    return pod


def _qos_class(spec: Mapping[str, Any]) -> str:
    """Kubernetes' QoS class, from the containers (``v1qos.GetPodQOS``)."""
    if is_guaranteed(dict(spec)):
        return "Guaranteed"
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            if {"cpu", "memory"} & set(resources.get(part) or {}):
                return "Burstable"
    return "BestEffort"


def kubelet_view(obj: Obj) -> Obj:
    """A pod as the kubelet's Pods API shows it: the status is the kubelet's own (QoS class
    set, no ``extendedResourceClaimStatus``)."""
    status = {k: v for k, v in (obj.get("status") or {}).items()
              if k != "extendedResourceClaimStatus"}
    status["qosClass"] = _qos_class(obj.get("spec") or {})
    return {**obj, "status": status}

