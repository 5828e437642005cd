"""The fit engine against the real kubelet over seeded random cases (tests/support/differential):
verdict, reason, each container's NUMA set and ``shape_capacity``, the fit engine asked as a
deployed exporter asks it (where the release serves no Pods API, its pod context from the real
API server: tests/controlplane, one per worker); 2,000 cases on each of the four releases.
Every drawn case is judged: a Topology Manager merge too large to wait for (tens of minutes on
8 NUMA nodes with four aligned resources) is reached by its reduction, which every run checks
against the kubelet's own loop on its smaller merges (tests/realkubelet/mergepolicy.go); the
hard cases are listed with the kubelet's own admission time beside the exporter's. The counts
are printed: cases, disagreements, the named exceptions
(tests/support/differential/exceptions.py, each proven on its case); any disagreement is listed
with the command that replays it. ``PODRESOURCES_DIFFERENTIAL_CASES=N`` judges N cases per
release instead (a quick local run).
"""

from __future__ import annotations

import os

import pytest

from ..support import controlplane
from ..support.differential import run_many
from ..support.realkubelet import require

SEED = 2026
CASES = {"1.37": 2000, "1.36": 2000, "1.35": 2000, "1.34": 2000}
# the hidden-state mode: pod context from the Pods API (1.37) or the Kubernetes-API view (1.34)
HIDDEN_STATE_CASES = {"1.37": 300, "1.34": 300}


@pytest.mark.parametrize("release", sorted(CASES, reverse=True))
def test_fit_engine_agrees_with_the_real_kubelet(release: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    require(release)
    if release != "1.37":  # no Pods API: the pod context comes from the real API server
        controlplane.require()
    count = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_CASES", CASES[release]))
    summary = run_many(release, SEED, count, judged=True)
    with capsys.disabled():
        print("\n" + "\n".join(summary.lines(each=False)))
    # every node built is judged: no case dropped for time, whatever the machine's speed
    assert summary.slow == 0, summary.slow_cases
    # a configuration the kubelet refuses (reserved hugepages) is drawn again; more than one in
    # fifty means the component refuses what it should run
    assert summary.skipped <= max(1, count // 50), summary.skipped
    assert summary.merge_mismatches == 0
    assert summary.disagreements == [], "\n".join(summary.lines(each=True))


@pytest.mark.parametrize("release", sorted(HIDDEN_STATE_CASES, reverse=True))
def test_with_the_state_files_hidden_every_unassumed_answer_agrees(
        release: str, capsys: pytest.CaptureFixture[str]) -> None:
    """What the default chart mounts: no state file. What finished init containers hold is
    inferred from pod context where the kubelet's rules decide it; elsewhere the answer says
    what it assumes (no_cpu_manager_state, no_device_checkpoint, no_memory_manager_state) and
    may differ. Every answer without such an assumption must agree with the kubelet."""
    require(release)
    count = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_CASES", HIDDEN_STATE_CASES[release]))
    summary = run_many(release, SEED, count, judged=True, state_files=False)
    with capsys.disabled():
        print("\n" + "\n".join(summary.lines(each=False)))
    assert summary.slow == 0, summary.slow_cases
    assert summary.disagreements == [], "\n".join(summary.lines(each=True))
    hidden, inferred = summary.init_cpu_cases()
    # pod context decides most of them: a regression that gives up on them trips this
    assert 2 * len(inferred) >= len(hidden), (len(inferred), len(hidden))
