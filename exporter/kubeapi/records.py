"""Pure parsing of Kubernetes API objects into what the view keeps: no client, no I/O.

Nodes, pods and ResourceSlices arrive as JSON (``dict``); each becomes a small frozen record
keyed as its reflector stores it. The resource rules they apply (quantities, requests,
rejections) are :mod:`exporter.podspec`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..podspec import Amounts, Rejection, add_amounts, extended_amounts, pod_requests, rejection

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The Node's extended resources (status.capacity and status.allocatable)."""

    capacity: Amounts
    allocatable: Amounts


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What the view keeps of a pod: terminated or not, its effective requests, and whether
    the kubelet rejected it at admission for exclusive resources."""

    terminated: bool
    requests: tuple[tuple[str, float], ...]
    rejection: Rejection | None = None


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
    status = obj.get("status") or {}
    terminated = status.get("phase") in TERMINAL_PHASES
    requests = {} if terminated else pod_requests(obj.get("spec") or {})
    return ((meta.get("namespace", ""), meta.get("name", "")),
            PodRecord(terminated, tuple(sorted(requests.items())), rejection(obj)))


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
