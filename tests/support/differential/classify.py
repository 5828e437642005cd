"""Which kubelet behaviour lies behind a disagreement: each class names the kubelet function
whose effect the exporter's snapshot cannot show or its fit engine does not model."""

from __future__ import annotations

from .runner import Outcome

CLASSES = {
    "predicate": "the predicate admit handler counts every pod's requests, Burstable and "
                 "fractional ones included (lifecycle/predicate.go Admit; OutOf<resource>)",
    "init-cpus": "a finished regular init container keeps its exclusive CPUs (nothing calls the "
                 "CPU manager's RemoveContainer; cpumanager/policy_static.go updateCPUsToReuse)",
    "rejected-leftovers": "a rejected pod keeps what its earlier containers got until the next "
                          "removeStaleState (cpumanager/cpu_manager.go)",
    "sidecar-reuse": "a restartable sidecar takes CPUs out of the init containers' reusable set "
                     "(cpumanager/policy_static.go updateCPUsToReuse)",
    "policy-none-placement": "under policy none the CPU manager picks CPUs by topology "
                             "(cpumanager/cpu_assignment.go takeByTopology)",
    "other": "not classified",
}


def classify(outcome: Outcome) -> str:
    real, held = outcome.real, outcome.held
    reasons = {real.reason if real is not None else "", outcome.stop_reason}
    if any(r.startswith("OutOf") for r in reasons):
        return "predicate"
    if held.get("init_cpus"):
        return "init-cpus"
    if held.get("inactive_cpus") or held.get("inactive_memory") or held.get("inactive_devices"):
        return "rejected-leftovers"
    kinds = {c.kind for c in outcome.case.candidate.containers}
    if {"init", "sidecar"} <= kinds:
        return "sidecar-reuse"
    if outcome.case.profile["topology_manager_policy"] == "none" and \
            "placement" in outcome.differences:
        return "policy-none-placement"
    return "other"
