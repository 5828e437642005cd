"""The operator's two questions in words: ``snapshot --shape`` and ``snapshot --why``.

``--shape 'cpu=8,nvidia.com/gpu=2'`` holds a shape against the snapshot just read;
``--why NAMESPACE/POD`` takes the pod read from the Kubernetes API (by the ``snapshot``
command), its exclusive requests from its spec (as the kubelet's admission counts them), and
holds those against the same snapshot. Both print a per-NUMA table of request, free and
shortfall, and a verdict sentence; ``--format json`` prints the same as one JSON object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..podspec import Rejection, exclusive_requests, rejection, without_dra_served
from .engine import FreeCapacity, Shape, ShapeFit, evaluate, format_amount, verdict
from .section import blocking_resource


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
    requests: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, namespace: str, name: str, obj: dict[str, Any]) -> PodQuestion:
        """The question about a pod object as the API server returned it."""
        status = obj.get("status") or {}
        obj = without_dra_served(obj)  # DRA devices are never aligned (KEP-5004)
        return cls(namespace, name, str(status.get("phase", "")),
                   str(status.get("reason", "")), str(status.get("message", "")),
                   rejection(obj), exclusive_requests(obj.get("spec") or {}))


def parse_pod_name(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/POD, got {text!r}")
    return namespace, name


def explain_shape(shape: Shape, free: FreeCapacity) -> ShapeFit:
    return evaluate(shape, free)


def _rows(fit: ShapeFit) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for numa_id in fit.fits:
        for resource in fit.constrained:
            amount = fit.shape.requests[resource]
            rows.append((str(numa_id), resource, format_amount(resource, amount),
                         format_amount(resource, fit.free[numa_id][resource]),
                         format_amount(resource, fit.shortfall[numa_id][resource])))
    return rows


def format_fit_table(fit: ShapeFit, free: FreeCapacity, title: str) -> str:
    """The per-NUMA table and the verdict, for a terminal."""
    lines = [title]
    header = ("NUMA", "RESOURCE", "REQUEST", "FREE", "SHORTFALL")
    rows = _rows(fit)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for resource in fit.unmanaged:
        lines.append(f"({resource}: not assigned per NUMA node on this kubelet, no constraint)")
    if free.full_pcpus_only and "cpu" in fit.constrained:
        lines.append("(full-pcpus-only: free CPUs are counted in whole free cores)")
    fits_on = [str(n) for n, ok in fit.fits.items() if ok]
    lines.append(f"fits on NUMA nodes: {', '.join(fits_on) or 'none'}; capacity under "
                 f"single-numa-node: {fit.capacity if fit.capacity is not None else 'unbounded'}"
                 f"; fewest NUMA nodes together: "
                 f"{fit.min_numa_nodes if fit.min_numa_nodes is not None else 'does not fit'}")
    lines.append(f"Verdict: {verdict(fit)}.")
    return "\n".join(lines) + "\n"


def fit_json(fit: ShapeFit) -> dict[str, Any]:
    return {
        "shape": fit.shape.name,
        "requests": dict(fit.shape.requests),
        "numa_nodes": [
            {"numa_node": str(numa_id), "fits": fit.fits[numa_id],
             "free": fit.free[numa_id], "shortfall": fit.shortfall[numa_id]}
            for numa_id in fit.fits],
        "not_aligned": list(fit.unmanaged),
        "capacity": fit.capacity,
        "min_numa_nodes": fit.min_numa_nodes,
        "blocking_resource": blocking_resource(fit),
        "verdict": verdict(fit),
    }


def shape_report(shape: Shape, free: FreeCapacity, output_format: str) -> str:
    fit = evaluate(shape, free)
    if output_format == "json":
        return json.dumps(fit_json(fit), indent=2, sort_keys=True) + "\n"
    requested = ", ".join(f"{r}={format_amount(r, a)}" for r, a in shape.requests.items())
    return format_fit_table(fit, free, f"Shape {requested}")


def why_report(pod: PodQuestion, free: FreeCapacity, output_format: str) -> str:
    """The rejected pod's exclusive requests against this snapshot."""
    requests = pod.rejection.requests if pod.rejection is not None else pod.requests
    who = f"{pod.namespace}/{pod.name}"
    if pod.rejection is not None:
        status = f"rejected at admission: {pod.rejection.reason}"
        if pod.rejection.message:
            status += f" ({pod.rejection.message})"
    else:
        status = (f"not rejected at admission (phase {pod.phase or 'unknown'}"
                  + (f", reason {pod.reason}" if pod.reason else "") + ")")
    if not requests:
        text = (f"Pod {who}: {status}. It requests no exclusive resources (no whole CPUs in "
                "a Guaranteed pod, no devices), so NUMA placement cannot have rejected it.\n")
        if output_format == "json":
            return json.dumps({"pod": who, "status": status, "requests": {},
                               "verdict": text.strip()}, indent=2, sort_keys=True) + "\n"
        return text
    fit = evaluate(Shape(who, dict(requests)), free)
    if output_format == "json":
        document = fit_json(fit)
        document.update(pod=who, status=status)
        return json.dumps(document, indent=2, sort_keys=True) + "\n"
    return format_fit_table(fit, free, f"Pod {who}: {status}\nExclusive requests: "
                            + ", ".join(f"{r}={format_amount(r, a)}" for r, a in requests))


def free_table(free: FreeCapacity) -> str:
    """``podresources_numa_free`` as a table, for the plain ``snapshot``."""
    series = free.series()
    full = free.full_cores_series()
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
    lines = ["Free for new exclusive requests, per NUMA node:"]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


def shapes_summary(fits: list[ShapeFit]) -> str:
    """One verdict per ``--fit-shapes`` shape, for the plain ``snapshot``."""
    if not fits:
        return ""
    lines = ["Pod shapes (--fit-shapes):"]
    for fit in fits:
        lines.append(f"  {fit.shape.name}: {verdict(fit)}")
    return "\n".join(lines) + "\n"
