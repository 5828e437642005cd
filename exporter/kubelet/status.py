"""What the refresh loop has found out about the kubelet: reachable or not, backing off or not,
and what it supports.

Written during refreshes only: the capabilities by :mod:`exporter.kubelet.reader`, up and
back-off by :mod:`exporter.refresh.outcome`; the health section
(:mod:`exporter.exposition.health`) and the ``snapshot`` report only read it. Plain data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Capability(StrEnum):
    """Whether the kubelet offers something, as far as the loop has found out (a label value)."""

    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"

CAPABILITY_NAMES = ("api_version", "get_allocatable", "get", "pod_level")  # labels() order


@dataclass(frozen=True)
class Capabilities:
    """What the kubelet supports, as far as the loop has found out; each flag is ``true``,
    ``false`` or ``unknown`` (``pod_level``: ``true`` once pod-level data has been seen)."""

    api_version: str = "none"  # v1 | v1alpha1 | none (before first contact)
    get_allocatable: str = Capability.UNKNOWN
    get: str = Capability.UNKNOWN
    pod_level: str = Capability.UNKNOWN

    def labels(self) -> tuple[str, str, str, str]:
        return (self.api_version, self.get_allocatable, self.get, self.pod_level)


@dataclass
class KubeletStatus:
    """The loop's view of the kubelet after its last refresh attempt."""

    up: int = 0  # 1 if the last refresh succeeded
    last_success: float = 0.0  # wall-clock time of the last successful refresh
    backoff_seconds: float = 0.0  # the delay back-off imposes now; 0 when healthy
    capabilities: Capabilities = field(default_factory=Capabilities)
