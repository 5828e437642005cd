"""The simulated kubelet's resource managers' books: the free CPUs, memory, devices and DRA
devices of one node, and what each admitted pod holds of them.

What a pod gets is decided by admission (:mod:`.admitting`, the fit engine's rules); this module
only takes it off the free resources (:meth:`Allocator.hold`) and gives it back when the pod
goes (:meth:`Allocator.release`). DRA claims, which the scheduler allocates and the kubelet
never aligns, are served here. Assignments are kept as exporter model objects with each
device's *full* NUMA set; the gRPC layer expands them into the kubelet's wire shape (one entry
per device per NUMA node).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ...model import ContainerAssignment, DraDevice, MemoryBlock, PodAssignment
from ..profile import NodeSpec, PodSpec, SimDevice


@dataclass
class SimPod:
    """An admitted pod: what the kubelet reports for it, and what to give back on removal."""

    spec: PodSpec
    assignment: PodAssignment
    uid: str = ""
    # finished regular init containers: the CPUs and devices they keep (cpu_manager_state and
    # the device checkpoint show them, List does not)
    init_containers: tuple[ContainerAssignment, ...] = ()
    # what the kubelet's resource-fit predicate counts for it (cpu in millicores, bytes, units)
    requests: dict[str, int] = field(default_factory=dict)
    # the memory manager's blocks it holds: its listed containers', and a pod-level pool's
    # memory beyond them (List's pod-level block covers both)
    memory_blocks: tuple[MemoryBlock, ...] = ()
    cpus: set[int] = field(default_factory=set)
    memory: list[tuple[int, str, int]] = field(default_factory=list)  # (numa, type, bytes)
    devices: list[SimDevice] = field(default_factory=list)
    dra: list[tuple[str, str, str]] = field(default_factory=list)  # exclusive DRA devices
    released: bool = False


class NoFit(Exception):
    """The node lacks what a pod needs (the reason is the message)."""


class Allocator:
    """The free exclusive resources of one node (CPU, memory and device managers, DRA)."""

    def __init__(self, spec: NodeSpec, rng: random.Random):
        self.spec = spec
        self.rng = rng  # the node's: DRA share ids follow the profile's seed
        self.numa_ids = sorted(n.numa_id for n in spec.numa_nodes)
        self.cpu_numa = {cpu: n.numa_id for n in spec.numa_nodes for cpu in n.cpus}
        static_cpus = spec.cpu_manager_policy == "static"
        self.allocatable_cpus = (spec.all_cpus - spec.reserved_cpus) if static_cpus else frozenset()
        self.free_cpus: dict[int, set[int]] = {
            n.numa_id: set(n.cpus - spec.reserved_cpus) for n in spec.numa_nodes}
        self.allocatable_memory = spec.allocatable_memory()
        self.free_memory = dict(self.allocatable_memory)
        self.devices = list(spec.devices)
        self.devices_of: dict[str, list[SimDevice]] = {}
        for device in self.devices:
            self.devices_of.setdefault(device.resource, []).append(device)
        self.free_devices: set[str] = {d.device_id for d in self.devices if d.healthy}
        # Device resources whose plugin is not registered now (after a kubelet restart, or
        # disconnected): none of their devices is allocatable or assignable; the server sets it.
        self.unregistered: frozenset[str] = frozenset()
        self.dra_free: dict[str, list[tuple[str, str, str]]] = {}
        for pool in spec.dra_pools:
            self.dra_free.setdefault(pool.driver, []).extend(
                (pool.driver, pool.pool, device) for device in pool.devices)
        self.cdi_prefix = {(p.driver, p.pool): p.cdi_prefix for p in spec.dra_pools}

    def set_health(self, device_id: str, healthy: bool,
                   in_use: Callable[[SimDevice], bool]) -> None:
        """Flip a device's health: unhealthy devices leave allocatable but stay assigned."""
        for device in self.devices:
            if device.device_id == device_id:
                device.healthy = healthy
                if healthy and not in_use(device):
                    self.free_devices.add(device_id)
                else:
                    self.free_devices.discard(device_id)

    def hold(self, sim: SimPod, cpus: Iterable[int], memory: Mapping[tuple[int, str], int],
             devices: Iterable[SimDevice]) -> None:
        """Take what admission gave ``sim`` off the free resources: its CPUs, the bytes of each
        (NUMA id, memory type), its devices."""
        taken = set(cpus)
        sim.cpus |= taken
        for numa in self.free_cpus:
            self.free_cpus[numa] -= taken
        for (numa, memory_type), used in memory.items():
            if used > 0:
                self.free_memory[(numa, memory_type)] -= used
                sim.memory.append((numa, memory_type, used))
        for device in devices:
            self.free_devices.discard(device.device_id)
            sim.devices.append(device)

    def free_devices_by_set(self, resource: str) -> dict[frozenset[int], list[SimDevice]]:
        """The free devices of ``resource`` (healthy, unassigned, of a registered plugin) per
        set of NUMA nodes (the empty set: no topology), in profile order."""
        found: dict[frozenset[int], list[SimDevice]] = {}
        if resource in self.unregistered:
            return found
        for device in self.devices_of.get(resource, ()):
            if device.device_id in self.free_devices:
                found.setdefault(frozenset(device.numa_ids or ()), []).append(device)
        return found

    def allocate_claims(self, pod: PodSpec, sim: SimPod) -> dict[str, tuple[DraDevice, ...]]:
        claims: dict[str, tuple[DraDevice, ...]] = {}
        for claim in pod.claims:
            free = self.dra_free.get(claim.driver, [])
            candidates = self._all_dra(claim.driver) if claim.shared else free
            if claim.devices:  # the scheduler's choice, by name
                candidates = [d for d in candidates if d[2] in claim.devices]
            if len(candidates) < claim.count:
                raise NoFit(f"claim {claim.name}: needs {claim.count} x {claim.driver}")
            chosen = candidates[:claim.count]
            if not claim.shared:
                for taken in chosen:
                    free.remove(taken)
                sim.dra.extend(chosen)
            devices = []
            accumulated: list[str] = []
            for driver, pool, device in chosen:
                cdi = f"{self.cdi_prefix[(driver, pool)]}={device}"
                accumulated.append(cdi)
                share_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4)) \
                    if claim.shared else None
                devices.append(DraDevice(
                    driver=driver, pool=pool, device=device,
                    claim_name=f"{pod.name}-{claim.name}", claim_namespace=pod.namespace,
                    share_id=share_id,
                    cdi_devices=tuple(accumulated) if self.spec.cdi_accumulation else (cdi,),
                ))
            claims[claim.name] = tuple(devices)
        return claims

    def _all_dra(self, driver: str) -> list[tuple[str, str, str]]:
        return [(p.driver, p.pool, d) for p in self.spec.dra_pools if p.driver == driver
                for d in p.devices]

    def release(self, sim: SimPod) -> None:
        """Give back what ``sim`` holds (once)."""
        if sim.released:
            return
        sim.released = True
        for cpu in sim.cpus:
            self.free_cpus[self.cpu_numa[cpu]].add(cpu)
        for numa, memory_type, amount in sim.memory:
            self.free_memory[(numa, memory_type)] += amount
        for device in sim.devices:
            if device.healthy:
                self.free_devices.add(device.device_id)
        for driver, pool, dra_device in sim.dra:
            self.dra_free.setdefault(driver, []).append((driver, pool, dra_device))
            self.dra_free[driver].sort()
