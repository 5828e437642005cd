"""The differential's runner on a copy the real kubelet never answers: the CPU manager's
remainder loop that does not end (tests/support/cpu_cases.STALL, kubernetes#140730). The fit
engine says AdmissionStalled for that copy, so the case is judged (both sides: the kubelet
admits no more copies), not dropped as slow."""

from __future__ import annotations

from ..support.cpu_cases import STALL, layout_profile
from ..support.differential.cases import Case, ContainerDraw, PodDraw
from ..support.differential.runner import run_case, workdir
from ..support.realkubelet import RELEASES, RealKubelet

MiB = 1 << 20


def test_a_copy_the_kubelet_never_answers_is_judged() -> None:
    profile = {**layout_profile(STALL.layout), "memory_manager_policy": "None",
               "cpu_manager_policy_options": STALL.options}
    # 14 CPUs: the first copy stalls (STALL's request on STALL's node)
    candidate = PodDraw("candidate", "Guaranteed",
                        (ContainerDraw("app", "app", 14000, 128 * MiB, {}, {}),), start=False)
    case = Case(0, 0, profile, (), candidate)
    for release in sorted(RELEASES):
        with RealKubelet.start(release) as kubelet:
            outcome = run_case(kubelet, case, workdir())
        assert not outcome.slow, outcome.slow
        assert outcome.stalled
        assert outcome.differences == [], outcome.details
        assert (outcome.real_capacity, outcome.fit.capacity if outcome.fit else None) == (0, 0)
