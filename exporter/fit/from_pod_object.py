"""A pod object from the Kubernetes API as the admission model's :class:`PodShape` (SPEC 7.2.1).

The pod is read as pod context first (:func:`exporter.podcontext.pod_context`: requests
defaulted from the limits as the API server does, the QoS class as ``GetPodQOS`` computes it,
sidecars from ``restartPolicy: Always``); then per container ``cpu`` and memory types from the
requests and device resources from the limits (the device manager reads limits). Extended
resources the pod gets through DRA (``status.extendedResourceClaimStatus.requestMappings``)
are marked: the device manager allocates none of them, though it still gives hints for them
where a plugin registers the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..podcontext import ContainerContext, PodContext, pod_context
from ..podspec import is_extended_resource
from .kubelet.podshape import CPU, ContainerShape, PodShape, is_memory_resource


def _container(container: ContainerContext) -> ContainerShape:
    amounts: dict[str, int] = {}
    if container.requests.get(CPU, 0) > 0:
        amounts[CPU] = container.requests[CPU]
    for name, amount in container.requests.items():
        if is_memory_resource(name) and amount > 0:
            amounts[name] = amount
    for name, amount in container.limits.items():
        if is_extended_resource(name) and not is_memory_resource(name) and amount >= 1:
            amounts[name] = amount
    return ContainerShape(container.name, amounts, container.sidecar)


def shape_of(pod: PodContext, name: str) -> PodShape:
    """The admission model's view of a pod's context."""
    return PodShape(name, tuple(_container(c) for c in pod.containers),
                    tuple(_container(c) for c in pod.init_containers), pod.qos,
                    pod.pod_level_resources, frozenset(r for _, r in pod.dra_served),
                    dict(pod.pod_requests), dict(pod.overhead))


def pod_shape(obj: Mapping[str, Any], name: str) -> PodShape:
    """The admission model's view of a pod object."""
    return shape_of(pod_context(obj), name)
