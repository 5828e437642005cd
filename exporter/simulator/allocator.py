"""The simulated kubelet's resource managers: the free CPUs, memory, devices and DRA devices of
one node, and how a pod's exclusive share is taken from them and given back.

Assignment follows what the kubelet does under Topology Manager: a pod's exclusive CPUs,
memory and devices come from one NUMA node when one can hold them all (first fit in ascending
id order, or the pod's preferred node); otherwise, or when the profile asks for ``spread``
placement (a ``best-effort`` policy), they are spread over nodes and memory blocks span nodes.
Assignments are kept as exporter model objects with each device's *full* NUMA set; the gRPC
layer expands them into the kubelet's wire shape (one entry per device per NUMA node).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..model import ContainerAssignment, DeviceEntry, DraDevice, MemoryBlock, PodAssignment
from .profile import NodeSpec, PodSpec, ProfileError, SimDevice


@dataclass
class SimPod:
    """An admitted pod: what the kubelet reports for it, and what to give back on removal."""

    spec: PodSpec
    assignment: PodAssignment
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

    def assign(self, pod: PodSpec, sim: SimPod) -> None:
        """Take ``pod``'s exclusive resources into ``sim``; :class:`NoFit` when they are not
        there (what was taken so far stays in ``sim``, for :meth:`release`)."""
        guaranteed = pod.guaranteed
        static_cpu = self.spec.cpu_manager_policy == "static"
        static_mem = self.spec.memory_manager_policy == "Static"
        # Regular init containers have finished by the time the pod runs; the kubelet hands
        # their exclusive resources on to the app containers and never reports them.
        listed = [*pod.sidecars, *pod.containers]
        cpu_need = sum(c.cpus for c in listed if guaranteed and c.exclusive_cpus and static_cpu)
        cpu_need += pod.pod_cpus if static_cpu else 0
        memory_need: dict[str, int] = {}
        for container in listed:
            for memory_type, amount in container.memory.items():
                memory_need[memory_type] = memory_need.get(memory_type, 0) + amount
        for memory_type, amount in pod.pod_memory.items():
            memory_need[memory_type] = memory_need.get(memory_type, 0) + amount
        device_need: dict[str, int] = {}
        for container in listed:
            for resource, count in container.devices.items():
                device_need[resource] = device_need.get(resource, 0) + count

        numa = None if pod.placement == "spread" else self.fitting_numa(
            pod.numa, cpu_need, memory_need if (guaranteed and static_mem) else {}, device_need)

        claims = self._allocate_claims(pod, sim)
        container_cpu_total: set[int] = set()
        memory_by_type: dict[str, list[MemoryBlock]] = {}
        containers = []
        for container in listed:
            cpus: tuple[int, ...] = ()
            if guaranteed and static_cpu and container.exclusive_cpus:
                cpus = tuple(sorted(self._take_cpus(container.cpus, numa)))
                sim.cpus.update(cpus)
                container_cpu_total.update(cpus)
            memory: tuple[MemoryBlock, ...] = ()
            if guaranteed and static_mem:
                memory = tuple(self._take_memory(memory_type, amount, numa, sim)
                               for memory_type, amount in sorted(container.memory.items()))
                for block in memory:
                    memory_by_type.setdefault(block.memory_type, []).append(block)
            devices = []
            for resource, count in sorted(container.devices.items()):
                for device in self._take_devices(resource, count, numa, sim):
                    # the device manager allocates a device registered with an empty
                    # topology like one without topology (SPEC section 2, fact 4)
                    devices.append(DeviceEntry(device.resource, (device.device_id,),
                                               device.numa_ids or None))
            dra = tuple(d for name in container.claims for d in claims.get(name, ()))
            containers.append(ContainerAssignment(container.name, cpus, memory, tuple(devices),
                                                  dra))
        pod_cpus: tuple[int, ...] = ()
        pod_memory: tuple[MemoryBlock, ...] = ()
        if pod.uses_pod_level:
            own = self._take_cpus(pod.pod_cpus, numa) if static_cpu else set()
            sim.cpus.update(own)
            if static_cpu:
                pod_cpus = tuple(sorted(container_cpu_total | own))
            if guaranteed and static_mem:
                # one pod-level block per memory type the pod-level resources name, including
                # the containers' blocks of that type; the containers' other types stay
                # container-level only (SPEC section 2, fact 3)
                blocks = []
                for memory_type in sorted(pod.pod_memory):
                    extra = pod.pod_memory.get(memory_type, 0)
                    numa_ids: set[int] = set()
                    size = 0
                    for block in memory_by_type.get(memory_type, ()):
                        numa_ids.update(block.numa_ids or ())
                        size += block.size
                    if extra:
                        own_block = self._take_memory(memory_type, extra, numa, sim)
                        numa_ids.update(own_block.numa_ids or ())
                        size += extra
                    blocks.append(MemoryBlock(memory_type, size, tuple(sorted(numa_ids))))
                pod_memory = tuple(blocks)
        sim.assignment = PodAssignment(pod.namespace, pod.name, tuple(containers), pod_cpus,
                                       pod_memory)

    def fitting_numa(self, preferred: int | None, cpus: int, memory: dict[str, int],
                     devices: dict[str, int]) -> int | None:
        """The first NUMA node (``preferred`` first) that can hold all of it, else None."""
        order = list(self.numa_ids)
        if preferred is not None:
            if preferred not in self.free_cpus:
                raise ProfileError(f"preferred NUMA node {preferred} does not exist")
            order.remove(preferred)
            order.insert(0, preferred)
        for numa in order:
            if len(self.free_cpus[numa]) < cpus:
                continue
            if any(self.free_memory.get((numa, t), 0) < amount for t, amount in memory.items()):
                continue
            if any(len(self._local_free(resource, numa)) < count
                   for resource, count in devices.items()):
                continue
            return numa
        return None

    def _local_free(self, resource: str, numa: int) -> list[SimDevice]:
        return [d for d in self.devices if d.resource == resource
                and d.device_id in self.free_devices
                and d.resource not in self.unregistered
                and (not d.numa_ids or numa in d.numa_ids)]

    def _take_cpus(self, count: int, numa: int | None) -> set[int]:
        if count <= 0:
            return set()
        if numa is not None and len(self.free_cpus[numa]) >= count:
            taken = set(sorted(self.free_cpus[numa])[:count])
        else:
            # spread: round-robin over the nodes with free CPUs, lowest ids first
            pools = {n: sorted(self.free_cpus[n]) for n in self.numa_ids}
            if sum(len(p) for p in pools.values()) < count:
                raise NoFit(f"needs {count} exclusive CPUs")
            taken = set()
            while len(taken) < count:
                for n in self.numa_ids:
                    if pools[n] and len(taken) < count:
                        taken.add(pools[n].pop(0))
        for n in self.numa_ids:
            self.free_cpus[n] -= taken
        return taken

    def _give_back_cpus(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            self.free_cpus[self.cpu_numa[cpu]].add(cpu)

    def _take_memory(self, memory_type: str, amount: int, numa: int | None,
                     sim: SimPod) -> MemoryBlock:
        order = list(self.numa_ids)
        if numa is not None:
            order.remove(numa)
            order.insert(0, numa)
            if self.free_memory.get((numa, memory_type), 0) >= amount:
                order = [numa]
        used: list[int] = []
        left = amount
        for n in order:
            free = self.free_memory.get((n, memory_type), 0)
            if free <= 0:
                continue
            take = min(free, left)
            self.free_memory[(n, memory_type)] = free - take
            sim.memory.append((n, memory_type, take))
            used.append(n)
            left -= take
            if left == 0:
                break
        if left > 0:
            raise NoFit(f"needs {amount} bytes of {memory_type}")
        return MemoryBlock(memory_type, amount, tuple(sorted(used)))

    def _take_devices(self, resource: str, count: int, numa: int | None,
                      sim: SimPod) -> list[SimDevice]:
        # a plugin that is not registered offers nothing: admission fails, as in the kubelet
        candidates = [d for d in self.devices
                      if d.resource == resource and d.device_id in self.free_devices
                      and resource not in self.unregistered]

        def preference(device: SimDevice) -> int:
            if numa is None:
                return 0
            if device.numa_ids == (numa,):
                return 0
            if device.numa_ids and numa in device.numa_ids:
                return 1
            if not device.numa_ids:
                return 2
            return 3

        candidates.sort(key=preference)  # stable: profile order within a preference
        if len(candidates) < count:
            raise NoFit(f"needs {count} x {resource}")
        taken = candidates[:count]
        for device in taken:
            self.free_devices.discard(device.device_id)
            sim.devices.append(device)
        return taken

    def _allocate_claims(self, pod: PodSpec, sim: SimPod) -> dict[str, tuple[DraDevice, ...]]:
        claims: dict[str, tuple[DraDevice, ...]] = {}
        for claim in pod.claims:
            free = self.dra_free.get(claim.driver, [])
            if claim.shared:
                pool_devices = [d for d in self._all_dra(claim.driver)][:claim.count]
                if len(pool_devices) < claim.count:
                    raise NoFit(f"claim {claim.name}: driver {claim.driver} has too few devices")
                chosen = pool_devices
            else:
                if len(free) < claim.count:
                    raise NoFit(f"claim {claim.name}: needs {claim.count} x {claim.driver}")
                chosen = free[:claim.count]
                del free[:claim.count]
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
        self._give_back_cpus(sim.cpus)
        for numa, memory_type, amount in sim.memory:
            self.free_memory[(numa, memory_type)] += amount
        for device in sim.devices:
            if device.healthy:
                self.free_devices.add(device.device_id)
        for driver, pool, dra_device in sim.dra:
            self.dra_free.setdefault(driver, []).append((driver, pool, dra_device))
            self.dra_free[driver].sort()
