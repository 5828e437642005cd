"""What the benchmark scripts share: the simulator and exporter processes, scraping, and reading
a process's memory and CPU from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The environment the image (Dockerfile) gives the exporter that changes what it costs: glibc
# malloc limited to two arenas. Exporters are measured as the image runs them.
IMAGE_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int | None:
    """Resident memory of a process, from /proc; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points; 0 with fewer than three."""
    if len(points) < 3:
        return 0.0
    xs, ys = zip(*points)
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    denominator = sum((x - mean_x) ** 2 for x in xs)
    if denominator == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / denominator


async def terminate(processes: Iterable[asyncio.subprocess.Process | None]) -> None:
    """SIGTERM each process still running, SIGKILL after 10 s without an exit."""
    for proc in processes:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()


def rss_mib(pid: int) -> float:
    kib = rss_kib(pid)
    return float("nan") if kib is None else kib / 1024


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Simulator:
    """A simulator process with its control endpoint, socket, sysfs tree and state files."""

    def __init__(self, profile: str, churn_interval: float | None = None, churn_pods: int = 1,
                 pods_api: bool = False):
        self.profile = profile
        self.dir = Path(tempfile.mkdtemp(prefix="bench-", dir="/tmp"))
        self.socket = self.dir / "pod-resources" / "kubelet.sock"
        self.pods_api_socket = self.dir / "pods-api" / "pods-api.sock"  # served with pods_api
        self.sysfs = self.dir / "sys"
        self.state_dir = self.dir / "kubelet"
        self.control_port = free_port()
        args = [sys.executable, "-m", "exporter", "simulate", "--profile", profile,
                "--socket", str(self.socket), "--sysfs-root", str(self.sysfs),
                "--control-address", f"127.0.0.1:{self.control_port}",
                "--state-dir", str(self.state_dir), "--seed", "1", "--log-level", "warning"]
        if churn_interval:
            args += ["--churn-interval", str(churn_interval), "--churn-pods", str(churn_pods)]
        if pods_api:
            args += ["--pods-api-socket", str(self.pods_api_socket)]
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not (self.socket.exists() and (self.state_dir / "cpu_manager_state").exists()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"simulator for {profile} did not start")
            time.sleep(0.1)

    async def control(self, session, path: str, body: dict | None = None) -> dict:
        url = f"http://127.0.0.1:{self.control_port}{path}"
        method = session.get if body is None else session.post
        kwargs = {} if body is None else {"json": body}
        async with method(url, **kwargs) as response:
            return await response.json()

    def stop(self) -> None:
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


_COMPILED: set[Path] = set()


def compile_bytecode(tree: Path) -> None:
    """Compile the tree's modules once, as the image's install does: without bytecode on disk
    (``PYTHONDONTWRITEBYTECODE``, a read-only tree) every start compiles them in memory,
    which leaves about 1 MiB more RSS than loading them."""
    if tree not in _COMPILED:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "exporter"),
                        str(tree / "benchmarks")], check=True, stdout=subprocess.DEVNULL)
        _COMPILED.add(tree)


def start_exporter(sim: Simulator, *extra: str, naive: bool = False, tree: Path = REPO,
                   environment: dict[str, str] = IMAGE_ENVIRONMENT, probe: Path | None = None,
                   ) -> tuple[subprocess.Popen, int]:
    """The exporter of source tree ``tree`` (default this one), or the naive design, with
    ``environment`` added to this process's (default: the image's); with ``probe``, under
    ``benchmarks.probe`` writing its figures there."""
    port = free_port()
    if naive:  # always this tree's
        args, tree = [sys.executable, "-m", "benchmarks.naive"], REPO
    elif probe is not None:
        args, tree = [sys.executable, "-m", "benchmarks.probe", str(probe), "--log-level",
                      "warning"], REPO
    else:
        args = [sys.executable, "-m", "exporter", "--log-level", "warning"]
    compile_bytecode(tree)
    args += ["--socket", str(sim.socket), "--sysfs-root", str(sim.sysfs),
             "--listen-address", f"127.0.0.1:{port}", *extra]
    proc = subprocess.Popen(args, cwd=tree,
                            env={**os.environ, **environment, "PYTHONPATH": str(tree)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def stop(proc: subprocess.Popen, grace: float = 20) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (a Prometheus flushing its head needs
    longer than an exporter)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def scrape(session, port: int) -> dict[tuple, float]:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def wait_up(session, port: int, naive: bool = False, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            samples = await scrape(session, port)
            if naive and any(k[0] == "podresources_numa_node_cpus" for k in samples):
                return samples
            if samples.get(("podresources_up", ())) == 1.0:
                return samples
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("exporter did not come up")
        await asyncio.sleep(0.25)


def series_count(samples: dict) -> int:
    return len(samples)


def print_and_save(report: str, result: dict, path: Path | None) -> int:
    """A script's last step: its report printed, its figures written as JSON to ``path``."""
    print(report)
    if path is not None:
        path.write_text(json.dumps(result, indent=2) + "\n")
    return 0
