"""The Topology Manager's vocabulary (``topologymanager/topology_manager.go``, v1.37.2).

:class:`TopologyHint` is a NUMA set (``None``: any node) and whether it is as narrow as the
capacity allows; :data:`Hints` is one resource's answer from a hint provider (``None``: don't
care; ``[]``: cannot be satisfied), which the merger reads as ``filterProvidersHints`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TopologyHint:
    """A NUMA set (``None``: any) and whether it is as narrow as the capacity allows."""

    affinity: NumaSet | None
    preferred: bool


Hints = list[TopologyHint] | None  # None: don't care; []: cannot be satisfied


ProviderAnswer = Mapping[str, Hints] | None


TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"


NumaSet = frozenset[int]
