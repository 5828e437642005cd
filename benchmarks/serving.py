"""What serving /metrics costs: scrape latency under refresh, probes during a long refresh, and
what a fleet pays per node.

Three measurements, each against real exporter processes and the kubelet simulator:

* **stress**: 16 scrapers (``wrk``, each connection pausing 50 ms after every answer: 320
  requests/s in all while answers are fast) with Prometheus' headers (OpenMetrics, gzip), while
  the exporter refreshes every 0.5 s; ``/metrics`` latency percentiles per profile;
* **probes**: ``/healthz`` every 5 ms while an exporter starts on ``huge`` (2,000 pods: the
  first refresh decodes, accounts and renders everything) and then refreshes every 0.5 s with
  pods replaced every 0.5 s; the probe latency percentiles and the worst;
* **fleet**: a ``large`` node at the defaults (``--interval 10``, ``--allocatable-interval 60``)
  scraped by two Prometheus replicas every 15 s (two scrapers with Prometheus' headers, offset
  by half an interval): the exporter's CPU seconds per hour and RSS, after warm-up.

``--tree DIR`` runs a second exporter from another source tree (e.g. the previous design,
``git archive``'d) beside this one, in the same run, so that the ratios compare like with like.
``benchmarks/naive.py`` (global gauges, rendered per scrape) is the baseline of the fleet figure.

    python -m benchmarks.serving                       # all three, about 8 minutes
    python -m benchmarks.serving --tree /tmp/before    # and the same for another tree
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from .harness import (
    PROMETHEUS_HEADERS,
    REPO,
    Simulator,
    cpu_seconds,
    rss_mib,
    start_exporter,
    stop,
    wait_up,
)

SCRAPERS = 16
RATE = 320.0  # requests per second, all scrapers together


def start(sim: Simulator, tree: Path | None, *extra: str,
          naive: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """An exporter (from ``tree``, default this one) or the naive baseline on ``sim``."""
    return start_exporter(sim, *extra, naive=naive, tree=tree or REPO)


_PACE = """
-- each connection waits {delay} ms after an answer before its next request
function delay()
  return {delay}
end
"""


def paced_scrapers(port: int, seconds: float, path: str = "/metrics",
                   scrapers: int = SCRAPERS, rate: float = RATE) -> dict[str, float]:
    """``scrapers`` keep-alive connections (wrk, 2 threads), each pausing ``scrapers / rate``
    seconds after every answer, so about ``rate`` requests per second in all while answers are
    fast; latency percentiles from wrk (from sending a request to its answer's last byte)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk not found: apt-get install wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_PACE.format(delay=round(scrapers / rate * 1000)))
    command = [wrk, f"-c{scrapers}", f"-t{min(2, scrapers)}", f"-d{seconds:.0f}s", "--latency",
               "--timeout", "5s", "-s", script.name]
    for name, value in PROMETHEUS_HEADERS.items():
        command += ["-H", f"{name}: {value}"]
    try:
        output = subprocess.run([*command, f"http://127.0.0.1:{port}{path}"],
                                capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(script.name)

    def ms(value: str, unit: str) -> float:
        return round(float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit], 3)

    figures: dict[str, float] = {}
    for label in ("50", "90", "99"):
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
        assert match, output
        figures[f"p{label}_ms"] = ms(*match.groups())
    latency = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", output)
    assert latency, output
    figures["max_ms"] = ms(*latency.groups())
    requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    figures["n"] = requests
    figures["errors"] = int(errors.group(1)) if errors else 0
    figures["rate_per_second"] = round(requests / seconds, 1)
    return figures


async def measure_stress(profile: str, trees: dict[str, Path | None], seconds: float) -> dict:
    """/metrics latency under the stress, for each tree in turn on one simulator."""
    sim = Simulator(profile)
    results: dict[str, dict] = {}
    try:
        async with aiohttp.ClientSession() as session:
            for name, tree in trees.items():
                proc, port = start(sim, tree, "--interval", "0.5")
                try:
                    await wait_up(session, port)
                    await asyncio.sleep(3)
                    cpu = cpu_seconds(proc.pid)
                    results[name] = await asyncio.to_thread(paced_scrapers, port, seconds)
                    results[name]["cpu_share"] = round((cpu_seconds(proc.pid) - cpu) / seconds, 3)
                finally:
                    stop(proc)
    finally:
        sim.stop()
    return results


async def measure_probes(trees: dict[str, Path | None], seconds: float) -> dict:
    """/healthz latency from an exporter's start on huge, then with churn."""
    results: dict[str, dict] = {}
    for name, tree in trees.items():
        sim = Simulator("huge", churn_interval=0.5, churn_pods=2)
        try:
            proc, port = start(sim, tree, "--interval", "0.5")
            try:
                async with aiohttp.ClientSession() as session:
                    while True:  # the listener is up before the first refresh starts
                        try:
                            async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                                if r.status == 200:
                                    break
                        except aiohttp.ClientError:
                            await asyncio.sleep(0.002)
                results[name] = await asyncio.to_thread(paced_scrapers, port, seconds,
                                                        "/healthz", 1, 200)
            finally:
                stop(proc)
        finally:
            sim.stop()
    return results


async def measure_fleet(trees: dict[str, Path | None], minutes: float) -> dict:
    """CPU seconds per hour and RSS of a large node at the defaults, two replicas at 15 s;
    every exporter at once, on one simulator (four List calls per 10 s: far below its limit)."""
    sim = Simulator("large")
    procs = {name: start(sim, tree) for name, tree in trees.items()}
    procs["naive"] = start(sim, None, "--interval", "10", naive=True)
    results: dict[str, dict] = {}
    try:
        async with aiohttp.ClientSession() as probe:
            for name, (_, port) in procs.items():
                await wait_up(probe, port, naive=name == "naive")
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            await asyncio.sleep(20)  # warm-up: a first allocatable re-read, pruning
            before = {name: cpu_seconds(proc.pid) for name, (proc, _) in procs.items()}
            started = time.monotonic()
            seconds = minutes * 60

            async def replica(offset: float, port: int) -> None:
                await asyncio.sleep(offset)
                while time.monotonic() - started < seconds:
                    async with session.get(f"http://127.0.0.1:{port}/metrics",
                                           headers=PROMETHEUS_HEADERS) as response:
                        await response.read()
                    await asyncio.sleep(15 - (time.monotonic() - started - offset) % 15)

            await asyncio.gather(*(replica(offset, port) for _, port in procs.values()
                                   for offset in (0.0, 7.5)))
            elapsed = time.monotonic() - started
            for name, (proc, _) in procs.items():
                used = cpu_seconds(proc.pid) - before[name]
                results[name] = {"cpu_seconds_per_hour": round(used / elapsed * 3600, 1),
                                 "rss_mib": round(rss_mib(proc.pid), 1)}
    finally:
        for proc, _ in procs.values():
            stop(proc)
        sim.stop()
    return results


def report(results: dict) -> str:
    lines = [f"{results['date']}; {results['machine']}"]
    for profile, by_tree in results.get("stress", {}).items():
        for name, figures in by_tree.items():
            lines.append(f"stress {profile:6} {name:8} /metrics p50 {figures['p50_ms']} ms, "
                         f"p99 {figures['p99_ms']} ms, max {figures['max_ms']} ms at "
                         f"{figures['rate_per_second']}/s ({figures['errors']} errors), "
                         f"exporter CPU {figures['cpu_share']:.0%}")
    stress = results.get("stress", {})
    if "large" in stress and "small" in stress:
        for name in stress["large"]:
            ratio = stress["large"][name]["p99_ms"] / stress["small"][name]["p99_ms"]
            lines.append(f"stress p99 large / small ({name}): {ratio:.2f}")
    for name, figures in results.get("probes", {}).items():
        lines.append(f"probes huge   {name:8} /healthz p50 {figures['p50_ms']} ms, p99 "
                     f"{figures['p99_ms']} ms, max {figures['max_ms']} ms ({figures['n']})")
    for name, figures in results.get("fleet", {}).items():
        lines.append(f"fleet large   {name:8} {figures['cpu_seconds_per_hour']} CPU s/h, "
                     f"RSS {figures['rss_mib']} MiB")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None,
                        help="another source tree to measure beside this one")
    parser.add_argument("--seconds", type=float, default=30, help="per stress phase")
    parser.add_argument("--fleet-minutes", type=float, default=4)
    parser.add_argument("--only", nargs="+", choices=("stress", "probes", "fleet"),
                        default=["stress", "probes", "fleet"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"this": None}
    if args.tree:
        trees = {"other": args.tree.resolve(), "this": None}
    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
                   f"Python {platform.python_version()}",
    }
    target = args.json or REPO / "benchmarks" / "results" / time.strftime(
        "serving-%Y-%m-%d-%H%M.json")
    target.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every phase: a failing phase keeps the others' figures
        target.write_text(json.dumps(results, indent=2) + "\n")

    if "stress" in args.only:
        results["stress"] = {}
        for profile in ("small", "large"):
            print(f"stress {profile} ...", file=sys.stderr)
            results["stress"][profile] = await measure_stress(profile, trees, args.seconds)
            save()
    if "probes" in args.only:
        print("probes ...", file=sys.stderr)
        results["probes"] = await measure_probes(trees, args.seconds)
        save()
    if "fleet" in args.only:
        print(f"fleet: {args.fleet_minutes} min ...", file=sys.stderr)
        results["fleet"] = await measure_fleet(trees, args.fleet_minutes)
        save()
    print(report(results))
    print(f"JSON: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
