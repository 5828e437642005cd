"""What the fit answers cost per refresh, against the accounting they follow.

For each profile, on the simulator's own assignments: the free capacity per NUMA node, three
shapes held against it and their section of /metrics rendered, against a from-scratch
accounting of the same snapshot. The fit section is recomputed only when the accounting, the
allocatable view, the shapes or the kubelet configuration changed; this is the cost when they
did. Prints a table and writes JSON with ``--json PATH``.

    python -m benchmarks.fit
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from exporter.accounting import account
from exporter.exposition.rendering import render_text
from exporter.fit.engine import Shape, evaluate, free_capacity
from exporter.fit.section import shape_families
from exporter.model import KubeletSnapshot
from exporter.simulator import NodeState, load_profile
from exporter.simulator.sysfs import write_sysfs
from exporter.topology import read_topology

GiB = 1 << 30
SHAPES = (Shape("cpu4-8g", {"cpu": 4, "memory": 8 * GiB}),
          Shape("vf", {"cpu": 1, "intel.com/sriov_netdevice": 1}),
          Shape("big", {"cpu": 16, "hugepages-1Gi": 4 * GiB, "nvidia.com/gpu": 1}))


def measure(profile: str, rounds: int) -> dict[str, float]:
    spec = load_profile(profile)
    state = NodeState(spec)
    with tempfile.TemporaryDirectory() as directory:
        topology = read_topology(write_sysfs(spec, directory))
    snapshot = KubeletSnapshot(tuple(p.assignment for p in state.listed_pods(True)),
                               state.allocatable())
    fit_times, account_times = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        accounting = account(snapshot, topology)
        account_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        free = free_capacity(snapshot, topology, accounting)
        assert free is not None
        render_text(shape_families([evaluate(shape, free) for shape in SHAPES]))
        fit_times.append(time.perf_counter() - started)
    fit_ms = statistics.median(fit_times) * 1000
    account_ms = statistics.median(account_times) * 1000
    return {"pods": len(snapshot.pods), "numa_nodes": len(topology.numa_nodes),
            "fit_ms": round(fit_ms, 2), "accounting_ms": round(account_ms, 2),
            "ratio": round(fit_ms / account_ms, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = {name: measure(name, args.rounds)
               for name in ("small", "dual-socket-gpu", "large", "huge")}
    print(f"{'profile':<16} {'pods':>5} {'NUMA':>4} {'fit ms':>8} {'accounting ms':>14} "
          f"{'fit/accounting':>15}")
    for name, row in results.items():
        print(f"{name:<16} {row['pods']:>5} {row['numa_nodes']:>4} {row['fit_ms']:>8} "
              f"{row['accounting_ms']:>14} {row['ratio']:>15}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
