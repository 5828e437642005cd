"""The limits on absurd kubelet replies, and whether an encoded pod or reply passes one.

Far beyond any real node (Linux supports at most 1,024 NUMA nodes and 8,192 CPUs; a node runs a
handful of memory types). Past a limit, the part is counted as a data issue and left out, so a
broken or hostile kubelet cannot make a refresh slow or large. docs/metrics.md lists them.

A reply is checked against the limits before it is converted (counting costs one pass over the
entries, no Python object per CPU id). Only a pod or allocatable reply past a limit takes the
slower, careful conversion of :mod:`.convert`, which leaves the oversized part out and records
it; everything else takes the plain conversion.
"""

from __future__ import annotations

from typing import Any

from ..issues import MAX_NUMA_IDS
from ..model import PodAssignment

MAX_CPU_IDS = 16384  # CPU ids in one list (a container's, a pod's, the allocatable one)
# CPU ids in one List reply in all: each CPU is listed at most twice (container and pod level)
MAX_CPU_IDS_PER_REPLY = 65536
MAX_MEMORY_TYPES = 64  # distinct memory types in one list of memory blocks
MAX_MEMORY_BLOCKS = 256  # memory blocks in one container's or pod's list
MAX_ENTRIES_PER_POD = 16384  # containers, device entries and ids, memory blocks, DRA devices
# GetAllocatableResources lists one memory block per NUMA node and type, and every device
MAX_ALLOCATABLE_MEMORY_BLOCKS = MAX_NUMA_IDS * MAX_MEMORY_TYPES
MAX_ALLOCATABLE_DEVICE_ENTRIES = 65536  # device entries and ids


def numa_count(message: Any) -> int:
    return len(message.topology.nodes) if message.HasField("topology") else 0


def pod_entries(pod: Any, with_topology: bool = True) -> int:
    """Containers, device entries and ids, memory blocks and DRA devices of one listing
    (memory lists left out for their own size do not count)."""
    entries = len(pod.containers) + (_memory_entries(pod.memory) if with_topology else 0)
    for container in pod.containers:
        entries += len(container.devices)
        for entry in container.devices:
            entries += len(entry.device_ids)
        if with_topology:
            entries += _memory_entries(container.memory)
            for claim in container.dynamic_resources:
                entries += len(claim.claim_resources)
    return entries


def _memory_dropped(blocks: Any, limit: int) -> bool:
    return len(blocks) > limit or len({b.memory_type for b in blocks}) > MAX_MEMORY_TYPES


def _memory_entries(blocks: Any) -> int:
    return 0 if _memory_dropped(blocks, MAX_MEMORY_BLOCKS) else len(blocks)


def memory_too_large(blocks: Any, limit: int) -> bool:
    return len(blocks) > limit or any(numa_count(b) > MAX_NUMA_IDS for b in blocks) or (
        len(blocks) > MAX_MEMORY_TYPES and len({b.memory_type for b in blocks}) > MAX_MEMORY_TYPES)


def exceeds_limits_v1(pod: Any) -> bool:
    """Whether a v1 pod listing has any part past the limits."""
    if len(pod.cpu_ids) > MAX_CPU_IDS or memory_too_large(pod.memory, MAX_MEMORY_BLOCKS):
        return True
    for container in pod.containers:
        if len(container.cpu_ids) > MAX_CPU_IDS or memory_too_large(container.memory,
                                                                     MAX_MEMORY_BLOCKS):
            return True
        if any(numa_count(entry) > MAX_NUMA_IDS for entry in container.devices):
            return True
    return pod_entries(pod) > MAX_ENTRIES_PER_POD


# The smallest encoding that can pass a limit is 65 memory blocks of distinct one-letter types
# (5 bytes each); every other limit takes more bytes (a NUMA id, an entry, a CPU id: a byte at
# least each). A smaller pod listing is within every limit and is not checked.
SMALLEST_OVERSIZED = 5 * MAX_MEMORY_TYPES


def message_cpus(pod: Any, size: int) -> int:
    """The CPU ids a pod listing of ``size`` bytes keeps once converted (lists past the limit
    are left out, and all of a pod past the entries limit)."""
    if not hasattr(pod, "cpu_ids"):
        return 0  # v1alpha1: no CPUs
    if size > MAX_ENTRIES_PER_POD and pod_entries(pod) > MAX_ENTRIES_PER_POD:
        return 0
    counts = [len(pod.cpu_ids), *(len(c.cpu_ids) for c in pod.containers)]
    return sum(n for n in counts if n <= MAX_CPU_IDS)


def pod_cpus(pod: PodAssignment) -> int:
    return len(pod.cpu_ids) + sum(len(container.cpu_ids) for container in pod.containers)


def exceeds_limits_v1alpha1(pod: Any) -> bool:
    return pod_entries(pod, with_topology=False) > MAX_ENTRIES_PER_POD



def allocatable_exceeds_sizes(reply: Any) -> bool:
    """The limits on the reply's lists, without the NUMA ids of each device entry."""
    return (len(reply.cpu_ids) > MAX_CPU_IDS
            or memory_too_large(reply.memory, MAX_ALLOCATABLE_MEMORY_BLOCKS)
            or len(reply.devices) + sum(len(e.device_ids) for e in reply.devices)
            > MAX_ALLOCATABLE_DEVICE_ENTRIES)


def allocatable_exceeds_limits(reply: Any) -> bool:
    return (allocatable_exceeds_sizes(reply)
            or any(numa_count(entry) > MAX_NUMA_IDS for entry in reply.devices))
