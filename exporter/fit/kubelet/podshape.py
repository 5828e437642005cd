"""A pod as the kubelet's admission sees it, and who asks the hint providers for what (the
managers' request readers in k8s.io/kubernetes v1.37.2, named below).

A :class:`PodShape` is a named shape from ``--fit-shapes`` or a rejected pod's spec: QoS,
init containers (sidecars marked) and app containers, each with its requests (``cpu`` in
millicores, memory types in bytes, device resources as counts from the container's limits).
:func:`asks` turns one container into what each resource manager is asked for (SPEC 7.2.1):

* CPU manager ``static`` (``policy_static.go`` ``guaranteedCPUs``): a Guaranteed pod's
  container with a whole-CPU request;
* memory manager ``Static`` (``memorymanager/policy_static.go`` ``getRequestedResources``):
  every container of a Guaranteed pod, fractional CPUs included, for ``memory`` and each
  ``hugepages-*``;
* device manager: every device-plugin resource in the limits, any QoS. An extended resource
  DRA serves for the pod (KEP-5004) is not allocated by the device manager (``Allocate``
  skips it: ``isDRAExtendedResource``), but its ``GetTopologyHints`` never checks, so where a
  device plugin on the node registers the same name it still gives hints for it, and the pod
  needs the plugin's devices free where the policy aligns it (:attr:`Ask.hint_devices`).

A pod with pod-level ``resources`` gets no exclusive CPUs or memory unless
``PodLevelResourceManagers`` is on (both managers skip it with a log line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ...podspec import effective_requests
from .config import Managers

CPU = "cpu"


MEMORY = "memory"


GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"


QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)


DRA_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_memory_resource(name: str) -> bool:
    """``memory`` and ``hugepages-<size>``: what the memory manager assigns."""
    return name == MEMORY or name.startswith("hugepages-")


def is_device_resource(name: str) -> bool:
    return name != CPU and not is_memory_resource(name)


@dataclass(frozen=True)
class ContainerShape:
    """One container's requests: ``cpu`` in millicores, memory types in bytes, devices in
    devices (from the limits, as the device manager reads them)."""

    name: str
    requests: Mapping[str, int]
    sidecar: bool = False  # an init container with restartPolicy Always

    def amount(self, resource: str) -> int:
        return self.requests.get(resource, 0)


@dataclass(frozen=True)
class PodShape:
    """A pod to admit: a named shape or a rejected pod's spec."""

    name: str
    containers: tuple[ContainerShape, ...]
    init_containers: tuple[ContainerShape, ...] = ()
    qos: str = GUARANTEED
    pod_level_resources: bool = False
    # extended resources this pod gets through DRA (status.extendedResourceClaimStatus)
    dra_resources: frozenset[str] = field(default_factory=frozenset)
    # .spec.resources.requests and .spec.overhead, for the resource-fit predicate
    pod_requests: Mapping[str, int] = field(default_factory=dict)
    overhead: Mapping[str, int] = field(default_factory=dict)

    def in_admission_order(self) -> tuple[tuple[ContainerShape, bool], ...]:
        """(container, is a regular init container), init containers first, as the kubelet's
        container scope walks them."""
        return (tuple((c, not c.sidecar) for c in self.init_containers)
                + tuple((c, False) for c in self.containers))

    def requests(self) -> dict[str, int]:
        """What the kubelet's resource-fit predicate counts for the pod (any QoS, fractional
        CPUs included): ``resourcehelper.PodRequests``. Extended resources served by DRA are
        not device-plugin requests and are left out (``removeMissingExtendedResources``)."""
        return dict(self._requests)

    @cached_property
    def _requests(self) -> dict[str, int]:
        """Summed once per shape: every admission of it, and every copy placed, asks again."""
        def own(container: ContainerShape) -> dict[str, int]:
            return {r: a for r, a in container.requests.items() if not is_dra_served(self, r)}
        return effective_requests([own(c) for c in self.containers],
                                  [(own(c), c.sidecar) for c in self.init_containers],
                                  self.pod_requests, self.overhead)

    def resources(self) -> tuple[str, ...]:
        """Every resource any container names, first seen first."""
        seen: dict[str, None] = {}
        for container, _ in self.in_admission_order():
            for name in container.requests:
                seen.setdefault(name, None)
        return tuple(seen)


def single_container(name: str, requests: Mapping[str, int], qos: str = GUARANTEED) -> PodShape:
    """A flat shape: one app container."""
    return PodShape(name, (ContainerShape("main", dict(requests)),), qos=qos)


@dataclass(frozen=True)
class Ask:
    """What one container asks the resource managers for: whole exclusive CPUs, memory types
    in bytes, devices per device resource. Empty parts ask nothing."""

    cpus: int = 0
    memory: Mapping[str, int] = field(default_factory=dict)
    devices: Mapping[str, int] = field(default_factory=dict)
    # extended resources DRA serves: the device manager gives hints for them (when a device
    # plugin registers the name) but allocates nothing
    hint_devices: Mapping[str, int] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.cpus and not self.memory and not self.devices

    def amount(self, resource: str) -> int:
        if resource == CPU:
            return self.cpus
        if is_memory_resource(resource):
            return self.memory.get(resource, 0)
        return self.devices.get(resource, 0)

    def resources(self) -> tuple[str, ...]:
        return ((CPU,) if self.cpus else ()) + tuple(self.devices) + tuple(self.memory)


def is_dra_served(pod: PodShape, resource: str) -> bool:
    return resource in pod.dra_resources or resource.startswith(DRA_CLASS_PREFIX)


def asks(pod: PodShape, container: ContainerShape, managers: Managers) -> Ask:
    """SPEC 7.2.1 for one container."""
    guaranteed = pod.qos == GUARANTEED
    exclusive_ok = guaranteed and (not pod.pod_level_resources
                                   or managers.pod_level_resource_managers)
    cpus = 0
    millis = container.amount(CPU)
    if managers.cpu_static and exclusive_ok and millis > 0 and millis % 1000 == 0:
        cpus = millis // 1000
    memory: dict[str, int] = {}
    if managers.memory_static and exclusive_ok:
        memory = {r: a for r, a in container.requests.items()
                  if is_memory_resource(r) and a > 0}
    devices = {r: a for r, a in container.requests.items()
               if is_device_resource(r) and a > 0 and not is_dra_served(pod, r)}
    served = {r: a for r, a in container.requests.items()
              if is_device_resource(r) and a > 0 and is_dra_served(pod, r)}
    return Ask(cpus, memory, devices, served)


def pod_effective_ask(pod: PodShape, managers: Managers) -> Ask:
    """Scope ``pod``: per resource, max(Σ app + Σ sidecars, the largest regular init container
    plus the sidecars started before it) (``getPodRequestedResources``, ``podGuaranteedCPUs``,
    the device manager's ``getPodDeviceRequest``)."""
    def amounts(container: ContainerShape) -> dict[str, int]:
        ask = asks(pod, container, managers)
        return {r: ask.amount(r) for r in ask.resources()}

    totals = effective_requests([amounts(c) for c in pod.containers],
                                [(amounts(c), c.sidecar) for c in pod.init_containers])
    return Ask(totals.get(CPU, 0),
               {r: a for r, a in totals.items() if is_memory_resource(r) and a},
               {r: a for r, a in totals.items() if is_device_resource(r) and a})


def pod_scope_hint_ask(pod: PodShape, managers: Managers) -> Ask:
    """What scope ``pod`` asks the hint providers for: :func:`pod_effective_ask`, except that
    the memory manager's ``getPodRequestedResources`` keeps only the memory types some app
    container asks for (it walks the app containers' map): a type that only init containers or
    sidecars ask for is left out of the pod's hint, and met at their own ``Allocate``, inside
    the hint or by extending it; and the DRA-served extended resources ask for hints too."""
    effective = pod_effective_ask(pod, managers)
    app_types = {r for c in pod.containers for r, a in asks(pod, c, managers).memory.items()
                 if a}
    # getPodDeviceRequest: the pod's limits, DRA-served extended resources included
    served = effective_requests([dict(asks(pod, c, managers).hint_devices)
                                 for c in pod.containers],
                                [(dict(asks(pod, c, managers).hint_devices), c.sidecar)
                                 for c in pod.init_containers])
    return Ask(effective.cpus, {r: a for r, a in effective.memory.items() if r in app_types},
               effective.devices, {r: a for r, a in served.items() if a})
