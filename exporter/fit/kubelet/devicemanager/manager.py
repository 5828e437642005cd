"""The device manager's allocation (``devicemanager/manager.go``, v1.37.2).

:func:`allocate_devices` is ``devicesToAllocate``: the pod's reusable devices first, then
devices meeting the hint (those inside it first), then those with topology outside it, then
those without (``filterByAffinity``); fewer free than requested is an error
(``UnexpectedAdmissionError``); a resource no device plugin registered is left to the
resource-fit predicate (``OutOf<resource>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..topologymanager.topology_manager import NumaSet


@dataclass(frozen=True)
class DeviceState:
    """One device-plugin resource, counted per set of NUMA nodes (the empty set: devices
    without topology): every registered device (``allDevices``, unhealthy and assigned ones
    included) and the healthy unassigned ones. Which device of a set the kubelet picks does
    not change admission, so devices are counted, not named."""

    registered: Mapping[NumaSet, int]
    free: Mapping[NumaSet, int]
    # the node's allocatable count (healthy devices) and the devices containers hold, for the
    # resource-fit predicate; None: every registered device is healthy, held = registered - free
    healthy: int | None = None
    held: int | None = None
    # the device manager has the resource but neither API names one of its devices (all of
    # them unhealthy and unassigned): their topology is unknown, and taken as NUMA-aware
    # (deviceHasTopologyAlignment counts unhealthy devices too), so no NUMA set has one free
    registered_unseen: bool = False

    def healthy_total(self) -> int:
        return self.registered_total() if self.healthy is None else self.healthy

    def held_total(self) -> int:
        return self.registered_total() - self.free_total() if self.held is None else self.held

    def topology_aware(self) -> bool:
        """``deviceHasTopologyAlignment``: some device names a NUMA node."""
        return self.registered_unseen or any(numa and count > 0
                                             for numa, count in self.registered.items())

    def free_total(self) -> int:
        return sum(self.free.values())

    def registered_total(self) -> int:
        return sum(self.registered.values())


def allocate_devices(devices: DeviceState, request: int, hint: NumaSet | None,
                     reusable: Mapping[NumaSet, int]) -> tuple[DeviceState, dict[NumaSet, int],
                                                                 dict[NumaSet, int]] | None:
    """(new state, devices taken from the free pool per NUMA set, reusable ones taken);
    ``None`` when fewer are free than requested."""
    need = request
    from_reuse: dict[NumaSet, int] = {}
    for numa in sorted(reusable, key=_set_order):
        take = min(need, reusable[numa])
        if take > 0:
            from_reuse[numa] = take
            need -= take
    if need > devices.free_total():
        return None
    free = dict(devices.free)
    taken: dict[NumaSet, int] = {}
    if need:
        def order(numa: NumaSet) -> tuple[int, int, tuple[int, ...]]:
            # filterByAffinity: devices meeting the hint (those inside it first), then those
            # with topology outside it, then those without topology
            aligned = hint is None or bool(numa & hint)
            inside = hint is not None and bool(numa) and numa <= hint
            rank = 0 if inside else 1 if aligned and numa else 2 if numa else 3
            return (rank, len(numa), tuple(sorted(numa)))
        for numa in sorted(free, key=order):
            take = min(need, free[numa])
            if take > 0:
                taken[numa] = take
                free[numa] -= take
                need -= take
            if not need:
                break
    held = devices.held_total() + sum(taken.values())
    return replace(devices, free=free, held=held), taken, from_reuse


def _set_order(numa: NumaSet) -> tuple[int, tuple[int, ...]]:
    return (len(numa), tuple(sorted(numa)))
