"""Prometheus 3 converting classic histograms to native histograms with custom buckets (NHCB).

With ``convert_classic_histograms_to_nhcb`` on (globally, or kube-prometheus-stack's
``convertClassicHistogramsToNHCB``), Prometheus stores the exporter's two histograms as native
ones and drops their ``_bucket``, ``_sum`` and ``_count`` series, unless a scrape keeps them
(``always_scrape_classic_histograms``, which the chart's monitors render from
``scrapeClassicHistograms: true``). Two jobs scrape the same exporter and a target serving
hand-picked bucket counts: ``podresources-exporter`` as the chart's monitors do (classic kept),
``podresources-exporter-nhcb`` as a hand-written scrape config would (converted only). The
latency and refresh rules, and the health dashboard's latency and refresh panels, give the same
answers from either form.
"""

from __future__ import annotations

import contextlib
import math

import pytest

from ..support.grafana import dashboard, panels, substitute
from ..support.harness import REPO, Exporter, Node
from ..support.prometheus import SERVER_LINES, Prometheus, scrape_job, tool
from ..support.targets import HistogramTarget

pytestmark = pytest.mark.external

RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"
CLUSTER = "nhcb"
KEPT, CONVERTED = "podresources-exporter", "podresources-exporter-nhcb"
# (job, node) of every target; the fixed targets' quantiles are known by hand
EXPORTER_NODES = {KEPT: "exporter-kept", CONVERTED: "exporter-converted"}
FIXED_NODES = {KEPT: "fixed-kept", CONVERTED: "fixed-converted"}
PANELS = ("Kubelet call latency (p99)", "Refresh duration", "Refreshes")
CALL_P99 = "node_method_quantile:podresources_api_request_duration_seconds:histogram_quantile"
REFRESH = "node_quantile:podresources_refresh_duration_seconds:histogram_quantile"


def positive(result: list[dict]) -> set[str]:
    """The nodes with a finite value above 0 (a method not called lately has NaN)."""
    return {s["metric"]["node"] for s in result
            if math.isfinite(float(s["value"][1])) and float(s["value"][1]) > 0}


def per_node(result: list[dict], *labels: str) -> dict[tuple, float]:
    return {tuple(s["metric"].get(label, "") for label in ("node", *labels)):
            float(s["value"][1]) for s in result}


@pytest.mark.parametrize("line", SERVER_LINES)
async def test_rules_and_panels_read_histograms_prometheus_converted_to_native(line):
    binary = tool(line, "prometheus")
    async with contextlib.AsyncExitStack() as stack:
        node = await stack.enter_async_context(Node("small"))
        exporter = await stack.enter_async_context(Exporter(node.settings(interval=0.2)))
        await exporter.ready()
        fixed = {job: await stack.enter_async_context(HistogramTarget()) for job in FIXED_NODES}

        def targets(job: str) -> list[tuple[int, dict[str, str]]]:
            return [(exporter.port, {"cluster": CLUSTER, "node": EXPORTER_NODES[job]}),
                    (fixed[job].port, {"cluster": CLUSTER, "node": FIXED_NODES[job]})]

        prometheus = await stack.enter_async_context(Prometheus(binary, [
            scrape_job(KEPT, targets(KEPT), honor_labels=True,
                       always_scrape_classic_histograms=True),
            scrape_job(CONVERTED, targets(CONVERTED), honor_labels=True)],
            [RULES], {"convert_classic_histograms_to_nhcb": True}))

        async def recorded():
            calls = await prometheus.instant(CALL_P99 + '{method="List"}')
            refreshes = await prometheus.instant(REFRESH)
            every = {*EXPORTER_NODES.values(), *FIXED_NODES.values()}
            return (calls, refreshes) if positive(calls) == every and \
                {s["metric"]["node"] for s in refreshes if s["metric"]["quantile"] == "0.5"
                 and float(s["value"][1]) > 0} == every else None

        calls, refreshes = await prometheus.wait_until(recorded, "quantiles of every target")
        classic = await prometheus.instant(
            "count by (job) (podresources_refresh_duration_seconds_bucket)")
        native = await prometheus.instant(
            "count by (job) (histogram_count(podresources_refresh_duration_seconds))")
        values = {"cluster": CLUSTER, "job": ".*", "__rate_interval": "10s",
                  "node": "(" + "|".join([*EXPORTER_NODES.values(), *FIXED_NODES.values()]) + ")"}
        shown = {}
        for panel in panels(dashboard("exporter-health")):
            if panel["title"] in PANELS:
                for target in panel["targets"]:
                    shown[panel["title"], target["refId"]] = await prometheus.instant(
                        substitute(target["expr"], values))

    # the conversion is real: the hand-written job kept no bucket, both have native histograms
    assert {s["metric"]["job"] for s in classic} == {KEPT}
    assert {s["metric"]["job"] for s in native} == {KEPT, CONVERTED}
    # from either form, the quantiles worked out by hand (targets.HistogramTarget)
    for job in (KEPT, CONVERTED):
        node_name = FIXED_NODES[job]
        assert per_node(calls, "method")[node_name, "List"] == \
            pytest.approx(HistogramTarget.P99)
        assert per_node(refreshes, "quantile")[node_name, "0.99"] == \
            pytest.approx(HistogramTarget.P99)
        assert per_node(refreshes, "quantile")[node_name, "0.5"] == \
            pytest.approx(HistogramTarget.P50)
    # the exporter's own durations: one p99 per method and node, p99 >= p50, whichever form
    for job, node_name in EXPORTER_NODES.items():
        p99, p50 = (per_node(refreshes, "quantile")[node_name, q] for q in ("0.99", "0.5"))
        assert math.isfinite(p99) and 0 < p50 <= p99, (job, p50, p99)
        assert per_node(calls, "method")[node_name, "List"] > 0, job
    # every latency and refresh panel shows every node, converted or not
    for (title, ref), result in shown.items():
        assert positive(result) == {*EXPORTER_NODES.values(), *FIXED_NODES.values()}, \
            (title, ref, result)
