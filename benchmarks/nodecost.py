"""What a node pays for the exporter: the whole process's CPU per refresh, where it goes, and
the time from process start to the first complete scrape.

* **process CPU per refresh**: a real exporter (as the image runs it) on the profile,
  refreshing every ``INTERVAL`` s (``GetAllocatableResources`` every ``ALLOCATABLE_INTERVAL``
  s: the defaults' 1 : 6), never scraped while measured; its CPU time from
  ``/proc/<pid>/stat`` over a window divided by the ``List`` calls the simulator answered it
  in that window. Steady, and with a pod replaced every ``INTERVAL`` s (the simulator's own
  churn, so about one changed pod per refresh); without and with the four shapes of
  ``benchmarks/fit.py``; and idle (``--interval 3600``): CPU per second with no refresh. Each
  thread's share from ``/proc/<pid>/task/*/schedstat`` (nanoseconds): the event loop (the
  main thread), gRPC's own threads (``event_engine``, ``grpc_global_timer``, ...), the other
  Python threads (the refresh worker, ``grpc.aio``'s poller).
* **the breakdown**, measured in this process on the same simulator: the ``List`` call over
  gRPC (this process's CPU, every thread, over calls spaced as the refresh spaces them, less
  the same window idle), and a ``Get`` of one pod (a reply of a few hundred bytes: the share
  of a call that does not grow with its reply), one hand-off to the refresh worker and back,
  the health section rendered and deflated, the periodic sysfs re-read and
  ``GetAllocatableResources`` (per refresh: one in six), and the idle rate over one
  interval; beside the in-process pipeline of ``benchmarks.run`` (decode, accounting,
  rendering). What is left is the event loop's own
  work (tasks, timers, the sections' assembly), unexplained by the pieces.
* **first scrape**: process start (``exec``) to the first ``/metrics`` with
  ``podresources_up 1`` — with the four shapes, to the first one with their answers — polled
  every 10 ms; and to the first HTTP answer of any kind (the listener up).

    python -m benchmarks.nodecost                 # large, about 4 minutes
    python -m benchmarks.nodecost --window 10 --profile huge
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from exporter._proto.v1 import api_pb2 as v1
from exporter.exposition.bodies import Section
from exporter.exposition.health import Health
from exporter.kubelet.client import KubeletClient
from exporter.kubelet.reader import first_pod
from exporter.kubelet.status import KubeletStatus
from exporter.refresh.worker import Worker
from exporter.topology import read_numa_nodes

from .fit import SHAPES_FILE
from .harness import (
    REPO,
    Simulator,
    compile_bytecode,
    cpu_seconds,
    print_and_save,
    start_exporter,
    stop,
)

INTERVAL = 0.5
ALLOCATABLE_INTERVAL = 3.0
LIST = "/v1.PodResourcesLister/List OK"


# ---- a real exporter's CPU --------------------------------------------------------------------

def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per group of the process's threads, from each thread's schedstat."""
    groups: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            seconds = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
        if task.name == str(pid):
            group = "event loop (main thread)"
        elif name.startswith(("python", "asyncio")):
            group = "other Python threads (refresh worker, gRPC poller)"
        else:
            group = "gRPC's own threads"
        groups[group] = groups.get(group, 0.0) + seconds
    return groups


async def list_calls(sim: Simulator, session: aiohttp.ClientSession) -> int:
    return int((await sim.control(session, "/state"))["calls"].get(LIST, 0))


async def up(session: aiohttp.ClientSession, port: int, want: bytes = b"") -> bool:
    """Whether /metrics answers with podresources_up 1 (and ``want`` in it)."""
    try:
        async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
            body = await response.read()
    except aiohttp.ClientError:
        return False
    return b"\npodresources_up 1.0\n" in body and want in body


async def process_cpu(profile: str, window: float, shapes: Path | None, churn: bool,
                      idle: bool = False, probe: Path | None = None) -> dict:
    """One exporter's CPU per refresh (or per second, ``idle``) over ``window`` seconds; with
    ``probe``, run under ``benchmarks.probe``, its parts per refresh too."""
    sim = Simulator(profile, churn_interval=INTERVAL if churn else None)
    interval = "3600" if idle else str(INTERVAL)
    extra = ["--interval", interval, "--allocatable-interval", str(ALLOCATABLE_INTERVAL)]
    if shapes is not None:
        extra += ["--fit-shapes", str(shapes)]
    proc, port = start_exporter(sim, *extra, probe=probe)
    probed: list[dict] = []
    try:
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 120
            while not await up(session, port):
                if time.monotonic() > deadline:
                    raise RuntimeError("exporter did not come up")
                await asyncio.sleep(0.1)
            await asyncio.sleep(4 * ALLOCATABLE_INTERVAL)  # past the cold start and its freeze
            if probe is not None:
                probed.append(await probe_figures(proc, probe))
            calls, cpu, threads = (await list_calls(sim, session), cpu_seconds(proc.pid),
                                   thread_cpu(proc.pid))
            started = time.monotonic()
            await asyncio.sleep(window)
            calls = await list_calls(sim, session) - calls
            used, elapsed = cpu_seconds(proc.pid) - cpu, time.monotonic() - started
            after = thread_cpu(proc.pid)
            if probe is not None:
                probed.append(await probe_figures(proc, probe))
    finally:
        stop(proc)
        sim.stop()
    per = elapsed if idle else max(calls, 1)
    result = {"refreshes": calls, "seconds": round(elapsed, 1),
              "cpu_ms": round(used / per * 1000, 3),
              "threads_ms": {group: round((after[group] - threads.get(group, 0.0)) / per * 1000,
                                          3) for group in sorted(after)}}
    if probed:
        before, now = probed
        result["parts"] = {
            label: {"calls_per_refresh": round((spent[0] - before["parts"][label][0]) / per, 2),
                    "ms": round((spent[1] - before["parts"][label][1]) / per * 1000, 3)}
            for label, spent in now["parts"].items()}
        result["probe_cpu_ms"] = round((now["process_cpu"] - before["process_cpu"]) / per * 1000,
                                       3)
    return result


async def probe_figures(proc: subprocess.Popen, path: Path) -> dict:
    """What ``benchmarks.probe`` has counted so far (it writes on SIGUSR1)."""
    path.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    for _ in range(500):
        await asyncio.sleep(0.01)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    raise RuntimeError("benchmarks.probe wrote no figures")


# ---- the pieces, in this process ---------------------------------------------------------------

async def cpu_per_call(call: Callable[[], Awaitable[object]], count: int, gap: float) -> float:
    """CPU ms of this process per ``call``, spaced by ``gap`` s, less the same window idle."""
    started = time.process_time()
    for _ in range(count):
        await call()
        await asyncio.sleep(gap)
    busy = time.process_time() - started
    started = time.process_time()
    for _ in range(count):
        await asyncio.sleep(gap)
    return (busy - (time.process_time() - started)) / count * 1000


def cpu_ms(function: Callable[[], object], count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        function()
    return (time.process_time() - started) / count * 1000


async def pieces(profile: str, rounds: int) -> dict:
    """The parts of a refresh outside the pipeline, each measured on its own (CPU ms)."""
    sim = Simulator(profile)
    try:
        client = KubeletClient(str(sim.socket))
        try:
            raw = (await client.list_pods()).raw
            pod = first_pod(raw) or ("default", "none")
            figures = {
                "bare decode": min(cpu_ms(lambda: v1.ListPodResourcesResponse.FromString(raw), 5)
                                   for _ in range(5)),
                "List over gRPC": statistics.median(
                    [await cpu_per_call(client.list_pods, rounds, 0.05) for _ in range(3)]),
                # a reply of one pod: what a call costs whatever the reply's size
                "Get of one pod over gRPC (a call's fixed cost)": statistics.median(
                    [await cpu_per_call(lambda: client.get_pod(*pod), rounds, 0.05)
                     for _ in range(3)]),
                "GetAllocatableResources over gRPC, per refresh": statistics.median(
                    [await cpu_per_call(client.get_allocatable, rounds // 2, 0.05)
                     for _ in range(3)]) * INTERVAL / ALLOCATABLE_INTERVAL,
            }
        finally:
            await client.close()
        worker = Worker()
        await worker.run(lambda: None)  # the thread started
        figures["one hand-off to the worker thread and back"] = statistics.median(
            [await cpu_per_call(lambda: worker.run(lambda: None), rounds, 0.002)
             for _ in range(3)])
        health, status = Health("bench"), KubeletStatus()
        figures["health section rendered and deflated (one scrape, OpenMetrics)"] = min(
            cpu_ms(lambda: Section.of(health.render(True, status), 3), rounds)
            for _ in range(3))
        figures["sysfs re-read, per refresh"] = min(
            cpu_ms(lambda: read_numa_nodes(sim.sysfs), 10) for _ in range(3)
        ) * INTERVAL / ALLOCATABLE_INTERVAL
    finally:
        sim.stop()
    return {name: round(value, 4) for name, value in figures.items()}


# ---- the first scrape --------------------------------------------------------------------------

async def first_scrape(profile: str, shapes: Path | None) -> dict:
    """Seconds from the exporter's start to its listener and to its first complete /metrics."""
    sim = Simulator(profile)
    extra = ["--fit-shapes", str(shapes)] if shapes is not None else []
    want = b"podresources_shape_capacity{" if shapes is not None else b""
    compile_bytecode(REPO)  # as the image has it, and not in the time measured
    try:
        async with aiohttp.ClientSession() as session:
            started = time.monotonic()
            proc, port = start_exporter(sim, *extra)
            listening = None
            try:
                while time.monotonic() - started < 120:
                    if await up(session, port, want):
                        break
                    if listening is None:
                        try:
                            async with session.get(f"http://127.0.0.1:{port}/healthz"):
                                listening = time.monotonic() - started
                        except aiohttp.ClientError:
                            pass
                    await asyncio.sleep(0.01)
                complete = time.monotonic() - started
                cpu = cpu_seconds(proc.pid)
            finally:
                stop(proc)
    finally:
        sim.stop()
    return {"listening_s": round(listening or complete, 3), "first_scrape_s": round(complete, 3),
            "cpu_s": round(cpu, 3)}


# ---- all of it ---------------------------------------------------------------------------------

PARTS = ("process", "probe", "idle", "pieces", "first")


async def measure(profile: str, window: float, parts: tuple[str, ...] = PARTS, rounds: int = 40,
                  starts: int = 3) -> dict:
    """Process CPU per refresh (four variants), the probed breakdown, idle, the pieces alone,
    the first scrape (``parts``: which of them)."""
    result: dict = {"profile": profile, "interval_s": INTERVAL,
                    "allocatable_interval_s": ALLOCATABLE_INTERVAL}
    with tempfile.TemporaryDirectory(prefix="bench-nodecost-") as directory:
        shapes = Path(directory) / "shapes.yaml"
        shapes.write_text(SHAPES_FILE)
        variants = (("steady", False, False), ("steady_shapes", True, False),
                    ("churn", False, True), ("churn_shapes", True, True))
        for name, with_shapes, churn in variants if "process" in parts else ():
            print(f"[{profile}] process CPU per refresh: {name} ...", file=sys.stderr)
            result[f"process_{name}"] = await process_cpu(
                profile, window, shapes if with_shapes else None, churn)
        if "probe" in parts:
            print(f"[{profile}] steady_shapes under benchmarks.probe ...", file=sys.stderr)
            result["probed_steady_shapes"] = await process_cpu(
                profile, window, shapes, False, probe=Path(directory) / "probe.json")
        if "idle" in parts:
            print(f"[{profile}] idle process ...", file=sys.stderr)
            result["process_idle"] = await process_cpu(profile, window, None, False, idle=True)
        if "pieces" in parts:
            print(f"[{profile}] the pieces of a refresh ...", file=sys.stderr)
            result["pieces_ms"] = await pieces(profile, rounds)
        if "first" in parts:
            print(f"[{profile}] first scrape ...", file=sys.stderr)
            for name, given in (("first_scrape", None), ("first_scrape_shapes", shapes)):
                runs = [await first_scrape(profile, given) for _ in range(starts)]
                result[name] = {key: sorted(r[key] for r in runs) for key in runs[0]}
    return result


def breakdown(result: dict) -> list[tuple[str, float]]:
    """Where a steady refresh with shapes goes in the real process (``benchmarks.probe``),
    as (what, ms per refresh) rows; nested parts are indented."""
    probed = result["probed_steady_shapes"]
    plain = result.get("process_steady_shapes", {}).get("cpu_ms")
    rows = [("the whole process, under the probe"
             + (f" ({plain:.2f} ms without it)" if plain is not None else ""), probed["cpu_ms"])]
    for label, figures in probed["parts"].items():
        rows.append((f"  {label}, {figures['calls_per_refresh']:g} per refresh", figures["ms"]))
    idle_rate = result.get("process_idle", {}).get("cpu_ms", 0.0)
    idle = idle_rate * INTERVAL
    rows.append((f"  idle over {INTERVAL} s: timers, gRPC's threads ({idle_rate:.2f} ms/s)",
                 idle))
    whole = probed["parts"].get("the refresh, whole (all threads)", {}).get("ms", 0.0)
    rows.append(("  outside the refresh, less idle (the loop's waits, polled sources)",
                 probed["cpu_ms"] - whole - idle))
    return [(name, round(value, 3)) for name, value in rows]


def report(result: dict) -> str:
    """What was measured, as text (the parts not measured are left out)."""
    bare = result.get("pieces_ms", {}).get("bare decode", float("nan"))
    lines = [f"What the node pays on {result['profile']} (refresh every {INTERVAL} s, "
             f"allocatable every {ALLOCATABLE_INTERVAL} s, no scrapes); bare decode "
             f"{bare:.3f} ms:"]
    for name in ("steady", "steady_shapes", "churn", "churn_shapes", "probed_steady_shapes"):
        figures = result.get(f"process_{name}", result.get(name))
        if figures is None:
            continue
        lines.append(f"  {name:14} {figures['cpu_ms']:7.2f} ms per refresh "
                     f"({figures['cpu_ms'] / bare:5.1f} x bare decode) over "
                     f"{figures['refreshes']} refreshes: "
                     + ", ".join(f"{g} {v:.2f}" for g, v in figures["threads_ms"].items()))
    if "process_idle" in result:
        idle = result["process_idle"]
        lines.append(f"  idle           {idle['cpu_ms']:7.2f} ms per second: "
                     + ", ".join(f"{g} {v:.2f}" for g, v in idle["threads_ms"].items()))
    if "probed_steady_shapes" in result:
        lines.append("Where a steady refresh with four shapes goes (ms per refresh):")
        lines += [f"  {value:8.3f}  {name}" for name, value in breakdown(result)]
    if "pieces_ms" in result:
        lines.append("The same pieces alone, in this process (warm caches, ms):")
        lines += [f"  {value:8.3f}  {name}" for name, value in result["pieces_ms"].items()]
    for name, title in (("first_scrape", "without shapes"), ("first_scrape_shapes",
                                                              "with four shapes")):
        if name not in result:
            continue
        figures = result[name]
        lines.append(f"First complete /metrics {title}: " + ", ".join(
            f"{v:.2f}" for v in figures["first_scrape_s"]) + " s (listener up: " + ", ".join(
            f"{v:.2f}" for v in figures["listening_s"]) + " s; the exporter's CPU by then: "
            + ", ".join(f"{v:.2f}" for v in figures["cpu_s"]) + " s)")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="large")
    parser.add_argument("--window", type=float, default=30.0,
                        help="seconds each exporter is measured for (default 30)")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS,
                        help="measure only these parts")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()
    result = await measure(args.profile, args.window, tuple(args.only))
    return print_and_save(report(result), result, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
