"""This node's DRA devices as its ResourceSlices publish them: locality and taints, no I/O.

The kubelet's podresources API names a DRA device by ``(driver, pool, device)`` and says
nothing of where it sits; its ResourceSlice does (SPEC section 2, the rule "DRA devices per
NUMA node"). This module parses ResourceSlices and DeviceTaintRules into small records and
turns them into the :class:`~exporter.model.DraInventory` the accounting counts from: the
newest generation of each pool, each device's NUMA node from the first source that names one,
and the effects of its taints. Reading sysfs for a PCI address is injected (:func:`pci_reader`
builds the real one), so all of this is testable with plain data.

ResourceSlice shapes: ``resource.k8s.io/v1`` and ``v1beta2`` keep a device's attributes and
taints on the device, ``v1beta1`` under ``basic``. An attribute value is ``{"int": n}`` (or
``string``, ``bool``, ``version``), or with list-typed attributes (KEP-5491) ``{"ints": [...]}``
whose first element is the device's own NUMA node. An attribute name without a domain is in the
driver's domain (``numaNode`` of driver ``gpu.amd.com`` is ``gpu.amd.com/numaNode``).

A device of a DRA CPU driver (dra-driver-cpu, ``docs/user/device-attributes.md`` there) also
says what CPUs it is, in the driver's domain: ``cpuID`` (one device per CPU), the capacity
``cpu`` (one device per NUMA node or socket, the CPUs shared out as consumable capacity) and
``socketID``. They are read for every driver and used only for those ``--dra-cpu-drivers``
names; device names (``cpudevnuma000``) are the driver's business and never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import CpuAttributes, DraInventory, NumaIds, PublishedDevice, shared
from ..podspec import parse_quantity

STANDARD_NUMA = "resource.kubernetes.io/numaNode"  # KEP-6072
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"  # KEP-4381
DRIVER_NUMA_NAMES = ("numaNode", "numaNodeID")  # in the driver's own domain
# names drivers published before the standard one, still read (dra-driver-cpu, dranet, memory)
LEGACY_NUMA = ("dra.net/numaNode", "dra.cpu/numaNodeID", "dra.memory/numaNode")
# a CPU driver's own attributes and capacity (dra-driver-cpu: dra.cpu/cpuID, dra.cpu/cpu, ...)
CPU_ID, CPU_CAPACITY, SOCKET_ID = "cpuID", "cpu", "socketID"
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

PciReader = Callable[[str], NumaIds]  # PCI address (BDF) -> its NUMA node, None when none


@dataclass(frozen=True, slots=True)
class SliceDevice:
    """One device of a slice: its NUMA ids as an attribute names them (``None``: no attribute
    does), else its PCI address, and the effects of the taints the slice gives it."""

    name: str
    numa_ids: NumaIds = None
    pci_bus_id: str | None = None
    effects: frozenset[str] = frozenset()
    cpu: CpuAttributes | None = None


@dataclass(frozen=True, slots=True)
class SliceRecord:
    """What the view keeps of a ResourceSlice: whose pool, which generation, its devices."""

    driver: str
    pool: str
    generation: int
    devices: tuple[SliceDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class TaintRule:
    """A DeviceTaintRule: the devices it selects (an empty field selects any) and its effect.
    ``usable`` is False for a rule selecting by what this view does not evaluate (a device
    class, CEL selectors): it is left out rather than applied to the wrong devices."""

    driver: str
    pool: str
    device: str
    effect: str
    usable: bool = True

    def selects(self, device: PublishedDevice) -> bool:
        return self.usable and all(not wanted or wanted == value for wanted, value in (
            (self.driver, device.driver), (self.pool, device.pool), (self.device, device.device)))


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _numa_value(value: object) -> NumaIds:
    """``{"int": n}`` -> ``(n,)``; ``{"ints": [n, ...]}`` -> ``(n,)`` (the device's own node
    comes first); anything else -> ``None`` (not a NUMA id: the next source is asked)."""
    if not isinstance(value, Mapping):
        return None
    single = _int(value.get("int"))
    if single is not None:
        return (single,)
    many = value.get("ints")
    if isinstance(many, list) and many:
        first = _int(many[0])
        if first is not None:
            return (first,)
    return None


def qualified(attributes: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """Attribute names with their domain: a name without one is in the driver's domain."""
    return {name if "/" in name else f"{driver}/{name}": value
            for name, value in attributes.items()}


def numa_source(attributes: Mapping[str, Any], driver: str) -> tuple[NumaIds, str | None]:
    """(NUMA ids, None) from the first attribute that names a NUMA node, in the SPEC's order —
    the standard ``numaNode``, the driver's own ``numaNode``/``numaNodeID``, the legacy names —
    else (None, the device's PCI address when it publishes a well-formed one)."""
    names = qualified(attributes, driver)
    for name in (STANDARD_NUMA, *(f"{driver}/{n}" for n in DRIVER_NUMA_NAMES), *LEGACY_NUMA):
        ids = _numa_value(names.get(name))
        if ids is not None:
            return ids, None
    bus_id = names.get(PCI_BUS_ID)
    text = bus_id.get("string") if isinstance(bus_id, Mapping) else None
    if isinstance(text, str) and _BDF.match(text.strip().lower()):
        return None, text.strip().lower()
    return None, None


def cpu_attributes(attributes: Mapping[str, Any], capacity: Mapping[str, Any],
                   driver: str) -> CpuAttributes | None:
    """What the device says of CPUs in the driver's domain (``cpuID``, ``socketID``, the
    capacity ``cpu``); ``None`` when it says nothing. A capacity that is not a whole number of
    CPUs, or a negative id, counts as absent."""
    names = qualified(attributes, driver)
    cpu_id = _int(_mapping(names.get(f"{driver}/{CPU_ID}")).get("int"))
    socket = _int(_mapping(names.get(f"{driver}/{SOCKET_ID}")).get("int"))
    value = qualified(capacity, driver).get(f"{driver}/{CPU_CAPACITY}")
    cpus = _whole(value.get("value") if isinstance(value, Mapping) else value)
    found = CpuAttributes(cpu_id if cpu_id is not None and cpu_id >= 0 else None, cpus,
                          socket if socket is not None and socket >= 0 else None)
    return None if found == CpuAttributes() else shared(found)


def _whole(quantity: object) -> int | None:
    """A quantity (``"64"``, ``"64000m"``) as a whole number of at least 0, else None."""
    if quantity is None or isinstance(quantity, bool):
        return None
    try:
        number = parse_quantity(quantity)
    except ValueError:
        return None
    return int(number) if number >= 0 and number == int(number) else None


def _effects(taints: object) -> frozenset[str]:
    if not isinstance(taints, list):
        return frozenset()
    return frozenset(str(t["effect"]) for t in taints
                     if isinstance(t, Mapping) and isinstance(t.get("effect"), str) and t["effect"])


def _device(obj: Mapping[str, Any], driver: str) -> SliceDevice | None:
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    basic = obj.get("basic")
    body: Mapping[str, Any] = basic if isinstance(basic, Mapping) else obj  # v1beta1
    attributes = _mapping(body.get("attributes"))
    numa_ids, bus_id = numa_source(attributes, driver)
    return SliceDevice(name, numa_ids, bus_id, _effects(body.get("taints")),
                       cpu_attributes(attributes, _mapping(body.get("capacity")), driver))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def slice_record(obj: dict[str, Any]) -> tuple[str, SliceRecord]:
    """A ResourceSlice (any served version) as the view keeps it, keyed by its name; parts of
    the wrong shape count as absent."""
    spec = _mapping(obj.get("spec"))
    pool = _mapping(spec.get("pool"))
    driver = str(spec.get("driver") or "")
    try:
        generation = int(pool.get("generation") or 0)
    except (TypeError, ValueError):
        generation = 0
    listed = spec.get("devices")
    devices = tuple(d for d in (_device(o, driver) for o in
                                (listed if isinstance(listed, list) else ())
                                if isinstance(o, Mapping)) if d is not None)
    name = str(_mapping(obj.get("metadata")).get("name", ""))
    return name, SliceRecord(driver, str(pool.get("name") or ""), generation, devices)


def taint_rule_record(obj: dict[str, Any]) -> tuple[str, TaintRule]:
    """A DeviceTaintRule, keyed by its name. Its selector's ``driver``, ``pool`` and
    ``device`` are matched; a rule also selecting by device class or CEL is not usable."""
    spec = _mapping(obj.get("spec"))
    selector = _mapping(spec.get("deviceSelector"))
    taint = _mapping(spec.get("taint"))
    usable = not (selector.get("deviceClassName") or selector.get("selectors"))
    name = str(_mapping(obj.get("metadata")).get("name", ""))
    return name, TaintRule(str(selector.get("driver") or ""), str(selector.get("pool") or ""),
                           str(selector.get("device") or ""), str(taint.get("effect") or ""),
                           usable and bool(taint.get("effect")))


def newest_generation(slices: Iterable[SliceRecord]) -> list[SliceRecord]:
    """The slices of each pool's newest generation (a driver publishing a new generation
    leaves the older slices behind until it deletes them)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    return [s for s in slices if s.generation == newest[(s.driver, s.pool)]]


def inventory(slices: Iterable[SliceRecord], rules: Iterable[TaintRule],
              pci_numa: PciReader) -> DraInventory:
    """The devices this node publishes, each with its NUMA node (from an attribute, else its
    PCI address through ``pci_numa``) and the effects of its taints (its slice's and those
    of every DeviceTaintRule that selects it). Ids are not checked against sysfs' NUMA nodes
    here: the accounting does that, as for every other item."""
    rules = [rule for rule in rules if rule.usable]
    devices = []
    for record in sorted(newest_generation(slices), key=lambda s: (s.driver, s.pool)):
        for item in record.devices:
            numa_ids = item.numa_ids
            if numa_ids is None and item.pci_bus_id is not None:
                numa_ids = pci_numa(item.pci_bus_id)
            device = PublishedDevice(record.driver, record.pool, item.name, numa_ids,
                                     item.effects, item.cpu)
            ruled = frozenset(rule.effect for rule in rules if rule.selects(device))
            if ruled - device.effects:
                device = PublishedDevice(device.driver, device.pool, device.device, numa_ids,
                                         device.effects | ruled, item.cpu)
            devices.append(device)
    return DraInventory(tuple(devices))


def pci_reader(sysfs_root: str | Path) -> PciReader:
    """The NUMA node of a PCI device from ``<sysfs>/bus/pci/devices/<BDF>/numa_node``: ``-1``
    (the kernel's "none"), an unreadable file or an absent device give ``None``. Answers are
    kept: a PCI device does not move."""
    root = Path(sysfs_root) / "bus" / "pci" / "devices"
    known: dict[str, NumaIds] = {}

    def numa_of(bus_id: str) -> NumaIds:
        if bus_id in known:
            return known[bus_id]
        ids: NumaIds = None
        if _BDF.match(bus_id):
            try:
                value = int((root / bus_id / "numa_node").read_text().strip())
            except (OSError, ValueError):
                value = -1
            ids = (value,) if value >= 0 else None
        if len(known) < 65536:
            known[bus_id] = ids
        return ids

    return numa_of
