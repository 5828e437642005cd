"""Extended resources served by DRA instead of a device plugin (KEP-5004), read from a pod.

When a DeviceClass names an extended resource (``nvidia.com/gpu``), the scheduler may satisfy a
container's request for it with a ResourceClaim it creates for the pod (``<pod>-extended-
resources-…``); the pod's ``status.extendedResourceClaimStatus.requestMappings`` then names
each (container, resource) so served, and the devices come to the kubelet as DRA devices. Such
a request is not a device-plugin request: it must count neither in the extended-resource
requests nor as use of a device plugin's resource. Pure, no I/O.
"""

from __future__ import annotations

import copy
from typing import Any


def dra_served(obj: dict[str, Any]) -> set[tuple[str, str]]:
    """(container, resource) pairs of the pod whose extended resource DRA serves."""
    status = obj.get("status") or {}
    claim_status = status.get("extendedResourceClaimStatus") or {}
    mappings = claim_status.get("requestMappings") if isinstance(claim_status, dict) else None
    served = set()
    for mapping in mappings if isinstance(mappings, list) else ():
        if isinstance(mapping, dict):
            container, resource = mapping.get("containerName"), mapping.get("resourceName")
            if isinstance(container, str) and isinstance(resource, str):
                served.add((container, resource))
    return served


def without_dra_served(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod with the requests and limits DRA serves taken out of its containers (the same
    object when there are none), so what remains is what device plugins serve."""
    served = dra_served(obj)
    if not served:
        return obj
    pod = copy.copy(obj)
    spec = pod["spec"] = dict(obj.get("spec") or {})
    for kind in ("containers", "initContainers"):
        containers = []
        for container in spec.get(kind) or ():
            name = container.get("name") if isinstance(container, dict) else None
            names = {resource for who, resource in served if who == name}
            if names:
                resources = dict(container.get("resources") or {})
                for part in ("requests", "limits"):
                    if isinstance(resources.get(part), dict):
                        resources[part] = {k: v for k, v in resources[part].items()
                                           if k not in names}
                container = {**container, "resources": resources}
            containers.append(container)
        if kind in spec:
            spec[kind] = containers
    return pod
