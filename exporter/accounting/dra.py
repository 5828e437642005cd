"""DRA devices node-wide: what the node's ResourceSlices publish, and what its pods hold.

:func:`dra_figures` attributes the published devices to NUMA nodes once per inventory and
topology (allocatable, tainted by effect, capacity per single node); :class:`DraLedger` keeps
the devices the pods hold (a device counted once however many containers name it, shares
counted apart) up to date pod by pod, for the node :class:`~exporter.accounting.ledger.Ledger`.
Without the Kubernetes-API view there is no inventory: every held device is then of unknown
NUMA node and nothing is allocatable.
"""

from __future__ import annotations
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from ..issues import IssueKind, Issues
from ..model import Allocatable, DraInventory, DraKey, MemoryBlock, NumaIds, PodAssignment, shared
from .numa import UNKNOWN, TopologyView, group_label, min_numa_nodes


DraGroup = tuple[str, str, str]  # driver, pool, NUMA label


@dataclass(eq=False)
class DraFigures:
    """The node's published DRA devices attributed to NUMA nodes; computed once per
    :class:`~exporter.model.DraInventory` and topology."""

    numa: dict[DraKey, tuple[int, ...]] = field(default_factory=dict)  # known NUMA ids
    allocatable: dict[DraGroup, int] = field(default_factory=dict)
    tainted: dict[tuple[str, str, str, str], int] = field(default_factory=dict)  # + effect
    listed: frozenset[DraKey] = frozenset()  # devices offered to new claims
    capacity: Counter[tuple[int, str]] = field(default_factory=Counter)  # (node, driver)
    issues: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


def dra_figures(inventory: DraInventory | None, view: TopologyView) -> DraFigures | None:
    """Published devices per (driver, pool, NUMA label): untainted ones as allocatable, each
    taint effect a device carries counted under that effect. An id sysfs does not know is
    dropped, as for any other item (a data issue). ``None`` without the Kubernetes API."""
    if inventory is None:
        return None
    figures = DraFigures()
    issues = Issues()
    allocatable: Counter[DraGroup] = Counter()
    tainted: Counter[tuple[str, str, str, str]] = Counter()
    listed: set[DraKey] = set()
    for device in inventory.devices:
        key = device.key
        if key in figures.numa:
            issues.add(IssueKind.DUPLICATE_ENTRY,
                       f"DRA device {'/'.join(key)} published twice in one pool generation")
            continue
        ids = view.ids(device.numa_ids, issues, f"DRA device {'/'.join(key)}")
        figures.numa[key] = shared(ids)
        label = group_label(ids)
        for effect in device.effects:
            tainted[(device.driver, device.pool, label, effect)] += 1
        if device.allocatable:
            allocatable[(device.driver, device.pool, label)] += 1
            listed.add(key)
            for node in ids:
                figures.capacity[(node, device.driver)] += 1
    figures.allocatable = dict(allocatable)
    figures.tainted = dict(tainted)
    figures.listed = frozenset(listed)
    figures.issues = issues.counts
    figures.examples = issues.examples
    return figures
