"""The simulated kubelet's admission: the fit engine's rules on the simulator's exact state.

Every pod the simulator admits (a profile's, a generated one, one ``POST /pods`` submits) is
judged by :func:`exporter.fit.kubelet.topologymanager.scope.admit`, the model the exporter's fit
answers use, so the simulator keeps no admission model of its own. :meth:`Admitter.node_state`
builds the fit engine's :class:`~exporter.fit.kubelet.managers_state.ManagersState` from what the
node's managers hold: the free CPUs, memory and devices exactly as the simulator books them
(finished init containers' CPUs and devices included), the memory groups of the held blocks, every
active pod's requests for the resource-fit predicate, and the Node's allocatable as the kubelet
computes it. The pod is the one the API shows (:func:`~exporter.simulator.podobjects.pod_object`),
read as the exporter reads a pod (:func:`exporter.fit.from_pod_object.pod_shape`).

An admitted pod gets what the fit engine picked (:meth:`Admitter.admit`): the CPU ids of
``takeByTopology``; its sidecars' and app containers' memory blocks, filled over their NUMA
nodes in id order (a finished init container's memory is released when the next container is
added, ``memory_manager.go`` ``AddContainer``); per set of NUMA nodes, that many free devices
of the set (reusable ones of its init containers first). A rejected pod holds nothing; its
reason and message are the kubelet's.

The fit engine does not model a pod's own pool under ``PodLevelResourceManagers``, which the
kubelet allocates under scope ``pod`` only (``scope_pod.go`` ``admitUsingPodResources``): there a
profile's ``pod_level`` CPUs and memory beyond the containers' are taken next to them
(:func:`_pod_level`), for ``List``'s pod-level fields (SPEC section 2).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...fit.from_pod_object import pod_shape
from ...fit.kubelet.allocation.allocation_manager import admit
from ...fit.kubelet.cpumanager.policy_options import CpuOptions
from ...fit.kubelet.cpumanager.policy_static import pick_cpus
from ...fit.kubelet.cpumanager.state import CpuManagerState
from ...fit.kubelet.cpumanager.topology import CpuTopology
from ...fit.kubelet.devicemanager.manager import DeviceState
from ...fit.kubelet.managers_state import ManagersState, NodeRequests
from ...fit.kubelet.memorymanager.policy_static import take_memory
from ...fit.kubelet.memorymanager.state import MemoryNode
from ...fit.kubelet.podshape import CPU, PodShape, asks
from ...fit.kubelet.topologymanager.scope import Placement, Verdict
from ...fit.kubelet.topologymanager.topology_manager import NumaSet
from ...model import ContainerAssignment, DeviceEntry, MemoryBlock, PodAssignment
from ..cpulayout import kubelet_topology
from ..podobjects import pod_object
from ..profile import NodeSpec, PodSpec, SimDevice
from .admissionconfig import AdmissionConfig
from .allocator import Allocator, SimPod

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class PlacedContainer:
    """What one container got: ``numa`` is the Topology Manager's merged hint (every NUMA id
    for "any node"; empty when nothing of it is aligned, or under policy ``none``)."""

    name: str
    numa: frozenset[int] = frozenset()
    cpus: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceEntry, ...] = ()


@dataclass(frozen=True)
class Admission:
    """The kubelet's verdict on one pod; truthy when it was admitted. ``containers``: every
    container in admission order (init containers first), when admitted."""

    admitted: bool
    reason: str | None = None
    message: str = ""
    containers: tuple[PlacedContainer, ...] = ()
    pod: SimPod | None = field(default=None, repr=False)
    after: ManagersState | None = field(default=None, repr=False)  # the managers' state after it

    def __bool__(self) -> bool:
        return self.admitted


def simulated_node_allocatable(spec: NodeSpec, devices: Iterable[SimDevice],
                               unregistered: frozenset[str]) -> dict[str, int]:
    """The Node's allocatable as the kubelet computes it (what the resource-fit predicate and
    the API's Node show): CPUs less the reserved ones (``reservedSystemCPUs``) in millicores,
    each memory type less the reserved memory, ``maxPods``, the healthy devices of registered
    plugins."""
    allocatable = {CPU: 1000 * len(spec.all_cpus - spec.reserved_cpus), "pods": spec.max_pods}
    for (_, memory_type), amount in spec.allocatable_memory().items():
        allocatable[memory_type] = allocatable.get(memory_type, 0) + amount
    for device in devices:
        count = allocatable.setdefault(device.resource, 0)
        if device.healthy and device.resource not in unregistered:
            allocatable[device.resource] = count + 1
    return allocatable


def _fill(memory: Mapping[int, MemoryNode], blocks: Iterable[MemoryBlock]
          ) -> dict[int, MemoryNode]:
    """The blocks taken one after another as the memory manager takes them (each NUMA node of
    a block in id order; every node of it joins the block's group)."""
    nodes = dict(memory)
    for block in blocks:
        mask = frozenset(block.numa_ids or ())
        if mask:
            nodes = take_memory(nodes, {block.memory_type: block.size}, mask, {})
    return nodes


class Admitter:
    """The kubelet's admission on one simulated node: the fit engine fed the simulator's
    books (``resources``)."""

    def __init__(self, spec: NodeSpec, resources: Allocator):
        self.spec = spec
        self.resources = resources
        self.numa_ids = tuple(sorted(n.numa_id for n in spec.numa_nodes))
        # the cores, sockets and uncore caches cAdvisor reads from the simulator's sysfs
        machine = kubelet_topology(spec)
        self.siblings = {cpu: machine.siblings(cpu) for cpu in spec.all_cpus}
        self.topology = CpuTopology.build(dict(resources.cpu_numa), self.siblings,
                                          machine.cpu_packages, machine.cpu_uncore)
        self.online = {n.numa_id: frozenset(n.cpus) for n in spec.numa_nodes}
        self.reserved_cores = frozenset(c for r in spec.reserved_cpus for c in self.siblings[r])

    # ---- the managers' state -------------------------------------------------------------

    def node_state(self, held: Sequence[SimPod]) -> ManagersState:
        """What the kubelet's managers hold with ``held`` (every pod holding resources, in
        admission order) admitted."""
        books = self.resources
        cpu = None
        if self.spec.cpu_manager_policy == "static":
            free = frozenset().union(*books.free_cpus.values())
            cpu = CpuManagerState(self.online, free, books.cpu_numa, self.siblings,
                                  max(self.topology.cpus_per_core(), 1), self.reserved_cores,
                                  self.topology)
        memory = None
        if self.spec.memory_manager_policy == "Static":
            empty = {n: MemoryNode({}, {}, frozenset({n})) for n in self.numa_ids}
            for (numa, memory_type), amount in books.allocatable_memory.items():
                types = dict(empty[numa].allocatable)
                types[memory_type] = amount
                empty[numa] = replace(empty[numa], allocatable=types, free=types)
            grouped = _fill(empty, (b for p in held for b in p.memory_blocks))
            memory = {n: replace(node, free={t: books.free_memory.get((n, t), 0)
                                             for t in node.allocatable})
                      for n, node in grouped.items()}
        active = [p for p in held if p.spec.active]
        requested: dict[str, int] = {}
        for pod in active:
            for resource, amount in pod.requests.items():
                requested[resource] = requested.get(resource, 0) + amount
        requests = NodeRequests(simulated_node_allocatable(self.spec, books.devices,
                                                           books.unregistered),
                                requested, len(active), complete=True)
        return ManagersState(self.numa_ids, cpu, memory, self._devices(held),
                             self.spec.distances(), requests)

    def _devices(self, held: Sequence[SimPod]) -> dict[str, DeviceState]:
        """Per device resource: every registered device (``allDevices``, unhealthy ones
        included), the free ones, the healthy count and the held count. A plugin that is not
        registered now has every device unhealthy (as a disconnected plugin's)."""
        books = self.resources
        registered: dict[str, dict[NumaSet, int]] = {}
        free: dict[str, dict[NumaSet, int]] = {}
        healthy: dict[str, int] = {}
        for device in books.devices:
            where = frozenset(device.numa_ids or ())
            counts = registered.setdefault(device.resource, {})
            counts[where] = counts.get(where, 0) + 1
            pool = free.setdefault(device.resource, {})
            usable = device.healthy and device.resource not in books.unregistered
            pool[where] = pool.get(where, 0) + int(usable and device.device_id
                                                   in books.free_devices)
            healthy[device.resource] = healthy.get(device.resource, 0) + int(usable)
        held_count: dict[str, int] = {}
        for pod in held:
            for device in pod.devices:
                held_count[device.resource] = held_count.get(device.resource, 0) + 1
        return {r: DeviceState(registered[r], free[r], healthy[r], held_count.get(r, 0))
                for r in registered}

    def shape(self, pod: PodSpec) -> PodShape:
        """The pod as the API shows it, as admission reads it."""
        return pod_shape(pod_object(pod, self.spec.name, pod.phase), f"{pod.namespace}/"
                         f"{pod.name}")

    # ---- admission -----------------------------------------------------------------------

    def admit(self, pod: PodSpec, before: ManagersState, config: AdmissionConfig,
              uid: str = "") -> Admission:
        """The kubelet's verdict on ``pod`` against ``before``; an admitted pod's resources
        are taken off the books (``Admission.pod`` holds them, ``Admission.after`` is the
        managers' state after it)."""
        shape = self.shape(pod)
        rules = config.rules(self.spec)
        verdict = admit(shape, before, rules)
        if not verdict.admitted or verdict.state is None:
            return Admission(False, verdict.reason,
                             self._message(verdict, shape, before, config))
        sim = SimPod(spec=pod, assignment=PodAssignment(pod.namespace, pod.name),
                     uid=uid or str(uuid.uuid4()), requests=shape.requests())
        placed, listed, inits, devices = self._containers(pod, verdict, before, config)
        cpus = {c for p in verdict.placements for c in p.cpu_ids}
        after_cpu = verdict.state.cpu
        pod_cpus: tuple[int, ...] = ()
        pod_memory: tuple[MemoryBlock, ...] = ()
        beyond: tuple[MemoryBlock, ...] = ()
        if (pod.uses_pod_level and config.pod_level_resource_managers
                and config.topology_manager_scope == "pod" and shape.qos == "Guaranteed"):
            level = _pod_level(pod, listed, verdict.state, rules.cpu_options())
            if level is None:
                return Admission(False, UNEXPECTED_ADMISSION_ERROR, _unexpected(
                    "not enough resources for the pod-level resources"))
            pod_cpus, pod_memory, extra, beyond = level
            cpus |= extra
            if after_cpu is not None:
                after_cpu = replace(after_cpu, free=after_cpu.free - extra)
        sim.assignment = PodAssignment(pod.namespace, pod.name, tuple(listed), pod_cpus,
                                       pod_memory)
        sim.init_containers = tuple(inits)
        sim.memory_blocks = (*(b for c in listed for b in c.memory), *beyond)
        memory = before.memory
        used: dict[tuple[int, str], int] = {}
        if memory is not None:
            filled = _fill(memory, sim.memory_blocks)
            used = {(n, t): memory[n].free.get(t, 0) - filled[n].free.get(t, 0)
                    for n in filled for t in filled[n].free}
            memory = filled
        self.resources.hold(sim, cpus, used, devices)
        after = replace(verdict.state, cpu=after_cpu, memory=memory)
        return Admission(True, None, "", tuple(placed), sim, after)

    def _containers(self, pod: PodSpec, verdict: Verdict, before: ManagersState,
                    config: AdmissionConfig
                    ) -> tuple[list[PlacedContainer], list[ContainerAssignment],
                               list[ContainerAssignment], list[SimDevice]]:
        """Each container's CPUs, memory blocks and concrete devices; the listed ones (sidecars
        and app containers), the finished init containers, and every device taken."""
        order = [*((c, False) for c in pod.sidecars), *((c, True) for c in pod.init_containers),
                 *((c, False) for c in pod.containers)]
        free = {r: self.resources.free_devices_by_set(r)
                for r in {r for p in verdict.placements for r in p.device_sets}}
        reusable: dict[str, dict[NumaSet, list[SimDevice]]] = {}
        placed: list[PlacedContainer] = []
        listed: list[ContainerAssignment] = []
        inits: list[ContainerAssignment] = []
        taken: list[SimDevice] = []
        for (spec, regular_init), placement in zip(order, verdict.placements, strict=True):
            devices: list[SimDevice] = []
            for resource, sets in placement.device_sets.items():
                pool = reusable.setdefault(resource, {})
                for numa, count in sorted(sets.items(), key=lambda s: sorted(s[0])):
                    again = pool.get(numa, [])[:count]
                    fresh = free[resource].get(numa, [])[:count - len(again)]
                    if len(again) + len(fresh) != count:
                        raise RuntimeError(f"{resource}: the books lack the devices on NUMA "
                                           f"nodes {sorted(numa)} the fit engine took")
                    del free[resource][numa][:len(fresh)]
                    if regular_init:
                        pool.setdefault(numa, []).extend(fresh)
                    else:
                        pool[numa] = pool.get(numa, [])[len(again):]
                    devices += again + fresh
                    taken += fresh
            entries = tuple(DeviceEntry(d.resource, (d.device_id,), d.numa_ids or None)
                            for d in devices)
            blocks = tuple(MemoryBlock(t, size, tuple(sorted(mask)))
                           for t, size, mask in placement.memory_blocks)
            cpus = tuple(sorted(placement.cpu_ids))
            placed.append(PlacedContainer(spec.name, self._numa(placement, before, config),
                                          cpus, () if regular_init else blocks, entries))
            assignment = ContainerAssignment(spec.name, cpus, () if regular_init else blocks,
                                             entries)
            (inits if regular_init else listed).append(assignment)
        return placed, listed, inits, taken

    def _numa(self, placement: Placement, before: ManagersState,
              config: AdmissionConfig) -> frozenset[int]:
        if config.topology_manager_policy == "none":
            return frozenset()
        if placement.hint is not None:
            return placement.hint
        ask = placement.ask
        aligned = ((ask.cpus and before.cpu is not None)
                   or (ask.memory and before.memory is not None)
                   or any(before.devices[r].topology_aware() for r in ask.devices
                          if r in before.devices))
        return frozenset(self.numa_ids) if aligned else frozenset()

    def _message(self, verdict: Verdict, shape: PodShape, before: ManagersState,
                 config: AdmissionConfig) -> str:
        """The kubelet's message for a rejection (``admission.GetPodAdmitResult``): the
        error's own text when it has a type, else ``Allocate failed due to ..., which is
        unexpected``."""
        if verdict.reason == SMT_ALIGNMENT_ERROR:
            container = next((c for c, _ in shape.in_admission_order()
                              if c.name == verdict.container), None)
            state = verdict.before or before
            asked = asks(shape, container, config.rules(self.spec).managers).cpus \
                if container is not None else 0
            threads = state.cpu.threads_per_core if state.cpu is not None else 1
            if threads and asked % threads:
                return (f"SMT Alignment Error: requested {asked} cpus not multiple cpus per "
                        f"core = {threads}")
            available = state.cpu.free_physical() if state.cpu is not None else 0
            return (f"SMT Alignment Error: not enough free physical CPUs: available physical "
                    f"CPUs = {available}, requested CPUs = {asked}, CPUs per core = {threads}")
        if verdict.reason == UNEXPECTED_ADMISSION_ERROR:
            devices = before.devices.get(verdict.blocking_resource)
            if devices is not None and devices.healthy_total() == 0:
                return _unexpected(f"no healthy devices present; cannot allocate unhealthy "
                                   f"devices {verdict.blocking_resource}")
            return _unexpected(verdict.message)
        return verdict.message


def _unexpected(error: str) -> str:
    """``admission.GetPodAdmitResult`` for an error without a type."""
    return f"Allocate failed due to {error}, which is unexpected"


def _pod_level(pod: PodSpec, listed: Sequence[ContainerAssignment], state: ManagersState,
               options: CpuOptions) -> tuple[tuple[int, ...], tuple[MemoryBlock, ...],
                                             frozenset[int], tuple[MemoryBlock, ...]] | None:
    """The pod's own CPUs and memory beyond its containers' (``pod_level``), taken next to
    them: the pod-level CPU set (the containers' and its own) and one pod-level block per
    memory type it names, as ``List`` shows them; the CPUs and the memory blocks taken beyond
    the containers'; ``None`` when they are not there."""
    container_cpus = frozenset(c for a in listed for c in a.cpu_ids)
    extra: frozenset[int] = frozenset()
    cpu = state.cpu
    if cpu is not None and pod.pod_cpus:
        where = frozenset(cpu.cpu_numa[c] for c in container_cpus) or None
        picked = pick_cpus(cpu, pod.pod_cpus, where, frozenset(), options)
        if picked is None:
            return None
        extra = picked
    near = sorted({cpu.cpu_numa[c] for c in container_cpus | extra}) if cpu is not None else []
    memory = state.memory or {}
    shown: list[MemoryBlock] = []
    taken: list[MemoryBlock] = []
    for memory_type in sorted(pod.pod_memory):
        own = [b for a in listed for b in a.memory if b.memory_type == memory_type]
        numa = {n for b in own for n in b.numa_ids or ()}
        size = sum(b.size for b in own)
        beyond = pod.pod_memory[memory_type]
        if beyond:
            node = next((n for n in [*near, *sorted(memory)]
                         if n in memory and memory[n].free.get(memory_type, 0) >= beyond), None)
            if node is None:
                return None
            taken.append(MemoryBlock(memory_type, beyond, (node,)))
            numa.add(node)
            size += beyond
        shown.append(MemoryBlock(memory_type, size, tuple(sorted(numa))))
    cpus = tuple(sorted(container_cpus | extra)) if cpu is not None else ()
    return cpus, tuple(shown), extra, tuple(taken)
