"""A refresh's CPU in process, on real reply bytes: what ``benchmarks.run`` and
``benchmarks.fitkinds`` time.

:func:`refresh_cost` runs the refresh loop's own pipeline on ``List`` replies fetched from the
simulator (steady, then with a pod replaced before each), with the fit view when shapes are
configured, and the body one Prometheus scrape after each refresh reads (OpenMetrics, gzip: the
health section rendered and deflated for it), as if every refresh were scraped once.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exporter.exposition.bodies import Exposition, Section
from exporter.exposition.health import Health
from exporter.fit.fitview import FitView, build_fit_view
from exporter.kubelet.client import KubeletClient
from exporter.kubelet.decode import Replies
from exporter.kubelet.status import KubeletStatus
from exporter.model import DraInventory, Topology
from exporter.refresh.pipeline import Pipeline
from exporter.topology import read_topology

from .harness import Simulator

Fetched = tuple[list[bytes], list[bytes], bytes, Topology]


def cpu_of(function: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.process_time()
    result = function(*args)
    return time.process_time() - started, result


async def replies(sim: Simulator, session: Any, steady_count: int, churn_count: int) -> Fetched:
    """``List`` replies as the kubelet sent them: ``steady_count`` in a row, then
    ``churn_count`` each after one pod was replaced; the allocatable reply; the topology."""
    client = KubeletClient(str(sim.socket))
    try:
        steady = []
        for _ in range(steady_count):
            steady.append((await client.list_pods()).raw)
            await asyncio.sleep(0.015)  # stay under the kubelet's 100 calls/s
        allocatable_raw = (await client.get_allocatable()).raw
        churned = []
        for _ in range(churn_count):
            await sim.control(session, "/churn", {"pods": 1})
            churned.append((await client.list_pods()).raw)
            await asyncio.sleep(0.015)
    finally:
        await client.close()
    return steady, churned, allocatable_raw, read_topology(sim.sysfs)


def fit_view(directory: Path, shapes: str, policy: str | None = None, scope: str | None = None,
             full_pcpus_only: bool = False) -> FitView:
    """The fit view of a shapes file's text under the Topology Manager settings given."""
    path = directory / f"shapes-{abs(hash((shapes, policy, scope, full_pcpus_only)))}.yaml"
    path.write_text(shapes)
    return build_fit_view(str(path), None, full_pcpus_only, None, None, policy, scope)


def refresh_cost(steady: list[bytes], churned: list[bytes], allocatable_raw: bytes,
                 topology: Topology, fit: FitView | None, dra: DraInventory | None) -> dict:
    """CPU of a refresh on the same bytes: cold, steady, with a pod replaced before each."""
    pipeline, health, status = Pipeline(), Health("bench"), KubeletStatus()
    pipeline.allocatable(allocatable_raw)  # the loop re-reads it only every minute
    exposition = Exposition(lambda openmetrics: health.render(openmetrics, status))
    state: dict = {"accounting": None, "fit": b"", "fit_cpu": 0.0}

    def refresh(raw: bytes) -> int:
        """What one refresh costs the exporter: the refresh loop's own pipeline, the fit
        section when shapes are configured (recomputed only when its inputs changed; its own
        CPU kept in ``state["fit_cpu"]``), the data section deflated when it changed, and one
        scrape's body (OpenMetrics, gzip); returns the OpenMetrics body's length."""
        result = pipeline.run(Replies(raw, "v1", allocatable_raw), topology, dra=dra)
        data = fitted = None
        if result.accounting is not state["accounting"]:
            state["accounting"] = result.accounting
            data = Section.of(result.section)
        state["fit_cpu"] = 0.0
        if fit is not None:
            started = time.process_time()
            text = fit.update(result.snapshot, topology, result.accounting)
            if text is not state["fit"]:
                state["fit"], fitted = text, Section.of(text)
            state["fit_cpu"] = time.process_time() - started
        exposition.update(data=data, fit=fitted)
        exposition.health_changed()
        exposition.body(True, True)
        return exposition.body(True, False).length

    cold, body = cpu_of(refresh, steady[0])
    for raw in steady:  # learn the orderings the kubelet uses (a long-running exporter has)
        refresh(raw)
    steady_cpu = [cpu_of(refresh, raw)[0] for raw in steady]
    churn_cpu, churn_fit = [], []
    for raw in churned:
        churn_cpu.append(cpu_of(refresh, raw)[0])
        churn_fit.append(state["fit_cpu"])
    figures = {"body_bytes": body, "cold_refresh_ms": round(cold * 1000, 2),
               "refresh_cpu_ms": round(statistics.fmean(steady_cpu) * 1000, 4),
               "churn_refresh_cpu_ms": round(statistics.fmean(churn_cpu) * 1000, 4)}
    if fit is not None:  # the fit section's share of the same refreshes, and the rest's
        fit_ms = statistics.fmean(churn_fit) * 1000
        rest_ms = statistics.fmean(c - f for c, f in zip(churn_cpu, churn_fit)) * 1000
        figures.update({"churn_fit_ms": round(fit_ms, 4), "churn_accounting_ms": round(rest_ms, 4),
                        "churn_fit_over_accounting_x": round(fit_ms / rest_ms, 3)})
    return figures
