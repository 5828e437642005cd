"""docs/metrics.md, the exporter's catalogue and a live /metrics agree; promtool finds no fault."""

from __future__ import annotations

import subprocess

import pytest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from exporter.accounting import account
from exporter.catalog import CATALOG
from exporter.exposition.rendering import _Families, data_families, render_text
from exporter.model import KubeletSnapshot
from exporter.simulator import SimulatedNode, load_profile
from exporter.topology import read_topology

from ..support.docs import assert_live_matches_docs, documented
from ..support.harness import Exporter, Node
from ..support.prometheus import LINES, tool


def test_docs_list_exactly_the_catalogue():
    assert documented() == {m.name: (m.type, m.labels) for m in CATALOG}


def test_help_texts_render_the_same_in_both_formats():
    for metric in CATALOG:
        assert '"' not in metric.help, metric.name  # keeps gauges identical in both formats


async def test_live_metrics_match_the_docs():
    async with Node("dual-socket-gpu") as node, Exporter(node.settings()) as exporter:
        scrape = await exporter.ready()
    # the Kubernetes-API view is off by default (tests/integration/test_kubeapi.py checks it on)
    assert_live_matches_docs(scrape, {"node", "workload", "health"})


@pytest.mark.parametrize("line", LINES)
async def test_promtool_check_metrics_is_clean(line):
    promtool = tool(line, "promtool")
    async with Node("dual-socket-gpu") as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        body = (await exporter.get("/metrics", headers={"Accept-Encoding": "identity"}))
        text = exporter.refresher.body(openmetrics=False)
    assert body.status == 200
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == b"" and result.stderr.strip() == b""


def test_data_section_is_identical_in_openmetrics(tmp_path):
    spec = load_profile("dual-socket-gpu")
    state = SimulatedNode(spec)
    from exporter.simulator.node.sysfs import write_sysfs
    topology = read_topology(write_sysfs(spec, tmp_path))
    pods = tuple(p.assignment for p in state.listed_pods(active_only=True))
    result = account(KubeletSnapshot(pods, state.allocatable()), topology)
    families = data_families(result, topology)
    text = render_text(families)
    assert openmetrics_latest(_Families(families)) == text + b"# EOF\n"
