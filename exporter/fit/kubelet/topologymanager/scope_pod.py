"""The Topology Manager's scope ``pod`` (``topologymanager/scope_pod.go``, v1.37.2).

One merge over the pod's effective request (``calculateAffinity`` over
``accumulateProvidersHints``), then every container allocated with that hint.
"""

from __future__ import annotations

from ..admission.errors import Failure
from ..config import Rules
from ..managers_state import ManagersState
from ..podshape import PodShape, asks, pod_scope_hint_ask
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
from .topology_manager import TOPOLOGY_AFFINITY_ERROR


def admit_pod_scope(pod: PodShape, state: ManagersState, rules: Rules) -> Verdict:
    ask = pod_scope_hint_ask(pod, rules.managers)
    answers, hint, admitted = merged_hint(rules.policy, state, ask, Reuse(),
                                          policy_distances(state, rules),
                                          rules.align_by_socket)
    if not admitted:
        return Verdict(False, TOPOLOGY_AFFINITY_ERROR,
                       blocking_resource(rules.policy, answers, ask),
                       None, "Resources cannot be allocated with Topology locality",
                       grouped_nodes=grouped_refusals(state, ask), before=state,
                       blocked=tuple(blocked_resources(rules.policy, answers, ask)))
    reuse = Reuse()
    placements: list[Placement] = []
    regular: list[bool] = []
    for container, regular_init in pod.in_admission_order():
        one = asks(pod, container, rules.managers)
        result = allocate_aligned_resources(state, container, one, hint, reuse, regular_init,
                                            None, rules)
        if isinstance(result, Failure):
            return Verdict(False, result.reason, result.resource, container.name,
                           result.message, tuple(placements), before=state)
        state, placement = result
        placements.append(placement)
        regular.append(regular_init)
        reuse_init_memory(placements, regular)
    return Verdict(True, placements=tuple(placements), state=state)
