"""The simulated kubelet's replies as protobuf messages, in the kubelet's wire shape (SPEC
section 2): one device entry per device per NUMA node in Go-map order, DRA claim entries
repeated as the kubelet repeats them, and a hostile listing for the fault switch."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ..._proto.v1 import api_pb2 as v1
from ...model import DeviceEntry, MemoryBlock
from .book import SimulatedNode

T = TypeVar("T")


def claim_entries(dra_devices: Any) -> list[tuple[tuple[str, str], list[v1.ClaimResource]]]:
    """A container's DRA devices as ``DynamicResource`` entries: one per claim the container
    names, and the whole entry again each time it names the claim again (the kubelet appends
    the claim's info once per matching entry of ``resources.claims``; SPEC section 2, fact 7).
    A device already in the claim's latest entry starts the claim's next entry."""
    entries: list[tuple[tuple[str, str], list[v1.ClaimResource]]] = []
    latest: dict[tuple[str, str], tuple[set[Any], list[Any]]] = {}
    for dra in dra_devices:
        claim = (dra.claim_name, dra.claim_namespace)
        device = (dra.driver, dra.pool, dra.device, dra.share_id)
        held = latest.get(claim)
        if held is None or device in held[0]:
            held = latest[claim] = (set(), [])
            entries.append((claim, held[1]))
        held[0].add(device)
        held[1].append(v1.ClaimResource(
            cdi_devices=[v1.CDIDevice(name=n) for n in dra.cdi_devices],
            driver_name=dra.driver, pool_name=dra.pool, device_name=dra.device,
            share_id=dra.share_id))
    return entries


def rotated(items: Sequence[T], rng: random.Random) -> list[T]:
    """Go iterates a small map from a random slot, wrapping around: a random rotation."""
    if len(items) < 2:
        return list(items)
    start = rng.randrange(len(items))
    return [*items[start:], *items[:start]]


def go_map_order(devices: tuple[DeviceEntry, ...], rng: random.Random) -> list[DeviceEntry]:
    """Devices in the order the kubelet emits them: it walks ``map[resource]map[deviceID]``,
    so resources come in a rotated order and each resource's devices in a rotated order."""
    by_resource: dict[str, list[DeviceEntry]] = {}
    for device in devices:
        by_resource.setdefault(device.resource, []).append(device)
    ordered: list[DeviceEntry] = []
    for resource in rotated(list(by_resource), rng):
        ordered.extend(rotated(by_resource[resource], rng))
    return ordered


def to_bytes(reply: Any) -> bytes:
    return reply if isinstance(reply, bytes) else bytes(reply.SerializeToString())


def topology_info(numa_ids: Iterable[int]) -> v1.TopologyInfo:
    return v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in numa_ids])


def memory_v1(block: MemoryBlock) -> v1.ContainerMemory:
    message = v1.ContainerMemory(memory_type=block.memory_type, size=block.size)
    if block.numa_ids is not None:
        message.topology.CopyFrom(topology_info(block.numa_ids))
    return message


def device_entries(devices: Any) -> list[v1.ContainerDevices]:
    """The kubelet's shape: one entry per device per NUMA node, each with that one node; one
    entry without topology for a device without topology; none for a device whose topology
    names no NUMA node (``GetAllocatableResources`` converts such a registration as is; an
    assigned one is held without topology, see ``SimulatedNode``)."""
    entries = []
    for device in devices:
        for device_id in device.device_ids:
            if device.numa_ids is None:
                entries.append(v1.ContainerDevices(resource_name=device.resource,
                                                   device_ids=[device_id]))
                continue
            for numa_id in device.numa_ids:
                entries.append(v1.ContainerDevices(resource_name=device.resource,
                                                   device_ids=[device_id],
                                                   topology=topology_info([numa_id])))
    return entries


def hostile_list(rng: random.Random, state: SimulatedNode) -> v1.ListPodResourcesResponse:
    """A List reply full of things a kubelet should never say (but an exporter must survive).

    CPUs held by two pods, CPUs and NUMA ids sysfs does not know, negative ids, empty and
    repeated names, devices with an empty topology, memory blocks far beyond allocatable,
    pod-level blocks smaller than the containers', and huge numbers.
    """
    cpus = sorted(state.cpu_numa) or [0]
    max_numa = max(state.numa_ids, default=0)
    pods = []
    for index in range(rng.randint(3, 12)):
        containers = []
        for c in range(rng.randint(0, 3)):
            shared = rng.sample(cpus, k=min(len(cpus), rng.randint(0, 4)))
            containers.append(v1.ContainerResources(
                name=rng.choice(["", "app", "app", f"c{c}"]),
                cpu_ids=shared + rng.choice([[], [-1], [10**9], [cpus[0], cpus[0]]]),
                devices=[v1.ContainerDevices(
                    resource_name=rng.choice(["", "vendor.com/dev", "nvidia.com/gpu"]),
                    device_ids=rng.choice([[], [""], ["dev-0"], ["dev-0", "dev-0"], ["dev-1"]]),
                    topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in rng.choice(
                        [[], [0], [-3], [max_numa + 5], [0, 0], [1, 0, max_numa + 1]])]))
                    for _ in range(rng.randint(0, 4))],
                memory=[v1.ContainerMemory(
                    memory_type=rng.choice(["", "memory", "hugepages-2Mi", "hugepages-1Gi"]),
                    size=rng.choice([0, 1, 1 << 30, (1 << 64) - 1]),
                    topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in rng.choice(
                        [[], [0], [0, 1], [-1], [max_numa + 2]])]))
                    for _ in range(rng.randint(0, 2))],
                dynamic_resources=[v1.DynamicResource(
                    claim_name=rng.choice(["", "claim"]), claim_namespace="ns",
                    claim_resources=[v1.ClaimResource(
                        driver_name=rng.choice(["", "drv.example.com"]),
                        pool_name=rng.choice(["", "pool"]), device_name=rng.choice(["", "d0"]),
                        cdi_devices=[v1.CDIDevice(name="x=y")] * rng.randint(0, 3))])]
                if rng.random() < 0.3 else []))
        pods.append(v1.PodResources(
            name=rng.choice(["", "pod", f"pod-{index}", "pod-1"]),
            namespace=rng.choice(["", "default", "ns"]),
            containers=containers,
            cpu_ids=rng.sample(cpus, k=min(len(cpus), rng.randint(0, 3))),
            memory=[v1.ContainerMemory(memory_type="memory", size=rng.choice([0, 1, 1 << 20]),
                                       topology=topology_info([0]))] if rng.random() < 0.3 else []))
    return v1.ListPodResourcesResponse(pod_resources=pods)
