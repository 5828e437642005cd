"""Where does a pod of a given shape still fit? Pure functions over one snapshot, no I/O.

Two steps. :func:`free_capacity` turns one snapshot (the kubelet's view, the sysfs topology and
its accounting) into what a *new* exclusive request could still get on each single NUMA node:

* CPUs: allocatable minus assigned, per NUMA node; with ``full-pcpus-only``, only CPUs whose
  SMT siblings are all free and allocatable (whole free cores);
* memory and each hugepage size: allocatable minus allocated, with memory spanning NUMA nodes
  apportioned by the accounting's rule (SPEC section 2), never below 0;
* devices: the devices ``GetAllocatableResources`` lists (healthy, registered) that no container
  holds. A device local to several NUMA nodes is free on each of them, but is only one device.

:func:`evaluate` then holds a :class:`Shape` against it: per NUMA node whether one pod fits
there alone, and how much of each resource the node lacks; how many more pods of the shape the
node admits under Topology Manager ``single-numa-node`` (packed greedily, node by node in
ascending id order, each pod taking the devices local to its node alone before shared ones);
and the fewest NUMA nodes that hold one pod together (what ``restricted`` or ``best-effort``
would need).

A resource the kubelet does not manage is no NUMA constraint and is left out: CPUs under CPU
manager policy ``none``, memory and hugepages under memory manager policy ``None`` (the kubelet
does not align them). A device resource whose allocatable devices all lack NUMA locality gives
the Topology Manager no hint, so its free devices serve every NUMA node (labelled
``numa_node="unknown"``); devices without locality of a resource that has local ones count on no
node, as in the device manager's hint generation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

from ..accounting import UNKNOWN, Accounting, apportion_group_memory, label_ids
from ..model import KubeletSnapshot, Topology

CPU = "cpu"
MEMORY_PREFIXES = ("memory", "hugepages-")
# Subsets of NUMA nodes tried for the smallest set; beyond it (machines with many NUMA nodes)
# the search settles for the greedy answer. The kubelet's Topology Manager itself refuses more
# than 8 NUMA nodes unless told otherwise.
MIN_SET_BUDGET = 50_000


def is_memory_resource(name: str) -> bool:
    """``memory`` and ``hugepages-<size>``: what the memory manager assigns."""
    return name == "memory" or name.startswith("hugepages-")


@dataclass(frozen=True)
class Shape:
    """A named pod shape: exclusive requests, ``cpu`` in CPUs, memory types in bytes,
    device resources in devices. Every amount is positive."""

    name: str
    requests: Mapping[str, int]


@dataclass(frozen=True)
class FreeCapacity:
    """What a new exclusive request could still get, per single NUMA node.

    ``cpus``/``full_core_cpus``: free CPU ids per NUMA node (``None`` when the kubelet assigns
    no exclusive CPUs). ``memory``: memory type -> NUMA node -> free bytes (empty when the memory
    manager assigns nothing). ``devices``: resource -> NUMA set (``()`` for no locality) -> free
    devices with exactly that set, for every resource ``GetAllocatableResources`` lists.
    """

    numa_ids: tuple[int, ...]
    cpus: Mapping[int, frozenset[int]] | None
    full_core_cpus: Mapping[int, frozenset[int]] | None
    memory: Mapping[str, Mapping[int, int]]
    devices: Mapping[str, Mapping[tuple[int, ...], int]]
    threads_per_core: int = 1
    full_pcpus_only: bool = False
    # device resources with at least one allocatable device of known NUMA locality
    local_resources: frozenset[str] = frozenset()

    @property
    def memory_managed(self) -> bool:
        return bool(self.memory)

    def is_local(self, resource: str) -> bool:
        """Whether some allocatable device of ``resource`` has NUMA locality (a resource
        nobody lists counts as local: nothing serves it anywhere)."""
        return resource in self.local_resources or resource not in self.devices

    def free_devices(self, resource: str, numa_id: int) -> int:
        """Free devices of ``resource`` usable on ``numa_id`` alone."""
        groups = self.devices.get(resource, {})
        if not self.is_local(resource):
            return sum(groups.values())
        return sum(count for ids, count in groups.items() if numa_id in ids)

    def cpu_free(self, numa_id: int) -> int:
        """CPUs a new request can get on ``numa_id`` (whole cores under full-pcpus-only)."""
        source = self.full_core_cpus if self.full_pcpus_only else self.cpus
        return len(source.get(numa_id, ())) if source is not None else 0

    def constrains(self, resource: str) -> bool:
        """Whether the kubelet aligns ``resource`` to NUMA nodes at all."""
        if resource == CPU:
            return self.cpus is not None
        if is_memory_resource(resource):
            return self.memory_managed
        return True

    def free(self, resource: str, numa_id: int) -> int:
        if resource == CPU:
            return self.cpu_free(numa_id)
        if is_memory_resource(resource):
            return self.memory.get(resource, {}).get(numa_id, 0)
        return self.free_devices(resource, numa_id)

    def series(self) -> dict[tuple[str, str], int]:
        """``podresources_numa_free`` as {(numa_node, resource): amount}."""
        values: dict[tuple[str, str], int] = {}
        for numa_id in self.numa_ids:
            label = str(numa_id)
            if self.cpus is not None:
                values[(label, CPU)] = len(self.cpus.get(numa_id, ()))
            for memory_type, per_node in self.memory.items():
                values[(label, memory_type)] = per_node.get(numa_id, 0)
            for resource in self.devices:
                if self.is_local(resource):
                    values[(label, resource)] = self.free_devices(resource, numa_id)
        for resource, groups in self.devices.items():
            if not self.is_local(resource):
                values[(UNKNOWN, resource)] = sum(groups.values())
        return values

    def full_cores_series(self) -> dict[str, int]:
        """``podresources_numa_free_full_cores`` as {numa_node: CPUs}."""
        if self.full_core_cpus is None:
            return {}
        return {str(n): len(self.full_core_cpus.get(n, ())) for n in self.numa_ids}


def free_capacity(snapshot: KubeletSnapshot, topology: Topology, accounting: Accounting,
                  full_pcpus_only: bool = False) -> FreeCapacity | None:
    """Free capacity per single NUMA node; ``None`` without ``GetAllocatableResources`` (or
    under v1alpha1, which carries no topology): nothing can be said then."""
    allocatable = snapshot.allocatable
    if allocatable is None or snapshot.api_version != "v1":
        return None
    numa_ids = tuple(sorted(topology.numa_nodes))
    assigned_cpus: set[int] = set()
    assigned_devices: set[tuple[str, str]] = set()
    for pod in accounting.pod_figures:
        assigned_cpus |= pod.cpus
        assigned_devices.update(pod.devices)

    cpus: dict[int, frozenset[int]] | None = None
    full: dict[int, frozenset[int]] | None = None
    if allocatable.cpu_ids:
        free_set = frozenset(allocatable.cpu_ids) - assigned_cpus
        whole = frozenset(cpu for cpu in free_set if topology.siblings(cpu) <= free_set)
        cpus, full = {}, {}
        for numa_id in numa_ids:
            on_node = topology.numa_nodes[numa_id].cpus
            cpus[numa_id] = free_set & on_node
            full[numa_id] = whole & on_node

    memory = _free_memory(accounting, numa_ids)

    known = frozenset(numa_ids)
    device_sets: dict[tuple[str, str], set[int]] = {}
    for entry in allocatable.devices:
        for device_id in entry.device_ids:
            if not entry.resource or not device_id:
                continue
            ids = device_sets.setdefault((entry.resource, device_id), set())
            ids.update(i for i in entry.numa_ids or () if i in known)
    devices: dict[str, Counter[tuple[int, ...]]] = {}
    local: set[str] = set()
    for (resource, device_id), ids in device_sets.items():
        groups = devices.setdefault(resource, Counter())
        if ids:
            local.add(resource)
        if (resource, device_id) not in assigned_devices:
            groups[tuple(sorted(ids))] += 1
    threads = max((len(s) for s in topology.cpu_siblings.values()), default=1)
    return FreeCapacity(numa_ids, cpus, full, memory,
                        {r: dict(g) for r, g in sorted(devices.items())}, threads,
                        full_pcpus_only, frozenset(local))


def _free_memory(accounting: Accounting, numa_ids: tuple[int, ...]) -> dict[str, dict[int, int]]:
    """Allocatable minus allocated per single node and memory type, group blocks apportioned."""
    capacity: dict[str, dict[int, int]] = {}
    for (label, memory_type), size in accounting.memory_allocatable.items():
        ids = label_ids(label)
        if len(ids) == 1:
            per_node = capacity.setdefault(memory_type, {})
            per_node[ids[0]] = per_node.get(ids[0], 0) + size
    single: dict[str, dict[int, int]] = {t: {} for t in capacity}
    groups: dict[str, dict[tuple[int, ...], int]] = {t: {} for t in capacity}
    for (label, memory_type), size in accounting.memory_allocated.items():
        if memory_type not in capacity or label == UNKNOWN or not size:
            continue
        ids = label_ids(label)
        if len(ids) == 1:
            single[memory_type][ids[0]] = single[memory_type].get(ids[0], 0) + size
        else:
            groups[memory_type][ids] = groups[memory_type].get(ids, 0) + size
    free: dict[str, dict[int, int]] = {}
    for memory_type in sorted(capacity):
        totals = apportion_group_memory(capacity[memory_type], single[memory_type],
                                        groups[memory_type])
        free[memory_type] = {n: max(0, capacity[memory_type].get(n, 0) - totals.get(n, 0))
                             for n in numa_ids}
    return free


# ---- holding a shape against the free capacity ----------------------------------------------

@dataclass(frozen=True)
class ShapeFit:
    """One shape against one snapshot."""

    shape: Shape
    # resources the kubelet aligns to NUMA nodes, in the shape's order
    constrained: tuple[str, ...]
    fits: dict[int, bool]
    shortfall: dict[int, dict[str, int]]  # numa id -> resource -> lacking amount
    free: dict[int, dict[str, int]]  # numa id -> resource -> free amount
    capacity: int | None  # None: the shape holds nothing the kubelet aligns (unbounded)
    min_numa_nodes: int | None  # None: does not fit even on the whole node
    # full-pcpus-only and a CPU request that is not a whole number of cores
    smt_misaligned: bool = False
    unmanaged: tuple[str, ...] = field(default=())
    threads_per_core: int = 1

    def blocking(self) -> list[str]:
        """Resources that no single NUMA node has enough of (in the shape's order)."""
        return [r for r in self.constrained
                if all(self.shortfall[n][r] > 0 for n in self.shortfall)]


def evaluate(shape: Shape, free: FreeCapacity) -> ShapeFit:
    """Fit, shortfall, greedy ``single-numa-node`` capacity and smallest NUMA set."""
    constrained = tuple(r for r in shape.requests if free.constrains(r))
    unmanaged = tuple(r for r in shape.requests if not free.constrains(r))
    cpu_request = shape.requests.get(CPU, 0) if CPU in constrained else 0
    smt_misaligned = (free.full_pcpus_only and cpu_request > 0
                      and cpu_request % free.threads_per_core != 0)
    fits: dict[int, bool] = {}
    shortfall: dict[int, dict[str, int]] = {}
    free_table: dict[int, dict[str, int]] = {}
    for numa_id in free.numa_ids:
        have = {r: free.free(r, numa_id) for r in constrained}
        lack = {r: max(0, _need(shape, r, free) - have[r]) for r in constrained}
        free_table[numa_id] = have
        shortfall[numa_id] = lack
        fits[numa_id] = not smt_misaligned and not any(lack.values())
    if smt_misaligned:
        capacity: int | None = 0
        smallest = None
    elif not constrained:
        capacity, smallest = None, 1
    else:
        capacity = _greedy_capacity(shape, constrained, free)
        smallest = _smallest_set(shape, constrained, free)
    return ShapeFit(shape, constrained, fits, shortfall, free_table, capacity, smallest,
                    smt_misaligned, unmanaged, free.threads_per_core)


def _need(shape: Shape, resource: str, free: FreeCapacity) -> int:
    """The request, CPUs rounded up to whole cores under full-pcpus-only."""
    amount = shape.requests[resource]
    if resource == CPU and free.full_pcpus_only and free.threads_per_core > 1:
        cores = -(-amount // free.threads_per_core)
        return cores * free.threads_per_core
    return amount


def _greedy_capacity(shape: Shape, constrained: Iterable[str], free: FreeCapacity) -> int:
    """Pods of the shape admitted one after another, each on one NUMA node (ascending ids,
    each node filled before the next), each taking devices local to its node alone first."""
    resources = list(constrained)
    scalars = {(r, n): free.free(r, n) for r in resources
               if r == CPU or is_memory_resource(r) for n in free.numa_ids}
    pools = {r: dict(free.devices.get(r, {})) for r in resources
             if r != CPU and not is_memory_resource(r)}
    count = 0
    for numa_id in free.numa_ids:
        while True:
            taken = _take(shape, resources, free, numa_id, scalars, pools)
            if not taken:
                break
            count += 1
    return count


def _take(shape: Shape, resources: list[str], free: FreeCapacity, numa_id: int,
          scalars: dict[tuple[str, int], int],
          pools: dict[str, dict[tuple[int, ...], int]]) -> bool:
    """Take one pod's worth on ``numa_id`` if it is all there; False (and nothing taken)
    otherwise."""
    device_plan: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    for resource in resources:
        need = shape.requests[resource]
        if resource in pools:
            local = free.is_local(resource)
            candidates = sorted((ids for ids, n in pools[resource].items()
                                 if n > 0 and (numa_id in ids or not local)),
                                key=lambda ids: (len(ids), ids))
            plan = []
            for ids in candidates:
                if need <= 0:
                    break
                use = min(need, pools[resource][ids])
                plan.append((ids, use))
                need -= use
            if need > 0:
                return False
            device_plan[resource] = plan
        elif scalars[(resource, numa_id)] < _need(shape, resource, free):
            return False
    for resource in resources:
        if resource in pools:
            for ids, use in device_plan[resource]:
                pools[resource][ids] -= use
        else:
            scalars[(resource, numa_id)] -= _need(shape, resource, free)
    return True


def _smallest_set(shape: Shape, constrained: tuple[str, ...], free: FreeCapacity) -> int | None:
    """The fewest NUMA nodes holding one pod together: CPUs and memory summed over the set,
    devices local to any node of it (as the Topology Manager's hint for a NUMA mask counts
    them)."""
    nodes = free.numa_ids
    budget = MIN_SET_BUDGET

    def holds(chosen: tuple[int, ...]) -> bool:
        for resource in constrained:
            need = _need(shape, resource, free)
            if resource == CPU or is_memory_resource(resource):
                have = sum(free.free(resource, n) for n in chosen)
            elif not free.is_local(resource):
                have = sum(free.devices.get(resource, {}).values())
            else:
                members = set(chosen)
                have = sum(count for ids, count in free.devices.get(resource, {}).items()
                           if members & set(ids))
            if have < need:
                return False
        return True

    if not holds(nodes):
        return None
    for size in range(1, len(nodes)):
        for chosen in combinations(nodes, size):
            budget -= 1
            if budget < 0:
                return len(nodes)
            if holds(chosen):
                return size
    return len(nodes)


# ---- words -----------------------------------------------------------------------------------

def format_amount(resource: str, amount: int) -> str:
    """A resource amount as an operator writes it: ``8``, ``64Gi``, ``512Mi``."""
    if resource == CPU or not is_memory_resource(resource):
        return str(amount)
    for unit, suffix in ((1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    if amount >= 1 << 30:
        return f"{amount / (1 << 30):.1f}Gi"
    if amount >= 1 << 20:
        return f"{amount / (1 << 20):.1f}Mi"
    return str(amount)


def _noun(resource: str, amount: int, adjective: str = "") -> str:
    word = f"{adjective} " if adjective else ""
    if resource == CPU:
        return f"{amount} {word}CPU" + ("" if amount == 1 else "s")
    if is_memory_resource(resource):
        return f"{format_amount(resource, amount)} of {word}{resource}"
    return f"{amount} {word}{resource}"


def verdict(fit: ShapeFit) -> str:
    """One sentence: where the shape fits, or what each NUMA node lacks."""
    shape = fit.shape
    if fit.smt_misaligned:
        return (f"{shape.requests[CPU]} CPUs is not a whole number of cores of "
                f"{fit.threads_per_core} threads: the kubelet's full-pcpus-only option "
                "rejects it (SMTAlignmentError) on every NUMA node")
    where = [n for n, ok in fit.fits.items() if ok]
    if where:
        nodes = ", ".join(str(n) for n in where)
        text = f"fits on NUMA node{'s' if len(where) > 1 else ''} {nodes}"
        if fit.capacity is not None:
            text += f"; {fit.capacity} more pod{'' if fit.capacity == 1 else 's'} of this " \
                    "shape fit under single-numa-node"
        return text
    ordered = sorted(fit.constrained, key=_resource_order)
    wanted = _noun(ordered[0], shape.requests[ordered[0]], "free")
    if len(ordered) > 1:
        wanted += " together with " + _join([_noun(r, shape.requests[r]) for r in ordered[1:]])
    lacks = []
    for numa_id, lack in fit.shortfall.items():
        parts = [_noun(r, lack[r]) for r in ordered if lack.get(r, 0) > 0]
        if parts:
            lacks.append(f"node {numa_id} lacks {_join(parts)}")
    text = f"no NUMA node has {wanted}: {', '.join(lacks)}"
    if fit.min_numa_nodes is not None:
        text += (f"; {fit.min_numa_nodes} NUMA nodes together would hold it "
                 "(restricted or best-effort policy)")
    else:
        text += "; not even the whole node has enough"
    return text


def _join(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _resource_order(resource: str) -> tuple[int, str]:
    """Devices first (they are what operators name), then CPUs, then memory."""
    if resource == CPU:
        return (1, resource)
    if is_memory_resource(resource):
        return (2, resource)
    return (0, resource)
