"""Pod context: what the kubelet knows of the pods on its node that ``List`` does not carry.

The fit answers need, per pod, its QoS class, its init containers and sidecars, each
container's requests and limits, pod-level resources, phase and admission rejection (SPEC 7.5,
8): the resource-fit predicate counts every active pod's requests, Burstable ones included; a
rejected pod holds nothing the next admission does not free; the state files are matched to
pods by UID. Two sources give it, neither importing the other: the Kubernetes-API view
(``--kube-api``, :mod:`exporter.kubeapi`) and the kubelet's local Pods API. Both build these
records from a ``v1.Pod`` object (:func:`pod_context`) and hand the fit answers one
:class:`NodeContext`.

Quantities are integers: ``cpu`` in millicores, memory and ``hugepages-*`` and
``ephemeral-storage`` in bytes, every other resource in units (rounded up, as the scheduler's
``Value()``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import CpuRequests
from .podspec import dra_served, effective_requests, is_admission_reason, parse_quantity

GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
TERMINAL_PHASES = ("Succeeded", "Failed")
CPU, MEMORY = "cpu", "memory"
Quantities = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class ContainerContext:
    """One container: requests (defaulted from limits, as the API server does) and limits."""

    name: str
    requests: Quantities = field(default_factory=dict)
    limits: Quantities = field(default_factory=dict)
    sidecar: bool = False  # an init container with restartPolicy Always


@dataclass(frozen=True, slots=True)
class PodContext:
    """One pod bound to this node, as admission sees it."""

    namespace: str
    name: str
    uid: str
    qos: str
    phase: str = ""
    init_containers: tuple[ContainerContext, ...] = ()
    containers: tuple[ContainerContext, ...] = ()
    pod_requests: Quantities = field(default_factory=dict)  # .spec.resources, when set
    pod_limits: Quantities = field(default_factory=dict)
    overhead: Quantities = field(default_factory=dict)
    # (container, resource) pairs whose extended resource DRA serves (KEP-5004)
    dra_served: frozenset[tuple[str, str]] = frozenset()
    reason: str = ""  # status.reason, e.g. an admission rejection
    message: str = ""

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def rejected(self) -> bool:
        """Rejected at admission for resources (phase Failed with such a reason)."""
        return self.phase == "Failed" and is_admission_reason(self.reason)

    @property
    def pod_level_resources(self) -> bool:
        return bool(self.pod_requests or self.pod_limits)

    def cpu_requests(self) -> CpuRequests:
        """The CPU requests of the app containers and sidecars, and the pod's, as stated: a
        DRA CPU driver's grouped CPUs are counted by them (SPEC section 11)."""
        containers = tuple((c.name, c.requests.get(CPU))
                           for c in (*(i for i in self.init_containers if i.sidecar),
                                     *self.containers))
        return CpuRequests(containers, self.pod_requests.get(CPU))

    def requests(self) -> dict[str, int]:
        """What the scheduler and the kubelet's resource-fit predicate count for this pod."""
        return effective_requests([c.requests for c in self.containers],
                                  [(c.requests, c.sidecar) for c in self.init_containers],
                                  self.pod_requests, self.overhead)


@dataclass(frozen=True, slots=True)
class NodeContext:
    """Every pod the source knows on this node, and the Node's allocatable when the source
    has it (``None`` from a source without the Node object)."""

    source: str
    pods: tuple[PodContext, ...] = ()
    allocatable: Quantities | None = None
    # the Node's status.nodeInfo.kubeletVersion ("v1.37.2"), "" when the source has no Node
    kubelet_version: str = ""
    # the Node's status.capacity of extended resources (device plugins count unhealthy devices
    # there, not in allocatable), None from a source without the Node object
    extended_capacity: Quantities | None = None

    def active(self) -> tuple[PodContext, ...]:
        """The pods the kubelet counts: not Succeeded or Failed (``GetActivePods``)."""
        return tuple(p for p in self.pods if not p.terminated)

    def find(self, namespace: str, name: str) -> PodContext | None:
        for pod in self.pods:
            if pod.namespace == namespace and pod.name == name:
                return pod
        return None


def quantity(name: str, value: object) -> int:
    """A quantity as the integer the model counts in (ValueError on a bad one)."""
    number = parse_quantity(value)
    if name == CPU:
        return math.ceil(round(number * 1000, 6))
    return math.ceil(round(number, 6))


def quantities(values: object) -> dict[str, int]:
    """A ``{name: quantity}`` map; unparsable or negative quantities are left out."""
    found: dict[str, int] = {}
    if not isinstance(values, Mapping):
        return found
    for name, value in values.items():
        try:
            amount = quantity(str(name), value)
        except ValueError:
            continue
        if amount >= 0:
            found[str(name)] = amount
    return found


def _resources(spec: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        return {}, {}
    limits = quantities(resources.get("limits"))
    return {**limits, **quantities(resources.get("requests"))}, limits


def _container(spec: Mapping[str, Any], index: int, init: bool) -> ContainerContext:
    requests, limits = _resources(spec)
    return ContainerContext(str(spec.get("name") or f"container-{index}"), requests, limits,
                            init and spec.get("restartPolicy") == "Always")


def qos_class(pod_requests: Quantities, pod_limits: Quantities,
              containers: tuple[ContainerContext, ...]) -> str:
    """``GetPodQOS``: from the pod-level resources when the pod sets them, else from every
    container's CPU and memory."""
    holders = ([(pod_requests, pod_limits)] if pod_requests or pod_limits
               else [(c.requests, c.limits) for c in containers])
    any_set, guaranteed = False, True
    for requests, limits in holders:
        if any(r in requests or r in limits for r in (CPU, MEMORY)):
            any_set = True
        for name in (CPU, MEMORY):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return BEST_EFFORT
    return GUARANTEED if guaranteed else BURSTABLE


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def pod_context(obj: Mapping[str, Any]) -> PodContext:
    """A ``v1.Pod`` object (as JSON) as pod context; odd fields read as absent."""
    meta, spec, status = _part(obj, "metadata"), _part(obj, "spec"), _part(obj, "status")
    inits = tuple(_container(c, i, True) for i, c in enumerate(spec.get("initContainers") or ())
                  if isinstance(c, Mapping))
    apps = tuple(_container(c, i, False) for i, c in enumerate(spec.get("containers") or ())
                 if isinstance(c, Mapping))
    pod_requests, pod_limits = _resources(spec)
    served = dra_served(dict(obj)) if isinstance(obj, dict) else set()
    return PodContext(
        str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")),
        qos_class(pod_requests, pod_limits, inits + apps), str(status.get("phase", "")),
        inits, apps, pod_requests, pod_limits, quantities(spec.get("overhead")),
        frozenset(served), str(status.get("reason", "")), str(status.get("message", "")))


def node_kubelet_version(obj: Mapping[str, Any]) -> str:
    """A ``v1.Node``'s ``status.nodeInfo.kubeletVersion``; "" when absent."""
    return str(_part(_part(obj, "status"), "nodeInfo").get("kubeletVersion") or "")


def node_allocatable(obj: Mapping[str, Any]) -> dict[str, int]:
    """A ``v1.Node``'s ``status.allocatable`` in the model's integers."""
    return quantities(_part(obj, "status").get("allocatable"))
