"""The Topology Manager's policies (``policy_none.go``, ``policy_best_effort.go``,
``policy_restricted.go``, ``policy_single_numa_node.go``): merge, then admit or not.

* ``none``: nothing is merged or aligned; admission is left to the managers' allocation.
* ``best-effort``: the best merged hint, always admitted.
* ``restricted``: admitted only when the best merged hint is preferred.
* ``single-numa-node``: each resource keeps only its preferred single-node hints and its
  preferred "any" hints (``filterSingleNumaHints``); the merged hint must be preferred; a
  merged set of every NUMA node becomes "any".

``prefer-closest-numa-nodes`` applies to ``best-effort`` and ``restricted`` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from .policy import Distances, ProviderAnswer, merge, provider_lists
from .topology_manager import TopologyHint

NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = (
    "none", "best-effort", "restricted", "single-numa-node")
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)


def filter_single_numa_hints(lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    """``filterSingleNumaHints``: preferred hints of one NUMA node or of any."""
    return [[h for h in hints if h.preferred and (h.affinity is None or len(h.affinity) == 1)]
            for hints in lists]


def can_admit(policy: str, best: TopologyHint) -> bool:
    """``canAdmitPodResult``."""
    if policy in (NONE, BEST_EFFORT):
        return True
    return best.preferred


def policy_merge(policy: str, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
                 distances: Distances | None = None) -> tuple[TopologyHint, bool]:
    """One policy's ``Merge``: (best hint, admit). ``affinity`` ``None`` means any node."""
    if policy == NONE:
        return TopologyHint(None, True), True
    lists = provider_lists(answers)
    if policy == SINGLE_NUMA_NODE:
        best = merge(filter_single_numa_hints(lists), numa_ids)
        if best.affinity == frozenset(numa_ids):
            best = TopologyHint(None, best.preferred)
        return best, can_admit(policy, best)
    best = merge(lists, numa_ids, distances)
    return best, can_admit(policy, best)
