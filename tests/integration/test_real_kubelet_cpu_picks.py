"""Which CPUs the real kubelet's CPU manager takes, under each CPU manager option and node
layout, against values worked by hand from its code (tests/support/cpu_cases.py says how
for each step): sockets first and NUMA nodes first, whole NUMA nodes, sockets and cores, L3
(uncore) caches, spreading over cores, distributing over NUMA nodes, align-by-socket's
preferred hints, strict CPU reservation. The fit engine's picks are checked against the same
values in tests/unit/fit/test_cpu_picks.py."""

from __future__ import annotations

import pytest

from ..support.cpu_cases import CASES, STALL, STALL_THEN, PickCase, description, pod
from ..support.realkubelet import RELEASES, RealKubelet, RealKubeletTimeout


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


def test_distributing_whole_cores_over_numa_nodes_can_stall_the_kubelet(
        kubelet: RealKubelet) -> None:
    """The kubelet's takeByTopologyNUMADistributed loops for ever on STALL's 14 CPUs (see
    cpu_cases.STALL): the component is stopped after 15 s without an answer. 12 CPUs on a
    fresh node: 3 NUMA nodes with 4 whole-core CPUs each (cores 2 and 3 of nodes 0-2)."""
    kubelet.reset(description(STALL))
    with pytest.raises(RealKubeletTimeout):
        kubelet.admit(pod("stalls", STALL.steps[0].cpus), timeout=15)
    kubelet.reset(description(STALL))
    verdict = kubelet.admit(pod("fits", STALL_THEN.cpus))
    assert verdict.admitted
    assert frozenset(verdict.containers["c"].cpus) == STALL_THEN.expected
