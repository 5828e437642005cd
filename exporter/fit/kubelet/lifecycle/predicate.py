"""The kubelet's resource-fit predicate (``lifecycle/predicate.go``, v1.37.2): the admit handler
that runs after the Topology Manager.

``kubelet.go`` registers the Topology Manager's admit handler
(``GetAllocateResourcesPodAdmitHandler``) before ``lifecycle.NewPredicateAdmitHandler``, so
a pod the Topology Manager rejects gets its reason (``TopologyAffinityError``,
``SMTAlignmentError``, ``UnexpectedAdmissionError``), and only a pod it admits, its
resources already allocated, is then checked here (``predicate.go`` ``Admit`` ->
``scheduler.AdmissionCheck`` -> ``noderesources.Fits``):

* ``OutOfpods`` when the admitted pods plus this one exceed the Node's ``pods``;
* ``OutOfcpu``, ``OutOfmemory`` (``OutOfephemeral-storage``) when the pod's requests exceed
  the Node's allocatable minus **every admitted pod's requests**, Burstable and BestEffort
  pods and fractional CPUs included;
* ``OutOf<resource>`` for hugepages and extended resources alike, in map order (taken sorted
  here); a device-plugin resource's allocatable is first raised to the devices the device
  manager has allocated, this pod's included (``sanitizeNodeAllocatable``), and an extended
  resource the node does not have at all is dropped (``removeMissingExtendedResources``).

The first failure is the reason (``reasons[0]``), with the kubelet's message.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..admission.errors import Failure
from ..managers_state import ManagersState
from ..podshape import CPU, MEMORY, PodShape, is_memory_resource

PODS, EPHEMERAL_STORAGE = "pods", "ephemeral-storage"
REASONS = {CPU: "OutOfcpu", MEMORY: "OutOfmemory", EPHEMERAL_STORAGE: "OutOfephemeral-storage",
           PODS: "OutOfpods"}


def _failure(resource: str, requested: int, used: int, capacity: int) -> Failure:
    return Failure(REASONS.get(resource, f"OutOf{resource}"), resource,
                   f"Node didn't have enough resource: {resource}, requested: {requested}, "
                   f"used: {used}, capacity: {capacity}")


def predicate(pod: PodShape, before: ManagersState, after: ManagersState) -> Failure | None:
    """``noderesources.Fits`` for ``pod`` on the node ``before`` it (``after``: once the
    Topology Manager allocated it). Unknown figures are not checked."""
    node = before.requests
    wanted = pod.requests()
    if node is None:
        return _scalars(wanted, before, after, {}, {}, complete=False)
    allocatable = node.allocatable
    if PODS in allocatable and node.pods + 1 > allocatable[PODS]:
        return _failure(PODS, 1, node.pods, allocatable[PODS])
    for resource in (CPU, MEMORY, EPHEMERAL_STORAGE):
        amount = wanted.get(resource, 0)
        if amount > 0 and (resource in allocatable or node.complete):
            capacity, used = allocatable.get(resource, 0), node.requested.get(resource, 0)
            if amount > capacity - used:
                return _failure(resource, amount, used, capacity)
    return _scalars(wanted, before, after, node.requested, allocatable, node.complete)


def _scalars(wanted: Mapping[str, int], before: ManagersState, after: ManagersState,
             used_by: Mapping[str, int], known: Mapping[str, int], complete: bool
             ) -> Failure | None:
    """Hugepages and extended resources, sorted by name."""
    for resource in sorted(wanted):
        amount = wanted[resource]
        if amount <= 0 or resource in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS):
            continue
        devices, held = after.devices.get(resource), before.devices.get(resource)
        if is_memory_resource(resource):
            if resource not in known and not complete:
                continue
            capacity, used = known.get(resource, 0), used_by.get(resource, 0)
        elif devices is not None and held is not None:
            capacity = max(known.get(resource, held.healthy_total()), devices.held_total())
            used = used_by.get(resource, held.held_total())
        else:
            continue  # not on the node: dropped (removeMissingExtendedResources)
        if amount > capacity - used:
            return _failure(resource, amount, used, capacity)
    return None
