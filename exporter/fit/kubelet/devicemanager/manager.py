"""The device manager's allocation (``devicemanager/manager.go``, v1.37.2).

:func:`allocate_devices` is ``devicesToAllocate``: the pod's reusable devices first, then
devices meeting the hint (those inside it first), then those with topology outside it, then
those without (``filterByAffinity``); fewer free than requested is an error
(``UnexpectedAdmissionError``); a resource no device plugin registered is left to the
resource-fit predicate (``OutOf<resource>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..managers_state import DeviceState, NumaSet


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
