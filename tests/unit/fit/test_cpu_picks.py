"""The fit engine's CPU picks against values worked by hand from the kubelet's cpumanager code
(tests/support/cpu_cases.py, which the real kubelet is held to in
tests/integration/test_real_kubelet_cpu_picks.py): each layout written as a sysfs tree by the
simulator, read as the exporter reads it, then one pod after another admitted by the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.fit.kubelet.admission.errors import ADMISSION_STALLED
from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import CONTAINER, Managers, Rules
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.shapes import build_shape
from exporter.fit.state.from_snapshot import cpu_base
from exporter.simulator.node.sysfs import write_sysfs
from exporter.simulator.profile import parse_profile
from exporter.topology import read_topology

from ...support.cpu_cases import CASES, STALL, STALL_THEN, PickCase, layout_profile


def node(case: PickCase, tmp_path: Path) -> tuple[ManagersState, Rules]:
    spec = parse_profile({**layout_profile(case.layout),
                          "topology_manager_policy": case.policy,
                          "cpu_manager_policy_options": case.options})
    topology = read_topology(write_sysfs(spec, tmp_path))
    cpu = cpu_base(topology, spec.all_cpus - spec.reserved_cpus)
    options = {name: value == "true" for name, value in case.options.items()}
    rules = Rules(case.policy, CONTAINER, options.get("full-pcpus-only", False), False,
                  Managers(cpu_static=True, memory_static=False),
                  options.get("distribute-cpus-across-numa", False),
                  options.get("distribute-cpus-across-cores", False),
                  options.get("align-by-socket", False),
                  options.get("prefer-align-cpus-by-uncorecache", False))
    return ManagersState(tuple(sorted(topology.numa_nodes)), cpu), rules


def pod(cpus: int):  # type: ignore[no-untyped-def]
    return build_shape("p", {"cpu": str(cpus), "memory": "100Mi"})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_engine_picks_the_hand_worked_cpus(case: PickCase, tmp_path: Path) -> None:
    state, rules = node(case, tmp_path)
    for index, step in enumerate(case.steps):
        verdict = admit(pod(step.cpus), state, rules)
        if step.expected is None:
            assert (verdict.admitted, verdict.reason) == (False, step.reason)
            continue
        assert verdict.admitted, f"step {index}: {verdict.reason} {verdict.message}"
        assert verdict.placements[0].cpu_ids == step.expected, f"step {index}"
        assert verdict.state is not None
        state = verdict.state


def test_a_request_the_kubelet_never_finishes_is_said_so(tmp_path: Path) -> None:
    """The kubelet loops for ever on STALL (cpu_cases.STALL): the engine answers
    AdmissionStalled, blocking on cpu; 12 CPUs on the same node fit."""
    state, rules = node(STALL, tmp_path)
    verdict = admit(pod(STALL.steps[0].cpus), state, rules)
    assert (verdict.admitted, verdict.reason, verdict.blocking_resource) == (
        False, ADMISSION_STALLED, "cpu")
    assert "kubernetes#140730" in verdict.message
    fits = admit(pod(STALL_THEN.cpus), state, rules)
    assert fits.admitted and fits.placements[0].cpu_ids == STALL_THEN.expected
