"""What the kubelet's admission and the scheduler count in a pod spec: Kubernetes quantities,
extended-resource names, effective pod requests, exclusive requests, admission rejections, and
which extended-resource requests DRA serves.

Plain rules over pod JSON (``dict``), no I/O; shared by the fit answers, the Kubernetes-API view
and the simulator (each keeps its own logic on top). Mapping[str, int] and extended-resource names
follow Kubernetes' ``resource.Quantity`` and ``IsExtendedResourceName``, pod requests the
scheduler's ``resourcehelper.PodRequests``.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)"
                       r"|[eE]([+-]?\d+))?$")
_SUFFIX = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
           "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10),
           "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
           "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

Amounts = dict[str, float]  # extended resource name -> amount
N = TypeVar("N", int, float)



def parse_quantity(text: object) -> float:
    """A Kubernetes quantity (``4``, ``1k``, ``500m``, ``2Gi``, ``1e3``) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix, exponent = match.groups()
    try:
        scale = Decimal(10) ** int(exponent) if exponent else _SUFFIX[suffix or ""]
        return float(Decimal(number) * scale)
    except (InvalidOperation, OverflowError):
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from None


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: ``domain/name`` with a domain outside
    kubernetes.io, not prefixed ``requests.``, and a valid quota name once prefixed."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    parts = ("requests." + name).split("/")
    if len(parts) != 2:
        return False
    prefix, short = parts
    return (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))
            and len(short) <= 63 and bool(_QUALIFIED_NAME.match(short)))


def extended_amounts(resources: Mapping[str, object] | None) -> Amounts:
    """The extended resources of a ``{name: quantity}`` map; unparsable quantities skipped."""
    amounts = {}
    for name, quantity in (resources or {}).items():
        if is_extended_resource(name):
            try:
                amounts[name] = parse_quantity(quantity)
            except ValueError:
                log.debug("skipping %s: bad quantity %r", name, quantity)
    return amounts


def add_amounts(total: Amounts, more: Mapping[str, float]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _container_requests(container: dict[str, Any]) -> Amounts:
    return extended_amounts((container.get("resources") or {}).get("requests"))


def pod_requests(spec: dict[str, Any]) -> Amounts:
    """The pod's effective extended-resource requests, as the scheduler counts them
    (``resourcehelper.PodRequests``): app containers plus sidecars (restartable init
    containers), or a regular init container plus the sidecars started before it if that is
    more; plus the pod overhead."""
    total = held_at_once(spec, _container_requests)
    add_amounts(total, extended_amounts(spec.get("overhead")))
    return total


def held_at_once(spec: dict[str, Any],
                 amounts_of: Callable[[dict[str, Any]], Amounts]) -> Amounts:
    """What a pod holds at its peak, by the Kubernetes rule: app containers plus sidecars
    (restartable init containers), or a regular init container plus the sidecars started
    before it if that is more."""
    return _held_at_peak(
        (amounts_of(container) for container in spec.get("containers") or ()),
        ((amounts_of(container), container.get("restartPolicy") == "Always")
         for container in spec.get("initContainers") or ()))


def _held_at_peak(containers: Iterable[Mapping[str, N]],
                  init_containers: Iterable[tuple[Mapping[str, N], bool]]) -> dict[str, N]:
    """The one peak rule of :func:`held_at_once` and :func:`effective_requests`:
    ``init_containers`` in spec order, each with whether it is a sidecar."""
    total: dict[str, N] = {}
    for requests in containers:
        _add(total, requests)
    sidecars: dict[str, N] = {}
    peak: dict[str, N] = {}
    for requests, sidecar in init_containers:
        if sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            _raise(peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _raise(peak, running)
    _raise(total, peak)
    return total


# Admission reasons the kubelet gives a pod it rejects for exclusive resources: the Topology
# Manager (TopologyAffinityError), the CPU manager's full-pcpus-only option (SMTAlignmentError),
# a resource manager's failed allocation (UnexpectedAdmissionError), and the resource fit
# predicate, whose reason is "OutOf" + the resource name (pkg/kubelet/lifecycle/predicate.go).
ADMISSION_REASONS = ("TopologyAffinityError", "SMTAlignmentError", "UnexpectedAdmissionError",
                     "PodLevelResourcesIncompatible")


@dataclass(frozen=True, slots=True)
class Rejection:
    """A pod the kubelet rejected at admission, with the exclusive requests that mattered.

    ``requests``: whole exclusive CPUs (Guaranteed pods only), memory and hugepages in bytes
    (Guaranteed pods only; they count only where the memory manager assigns memory) and device
    resources, summed over the containers the kubelet admits together (app containers and
    sidecars; a regular init container's requests when larger).
    """

    uid: str
    reason: str
    message: str
    requests: tuple[tuple[str, int], ...]
    # the pod's spec and the status fields admission reads, for judging it container by
    # container (exporter.fit.from_pod_object)
    pod: Mapping[str, Any] = field(default_factory=dict, compare=False)


def is_admission_reason(reason: object) -> bool:
    """Whether a pod's ``status.reason`` is a kubelet rejection for exclusive resources."""
    if not isinstance(reason, str):
        return False
    if reason in ADMISSION_REASONS:
        return True
    resource = reason.removeprefix("OutOf")
    return resource != reason and (resource in ("cpu", "memory")
                                   or resource.startswith("hugepages-")
                                   or is_extended_resource(resource))


def rejection(obj: dict[str, Any]) -> Rejection | None:
    """The admission rejection of a pod object (phase Failed with an admission reason)."""
    status = obj.get("status") or {}
    reason = status.get("reason")
    if status.get("phase") != "Failed" or not is_admission_reason(reason):
        return None
    meta = obj.get("metadata") or {}
    kept = {"spec": obj.get("spec") or {},
            "status": {"extendedResourceClaimStatus":
                       status.get("extendedResourceClaimStatus") or {}}}
    return Rejection(str(meta.get("uid", "")), str(reason), str(status.get("message", "")),
                     exclusive_requests(obj.get("spec") or {}), kept)


def _quantities(container: dict[str, Any], kind: str) -> dict[str, float]:
    amounts: dict[str, float] = {}
    for name, value in ((container.get("resources") or {}).get(kind) or {}).items():
        try:
            amounts[str(name)] = parse_quantity(value)
        except ValueError:
            log.debug("skipping %s: bad quantity %r", name, value)
    return amounts


def _effective(container: dict[str, Any]) -> dict[str, float]:
    """Requests, defaulted from limits as the API server does."""
    return {**_quantities(container, "limits"), **_quantities(container, "requests")}


def is_guaranteed(spec: dict[str, Any]) -> bool:
    """Kubernetes' Guaranteed QoS: every container (init ones too) has CPU and memory limits,
    and its requests, where given, equal them."""
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    if not containers:
        return False
    for container in containers:
        limits = _quantities(container, "limits")
        requests = _quantities(container, "requests")
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return False
    return True


def _exclusive(container: dict[str, Any], guaranteed: bool) -> dict[str, float]:
    amounts = _effective(container)
    wanted: dict[str, float] = {}
    for name, amount in amounts.items():
        if name == "cpu":
            if guaranteed and amount == int(amount) and amount > 0:
                wanted[name] = amount
        elif name == "memory" or name.startswith("hugepages-"):
            if guaranteed and amount > 0:
                wanted[name] = amount
        elif is_extended_resource(name) and amount > 0:
            wanted[name] = amount
    return wanted


def exclusive_requests(spec: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """The pod's exclusive requests: app containers and sidecars together, or a regular init
    container with the sidecars started before it when that is more (the kubelet's rule for
    what a pod holds at once)."""
    guaranteed = is_guaranteed(spec)
    total = held_at_once(spec, lambda container: _exclusive(container, guaranteed))
    return tuple(sorted((name, int(amount)) for name, amount in total.items() if amount >= 1))


# ---- extended resources served by DRA (KEP-5004) --------------------------------------------
# When a DeviceClass names an extended resource (nvidia.com/gpu), the scheduler may satisfy a
# container's request for it with a ResourceClaim it creates for the pod
# (``<pod>-extended-resources-…``); the pod's ``status.extendedResourceClaimStatus
# .requestMappings`` then names each (container, resource) so served, and the devices reach the
# kubelet as DRA devices. Such a request is no device-plugin request: the Topology Manager
# never aligns it, and it is no use of a device plugin's resource.

def dra_served(obj: dict[str, Any]) -> set[tuple[str, str]]:
    """(container, resource) pairs of the pod whose extended resource DRA serves."""
    status = obj.get("status")
    claim_status = status.get("extendedResourceClaimStatus") if isinstance(status, dict) else None
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
    if not served or not isinstance(obj.get("spec"), dict):
        return obj
    pod = copy.copy(obj)
    spec = pod["spec"] = dict(obj["spec"])
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


def effective_requests(containers: Iterable[Mapping[str, int]],
                       init_containers: Iterable[tuple[Mapping[str, int], bool]],
                       pod_requests: Mapping[str, int] | None = None,
                       overhead: Mapping[str, int] | None = None) -> dict[str, int]:
    """``resourcehelper.PodRequests``: per resource the larger of app containers plus sidecars
    and the largest regular init container plus the sidecars started before it
    (``init_containers`` in spec order, each with whether it is a sidecar); pod-level requests
    instead for CPU and memory when set; plus the overhead."""
    total = _held_at_peak(containers, init_containers)
    for resource in ("cpu", "memory"):
        if pod_requests and resource in pod_requests:
            total[resource] = pod_requests[resource]
    _add(total, overhead or {})
    return total


def _add(total: dict[str, N], more: Mapping[str, N]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _raise(peak: dict[str, N], other: Mapping[str, N]) -> None:
    for name, amount in other.items():
        if amount > peak.get(name, 0):
            peak[name] = amount
