"""Soak test: the exporter against a misbehaving simulated kubelet, scraped every second.

Runs the real exporter process and the real simulator process (with churn), and for
``--duration`` seconds repeatedly drains the kubelet's quota (rate-limit storms) and restarts the
kubelet, while scraping ``/metrics`` once a second. Prints (and with ``--json`` writes) failed
scrapes, exporter restarts, the maximum snapshot age, the calls the exporter made during each
storm, and the exporter's memory over time with its growth trend.

    python -m benchmarks.soak                  # 10 minutes, dual-socket-gpu profile
    python -m benchmarks.soak --duration 120 --json soak.json

Not part of the test suite: it takes minutes and reports figures rather than asserting them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .harness import REPO, free_port, rss_kib, slope, terminate


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))
        self.socket = self.workdir / "pod-resources" / "kubelet.sock"
        self.sysfs = self.workdir / "sys"
        self.control_port = free_port()
        self.metrics_port = free_port()
        self.exporter: asyncio.subprocess.Process | None = None
        self.simulator: asyncio.subprocess.Process | None = None
        self.exporter_restarts = 0
        self.scrapes = 0
        self.failed_scrapes = 0
        self.max_age = 0.0
        self.storms: list[dict] = []
        self.kubelet_restarts = 0
        self.memory: list[tuple[float, float]] = []
        self.up_zero_scrapes = 0
        self.started = 0.0

    async def start_simulator(self) -> None:
        self.simulator = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "simulate", "--profile", self.args.profile,
            "--socket", str(self.socket), "--sysfs-root", str(self.sysfs),
            "--control-address", f"127.0.0.1:{self.control_port}",
            "--churn-interval", str(self.args.churn_interval), "--churn-pods",
            str(self.args.churn_pods), "--seed", "1", "--log-level", "warning",
            cwd=REPO, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        for _ in range(100):
            if self.socket.exists():
                return
            await asyncio.sleep(0.1)
        raise RuntimeError("simulator did not start")

    async def start_exporter(self) -> None:
        self.log = open(self.workdir / "exporter.log", "ab")  # noqa: SIM115  # the child's log, open while it runs
        self.exporter = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(self.socket),
            "--sysfs-root", str(self.sysfs), "--listen-address", f"127.0.0.1:{self.metrics_port}",
            "--interval", str(self.args.interval), cwd=REPO,
            stdout=asyncio.subprocess.DEVNULL, stderr=self.log)

    async def control(self, session, path: str, body: dict | None = None) -> dict:
        url = f"http://127.0.0.1:{self.control_port}{path}"
        if body is None:
            async with session.get(url) as response:
                return await response.json()
        async with session.post(url, json=body) as response:
            return await response.json()

    @staticmethod
    def total_calls(state: dict) -> int:
        return sum(state["calls"].values())

    async def chaos(self, session) -> None:
        """Storms and restarts on their own schedules, never overlapping."""
        args = self.args
        next_storm = args.storm_every
        next_restart = args.restart_every
        while True:
            elapsed = time.monotonic() - self.started
            if elapsed >= next_storm:
                before = self.total_calls(await self.control(session, "/state"))
                await self.control(session, "/faults", {"rate_limit_storm": True})
                await asyncio.sleep(args.storm_length)
                after = self.total_calls(await self.control(session, "/state"))
                await self.control(session, "/faults", {"rate_limit_storm": False})
                self.storms.append({"at": round(elapsed), "seconds": args.storm_length,
                                    "exporter_calls": after - before})
                next_storm += args.storm_every
            elif elapsed >= next_restart:
                await self.control(session, "/restart", {"downtime": args.restart_downtime})
                self.kubelet_restarts += 1
                await asyncio.sleep(args.restart_downtime + 1)
                next_restart += args.restart_every
            else:
                await asyncio.sleep(0.5)

    async def scrape_once(self, session) -> None:
        self.scrapes += 1
        try:
            async with session.get(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=2)) as response:
                text = await response.text()
                if response.status != 200:
                    self.failed_scrapes += 1
                    return
        except (TimeoutError, aiohttp.ClientError):
            self.failed_scrapes += 1
            return
        values = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in ("podresources_up",
                                   "podresources_last_refresh_timestamp_seconds"):
                    values[sample.name] = sample.value
        last = values.get("podresources_last_refresh_timestamp_seconds", 0.0)
        if last > 0:
            self.max_age = max(self.max_age, time.time() - last)
        if values.get("podresources_up") == 0.0:
            self.up_zero_scrapes += 1

    async def run(self) -> dict:
        from exporter.simulator import load_profile, write_sysfs

        write_sysfs(load_profile(self.args.profile), self.sysfs)
        await self.start_simulator()
        await self.start_exporter()
        self.started = time.monotonic()
        async with aiohttp.ClientSession() as session:
            await asyncio.sleep(2)
            chaos = asyncio.create_task(self.chaos(session))
            try:
                while time.monotonic() - self.started < self.args.duration:
                    tick = time.monotonic()
                    if self.exporter.returncode is not None:
                        self.exporter_restarts += 1
                        await self.start_exporter()
                    await self.scrape_once(session)
                    rss = rss_kib(self.exporter.pid)
                    if rss is not None:
                        self.memory.append((tick - self.started, rss))
                    await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            finally:
                chaos.cancel()
                await asyncio.gather(chaos, return_exceptions=True)
        return self.report()

    def report(self) -> dict:
        warm = [kib for t, kib in self.memory if t >= min(60, self.args.duration / 5)]
        second_half = [(t, kib) for t, kib in self.memory if t >= self.args.duration / 2]
        storm_calls = [s["exporter_calls"] for s in self.storms]
        return {
            "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                       f"{platform.python_version()}",
            "profile": self.args.profile,
            "duration_seconds": self.args.duration,
            "interval_seconds": self.args.interval,
            "scrapes": self.scrapes,
            "failed_scrapes": self.failed_scrapes,
            "exporter_restarts": self.exporter_restarts,
            "scrapes_with_up_0": self.up_zero_scrapes,
            "max_snapshot_age_seconds": round(self.max_age, 1),
            "kubelet_restarts": self.kubelet_restarts,
            "storms": len(self.storms),
            "storm_seconds": self.args.storm_length,
            "exporter_calls_per_storm_max": max(storm_calls, default=0),
            "exporter_calls_per_storm_mean": round(statistics.fmean(storm_calls), 1)
            if storm_calls else 0,
            "rss_kib_after_warmup": warm[0] if warm else None,
            "rss_kib_at_end": self.memory[-1][1] if self.memory else None,
            "rss_kib_max": max((kib for _, kib in self.memory), default=None),
            "rss_trend_kib_per_hour_second_half": round(slope(second_half) * 3600, 1),
        }

    async def stop(self) -> None:
        await terminate((self.exporter, self.simulator))
        shutil.rmtree(self.workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600, help="seconds (default: 600)")
    parser.add_argument("--profile", default="dual-socket-gpu")
    parser.add_argument("--interval", type=float, default=5.0, help="exporter --interval")
    parser.add_argument("--churn-interval", type=float, default=5.0)
    parser.add_argument("--churn-pods", type=int, default=2)
    parser.add_argument("--storm-every", type=float, default=90.0)
    parser.add_argument("--storm-length", type=float, default=20.0)
    parser.add_argument("--restart-every", type=float, default=60.0)
    parser.add_argument("--restart-downtime", type=float, default=5.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    soak = Soak(args)

    async def run() -> dict:
        try:
            return await soak.run()
        finally:
            await soak.stop()

    report = asyncio.run(run())
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key.ljust(width)}  {value}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
