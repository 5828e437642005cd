"""Pure parsing of Kubernetes API objects into what the view keeps: no client, no I/O.

Nodes and pods arrive as JSON (``dict``); each becomes a small frozen record keyed as its
reflector stores it (ResourceSlices: :mod:`exporter.kubeapi.resourceslices`). The resource
rules they apply (quantities, requests, rejections) are :mod:`exporter.podspec`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..podcontext import PodContext, node_allocatable, node_kubelet_version, pod_context
from ..podspec import Amounts, Rejection, add_amounts, extended_amounts, pod_requests, rejection

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The Node's extended resources (status.capacity and status.allocatable)."""

    capacity: Amounts
    allocatable: Amounts
    # the whole status.allocatable (cpu, memory, pods, hugepages...), for the fit answers
    resources: tuple[tuple[str, int], ...] = ()
    kubelet_version: str = ""  # status.nodeInfo.kubeletVersion


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What the view keeps of a pod: terminated or not, its effective requests, and whether
    the kubelet rejected it at admission for exclusive resources."""

    terminated: bool
    requests: tuple[tuple[str, float], ...]
    rejection: Rejection | None = None
    context: PodContext | None = None  # the pod as the fit answers see it


def _name(obj: dict[str, Any]) -> str:
    name: str = (obj.get("metadata") or {}).get("name", "")
    return name


def node_record(obj: dict[str, Any]) -> tuple[str, NodeRecord]:
    status = obj.get("status") or {}
    return _name(obj), NodeRecord(extended_amounts(status.get("capacity")),
                                  extended_amounts(status.get("allocatable")),
                                  tuple(sorted(node_allocatable(obj).items())),
                                  node_kubelet_version(obj))


def pod_record(obj: dict[str, Any]) -> tuple[tuple[str, str], PodRecord]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    terminated = status.get("phase") in TERMINAL_PHASES
    requests = {} if terminated else pod_requests(obj.get("spec") or {})
    return ((meta.get("namespace", ""), meta.get("name", "")),
            PodRecord(terminated, tuple(sorted(requests.items())), rejection(obj),
                      pod_context(obj)))


def total_requests(pods: Iterable[PodRecord]) -> Amounts:
    """The effective requests summed over pods (terminated pods carry none)."""
    total: Amounts = {}
    for record in pods:
        add_amounts(total, dict(record.requests))
    return total
