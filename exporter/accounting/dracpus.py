"""Exclusive CPUs a DRA CPU driver allocates (dra-driver-cpu's ``dra.cpu``), counted as CPUs.

Such a driver runs on nodes whose CPU manager policy is ``none`` and hands out exclusive CPUs
through ResourceClaims: ``List`` then shows a container no ``cpu_ids``, only its claims'
devices (driver, pool, device). What they are as CPUs comes from the device's ResourceSlice
(with the Kubernetes-API view), never from its name:

* a device publishing a CPU id (``cpuID``: the driver's individual mode, one device per CPU) is
  that CPU;
* any other device of a CPU driver is a group (grouped mode: one device per NUMA node or
  socket whose CPUs claims consume as capacity; or a device the view does not know). How many
  of its CPUs a container holds is not in ``List``: the driver requires the container's CPU
  request, or the pod's with pod-level resources, to state it, so the count comes from the pod
  context (:class:`~exporter.model.CpuRequests`); which CPUs they are, nothing the exporter
  reads says. A count the pod context cannot give is not guessed: it is the data issue
  ``dra_cpus_uncounted``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..issues import IssueKind, Issues
from ..model import CpuRequests, DraInventory, DraKey, PodAssignment, Topology
from .numa import UNKNOWN, group_label

DEFAULT_CPU_DRIVERS = frozenset({"dra.cpu"})


@dataclass(frozen=True, eq=False)
class DraCpuDevices:
    """Which DRA devices are CPUs: those of the CPU drivers, each published device of them
    with the CPU it is (individual mode) or the CPUs it offers (grouped), from one inventory."""

    drivers: frozenset[str] = frozenset()
    cpu_ids: Mapping[DraKey, int] = field(default_factory=dict)  # individual mode

    def is_cpu(self, key: DraKey) -> bool:
        return key[0] in self.drivers


NO_DRA_CPUS = DraCpuDevices()


def socket_numa(topology: Topology, socket: int) -> tuple[int, ...]:
    """The NUMA nodes whose CPUs are on ``socket`` (sysfs ``physical_package_id``): where a
    device grouped by socket, which names no NUMA node, has its CPUs."""
    return tuple(sorted({numa for cpu, numa in topology.cpu_to_numa.items()
                         if topology.cpu_packages.get(cpu) == socket}))


def cpu_device_numa(topology: Topology, inventory: DraInventory | None,
                    drivers: frozenset[str]) -> dict[DraKey, tuple[int, ...]]:
    """The NUMA ids of the CPU drivers' published devices that name no NUMA node themselves:
    a device per CPU is on its CPU's node, a device per socket on its socket's nodes."""
    found: dict[DraKey, tuple[int, ...]] = {}
    for device in inventory.devices if inventory is not None else ():
        if device.driver not in drivers or device.numa_ids is not None or device.cpu is None:
            continue
        if device.cpu.cpu_id is not None and device.cpu.cpu_id in topology.cpu_to_numa:
            found[device.key] = (topology.cpu_to_numa[device.cpu.cpu_id],)
        elif device.cpu.socket is not None:
            found[device.key] = socket_numa(topology, device.cpu.socket)
    return found


@dataclass(eq=False)
class PodDraCpus:
    """One pod's CPUs from DRA CPU drivers: by id (devices per CPU) and by count per NUMA
    label (grouped devices), per container and for the pod; ``asked`` when a count came, or
    should have come, from the pod's CPU requests."""

    ids: dict[str, set[int]] = field(default_factory=dict)  # container -> CPU ids
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (container, label)
    asked: bool = False


def pod_dra_cpus(pod: PodAssignment, devices: DraCpuDevices,
                 dra_numa: Mapping[DraKey, tuple[int, ...]], requests: CpuRequests | None,
                 context: bool, issues: Issues) -> PodDraCpus:
    """The pod's DRA CPUs. ``requests``: the pod's CPU requests from the pod context (None when
    the context has no such pod, or there is none: ``context`` says which, for the issue's
    words). A device named twice (a claim a container names twice) counts once."""
    found = PodDraCpus()
    if not devices.drivers:
        return found
    for container in pod.containers:
        ids: set[int] = set()
        groups: dict[DraKey, tuple[int, ...]] = {}
        for item in container.dra_devices:
            key = (item.driver, item.pool, item.device)
            if not devices.is_cpu(key) or not item.device:
                continue
            cpu = devices.cpu_ids.get(key)
            if cpu is not None:
                ids.add(cpu)
            else:
                groups[key] = dra_numa.get(key, ())
        if ids:
            found.ids[container.name] = ids
        if not groups:
            continue
        found.asked = True
        count = grouped_count(container.name, len(ids), requests)
        if count is None:
            where = f"{pod.namespace}/{pod.name}/{container.name}"
            key = next(iter(groups))
            why = ("there is no pod context (the kubelet's Pods API or --kube-api)"
                   if not context else "the pod context has no pod of that name"
                   if requests is None else "its spec states no CPU request for it")
            issues.add(IssueKind.DRA_CPUS_UNCOUNTED,
                       f"container {where} holds CPUs of the DRA device {'/'.join(key)}; how "
                       f"many, only its CPU request says, and {why}")
            continue
        numa: set[int] = set()
        for ids_of_device in groups.values():
            numa.update(ids_of_device)
        label = UNKNOWN if any(not g for g in groups.values()) else group_label(
            tuple(sorted(numa)))
        if count:
            found.counts[(container.name, label)] = count
    return found


def grouped_count(container: str, by_id: int, requests: CpuRequests | None) -> int | None:
    """How many CPUs a container holds from grouped devices: its CPU request in CPUs, rounded
    up as the driver's admission webhook counts it against the claims (dra-driver-cpu
    ``pkg/admission``: ``CPURequestCount``, 1500m -> 2), less those it holds by id; without a
    request of its own, the pod-level request less every other container's, when each of them
    states one. None when neither says."""
    if requests is None:
        return None
    stated = dict(requests.containers)
    millis = stated.get(container)
    if millis is None and requests.pod is not None:
        others = [m for name, m in requests.containers if name != container]
        if all(m is not None for m in others):
            millis = requests.pod - sum(m for m in others if m is not None)
    if millis is None or millis <= 0:
        return None
    return max(0, -(-millis // 1000) - by_id)


def cpu_capacity(inventory: DraInventory | None, drivers: frozenset[str],
                 numa: Mapping[DraKey, tuple[int, ...]]) -> tuple[Counter[str], dict[int, str]]:
    """CPUs the CPU drivers' untainted published devices offer: a group's capacity ``cpu``
    per NUMA label (grouped devices), and each CPU a device per CPU is, with its label (once,
    however many devices name it), so that the ledger counts a CPU the CPU manager lists too
    only once."""
    grouped: Counter[str] = Counter()
    by_id: dict[int, str] = {}
    for device in inventory.devices if inventory is not None else ():
        if device.driver not in drivers or device.cpu is None or not device.allocatable:
            continue
        label = group_label(numa.get(device.key, ()))
        if device.cpu.cpu_id is not None:
            by_id.setdefault(device.cpu.cpu_id, label)
        elif device.cpu.cpus:
            grouped[label] += device.cpu.cpus
    return grouped, by_id


def cpu_ids(inventory: DraInventory | None, drivers: frozenset[str]) -> dict[DraKey, int]:
    """The CPU each published device of a CPU driver is, for devices per CPU."""
    return {device.key: device.cpu.cpu_id for device in
            (inventory.devices if inventory is not None else ())
            if device.driver in drivers and device.cpu is not None
            and device.cpu.cpu_id is not None}
