"""What the dashboards and rules cost on the Prometheus side, for fleets of nodes.

    python -m benchmarks.fleet                         # 250 and 1,000 nodes (~15 minutes)
    python -m benchmarks.fleet --sizes 100,200 --repeat 1 --no-series   # a quick look
    python -m benchmarks.fleet --series-only           # series per node, churn, flags (~2 min)
    python -m benchmarks.fleet --prometheus .tools/prometheus3/3.16/prometheus \
        --promtool .tools/prometheus3/3.16/promtool    # another Prometheus (default: PATH's)

For each profile of the fleet (default: dual-socket-gpu, a two-NUMA GPU node) the simulator and
the exporter run once, as processes (``python -m exporter simulate`` / ``python -m exporter``),
and the exporter's own /metrics is scraped. A fleet of N nodes in several clusters is that
exposition copied N times with each node's target labels (cluster, node, instance, the exporter
pod) and its own GPU UUIDs, plus per node Prometheus' scrape series (``up``...) and a
dcgm-exporter target with dcgm-exporter 4.10's metric names and label set (gpu, UUID,
pci_bus_id, device, modelName, hostname, DCGM_FI_SYSTEM_DRIVER_VERSION; on a GPU of NVIDIA's
DRA driver, the holder and the dra_* labels of dcgm-exporter's DRA path). A window of samples
at the scrape interval is written as OpenMetrics and turned into a block by ``promtool tsdb
create-blocks-from openmetrics``; the real Prometheus is started on it, the recording rules are
backfilled with ``promtool tsdb create-blocks-from rules`` (one pass per level of rules reading
other rules), and then:

Every fleet is built first, each with its own Prometheus; then each query goes to the fleets in
turn, round after round, so that whatever else the machine does weighs on every size alike:

* every target of every dashboard is sent as Grafana sends it (a range query over the last hour
  at a 30 s step, or an instant query), with the variables resolved through Prometheus the way
  Grafana resolves them: once with the dashboards' defaults (the first cluster; All where a
  variable is multi-value) and once with one node selected; the fastest of ``--repeat`` runs
  (the machine may be shared: other work only adds time; the median is in the JSON too);
* a whole refresh of each dashboard: every target, 6 at a time (Grafana's concurrency);
* every rule expression as an instant query; a group's time is the sum of its rules' (a group
  evaluates its rules one after the other).

Counters grow over the window, gauges keep the captured values; ``$__rate_interval`` is
Grafana's for the scrape interval and the step (max(4 x scrape, step + scrape)). Each figure
is extrapolated linearly to ``--extrapolate`` nodes from the two largest fleets. Prints tables;
writes JSON (``--json``, default benchmarks/results/fleet-<date>.json). Every process and network
listener is local (127.0.0.1) and stopped at the end. Needs ``prometheus`` and ``promtool``
(2.42, 3.13 and 3.16 tested): PATH's, or the ones given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from . import DASHBOARD_DIR, REPO, RULES, STEP, VIEW
from .grafana import time_dashboard, time_rules
from .node import capture, series_costs
from .report import report, series_report
from .tsdb import Prometheus, Tools, build_tsdb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="250,1000", help="fleet sizes, in nodes")
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--profiles", default="dual-socket-gpu",
                        help="simulator profiles the fleet's nodes take, in turn")
    parser.add_argument("--scrape-interval", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (the fastest)")
    parser.add_argument("--extrapolate", type=int, default=5000)
    parser.add_argument("--series-profiles", default="small,dual-socket-gpu,gb200-tray,large",
                        help="profiles for the series-per-node table")
    parser.add_argument("--series-only", action="store_true")
    parser.add_argument("--no-series", action="store_true", help="skip the series table")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--prometheus", default="prometheus", help="the Prometheus server")
    parser.add_argument("--promtool", default="promtool", help="the promtool of that line")
    args = parser.parse_args(argv)
    for tool in (args.prometheus, args.promtool):
        if not shutil.which(tool):
            parser.error(f"{tool}: not found")
    tools = Tools(shutil.which(args.prometheus) or "", shutil.which(args.promtool) or "")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    profiles = args.profiles.split(",")
    interval = args.scrape_interval
    rate_interval = f"{max(4 * interval, STEP + interval)}s"
    results: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()},
                     "prometheus": tools.version(),
                     "settings": {"clusters": args.clusters, "profiles": profiles,
                                  "scrape_interval": interval, "step": STEP, "view": VIEW,
                                  "rate_interval": rate_interval, "repeat": args.repeat},
                     "fleets": {}}
    workdir = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        if not args.no_series:
            results["series_per_node"] = series_costs(args.series_profiles.split(","), workdir)
            print(series_report(results["series_per_node"]), flush=True)
        if args.series_only:
            return 0
        templates = {profile: capture(profile, workdir) for profile in profiles}
        groups = yaml.safe_load(RULES.read_text())["groups"]
        # The window ends just before a 2-hour block boundary: one block per promtool run.
        end = (int(time.time()) // 7200) * 7200 - 60
        window = VIEW + 900
        servers: dict[int, Prometheus] = {}
        try:
            for size in sizes:  # every fleet built first, each with its own Prometheus
                started = time.monotonic()
                servers[size], facts = build_tsdb(tools, workdir, templates, size,
                                                  args.clusters, profiles, end, window,
                                                  interval, groups)
                facts["build_seconds"] = time.monotonic() - started
                results["fleets"][str(size)] = {"facts": facts, "dashboards": {}}
                print(f"{size} nodes: {facts['series']:,} series, {facts['samples']:,} samples; "
                      f"built in {facts['write_seconds']:.0f} + {facts['promtool_seconds']:.0f} "
                      f"s, rules backfilled in {facts['rules_backfill_seconds']:.0f} s",
                      flush=True)
            started = time.monotonic()
            for path in sorted(DASHBOARD_DIR.glob("*.json")):
                for size, timing in time_dashboard(servers, path, end, args.repeat,
                                                   rate_interval).items():
                    results["fleets"][str(size)]["dashboards"][path.stem] = timing
            for size, timing in time_rules(servers, end, args.repeat).items():
                results["fleets"][str(size)]["rules"] = timing
            print(f"timed in {time.monotonic() - started:.0f} s", flush=True)
        finally:
            for prometheus in servers.values():
                prometheus.stop()
        print(results["prometheus"])
        print(report(results, args.extrapolate))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        path = args.json or (REPO / "benchmarks" / "results"
                             / f"fleet-{time.strftime('%Y%m%d-%H%M%S')}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1))
        print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
