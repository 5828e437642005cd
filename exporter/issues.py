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
    # CPUs of a grouped DRA CPU device whose number the pod context does not give
    DRA_CPUS_UNCOUNTED = "dra_cpus_uncounted"
    # absurd sizes (see the limits below): the item, list or pod is left out, not processed
    TOO_MANY_NUMA_IDS = "too_many_numa_ids"
    TOO_MANY_CPU_IDS = "too_many_cpu_ids"
    TOO_MANY_MEMORY_TYPES = "too_many_memory_types"
    TOO_MANY_ENTRIES = "too_many_entries"


# NUMA ids one item (device, memory block) may name: past it, the item's locality is unknown.
# The one limit on absurd replies the accounting applies as well; the others, and the checks,
# are in exporter/kubelet/limits.py (docs/metrics.md lists them).
MAX_NUMA_IDS = 1024


class Issues:
    """Data issues by kind, with one example message per kind (the first one seen)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def add(self, kind: IssueKind, example: str, count: int = 1) -> None:
        self.counts[kind] += count
        self.examples.setdefault(kind, example)
