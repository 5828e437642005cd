"""NUMA distances (``topologymanager/numa_info.go``, v1.37.2), for ``prefer-closest-numa-nodes``.

:func:`average_distance` is ``NUMADistances.CalculateAverageFor``: what ``NUMAInfo.Closest``
compares between two equally wide NUMA sets.
"""

from __future__ import annotations

from collections.abc import Mapping

from .topology_manager import NumaSet

Distances = Mapping[int, Mapping[int, int]]


def average_distance(mask: NumaSet, distances: Distances) -> float:
    """``NUMADistances.CalculateAverageFor``: the mean of distances[i][j] over i, j in the set."""
    if not mask:
        return 0.0
    total = sum(distances.get(i, {}).get(j, 0) for i in mask for j in mask)
    return total / (len(mask) ** 2)
