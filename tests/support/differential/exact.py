"""The exact comparison of one admitted pod: what every container got, id by id, where the
kubelet's choice is determined by its state; and where it is not, why.

* CPU ids: the CPU manager's ``takeByTopology`` is a function of its state (free CPUs, the
  pod's reusable ones, the hint, the options), so every container's exclusive CPUs are
  compared id for id;
* memory: every container's blocks (type, size, NUMA affinity: the memory manager's
  ``GetMemoryBlocks``), and after the pod each NUMA node's free memory of every type and its
  group (``machineState``: ``Cells``), the memory manager's ``updateMachineState`` filling the
  affinity's nodes in id order;
* devices: the device manager takes the pod's reusable devices, then those meeting the hint,
  then those outside it, then those without topology (``devicesToAllocate``,
  ``filterByAffinity``), each tier a Go set iterated in map order — random wherever a tier
  is taken only in part (no ``GetPreferredAllocation`` here). Where every tier taken in part
  holds devices of one NUMA set, the container's devices are determined up to their ids and
  compared as a multiset of NUMA sets (the fit engine counts devices per NUMA set); otherwise
  only their number is, and the choice is counted as random — as is every later pick of the
  same resource in the pod, which finds what that draw left (and reuses what it took).
  Under the container scope a later container's hints are generated from what the draw
  left (``GetTopologyHints`` runs before each container's ``Allocate``), so its NUMA
  affinity, and with it its CPUs and memory, is the draw's too: such a container is left
  out of every comparison and named in ``after_draw`` (the pod scope merges once, before any
  pick; policy ``none`` has no hints).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.fit.kubelet.topologymanager.scope import Verdict

from ..realkubelet import Admission

NumaSet = frozenset[int]


@dataclass
class Exact:
    """What one pod's exact comparison found."""

    compared: Counter[str] = field(default_factory=Counter)  # cpus, memory, devices, nodes,
    # after_draw (containers not compared, see the module's docstring)
    random_devices: int = 0  # device choices the kubelet makes by map order
    after_draw: list[str] = field(default_factory=list)  # containers placed after one
    details: list[str] = field(default_factory=list)


def compare_exact(real: Admission, verdict: Verdict, description: dict[str, Any],
                  before: dict[str, Any], after: dict[str, Any] | None,
                  nodes: bool = True, hints_per_container: bool = True) -> Exact:
    """``before``/``after``: the component's dumps around the pod's admission; ``nodes``
    False: the NUMA nodes' memory after it is not compared; ``hints_per_container``: the
    Topology Manager merges each container's hints in turn (scope container, a policy other
    than ``none``)."""
    found = Exact()
    placed = {p.container: p for p in verdict.placements}
    devices = _Devices(description, before)
    for name, container in real.containers.items():
        placement = placed.get(name)
        if placement is None:
            found.details.append(f"{name}: the fit engine did not place it")
            continue
        if hints_per_container and devices.drawn:
            found.after_draw.append(name)
            found.compared["after_draw"] += 1
            hint = frozenset(container.numa) if container.numa is not None else None
            for resource, ids in sorted(container.devices.items()):
                devices.allocate(container.kind, resource, ids, hint)
            continue
        found.compared["cpus"] += 1
        if frozenset(container.cpus) != placement.cpu_ids:
            found.details.append(f"CPU ids of {name}: kubelet {_ids(container.cpus)}, fit "
                                 f"engine {_ids(placement.cpu_ids)}")
        found.compared["memory"] += 1
        theirs = sorted((t, size, tuple(sorted(numa))) for t, size, numa in
                        placement.memory_blocks)
        mine = sorted((t, size, tuple(sorted(numa))) for t, size, numa in container.memory)
        if mine != theirs:
            found.details.append(f"memory blocks of {name}: kubelet {mine}, fit engine {theirs}")
        hint = frozenset(container.numa) if container.numa is not None else None
        for resource, ids in sorted(container.devices.items()):
            picked = devices.allocate(container.kind, resource, ids, hint)
            if picked is None:
                found.random_devices += 1
                mine_count, theirs_count = len(ids), sum(
                    placement.device_sets.get(resource, {}).values())
                if mine_count != theirs_count:
                    found.details.append(f"{resource} of {name}: kubelet {mine_count} devices, "
                                         f"fit engine {theirs_count}")
                continue
            found.compared["devices"] += 1
            engine = Counter({numa: n for numa, n in
                              placement.device_sets.get(resource, {}).items() if n})
            if picked != engine:
                found.details.append(f"{resource} of {name}: kubelet {_sets(picked)}, fit "
                                     f"engine {_sets(engine)}")
    if nodes and not found.after_draw and after is not None and verdict.state is not None \
            and verdict.state.memory is not None:
        _compare_nodes(after, verdict, found)
    return found


def _compare_nodes(after: dict[str, Any], verdict: Verdict, found: Exact) -> None:
    machine = after["memory_manager"]["machine_state"] or {}
    assert verdict.state is not None and verdict.state.memory is not None
    for numa, node in sorted(verdict.state.memory.items()):
        kubelet = machine.get(str(numa)) or machine.get(numa)  # type: ignore[call-overload]
        if kubelet is None:
            continue
        found.compared["nodes"] += 1
        free = {t: table["free"] for t, table in kubelet["memory"].items()
                if table["allocatable"] > 0}
        engine = {t: amount for t, amount in node.free.items() if node.allocatable.get(t, 0) > 0}
        if free != engine:
            found.details.append(f"free memory on NUMA node {numa}: kubelet {free}, fit "
                                 f"engine {engine}")
        cells = frozenset(kubelet["cells"] or ())
        if cells != node.group:
            found.details.append(f"memory group of NUMA node {numa}: kubelet "
                                 f"{_ids(cells)}, fit engine {_ids(node.group)}")


class _Devices:
    """The device manager's sets for one pod's admission: the devices of every active pod
    allocated (``UpdateAllocatedDevices`` drops the others), the healthy ones free, the pod's
    reusable init-container devices (``devicesToReuse``)."""

    def __init__(self, description: dict[str, Any], before: dict[str, Any]):
        self.numa: dict[tuple[str, str], NumaSet] = {}
        self.healthy: dict[str, set[str]] = {}
        self.aligned_resources: set[str] = set()
        for device in description["devices"]:
            key = (device["resource"], device["id"])
            self.numa[key] = frozenset(device["numa"] or ())
            if device["numa"]:
                self.aligned_resources.add(device["resource"])  # deviceHasTopologyAlignment
            if device["healthy"]:
                self.healthy.setdefault(device["resource"], set()).add(device["id"])
        self.allocated: dict[str, set[str]] = {}
        for pod in before["pods"] or ():
            if not pod["active"]:
                continue
            for container in pod["containers"] or ():
                for resource, ids in container["devices"].items():
                    self.allocated.setdefault(resource, set()).update(ids)
        self.reuse: dict[str, set[str]] = {}
        # resources a pick by map order already changed: what later containers find (free
        # devices, reusable ones) is then the kubelet's draw, not a function of the state
        self.drawn: set[str] = set()

    def allocate(self, kind: str, resource: str, ids: Iterable[str], hint: NumaSet | None
                 ) -> Counter[NumaSet] | None:
        """Walk ``devicesToAllocate`` for the kubelet's pick ``ids``: the picked devices'
        NUMA sets when determined, ``None`` when a tier taken in part mixes NUMA sets, or an
        earlier container's pick of the resource was drawn so."""
        picked = set(ids)
        needed = len(picked)
        reusable = self.reuse.setdefault(resource, set())
        free = self.healthy.get(resource, set()) - self.allocated.get(resource, set())
        tiers = [set(reusable), *self._filter(resource, free, hint)]
        determined = resource not in self.drawn
        for tier in tiers:
            take = min(needed, len(tier))
            if 0 < take < len(tier) and len({self.numa[(resource, d)] for d in tier}) > 1:
                determined = False
            needed -= take
            if not needed:
                break
        self.allocated.setdefault(resource, set()).update(picked)
        if kind == "init":
            reusable |= picked
        else:
            reusable -= picked
        if not determined:
            self.drawn.add(resource)
            return None
        return Counter(self.numa[(resource, d)] for d in picked)

    def _filter(self, resource: str, free: set[str], hint: NumaSet | None
                ) -> tuple[set[str], set[str], set[str]]:
        """``filterByAffinity``: (aligned, unaligned, without topology)."""
        if resource not in self.aligned_resources or hint is None:
            return set(), set(), free
        aligned = {d for d in free if self.numa[(resource, d)] & hint}
        without = {d for d in free if not self.numa[(resource, d)]}
        return aligned, free - aligned - without, without


def _ids(cpus: Iterable[int]) -> str:
    return "{" + ",".join(map(str, sorted(cpus))) + "}"


def _sets(counts: Mapping[NumaSet, int]) -> str:
    return ", ".join(f"{n} on {_ids(numa) if numa else 'no NUMA node'}"
                     for numa, n in sorted(counts.items(), key=lambda i: sorted(i[0])))
