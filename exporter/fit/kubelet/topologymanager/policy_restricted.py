"""The Topology Manager's ``restricted`` policy (``topologymanager/policy_restricted.go``,
v1.37.2): the best merged hint, admitted only when it is preferred (``canAdmitPodResult``).
``prefer-closest-numa-nodes`` applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from .numa_info import Distances
from .policy import merge as merge_hints, provider_lists
from .topology_manager import ProviderAnswer, TopologyHint

RESTRICTED = "restricted"


class RestrictedPolicy:
    """``restrictedPolicy``."""

    name = RESTRICTED

    def merge(self, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
              distances: Distances | None = None) -> tuple[TopologyHint, bool]:
        """``restrictedPolicy.Merge``: (best hint, admit)."""
        best = merge_hints(provider_lists(answers), numa_ids, distances)
        return best, best.preferred
