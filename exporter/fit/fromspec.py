"""A pod object from the Kubernetes API as the admission model's :class:`PodShape` (SPEC 7.2.1).

Per container: ``cpu`` and memory types from the requests (defaulted from the limits, as the
API server does), device resources from the limits (the device manager reads limits); init
containers keep their order, a ``restartPolicy: Always`` one is a sidecar. The QoS class is
Kubernetes' (``GetPodQOS``: from pod-level resources when the pod sets them). Extended
resources the pod gets through DRA (``status.extendedResourceClaimStatus.requestMappings``) are
marked, so they are never aligned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..podspec import is_extended_resource, parse_quantity
from .pod import (
    BEST_EFFORT,
    BURSTABLE,
    CPU,
    GUARANTEED,
    ContainerShape,
    PodShape,
    is_memory_resource,
)

_COMPUTE = (CPU, "memory")


def _quantities(resources: Any, kind: str) -> dict[str, float]:
    amounts: dict[str, float] = {}
    values = (resources or {}).get(kind) if isinstance(resources, Mapping) else None
    for name, value in (values or {}).items():
        try:
            amounts[str(name)] = parse_quantity(value)
        except ValueError:
            continue
    return amounts


def qos_class(spec: Mapping[str, Any]) -> str:
    """Kubernetes' QoS class of a pod spec (``pkg/apis/core/v1/helper/qos``)."""
    pod_level = spec.get("resources")
    holders = [pod_level] if isinstance(pod_level, Mapping) and pod_level else [
        c.get("resources") for c in [*(spec.get("initContainers") or ()),
                                     *(spec.get("containers") or ())] if isinstance(c, Mapping)]
    if not holders:
        return BEST_EFFORT
    any_set, guaranteed = False, True
    for resources in holders:
        requests = _quantities(resources, "requests")
        limits = _quantities(resources, "limits")
        if any(r in requests or r in limits for r in _COMPUTE):
            any_set = True
        for name in _COMPUTE:
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return BEST_EFFORT
    return GUARANTEED if guaranteed else BURSTABLE


def _container(spec: Mapping[str, Any], index: int, sidecar: bool) -> ContainerShape:
    resources = spec.get("resources")
    requests = {**_quantities(resources, "limits"), **_quantities(resources, "requests")}
    limits = _quantities(resources, "limits")
    amounts: dict[str, int] = {}
    cpu = requests.get(CPU, 0)
    if cpu > 0:
        amounts[CPU] = round(cpu * 1000)
    for name, amount in requests.items():
        if is_memory_resource(name) and amount > 0:
            amounts[name] = int(amount)
    for name, amount in limits.items():
        if is_extended_resource(name) and not is_memory_resource(name) and amount >= 1:
            amounts[name] = int(amount)
    return ContainerShape(str(spec.get("name") or f"container-{index}"), amounts, sidecar)


def pod_shape(obj: Mapping[str, Any], name: str) -> PodShape:
    """The admission model's view of a pod object."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    inits = tuple(_container(c, i, c.get("restartPolicy") == "Always")
                  for i, c in enumerate(spec.get("initContainers") or ())
                  if isinstance(c, Mapping))
    apps = tuple(_container(c, i, False) for i, c in enumerate(spec.get("containers") or ())
                 if isinstance(c, Mapping))
    mappings = ((status.get("extendedResourceClaimStatus") or {}).get("requestMappings")
                or ()) if isinstance(status, Mapping) else ()
    dra = frozenset(str(m.get("resourceName")) for m in mappings
                    if isinstance(m, Mapping) and m.get("resourceName"))
    return PodShape(name, apps, inits, qos_class(spec), bool(spec.get("resources")), dra)
