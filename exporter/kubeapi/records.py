"""Pure parsing of Kubernetes API objects into what the view keeps: no client, no I/O.

Nodes, pods and ResourceSlices arrive as JSON (``dict``); each becomes a small frozen record
keyed as its reflector stores it. Quantities and extended-resource names follow the rules of
Kubernetes' ``resource.Quantity`` and ``IsExtendedResourceName``, pod requests those of the
scheduler's ``resourcehelper.PodRequests``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)"
                       r"|[eE]([+-]?\d+))?$")
_SUFFIX = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
           "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10),
           "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
           "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

Amounts = dict[str, float]  # extended resource name -> amount


def parse_quantity(text: object) -> float:
    """A Kubernetes quantity (``4``, ``1k``, ``500m``, ``2Gi``, ``1e3``) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix, exponent = match.groups()
    try:
        scale = Decimal(10) ** int(exponent) if exponent else _SUFFIX[suffix or ""]
        return float(Decimal(number) * scale)
    except (InvalidOperation, OverflowError):
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from None


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: ``domain/name`` with a domain outside
    kubernetes.io, not prefixed ``requests.``, and a valid quota name once prefixed."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    parts = ("requests." + name).split("/")
    if len(parts) != 2:
        return False
    prefix, short = parts
    return (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))
            and len(short) <= 63 and bool(_QUALIFIED_NAME.match(short)))


def extended_amounts(resources: Mapping[str, object] | None) -> Amounts:
    """The extended resources of a ``{name: quantity}`` map; unparsable quantities skipped."""
    amounts = {}
    for name, quantity in (resources or {}).items():
        if is_extended_resource(name):
            try:
                amounts[name] = parse_quantity(quantity)
            except ValueError:
                log.debug("skipping %s: bad quantity %r", name, quantity)
    return amounts


def add_amounts(total: Amounts, more: Mapping[str, float]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _raise_to(peak: Amounts, other: Amounts) -> None:
    for name, amount in other.items():
        if amount > peak.get(name, 0):
            peak[name] = amount


def _container_requests(container: dict[str, Any]) -> Amounts:
    return extended_amounts((container.get("resources") or {}).get("requests"))


def pod_requests(spec: dict[str, Any]) -> Amounts:
    """The pod's effective extended-resource requests, as the scheduler counts them
    (``resourcehelper.PodRequests``): app containers plus sidecars (restartable init
    containers), or a regular init container plus the sidecars started before it if that is
    more; plus the pod overhead."""
    total: Amounts = {}
    for container in spec.get("containers") or ():
        add_amounts(total, _container_requests(container))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for container in spec.get("initContainers") or ():
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_amounts(total, requests)
            add_amounts(sidecars, requests)
            _raise_to(init_peak, sidecars)
        else:
            running = dict(sidecars)
            add_amounts(running, requests)
            _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    add_amounts(total, extended_amounts(spec.get("overhead")))
    return total


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The Node's extended resources (status.capacity and status.allocatable)."""

    capacity: Amounts
    allocatable: Amounts


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What the view keeps of a pod: terminated or not, and its effective requests."""

    terminated: bool
    requests: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class SliceRecord:
    """What the view keeps of a ResourceSlice: whose pool, which generation, how many devices."""

    driver: str
    pool: str
    generation: int
    devices: int


def _name(obj: dict[str, Any]) -> str:
    name: str = (obj.get("metadata") or {}).get("name", "")
    return name


def node_record(obj: dict[str, Any]) -> tuple[str, NodeRecord]:
    status = obj.get("status") or {}
    return _name(obj), NodeRecord(extended_amounts(status.get("capacity")),
                                  extended_amounts(status.get("allocatable")))


def pod_record(obj: dict[str, Any]) -> tuple[tuple[str, str], PodRecord]:
    meta = obj.get("metadata") or {}
    terminated = (obj.get("status") or {}).get("phase") in TERMINAL_PHASES
    requests = {} if terminated else pod_requests(obj.get("spec") or {})
    return ((meta.get("namespace", ""), meta.get("name", "")),
            PodRecord(terminated, tuple(sorted(requests.items()))))


def slice_record(obj: dict[str, Any]) -> tuple[str, SliceRecord]:
    spec = obj.get("spec") or {}
    pool = spec.get("pool") or {}
    return _name(obj), SliceRecord(spec.get("driver", ""), pool.get("name", ""),
                                   int(pool.get("generation") or 0), len(spec.get("devices") or ()))


def total_requests(pods: Iterable[PodRecord]) -> Amounts:
    """The effective requests summed over pods (terminated pods carry none)."""
    total: Amounts = {}
    for record in pods:
        add_amounts(total, dict(record.requests))
    return total


def dra_allocatable(slices: Iterable[SliceRecord]) -> dict[tuple[str, str], int]:
    """Devices per (driver, pool), counting only each pool's newest generation (a driver
    publishing a new generation leaves the older slices behind until it deletes them)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    counts = dict.fromkeys(newest, 0)
    for s in slices:
        if s.generation == newest[(s.driver, s.pool)]:
            counts[(s.driver, s.pool)] += s.devices
    return counts
