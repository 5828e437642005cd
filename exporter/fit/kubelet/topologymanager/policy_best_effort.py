"""The Topology Manager's ``best-effort`` policy (``topologymanager/policy_best_effort.go``,
v1.37.2): the best merged hint, always admitted (``canAdmitPodResult`` is true).
``prefer-closest-numa-nodes`` applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from .numa_info import Distances
from .policy import merge as merge_hints, provider_lists
from .topology_manager import ProviderAnswer, TopologyHint

BEST_EFFORT = "best-effort"


class BestEffortPolicy:
    """``bestEffortPolicy``."""

    name = BEST_EFFORT

    def merge(self, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
              distances: Distances | None = None) -> tuple[TopologyHint, bool]:
        """``bestEffortPolicy.Merge``: (best hint, admit)."""
        return merge_hints(provider_lists(answers), numa_ids, distances), True
