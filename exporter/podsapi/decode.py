"""A pod from the Pods API (``v1.Pod#Marshal()`` bytes) as the Kubernetes API's JSON shows it.

The kubelet sends each pod as the plain protobuf encoding of ``v1.Pod`` (``pods/server.go``
calls ``pod.Marshal()``; there is no ``k8s\\0`` envelope, which only the API server's protobuf
serializer adds). The subset of core/v1 compiled into ``exporter._proto.k8s`` reads the fields
the exporter uses; everything else in the bytes is skipped. The result has the shape of the
API's JSON for those fields (camelCase names, quantities as strings, absent when unset), so the
rules of :mod:`exporter.podspec` and the fit engine read it exactly as they read a pod from the
Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from .._proto.k8s.api.core.v1 import generated_pb2 as core

Obj = dict[str, Any]


class PodDecodeError(ValueError):
    """Bytes that are not a ``v1.Pod``."""


def decode_pod(raw: bytes) -> Obj:
    """The pod in ``raw`` as API JSON (the fields the exporter reads)."""
    try:
        pod = core.Pod.FromString(raw)
    except DecodeError as error:
        raise PodDecodeError(f"not a v1.Pod: {error}") from None
    return {"metadata": _metadata(pod.metadata), "spec": _spec(pod.spec),
            "status": _status(pod.status)}


def _present(message: Any, names: tuple[str, ...]) -> Obj:
    """The string fields of ``names`` that are set and not empty, as JSON omits the rest."""
    return {name: getattr(message, name) for name in names if getattr(message, name)}


def _metadata(meta: Any) -> Obj:
    return _present(meta, ("name", "namespace", "uid"))


def _quantities(values: Mapping[str, Any]) -> dict[str, str]:
    return {name: quantity.string for name, quantity in values.items()}


def _resources(resources: Any) -> Obj:
    out: Obj = {}
    if resources.limits:
        out["limits"] = _quantities(resources.limits)
    if resources.requests:
        out["requests"] = _quantities(resources.requests)
    return out


def _container(container: Any) -> Obj:
    out = _present(container, ("name", "restartPolicy"))
    if container.HasField("resources"):
        out["resources"] = _resources(container.resources)
    return out


def _spec(spec: Any) -> Obj:
    out = _present(spec, ("nodeName",))
    out["containers"] = [_container(c) for c in spec.containers]
    if spec.initContainers:
        out["initContainers"] = [_container(c) for c in spec.initContainers]
    if spec.overhead:
        out["overhead"] = _quantities(spec.overhead)
    if spec.HasField("resources"):
        out["resources"] = _resources(spec.resources)
    return out


def _status(status: Any) -> Obj:
    out = _present(status, ("phase", "reason", "message", "qosClass"))
    if status.HasField("extendedResourceClaimStatus"):
        claim = status.extendedResourceClaimStatus
        out["extendedResourceClaimStatus"] = {
            **_present(claim, ("resourceClaimName",)),
            "requestMappings": [_present(m, ("containerName", "resourceName", "requestName"))
                                for m in claim.requestMappings]}
    return out
