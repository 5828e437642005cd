"""DRA devices node-wide: what the node's ResourceSlices publish, and what its pods hold.

:func:`dra_figures` attributes the published devices to NUMA nodes once per inventory and
topology (allocatable, tainted by effect, capacity per single node); :class:`DraLedger` keeps
the devices the pods hold (a device counted once however many containers name it, shares
counted apart) up to date pod by pod, for the node :class:`~exporter.accounting.ledger.Ledger`.
Without the Kubernetes-API view there is no inventory: every held device is then of unknown
NUMA node and nothing is allocatable. Devices of DRA CPU drivers are CPUs besides
(:mod:`.dracpus`): what they offer is counted with the node's allocatable CPUs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..issues import IssueKind, Issues
from ..model import DraInventory, DraKey, shared
from .dracpus import NO_DRA_CPUS, DraCpuDevices, cpu_capacity, cpu_device_numa, cpu_ids
from .figures import NO_DRA_NUMA, DraShare, PodFigures
from .numa import TopologyView, group_label

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
    cpus: Counter[str] = field(default_factory=Counter)  # grouped CPU devices' CPUs, per label
    cpu_ids: dict[int, str] = field(default_factory=dict)  # CPUs devices per CPU are -> label
    issues: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


def dra_figures(inventory: DraInventory | None, view: TopologyView,
                cpu_drivers: frozenset[str] = frozenset()) -> DraFigures | None:
    """Published devices per (driver, pool, NUMA label): untainted ones as allocatable, each
    taint effect a device carries counted under that effect. An id sysfs does not know is
    dropped, as for any other item (a data issue). A CPU driver's device that names no NUMA
    node is on its CPU's or its socket's (sysfs). ``None`` without the Kubernetes API."""
    if inventory is None:
        return None
    figures = DraFigures()
    issues = Issues()
    allocatable: Counter[DraGroup] = Counter()
    tainted: Counter[tuple[str, str, str, str]] = Counter()
    listed: set[DraKey] = set()
    cpu_numa = cpu_device_numa(view.topology, inventory, cpu_drivers) if cpu_drivers else {}
    for device in inventory.devices:
        key = device.key
        if key in figures.numa:
            issues.add(IssueKind.DUPLICATE_ENTRY,
                       f"DRA device {'/'.join(key)} published twice in one pool generation")
            continue
        ids = view.ids(cpu_numa.get(key, device.numa_ids), issues,
                       f"DRA device {'/'.join(key)}")
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
    figures.cpus, figures.cpu_ids = cpu_capacity(inventory, cpu_drivers, figures.numa)
    figures.issues = issues.counts
    figures.examples = issues.examples
    return figures


class DraLedger:
    """The DRA devices the pods hold, kept up to date pod by pod, against one inventory.

    A device is counted once however many pods or containers name it (each holder counted,
    the device's group changing only with the first and the last), and each share of a shared
    device once; a held device the inventory offers to new claims counts toward the
    utilization of its NUMA nodes.
    """

    def __init__(self, inventory: DraInventory | None, view: TopologyView,
                 cpu_drivers: frozenset[str] = frozenset()):
        self.inventory = inventory
        self.published = dra_figures(inventory, view, cpu_drivers)
        self.numa = self.published.numa if self.published else NO_DRA_NUMA
        self.cpus = (DraCpuDevices(cpu_drivers, cpu_ids(inventory, cpu_drivers))
                     if cpu_drivers else NO_DRA_CPUS)
        self._published_cpu_drivers = frozenset(
            d.driver for d in (inventory.devices if inventory is not None else ())
            if d.driver in cpu_drivers)
        self._holders: Counter[DraKey] = Counter()
        self._allocated: Counter[DraGroup] = Counter()
        self._share_holders: Counter[DraShare] = Counter()
        self._shares: Counter[DraGroup] = Counter()
        self._use: Counter[tuple[int, str]] = Counter()  # (node, driver): allocatable ones

    def add(self, figures: PodFigures, sign: int = 1) -> None:
        """One pod's DRA devices and shares held (``sign`` 1) or let go (-1)."""
        for key in figures.dra:
            before = self._holders[key]
            after = before + sign
            self._holders[key] = after
            if before == 0 or after == 0:
                self._allocated[self._group(key)] += sign
                if self.published is not None and key in self.published.listed:
                    for node in self.numa.get(key, ()):
                        self._use[(node, key[0])] += sign
            if after == 0:
                del self._holders[key]
        for share in figures.dra_shares:
            before = self._share_holders[share]
            after = before + sign
            self._share_holders[share] = after
            if before == 0 or after == 0:
                self._shares[self._group(share[0])] += sign
            if after == 0:
                del self._share_holders[share]

    def _group(self, key: DraKey) -> DraGroup:
        return (key[0], key[1], group_label(self.numa.get(key, ())))

    def allocated(self) -> dict[DraGroup, int]:
        """Held devices per (driver, pool, NUMA label), a true zero wherever devices are
        allocatable."""
        held = {k: v for k, v in self._allocated.items() if v}
        if self.published is None:
            return held
        return {**dict.fromkeys(self.published.allocatable, 0), **held}

    def cpu_drivers_seen(self) -> set[str]:
        """The CPU drivers whose devices this node publishes or its containers hold."""
        drivers = self.cpus.drivers
        return {key[0] for key in self._holders if key[0] in drivers} | self._published_cpu_drivers

    def shares(self) -> dict[DraGroup, int]:
        return {k: v for k, v in self._shares.items() if v}

    def utilization(self) -> list[tuple[int, str, int, int]]:
        """(single NUMA node, driver, held allocatable devices, allocatable devices). Not for
        the CPU drivers: their devices' utilization is the CPUs' (``cpu``), and a device
        grouping CPUs, held by one claim of one CPU, would otherwise read as all used."""
        if self.published is None:
            return []
        cpu_drivers = self.cpus.drivers
        return [(node, driver, self._use.get((node, driver), 0), capacity)
                for (node, driver), capacity in sorted(self.published.capacity.items())
                if driver not in cpu_drivers]
