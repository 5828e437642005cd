"""The budgets ``benchmarks.run`` checks, and for a budget not met, why: the figures of the same
run that show the cause, and the next lever (docs/performance.md's Targets table says the same
in prose). A reason is printed only where the run measured what it rests on."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .fitkinds import KINDS

Results = dict[str, Any]
GET_ONE_POD = "Get of one pod over gRPC (a call's fixed cost)"


@dataclass(frozen=True)
class Budget:
    title: str
    value: Callable[[Results], float]
    limit: float
    why: Callable[[Results], str] | None = None  # when not met: the cause, the next lever


def _call_cost(r: Results) -> str:
    decode = r["large"]["bare_decode_ms"]
    call = r["nodecost"]["pieces_ms"][GET_ONE_POD]
    steady = r["nodecost"]["process_steady_shapes"]
    grpc_threads = steady["threads_ms"]["gRPC's own threads"]
    return (f"one gRPC call of a one-pod reply costs {call:.2f} ms = {call / decode:.1f} x the "
            f"bare decode, {100 * call / (5 * decode):.0f} % of the whole budget "
            f"({5 * decode:.2f} ms), and gRPC's own threads use {grpc_threads:.2f} ms per "
            "refresh: grpcio's work per call, not the reply's size; next lever: a client with "
            "less work per call than grpcio (the project keeps grpcio, so the target stays "
            "open)")


def _rss_floor(key: str) -> Callable[[Results], str]:
    def why(r: Results) -> str:
        rows = {row["imported"]: row["rss"] for row in r["imports"]["imports"]}
        imported = list(rows.values())[-1]
        grpc = rows["grpc, grpc.aio"] - rows["protobuf, the podresources API"]
        aiohttp = rows["aiohttp.web"] - rows["grpc, grpc.aio"]
        running = r["large"][key] - imported
        return (f"importing what a default run imports takes {imported:.1f} MiB (grpc "
                f"{grpc:.1f} MiB, aiohttp {aiohttp:.1f} MiB), running adds {running:.1f} MiB "
                "(gRPC's code paged in as it runs and its threads, the decoded snapshot, the "
                "kept fit state: python -m benchmarks.memory); next lever: lighter libraries "
                "than grpcio and aiohttp, which the project keeps")
    return why


def _kind_cost(name: str) -> Callable[[Results], str]:
    def why(r: Results) -> str:
        row = r["fit_kinds"][name]
        cause = f"{row['fit_ms']:.2f} ms against {row['accounting_ms']:.2f} ms"
        if "best-effort" in name:
            return (cause + ": a copy no single NUMA node holds (big's first, cpu4-8g's "
                    "33rd) is admitted over every set of NUMA nodes: each provider's hints for "
                    "all 255 sets of 8 nodes and their merge, about 1 ms a copy where "
                    "single-numa-node asks 8 nodes; next lever: the providers' masks as "
                    "bitsets, as the merge's intersections are")
        return (cause + f", {100 * (row['ratio'] - 1):.0f} % over: the kind's recompute is "
                "already incremental, and its figure moves this much between runs; next "
                "lever: profile it (python -m benchmarks.fitkinds)")
    return why


def _first_scrape(r: Results) -> str:
    first = r["nodecost"]["first_scrape_shapes"]
    return (f"the exporter's own CPU by then is {statistics.median(first['cpu_s']):.2f} s: the "
            "rest is waiting for a CPU on a loaded machine")


def _stress_floor(r: Results) -> str:
    small = r["stress"]["small"]["this"]["p99_ms"]
    return (f"small's p99 in the same run is {small:.2f} ms: the machine's floor, not the "
            "profile's size")


def _kind_ratio(name: str) -> Callable[[Results], float]:
    return lambda r: float(r["fit_kinds"][name]["ratio"])


BUDGETS = [
    Budget("process CPU per steady refresh / bare decode (large, 4 shapes; benchmarks.nodecost)",
           lambda r: r["nodecost"]["process_steady_shapes"]["cpu_ms"]
           / r["large"]["bare_decode_ms"], 5, _call_cost),
    Budget("in-process refresh / bare decode (large, steady)",
           lambda r: r["large"]["refresh_cpu_ratio"], 3),
    Budget("the same with 4 shapes", lambda r: r["large"]["refresh_cpu_shapes_ratio"], 3),
    Budget("a change's fit recompute / the accounting of the same change (large, 4 shapes)",
           lambda r: r["large"]["churn_fit_over_accounting_shapes_x"], 1),
    *(Budget(f"  the same, {kind.name} (benchmarks.fitkinds)", _kind_ratio(kind.name), 1,
             _kind_cost(kind.name)) for kind in KINDS),
    Budget("first complete /metrics s (large, 4 shapes, median of 3)",
           lambda r: statistics.median(r["nodecost"]["first_scrape_shapes"]["first_scrape_s"]),
           1.5, _first_scrape),
    Budget("RSS MiB (large, warm)", lambda r: r["large"]["rss_warm_mib"], 60,
           _rss_floor("rss_warm_mib")),
    Budget("RSS MiB (large, 4 shapes, after the churn phase)",
           lambda r: r["large"]["rss_after_churn_mib"], 60, _rss_floor("rss_after_churn_mib")),
    Budget("/metrics p99 ms, 320/s while refreshing every 0.5 s (large)",
           lambda r: r["stress"]["large"]["this"]["p99_ms"], 2, _stress_floor),
    Budget("the same, p99 large / small", lambda r: r["stress"]["large"]["this"]["p99_ms"]
           / r["stress"]["small"]["this"]["p99_ms"], 1.5),
    Budget("/metrics p99 ms (large, 16 scrapers)", lambda r: r["large"]["scrape_p99_ms"], 5),
    Budget("p99 large / small",
           lambda r: r["large"]["scrape_p99_ms"] / r["small"]["scrape_p99_ms"], 2),
    Budget("kubelet calls per refresh (large)", lambda r: r["large"]["calls_per_refresh"], 1.2),
    Budget("watch delay median s", lambda r: r["watch"]["watch_delay_median_s"], 1.5),
    Budget("series (large)", lambda r: r["large"]["series"], 15000),
    Budget("RSS / the peer's (large, same node)",
           lambda r: r["peer"]["ours_rss_mib"] / r["peer"]["peer_rss_mib"], 1),
    Budget("CPU per update / the peer's (large, same node)",
           lambda r: r["peer"]["ours_cpu_ms_per_update"] / r["peer"]["peer_cpu_ms_per_update"],
           1),
    Budget("--kube-api adds RSS MiB (large)", lambda r: r["kube_api"]["rss_added_mib"], 10),
    Budget("image's Python packages MB", lambda r: r["kube_api"]["installed_default_mb"], 60),
]


def budget_lines(results: Results) -> list[str]:
    """PASS, FAIL or n/a (not measured in this run) per budget; under a FAIL, why."""
    lines = ["Budgets (profile large):"]
    for budget in BUDGETS:
        try:
            value = budget.value(results)
        except (KeyError, TypeError, ZeroDivisionError):
            value = None
        verdict = "n/a" if value is None else ("PASS" if value <= budget.limit else "FAIL")
        shown = "-" if value is None else f"{value:.3g}"
        lines.append(f"  {verdict:4}  {budget.title}: {shown} (budget <= {budget.limit})")
        if verdict == "FAIL" and budget.why is not None:
            try:
                lines.append(f"          why: {budget.why(results)}")
            except (KeyError, TypeError, ZeroDivisionError, statistics.StatisticsError):
                lines.append("          why: not measured in this run")
    return lines

