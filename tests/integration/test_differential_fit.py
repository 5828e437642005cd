"""The fit engine against the real kubelet over seeded random cases (tests/support/differential):
verdict, reason, each container's NUMA set and ``shape_capacity``, 2,000 cases judged on each of
1.37 and 1.34, the fit engine asked as a deployed exporter asks it (on 1.34, which serves no Pods
API, its pod context from the real API server: tests/controlplane, one per worker). The counts
are printed:
cases, disagreements, the named exceptions (tests/support/differential/exceptions.py, each
proven on its case), and the cases not judged because the kubelet's admission took over 3 s
(the next cases are drawn until 2,000 were judged); any disagreement is listed with the command
that replays it. ``PODRESOURCES_DIFFERENTIAL_CASES=N`` judges N cases per release instead (a
quick local run).
"""

from __future__ import annotations

import os

import pytest

from ..support import controlplane
from ..support.differential import run_many
from ..support.realkubelet import require

SEED = 2026
CASES = {"1.37": 2000, "1.34": 2000}


@pytest.mark.parametrize("release", sorted(CASES, reverse=True))
def test_fit_engine_agrees_with_the_real_kubelet(release: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    require(release)
    if release == "1.34":  # no Pods API: the pod context comes from the real API server
        controlplane.require()
    count = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_CASES", CASES[release]))
    summary = run_many(release, SEED, count, judged=True)
    with capsys.disabled():
        print("\n" + "\n".join(summary.lines(each=False)))
    assert summary.judged == count
    assert summary.slow <= count // 10, "the kubelet took over 3 s for one case in ten"
    assert summary.disagreements == [], "\n".join(summary.lines(each=True))
