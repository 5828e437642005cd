"""Utilization per single NUMA node (SPEC section 2): allocated over allocatable, capped at 1,
an excess counted as the data issue ``allocated_exceeds_allocatable``; memory blocks spanning
NUMA nodes apportioned to their members (an estimate). Pure functions, no I/O.
"""

from __future__ import annotations

from ..issues import IssueKind, Issues
from .numa import UNKNOWN, apportion_group_memory, label_ids

Ratios = dict[tuple[str, str], float]  # (NUMA label, resource) -> ratio
Amounts = dict[tuple[str, str], int]  # (NUMA label, memory type) -> bytes


def memory_utilization(utilization: Ratios, allocatable: Amounts, allocated: Amounts,
                       issues: Issues, allocatable_known: bool) -> None:
    """Utilization per single node and memory type, with group memory apportioned; memory
    assigned on a node with none allocatable (when allocatable is known) is an excess."""
    capacities: dict[str, dict[int, int]] = {}  # per memory type
    singles: dict[str, dict[int, int]] = {}
    groupings: dict[str, dict[tuple[int, ...], int]] = {}
    for (label, kind), size in allocatable.items():
        capacity = capacities.setdefault(kind, {})
        if label != UNKNOWN and "," not in label:
            capacity[int(label)] = capacity.get(int(label), 0) + size
    for (label, kind), size in allocated.items():
        if label == UNKNOWN:
            continue
        ids = label_ids(label)
        if len(ids) == 1:
            single = singles.setdefault(kind, {})
            single[ids[0]] = single.get(ids[0], 0) + size
        elif size:
            groups = groupings.setdefault(kind, {})
            groups[ids] = groups.get(ids, 0) + size
    types = set(capacities)
    if allocatable_known:
        types |= {memory_type for (label, memory_type), size in allocated.items()
                  if size and label != UNKNOWN}
    for memory_type in sorted(types):
        capacity = capacities.get(memory_type, {})
        totals = apportion_group_memory(capacity, singles.get(memory_type, {}),
                                        groupings.get(memory_type, {}))
        for node, size in capacity.items():
            if size > 0:
                set_ratio(utilization, issues, str(node), memory_type, totals.get(node, 0), size)
        for node, size in totals.items():
            if size > 0 and capacity.get(node, 0) <= 0:
                excess(issues, str(node), memory_type, size)


def excess(issues: Issues, numa: str, resource: str, allocated: int,
            allocatable: int = 0) -> None:
    issues.add(IssueKind.ALLOCATED_EXCEEDS_ALLOCATABLE,
               f"{resource} on NUMA node {numa}: {allocated} allocated, "
               f"{allocatable} allocatable")


def set_ratio(utilization: Ratios, issues: Issues, numa: str, resource: str,
               allocated: int, allocatable: int) -> None:
    if allocatable <= 0:
        return
    if allocated > allocatable:
        excess(issues, numa, resource, allocated, allocatable)
        utilization[(numa, resource)] = 1.0
    else:
        utilization[(numa, resource)] = allocated / allocatable
