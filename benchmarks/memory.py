"""Where the exporter's memory goes: imports, threads, the running process, the refresh's caches.

* **imports**: a fresh interpreter imports what a default run loads, one step at a time, and
  reports its RSS after each, split into anonymous memory (objects, bytecode, heaps) and
  file-backed pages (shared libraries' code as mapped), and its thread count. The CA bundle
  row is the difference made by aiohttp's two default client TLS contexts, which load the
  system's CA file at import unless imported as the exporter imports it
  (``exporter.web.clienttls``): the same imports with ``SSL_CERT_FILE`` naming no file.
* **threads**: what the gRPC channel starts (no thread runs before it).
* **process**: a real exporter on the profile after warm-up (``--interval 1
  --allocatable-interval 6``, 8 s, then 20 scrapes 1 s apart): RSS, anonymous and file-backed,
  the largest mappings, the threads by name; as the image runs it (``MALLOC_ARENA_MAX=2``) and
  with glibc's default arenas, alternating, ``--runs`` times each.
* **caches**: the Python objects the refresh keeps on the profile (tracemalloc, in this
  process): 20 steady replies and 5 with a pod replaced, through the pipeline and the bodies.

File-backed pages count in RSS as far as they are mapped: a shared library's code is mapped
page by page as it runs, and the kernel maps the neighbours of a touched page that are in the
page cache with it. gRPC's core (``cygrpc``, a 17 MB file) therefore shows 6 to 13 MiB after the
same import, depending on how much of the file the page cache holds (all of it right after
the package was installed or read). Compare figures of one run.

    python -m benchmarks.memory                      # large, about 3 minutes
    python -m benchmarks.memory --profile huge --runs 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tracemalloc
import types
from pathlib import Path

import aiohttp

from exporter.exposition.bodies import Exposition, Section
from exporter.kubelet.client import KubeletClient
from exporter.kubelet.decode import Replies
from exporter.refresh.pipeline import Pipeline
from exporter.topology import read_topology

from .harness import (
    IMAGE_ENVIRONMENT,
    REPO,
    Simulator,
    compile_bytecode,
    print_and_save,
    scrape,
    start_exporter,
    stop as stop_process,
    wait_up,
)

# What a default run imports, in the order the command loads it, as (row, statements).
IMPORT_STEPS = (
    ("socket, select, selectors", "import socket, select, selectors"),
    ("ssl (OpenSSL)", "import ssl"),
    ("concurrent.futures, threading", "import concurrent.futures"),
    ("asyncio's own modules", "import asyncio"),
    ("protobuf, the podresources API", "from exporter._proto.v1 import api_pb2"),
    ("grpc, grpc.aio", "import grpc, grpc.aio"),
    ("aiohttp (client side; no CA bundle: web/clienttls)", "import exporter.web.clienttls"),
    ("aiohttp.web", "import aiohttp.web"),
    ("the exporter's modules", "import exporter.cli, exporter.commands.serve, "
                               "exporter.refresh.loop, exporter.web.server"),
)

_IMPORT_PROBE = """
import json, os, sys
def figures():
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    kib = lambda key: int(status[key].split()[0])
    return {"rss": kib("VmRSS") / 1024, "anon": kib("RssAnon") / 1024,
            "file": kib("RssFile") / 1024, "threads": len(os.listdir("/proc/self/task"))}
rows = [("the interpreter", figures())]
for name, statement in json.loads(sys.argv[1]):
    exec(statement)
    rows.append((name, figures()))
print(json.dumps(rows))
"""


def import_rows(environment: dict[str, str] | None = None) -> list[tuple[str, dict]]:
    done = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, json.dumps(IMPORT_STEPS)],
                          cwd=REPO, env={**os.environ, **(environment or {})},
                          capture_output=True, text=True, check=True)
    return [tuple(row) for row in json.loads(done.stdout)]  # type: ignore[misc]


def measure_imports() -> dict:
    compile_bytecode(REPO)  # as installed: the modules' bytecode on disk
    rows = import_rows()
    without_ca = import_rows({"SSL_CERT_FILE": "/nonexistent"})
    ca_bundle = [a[1]["rss"] - b[1]["rss"] for a, b in zip(rows, without_ca)][-1]
    return {"imports": [{"imported": name, **{k: round(v, 2) for k, v in f.items()}}
                        for name, f in rows],
            "ca_bundle_mib": round(ca_bundle, 2)}


# ---- threads and the running process --------------------------------------------------------

def threads(pid: int | str = "self") -> list[str]:
    names = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")):
        names.append(Path(f"/proc/{pid}/task/{task}/comm").read_text().strip())
    return names


async def measure_channel_threads(sim: Simulator) -> dict:
    client = KubeletClient(str(sim.socket))
    try:
        await client.list_pods()
        started = threads()
    finally:
        await client.close()
    return {"threads_after_first_call": started}


def mappings(pid: int) -> list[tuple[str, float]]:
    """RSS (MiB) per mapped file, anonymous memory and the heap, largest first."""
    totals: dict[str, int] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            name = os.path.basename(fields[5]) if len(fields) > 5 else "[anon]"
        elif fields and fields[0] == "Rss:":
            totals[name] = totals.get(name, 0) + int(fields[1])
    return sorted(((n, kib / 1024) for n, kib in totals.items()), key=lambda item: -item[1])


def status_mib(pid: int) -> dict[str, float]:
    wanted = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"}
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in wanted:
            figures[wanted[key]] = round(int(line.split()[1]) / 1024, 1)
    return figures


async def process_figures(sim: Simulator, session: aiohttp.ClientSession,
                          environment: dict[str, str]) -> dict:
    proc, port = start_exporter(sim, "--interval", "1", "--allocatable-interval", "6",
                                environment=environment)
    try:
        await wait_up(session, port)
        await asyncio.sleep(8)
        for _ in range(20):
            await scrape(session, port)
            await asyncio.sleep(1)
        return {**status_mib(proc.pid), "threads": threads(proc.pid),
                "mappings": [(n, round(m, 2)) for n, m in mappings(proc.pid)[:8]]}
    finally:
        stop_process(proc)


async def measure_process(sim: Simulator, runs: int) -> dict:
    variants = {"as the image": IMAGE_ENVIRONMENT, "default arenas": {}}
    measured: dict[str, list[dict]] = {name: [] for name in variants}
    async with aiohttp.ClientSession() as session:
        for _ in range(runs):
            for name, environment in variants.items():
                measured[name].append(await process_figures(sim, session, environment))
    result = {}
    for name, runs_of in measured.items():
        result[name] = {**runs_of[-1], **{key: statistics.median(r[key] for r in runs_of)
                                          for key in ("rss", "anon", "file")}}
    return result


# ---- the refresh's caches ---------------------------------------------------------------------

def deep_size(root: object, seen: set[int]) -> int:
    """Bytes of the objects reachable from ``root`` and not in ``seen`` (which it extends)."""
    total, stack = 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or callable(obj) or isinstance(obj, types.ModuleType):
            continue  # code (classes, functions, methods, their modules), not data
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


async def measure_caches(sim: Simulator) -> dict:
    client = KubeletClient(str(sim.socket))
    steady, churned = [], []
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(20):
                steady.append((await client.list_pods()).raw)
                await asyncio.sleep(0.015)  # under the kubelet's 100 calls/s
            allocatable = (await client.get_allocatable()).raw
            for _ in range(5):
                await sim.control(session, "/churn", {"pods": 1})
                churned.append((await client.list_pods()).raw)
    finally:
        await client.close()
    topology = read_topology(sim.sysfs)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    pipeline, exposition, accounting = Pipeline(), Exposition(), None
    for raw in [*steady, *churned, *steady[-3:]]:
        result = pipeline.run(Replies(raw, "v1", allocatable), topology)
        if result.accounting is not accounting:
            accounting = result.accounting
            exposition.update(data=Section.of(result.section))
    del result, accounting
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    seen: set[int] = set()
    for outside in (topology, allocatable, *steady, *churned):  # the replies are not kept
        deep_size(outside, seen)
    parts = {"the pods (decoded)": pipeline.pods(steady[-1]),
             "the decoders' caches, the allocatable resources":
                 (pipeline._decoders, pipeline._allocatable_decoder),
             "the ledger (each pod's figures, the aggregates)": pipeline._ledger,
             "the renderer (each pod's blocks)": pipeline._renderer,
             "the data section and its deflated copy": exposition}
    return {"traced_mib": round(traced / 2**20, 2),
            "parts_mib": {name: round(deep_size(obj, seen) / 2**20, 2)
                          for name, obj in parts.items()}}


async def measure(profile: str, runs: int) -> dict:
    result: dict = {"profile": profile, **measure_imports()}
    sim = Simulator(profile)
    try:
        result["channel"] = await measure_channel_threads(sim)
        result["process"] = await measure_process(sim, runs)
        result["caches"] = await measure_caches(sim)
    finally:
        sim.stop()
    return result


def report(result: dict) -> str:
    lines = ["Imports (a fresh interpreter, RSS after each step):",
             f"  {'imported':36} {'RSS':>6} {'added':>6} {'anon':>6} {'file':>6} threads"]
    previous = None
    for row in result["imports"]:
        added = "" if previous is None else f"{row['rss'] - previous:+.1f}"
        lines.append(f"  {row['imported']:36} {row['rss']:6.1f} {added:>6} {row['anon']:6.1f} "
                     f"{row['file']:6.1f} {row['threads']:3d}")
        previous = row["rss"]
    lines.append(f"  the CA bundle still loaded at import (SSL_CERT_FILE naming no file saves): "
                 f"{result['ca_bundle_mib']:.1f} MiB")
    started = result["channel"]["threads_after_first_call"]
    lines.append(f"Threads once the gRPC channel made a call: {len(started)}: {started}")
    lines.append(f"Exporter on {result['profile']} after warm-up (MiB, median):")
    for name, figures in result["process"].items():
        lines.append(f"  {name:16} RSS {figures['rss']:5.1f}  anon {figures['anon']:5.1f}  "
                     f"file {figures['file']:5.1f}  {len(figures['threads'])} threads")
        lines.append("    " + ", ".join(f"{n} {m}" for n, m in figures["mappings"]))
    caches = result["caches"]
    lines.append(f"Refresh caches on {result['profile']} (tracemalloc): {caches['traced_mib']} MiB")
    for name, mib in caches["parts_mib"].items():
        lines.append(f"  {mib:5.2f}  {name}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="large", help="the simulator's profile")
    parser.add_argument("--runs", type=int, default=2,
                        help="exporter processes per allocator setting (median)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()
    result = await measure(args.profile, args.runs)
    return print_and_save(report(result), result, args.json)

if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
