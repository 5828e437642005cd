"""The Topology Manager's ``single-numa-node`` policy
(``topologymanager/policy_single_numa_node.go``, v1.37.2).

Each resource keeps only its preferred single-node hints and its preferred "any" hints
(``filterSingleNumaHints``); the merged hint must be preferred (``canAdmitPodResult``); a
merged set of every NUMA node becomes "any". ``prefer-closest-numa-nodes`` does not apply.
"""

from __future__ import annotations

from collections.abc import Sequence

from .numa_info import Distances
from .policy import merge as merge_hints, provider_lists
from .topology_manager import ProviderAnswer, TopologyHint

SINGLE_NUMA_NODE = "single-numa-node"


def filter_single_numa_hints(lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    """``filterSingleNumaHints``: preferred hints of one NUMA node or of any."""
    return [[h for h in hints if h.preferred and (h.affinity is None or len(h.affinity) == 1)]
            for hints in lists]


class SingleNumaNodePolicy:
    """``singleNumaNodePolicy``."""

    name = SINGLE_NUMA_NODE

    def merge(self, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
              distances: Distances | None = None) -> tuple[TopologyHint, bool]:
        """``singleNumaNodePolicy.Merge``: (best hint, admit); ``distances`` is not used."""
        best = merge_hints(filter_single_numa_hints(provider_lists(answers)), numa_ids)
        if best.affinity == frozenset(numa_ids):
            best = TopologyHint(None, best.preferred)
        return best, best.preferred
