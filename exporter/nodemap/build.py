"""From one refresh to the node map: which CPU, memory and device is whose, per NUMA node.

Read only from what the refresh already has (the kubelet's snapshot, the accounting, the sysfs
topology, the DRA inventory and the fit answers), never from the kubelet. The figures drawn are
the metrics' own: pods the accounting left out (terminated ones, with the Kubernetes-API view)
are left out here too, NUMA ids sysfs does not know are dropped as the accounting drops them,
and memory spanning NUMA nodes is apportioned with the accounting's function. What the kubelet
does not report is not drawn: no reserved or free CPUs without ``GetAllocatableResources``, no
memory bars under memory manager ``None``. CPUs a DRA CPU driver allocated are cells when their
device names its CPU (one device per CPU), and otherwise a count per holder, without ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..accounting import (
    DRA,
    UNKNOWN,
    Accounting,
    TopologyView,
    apportion_group_memory,
    group_label,
)
from ..fit.answers import ShapeAnswer, sentence
from ..model import DraInventory, DraKey, KubeletSnapshot, NumaIds, PodAssignment, Topology
from .picture import (
    Chip,
    ChipState,
    Core,
    Cpu,
    CpuMode,
    CpuState,
    DraCpus,
    Holder,
    MemoryBar,
    MemoryGroup,
    NodeMap,
    NumaBox,
    ShapeLine,
    Straddler,
)


@dataclass(frozen=True)
class MapInputs:
    """What one refresh has for the map (the page caches it by these objects' identity)."""

    snapshot: KubeletSnapshot
    accounting: Accounting
    topology: Topology
    node_name: str = ""
    refreshed_at: float | None = None
    kubelet_up: bool = True
    dra: DraInventory | None = None
    shapes: Sequence[ShapeAnswer] = ()


def build_map(inputs: MapInputs) -> NodeMap:
    snapshot, accounting, topology = inputs.snapshot, inputs.accounting, inputs.topology
    view = TopologyView(topology)
    counted = {figures.key for figures in accounting.pod_figures}
    pods = [pod for pod in snapshot.pods if (pod.namespace, pod.name) in counted]
    straddling = {key for key, nodes in accounting.container_numa_nodes.items() if nodes > 1}
    allocatable = snapshot.allocatable
    drivers = tuple(sorted(driver for allocator, driver in accounting.cpu_allocators
                           if allocator == DRA))
    cpu_mode = (CpuMode.UNKNOWN if allocatable is None
                else CpuMode.STATIC if allocatable.cpu_ids
                else CpuMode.DRA if drivers else CpuMode.NONE)
    memory_mode = ("unknown" if allocatable is None
                   else "static" if allocatable.memory else "none")

    cpus = _cpus(pods, topology, allocatable.cpu_ids if allocatable is not None else None,
                 cpu_mode, straddling, _dra_cpu_devices(inputs.dra, frozenset(drivers)))
    by_count = _dra_cpu_counts(accounting)
    chips = _device_chips(pods, snapshot, view, straddling)
    for label, found in _dra_chips(accounting, view, inputs.dra, straddling).items():
        chips.setdefault(label, []).extend(found)
    groups = _memory_groups(pods, view)
    grouped = {int(n) for label in groups for n in label.split(",")}
    shapes = tuple(_shape_line(answer) for answer in inputs.shapes)
    fits: dict[str, list[tuple[str, bool]]] = {}
    for answer in inputs.shapes:
        for numa_id, ok in sorted(answer.fits.items()):
            fits.setdefault(str(numa_id), []).append((answer.shape.name, ok))

    boxes = []
    for numa_id in sorted(topology.numa_nodes):
        label = str(numa_id)
        node = topology.numa_nodes[numa_id]
        boxes.append(NumaBox(
            label, cores=_cores(node.cpus, topology, cpus), memory=_memory(accounting, label),
            chips=tuple(chips.get(label, ())), memory_sysfs=node.memory_bytes,
            in_memory_group=numa_id in grouped, fits=tuple(fits.get(label, ())),
            dra_cpus=tuple(by_count.get(label, ()))))
    spanning = []
    for label in sorted(set(chips) | set(groups) | set(by_count), key=_label_order):
        if "," in label:
            spanning.append(NumaBox(label, chips=tuple(chips.get(label, ())),
                                    groups=tuple(groups.get(label, ())),
                                    dra_cpus=tuple(by_count.get(label, ()))))
    unknown_cpus = sorted(cpu for cpu in cpus if cpu not in topology.cpu_to_numa)
    apart = None
    if unknown_cpus or chips.get(UNKNOWN) or by_count.get(UNKNOWN) or any(
            k[0] == UNKNOWN for k in accounting.memory_allocated):
        apart = NumaBox(UNKNOWN, cores=tuple(Core((cpus[cpu],)) for cpu in unknown_cpus),
                        memory=_memory(accounting, UNKNOWN), chips=tuple(chips.get(UNKNOWN, ())),
                        dra_cpus=tuple(by_count.get(UNKNOWN, ())))

    holders = {holder.pod_key for cpu in cpus.values() for holder in cpu.holders}
    holders |= {held.holder.pod_key for found in by_count.values() for held in found}
    holders |= {holder.pod_key for found in chips.values() for chip in found
                for holder in chip.holders}
    holders |= {holder.pod_key for found in groups.values() for group in found
                for holder in group.holders}
    return NodeMap(
        node_name=inputs.node_name, api_version=str(snapshot.api_version), cpu_mode=cpu_mode,
        refreshed_at=inputs.refreshed_at, kubelet_up=inputs.kubelet_up, numa=tuple(boxes),
        spanning=tuple(spanning), apart=apart, pods=tuple(sorted(holders)),
        straddlers=tuple(Straddler(Holder(*key), accounting.container_numa_nodes[key])
                         for key in sorted(straddling)),
        shapes=shapes, issues={k: v for k, v in sorted(accounting.data_issues.items()) if v},
        memory_mode=memory_mode, cpu_drivers=drivers)


def _label_order(label: str) -> tuple[int, tuple[int, ...]]:
    if label == UNKNOWN:
        return (1, ())
    return (0, tuple(int(part) for part in label.split(",")))


# ---- CPUs ---------------------------------------------------------------------------------

DraCpuIds = tuple[dict[DraKey, int], frozenset[int]]


def _dra_cpu_devices(inventory: DraInventory | None, drivers: frozenset[str]) -> DraCpuIds:
    """The CPU each published device per CPU of the CPU drivers is, and the CPUs such devices
    offer to new claims (untainted)."""
    ids: dict[DraKey, int] = {}
    offered: set[int] = set()
    for device in inventory.devices if inventory is not None else ():
        if device.driver in drivers and device.cpu is not None and device.cpu.cpu_id is not None:
            ids[device.key] = device.cpu.cpu_id
            if device.allocatable:
                offered.add(device.cpu.cpu_id)
    return ids, frozenset(offered)


def _dra_cpu_counts(accounting: Accounting) -> dict[str, list[DraCpus]]:
    """CPUs held from grouped DRA CPU devices, by NUMA label, holder by holder."""
    counted: dict[str, list[DraCpus]] = {}
    for (namespace, pod, container, label), count in sorted(accounting.dra_cpus.items()):
        counted.setdefault(label, []).append(DraCpus(Holder(namespace, pod, container), count))
    return counted


def _cpus(pods: Iterable[PodAssignment], topology: Topology,
          allocatable: Sequence[int] | None, mode: CpuMode,
          straddling: set[tuple[str, str, str]], dra: DraCpuIds = ({}, frozenset())
          ) -> dict[int, Cpu]:
    """Every CPU sysfs knows or the kubelet names, with its state and holders; a CPU a DRA
    device per CPU names is held by the container it was prepared for."""
    holders: dict[int, list[Holder]] = {}
    drivers: dict[int, str] = {}  # CPU -> the DRA driver that allocated it
    dra_ids, offered = dra
    for pod in pods:
        in_containers: set[int] = set()
        for container in pod.containers:
            holder = Holder(pod.namespace, pod.name, container.name)
            for cpu in dict.fromkeys(container.cpu_ids):
                holders.setdefault(cpu, []).append(holder)
            in_containers.update(container.cpu_ids)
            for item in container.dra_devices:
                dra_cpu = dra_ids.get((item.driver, item.pool, item.device))
                if dra_cpu is not None and holder not in holders.get(dra_cpu, ()):
                    holders.setdefault(dra_cpu, []).append(holder)
                    drivers[dra_cpu] = item.driver
                    in_containers.add(dra_cpu)
        for cpu in dict.fromkeys(pod.cpu_ids):  # pod level, overlapping the containers'
            if cpu not in in_containers:
                holders.setdefault(cpu, []).append(Holder(pod.namespace, pod.name))
    listed = frozenset(allocatable or ())
    result: dict[int, Cpu] = {}
    for cpu in sorted(set(topology.cpu_to_numa) | set(holders) | listed):
        held = holders.get(cpu, ())
        if held:
            state = CpuState.HELD
        elif mode == CpuMode.STATIC:
            state = CpuState.FREE if cpu in listed else CpuState.RESERVED
        elif mode == CpuMode.DRA and dra_ids:  # a device per CPU: free and reserved are known
            state = CpuState.FREE if cpu in offered else CpuState.RESERVED
        elif mode in (CpuMode.NONE, CpuMode.DRA):
            state = CpuState.SHARED
        else:
            state = CpuState.UNKNOWN
        straddles = any(h.container is not None and (h.namespace, h.pod, h.container)
                        in straddling for h in held)
        result[cpu] = Cpu(cpu, state, tuple(held), straddles, drivers.get(cpu, ""))
    return result


def _cores(node_cpus: frozenset[int], topology: Topology, cpus: dict[int, Cpu]) -> tuple[Core, ...]:
    """The node's CPUs grouped by physical core (sysfs thread siblings), cores by first CPU."""
    seen: set[int] = set()
    cores = []
    for cpu in sorted(node_cpus):
        if cpu in seen:
            continue
        siblings = sorted(topology.siblings(cpu) & node_cpus)
        seen.update(siblings)
        cores.append(Core(tuple(cpus[sibling] for sibling in siblings)))
    return tuple(cores)


# ---- memory -------------------------------------------------------------------------------

def _memory(accounting: Accounting, label: str) -> tuple[MemoryBar, ...]:
    """The node's bars, one per memory type the kubelet lists or assigns there; each with its
    share of the memory spanning NUMA nodes, as the metrics estimate it."""
    types = sorted({t for numa, t in accounting.memory_allocatable if numa == label}
                   | {t for numa, t in accounting.memory_allocated if numa == label})
    bars = []
    for memory_type in types:
        share = 0
        if label != UNKNOWN:
            share = _group_shares(accounting, memory_type).get(int(label), 0)
        bars.append(MemoryBar(memory_type, accounting.memory_allocatable.get((label, memory_type)),
                              accounting.memory_allocated.get((label, memory_type), 0), share))
    return tuple(bars)


def _group_shares(accounting: Accounting, memory_type: str) -> dict[int, int]:
    """Each node's estimated part of the type's blocks spanning NUMA nodes."""
    groups = {tuple(int(n) for n in numa.split(",")): size
              for (numa, kind), size in accounting.memory_allocated.items()
              if kind == memory_type and "," in numa and size}
    if not groups:
        return {}
    allocatable = {int(numa): size for (numa, kind), size in accounting.memory_allocatable.items()
                   if kind == memory_type and numa != UNKNOWN and "," not in numa}
    single = {int(numa): size for (numa, kind), size in accounting.memory_allocated.items()
              if kind == memory_type and numa != UNKNOWN and "," not in numa}
    total = apportion_group_memory(allocatable, single, groups)
    return {node: amount - single.get(node, 0) for node, amount in total.items()}


def _memory_groups(pods: Iterable[PodAssignment],
                   view: TopologyView) -> dict[str, list[MemoryGroup]]:
    """Blocks spanning several known NUMA nodes, by NUMA label and type, with their holders."""
    found: dict[tuple[str, str], tuple[int, list[Holder]]] = {}
    for pod in pods:
        for container in pod.containers:
            for block in container.memory:
                ids = view.resolve(block.numa_ids)[0]
                if len(ids) > 1:
                    key = (group_label(ids), block.memory_type)
                    size, holders = found.get(key, (0, []))
                    holders.append(Holder(pod.namespace, pod.name, container.name))
                    found[key] = (size + block.size, holders)
    groups: dict[str, list[MemoryGroup]] = {}
    for (label, memory_type), (size, holders) in sorted(found.items()):
        groups.setdefault(label, []).append(
            MemoryGroup(memory_type, size, tuple(dict.fromkeys(holders))))
    return groups


# ---- devices ------------------------------------------------------------------------------

def _device_chips(pods: Iterable[PodAssignment], snapshot: KubeletSnapshot, view: TopologyView,
                  straddling: set[tuple[str, str, str]]) -> dict[str, list[Chip]]:
    """Device-plugin devices by NUMA label: assigned ones where ``List`` puts them, the others
    where ``GetAllocatableResources`` does."""
    held: dict[tuple[str, str], tuple[set[int], list[Holder]]] = {}
    for pod in pods:
        for container in pod.containers:
            holder = Holder(pod.namespace, pod.name, container.name)
            for entry in container.devices:
                for device_id in entry.device_ids:
                    ids, holders = held.setdefault((entry.resource, device_id), (set(), []))
                    ids.update(_known(entry.numa_ids, view))
                    if holder not in holders:
                        holders.append(holder)
    listed: dict[tuple[str, str], set[int]] = {}
    if snapshot.allocatable is not None:
        for entry in snapshot.allocatable.devices:
            for device_id in entry.device_ids:
                listed.setdefault((entry.resource, device_id), set()).update(
                    _known(entry.numa_ids, view))
    chips: dict[str, list[Chip]] = {}
    for key in sorted(set(held) | set(listed)):
        resource, device_id = key
        if key in held:
            ids, holders = held[key]
            state = (ChipState.UNAVAILABLE if snapshot.allocatable is not None
                     and key not in listed else ChipState.HELD)
        else:
            ids, holders, state = listed[key], [], ChipState.FREE
        label = group_label(tuple(sorted(ids)))
        straddles = any(h.container is not None and (h.namespace, h.pod, h.container)
                        in straddling for h in holders)
        chips.setdefault(label, []).append(
            Chip(False, resource, device_id, label, state, tuple(holders), straddles))
    return chips


def _known(numa_ids: NumaIds, view: TopologyView) -> tuple[int, ...]:
    return view.resolve(numa_ids)[0]


def _dra_chips(accounting: Accounting, view: TopologyView, inventory: DraInventory | None,
               straddling: set[tuple[str, str, str]]) -> dict[str, list[Chip]]:
    """DRA devices by NUMA label: prepared ones as the accounting placed them, the other
    published ones (with the Kubernetes-API view) where their ResourceSlice puts them."""
    prepared: dict[tuple[str, str, str], tuple[str, list[Holder], set[str]]] = {}
    for row in accounting.dra_device_info:
        driver, pool, device, numa, _claim, namespace, pod, container, share = row
        _, holders, shares = prepared.setdefault((driver, pool, device), (numa, [], set()))
        holder = Holder(namespace, pod, container)
        if holder not in holders:
            holders.append(holder)
        if share:
            shares.add(share)
    published = {device.key: device for device in (inventory.devices if inventory else ())}
    chips: dict[str, list[Chip]] = {}
    for key in sorted(set(prepared) | set(published)):
        driver, pool, device = key
        if key in prepared:
            label, holders, shares = prepared[key]
            state = ChipState.HELD
        else:
            label = group_label(view.resolve(published[key].numa_ids)[0])
            holders, shares = [], set()
            state = ChipState.FREE if published[key].allocatable else ChipState.TAINTED
        straddles = any((h.namespace, h.pod, h.container) in straddling for h in holders)
        chips.setdefault(label, []).append(Chip(True, driver, f"{pool}/{device}", label, state,
                                                tuple(holders), straddles, len(shares)))
    return chips


# ---- shapes -------------------------------------------------------------------------------

def _shape_line(answer: ShapeAnswer) -> ShapeLine:
    verdict = answer.verdict
    return ShapeLine(answer.shape.name, verdict.admitted, verdict.reason,
                     verdict.blocking_resource, answer.capacity, sentence(answer))
