"""The simulated kubelet's admission: Topology Manager, its hint providers, and allocation.

This is the simulator's own model of what the kubelet does when a pod arrives (SPEC section
7.2), written from the kubelet's source, ``pkg/kubelet/cm/``:

- ``topologymanager``: the policies ``none``, ``best-effort``, ``restricted`` and
  ``single-numa-node`` (``policy_*.go``), the hint merger (``policy.go`` ``HintMerger``), the
  scopes ``container`` and ``pod`` (``scope_container.go``, ``scope_pod.go``);
- the hint providers and their ``Allocate``: CPU manager ``static`` (``cpumanager/
  policy_static.go``, ``cpu_assignment.go``), memory manager ``Static`` (``memorymanager/
  policy_static.go``), device manager (``devicemanager/topology_hints.go``, ``manager.go``);
- the kubelet's predicate admission for device-plugin resources (``lifecycle/predicate.go``),
  which runs after the resource managers.

Pure functions on plain data, no I/O. The API:

``admit(node, pod, config) -> AdmissionResult``
    ``node`` is an :class:`AdmissionNode` (never changed; the node after admission is
    ``result.node``), ``pod`` a :class:`PodRequest`, ``config`` an :class:`AdmissionConfig`.
    ``result.admitted``; ``result.reason`` is the kubelet's admission reason
    (``TopologyAffinityError``, ``SMTAlignmentError``, ``UnexpectedAdmissionError``,
    ``OutOf<resource>``) or None; ``result.message`` the kubelet's message (the API server
    shows it as ``"Pod was rejected: " + message``); ``result.placements`` one
    ``(container name, frozenset of NUMA ids)`` per container in admission order (init
    containers, then app containers): the NUMA nodes of the Topology Manager's merged hint the
    container was allocated against, all NUMA ids for a hint of "any node", and the empty set
    when nothing of the container is aligned (no hint provider cared, or policy ``none``).
    ``result.allocations`` has the concrete CPU ids, memory blocks and device ids.

``node_from_spec(spec, pods=())``
    The node of a simulator profile (:class:`~exporter.simulator.profile.NodeSpec`) with the
    given admitted pods' assignments (exporter ``PodAssignment``, what ``List`` reports)
    already taken: their CPUs and devices, and their memory blocks, filled node by node in
    ascending NUMA order as the memory manager fills a block; a block over several NUMA nodes
    makes those nodes one memory group.

``pod_from_spec(pod)``, ``pod_from_object(obj)``
    A :class:`PodRequest` from a simulator profile pod (``PodSpec``), or from a pod as the
    Kubernetes API shows it.

``config_from_spec(spec)``, ``updated_config(config, changes)``, ``check_runs(node, config)``
    The configuration a profile describes; one changed in the kubelet config file's terms
    (``topologyManagerPolicy``, ``...PolicyOptions``, ``featureGates``; ValueError on bad
    values); ValueError when a kubelet so configured would not start on the node (a policy on
    more NUMA nodes than ``max-allowable-numa-nodes``). :func:`admit` checks it too.

The view of a running simulator's node is ``exporter.simulator.admitting.node_from_state``.

Model limits: CPUs are picked like ``takeByTopologyNUMAPacked`` with one socket per NUMA node
(whole free cores first, then single CPUs of the fullest cores); the other CPU manager options
only change which CPUs are picked, never admission. Pods with pod-level resources get no
exclusive CPUs or memory unless ``PodLevelResourceManagers`` is on; with it on, their
containers are aligned as if the pod had no pod-level resources (the pod's shared budget is not
modelled). The predicate's CPU and memory checks (non-exclusive requests against node
allocatable) are not modelled: the scheduler keeps them true.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..model import ContainerAssignment, DeviceEntry, MemoryBlock, PodAssignment
from ..podspec import is_extended_resource, is_guaranteed, parse_quantity
from .profile import (
    QOS_CLASSES,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
    ContainerSpec,
    NodeSpec,
    PodSpec,
)

POLICIES = TOPOLOGY_MANAGER_POLICIES
SCOPES = TOPOLOGY_MANAGER_SCOPES

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
# topologymanager TopologyAffinityError.Error()
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"

NumaSet = frozenset[int]
DeviceKey = tuple[str, str]  # (resource, device id)


# ---- inputs ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdmissionConfig:
    """The kubelet configuration admission depends on (kubelet defaults: policy ``none``,
    scope ``container``)."""

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    full_pcpus_only: bool = False  # cpuManagerPolicyOptions full-pcpus-only
    prefer_closest_numa_nodes: bool = False  # topologyManagerPolicyOptions
    pod_level_resource_managers: bool = False  # feature gate PodLevelResourceManagers
    max_allowable_numa_nodes: int = 8  # topologyManagerPolicyOptions max-allowable-numa-nodes

    def __post_init__(self) -> None:
        if self.topology_manager_policy not in POLICIES:
            raise ValueError(f"topologyManagerPolicy must be one of {', '.join(POLICIES)}, "
                             f"got {self.topology_manager_policy!r}")
        if self.topology_manager_scope not in SCOPES:
            raise ValueError(f"topologyManagerScope must be one of {', '.join(SCOPES)}, "
                             f"got {self.topology_manager_scope!r}")


_TRUE_FALSE = {"true": True, "false": False}


def _option(value: object, name: str) -> bool:
    """A policy option's value: the kubelet config file writes ``"true"``/``"false"``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_FALSE:
        return _TRUE_FALSE[value.strip().lower()]
    raise ValueError(f"{name} must be \"true\" or \"false\", got {value!r}")


# The options that change admission; the others only change which CPUs are picked, so they
# are accepted and ignored (kubelet cpumanager/policy_options.go, topologymanager/
# policy_options.go).
CPU_MANAGER_OPTIONS = ("full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket",
                       "distribute-cpus-across-cores", "strict-cpu-reservation",
                       "prefer-align-cpus-by-uncorecache")
TOPOLOGY_MANAGER_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")


def updated_config(config: AdmissionConfig, changes: Mapping[str, object]) -> AdmissionConfig:
    """``config`` with the kubelet-config-style ``changes`` applied: ``topologyManagerPolicy``,
    ``topologyManagerScope``, ``cpuManagerPolicyOptions``, ``topologyManagerPolicyOptions``
    (maps of option name to ``"true"``/``"false"``) and ``featureGates``
    (``PodLevelResourceManagers``). Unknown keys, options or values raise ValueError."""
    known = {"topologyManagerPolicy", "topologyManagerScope", "cpuManagerPolicyOptions",
             "topologyManagerPolicyOptions", "featureGates"}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
    values: dict[str, object] = {}
    for key, field_name in (("topologyManagerPolicy", "topology_manager_policy"),
                            ("topologyManagerScope", "topology_manager_scope")):
        if key in changes:
            if not isinstance(changes[key], str):
                raise ValueError(f"{key} must be a string, got {changes[key]!r}")
            values[field_name] = changes[key]
    for key, allowed in (("cpuManagerPolicyOptions", CPU_MANAGER_OPTIONS),
                         ("topologyManagerPolicyOptions", TOPOLOGY_MANAGER_OPTIONS)):
        options = changes.get(key, {})
        if not isinstance(options, Mapping):
            raise ValueError(f"{key} must be an object of option names to \"true\"/\"false\"")
        for name, value in options.items():
            if name not in allowed:
                raise ValueError(f"unknown {key} option {name!r}; known: {', '.join(allowed)}")
            if name == "max-allowable-numa-nodes":
                if not str(value).isdigit() or int(str(value)) < 1:
                    raise ValueError(f"max-allowable-numa-nodes must be a whole number, "
                                     f"got {value!r}")
                values["max_allowable_numa_nodes"] = int(str(value))
                continue
            enabled = _option(value, name)
            if name == "full-pcpus-only":
                values["full_pcpus_only"] = enabled
            elif name == "prefer-closest-numa-nodes":
                values["prefer_closest_numa_nodes"] = enabled
    gates = changes.get("featureGates", {})
    if not isinstance(gates, Mapping):
        raise ValueError("featureGates must be an object of gate names to true/false")
    if "PodLevelResourceManagers" in gates:
        values["pod_level_resource_managers"] = _option(gates["PodLevelResourceManagers"],
                                                        "PodLevelResourceManagers")
    return replace(config, **values)  # type: ignore[arg-type]


def config_from_spec(spec: NodeSpec) -> AdmissionConfig:
    """The admission configuration a simulator profile describes (the kubelet config file the
    simulator writes says the same)."""
    return updated_config(AdmissionConfig(), {
        "topologyManagerPolicy": spec.topology_manager_policy,
        "topologyManagerScope": spec.topology_manager_scope,
        "cpuManagerPolicyOptions": spec.cpu_manager_policy_options,
        "topologyManagerPolicyOptions": spec.topology_manager_policy_options,
        "featureGates": {"PodLevelResourceManagers":
                         spec.feature_gates.get("PodLevelResourceManagers", False)},
    })


@dataclass(frozen=True)
class ContainerRequest:
    """One container's requests (for a Guaranteed pod requests equal limits). ``memory`` maps
    ``memory`` and ``hugepages-<size>`` to bytes, ``devices`` a device-plugin resource to a
    count (from the limits). ``sidecar``: an init container with ``restartPolicy: Always``."""

    name: str
    cpu_millis: int = 0
    memory: Mapping[str, int] = field(default_factory=dict)
    devices: Mapping[str, int] = field(default_factory=dict)
    sidecar: bool = False


@dataclass(frozen=True)
class PodRequest:
    """A pod as admission sees it. ``init_containers`` in spec order, sidecars among them."""

    namespace: str
    name: str
    containers: Sequence[ContainerRequest]
    init_containers: Sequence[ContainerRequest] = ()
    qos: str = "Guaranteed"
    pod_level_resources: bool = False  # the pod has .spec.resources

    def __post_init__(self) -> None:
        if self.qos not in QOS_CLASSES:
            raise ValueError(f"qos must be one of {', '.join(QOS_CLASSES)}, got {self.qos!r}")


@dataclass
class Device:
    """A registered device-plugin device. ``numa``: None when the plugin gives no topology."""

    device_id: str
    numa: tuple[int, ...] | None
    healthy: bool = True


@dataclass
class AdmissionNode:
    """What the kubelet's resource managers know of one node.

    ``cpu_numa`` maps every online CPU, reserved ones included, to its NUMA node (the CPU
    manager's topology); ``free_cpus`` is the CPU manager's default set minus the reserved CPUs
    (allocatable and unassigned). Memory is the memory manager's machine state: per (NUMA id,
    memory type) the allocatable and the free bytes, per NUMA node the group it belongs to
    (``memory_cells``, the kubelet's ``Cells``) and its count of assignments. ``devices`` holds
    every registered device of each device-plugin resource, unhealthy ones included.
    """

    numa_ids: tuple[int, ...]
    cpu_numa: dict[int, int]
    siblings: dict[int, frozenset[int]]
    reserved_cpus: frozenset[int]
    free_cpus: set[int]
    cpu_static: bool = True
    memory_static: bool = True
    memory_allocatable: dict[tuple[int, str], int] = field(default_factory=dict)
    memory_free: dict[tuple[int, str], int] = field(default_factory=dict)
    memory_cells: dict[int, frozenset[int]] = field(default_factory=dict)
    memory_assignments: dict[int, int] = field(default_factory=dict)
    devices: dict[str, list[Device]] = field(default_factory=dict)
    allocated_devices: set[DeviceKey] = field(default_factory=set)
    # NUMA distances (sysfs nodeN/distance) for prefer-closest-numa-nodes; 10/20 when unknown
    distances: dict[int, dict[int, int]] = field(default_factory=dict)

    def copy(self) -> AdmissionNode:
        """A node admission may change without changing this one (the topology, the devices
        and the distances are shared: admission never changes them)."""
        return replace(self, free_cpus=set(self.free_cpus),
                       memory_allocatable=dict(self.memory_allocatable),
                       memory_free=dict(self.memory_free),
                       memory_cells=dict(self.memory_cells),
                       memory_assignments=dict(self.memory_assignments),
                       allocated_devices=set(self.allocated_devices))

    def distance(self, a: int, b: int) -> int:
        row = self.distances.get(a)
        if row is not None and b in row:
            return row[b]
        return 10 if a == b else 20


# ---- outputs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ContainerAllocation:
    """What one container got: exclusive CPUs, memory blocks, device ids."""

    name: str
    cpus: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceEntry, ...] = ()


@dataclass(frozen=True)
class AdmissionResult:
    admitted: bool
    reason: str | None
    message: str
    placements: tuple[tuple[str, NumaSet], ...]
    allocations: tuple[ContainerAllocation, ...]
    node: AdmissionNode  # the node after admission (the input node when rejected)


@dataclass(frozen=True)
class Hint:
    """A topology hint: ``affinity`` None means "any NUMA node" (the kubelet's nil mask)."""

    affinity: NumaSet | None
    preferred: bool


# A provider's answer: None = no hints map ("don't care" for everything it manages); otherwise
# resource -> None ("don't care") | [] (cannot be satisfied) | hints.
ProviderHints = dict[str, list[Hint] | None] | None


class _Rejected(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _unexpected(error: str) -> _Rejected:
    """admission.GetPodAdmitResult: an error without a Type() is an UnexpectedAdmissionError."""
    return _Rejected(UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {error}, which is "
                                                 "unexpected")


# ---- the entry point -------------------------------------------------------------------------

@dataclass
class _PodState:
    """Per pod: what its earlier containers left reusable (cpusToReuse, devicesToReuse,
    initContainersReusableMemory)."""

    cpus: set[int] = field(default_factory=set)
    devices: dict[str, set[str]] = field(default_factory=dict)
    memory: dict[tuple[NumaSet, str], int] = field(default_factory=dict)


# Beyond this many NUMA nodes the merge over every subset of them is not modelled.
MODELLED_NUMA_NODES = 16


def check_runs(node: AdmissionNode, config: AdmissionConfig) -> None:
    """ValueError when a kubelet with ``config`` does not start on ``node``: a Topology Manager
    policy other than ``none`` on more NUMA nodes (CPU-less ones included) than
    ``max-allowable-numa-nodes`` (topologymanager ``NewManager``), or more than this model
    handles."""
    if config.topology_manager_policy == "none":
        return
    count = len(node.numa_ids)
    if count > config.max_allowable_numa_nodes:
        raise ValueError(f"the kubelet does not start with topologyManagerPolicy "
                         f"{config.topology_manager_policy} on a machine with {count} NUMA "
                         f"nodes (max-allowable-numa-nodes is "
                         f"{config.max_allowable_numa_nodes})")
    if count > MODELLED_NUMA_NODES:
        raise ValueError(f"admission under a Topology Manager policy is modelled for at most "
                         f"{MODELLED_NUMA_NODES} NUMA nodes, not {count}")


def admit(node: AdmissionNode, pod: PodRequest, config: AdmissionConfig) -> AdmissionResult:
    """Admit ``pod`` as the kubelet does: the Topology Manager's scope ``Admit``
    (``scope_container.go``/``scope_pod.go``, or ``admitPolicyNone`` for policy ``none``), each
    container allocated right after its hint is chosen; then the predicate admit handler for
    device-plugin resources (``lifecycle/predicate.go``), which runs after the resource
    allocation handler (``kubelet.go`` registers it second). ValueError when such a kubelet
    would not start on the node (:func:`check_runs`)."""
    check_runs(node, config)
    work = node.copy()
    reuse = _PodState()
    order = [*pod.init_containers, *pod.containers]
    placements: list[tuple[str, NumaSet]] = []
    allocations: list[ContainerAllocation] = []
    try:
        if config.topology_manager_policy == "none":
            for container in order:
                allocations.append(_allocate(work, pod, container, None, reuse, config))
                placements.append((container.name, frozenset()))
        elif config.topology_manager_scope == "container":
            for container in order:
                providers = _container_hints(work, pod, container, reuse, config)
                best, admitted = merge(work, providers, config)
                if not admitted:
                    raise _Rejected(TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
                allocations.append(_allocate(work, pod, container, best, reuse, config))
                placements.append((container.name, _placement(work, providers, best)))
        else:
            providers = _pod_hints(work, pod, reuse, config)
            best, admitted = merge(work, providers, config)
            if not admitted:
                raise _Rejected(TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
            where = _placement(work, providers, best)
            for container in order:
                allocations.append(_allocate(work, pod, container, best, reuse, config))
                placements.append((container.name, where))
        _predicate(node, pod)
    except _Rejected as rejected:
        return AdmissionResult(False, rejected.reason, rejected.message, (), (), node)
    return AdmissionResult(True, None, "", tuple(placements), tuple(allocations), work)


def _placement(node: AdmissionNode, providers: list[ProviderHints], best: Hint) -> NumaSet:
    cares = any(p for p in providers if p and any(h is not None for h in p.values()))
    if not cares:
        return frozenset()
    return best.affinity if best.affinity is not None else frozenset(node.numa_ids)


# ---- who asks for what (SPEC 7.2.1) ----------------------------------------------------------

def guaranteed_cpus(pod: PodRequest, container: ContainerRequest,
                    config: AdmissionConfig) -> int:
    """cpumanager ``staticPolicy.guaranteedCPUs``: a whole-CPU request of a Guaranteed pod's
    container, else 0; pods with pod-level resources get none without
    ``PodLevelResourceManagers``."""
    if pod.qos != "Guaranteed" or (pod.pod_level_resources
                                   and not config.pod_level_resource_managers):
        return 0
    if container.cpu_millis <= 0 or container.cpu_millis % 1000:
        return 0
    return container.cpu_millis // 1000


def memory_request(pod: PodRequest, container: ContainerRequest,
                   config: AdmissionConfig) -> dict[str, int]:
    """memorymanager ``getRequestedResources``: ``memory`` and ``hugepages-*`` of every
    container of a Guaranteed pod (fractional CPU or not); nothing for other QoS classes or
    (without ``PodLevelResourceManagers``) pods with pod-level resources."""
    if pod.qos != "Guaranteed" or (pod.pod_level_resources
                                   and not config.pod_level_resource_managers):
        return {}
    return {t: b for t, b in container.memory.items()
            if b > 0 and (t == "memory" or t.startswith("hugepages-"))}


def _device_request(node: AdmissionNode, container: ContainerRequest) -> dict[str, int]:
    """devicemanager ``getContainerDeviceRequest``: device-plugin resources in the limits,
    any QoS."""
    return {r: n for r, n in container.devices.items() if n > 0 and r in node.devices}


def effective_request(init_containers: Iterable[tuple[int, bool]],
                      app_containers: Iterable[int]) -> int:
    """The pod-scope request of one resource (cpumanager ``podGuaranteedCPUs``, memorymanager
    ``getPodRequestedResources``, ``resource.PodLimits``): max(Σ app + Σ sidecars, the largest
    regular init container plus the sidecars started before it). ``init_containers`` are
    (amount, is sidecar) in spec order."""
    by_init = sidecars = 0
    for amount, sidecar in init_containers:
        if sidecar:
            sidecars += amount
        elif sidecars + amount > by_init:
            by_init = sidecars + amount
    return max(by_init, sum(app_containers) + sidecars)


# ---- hint providers --------------------------------------------------------------------------

def _masks(ids: Sequence[int]) -> Iterable[NumaSet]:
    """bitmask.IterateBitMasks: every non-empty subset, by size, then in id order."""
    for size in range(1, len(ids) + 1):
        for combo in itertools.combinations(ids, size):
            yield frozenset(combo)


def cpu_hints(node: AdmissionNode, request: int, reusable: set[int]) -> list[Hint]:
    """cpumanager ``generateCPUTopologyHints``: over the NUMA nodes that have CPUs, the
    minimum width is the narrowest set whose CPUs (all online, reserved included) reach the
    request; a set is a hint when every reusable CPU lies in it and reusable plus free CPUs in
    it reach the request; preferred when its width is the minimum."""
    cpu_nodes = sorted(set(node.cpu_numa.values()))
    total_on: dict[int, int] = dict.fromkeys(cpu_nodes, 0)
    for numa in node.cpu_numa.values():
        total_on[numa] += 1
    free_on: dict[int, int] = dict.fromkeys(cpu_nodes, 0)
    for cpu in node.free_cpus:
        free_on[node.cpu_numa[cpu]] += 1
    reusable_on = {node.cpu_numa[c] for c in reusable}
    min_width = len(cpu_nodes)
    found: list[NumaSet] = []
    for mask in _masks(cpu_nodes):
        if sum(total_on[n] for n in mask) >= request and len(mask) < min_width:
            min_width = len(mask)
        if not reusable_on <= mask:
            continue
        if len(reusable) + sum(free_on[n] for n in mask) >= request:
            found.append(mask)
    return [Hint(m, len(m) == min_width) for m in found]


def memory_hints(node: AdmissionNode, request: Mapping[str, int],
                 reusable: Mapping[tuple[NumaSet, str], int]) -> dict[str, list[Hint]]:
    """memorymanager ``staticPolicy.calculateHints``. A set counts for the minimum width when
    its allocatable holds every requested type; a single node in a multi-node group is no
    hint (the group rule); a multi-node set is no hint when a member with assignments is
    single-allocated or in another group; then free plus this pod's reusable memory for that
    very set must hold every type. Every type gets the same hints. An empty answer (no set
    qualifies) is an empty map, which the Topology Manager reads as "no preference"."""
    found, min_width = _memory_scan(node, request, reusable, first_level=False)
    if not found:
        return {}
    return {t: [Hint(m, len(m) == min_width) for m in found] for t in request}


def _memory_scan(node: AdmissionNode, request: Mapping[str, int],
                 reusable: Mapping[tuple[NumaSet, str], int], first_level: bool,
                 within: NumaSet = frozenset()) -> tuple[list[NumaSet], int]:
    """The sets that are memory hints (containing ``within``), and the minimum width. With
    ``first_level``, the scan stops at the narrowest width that has a hint: what
    ``findBestHint`` picks lies there, and a node with many NUMA nodes is not walked through
    every subset."""
    min_width = len(node.numa_ids)
    found: list[NumaSet] = []
    for size in range(1, len(node.numa_ids) + 1):
        for combo in itertools.combinations(node.numa_ids, size):
            mask = frozenset(combo)
            if any(sum(node.memory_allocatable.get((n, t), 0) for n in mask) < amount
                   for t, amount in request.items()):
                continue
            min_width = min(min_width, len(mask))
            if len(mask) == 1:
                (only,) = mask
                if len(node.memory_cells.get(only, frozenset({only}))) > 1:
                    continue
            elif any(node.memory_assignments.get(n, 0) > 0
                     and node.memory_cells.get(n, frozenset({n})) != mask for n in mask):
                # a single-allocated member has cells {n} != mask; one in another group too
                continue
            if any(sum(node.memory_free.get((n, t), 0) for n in mask)
                   + reusable.get((mask, t), 0) < amount for t, amount in request.items()):
                continue
            if within <= mask:
                found.append(mask)
        if first_level and found:
            break
    return found, min_width


def _best_memory_hint(node: AdmissionNode, request: Mapping[str, int],
                      reusable: Mapping[tuple[NumaSet, str], int],
                      within: NumaSet = frozenset()) -> Hint | None:
    """memorymanager ``findBestHint`` over the hints (containing ``within``, for
    ``extendTopologyManagerHint``): preferred first, then the narrowest, then the lowest
    NUMA ids."""
    found, min_width = _memory_scan(node, request, reusable, first_level=True, within=within)
    if not found:
        return None
    best = min(found, key=lambda m: (len(m), _mask_value(m)))
    return Hint(best, len(best) == min_width)


def device_hints(node: AdmissionNode, resource: str, request: int,
                 reusable: set[str]) -> list[Hint] | None:
    """devicemanager ``GetTopologyHints`` + ``generateDeviceTopologyHints``: None ("don't
    care") when no device of the resource has topology; [] when fewer than requested are
    available node-wide; else a set is a hint when every reusable device with topology meets
    it and reusable plus available devices meeting it reach the request. A device meets a set
    when any of its NUMA nodes is in it; a topology-less device meets none. The minimum width
    counts every registered device, unhealthy ones included."""
    devices = node.devices.get(resource, [])
    if not any(d.numa is not None for d in devices):
        return None
    by_id = {d.device_id: d for d in devices}
    available = {d.device_id for d in devices
                 if d.healthy and (resource, d.device_id) not in node.allocated_devices}
    if len(available | reusable) < request:
        return []
    # devices counted per NUMA set they are local to (a set meets a mask when they intersect)
    every: dict[frozenset[int], int] = {}
    free: dict[frozenset[int], int] = {}
    for device in devices:
        if device.numa:
            local = frozenset(device.numa)
            every[local] = every.get(local, 0) + 1
            if device.device_id in available:
                free[local] = free.get(local, 0) + 1
    pinned = [frozenset(by_id[d].numa or ()) for d in reusable
              if d in by_id and by_id[d].numa is not None]
    min_width = len(node.numa_ids)
    found: list[NumaSet] = []
    for mask in _masks(node.numa_ids):
        if sum(n for local, n in every.items() if local & mask) >= request \
                and len(mask) < min_width:
            min_width = len(mask)
        if any(not local & mask for local in pinned):
            continue
        matching = len(pinned) + sum(n for local, n in free.items() if local & mask)
        if matching >= request:
            found.append(mask)
    return [Hint(m, len(m) == min_width) for m in found]


def _container_hints(node: AdmissionNode, pod: PodRequest, container: ContainerRequest,
                     reuse: _PodState, config: AdmissionConfig) -> list[ProviderHints]:
    """The hint providers' ``GetTopologyHints`` for one container, in the order the container
    manager registers them (device manager, CPU manager, memory manager)."""
    devices: dict[str, list[Hint] | None] = {}
    for resource, count in _device_request(node, container).items():
        devices[resource] = device_hints(node, resource, count,
                                         reuse.devices.get(resource, set()))
    cpus: ProviderHints = None
    wanted = guaranteed_cpus(pod, container, config)
    if wanted and node.cpu_static:
        cpus = {"cpu": cpu_hints(node, wanted, reuse.cpus)}
    memory: ProviderHints = None
    asked = memory_request(pod, container, config)
    if asked and node.memory_static:
        memory = dict(memory_hints(node, asked, reuse.memory))
    return [devices or None, cpus, memory or None]


def _pod_hints(node: AdmissionNode, pod: PodRequest, reuse: _PodState,
               config: AdmissionConfig) -> list[ProviderHints]:
    """The providers' ``GetPodTopologyHints``: the same hints over the pod's effective
    request of each resource."""
    inits = list(pod.init_containers)
    apps = list(pod.containers)
    devices: dict[str, list[Hint] | None] = {}
    names = dict.fromkeys(r for c in (*inits, *apps) for r in _device_request(node, c))
    for resource in names:
        wanted = effective_request(
            [(_device_request(node, c).get(resource, 0), c.sidecar) for c in inits],
            [_device_request(node, c).get(resource, 0) for c in apps])
        devices[resource] = device_hints(node, resource, wanted,
                                         reuse.devices.get(resource, set()))
    cpus: ProviderHints = None
    cpu_wanted = effective_request([(guaranteed_cpus(pod, c, config), c.sidecar) for c in inits],
                                   [guaranteed_cpus(pod, c, config) for c in apps])
    if cpu_wanted and node.cpu_static:
        cpus = {"cpu": cpu_hints(node, cpu_wanted, reuse.cpus)}
    memory: ProviderHints = None
    types = dict.fromkeys(t for c in (*inits, *apps) for t in memory_request(pod, c, config))
    asked = {t: effective_request(
        [(memory_request(pod, c, config).get(t, 0), c.sidecar) for c in inits],
        [memory_request(pod, c, config).get(t, 0) for c in apps]) for t in types}
    if asked and node.memory_static:
        memory = dict(memory_hints(node, asked, reuse.memory))
    return [devices or None, cpus, memory or None]


# ---- the merger and the policies -------------------------------------------------------------

def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[Hint]]:
    """topologymanager ``filterProvidersHints``: a provider without hints, or a resource with
    nil hints, gives one preferred "any node" hint; a resource with no hints gives one
    non-preferred "any node" hint, which cannot be satisfied."""
    out: list[list[Hint]] = []
    for provider in providers:
        if not provider:
            out.append([Hint(None, True)])
            continue
        for hints in provider.values():
            if hints is None:
                out.append([Hint(None, True)])
            elif not hints:
                out.append([Hint(None, False)])
            else:
                out.append(list(hints))
    return out


def filter_single_numa_hints(resources: Sequence[Sequence[Hint]]) -> list[list[Hint]]:
    """policy_single_numa_node ``filterSingleNumaHints``: keep preferred "any node" hints and
    preferred single-node hints only."""
    return [[h for h in hints if h.preferred and (h.affinity is None or len(h.affinity) == 1)]
            for hints in resources]


def _best_non_preferred_count(resources: Sequence[Sequence[Hint]]) -> int:
    """policy.go ``maxOfMinAffinityCounts``: the largest, over resources, of the width of
    each resource's narrowest hint."""
    best = 0
    for hints in resources:
        widths = [len(h.affinity) for h in hints if h.affinity is not None]
        if widths:
            best = max(best, min(widths))
    return best


def _mask_value(mask: NumaSet) -> int:
    return sum(1 << n for n in mask)


def merge(node: AdmissionNode, providers: Sequence[ProviderHints],
          config: AdmissionConfig) -> tuple[Hint, bool]:
    """A policy's ``Merge``: the best merged hint and whether the policy admits it
    (``canAdmitPodResult``: best-effort always; restricted and single-numa-node only a
    preferred hint). single-numa-node first filters to single-node hints and turns a result of
    all nodes into "any node"."""
    policy = config.topology_manager_policy
    resources = filter_providers_hints(providers)
    if policy == "single-numa-node":
        resources = filter_single_numa_hints(resources)
    best = merge_filtered(node, resources, policy, config.prefer_closest_numa_nodes)
    if policy == "single-numa-node" and best.affinity == frozenset(node.numa_ids):
        best = Hint(None, best.preferred)
    admitted = policy == "best-effort" or best.preferred
    return best, admitted


def merge_filtered(node: AdmissionNode, resources: Sequence[Sequence[Hint]], policy: str,
                   closest: bool) -> Hint:
    """policy.go ``HintMerger.Merge``: every permutation of one hint per resource is ANDed;
    it is preferred when every hint is preferred and all the masks given are equal. The best
    is chosen by ``HintMerger.compare``: preferred over not; among preferred, the narrowest,
    then the lowest mask (with ``prefer-closest-numa-nodes``, outside single-numa-node: among
    equally wide masks the smallest average distance); among non-preferred, the width closest
    to ``bestNonPreferredAffinityCount`` from below, else the narrowest above it.

    ``compare`` is a total order, so the best permutation is the best of the distinct merged
    hints; these are collected resource by resource instead of by enumerating every
    permutation."""
    everything = frozenset(node.numa_ids)
    # partial states: (AND of the masks so far or None when only "any node", preferred so far)
    states: set[tuple[NumaSet | None, bool]] = {(None, True)}
    for hints in resources:
        following: set[tuple[NumaSet | None, bool]] = set()
        for mask, preferred in states:
            for hint in hints:
                if hint.affinity is None:
                    following.add((mask, preferred and hint.preferred))
                    continue
                anded = hint.affinity if mask is None else mask & hint.affinity
                equal = mask is None or hint.affinity == mask
                following.add((anded, preferred and hint.preferred and equal))
        states = following
    bound = _best_non_preferred_count(resources)
    use_closest = closest and policy != "single-numa-node"
    best: Hint | None = None
    for mask, preferred in sorted(states, key=lambda s: (
            -1 if s[0] is None else _mask_value(s[0]), s[1])):
        affinity = everything if mask is None else mask & everything
        if not affinity:
            continue
        candidate = Hint(affinity, preferred)
        best = candidate if best is None else _compare(node, best, candidate, bound, use_closest)
    return best if best is not None else Hint(everything, False)


def _fitter(node: AdmissionNode, current: NumaSet, candidate: NumaSet, closest: bool) -> bool:
    """``CompareNUMAAffinityMasks``: True when ``candidate`` beats ``current`` (NUMAInfo
    ``Narrowest``, or ``Closest``: average distance between equally wide masks)."""
    if candidate == current:
        return False
    if len(candidate) != len(current):
        return len(candidate) < len(current)
    if closest:
        here, there = _average_distance(node, current), _average_distance(node, candidate)
        if here != there:
            return there < here
    return _mask_value(candidate) < _mask_value(current)


def _average_distance(node: AdmissionNode, mask: NumaSet) -> float:
    """NUMADistances.CalculateAverageFor: the mean over every ordered pair, itself included."""
    pairs = [node.distance(a, b) for a in mask for b in mask]
    return sum(pairs) / len(pairs)


def _compare(node: AdmissionNode, current: Hint, candidate: Hint, bound: int,
             closest: bool) -> Hint:
    """policy.go ``HintMerger.compare`` (both masks are set and non-empty here)."""
    assert current.affinity is not None and candidate.affinity is not None
    if current.preferred != candidate.preferred:
        return candidate if candidate.preferred else current

    def fitter() -> Hint:
        assert current.affinity is not None and candidate.affinity is not None
        return candidate if _fitter(node, current.affinity, candidate.affinity,
                                    closest) else current

    if current.preferred:
        return fitter()
    have, new = len(current.affinity), len(candidate.affinity)
    if have > bound:
        return fitter()
    if have == bound:
        return fitter() if new == bound else current
    if new > bound:
        return current
    if new == bound:
        return candidate
    if new > have:
        return candidate
    if new < have:
        return current
    return fitter()


# ---- allocation ------------------------------------------------------------------------------

def _allocate(node: AdmissionNode, pod: PodRequest, container: ContainerRequest,
              hint: Hint | None, reuse: _PodState, config: AdmissionConfig) -> ContainerAllocation:
    """topologymanager ``allocateAlignedResources``: each provider's ``Allocate`` in turn."""
    regular_init = any(c is container for c in pod.init_containers) and not container.sidecar
    devices = _allocate_devices(node, container, hint, reuse, regular_init)
    cpus = _allocate_cpus(node, pod, container, hint, reuse, regular_init, config)
    memory = _allocate_memory(node, pod, container, hint, reuse, regular_init, config)
    return ContainerAllocation(container.name, cpus, memory, devices)


def _allocate_cpus(node: AdmissionNode, pod: PodRequest, container: ContainerRequest,
                   hint: Hint | None, reuse: _PodState, regular_init: bool,
                   config: AdmissionConfig) -> tuple[int, ...]:
    """cpumanager ``staticPolicy.Allocate``: the ``full-pcpus-only`` checks (a request not a
    multiple of the threads per core, or more than the free CPUs outside the reserved CPUs'
    cores, is an ``SMTAlignmentError``), then ``allocateCPUs``: CPUs of the hint's NUMA nodes
    first, the rest from anywhere; ``updateCPUsToReuse``: a regular init container's CPUs
    become reusable, an app container's are taken out of the reusable set."""
    wanted = guaranteed_cpus(pod, container, config)
    if not wanted or not node.cpu_static:
        return ()
    if config.full_pcpus_only:
        per_core = max(len(s) for s in node.siblings.values()) if node.siblings else 1
        if wanted % per_core:
            raise _Rejected(SMT_ALIGNMENT_ERROR, f"SMT Alignment Error: requested {wanted} "
                            f"cpus not multiple cpus per core = {per_core}")
        reserved_cores = set().union(*(node.siblings.get(c, frozenset({c}))
                                       for c in node.reserved_cpus)) if node.reserved_cpus \
            else set()
        physical = len(node.free_cpus - reserved_cores)
        if wanted > physical:
            raise _Rejected(SMT_ALIGNMENT_ERROR, "SMT Alignment Error: not enough free physical "
                            f"CPUs: available physical CPUs = {physical}, requested CPUs = "
                            f"{wanted}, CPUs per core = {per_core}")
    pool = node.free_cpus | reuse.cpus
    taken: set[int] = set()
    if hint is not None and hint.affinity is not None:
        aligned = {c for c in pool if node.cpu_numa[c] in hint.affinity}
        taken = _take_by_topology(node, aligned, min(wanted, len(aligned)))
    rest = pool - taken
    if wanted - len(taken) > len(rest):
        raise _unexpected(f"not enough cpus available to satisfy request: requested="
                          f"{wanted - len(taken)}, available={len(rest)}")
    taken |= _take_by_topology(node, rest, wanted - len(taken))
    node.free_cpus -= taken
    if regular_init:
        reuse.cpus |= taken
    else:
        reuse.cpus -= taken
    return tuple(sorted(taken))


def _take_by_topology(node: AdmissionNode, available: set[int], count: int) -> set[int]:
    """cpu_assignment ``takeByTopologyNUMAPacked`` with one socket per NUMA node: whole free
    NUMA nodes first, then whole free cores, from the NUMA nodes with the fewest free CPUs,
    then single CPUs from the cores with the fewest free CPUs."""
    if count <= 0:
        return set()
    free_per_numa: dict[int, int] = {}
    for cpu in available:
        free_per_numa[node.cpu_numa[cpu]] = free_per_numa.get(node.cpu_numa[cpu], 0) + 1
    cores: dict[frozenset[int], list[int]] = {}
    for cpu in available:
        cores.setdefault(node.siblings.get(cpu, frozenset({cpu})), []).append(cpu)

    def numa_rank(core: frozenset[int]) -> tuple[int, int]:
        numa = node.cpu_numa[min(core)]
        return free_per_numa[numa], numa

    taken: set[int] = set()
    # whole NUMA nodes (sockets) first, when the request needs at least one
    for numa in sorted(free_per_numa):
        node_cpus = {c for c, n in node.cpu_numa.items() if n == numa}
        if node_cpus <= available and count - len(taken) >= len(node_cpus):
            taken |= node_cpus
    whole = sorted((c for c, free in cores.items() if len(free) == len(c)),
                   key=lambda c: (numa_rank(c), min(c)))
    for core in whole:
        if count - len(taken) >= len(core) and not core & taken:
            taken |= core
    if len(taken) < count:
        partial = sorted(((core, sorted(set(free) - taken)) for core, free in cores.items()),
                         key=lambda item: (len(item[1]), numa_rank(item[0]), min(item[0])))
        for _, cpus in partial:
            for cpu in cpus:
                if len(taken) < count:
                    taken.add(cpu)
    return taken


def _allocate_memory(node: AdmissionNode, pod: PodRequest, container: ContainerRequest,
                     hint: Hint | None, reuse: _PodState, regular_init: bool,
                     config: AdmissionConfig) -> tuple[MemoryBlock, ...]:
    """memorymanager ``staticPolicy.Allocate``: with no affinity, the default hint (the best of
    its own hints); a hint that cannot hold the request is extended to the best hint
    containing it; a hint that mixes single- and multi-node allocations is refused
    (``isAffinityViolatingNUMAAllocations``); then one block per type over the hint's nodes,
    filled in ascending NUMA order (``updateMachineState``), each member joining the group."""
    asked = memory_request(pod, container, config)
    if not asked or not node.memory_static:
        return ()
    chosen = hint if hint is not None else Hint(None, False)
    if chosen.affinity is None:
        default = _best_memory_hint(node, asked, reuse.memory)
        if default is None:
            raise _unexpected("[memorymanager] failed to get the default NUMA affinity, no NUMA "
                              "nodes with enough memory is available")
        if not default.preferred and chosen.preferred:
            raise _unexpected("[memorymanager] failed to find the default preferred hint")
        chosen = default
    assert chosen.affinity is not None
    if any(sum(node.memory_free.get((n, t), 0) for n in chosen.affinity) < size
           for t, size in asked.items()):
        extended = _best_memory_hint(node, asked, reuse.memory, within=chosen.affinity)
        if extended is None:
            raise _unexpected("[memorymanager] failed to find NUMA nodes to extend the current "
                              "topology hint")
        if not extended.preferred and chosen.preferred:
            raise _unexpected("[memorymanager] failed to find the extended preferred hint")
        chosen = extended
    mask = chosen.affinity
    assert mask is not None
    if len(mask) > 1 and any(node.memory_assignments.get(n, 0) > 0
                             and node.memory_cells.get(n, frozenset({n})) != mask for n in mask):
        raise _unexpected("[memorymanager] preferred hint violates NUMA node allocation")
    blocks = []
    for memory_type, size in sorted(asked.items()):
        blocks.append(MemoryBlock(memory_type, size, tuple(sorted(mask))))
        reusable = reuse.memory.get((mask, memory_type), 0)
        if regular_init:
            reuse.memory[(mask, memory_type)] = max(reusable, size)
            left = size - reusable if reusable < size else 0
        else:
            left = max(0, size - reusable)
            if reusable:
                reuse.memory[(mask, memory_type)] = max(0, reusable - size)
        for numa in sorted(mask):
            node.memory_assignments[numa] = node.memory_assignments.get(numa, 0) + 1
            node.memory_cells[numa] = mask
            free = node.memory_free.get((numa, memory_type), 0)
            if left <= 0 or free <= 0:
                continue
            used = min(free, left)
            node.memory_free[(numa, memory_type)] = free - used
            left -= used
    return tuple(blocks)


def _allocate_devices(node: AdmissionNode, container: ContainerRequest, hint: Hint | None,
                      reuse: _PodState, regular_init: bool) -> tuple[DeviceEntry, ...]:
    """devicemanager ``devicesToAllocate``: reusable devices first; fewer available than
    needed is an error; then the devices meeting the hint's NUMA nodes (``filterByAffinity``:
    nodes with more devices first), then the others, then those without topology."""
    entries = []
    for resource, count in sorted(_device_request(node, container).items()):
        devices = node.devices[resource]
        reusable = reuse.devices.setdefault(resource, set())
        chosen = sorted(reusable)[:count]
        needed = count - len(chosen)
        available = [d for d in devices if d.healthy
                     and (resource, d.device_id) not in node.allocated_devices]
        if needed > 0:
            if len(available) < needed:
                raise _unexpected(f"requested number of devices unavailable for {resource}. "
                                  f"Requested: {needed}, Available: {len(available)}")
            chosen += [d.device_id for d in _device_order(node, available, hint)][:needed]
        for device_id in chosen:
            node.allocated_devices.add((resource, device_id))
        if regular_init:
            reusable.update(chosen)
        else:
            reusable.difference_update(chosen)
        by_id = {d.device_id: d for d in devices}
        for device_id in chosen:
            numa = by_id[device_id].numa
            entries.append(DeviceEntry(resource, (device_id,), numa or None))
    return tuple(entries)


def _device_order(node: AdmissionNode, available: list[Device], hint: Hint | None,
                  ) -> list[Device]:
    affinity = hint.affinity if hint is not None else None
    per_numa: dict[int, int] = {}
    for device in available:
        for numa in device.numa or ():
            per_numa[numa] = per_numa.get(numa, 0) + 1

    def rank(device: Device) -> tuple[int, int, int]:
        if not device.numa:
            return (2, 0, 0)
        if affinity is not None:
            inside = [n for n in device.numa if n in affinity]
            if inside:
                best = max(inside, key=lambda n: (per_numa[n], -n))
                return (0, -per_numa[best], best)
        best = max(device.numa, key=lambda n: (per_numa[n], -n))
        return (1 if affinity is not None else 0, -per_numa[best], best)

    return sorted(available, key=rank)  # stable: registration order within a rank


def _predicate(node: AdmissionNode, pod: PodRequest) -> None:
    """lifecycle ``PredicateAdmitHandler`` for device-plugin resources: the pod's effective
    request plus what the node's pods use must not exceed the node's allocatable (the healthy
    devices); a resource the node does not list is ignored (``removeMissingExtendedResources``).
    Checked against the node before this pod's allocation."""
    for resource, devices in node.devices.items():
        wanted = effective_request(
            [(c.devices.get(resource, 0), c.sidecar) for c in pod.init_containers],
            [c.devices.get(resource, 0) for c in pod.containers])
        if not wanted:
            continue
        capacity = sum(1 for d in devices if d.healthy)
        used = sum(1 for r, _ in node.allocated_devices if r == resource)
        if wanted + used > capacity:
            raise _Rejected(f"OutOf{resource}", f"Node didn't have enough resource: {resource}, "
                            f"requested: {wanted}, used: {used}, capacity: {capacity}")


# ---- building the inputs ---------------------------------------------------------------------

def node_from_spec(spec: NodeSpec, pods: Iterable[PodAssignment] = (),
                   held_cpus: Iterable[int] = (),
                   unregistered: Iterable[str] = ()) -> AdmissionNode:
    """The node of a simulator profile with ``pods`` (their ``List`` assignments) admitted.

    ``held_cpus``: exclusive CPUs assigned but not listed (init containers'). Devices of an
    ``unregistered`` resource are registered but none is healthy (after a kubelet restart)."""
    static_cpu = spec.cpu_manager_policy == "static"
    cpu_numa = {cpu: n.numa_id for n in spec.numa_nodes for cpu in n.cpus}
    allocatable = spec.allocatable_memory()
    down = set(unregistered)
    devices: dict[str, list[Device]] = {}
    for device in spec.devices:
        devices.setdefault(device.resource, []).append(Device(
            device.device_id, device.numa_ids or None,
            device.healthy and device.resource not in down))
    node = AdmissionNode(
        numa_ids=tuple(sorted(n.numa_id for n in spec.numa_nodes)),
        cpu_numa=cpu_numa,
        siblings=spec.thread_siblings(),
        reserved_cpus=frozenset(spec.reserved_cpus),
        free_cpus=set(cpu_numa) - set(spec.reserved_cpus) if static_cpu else set(),
        cpu_static=static_cpu,
        memory_static=spec.memory_manager_policy == "Static",
        memory_allocatable=allocatable,
        memory_free=dict(allocatable),
        devices=devices,
        distances=spec.distances(),
    )
    node.free_cpus -= set(held_cpus)
    for pod in pods:
        take_assignment(node, pod)
    return node


def take_assignment(node: AdmissionNode, pod: PodAssignment) -> None:
    """Mark a listed pod's CPUs, memory blocks and devices as taken (in place). A memory block
    is taken from its NUMA nodes in ascending order, as the memory manager fills it, and puts
    them in one group; pod-level CPUs and memory count once with the containers'."""
    containers = list(pod.containers)
    cpus = set(pod.cpu_ids).union(*(c.cpu_ids for c in containers))
    node.free_cpus -= cpus
    blocks = [b for c in containers for b in c.memory]
    # a pod-level block covers the containers' blocks of its type and what the pod holds
    # beyond them (SPEC section 2, fact 3): only that excess is taken again
    for pod_block in pod.memory:
        inside = sum(b.size for b in blocks if b.memory_type == pod_block.memory_type)
        if pod_block.size > inside:
            blocks.append(MemoryBlock(pod_block.memory_type, pod_block.size - inside,
                                      pod_block.numa_ids))
    for block in blocks:
        mask = frozenset(block.numa_ids or ())
        left = block.size
        for numa in sorted(mask):
            node.memory_assignments[numa] = node.memory_assignments.get(numa, 0) + 1
            if len(node.memory_cells.get(numa, frozenset())) <= 1 or len(mask) > 1:
                node.memory_cells[numa] = mask
            free = node.memory_free.get((numa, block.memory_type), 0)
            used = min(free, left)
            if used > 0:
                node.memory_free[(numa, block.memory_type)] = free - used
                left -= used
    for container in containers:
        for entry in container.devices:
            for device_id in entry.device_ids:
                node.allocated_devices.add((entry.resource, device_id))


def _container(spec: ContainerSpec, sidecar: bool = False) -> ContainerRequest:
    return ContainerRequest(spec.name, spec.cpu_millis, dict(spec.memory), dict(spec.devices),
                            sidecar)


def pod_from_spec(pod: PodSpec) -> PodRequest:
    """A simulator profile pod as admission sees it. A profile lists sidecars apart from
    regular init containers; they are taken as started first, then the init containers.
    A fractional CPU request (``500m``) is no whole-CPU request."""
    return PodRequest(
        namespace=pod.namespace, name=pod.name,
        containers=tuple(_container(c) for c in pod.containers),
        init_containers=(*(_container(c, True) for c in pod.sidecars),
                         *(_container(c) for c in pod.init_containers)),
        qos="Guaranteed" if pod.guaranteed else "Burstable",
        pod_level_resources=pod.uses_pod_level,
    )


def pod_from_object(obj: Mapping[str, Any]) -> PodRequest:
    """A pod as the Kubernetes API shows it (``v1.Pod`` as JSON) as admission sees it: each
    container's requests (defaulted from limits), device-plugin resources from the limits, init
    containers with ``restartPolicy: Always`` as sidecars, the QoS class by Kubernetes' rules
    (Guaranteed: CPU and memory limits everywhere, requests equal; BestEffort: no CPU or memory
    anywhere). ValueError on a quantity that is no quantity."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}

    def amounts(container: Mapping[str, Any], kind: str) -> dict[str, float]:
        given = (container.get("resources") or {}).get(kind) or {}
        return {str(name): parse_quantity(value) for name, value in given.items()}

    def request(container: Mapping[str, Any]) -> ContainerRequest:
        limits = amounts(container, "limits")
        requests = {**limits, **amounts(container, "requests")}
        memory = {name: int(value) for name, value in requests.items()
                  if name == "memory" or name.startswith("hugepages-")}
        devices = {name: int(value) for name, value in limits.items()
                   if is_extended_resource(name) and not name.startswith("hugepages-")}
        return ContainerRequest(str(container.get("name", "")),
                                round(requests.get("cpu", 0) * 1000), memory, devices,
                                container.get("restartPolicy") == "Always")

    inits = [request(c) for c in spec.get("initContainers") or ()]
    apps = [request(c) for c in spec.get("containers") or ()]
    everything = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    if is_guaranteed(dict(spec)):
        qos = "Guaranteed"
    elif not any(name in ("cpu", "memory") for c in everything
                 for kind in ("requests", "limits") for name in amounts(c, kind)):
        qos = "BestEffort"
    else:
        qos = "Burstable"
    return PodRequest(str(meta.get("namespace", "")), str(meta.get("name", "")), apps, inits,
                      qos, bool(spec.get("resources")))


def to_assignment(pod: PodRequest, result: AdmissionResult) -> PodAssignment:
    """The admitted pod as ``List`` reports it: its sidecars and app containers with what
    they got (regular init containers have finished and are not listed)."""
    listed = {c.name for c in pod.containers} | {c.name for c in pod.init_containers
                                                 if c.sidecar}
    return PodAssignment(pod.namespace, pod.name, tuple(
        ContainerAssignment(a.name, a.cpus, a.memory, a.devices)
        for a in result.allocations if a.name in listed))


__all__ = [
    "POLICIES",
    "SCOPES",
    "AdmissionConfig",
    "AdmissionNode",
    "AdmissionResult",
    "ContainerAllocation",
    "ContainerRequest",
    "Device",
    "Hint",
    "PodRequest",
    "admit",
    "check_runs",
    "config_from_spec",
    "cpu_hints",
    "device_hints",
    "effective_request",
    "filter_providers_hints",
    "filter_single_numa_hints",
    "memory_hints",
    "merge",
    "merge_filtered",
    "node_from_spec",
    "pod_from_object",
    "pod_from_spec",
    "take_assignment",
    "to_assignment",
    "updated_config",
]
