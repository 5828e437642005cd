"""Kubernetes objects as the API server returns them (JSON as dicts), built by hand: the few
kinds the exporter's Kubernetes-API view reads (Node, Pod, ResourceSlice, DeviceTaintRule) and
the ``Status`` a server answers errors with, so that the tests (on the real API server, or the
fake where it stays), the demo and the benchmarks spell them the same way.

:func:`resource_slices` gives the ResourceSlices a simulator profile's DRA drivers would
publish for the node (``resource.k8s.io/v1``: one slice per part of a pool,
``pool.generation`` and ``pool.resourceSliceCount`` telling which slices belong together); a
device's ``attributes`` and ``taints`` are the profile's, verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exporter.simulator.profile import NodeSpec

Obj = dict[str, Any]  # a Kubernetes object as JSON


def status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def node(name: str, capacity: dict[str, str], allocatable: dict[str, str] | None = None) -> Obj:
    base = {"cpu": "64", "memory": "263856064Ki", "pods": "110",
            "ephemeral-storage": "936484380Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"capacity": {**base, **capacity},
                       "allocatable": {**base, **(capacity if allocatable is None
                                                  else allocatable)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def container(name: str, requests: dict[str, str] | None = None,
              restart_policy: str | None = None) -> Obj:
    result: Obj = {"name": name, "image": f"registry.example.com/{name}:1.0",
              "resources": {"requests": dict(requests or {}), "limits": dict(requests or {})}}
    if restart_policy:
        result["restartPolicy"] = restart_policy
    return result


def pod(namespace: str, name: str, node_name: str, containers: Sequence[Obj],
        init_containers: Sequence[Obj] = (), phase: str = "Running",
        overhead: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"nodeName": node_name, "containers": list(containers), "restartPolicy": "Always"}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    return {"metadata": {"namespace": namespace, "name": name}, "spec": spec,
            "status": {"phase": phase}}


def resource_slice(name: str, node_name: str, driver: str, pool: str, devices: list[str],
                   generation: int = 1, slice_count: int = 1) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": pool, "generation": generation,
                              "resourceSliceCount": slice_count},
                     "devices": [{"name": d, "attributes": {"index": {"int": i}}}
                                 for i, d in enumerate(devices)]}}


def device_taint_rule(name: str, effect: str, driver: str = "", pool: str = "",
                      device: str = "", key: str = "example.com/taint") -> Obj:
    """A DeviceTaintRule putting a taint on the devices its selector names (KEP-5055)."""
    selector = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", device)) if v}
    return {"metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": key, "effect": effect}}}


def resource_slices(spec: NodeSpec, parts: int = 1, generation: int = 1) -> list[dict[str, Any]]:
    """Each pool split over ``parts`` slices (as drivers split big pools), named
    ``<node>-<driver>-<pool index>-<part>``."""
    slices = []
    for index, pool in enumerate(spec.dra_pools):
        for part in range(parts):
            devices = [{"name": name, **pool.published.get(name, {})}
                       for name in pool.devices[part::parts]]
            slices.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{spec.name}-{pool.driver}-{index}-{part}"},
                "spec": {"driver": pool.driver, "nodeName": spec.name,
                         "pool": {"name": pool.pool, "generation": generation,
                                  "resourceSliceCount": parts},
                         "devices": devices}})
    return slices
