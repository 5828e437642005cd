"""The operator's two questions in words: ``snapshot --shape`` and ``snapshot --why``.

``--shape 'cpu=8,nvidia.com/gpu=2'`` (or a shape's name from ``--fit-shapes``) admits one pod
of the shape against the snapshot just read, as the kubelet would; ``--why NAMESPACE/POD``
takes the pod read from the Kubernetes API (by the ``snapshot``
command), takes each container's requests from its spec (SPEC
7.2.1) and admits that pod the same way. Both print, per container, the request, each NUMA
node's free amount and shortfall, where the kubelet would place it, and the verdict in one
sentence naming the policy and scope; ``--format json`` prints the same as one JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..podspec import Rejection, rejection
from .answers import (
    ShapeAnswer,
    answer,
    format_amount,
    free_on,
    full_cores_series,
    nodes_text,
    numa_free_series,
    sentence,
    where,
)
from .assumptions import (
    CPUS_FROM_DRA,
    NO_CPU_MANAGER_STATE,
    NO_DEVICE_CHECKPOINT,
    NO_MEMORY_MANAGER_STATE,
    NO_POD_CONTEXT,
    NODE_ALLOCATABLE_DERIVED,
    UNSEEN_UNHEALTHY_DEVICES,
)
from .from_pod_object import pod_shape
from .kubelet.config import Rules
from .kubelet.managers_state import ManagersState
from .kubelet.podshape import PodShape, asks
from .kubeletconfig import KubeletConfig


class ExplainError(Exception):
    """The question cannot be answered (no API access, no such pod); one line."""


@dataclass(frozen=True)
class PodQuestion:
    """A pod read from the Kubernetes API for ``--why``."""

    namespace: str
    name: str
    phase: str
    reason: str
    message: str
    rejection: Rejection | None
    shape: PodShape

    @classmethod
    def of(cls, namespace: str, name: str, obj: dict[str, Any]) -> PodQuestion:
        """The question about a pod object as the API server returned it."""
        status = obj.get("status") or {}
        return cls(namespace, name, str(status.get("phase", "")),
                   str(status.get("reason", "")), str(status.get("message", "")),
                   rejection(obj), pod_shape(obj, f"{namespace}/{name}"))


def parse_pod_name(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/POD, got {text!r}")
    return namespace, name


def _container_rows(result: ShapeAnswer, state: ManagersState) -> list[dict[str, Any]]:
    """Per container: its request, each NUMA node's free amount and shortfall, and where the
    kubelet placed it (or that it could not)."""
    rules = result.rules
    placed = {p.container: p for p in result.verdict.placements}
    rows = []
    for container, _ in result.shape.in_admission_order():
        ask = asks(result.shape, container, rules.managers)
        resources = [r for r in ask.resources() if r in result.aligned or r in ask.devices]
        placement = placed.get(container.name)
        seen = state  # what this container was judged against: after the ones before it
        if placement is not None and placement.before is not None:
            seen = placement.before
        elif result.verdict.container == container.name and result.verdict.before is not None:
            seen = result.verdict.before
        numa = []
        for numa_id in state.numa_ids:
            free = {r: free_on(seen, r, numa_id) for r in resources}
            numa.append({"numa_node": str(numa_id), "free": free,
                         "shortfall": {r: max(0, ask.amount(r) - free[r]) for r in resources}})
        aligned_to = None
        if placement is not None and not placement.ask.is_empty():
            found = where(placement)
            aligned_to = sorted(found) if found else None
        rows.append({"container": container.name, "sidecar": container.sidecar,
                     "init": container in result.shape.init_containers,
                     "request": {r: ask.amount(r) for r in resources},
                     "not_exclusive": sorted(set(container.requests) - set(resources)),
                     "placed": placement is not None, "numa_nodes_used": aligned_to,
                     "numa": numa})
    return rows


def fit_json(result: ShapeAnswer, state: ManagersState, config: KubeletConfig) -> dict[str, Any]:
    verdict = result.verdict
    return {
        "shape": result.shape.name,
        "qos": result.shape.qos,
        "kubelet_config": dict(zip(("topology_manager_policy", "topology_manager_scope",
                                    "cpu_manager_policy", "memory_manager_policy", "source"),
                                   config.labels())),
        "containers": _container_rows(result, state),
        "admitted": verdict.admitted,
        "reason": verdict.reason,
        "blocking_resource": verdict.blocking_resource,
        "rejected_container": verdict.container,
        "pinned_by": verdict.pinned_by,
        "memory_group_nodes": sorted(verdict.grouped_nodes),
        "fits": {str(n): ok for n, ok in result.fits.items()},
        "not_aligned": list(result.not_aligned),
        "capacity": result.capacity if result.capacity != float("inf") else "+Inf",
        "min_numa_nodes": result.min_numa_nodes,
        "assumptions": list(result.assumptions),
        "verdict": sentence(result),
    }


def format_fit_table(result: ShapeAnswer, state: ManagersState, config: KubeletConfig,
                     title: str) -> str:
    """Per container: the request, free and shortfall per NUMA node, the placement; then the
    verdict."""
    lines = [title, f"Kubelet configuration ({config.source}): Topology Manager policy "
             f"{config.topology_manager_policy}, scope {config.topology_manager_scope}, CPU "
             f"manager {config.cpu_manager_policy}, memory manager "
             f"{config.memory_manager_policy}"
             + (", full-pcpus-only" if config.full_pcpus_only else "")]
    for row in _container_rows(result, state):
        kind = "sidecar " if row["sidecar"] else "init container " if row["init"] else ""
        request = ", ".join(f"{r}={format_amount(r, a)}" for r, a in row["request"].items())
        if not row["placed"]:
            where = "not placed"
        elif row["numa_nodes_used"] is None:
            where = "nothing aligned"
        else:
            where = "placed on " + nodes_text(frozenset(row["numa_nodes_used"]))
        lines.append(f"{kind.capitalize() or 'Container '}"
                     f"{row['container']}: {request or 'no exclusive request'} -> {where}")
        if row["not_exclusive"]:
            lines.append(f"  (not exclusive here: {', '.join(row['not_exclusive'])})")
        if not row["request"]:
            continue
        header = ("NUMA", "RESOURCE", "REQUEST", "FREE", "SHORTFALL")
        cells = [(n["numa_node"], r, format_amount(r, a), format_amount(r, n["free"][r]),
                  format_amount(r, n["shortfall"][r]))
                 for n in row["numa"] for r, a in row["request"].items()]
        widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
        for cell in [header, *cells]:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(cell, widths)).rstrip())
    fits_on = [str(n) for n, ok in result.fits.items() if ok]
    capacity = ("unbounded" if result.capacity == float("inf") else str(int(result.capacity)))
    lines.append(f"Whole pod alone on NUMA nodes (single-numa-node): {', '.join(fits_on) or 'none'}"
                 f"; capacity: {capacity}; fewest NUMA nodes together: "
                 f"{result.min_numa_nodes if result.min_numa_nodes is not None else 'none'}")
    for resource in result.not_aligned:
        lines.append(f"({resource}: no exclusive assignment here, so no NUMA alignment)")
    if result.assumptions:
        lines.append("Assumes (the exporter cannot see it): "
                     + "; ".join(ASSUMPTION_TEXT.get(a, a) for a in result.assumptions))
    lines.append(f"Verdict: {sentence(result)}.")
    return "\n".join(lines) + "\n"


AnswerOf = Callable[[PodShape, Rules], ShapeAnswer]
ASSUMPTION_TEXT = {
    NO_CPU_MANAGER_STATE: "CPUs finished init containers hold are free (no cpu_manager_state: "
                          "give --watch-path the kubelet's root directory)",
    NO_DEVICE_CHECKPOINT: "devices finished init containers hold are free (no device-plugins/"
                          "kubelet_internal_checkpoint under --watch-path)",
    NO_MEMORY_MANAGER_STATE: "memory the init containers of pods not yet started hold is free "
                             "(no memory_manager_state under --watch-path)",
    NO_POD_CONTEXT: "other pods' requests are what List shows, and a listed pod the kubelet "
                    "rejected holds its resources (no pod context: --kube-api)",
    NODE_ALLOCATABLE_DERIVED: "the Node's allocatable CPU, memory and pods are derived from "
                              "sysfs and the kubelet's config file, or GetAllocatableResources "
                              "(no Node object)",
    CPUS_FROM_DRA: "the node's exclusive CPUs come from a DRA CPU driver (CPU manager policy "
                   "none): the kubelet admits the shape's CPUs without placing them, and which "
                   "CPUs on which NUMA node is the scheduler's allocation of its ResourceClaims",
    UNSEEN_UNHEALTHY_DEVICES: "no unhealthy device that no container holds decides where a "
                              "device resource aligns (neither API names one; the Node object's "
                              "capacity, with --kube-api, can rule them out)",
}


def shape_report(shape: PodShape, state: ManagersState, config: KubeletConfig,
                 output_format: str, answer_of: AnswerOf | None = None) -> str:
    """``answer_of``: how the running fit view answers (with what it assumes); by default a
    bare :func:`answer` against ``state``."""
    rules = config.rules()
    result = answer_of(shape, rules) if answer_of is not None else answer(shape, state, rules)
    if output_format == "json":
        return json.dumps(fit_json(result, state, config), indent=2, sort_keys=True) + "\n"
    return format_fit_table(result, state, config, f"Shape {shape.name} ({shape.qos})")


def why_report(pod: PodQuestion, state: ManagersState, config: KubeletConfig,
               output_format: str, answer_of: AnswerOf | None = None) -> str:
    """The pod's containers admitted against this snapshot, as the kubelet would."""
    who = f"{pod.namespace}/{pod.name}"
    if pod.rejection is not None:
        status = f"rejected at admission: {pod.rejection.reason}"
        if pod.rejection.message:
            status += f" ({pod.rejection.message})"
    else:
        status = (f"not rejected at admission (phase {pod.phase or 'unknown'}"
                  + (f", reason {pod.reason}" if pod.reason else "") + ")")
    rules = config.rules()
    note = ""
    if (pod.rejection is not None and pod.rejection.reason == "SMTAlignmentError"
            and not config.full_pcpus_only):
        # only full-pcpus-only gives this reason: the kubelet has it on, whatever was read
        rules = replace(rules, full_pcpus_only=True)
        note = ("(SMTAlignmentError comes only from the CPU manager's full-pcpus-only option: "
                "judged with it on; pass --full-pcpus-only or --kubelet-config)")
    result = (answer_of(pod.shape, rules) if answer_of is not None
              else answer(pod.shape, state, rules))
    if output_format == "json":
        document = fit_json(result, state, config)
        document.update(pod=who, status=status)
        if note:
            document["note"] = note
        return json.dumps(document, indent=2, sort_keys=True) + "\n"
    text = format_fit_table(result, state, config, f"Pod {who} ({pod.shape.qos}): {status}")
    return text + (note + "\n" if note else "")


def free_table(state: ManagersState) -> str:
    """``podresources_numa_free`` as a table, for the plain ``snapshot``."""
    series = numa_free_series(state)
    full = full_cores_series(state)
    nodes = sorted({label for label, _ in series}, key=lambda x: (x == "unknown", x))
    resources = sorted({resource for _, resource in series},
                       key=lambda r: (r != "cpu", r.startswith(("memory", "hugepages-")), r))
    header = ["NUMA", *resources] + (["FULL-CORE CPUS"] if full else [])
    rows = []
    for label in nodes:
        row = [label] + [format_amount(r, series[(label, r)]) if (label, r) in series else "-"
                         for r in resources]
        if full:
            row.append(str(full.get(label, "-")))
        rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["Free for new single-NUMA requests, per NUMA node:"]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    grouped = [n for n in state.numa_ids if state.grouped(n)]
    if grouped:
        lines.append(f"(memory: {nodes_text(frozenset(grouped))} hold part of a block spanning "
                     "several NUMA nodes; the memory manager serves no single-node request "
                     "there)")
    return "\n".join(lines) + "\n"


def shapes_summary(answers: list[ShapeAnswer]) -> str:
    """One verdict per ``--fit-shapes`` shape, for the plain ``snapshot``."""
    if not answers:
        return ""
    lines = ["Pod shapes (--fit-shapes):"]
    for result in answers:
        lines.append(f"  {result.shape.name}: {sentence(result)}")
    return "\n".join(lines) + "\n"
