"""The Topology Manager's ``none`` policy (``topologymanager/policy_none.go``, v1.37.2).

Nothing is merged or aligned: ``nonePolicy.Merge`` gives the empty hint and always admits, and
admission is left to the managers' allocation.
"""

from __future__ import annotations

from collections.abc import Sequence

from .numa_info import Distances
from .topology_manager import ProviderAnswer, TopologyHint

NONE = "none"


class NonePolicy:
    """``nonePolicy``."""

    name = NONE

    def merge(self, answers: Sequence[ProviderAnswer], numa_ids: Sequence[int],
              distances: Distances | None = None) -> tuple[TopologyHint, bool]:
        """``nonePolicy.Merge``: (any node, admit)."""
        return TopologyHint(None, True), True
