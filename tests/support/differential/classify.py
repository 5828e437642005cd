"""Which kubelet behaviour lies behind a disagreement: each class names the kubelet function
whose effect the exporter's snapshot cannot show or its fit engine does not model."""

from __future__ import annotations

from .runner import Outcome

CLASSES = {
    "predicate": "the predicate admit handler counts every pod's requests, Burstable and "
                 "fractional ones included (lifecycle/predicate.go Admit; OutOf<resource>)",
    "handler-order": "the Topology Manager's admit handler runs before the predicate handler, "
                     "so its reason comes first (kubelet.go NewMainKubelet handler order)",
    "device-allocate": "the device manager's Allocate fails on devices the snapshot counts as "
                       "free or missing (devicemanager/manager.go devicesToAllocate: \"no healthy "
                       "devices present\", \"requested number of devices unavailable\")",
    "init-cpus": "a finished regular init container keeps its exclusive CPUs (nothing calls the "
                 "CPU manager's RemoveContainer; cpumanager/policy_static.go updateCPUsToReuse)",
    "init-devices": "a regular init container keeps its devices for the pod's life unless a later "
                    "container reuses them (devicemanager/pod_devices.go; List shows none of "
                    "them)",
    "memory-extend": "the memory manager cannot extend the merged hint to hold the request "
                     "(memorymanager/policy_static.go Allocate: \"failed to find NUMA nodes to "
                     "extend the current topology hint\")",
    "rejected-leftovers": "a rejected pod keeps what its earlier containers got until the next "
                          "removeStaleState (cpumanager/cpu_manager.go)",
    "sidecar-reuse": "a restartable sidecar takes CPUs out of the init containers' reusable set "
                     "(cpumanager/policy_static.go updateCPUsToReuse)",
    "policy-none-placement": "under policy none the CPU manager picks CPUs by topology "
                             "(cpumanager/cpu_assignment.go takeByTopology)",
    "cpu-pick": "which CPUs the CPU manager takes (cpumanager/cpu_assignment.go "
                "takeByTopologyNUMAPacked, takeByTopologyNUMADistributed, takeUncoreCache; "
                "policy_static.go allocateCPUs, getAlignedCPUs)",
    "memory-pick": "the memory manager's blocks and per-NUMA state after a pod "
                   "(memorymanager/policy_static.go Allocate, updateMachineState)",
    "device-pick": "which devices the device manager takes where its pick is determined "
                   "(devicemanager/manager.go devicesToAllocate, filterByAffinity)",
    "other": "not classified",
}


def classify(outcome: Outcome) -> str:
    real, held = outcome.real, outcome.held
    reasons = {real.reason if real is not None else "", outcome.stop_reason}
    if any(r.startswith("OutOf") for r in reasons):
        return "predicate"
    fit = outcome.fit.verdict.reason if outcome.fit is not None else None
    if real is not None and not real.admitted and (fit or "").startswith("OutOf"):
        return "handler-order"
    message = real.message if real is not None else ""
    if "no healthy devices present" in message or "devices unavailable" in message:
        return "device-allocate"
    if "extend the current topology hint" in message:
        return "memory-extend"
    if held.get("init_cpus"):
        return "init-cpus"
    if held.get("init_devices"):
        return "init-devices"
    if held.get("inactive_cpus") or held.get("inactive_memory") or held.get("inactive_devices"):
        return "rejected-leftovers"
    kinds = {c.kind for c in outcome.case.candidate.containers}
    if {"init", "sidecar"} <= kinds:
        return "sidecar-reuse"
    if outcome.case.profile["topology_manager_policy"] == "none" and \
            "placement" in outcome.differences:
        return "policy-none-placement"
    if outcome.differences == ["exact"]:
        first = outcome.details[0]
        return ("cpu-pick" if first.startswith("CPU ids") else
                "memory-pick" if "memory" in first else "device-pick")
    return "other"
