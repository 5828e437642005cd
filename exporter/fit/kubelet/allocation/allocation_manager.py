"""The kubelet's admission of one pod (``allocation/allocation_manager.go`` ``canAdmitPod``,
v1.37.2): the admit handlers in the order ``kubelet.go`` registers them.

:func:`admit` runs the Topology Manager's admit handler (its scope: merge and allocation), then
the resource-fit predicate (:mod:`~exporter.fit.kubelet.lifecycle.predicate`), which sees the
pod only when the Topology Manager admitted it. The verdict says whether the kubelet admits
it, with which reason and blocking resource otherwise, where each container lands, and the
node state after it (for placing one pod after another).
"""

from __future__ import annotations

from dataclasses import replace

from ..config import POD, Rules
from ..lifecycle.predicate import predicate
from ..managers_state import ManagersState
from ..podshape import PodShape
from ..topologymanager.policy_none import NONE
from ..topologymanager.scope import Verdict
from ..topologymanager.scope_container import admit_container_scope
from ..topologymanager.scope_pod import admit_pod_scope


def admit(pod: PodShape, state: ManagersState, rules: Rules) -> Verdict:
    """The kubelet's admission of ``pod`` on ``state``: the Topology Manager's admit handler
    (merge and allocation), then the resource-fit predicate
    (:mod:`exporter.fit.kubelet.lifecycle.predicate`), which sees the pod only when the Topology
    Manager admitted it."""
    if rules.policy != NONE and rules.scope == POD:
        verdict = admit_pod_scope(pod, state, rules)
    else:
        verdict = admit_container_scope(pod, state, rules)
    if not verdict.admitted or verdict.state is None:
        return verdict
    short = predicate(pod, state, verdict.state)
    if short is not None:
        return Verdict(False, short.reason, short.resource, None, short.message,
                       verdict.placements, before=state)
    if state.requests is not None:
        verdict = replace(verdict, state=replace(verdict.state,
                                                 requests=state.requests.plus(pod.requests())))
    return verdict
