"""The device manager's hints (``devicemanager/topology_hints.go``, v1.37.2).

:func:`device_hints` is ``generateDeviceTopologyHints``: per NUMA set the free devices meeting
it (plus the pod's reusable ones) against the request, preferred when the set is as narrow as
the fewest nodes whose registered devices could hold it; since 1.36 only over the NUMA nodes
the resource's devices sit on (``deviceNUMANodes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..topologymanager.bitmask import (
    MaskTable,
    Sums,
    kept_sums,
    mask_bits,
    mask_table,
    meeting_sums,
    preferred_hints,
    single_node_hints,
)
from ..topologymanager.topology_manager import Hints, NumaSet
from .manager import DeviceState


def capacity_sums(table: MaskTable, registered: Mapping[NumaSet, int]) -> Sums:
    """:func:`meeting_sums` of the registered devices (they do not change as pods are
    placed)."""
    return kept_sums(table, (registered,), lambda: meeting_sums(table, registered))


def device_hints(numa_ids: Sequence[int], devices: DeviceState, request: int,
                 reusable: Mapping[NumaSet, int] | None = None,
                 on_device_nodes: bool = True, single: bool = False) -> Hints:
    """``generateDeviceTopologyHints``. ``None`` for a resource none of whose devices has
    topology; ``[]`` when fewer devices are free (plus reusable) than requested node-wide. A
    device counts for a mask its NUMA nodes intersect; a topology-less one for none; every
    reusable device with topology must meet the mask. ``on_device_nodes`` (1.36 on): the masks
    are those of the NUMA nodes the resource's devices sit on (``deviceNUMANodes``), so a
    mask never holds a node without one of its devices; else every NUMA node's. ``single``:
    only the single-node hints (see :func:`single_node_hints`)."""
    if request <= 0 or not devices.topology_aware():
        return None
    again = {numa: n for numa, n in (reusable or {}).items() if n > 0}
    if devices.free_total() + sum(again.values()) < request:
        return []
    if on_device_nodes:
        known = set(numa_ids)
        hosting = {n for numa, count in devices.registered.items() if count > 0 for n in numa
                   if n in known}
        numa_ids = sorted(hosting) or numa_ids
    table = mask_table(tuple(sorted(numa_ids)))
    if single:
        placed_on = [numa for numa, n in again.items() if numa]
        placed_total = sum(n for numa, n in again.items() if numa)
        holds = any(sum(c for numa, c in devices.registered.items() if n in numa) >= request
                    for n in table.numa_ids)
        return single_node_hints(table, holds, (
            n for n in table.numa_ids if all(n in numa for numa in placed_on)
            and placed_total + sum(c for numa, c in devices.free.items() if n in numa)
            >= request))
    capacity = capacity_sums(table, devices.registered)
    free = meeting_sums(table, devices.free)
    placed = [mask_bits(numa) for numa, n in again.items() if numa]
    placed_count = sum(n for numa, n in again.items() if numa)
    min_width = len(table.numa_ids)
    found: list[int] = []
    for i, (numa, b) in enumerate(zip(table.sets, table.bits)):
        if capacity[b] >= request and len(numa) < min_width:
            min_width = len(numa)
        if placed and any(not (s & b) for s in placed):
            continue
        if placed_count + free[b] >= request:
            found.append(i)
    return preferred_hints(table, found, min_width)
