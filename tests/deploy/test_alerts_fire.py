"""Every shipped alert fires against a real Prometheus scraping the exporter, on both Prometheus
3 lines, in the two simulated clusters of tests/support/clusters.py: on the demo data with the
production thresholds (only `for` shortened), with a lowered threshold where the demo data stays
below it, or after a fault the simulator injects; and only in the cluster the fault is in.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
import yaml

from ..support.clusters import EAST, EDGE_NODE, GPU_NODE, WEST, clusters
from ..support.harness import REPO
from ..support.prometheus import SERVER_LINES

pytestmark = pytest.mark.external

RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"

# With production thresholds (only `for` shortened), exactly these fire on the demo data:
# (alertname, cluster, node, numa_node, resource).
FIRING_ON_DEMO_DATA = {
    ("PodresourcesNumaCpuExhausted", EAST, GPU_NODE, "0", "cpu"),  # 30 of 30
    ("PodresourcesNumaHugepagesExhausted", EAST, GPU_NODE, "0", "hugepages-1Gi"),  # 32 of 32
    ("PodresourcesNumaDevicesExhausted", EAST, GPU_NODE, "0", "nvidia.com/gpu"),  # 4 of 4
    ("PodresourcesNumaDevicesExhausted", EAST, GPU_NODE, "1", "nvidia.com/gpu"),  # 3 of 3 healthy
    ("PodresourcesContainersMisaligned", EAST, GPU_NODE, "", ""),  # mpi-rank-0/rank and more
    # west: the same, except NUMA node 1's GPUs (2 of 3 after llm-infer-1 left)
    ("PodresourcesNumaCpuExhausted", WEST, GPU_NODE, "0", "cpu"),
    ("PodresourcesNumaHugepagesExhausted", WEST, GPU_NODE, "0", "hugepages-1Gi"),
    ("PodresourcesNumaDevicesExhausted", WEST, GPU_NODE, "0", "nvidia.com/gpu"),
    ("PodresourcesContainersMisaligned", WEST, GPU_NODE, "", ""),
    # cluster-wide, per shape: in east gpu1 has room on no node
    ("PodresourcesShapeNoCapacity", EAST, "", "", ""),
}


def fast_rules(directory: Path) -> Path:
    """The rules file with every alert's ``for`` set to 0s, so that alerts fire within seconds."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = "0s"
    path = directory / "fast.rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def alert_exprs() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r["expr"] for group in rules for r in group["rules"] if "alert" in r}


def lowered(expr: str, threshold: str, value: str) -> str:
    """``expr`` with its threshold replaced, to show the alert's selectors match real series."""
    assert threshold in expr, (threshold, expr)
    return expr.replace(threshold, value)


@pytest.mark.parametrize("line", SERVER_LINES)
async def test_every_alert_fires_on_demo_data_or_after_a_fault(line):
    exprs = alert_exprs()
    proven: set[str] = set()
    with tempfile.TemporaryDirectory() as directory:
        async with clusters(line, fast_rules(Path(directory))) as (prometheus, nodes, exporters, _):
            for _name, expr in exprs.items():  # every expression evaluates on healthy data
                await prometheus.instant(expr)

            async def demo_alerts():
                firing = await prometheus.firing()
                return firing if firing >= FIRING_ON_DEMO_DATA else None

            await prometheus.wait_until(demo_alerts, "the alerts the demo data warrants")
            # two more evaluations of every group, every target up: nothing else fires. (With
            # `for: 0s` a scrape that timed out on a loaded machine fires ExporterDown and
            # resolves the others until the next scrape; a real extra alert stays.)
            async def only_demo_alerts():
                await prometheus.settled()
                await prometheus.evaluated_after(time.time(), evaluations=2)
                return await prometheus.firing() == FIRING_ON_DEMO_DATA

            await prometheus.wait_until(only_demo_alerts, "only the demo data's alerts")
            proven |= {alert for alert, *_ in FIRING_ON_DEMO_DATA}

            # Memory peaks at 89.6 % (172 of 192Gi on east's NUMA node 1): below the threshold,
            # so the alert is silent above; lowered, its selector finds exactly that series
            # (west's node 1 is at 140 of 192Gi, node 0 at 114.0625 of 188Gi in both).
            memory = await prometheus.instant(lowered(
                exprs["PodresourcesNumaMemoryExhausted"], ">= 0.95", ">= 0.85"))
            assert {(s["metric"]["cluster"], s["metric"]["node"], s["metric"]["numa_node"],
                     s["metric"]["resource"]) for s in memory} == {
                (EAST, GPU_NODE, "1", "memory")}
            proven.add("PodresourcesNumaMemoryExhausted")

            # Faults in east: a neighbour drains edge-node-01's kubelet quota; gpu-node-01's
            # kubelet sends inconsistent data.
            nodes[EAST, EDGE_NODE].simulator.faults.rate_limit_storm = True
            nodes[EAST, GPU_NODE].simulator.faults.garbage = "inconsistent"
            expected = {("PodresourcesKubeletRateLimited", EAST, EDGE_NODE),
                        ("PodresourcesDataIssues", EAST, GPU_NODE)}

            async def fault_alerts():
                firing = {(alert, cluster_name, node)
                          for alert, cluster_name, node, *_ in await prometheus.firing()}
                return expected <= firing

            await prometheus.wait_until(fault_alerts, f"alerts {sorted(expected)}")
            # the data issues are recorded for that node only, in that cluster only
            issues = await prometheus.instant("node_kind:podresources_data_issues:rate5m")
            assert {(s["metric"]["cluster"], s["metric"]["node"]) for s in issues} == \
                {(EAST, GPU_NODE)}
            assert all(float(s["value"][1]) > 0 for s in issues)

            async def calm_elsewhere():  # every target up: a missed scrape is no alert here
                await prometheus.settled()
                firing = {(alert, cluster_name, node)
                          for alert, cluster_name, node, *_ in await prometheus.firing()}
                return (("PodresourcesKubeletUnreachable", EAST, EDGE_NODE) not in firing  # limited
                        and not {alert for alert in firing if alert[1] == WEST} - {
                            (alert, WEST, GPU_NODE) for alert, *_ in FIRING_ON_DEMO_DATA})

            await prometheus.wait_until(calm_elsewhere, "west calm, edge-node-01 reachable")
            proven |= {alert for alert, *_ in expected}

            # east's gpu-node-01 kubelet goes away (its socket is removed); west's same-named
            # node keeps answering, and does not alert.
            await nodes[EAST, GPU_NODE].simulator.stop()
            expected = {("PodresourcesKubeletUnreachable", EAST, GPU_NODE)}
            await prometheus.wait_until(fault_alerts, "PodresourcesKubeletUnreachable")
            firing = {(alert, cluster_name, node)
                      for alert, cluster_name, node, *_ in await prometheus.firing()}
            assert ("PodresourcesKubeletUnreachable", WEST, GPU_NODE) not in firing
            proven.add("PodresourcesKubeletUnreachable")

            # The snapshot of edge-node-01 ages while it is rate limited; 5 s instead of 300 s.
            stale_expr = lowered(exprs["PodresourcesSnapshotStale"], "> 300", "> 5")

            async def stale_nodes():
                return {(s["metric"]["cluster"], s["metric"]["node"])
                        for s in await prometheus.instant(stale_expr)}

            stale = await prometheus.wait_until(stale_nodes, "a stale snapshot")
            assert (EAST, EDGE_NODE) in stale and (WEST, GPU_NODE) not in stale
            proven.add("PodresourcesSnapshotStale")

            # The exporter of edge-node-01 stops answering scrapes.
            await exporters[EAST, EDGE_NODE].runner.cleanup()

            async def exporter_down():
                return ("PodresourcesExporterDown", EAST, EDGE_NODE) in {
                    (alert, cluster_name, node)
                    for alert, cluster_name, node, *_ in await prometheus.firing()}

            await prometheus.wait_until(exporter_down, "PodresourcesExporterDown")
            proven.add("PodresourcesExporterDown")

    assert proven == set(exprs), f"alerts without proof: {sorted(set(exprs) - proven)}"
