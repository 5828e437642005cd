"""Shared by the SPEC scenarios: model shorthands, a simulated kubelet's assignments set by
hand, and readers of the exported figures.

The scenarios (tests/spec/, one file per part of SPEC section 2 "Data semantics", and the
names and labels of section 3) drive the real exporter (refresh loop + HTTP) against the
simulated kubelet over a real unix socket. Where the simulator's allocator cannot produce the
situation (hand-picked CPU ids, odd device topology, NUMA ids sysfs does not know, duplicates,
overlapping pod-level blocks, ...) the pod's assignment is replaced before the exporter's first
refresh; the simulator still serialises it the way the kubelet does (one device entry per
device per NUMA node, in random order).

Expected values are worked out by hand from SPEC section 2 in the comments, not taken from the
exporter.

Default machine (``small_profile``): NUMA 0 = CPUs 0-3, NUMA 1 = CPUs 4-7, CPU 0 reserved, so
allocatable CPUs are 1-3 on node 0 (3) and 4-7 on node 1 (4); 16Gi of memory and 512 x 2Mi
hugepages (1Gi) per node, memory manager Static.
"""

from __future__ import annotations

from exporter.model import Allocatable, ContainerAssignment, DeviceEntry, MemoryBlock, PodAssignment
from exporter.simulator.profile import parse_pod

from .harness import GiB, Node, small_profile

MiB = 1 << 20
C = ContainerAssignment  # shorthand: the scenarios write many containers


def dev(resource: str, device_id: str, numa) -> DeviceEntry:
    return DeviceEntry(resource, (device_id,), None if numa is None else tuple(numa))


def mem(size: int, numa, memory_type: str = "memory") -> MemoryBlock:
    return MemoryBlock(memory_type, size, None if numa is None else tuple(numa))


def put_pod(node: Node, namespace: str, name: str, *containers: ContainerAssignment,
            cpu_ids=(), memory=()) -> None:
    """Replace (or create) a pod's assignment, as the kubelet would report it in List."""
    state = node.simulator.state
    key = (namespace, name)
    if key not in state.pods:
        state.admit(parse_pod({"namespace": namespace, "name": name, "containers": []}))
    state.pods[key].assignment = PodAssignment(namespace, name, tuple(containers),
                                               tuple(cpu_ids), tuple(memory))
    state.version += 1


def set_allocatable(node: Node, cpu_ids=(), memory=(), devices=()) -> None:
    allocatable = Allocatable(tuple(cpu_ids), tuple(memory), tuple(devices))
    node.simulator.state.allocatable = lambda: allocatable
    node.simulator.state.version += 1


def small_allocatable_memory() -> list[MemoryBlock]:
    """What small_profile's memory manager reports: one block per (node, type)."""
    return [mem(16 * GiB, [0]), mem(GiB, [0], "hugepages-2Mi"),
            mem(16 * GiB, [1]), mem(GiB, [1], "hugepages-2Mi")]


def nodes_profile(ids, memory: str = "10Gi", cpus_per_node: int = 2, **overrides) -> dict:
    """A machine with the given NUMA ids, ``cpus_per_node`` CPUs each (numbered in id order)."""
    numa_nodes = []
    for index, numa_id in enumerate(ids):
        first = index * cpus_per_node
        numa_nodes.append({"id": numa_id, "cpus": f"{first}-{first + cpus_per_node - 1}",
                           "memory": memory})
    return small_profile(numa_nodes=numa_nodes, reserved_cpus="", **overrides)


def issues(s) -> dict[str, float]:
    return s.by("podresources_data_issues_total", "kind")


def issue(s, kind: str) -> float:
    return issues(s).get(kind, 0.0)


def util(s, resource: str) -> dict[str, float]:
    return s.by("podresources_numa_utilization_ratio", "numa_node", resource=resource)
