"""Where a differential case's time goes, and the Topology Manager's merges in it.

The real kubelet's Topology Manager merges every permutation of its providers' hint lists
(``policy.go`` ``HintMerger.Merge``): their lengths' product, up to 255 per aligned resource on
8 NUMA nodes, so three aligned resources take seconds and four tens of minutes. The component
runs a merge of at most :data:`MERGE_LIMIT` permutations as the kubelet does, and a larger one
by its reduction (``tests/realkubelet/mergepolicy.go``: one permutation per state
``mergePermutation`` can tell apart, folded with the kubelet's own ``compare``); every merge it
runs both ways (up to the limit) says whether they agreed. A case is *hard* when one of its
admissions would keep the unmodified kubelet over :data:`HARD_SECONDS`: measured where the
kubelet's loop ran, estimated from the permutation count and the run's own seconds per
permutation where it was reduced.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..realkubelet import Admission

# the largest merge the component runs as the kubelet does (and, up to it, checks the
# reduction against): 30 ms of the kubelet's loop on a quiet 2-core machine. Above it the loop
# costs the run its time (with 4e6, half of the kubelet's side) and adds no check the smaller
# merges do not make; PODRESOURCES_MERGE_LIMIT sets another (the long run: 4e6; 0: every
# merge as the kubelet runs it, however long)
MERGE_LIMIT = float(os.environ.get("PODRESOURCES_MERGE_LIMIT", "1e5"))
# an admission over this (the kubelet's own time, measured or estimated) makes a case hard
HARD_SECONDS = 3.0
# an admission still running after this is a hang, not a slow merge: the case is not judged
HANG_SECONDS = 300.0
# seconds per permutation of the kubelet's loop when a run has no large merge to measure it
# (370-590 ns on a shared 2-core machine: tests/realkubelet/README.md)
DEFAULT_SECONDS_PER_PERMUTATION = 4.0e-7
# merges this large measure the run's seconds per permutation (a few milliseconds each)
CALIBRATION_PERMUTATIONS = 2e4


Merges = tuple[tuple[float, float, bool], ...]  # (permutations, seconds, reduced) each


@dataclass
class CaseTiming:
    """One case's seconds: the node's reset, the pods' admissions and starts, the exporter's
    read and answer, and the candidate's admissions (the first and the capacity copies); and
    every admission's time in the component with its merges."""

    reset: float = 0.0
    pods: float = 0.0
    exporter_read: float = 0.0
    exporter_answer: float = 0.0
    candidate: float = 0.0
    admissions: list[tuple[float, Merges]] = field(default_factory=list)
    first: int = -1  # the candidate's first admission among them
    largest_lists: tuple[int, ...] = ()
    checked: int = 0
    mismatched: int = 0

    def add(self, admission: Admission, first: bool = False) -> None:
        if first:
            self.first = len(self.admissions)
        merges = tuple((m.permutations, m.seconds, m.reduced) for m in admission.merges)
        for merge in admission.merges:
            if merge.permutations > self.largest:
                self.largest_lists = merge.lists
            if merge.checked:
                self.checked += 1
                self.mismatched += not merge.agreed
        self.admissions.append((admission.seconds, merges))

    @property
    def largest(self) -> float:
        return max((m[0] for _, merges in self.admissions for m in merges), default=0.0)

    @property
    def reduced(self) -> int:
        return sum(1 for _, merges in self.admissions for m in merges if m[2])

    @property
    def merge_seconds(self) -> float:
        """The component's time in merges (the kubelet's loop or its reduction)."""
        return sum(m[1] for _, merges in self.admissions for m in merges)

    def calibration(self) -> tuple[float, float]:
        """(seconds, permutations) of the kubelet's loop over its large merges here."""
        big = [(s, p) for _, merges in self.admissions for p, s, reduced in merges
               if not reduced and p >= CALIBRATION_PERMUTATIONS]
        return sum(s for s, _ in big), sum(p for _, p in big)

    def kubelet_seconds(self, per_permutation: float) -> list[float]:
        """Each admission's time in the unmodified kubelet: what the component measured, with
        each reduced merge's time replaced by its permutations times the loop's seconds per
        permutation."""
        out = []
        for measured, merges in self.admissions:
            total = measured
            for permutations, seconds, reduced in merges:
                if reduced:
                    total += permutations * per_permutation - seconds
            out.append(total)
        return out

    def estimated(self) -> bool:
        """Whether some admission's time is an estimate (a merge was reduced)."""
        return self.reduced > 0


def seconds_per_permutation(timings: Iterable[CaseTiming]) -> float:
    seconds = permutations = 0.0
    for timing in timings:
        s, p = timing.calibration()
        seconds, permutations = seconds + s, permutations + p
    return seconds / permutations if permutations else DEFAULT_SECONDS_PER_PERMUTATION
