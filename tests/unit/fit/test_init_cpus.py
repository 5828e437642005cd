"""The CPUs finished init containers still hold, inferred from pod context without
``cpu_manager_state`` (exporter/fit/state/init_cpus.py), worked out by hand from the static CPU
manager's rules: every container's CPUs taken at admission, in one fixed order on a node without
SMT; a later container's hint holding the reusable CPUs; what stays reusable kept."""

from __future__ import annotations

from dataclasses import replace

from exporter.fit.assumptions import NO_CPU_MANAGER_STATE, assumptions
from exporter.fit.kubelet.config import Managers, Rules
from exporter.fit.kubelet.podshape import ContainerShape, PodShape
from exporter.fit.state.checkpoints import KubeletState
from exporter.fit.state.from_snapshot import node_state
from exporter.fit.state.init_cpus import with_inferred_init_cpus
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    KubeletSnapshot,
    NumaNode,
    PodAssignment,
    Topology,
)
from exporter.podcontext import ContainerContext, NodeContext, PodContext

# 2 NUMA nodes of 4 CPUs, no SMT; CPU 0 reserved
TWO_BY_FOUR = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                   NumaNode(1, frozenset(range(4, 8)))])
RULES = Rules(managers=Managers(cpu_static=True, memory_static=False))
ASKS_CPUS = PodShape("two", (ContainerShape("c", {"cpu": 2000}),))


def cpus(count: int) -> dict[str, int]:
    return {"cpu": 1000 * count}


def pod(name: str, init: dict[str, int], apps: dict[str, dict[str, int]],
        phase: str = "Running") -> PodContext:
    return PodContext("ns", name, f"uid-{name}", "Guaranteed", phase,
                      (ContainerContext("init", init, init),),
                      tuple(ContainerContext(n, r, r) for n, r in apps.items()))


def snapshot(*pods: tuple[str, dict[str, tuple[int, ...]]]) -> KubeletSnapshot:
    return KubeletSnapshot(
        tuple(PodAssignment("ns", name, tuple(ContainerAssignment(c, ids)
                                              for c, ids in containers.items()))
              for name, containers in pods),
        Allocatable(cpu_ids=tuple(range(1, 8))))


def test_the_init_containers_cpus_the_app_did_not_reuse_are_held_on_its_node() -> None:
    """Pod p: init 4 CPUs, app 2. The app's CPUs (4, 5, on node 1) show where: the init
    container took 4 of node 1's free CPUs, the app the first 2 of them; 2 stay with the init
    container. Node 1 had 4, 5, 6, 7 free: the init container's pick is all four, so 6 and 7."""
    listed = snapshot(("p", {"app": (4, 5)}))
    context = NodeContext("pods-api", (pod("p", cpus(4), {"app": cpus(2)}),))
    kubelet = with_inferred_init_cpus(None, listed, TWO_BY_FOUR, context, RULES)
    assert kubelet is not None and kubelet.cpus_decided and kubelet.cpus_inferred
    assert kubelet.cpus == {"uid-p": {"init": frozenset({6, 7})}}
    state = node_state(listed, TWO_BY_FOUR, True, False, context, kubelet)
    assert state is not None and state.cpu is not None
    assert state.cpu.free == frozenset({1, 2, 3})  # node 1 has nothing free: 6, 7 held
    assert NO_CPU_MANAGER_STATE not in assumptions(ASKS_CPUS, state, RULES, context, kubelet)


def test_an_app_that_reuses_every_cpu_leaves_nothing_held() -> None:
    """init 2 CPUs, app 3 (2 of them the init container's, 1 more): nothing stays."""
    listed = snapshot(("p", {"app": (1, 2, 3)}))
    context = NodeContext("pods-api", (pod("p", cpus(2), {"app": cpus(3)}),))
    kubelet = with_inferred_init_cpus(None, listed, TWO_BY_FOUR, context, RULES)
    assert kubelet is not None and kubelet.cpus == {} and kubelet.cpus_decided


def test_nothing_shows_where_without_a_later_container_with_cpus() -> None:
    """init 2 CPUs, app 500m (the shared pool): 2 CPUs held, on a node nothing shows; the answer
    keeps the assumption."""
    listed = snapshot(("p", {"app": ()}))
    context = NodeContext("pods-api", (pod("p", cpus(2), {"app": {"cpu": 500}}),))
    kubelet = with_inferred_init_cpus(None, listed, TWO_BY_FOUR, context, RULES)
    assert kubelet is not None and not kubelet.cpus_decided
    state = node_state(listed, TWO_BY_FOUR, True, False, context, kubelet)
    assert state is not None
    assert NO_CPU_MANAGER_STATE in assumptions(ASKS_CPUS, state, RULES, context, kubelet)


def test_a_pod_the_kubelet_has_not_admitted_holds_nothing() -> None:
    """A pod of the context that List does not show (bound, not admitted yet): nothing."""
    context = NodeContext("pods-api", (pod("p", cpus(4), {"app": cpus(2)}, "Pending"),))
    kubelet = with_inferred_init_cpus(None, snapshot(), TWO_BY_FOUR, context, RULES)
    assert kubelet is not None and kubelet.cpus == {} and kubelet.cpus_decided


def test_the_state_file_when_read_wins() -> None:
    """cpu_manager_state read: nothing is inferred."""
    read = KubeletState(cpus={"uid-p": {"init": frozenset({4, 5, 6, 7})}})
    listed = snapshot(("p", {"app": (4, 5)}))
    context = NodeContext("pods-api", (pod("p", cpus(4), {"app": cpus(2)}),))
    assert with_inferred_init_cpus(read, listed, TWO_BY_FOUR, context, RULES) is read


def test_a_pick_that_need_not_nest_or_align_leaves_it_undecided() -> None:
    """The first case under ``prefer-align-cpus-by-uncorecache`` (a whole free cache for a
    request as large, a partly used one for a smaller: the app's 2 need not be among the init
    container's 4), under ``distribute-cpus-across-numa`` (a larger request spread over NUMA
    nodes), and under the Topology Manager policies ``none`` (no hint: the init container's 4
    may span NUMA nodes while the app's 2 sit on one) and ``best-effort`` (a wider hint than
    needed may be admitted): the answer keeps the assumption."""
    listed = snapshot(("p", {"app": (4, 5)}))
    context = NodeContext("pods-api", (pod("p", cpus(4), {"app": cpus(2)}),))
    for rules in (replace(RULES, prefer_align_by_uncore_cache=True),
                  replace(RULES, distribute_cpus_across_numa=True),
                  replace(RULES, policy="none"), replace(RULES, policy="best-effort")):
        kubelet = with_inferred_init_cpus(None, listed, TWO_BY_FOUR, context, rules)
        assert kubelet is not None and not kubelet.cpus_decided
        state = node_state(listed, TWO_BY_FOUR, True, False, context, kubelet)
        assert state is not None
        assert NO_CPU_MANAGER_STATE in assumptions(ASKS_CPUS, state, rules, context, kubelet)
