"""What the fit answers cost per refresh, against the accounting they follow.

For each profile, on the simulator's own assignments, under each Topology Manager policy and
scope:

* from scratch: the resource managers' state built from the snapshot, four shapes admitted
  against it (each with its per-NUMA fits and its capacity, at most ``CAPACITY_CAP`` copies)
  and their section of /metrics rendered, against a from-scratch accounting of the same
  snapshot;
* a change: one pod replaced (the simulator's churn), then the same answers the way the fit
  view recomputes them, with the state kept from the previous snapshot
  (:class:`~exporter.fit.state.incremental.ManagersStateCache`) and each NUMA node's count of copies
  kept (:class:`~exporter.fit.capacity.NodeCounts`), against the accounting's ledger applying the
  same change.

The fit section is recomputed only when the accounting, the allocatable view, the shapes or the
kubelet configuration changed. Prints a table and writes JSON with ``--json PATH``.

    python -m benchmarks.fit
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import yaml

from exporter.accounting import Ledger, account
from exporter.exposition.rendering import render_text
from exporter.fit.answers import CAPACITY_CAP, answer, numa_free_series
from exporter.fit.capacity import NodeCounts
from exporter.fit.fitview import shape_families
from exporter.fit.kubelet.config import Rules
from exporter.fit.shapes import parse_shapes
from exporter.fit.state.from_snapshot import node_state
from exporter.fit.state.incremental import ManagersStateCache
from exporter.model import KubeletSnapshot, Topology
from exporter.simulator import SimulatedNode, load_profile
from exporter.simulator.node.sysfs import write_sysfs
from exporter.topology import read_topology

# the four shapes as a --fit-shapes file (benchmarks.run configures them on the refresh)
SHAPES_FILE = """\
shapes:
  cpu4-8g: {cpu: 4, memory: 8Gi}
  vf: {cpu: 1, intel.com/sriov_netdevice: 1}
  big: {cpu: 16, hugepages-1Gi: 4Gi, nvidia.com/gpu: 1}
  pair:
    qos: Burstable
    containers:
      - {name: rx, cpu: 500m, intel.com/sriov_netdevice: 2}
      - {name: tx, cpu: 500m, intel.com/sriov_netdevice: 2}
"""
SHAPES = parse_shapes(yaml.safe_load(SHAPES_FILE))
RULES = {"single-numa-node/container": Rules("single-numa-node", "container"),
         "restricted/pod": Rules("restricted", "pod"),
         "best-effort/container": Rules("best-effort", "container")}


def measure(profile: str, rounds: int, rules: Rules) -> dict[str, float]:
    spec = load_profile(profile)
    state = SimulatedNode(spec)
    with tempfile.TemporaryDirectory() as directory:
        topology = read_topology(write_sysfs(spec, directory))
    snapshot = KubeletSnapshot(tuple(p.assignment for p in state.listed_pods(True)),
                               state.allocatable())
    fit_times, account_times = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        account(snapshot, topology)
        account_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        state = node_state(snapshot, topology, True, True)
        assert state is not None
        numa_free_series(state)
        answers = [answer(shape, state, rules) for shape in SHAPES]
        render_text(shape_families(answers))
        fit_times.append(time.perf_counter() - started)
    fit_ms = statistics.median(fit_times) * 1000
    account_ms = statistics.median(account_times) * 1000
    change_ms, ledger_ms = measure_changes(SimulatedNode(spec), topology, rules, rounds)
    return {"pods": len(snapshot.pods), "numa_nodes": len(topology.numa_nodes),
            "fit_ms": round(fit_ms, 2), "accounting_ms": round(account_ms, 2),
            "ratio": round(fit_ms / account_ms, 3),
            "change_fit_ms": round(change_ms, 2), "change_ledger_ms": round(ledger_ms, 2),
            "capacities": {a.shape.name: a.capacity for a in answers}}


def measure_changes(simulated: SimulatedNode, topology: Topology, rules: Rules,
                    rounds: int) -> tuple[float, float]:
    """Mean CPU ms of a change's fit recompute (state and counts kept) and of the ledger
    applying the same change; one pod replaced before each."""
    cache, counts, ledger = ManagersStateCache(), NodeCounts(), Ledger()

    def fit(snapshot: KubeletSnapshot) -> None:
        state = cache.state(snapshot, topology, True, True)
        assert state is not None
        numa_free_series(state)
        render_text(shape_families([answer(shape, state, rules, counts) for shape in SHAPES]))
        counts.forget_unused()

    def listed() -> KubeletSnapshot:
        return KubeletSnapshot(tuple(p.assignment for p in simulated.listed_pods(True)),
                               simulated.allocatable())

    snapshot = listed()
    allocatable = snapshot.allocatable
    fit(snapshot)
    ledger.update(snapshot.pods, allocatable, topology, snapshot.api_version)
    fit_times, ledger_times = [], []
    for _ in range(rounds):
        simulated.churn(1)
        snapshot = KubeletSnapshot(listed().pods, allocatable)
        started = time.process_time()
        ledger.update(snapshot.pods, allocatable, topology, snapshot.api_version)
        ledger_times.append(time.process_time() - started)
        started = time.process_time()
        fit(snapshot)
        fit_times.append(time.process_time() - started)
    return statistics.fmean(fit_times) * 1000, statistics.fmean(ledger_times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--profiles", default="small,dual-socket-gpu,large,huge",
                        help="comma-separated simulator profiles (default: %(default)s)")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
    results = {f"{name} {label}": measure(name, args.rounds, rules)
               for name in profiles for label, rules in RULES.items()}
    print(f"capacity by repeated placement: at most {CAPACITY_CAP} admissions per shape")
    print(f"{'profile and rules':<40} {'pods':>5} {'NUMA':>4} {'fit ms':>8} "
          f"{'accounting ms':>14} {'fit/accounting':>15} {'a change: fit ms':>17} "
          f"{'ledger ms':>10}  capacities")
    for name, row in results.items():
        print(f"{name:<40} {row['pods']:>5} {row['numa_nodes']:>4} {row['fit_ms']:>8} "
              f"{row['accounting_ms']:>14} {row['ratio']:>15} {row['change_fit_ms']:>17} "
              f"{row['change_ledger_ms']:>10}  {row['capacities']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
