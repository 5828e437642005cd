"""Every kind of data issue, in one place: the ``kind`` label of ``podresources_data_issues_total``.

Inconsistent or absurd kubelet data is counted by kind and never stops the rest of a snapshot
(SPEC section 2). The accounting, the refresh loop and the health section all name kinds
through :class:`IssueKind`, so a kind cannot be spelled two ways; ``docs/metrics.md`` explains
each one.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum


class IssueKind(StrEnum):
    """A data issue kind; its value is the label value."""

    ALLOCATED_EXCEEDS_ALLOCATABLE = "allocated_exceeds_allocatable"
    CPU_MULTIPLE_OWNERS = "cpu_multiple_owners"
    CPU_NOT_ALLOCATABLE = "cpu_not_allocatable"
    DEVICE_MULTIPLE_OWNERS = "device_multiple_owners"
    DUPLICATE_ENTRY = "duplicate_entry"
    INVALID_ENTRY = "invalid_entry"
    NEGATIVE_NUMA_ID = "negative_numa_id"
    POD_MEMORY_BELOW_CONTAINERS = "pod_memory_below_containers"
    UNKNOWN_CPU = "unknown_cpu"
    UNKNOWN_NUMA_ID = "unknown_numa_id"
    INVALID_REPLY = "invalid_reply"
    MESSAGE_TOO_LARGE = "message_too_large"
    TERMINATED_POD = "terminated_pod"
    # absurd sizes (see the limits below): the item, list or pod is left out, not processed
    TOO_MANY_NUMA_IDS = "too_many_numa_ids"
    TOO_MANY_CPU_IDS = "too_many_cpu_ids"
    TOO_MANY_MEMORY_TYPES = "too_many_memory_types"
    TOO_MANY_ENTRIES = "too_many_entries"


# Limits on what one reply may contain, far beyond any real node (Linux supports at most 1,024
# NUMA nodes and 8,192 CPUs; a node runs a handful of memory types). Past a limit, the part is
# counted as a data issue and left out, so a broken or hostile kubelet cannot make a refresh
# slow or large. docs/metrics.md lists them.
MAX_NUMA_IDS = 1024  # NUMA ids one item (device, memory block) names
MAX_CPU_IDS = 16384  # CPU ids in one list (a container's, a pod's, the allocatable one)
# CPU ids in one List reply in all: each CPU is listed at most twice (container and pod level)
MAX_CPU_IDS_PER_REPLY = 65536
MAX_MEMORY_TYPES = 64  # distinct memory types in one list of memory blocks
MAX_MEMORY_BLOCKS = 256  # memory blocks in one container's or pod's list
MAX_ENTRIES_PER_POD = 16384  # containers, device entries and ids, memory blocks, DRA devices
# GetAllocatableResources lists one memory block per NUMA node and type, and every device
MAX_ALLOCATABLE_MEMORY_BLOCKS = MAX_NUMA_IDS * MAX_MEMORY_TYPES
MAX_ALLOCATABLE_DEVICE_ENTRIES = 65536  # device entries and ids


class Issues:
    """Data issues by kind, with one example message per kind (the first one seen)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def add(self, kind: IssueKind, example: str, count: int = 1) -> None:
        self.counts[kind] += count
        self.examples.setdefault(kind, example)
