"""What a fit answer assumes because the exporter cannot see what the kubelet knows (SPEC 7.4).

Each is a label value of ``podresources_shape_assumption_info`` and a line of ``snapshot``:

* ``no_cpu_manager_state``: the CPU manager's ``cpu_manager_state`` was not read (no
  ``--watch-path``, or the file is missing) and pod context does not decide what finished init
  containers still hold (:mod:`exporter.fit.state.init_cpus`): those CPUs are taken as free.
  Only for a shape that asks for exclusive CPUs.
* ``no_device_checkpoint``: the device manager's checkpoint was not read: devices finished init
  containers still hold are taken as free. Only for a shape that asks for devices, and with pod
  context only while a pod has a regular init container asking for devices.
* ``no_memory_manager_state``: the memory manager's ``memory_manager_state`` was not read:
  memory the init containers of pods admitted and not yet started hold (``List`` shows app
  containers only) is taken as free. Only for a shape that asks for exclusive memory, and with
  pod context only while a Guaranteed pod not started yet has a regular init container asking
  for memory.
* ``no_pod_context``: no pod context (``--kube-api`` or the kubelet's Pods API): the other pods'
  requests the resource-fit predicate counts are taken as what ``List`` shows (exclusive CPUs,
  memory and devices only), and a listed pod the kubelet rejected counts as holding.
* ``node_allocatable_derived``: no Node object: the predicate's allocatable is derived from
  sysfs and the kubelet's config file as the kubelet's node status computes it, or without
  the file from ``GetAllocatableResources`` (allocatable CPUs, memory, healthy devices); the
  pod count from ``maxPods`` (not checked without the file).
* ``cpus_from_dra``: the node's exclusive CPUs come from a DRA CPU driver (dra-driver-cpu,
  CPU manager policy ``none``): the kubelet admits the shape's whole CPUs without placing them
  (only the resource-fit predicate counts them), and which CPUs it gets, on which NUMA node, is
  the scheduler's allocation of the pod's ResourceClaims, which the answers do not model.
  Only for a Guaranteed shape asking for whole CPUs (what a static CPU manager would place).
* ``unseen_unhealthy_devices``: an unhealthy device no container holds is in neither
  podresources API nor the device checkpoint's registry, yet the device manager counts it
  (``deviceHasTopologyAlignment``, ``deviceNUMANodes`` and the minimum width read
  ``allDevices``): its NUMA nodes can decide whether a resource aligns and where. For a shape
  asking for a device resource under a policy that aligns (under any, for a resource neither
  API names), unless the Node object rules it out (its ``status.capacity`` of the resource,
  which counts unhealthy devices, less its allocatable, is no more than the unhealthy devices
  containers hold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..podcontext import GUARANTEED, NodeContext, PodContext
from ..podspec import is_extended_resource
from .kubelet.config import Rules
from .kubelet.managers_state import ManagersState
from .kubelet.podshape import PodShape, asks, is_memory_resource
from .kubelet.topologymanager.policy_none import NONE
from .state.checkpoints import KubeletState

NO_CPU_MANAGER_STATE = "no_cpu_manager_state"
NO_DEVICE_CHECKPOINT = "no_device_checkpoint"
NO_MEMORY_MANAGER_STATE = "no_memory_manager_state"
NO_POD_CONTEXT = "no_pod_context"
NODE_ALLOCATABLE_DERIVED = "node_allocatable_derived"
CPUS_FROM_DRA = "cpus_from_dra"
UNSEEN_UNHEALTHY_DEVICES = "unseen_unhealthy_devices"


def assumptions(shape: PodShape, state: ManagersState, rules: Rules, context: NodeContext | None,
                kubelet: KubeletState | None, dra_cpus: bool = False) -> tuple[str, ...]:
    """The assumptions the answer for ``shape`` rests on, in a fixed order. ``dra_cpus``: a
    DRA CPU driver allocates exclusive CPUs on this node."""
    found: list[str] = []
    requests = [asks(shape, c, rules.managers) for c, _ in shape.in_admission_order()]
    if state.cpu is not None and any(a.cpus for a in requests) and (
            kubelet is None or kubelet.cpus is None or not kubelet.cpus_decided):
        found.append(NO_CPU_MANAGER_STATE)
    if any(a.devices for a in requests) and (kubelet is None or kubelet.devices is None) and (
            context is None or any(_init_asks(p, is_extended_resource)
                                   for p in context.active() if not p.rejected)):
        found.append(NO_DEVICE_CHECKPOINT)
    if state.memory is not None and any(a.memory for a in requests) and (
            kubelet is None or kubelet.memory is None) and (
            context is None or any(_init_asks(p, is_memory_resource, "requests")
                                   for p in context.active() if p.phase == "Pending"
                                   and p.qos == GUARANTEED and not p.rejected)):
        found.append(NO_MEMORY_MANAGER_STATE)
    if context is None:
        found.append(NO_POD_CONTEXT)
    if context is None or context.allocatable is None:
        found.append(NODE_ALLOCATABLE_DERIVED)
    if dra_cpus and not rules.managers.cpu_static:
        static = replace(rules.managers, cpu_static=True)  # what such a manager would place
        if any(asks(shape, c, static).cpus for c, _ in shape.in_admission_order()):
            found.append(CPUS_FROM_DRA)
    asked = {r for a in requests for r in (*a.devices, *a.hint_devices)}
    # under policy none nothing aligns, but a resource neither API names may be the device
    # manager's still, every device of it unhealthy (its failure, not OutOf<resource>)
    if any((rules.policy != NONE or r not in state.devices) and
           _unseen_unhealthy(r, state, context) for r in asked):
        found.append(UNSEEN_UNHEALTHY_DEVICES)
    return tuple(found)


def _init_asks(pod: PodContext, kind: Callable[[str], bool], field: str = "limits") -> bool:
    """Whether a regular init container of ``pod`` asks for a resource of ``kind``: what the
    device manager keeps for it (the checkpoint's), or the memory manager until the next
    container is added (its state file's), and ``List`` does not show."""
    return any(amount > 0 and kind(name) for c in pod.init_containers if not c.sidecar
               for name, amount in getattr(c, field).items())


def _unseen_unhealthy(resource: str, state: ManagersState, context: NodeContext | None) -> bool:
    """Whether ``resource`` may have unhealthy devices no container holds: unknown without the
    Node's capacity; with it, its unhealthy devices (capacity less allocatable, as
    ``GetCapacity`` counts them) beyond the unhealthy ones ``List`` shows held (named, not
    allocatable)."""
    if context is None or context.extended_capacity is None or context.allocatable is None:
        return True
    devices = state.devices.get(resource)
    listed_unhealthy = devices.registered_total() - devices.healthy_total() if devices else 0
    unhealthy = (context.extended_capacity.get(resource, 0)
                 - context.allocatable.get(resource, 0))
    return unhealthy > listed_unhealthy
