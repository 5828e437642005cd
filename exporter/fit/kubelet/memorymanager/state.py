"""What the memory manager's ``Static`` policy holds per NUMA node
(``memorymanager/state/state.go`` ``NUMANodeState``, v1.37.2): per memory type the allocatable
and free bytes, the node's group (``Cells``) and its number of assignments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..topologymanager.topology_manager import NumaSet


@dataclass(frozen=True)
class MemoryNode:
    """One NUMA node's memory manager state: per type allocatable and free bytes, ``group``
    (``Cells``: the node itself, or every node of a block spanning several) and how many
    allocations it holds (``NumberOfAssignments``)."""

    allocatable: Mapping[str, int]
    free: Mapping[str, int]
    group: NumaSet
    assignments: int = 0
