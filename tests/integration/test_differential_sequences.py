"""A running exporter against the real kubelet over seeded random sequences
(tests/support/differential/sequences.py): each sequence a node, one or two shapes and 20
steps — admissions, starts, init containers finishing later, pods ending and deleted, device
health changes, kubelet restarts (the managers built again from their checkpoints, the device
plugins registering again, the pods admitted again) — with one ``serve`` reading the node from
the first step to the last. After every step the per-NUMA figures of its /metrics page equal
the managers' dump, and every shape answer (verdict, reason, each container's NUMA set,
capacity; the first copy's CPU ids, memory blocks and determined devices exactly) agrees with
the real kubelet's. The counts are printed: sequences, steps of each
kind, shape answers compared, disagreements (each with the command that replays its
sequence), run time. The newest and the oldest release run most sequences, the two between
fewer; where a release serves no Pods API (1.34 to 1.36), the exporter reads pod context from
the real API server (tests/controlplane), the pods created there before the kubelet admits
them. ``PODRESOURCES_DIFFERENTIAL_SEQUENCES=N`` runs N per release instead (a
quick local run). A sequence whose admissions take the real kubelet too long (an 8-NUMA node
under best-effort or restricted) is stopped and not judged, and the next one drawn instead.
"""

from __future__ import annotations

import os

import pytest

from ..support.differential.sequences import run_sequences
from ..support.differential.steps import STEPS
from ..support.realkubelet import require

SEED = 2026
SEQUENCES = {"1.37": 120, "1.36": 20, "1.35": 20, "1.34": 80}  # 240 a run


@pytest.mark.parametrize("release", sorted(SEQUENCES, reverse=True))
def test_running_exporter_agrees_with_the_real_kubelet_step_by_step(
        release: str, capsys: pytest.CaptureFixture[str]) -> None:
    require(release)
    count = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_SEQUENCES", SEQUENCES[release]))
    summary = run_sequences(release, SEED, count, judged=True)
    with capsys.disabled():
        print("\n" + "\n".join(summary.lines(each=False)))
    # the next sequences are drawn until as many were judged as asked; those left out are few
    # (a node the kubelet does not start with; an 8-NUMA node where admissions take seconds)
    assert len(summary.slow) <= max(1, count // 20), "over one sequence in twenty was slow"
    assert len(summary.results) - len(summary.slow) - len(summary.judged) <= count // 10
    # every sequence restarts the kubelet, but where its node never let it (restart_refused)
    assert all(len(r.steps) == STEPS and (r.restarts >= 1 or r.refused_restarts >= 1)
               for r in summary.judged)
    assert summary.disagreeing == [], "\n".join(summary.lines(each=True))
