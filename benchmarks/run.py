"""Benchmark the exporter against the simulated kubelet, per profile, and check the budgets.

Measures, for the profiles small, dual-socket-gpu, large and huge:

* CPU per refresh (decode + accounting + rendering, and finishing every /metrics variant)
  on real ``List`` replies fetched over gRPC, against a bare protobuf decode of the very same
  bytes; in steady state and with a pod replaced before every refresh; and the naive design
  (``benchmarks/naive.py``) on the same bytes; with the four shapes of ``benchmarks/fit.py``,
  the fit answers' share of each refresh with a pod replaced against the rest of the same
  refresh (a change's fit recompute against the accounting of the same change);
* wall time per refresh and kubelet calls per refresh, from a real exporter process;
* resident memory after warm-up and after a churn phase (default 10 minutes) with the four
  shapes configured;
* on ``large``, what the node pays (``benchmarks/nodecost.py``): the whole exporter process's
  CPU per refresh (steady and with a pod replaced, without and with shapes), its breakdown,
  and the time from process start to the first complete ``/metrics``; and a change's fit
  recompute per kind of shape (``benchmarks/fitkinds.py``);
* ``/metrics`` latency with 16 concurrent scrapers (``wrk``; Prometheus' headers), for the
  exporter and for the naive design;
* series count;
* with ``--watch-path``: the delay from a kubelet state-file change to the updated metric;
* what ``--kube-api`` adds to the RSS of ``large``, and the installed size of the image's
  Python packages (``benchmarks/kube_api.py``).

Prints a table and the budget checks, and writes JSON (``--json``, default
``benchmarks/results/<date>.json``).

    python -m benchmarks.run                  # everything, about 20 minutes
    python -m benchmarks.run --quick          # shorter phases, about 6 minutes
    python -m benchmarks.run --profiles large --churn-only --churn-minutes 60   # a soak
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from exporter._proto.v1 import api_pb2 as v1
from exporter.kubeapi.resourceslices import inventory, slice_record
from exporter.model import DraInventory

from .budgets import budget_lines
from .fit import SHAPES_FILE
from .fitkinds import measure as measure_fitkinds, report as fitkinds_report
from .harness import (
    PROMETHEUS_HEADERS,
    REPO,
    Simulator,
    cpu_seconds,
    rss_mib,
    scrape,
    series_count,
    slope,
    start_exporter,
    stop,
    wait_up,
)
from .kube_api import published_slices
from .memory import measure_imports
from .naive import naive_refresh
from .nodecost import measure as measure_nodecost, report as nodecost_report
from .refreshcost import cpu_of, fit_view, refresh_cost, replies

PROFILES = ("small", "dual-socket-gpu", "large", "huge")


# ---- phase 1: CPU per refresh, in process, on real reply bytes ----------------------------

async def measure_pipeline(sim: Simulator, session, steady_replies: int,
                           churn_replies: int) -> dict:
    steady, churned, allocatable_raw, topology = await replies(sim, session, steady_replies,
                                                                churn_replies)
    bare = [min(cpu_of(v1.ListPodResourcesResponse.FromString, raw)[0] for _ in range(5))
            for raw in steady]
    naive_cpu = [cpu_of(naive_refresh, raw, allocatable_raw, topology)[0]
                 for raw in steady[:max(5, steady_replies // 4)]]
    bare_ms = statistics.fmean(bare) * 1000
    result: dict = {"reply_bytes": len(steady[0]), "bare_decode_ms": round(bare_ms, 4)}
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as directory:
        # as configured: without the fit answers' shapes or the Kubernetes-API view, with the
        # four shapes of benchmarks/fit.py, with the DRA devices of the profile's ResourceSlices
        for suffix, fit, dra in (("", None, None),
                                 ("_shapes", fit_view(Path(directory), SHAPES_FILE), None),
                                 ("_dra", None, profile_dra_inventory(sim.profile))):
            figures = refresh_cost(steady, churned, allocatable_raw, topology, fit, dra)
            for name, value in figures.items():
                stem, unit = name.rsplit("_", 1)
                result[f"{stem}{suffix}_{unit}"] = value
                if stem.endswith("refresh_cpu") and unit == "ms":
                    result[f"{stem}{suffix}_ratio"] = round(value / bare_ms, 1)
    result["naive_refresh_cpu_ms"] = round(statistics.fmean(naive_cpu) * 1000, 2)
    result["naive_over_ours_refresh"] = round(
        result["naive_refresh_cpu_ms"] / result["refresh_cpu_ms"], 1)
    return result


def profile_dra_inventory(profile: str) -> DraInventory:
    """What the Kubernetes-API view would hand the refresh: the profile's DRA pools as its
    ResourceSlices publish them (``benchmarks/kube_api.py``)."""
    records = dict(slice_record(obj) for obj in published_slices(profile, 0))
    return inventory(records.values(), [], lambda _: None)


# ---- phase 2: real processes --------------------------------------------------------------

def wrk_latency(port: int, seconds: float, connections: int = 16) -> dict:
    """Latency of /metrics under ``connections`` closed-loop scrapers (wrk), in ms."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk not found: apt-get install wrk")
    command = [wrk, f"-c{connections}", "-t2", f"-d{seconds:.0f}s", "--latency",
               "--timeout", "5s"]
    for name, value in PROMETHEUS_HEADERS.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run([*command, f"http://127.0.0.1:{port}/metrics"],
                            capture_output=True, text=True, check=True).stdout
    percentiles = {}
    for label in ("50", "99"):
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
        value, unit = float(match.group(1)), match.group(2)
        percentiles[label] = value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {"p50_ms": round(percentiles["50"], 3), "p99_ms": round(percentiles["99"], 3),
            "requests": requests, "non_2xx": int(errors.group(1)) if errors else 0}


async def measure_process(sim: Simulator, session, window: float, latency_seconds: float) -> dict:
    result: dict = {}
    # time-scaled steady state: the default 10 s / 60 s ratio, ten times faster
    proc, port = start_exporter(sim, "--interval", "1", "--allocatable-interval", "6")
    try:
        await wait_up(session, port)
        await asyncio.sleep(8)
        before_state = await sim.control(session, "/state")
        before = await scrape(session, port)
        cpu_before = cpu_seconds(proc.pid)
        await asyncio.sleep(window)
        cpu_used = cpu_seconds(proc.pid) - cpu_before
        after = await scrape(session, port)
        after_state = await sim.control(session, "/state")
        refreshes = (after[("podresources_refresh_duration_seconds_count", ())]
                     - before[("podresources_refresh_duration_seconds_count", ())])
        seconds = (after[("podresources_refresh_duration_seconds_sum", ())]
                   - before[("podresources_refresh_duration_seconds_sum", ())])
        calls = sum(after_state["calls"].values()) - sum(before_state["calls"].values())
        result["calls_per_refresh"] = round(calls / refreshes, 3)
        result["refresh_wall_ms"] = round(seconds / refreshes * 1000, 3)
        # everything the process did per refresh: the calls, the loop, the worker, two scrapes
        result["process_cpu_per_refresh_ms"] = round(cpu_used / refreshes * 1000, 2)
        result["series"] = series_count(after)
        result["rss_warm_mib"] = round(rss_mib(proc.pid), 1)
    finally:
        stop(proc)
    # scrape latency at the default refresh interval
    proc, port = start_exporter(sim)
    try:
        await wait_up(session, port)
        cpu_before = cpu_seconds(proc.pid)
        latency = wrk_latency(port, latency_seconds)
        cpu_used = cpu_seconds(proc.pid) - cpu_before
        result["scrape_p50_ms"] = latency["p50_ms"]
        result["scrape_p99_ms"] = latency["p99_ms"]
        result["scrapes_per_second"] = round(latency["requests"] / latency_seconds)
        result["scrape_cpu_ms"] = round(cpu_used / max(1, latency["requests"]) * 1000, 4)
        result["scrape_errors"] = latency["non_2xx"]
    finally:
        stop(proc)
    proc, port = start_exporter(sim, "--interval", "10", naive=True)
    try:
        await wait_up(session, port, naive=True)
        cpu_before = cpu_seconds(proc.pid)
        latency = wrk_latency(port, latency_seconds)
        cpu_used = cpu_seconds(proc.pid) - cpu_before
        result["naive_scrape_p50_ms"] = latency["p50_ms"]
        result["naive_scrape_p99_ms"] = latency["p99_ms"]
        result["naive_scrape_cpu_ms"] = round(cpu_used / max(1, latency["requests"]) * 1000, 3)
        result["naive_rss_mib"] = round(rss_mib(proc.pid), 1)
    finally:
        stop(proc)
    return result


# ---- phase 3: memory through churn --------------------------------------------------------

async def measure_churn_memory(profiles: list[str], minutes: float) -> dict:
    """Every profile at once: pods replaced every second, the exporter refreshing every
    second with the four shapes of ``benchmarks/fit.py``, RSS sampled every 10 s."""
    sims = [Simulator(p, churn_interval=1.0, churn_pods=2) for p in profiles]
    directory = tempfile.TemporaryDirectory(prefix="bench-churn-")
    shapes = Path(directory.name) / "shapes.yaml"
    shapes.write_text(SHAPES_FILE)
    procs = [start_exporter(sim, "--interval", "1", "--fit-shapes", str(shapes))
             for sim in sims]
    samples: dict[str, list[tuple[float, float]]] = {p: [] for p in profiles}
    try:
        async with aiohttp.ClientSession() as session:
            for _, port in procs:
                await wait_up(session, port)
            started = time.monotonic()
            while time.monotonic() - started < minutes * 60:
                await asyncio.sleep(10)
                for profile, (proc, port) in zip(profiles, procs):
                    await scrape(session, port)
                    samples[profile].append((time.monotonic() - started, rss_mib(proc.pid)))
    finally:
        for proc, _ in procs:
            stop(proc)
        for sim in sims:
            sim.stop()
        directory.cleanup()
    result = {}
    for profile, points in samples.items():
        second_half = [(t, m) for t, m in points if t >= minutes * 30]
        result[profile] = {
            "rss_after_churn_mib": round(points[-1][1], 1),
            "rss_churn_max_mib": round(max(m for _, m in points), 1),
            "rss_trend_mib_per_hour": round(slope(second_half) * 3600, 2),
        }
        if minutes > 10:  # a soak: where it stood at 10 minutes, and every 10 minutes
            result[profile]["rss_every_10_min_mib"] = [
                round(m, 1) for t, m in points if int(t // 600) != int((t - 10) // 600)]
    return result


# ---- phase 4: event-driven refresh --------------------------------------------------------

async def measure_watch(profile: str, events: int) -> dict:
    sim = Simulator(profile)
    proc, port = start_exporter(sim, "--interval", "60", "--watch-path", str(sim.state_dir),
                                "--max-refresh-rate", "1")
    delays: list[float] = []
    skipped = 0
    rng = random.Random(5)
    try:
        async with aiohttp.ClientSession() as session:
            await wait_up(session, port)
            first = await scrape(session, port)
            started = time.monotonic()
            for _ in range(events):
                await asyncio.sleep(rng.uniform(0.2, 2.0))  # some faster than the ceiling
                changed = await sim.control(session, "/churn", {"pods": 1})
                at = time.monotonic()
                gone = [p.split("/", 1)[1] for p in changed["removed"]]
                new = [p.split("/", 1)[1] for p in changed["added"]]
                while time.monotonic() - at < 10:
                    pods = {dict(labels).get("pod") for _, labels in await scrape(session, port)}
                    if any(p in pods for p in new) or (gone and not any(p in pods for p in gone)
                                                       and not new):
                        delays.append(time.monotonic() - at)
                        break
                    await asyncio.sleep(0.01)
                else:
                    skipped += 1  # the replaced pods hold nothing exclusive: no series to see
            last = await scrape(session, port)
            elapsed = time.monotonic() - started
    finally:
        stop(proc)
        sim.stop()
    refreshes = (last[("podresources_refresh_duration_seconds_count", ())]
                 - first[("podresources_refresh_duration_seconds_count", ())])
    delays.sort()
    return {
        "profile": profile,
        "events": events,
        "measured": len(delays),
        "watch_delay_median_s": round(statistics.median(delays), 3),
        "watch_delay_p99_s": round(delays[min(len(delays) - 1, int(len(delays) * 0.99))], 3),
        "refreshes_per_second": round(refreshes / elapsed, 3),
        "skipped": skipped,
    }


# ---- report -------------------------------------------------------------------------------

def report(results: dict) -> str:
    profiles = [p for p in PROFILES if p in results]
    rows = [
        ("List reply bytes", "reply_bytes"), ("bare decode ms", "bare_decode_ms"),
        ("refresh CPU ms (steady)", "refresh_cpu_ms"), ("  / bare decode", "refresh_cpu_ratio"),
        ("refresh CPU ms (1 pod changed)", "churn_refresh_cpu_ms"),
        ("  / bare decode", "churn_refresh_cpu_ratio"), ("cold refresh ms", "cold_refresh_ms"),
        ("4 shapes: refresh CPU ms (steady)", "refresh_cpu_shapes_ms"),
        ("  / bare decode", "refresh_cpu_shapes_ratio"),
        ("4 shapes: 1 pod changed ms", "churn_refresh_cpu_shapes_ms"),
        ("  of which the fit answers ms", "churn_fit_shapes_ms"),
        ("  the rest (accounting) ms", "churn_accounting_shapes_ms"),
        ("  fit answers / the rest", "churn_fit_over_accounting_shapes_x"),
        ("4 shapes: cold refresh ms", "cold_refresh_shapes_ms"),
        ("DRA view: refresh CPU ms (steady)", "refresh_cpu_dra_ms"),
        ("  / bare decode", "refresh_cpu_dra_ratio"),
        ("DRA view: 1 pod changed ms", "churn_refresh_cpu_dra_ms"),
        ("naive refresh CPU ms", "naive_refresh_cpu_ms"),
        ("  naive / ours", "naive_over_ours_refresh"), ("refresh wall ms", "refresh_wall_ms"),
        ("process CPU ms per refresh", "process_cpu_per_refresh_ms"),
        ("kubelet calls per refresh", "calls_per_refresh"), ("series", "series"),
        ("RSS MiB warm", "rss_warm_mib"), ("RSS MiB after churn", "rss_after_churn_mib"),
        ("RSS trend MiB/h (churn)", "rss_trend_mib_per_hour"),
        ("/metrics p50 ms", "scrape_p50_ms"), ("/metrics p99 ms", "scrape_p99_ms"),
        ("CPU ms per scrape", "scrape_cpu_ms"), ("naive p50 ms", "naive_scrape_p50_ms"),
        ("naive p99 ms", "naive_scrape_p99_ms"), ("naive CPU ms per scrape", "naive_scrape_cpu_ms"),
        ("naive RSS MiB", "naive_rss_mib"),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines = ["".ljust(width) + "".join(p.rjust(17) for p in profiles)]
    for title, key in rows:
        cells = []
        for profile in profiles:
            value = results[profile].get(key, "-")
            cells.append(f"{value:,}" if isinstance(value, (int, float)) else str(value))
        lines.append(title.ljust(width) + "".join(c.rjust(17) for c in cells))
    if "watch" in results:
        w = results["watch"]
        lines += ["", f"--watch-path ({w['profile']}): delay median {w['watch_delay_median_s']} s, "
                      f"p99 {w['watch_delay_p99_s']} s over {w['measured']} changes; "
                      f"{w['refreshes_per_second']} refreshes/s (ceiling 1)"]
    if "stress" in results or "fleet" in results:
        from .serving import report as serving_report
        lines += ["", serving_report(results)]
    if "peer" in results:
        from .peer import report as peer_report
        lines += ["", peer_report(results["peer"]) if "error" not in results["peer"]
                  else f"peer: not measured: {results['peer']['error']}"]
    if "kube_api" in results:
        from .kube_api import report as kube_api_report
        lines += ["", kube_api_report(results["kube_api"])]
    if "nodecost" in results:
        lines += ["", nodecost_report(results["nodecost"])]
    if "fit_kinds" in results:
        lines += ["", fitkinds_report(results["fit_kinds"])]
    lines += ["", *budget_lines(results)]
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=PROFILES)
    parser.add_argument("--quick", action="store_true", help="shorter phases")
    parser.add_argument("--churn-minutes", type=float, default=None,
                        help="length of the churn phase (default 10, or 1 with --quick)")
    parser.add_argument("--churn-only", action="store_true",
                        help="only the churn phase: RSS through churn and its trend (a soak "
                             "with --churn-minutes 60)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    quick = args.quick
    churn_minutes = args.churn_minutes if args.churn_minutes is not None else (1 if quick else 10)
    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
                   f"Python {platform.python_version()}",
    }
    if args.churn_only:
        print(f"churn phase: {churn_minutes} min ...", file=sys.stderr)
        churned = await measure_churn_memory(args.profiles, churn_minutes)
        print(json.dumps(churned, indent=2))
        return 0
    async with aiohttp.ClientSession() as session:
        for profile in args.profiles:
            print(f"[{profile}] refresh CPU ...", file=sys.stderr)
            sim = Simulator(profile)
            try:
                results[profile] = await measure_pipeline(
                    sim, session, 20 if quick else 60, 10 if quick else 40)
                print(f"[{profile}] processes, latency ...", file=sys.stderr)
                results[profile].update(await measure_process(
                    sim, session, 15 if quick else 30, 5 if quick else 10))
            finally:
                sim.stop()
    if "large" in args.profiles:  # what the node pays, the fit recompute per kind of shape
        results["nodecost"] = await measure_nodecost("large", 15 if quick else 30)
        results["fit_kinds"] = await measure_fitkinds(6 if quick else 15)
        results["imports"] = measure_imports()  # the runtime's floor, for the RSS rows
    print(f"churn phase: {churn_minutes} min ...", file=sys.stderr)
    for profile, figures in (await measure_churn_memory(args.profiles, churn_minutes)).items():
        results[profile].update(figures)
    watch_profile = "large" if "large" in args.profiles else args.profiles[0]
    print(f"[{watch_profile}] --watch-path ...", file=sys.stderr)
    results["watch"] = await measure_watch(watch_profile, 15 if quick else 40)
    if {"small", "large"} <= set(args.profiles):
        from .serving import measure_fleet, measure_stress
        print("stress: 320 scrapes/s while refreshing every 0.5 s ...", file=sys.stderr)
        results["stress"] = {p: await measure_stress(p, {"this": None}, 10 if quick else 30)
                             for p in ("small", "large")}
        print("fleet: large at the defaults, two replicas every 15 s ...", file=sys.stderr)
        results["fleet"] = await measure_fleet({"this": None}, 2 if quick else 5)
    if "large" in args.profiles:
        from .peer import measure as measure_peer
        print("peer: nfd-topology-updater beside the exporter on large ...", file=sys.stderr)
        try:
            results["peer"] = await measure_peer("large", 15 if quick else 30, 1.0,
                                                 lambda text: print(text, file=sys.stderr))
        except Exception as error:  # no Go, no mount namespace, a new NFD: keep the rest
            results["peer"] = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
        from .kube_api import measure as measure_kube_api
        results["kube_api"] = await measure_kube_api(1 if quick else 3, installed=True)
    print(report(results))
    target = args.json or REPO / "benchmarks" / "results" / time.strftime("%Y-%m-%d-%H%M.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nJSON: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
