"""The node ledger: node-wide aggregates kept up to date from one snapshot to the next.

A :class:`Ledger` applies only the pods that appeared, left or changed since the previous
snapshot, then derives the node figures (allocated, utilization, unavailable devices, data
issues) from its aggregates. :func:`account` is the same computation from scratch.

Exclusive CPUs are counted whoever allocates them: the kubelet's CPU manager (``cpu_ids``) or
a DRA CPU driver (:mod:`.dracpus`); ``cpu_allocators`` names which ones this node has.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..issues import IssueKind, Issues
from ..model import (
    Allocatable,
    ApiVersion,
    CpuRequests,
    DraInventory,
    KubeletSnapshot,
    PodAssignment,
    Topology,
)
from .dra import DraGroup, DraLedger
from .dracpus import DEFAULT_CPU_DRIVERS
from .figures import (
    AllocatableFigures,
    ContainerKey,
    Device,
    DraInfoRow,
    PodFigures,
    PodKey,
    allocatable_figures,
    pod_figures,
)
from .listings import merge_listings
from .numa import CPU_RESOURCE, UNKNOWN, TopologyView, group_label
from .utilization import excess, memory_utilization, set_ratio

# (namespace, pod) -> the pod's CPU requests as the pod context has them (None: not there)
CpuRequestSource = Callable[[str, str], CpuRequests | None]
CPU_MANAGER, DRA = "cpu_manager", "dra"  # the allocators of exclusive CPUs


@dataclass(eq=False)
class Accounting:
    """Everything the metrics say about one snapshot, keyed by label values.

    A ``None`` node-level figure means the kubelet did not report that resource at all (so no
    series is exported); an empty dict means it did, with nothing to show. Workload figures
    live in ``pod_figures`` (one :class:`PodFigures` per pod, in label order); the merged dicts
    below are built on first use and kept (an ``Accounting`` is not changed once returned), for
    reports and tests.
    """

    api_version: ApiVersion
    cpus_allocatable: dict[str, int] | None = None
    cpus_allocated: dict[str, int] | None = None
    memory_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)  # (numa, type)
    memory_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    # (numa, resource)
    devices_allocatable: dict[tuple[str, str], int] = field(default_factory=dict)
    devices_allocated: dict[tuple[str, str], int] = field(default_factory=dict)
    # of those, the ones GetAllocatableResources does not list; None without that call
    devices_allocated_unavailable: dict[tuple[str, str], int] | None = None
    utilization: dict[tuple[str, str], float] = field(default_factory=dict)  # (numa, resource)
    # (driver, pool, numa) -> distinct devices, and (device, share_id) pairs
    dra_devices_allocated: dict[DraGroup, int] = field(default_factory=dict)
    dra_device_shares: dict[DraGroup, int] = field(default_factory=dict)
    # what this node's ResourceSlices publish; None without the Kubernetes-API view
    dra_devices_allocatable: dict[DraGroup, int] | None = None
    dra_devices_tainted: dict[tuple[str, str, str, str], int] | None = None  # + effect
    misaligned_containers: int | None = None
    # (allocator, driver) -> 1: who allocates this node's exclusive CPUs (CPU_MANAGER, or DRA
    # with the CPU driver's name)
    cpu_allocators: dict[tuple[str, str], int] = field(default_factory=dict)
    pod_figures: list[PodFigures] = field(default_factory=list)
    data_issues: Counter[str] = field(default_factory=Counter)
    issue_examples: dict[str, str] = field(default_factory=dict)
    pod_level_seen: bool = False
    containers: int = 0

    @property
    def pods(self) -> int:
        return len(self.pod_figures)

    def _merged(self, name: str) -> dict[Any, int]:
        merged: dict[Any, int] = {}
        for pod in self.pod_figures:
            merged.update(getattr(pod, name))
        return merged

    @cached_property
    def container_cpus(self) -> dict[tuple[str, str, str, str], int]:
        return self._merged("container_cpus")

    @cached_property
    def container_memory(self) -> dict[tuple[str, str, str, str, str], int]:
        return self._merged("container_memory")

    @cached_property
    def container_devices(self) -> dict[tuple[str, str, str, str, str], int]:
        return self._merged("container_devices")

    @cached_property
    def container_numa_nodes(self) -> dict[ContainerKey, int]:
        return self._merged("container_numa_nodes")

    @cached_property
    def dra_cpus(self) -> dict[tuple[str, str, str, str], int]:
        """CPUs containers hold from grouped DRA CPU devices, without ids."""
        return self._merged("dra_cpus")

    @cached_property
    def pod_cpus(self) -> dict[tuple[str, str, str], int]:
        return self._merged("pod_cpus")

    @cached_property
    def pod_memory(self) -> dict[tuple[str, str, str, str], int]:
        return self._merged("pod_memory")

    @cached_property
    def device_info(self) -> list[tuple[str, str, str, str, str, str]]:
        return sorted(row for pod in self.pod_figures for row in pod.device_info)

    @cached_property
    def dra_device_info(self) -> list[DraInfoRow]:
        return sorted((row for pod in self.pod_figures for row in pod.dra_device_info),
                      key=lambda row: tuple(x or "" for x in row))


class Ledger:
    """Node-wide aggregates kept up to date from one snapshot to the next.

    :meth:`update` applies only the pods that appeared, left or changed (pods are compared by
    identity: the decoder hands back the same object for an unchanged pod), then derives the
    node figures from the aggregates. When nothing changed it returns the previous
    :class:`Accounting` object itself, so callers can skip re-rendering.
    """

    def __init__(self, cpu_drivers: frozenset[str] = DEFAULT_CPU_DRIVERS) -> None:
        """``cpu_drivers``: the DRA drivers whose devices are CPUs (``--dra-cpu-drivers``)."""
        self._cpu_drivers = cpu_drivers
        self._requests: CpuRequestSource | None = None
        self._reset(None, TopologyView(Topology({}, {})), ApiVersion.V1, None)
        self._result: Accounting | None = None
        self._pod_ids: frozenset[int] = frozenset()
        self._allocatable: Allocatable | None = None
        self._allocatable_figures = AllocatableFigures()

    def _reset(self, topology: Topology | None, view: TopologyView, api_version: ApiVersion,
               dra: DraInventory | None) -> None:
        self._topology = topology
        self._view = view
        self._api_version = api_version
        self._dra = DraLedger(dra, view, self._cpu_drivers)
        self._pods: dict[PodKey, tuple[PodAssignment, PodFigures]] = {}
        self._key_of: dict[int, PodKey] = {}  # id of a held pod -> its key
        self._order: list[PodKey] = []  # keys of held pods, sorted
        self._merged: dict[tuple[int, ...], tuple[tuple[PodAssignment, ...], PodAssignment]] = {}
        self._cpu_holders: Counter[int] = Counter()  # cpu -> pods holding it
        self._cpu_extra_holders = 0  # holders beyond the first, summed over CPUs
        self._cpus_by_numa: Counter[str] = Counter()
        self._dra_cpu_ids: Counter[int] = Counter()  # held CPUs a DRA CPU driver allocated
        self._dra_cpu_counts: Counter[str] = Counter()  # grouped DRA CPUs, per NUMA label
        self._asked: dict[PodKey, CpuRequests | None] = {}  # the requests pods were counted by
        self._device_holders: dict[Device, int] = {}  # device -> pods holding it
        self._device_numa: dict[Device, Counter[int]] = {}  # -> holders naming each NUMA id
        self._device_group: dict[Device, tuple[str, tuple[int, ...]]] = {}  # label, ids
        self._devices: Counter[tuple[str, str]] = Counter()  # (group, resource)
        # (single node, resource): assigned devices local to it that allocatable lists
        self._device_use: Counter[tuple[int, str]] = Counter()
        self._unavailable: Counter[tuple[str, str]] = Counter()  # assigned, not listed
        self._device_extra_holders = 0
        self._memory: Counter[tuple[str, str]] = Counter()  # (group, type)
        self._memory_holders: Counter[tuple[str, str]] = Counter()  # -> pods with a block
        self._issues: Counter[str] = Counter()
        # kind -> the example of each held pod with that kind, oldest first
        self._examples: dict[str, dict[PodKey, str]] = {}
        self._misaligned = 0
        self._pod_level = 0
        self._containers = 0
        self._pod_ids = frozenset()
        self._listed = 0
        self._repeated = 0
        self._result = None

    def update(self, pods: Sequence[PodAssignment], allocatable: Allocatable | None,
               topology: Topology, api_version: ApiVersion = ApiVersion.V1,
               dra: DraInventory | None = None,
               requests: CpuRequestSource | None = None) -> Accounting:
        """The accounting of this snapshot, reusing everything that did not change. ``dra``:
        the devices this node's ResourceSlices publish (``None`` without the Kubernetes-API
        view: every DRA device is then of unknown NUMA node); a new inventory object makes
        every pod count again, as the pods' DRA devices may have moved. ``requests``: the
        pods' CPU requests from the pod context (``None`` without one), asked only for pods
        holding grouped DRA CPU devices, and asked again each time."""
        self._requests = requests
        ids = frozenset(map(id, pods))
        if (self._result is not None and ids == self._pod_ids and len(ids) == len(pods)
                and len(pods) == self._listed and allocatable is self._allocatable
                and topology is self._topology and api_version == self._api_version
                and dra is self._dra.inventory):
            # the same pods, each listed once, as last time: only their requests may differ
            if self._count_again():
                self._result = self._finish(self._repeated)
            return self._result
        if (topology is not self._topology or api_version != self._api_version
                or dra is not self._dra.inventory):
            self._reset(topology, TopologyView(topology), api_version, dra)
            self._allocatable = None
            self._allocatable_figures = AllocatableFigures()
        if allocatable is not self._allocatable or self._result is None:
            self._allocatable = allocatable
            self._allocatable_figures = allocatable_figures(allocatable, self._view,
                                                            api_version != ApiVersion.V1ALPHA1)
            self._recount_device_use()
        repeated = 0 if self._apply_changes(pods, ids) else self._apply_all(pods)
        self._count_again()
        self._pod_ids = ids
        self._listed = len(pods)
        self._repeated = repeated
        self._result = self._finish(repeated)
        return self._result

    def _count_again(self) -> bool:
        """Count again the pods holding grouped DRA CPUs whose CPU requests changed in the pod
        context (it arrived, or lost the pod); whether any did."""
        stale = [key for key, used in self._asked.items() if self._requests_of(key) != used]
        for key in stale:
            pod = self._pods[key][0]
            self._forget(key)
            self._hold(key, pod)
        return bool(stale)

    def _requests_of(self, key: PodKey) -> CpuRequests | None:
        return self._requests(*key) if self._requests is not None else None

    def _apply_changes(self, pods: Sequence[PodAssignment], ids: frozenset[int]) -> bool:
        """Apply only the pods that left or arrived; False when that is not enough."""
        if len(ids) != len(pods) or self._merged:
            return False  # a pod listed twice: merge in the long way
        gone = {self._key_of[i] for i in self._pod_ids - ids}
        fresh = [pod for pod in pods if id(pod) not in self._pod_ids]
        keys = [(pod.namespace, pod.name) for pod in fresh]
        if len(set(keys)) != len(keys) or any(k in self._pods and k not in gone for k in keys):
            return False  # a new listing of a pod that is still listed
        for key in gone:
            self._forget(key)
        for key, pod in zip(keys, fresh):
            self._hold(key, pod)
        return True

    def _apply_all(self, pods: Sequence[PodAssignment]) -> int:
        """Compare every pod by key (needed when a pod is listed twice); returns repeats."""
        current = self._by_key(pods)
        for key in self._pods.keys() - current.keys():
            self._forget(key)
        for key, pod in current.items():
            held = self._pods.get(key)
            if held is not None and held[0] is pod:
                continue
            if held is not None:
                self._forget(key)
            self._hold(key, pod)
        return len(pods) - len(current)

    def _hold(self, key: PodKey, pod: PodAssignment) -> None:
        cpus = self._dra.cpus
        requests = None
        if cpus.drivers and any(d.driver in cpus.drivers for c in pod.containers
                                for d in c.dra_devices):
            requests = self._requests_of(key)
        figures = pod_figures(pod, self._view, self._api_version != ApiVersion.V1ALPHA1,
                              self._dra.numa, cpus, requests, self._requests is not None)
        if figures.asked_requests:
            self._asked[key] = requests
        self._pods[key] = (pod, figures)
        self._key_of[id(pod)] = key
        insort(self._order, key)
        self._add(figures)

    def _forget(self, key: PodKey) -> None:
        self._asked.pop(key, None)
        pod, figures = self._pods.pop(key)
        del self._key_of[id(pod)]
        del self._order[bisect_left(self._order, key)]
        self._add(figures, sign=-1)

    def _by_key(self, pods: Sequence[PodAssignment]) -> dict[PodKey, PodAssignment]:
        """Pods by (namespace, name); a pod listed twice is merged into one."""
        current: dict[PodKey, PodAssignment] = {}
        repeated: dict[PodKey, list[PodAssignment]] = {}
        for pod in pods:
            key = (pod.namespace, pod.name)
            if key in current:
                repeated.setdefault(key, [current[key]]).append(pod)
            current[key] = pod
        used = {}
        for key, parts in repeated.items():
            identity = tuple(map(id, parts))
            cached = self._merged.get(identity)
            if cached is None:  # the parts are kept with the result: their ids are the key
                cached = (tuple(parts), merge_listings(parts))
            used[identity] = cached
            current[key] = cached[1]
        self._merged = used
        return current

    def _add(self, figures: PodFigures, sign: int = 1) -> None:
        self._issues.update({k: sign * v for k, v in figures.issues.items()})
        for kind, example in figures.examples.items():
            if sign > 0:
                self._examples.setdefault(kind, {})[figures.key] = example
            else:  # the example leaves with its pod: another holder's takes over
                held = self._examples[kind]
                del held[figures.key]
                if not held:
                    del self._examples[kind]
        self._misaligned += sign * figures.misaligned
        self._pod_level += sign * figures.pod_level
        self._containers += sign * figures.containers
        labels = self._view.cpu_label
        for cpu in figures.dra_cpu_ids:
            self._dra_cpu_ids[cpu] += sign
            if not self._dra_cpu_ids[cpu]:
                del self._dra_cpu_ids[cpu]
        for (_, _, _, label), count in figures.dra_cpus.items():
            self._dra_cpu_counts[label] += sign * count
        for cpu in (figures.cpus | figures.dra_cpu_ids if figures.dra_cpu_ids
                    else figures.cpus):
            before = self._cpu_holders[cpu]
            after = before + sign
            self._cpu_holders[cpu] = after
            if before == 0 or after == 0:
                self._cpus_by_numa[labels.get(cpu, UNKNOWN)] += sign
            else:
                self._cpu_extra_holders += sign
            if after == 0:
                del self._cpu_holders[cpu]
        for key, size in figures.memory.items():
            self._memory[key] += sign * size
            self._memory_holders[key] += sign
        self._dra.add(figures, sign)
        for device, reported in figures.devices.items():
            resource = device[0]
            before = self._device_holders.get(device, 0)
            after = before + sign
            # the union of the holders' reported ids, kept as counts so a holder leaving costs
            # its own ids only (many pods naming one device must not make a refresh quadratic)
            numa = self._device_numa.setdefault(device, Counter())
            for node in reported:
                numa[node] += sign
                if not numa[node]:
                    del numa[node]
            self._device_extra_holders += max(0, after - 1) - max(0, before - 1)
            old = self._device_group.pop(device, None)
            if old is not None:
                self._devices[(old[0], resource)] -= 1
                self._count_use(device, old, -1)
            if after:
                self._device_holders[device] = after
                ids = self._view.resolve(tuple(sorted(numa)))[0]
                group = (group_label(ids), ids)
                self._device_group[device] = group
                self._devices[(group[0], resource)] += 1
                self._count_use(device, group, +1)
            else:
                del self._device_holders[device]
                del self._device_numa[device]

    def _count_use(self, device: Device, group: tuple[str, tuple[int, ...]], sign: int) -> None:
        """An assigned device counts toward utilization while allocatable lists it (an
        unhealthy or unregistered device takes no allocatable capacity); else it is
        unavailable, under the group List attributes it to."""
        if device in self._allocatable_figures.listed:
            for node in group[1]:
                self._device_use[(node, device[0])] += sign
        else:
            self._unavailable[(group[0], device[0])] += sign

    def _recount_device_use(self) -> None:
        """After allocatable changed: which assigned devices it lists, from scratch."""
        self._device_use = Counter()
        self._unavailable = Counter()
        for device, group in self._device_group.items():
            self._count_use(device, group, +1)

    def _finish(self, repeated_pods: int) -> Accounting:
        with_topology = self._api_version != ApiVersion.V1ALPHA1
        alloc = self._allocatable_figures
        result = Accounting(api_version=self._api_version)
        issues = Issues()
        issues.counts.update(+self._issues)
        issues.examples.update({kind: next(iter(held.values()))
                                for kind, held in self._examples.items()})
        for part in (alloc, self._dra.published):
            if part is not None:
                issues.counts.update(part.issues)
                for kind, example in part.examples.items():
                    issues.examples.setdefault(kind, example)
        if repeated_pods:
            issues.add(IssueKind.DUPLICATE_ENTRY, "a pod is listed twice", count=repeated_pods)
        if self._cpu_extra_holders:
            issues.add(IssueKind.CPU_MULTIPLE_OWNERS, "a CPU is assigned to containers of two pods",
                       count=self._cpu_extra_holders)
        if self._device_extra_holders:
            issues.add(IssueKind.DEVICE_MULTIPLE_OWNERS, "a device is assigned to two pods",
                       count=self._device_extra_holders)

        if with_topology:
            offered = _cpus_offered(alloc, self._dra)
            if offered:
                result.cpus_allocatable = dict(offered)
            allocated = {label: 0 for label in (result.cpus_allocatable or {})}
            held = self._cpus_by_numa + self._dra_cpu_counts
            allocated.update({k: v for k, v in held.items() if v})
            result.cpus_allocated = allocated
            unknown = self._cpus_by_numa.get(UNKNOWN, 0)
            if unknown:
                issues.add(IssueKind.UNKNOWN_CPU,
                           "assigned CPUs are not listed under any NUMA node in sysfs",
                           count=unknown)
            if self._allocatable is not None:
                outside = (self._cpu_holders.keys() - (alloc.cpus or frozenset())
                           - self._dra_cpu_ids.keys())
                if outside:
                    issues.add(IssueKind.CPU_NOT_ALLOCATABLE,
                               f"CPUs {sorted(outside)[:8]} are assigned but not allocatable",
                               count=len(outside))
            for label, capacity in (result.cpus_allocatable or {}).items():
                if label != UNKNOWN and "," not in label and capacity > 0:
                    set_ratio(result.utilization, issues, label, CPU_RESOURCE,
                              allocated.get(label, 0), capacity)
            result.memory_allocatable = dict(alloc.memory)
            memory = {key: 0 for key in alloc.memory}
            memory.update({k: self._memory[k] for k, n in self._memory_holders.items() if n})
            result.memory_allocated = memory
            memory_utilization(result.utilization, result.memory_allocatable,
                               result.memory_allocated, issues, self._allocatable is not None)
            result.misaligned_containers = self._misaligned
            result.cpu_allocators = _allocators(alloc, self._cpu_holders, self._dra_cpu_ids,
                                                 self._dra)
        result.devices_allocatable = dict(alloc.devices)
        devices = {key: 0 for key in alloc.devices}
        devices.update({k: v for k, v in self._devices.items() if v})
        result.devices_allocated = devices
        if self._allocatable is not None and with_topology:
            result.devices_allocated_unavailable = {key: self._unavailable.get(key, 0)
                                                    for key in devices}
        for (node, resource), capacity in sorted(alloc.device_capacity.items()):
            set_ratio(result.utilization, issues, str(node), resource,
                      self._device_use.get((node, resource), 0), capacity)
        if self._allocatable is not None:
            for (node, resource), used in self._device_use.items():
                if used > 0 and (node, resource) not in alloc.device_capacity:
                    excess(issues, str(node), resource, used)
        _dra_figures(result, issues, self._dra)
        pods = self._pods
        result.pod_figures = [pods[key][1] for key in self._order]
        result.containers = self._containers
        result.pod_level_seen = self._pod_level > 0
        result.data_issues = Counter({k: v for k, v in issues.counts.items() if v > 0})
        result.issue_examples = {k: v for k, v in issues.examples.items()
                                 if k in result.data_issues}
        return result


def _cpus_offered(alloc: AllocatableFigures, dra: DraLedger) -> Counter[str]:
    """Allocatable CPUs per NUMA label: the CPU manager's and those the DRA CPU drivers'
    devices offer, a CPU both name (a device per CPU the CPU manager lists too) once."""
    offered = Counter(alloc.cpus_by_numa or {})
    if dra.published is not None:
        listed = alloc.cpus or frozenset()
        offered.update(dra.published.cpus)
        offered.update(label for cpu, label in dra.published.cpu_ids.items()
                       if cpu not in listed)
    return offered


def _allocators(alloc: AllocatableFigures, held_by_id: Counter[int], held_by_dra: Counter[int],
                dra: DraLedger) -> dict[tuple[str, str], int]:
    """Who allocates exclusive CPUs here: the CPU manager when it lists allocatable CPUs or a
    container holds some by id outside DRA; each CPU driver with devices here."""
    found = {(DRA, driver): 1 for driver in sorted(dra.cpu_drivers_seen())}
    if alloc.cpus or held_by_id.keys() - held_by_dra.keys():
        found = {(CPU_MANAGER, ""): 1, **found}
    return found


def _dra_figures(result: Accounting, issues: Issues, dra: DraLedger) -> None:
    """DRA devices per (driver, pool, NUMA node): allocated (a true zero wherever devices are
    allocatable), shares, what the slices publish, and utilization per single node."""
    result.dra_device_shares = dra.shares()
    if dra.published is not None:
        result.dra_devices_allocatable = dict(dra.published.allocatable)
        result.dra_devices_tainted = dict(dra.published.tainted)
    for node, driver, used, capacity in dra.utilization():
        set_ratio(result.utilization, issues, str(node), driver, used, capacity)
    result.dra_devices_allocated = dra.allocated()


def account(snapshot: KubeletSnapshot, topology: Topology,
            dra: DraInventory | None = None, requests: CpuRequestSource | None = None,
            cpu_drivers: frozenset[str] = DEFAULT_CPU_DRIVERS) -> Accounting:
    """Turn one kubelet snapshot and the sysfs topology into every exported figure."""
    return Ledger(cpu_drivers).update(snapshot.pods, snapshot.allocatable, topology,
                                      snapshot.api_version, dra, requests)
