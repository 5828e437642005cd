"""Which CPUs the real kubelet's CPU manager takes, under each CPU manager option and node
layout, against values worked by hand from its code (tests/support/cpu_cases.py says how
for each step): sockets first and NUMA nodes first, whole NUMA nodes, sockets and cores, L3
(uncore) caches, spreading over cores, distributing over NUMA nodes, align-by-socket's
preferred hints, strict CPU reservation. The fit engine's picks are checked against the same
values in tests/unit/fit/test_cpu_picks.py."""

from __future__ import annotations

import pytest

from ..support.cpu_cases import CASES, PickCase, description, pod
from ..support.realkubelet import RELEASES, RealKubelet


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_kubelet_picks_the_hand_worked_cpus(kubelet: RealKubelet, case: PickCase) -> None:
    kubelet.reset(description(case))
    for index, step in enumerate(case.steps):
        verdict = kubelet.admit(pod(f"p{index}", step.cpus))
        if step.expected is None:
            assert (verdict.admitted, verdict.reason) == (False, step.reason), verdict.message
            continue
        assert verdict.admitted, f"step {index}: {verdict.reason} {verdict.message}"
        assert frozenset(verdict.containers["c"].cpus) == step.expected, f"step {index}"
