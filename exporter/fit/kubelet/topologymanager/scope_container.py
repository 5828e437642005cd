"""The Topology Manager's scope ``container`` (``topologymanager/scope_container.go``,
v1.37.2), and every scope under policy ``none`` (``scope.go`` ``admitPolicyNone``).

Every container, init ones first, is merged and allocated on its own, so later containers see
what earlier ones took and must contain a regular init container's reusable CPUs and devices;
under policy ``none`` nothing is merged, each container is only allocated.
"""

from __future__ import annotations

from ..admission.errors import Failure
from ..config import Rules
from ..managers_state import ManagersState
from ..podshape import Ask, PodShape, asks
from .policy_none import NONE
from .scope import (
    Placement,
    Reuse,
    Verdict,
    allocate_aligned_resources,
    blocked_resources,
    blocking_resource,
    grouped_refusals,
    merged_hint,
    policy_distances,
    reuse_init_memory,
)
from .topology_manager import TOPOLOGY_AFFINITY_ERROR, TopologyHint


def admit_container_scope(pod: PodShape, state: ManagersState, rules: Rules) -> Verdict:
    reuse = Reuse()
    placements: list[Placement] = []
    regular: list[bool] = []
    for container, regular_init in pod.in_admission_order():
        ask = asks(pod, container, rules.managers)
        hint = TopologyHint(None, False)  # policy none: the managers get no hint (nil, false)
        pinned = reuse.owner if _pins(ask, reuse) else None
        if rules.policy != NONE:
            answers, hint, admitted = merged_hint(rules.policy, state, ask, reuse,
                                                  policy_distances(state, rules),
                                                  rules.align_by_socket)
            if not admitted:
                return Verdict(False, TOPOLOGY_AFFINITY_ERROR,
                               blocking_resource(rules.policy, answers, ask), container.name,
                               "Resources cannot be allocated with Topology locality",
                               tuple(placements), pinned_by=pinned,
                               grouped_nodes=grouped_refusals(state, ask), before=state,
                               blocked=tuple(blocked_resources(rules.policy, answers, ask)))
        result = allocate_aligned_resources(state, container, ask, hint, reuse, regular_init,
                                            pinned, rules)
        if isinstance(result, Failure):
            return Verdict(False, result.reason, result.resource, container.name,
                           result.message, tuple(placements), pinned_by=pinned,
                           grouped_nodes=grouped_refusals(state, ask), before=state)
        state, placement = result
        placements.append(placement)
        regular.append(regular_init)
        reuse_init_memory(placements, regular)
    return Verdict(True, placements=tuple(placements), state=state)


def _pins(ask: Ask, reuse: Reuse) -> bool:
    return bool((ask.cpus and reuse.cpus)
                or any(ask.devices.get(r) and sum(v.values()) for r, v in reuse.devices.items()))
