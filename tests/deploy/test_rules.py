"""The alerting and recording rules: promtool of both Prometheus lines (2.x and 3.13) accepts and
unit-tests them, and they follow the monitoring-mixin conventions (CamelCase names with a shared
prefix, a severity, a summary sentence, a templated description, a runbook section in
docs/alerts.md)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from dashboards import generate, rules

from ..support.docs import documented_metrics, metric_names
from ..support.harness import REPO, require_tool
from ..support.prometheus import LINES, tool

RULES = generate.RULES
UNIT_TESTS = RULES.parent / "tests" / "podresources-exporter.tests.yaml"
RUNBOOKS = REPO / "docs" / "alerts.md"
RUNBOOK_URL = ("https://github.com/podresources-exporter/podresources-exporter/blob/main/"
               "docs/alerts.md#")
GROUPS = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
ALERTS = [rule for group in GROUPS for rule in group["rules"] if "alert" in rule]
RECORDS = [rule for group in GROUPS for rule in group["rules"] if "record" in rule]
EXPECTED_ALERTS = {
    "PodresourcesExporterDown", "PodresourcesKubeletUnreachable",
    "PodresourcesKubeletRateLimited", "PodresourcesSnapshotStale",
    "PodresourcesNumaCpuExhausted", "PodresourcesNumaMemoryExhausted",
    "PodresourcesNumaHugepagesExhausted", "PodresourcesNumaDevicesExhausted",
    "PodresourcesContainersMisaligned", "PodresourcesDataIssues",
    "PodresourcesShapeNoCapacity",
}
# Alerts about the whole cluster, not one node: their descriptions name no node.
CLUSTER_WIDE = {"PodresourcesShapeNoCapacity"}


@pytest.mark.external
@pytest.mark.parametrize("line", LINES)
def test_promtool_check_rules_is_clean(line):
    promtool = tool(line, "promtool")
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS) + len(RECORDS)} rules found" in result.stdout
    assert "warning" not in (result.stdout + result.stderr).lower()


def test_plain_rule_file_is_the_rules_with_their_defaults():
    assert rules.groups() == GROUPS
    assert rules.groups(cluster="cluster", job='job=~".*podresources-exporter.*"') == GROUPS
    by_name = {rule["alert"]: rule for rule in ALERTS}
    assert by_name["PodresourcesSnapshotStale"]["expr"].endswith("> 300")
    assert by_name["PodresourcesNumaCpuExhausted"]["expr"].endswith(">= 0.95")
    assert by_name["PodresourcesNumaDevicesExhausted"]["expr"].endswith(">= 1")
    assert by_name["PodresourcesContainersMisaligned"]["expr"].endswith("> 0")
    assert by_name["PodresourcesExporterDown"]["expr"] == \
        'up{job=~".*podresources-exporter.*"} == 0'


AGGREGATION = re.compile(r"\b(by|on|without)\s*\(([^)]*)\)")


@pytest.mark.parametrize("rule", RECORDS + ALERTS,
                         ids=lambda rule: rule.get("record") or rule["alert"])
def test_every_aggregation_keeps_the_cluster_label(rule):
    """A global ruler (Thanos, Mimir) sees every cluster: no rule may merge two of them."""
    for kind, labels in AGGREGATION.findall(rule["expr"]):
        names = {label.strip() for label in labels.split(",")}
        if kind == "without":
            assert "cluster" not in names, rule["expr"]
        else:
            assert "cluster" in names, (kind, labels, rule["expr"])


def test_the_cluster_label_and_job_selector_are_settings():
    custom = rules.groups(cluster="region", job='job="numa"')
    text = json.dumps(custom)
    assert "cluster" not in text.replace("Cluster", "")
    assert text.count("region") == json.dumps(GROUPS).count("(cluster")
    down = next(r for r in custom[-1]["rules"] if r["alert"] == "PodresourcesExporterDown")
    assert down["expr"] == 'up{job="numa"} == 0'


@pytest.mark.external
@pytest.mark.parametrize("line", LINES)
def test_promtool_unit_tests_pass(line):
    """The same cases and expected values on both lines: no case's answer depends on the
    sample at the start of a range, which Prometheus 3 leaves out and 2.x keeps."""
    promtool = tool(line, "promtool")
    result = subprocess.run([promtool, "test", "rules", UNIT_TESTS.name], cwd=UNIT_TESTS.parent,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_unit_tests_make_every_alert_fire_and_stay_silent():
    cases = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))["tests"]
    alert_cases = [case for test in cases for case in test.get("alert_rule_test", [])]
    fired = {case["alertname"] for case in alert_cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in alert_cases if not case["exp_alerts"]}
    names = {rule["alert"] for rule in ALERTS}
    assert fired == names and silent == names
    checked = " ".join(case["expr"] for test in cases
                       for case in test.get("promql_expr_test", []))
    assert {rule["record"] for rule in RECORDS} <= set(re.findall(r"[\w:]+", checked))


def test_the_alerts_the_issue_asks_for():
    assert {rule["alert"] for rule in ALERTS} == EXPECTED_ALERTS


@pytest.mark.parametrize("rule", ALERTS, ids=lambda rule: rule["alert"])
def test_alert_follows_the_mixin_conventions(rule):
    name = rule["alert"]
    assert re.fullmatch(r"Podresources(?:[A-Z][a-z]+)+", name)
    assert rule["labels"]["severity"] in ("critical", "warning", "info")
    assert re.fullmatch(r"[A-Za-z][^\n]*\.", rule["annotations"]["summary"])
    assert ("{{ $labels.node }}" in rule["annotations"]["description"]) != (name in CLUSTER_WIDE)
    assert rule["annotations"]["runbook_url"] == RUNBOOK_URL + name.lower()
    assert re.fullmatch(r"\d+m", rule["for"])


def test_every_alert_has_a_runbook_section():
    headings = re.findall(r"^## (\w+)$", RUNBOOKS.read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(rule["alert"] for rule in ALERTS) == sorted(
        h for h in headings if h.startswith("Podresources"))
    text = RUNBOOKS.read_text(encoding="utf-8")
    for rule in ALERTS:
        section = text.split(f"## {rule['alert']}\n", 1)[1].split("\n## ", 1)[0]
        for part in ("Meaning", "Impact", "Diagnosis", "Mitigation"):
            assert f"**{part}.**" in section, (rule["alert"], part)


def test_recording_rules_are_named_level_metric_operation_and_use_documented_metrics():
    documented = documented_metrics()
    recorded = {rule["record"] for rule in RECORDS}
    for rule in RECORDS:
        # level:metric:operations, e.g. node_method_code:podresources_api_requests:rate5m
        assert re.fullmatch(r"[a-z_]+:podresources_[a-z_]+:[a-z0-9_]+", rule["record"])
    histogram_series = re.compile(r"_(bucket|sum|count)$")  # of a documented histogram
    for rule in RECORDS + ALERTS:
        for metric in metric_names(rule["expr"]):
            assert metric in documented or metric in recorded or \
                histogram_series.sub("", metric) in documented, (rule.get("record"), metric)


def test_recording_groups_split_what_a_fleet_pays():
    """Eight recording groups, evaluated concurrently, so that none reads too many series on a
    fleet (docs/performance.md); the alerts come last."""
    latency = "node_method_quantile:podresources_api_request_duration_seconds:histogram_quantile"
    assert [group["name"] for group in GROUPS] == [
        "podresources-exporter.rules", "podresources-exporter.utilization.rules",
        "podresources-exporter.health.rules", "podresources-exporter.refresh.rules",
        "podresources-exporter.latency.rules", "podresources-exporter.latency.allocatable.rules",
        "podresources-exporter.latency.get.rules", "podresources-exporter.gpu.rules",
        "podresources-exporter.alerts"]
    assert all("record" in rule for group in GROUPS[:-1] for rule in group["rules"])
    records = [[rule["record"] for rule in group["rules"]] for group in GROUPS[:-1]]
    assert records[1] == [
        "node_resource:podresources_allocatable:sum", "node_resource:podresources_allocated:sum"]
    assert "node_resource:podresources_utilization:ratio" in records[0]
    assert records[2] == ["node_method_code:podresources_api_requests:rate5m",
                          "node_kind:podresources_data_issues:rate5m"]
    # each histogram's quantiles alone in a group, the call latency one group per method: they
    # read the most series
    assert records[3] == [
        "node_quantile:podresources_refresh_duration_seconds:histogram_quantile"]
    assert records[4] == records[5] == records[6] == [latency]
    methods = [re.findall(r'(method(?:=~|!~|!=|=)"[^"]*")', group["rules"][0]["expr"])
               for group in GROUPS[4:7]]
    assert [set(found) for found in methods] == [
        {'method="List"'}, {'method="GetAllocatableResources"'},
        {'method!~"List|GetAllocatableResources"'}]  # together: every method, once
    # a one-method rule sets that method (as its series have it): promtool tells them apart
    assert [group["rules"][0].get("labels") for group in GROUPS[4:7]] == [
        {"method": "List"}, {"method": "GetAllocatableResources"}, None]
    assert records[7] == ["gpu:podresources_device_info:relabel"]
    # the health records keep job, for the health dashboard's job variable
    for group in GROUPS[2:7]:
        for rule in group["rules"]:
            for _, labels in AGGREGATION.findall(rule["expr"]):
                assert {"cluster", "job", "node"} <= {label.strip()
                                                      for label in labels.split(",")}


def test_quantiles_read_classic_buckets_or_the_native_histogram():
    """Where Prometheus 3 converts classic histograms (NHCB) and drops the buckets, the same
    quantile comes from the native histogram of the same name; test_native_histograms.py runs
    it."""
    for group in GROUPS[3:7]:
        (rule,) = group["rules"]
        histogram = re.search(r"rate\((podresources_\w+_seconds)_bucket", rule["expr"])[1]
        selector = re.search(rf"{histogram}_bucket(\{{[^}}]*\}})?\[5m\]", rule["expr"])[1] or ""
        assert f"rate({histogram}{selector}[5m])" in rule["expr"], rule["expr"]


def test_runbook_page_lists_every_alerts_tunable_defaults():
    text = RUNBOOKS.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (Podresources\w+) \| (.*) \|$", text, re.MULTILINE))
    for alert in rules.ALERTS:
        threshold, for_, severity = (cell.strip() for cell in rows[alert.alert].split("|"))
        assert for_ == alert.for_ and severity == alert.severity, alert.alert
        if alert.threshold is None:
            assert threshold == "—", alert.alert
        else:
            assert threshold.endswith(f"({rules.number(alert.threshold)})"), alert.alert


# ---- the jsonnet mixin (mixin/) -------------------------------------------------------------

def jsonnet(expression: str) -> object:
    binary = require_tool("jsonnet", "PyPI package jsonnet (tests/install-tools.sh)")
    result = subprocess.run([binary, "-J", str(REPO / "mixin"), "-e", expression],
                            capture_output=True, text=True, timeout=60, cwd=REPO / "mixin")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


MIXIN = '(import "mixin.libsonnet")'


@pytest.mark.external
def test_mixin_with_its_defaults_gives_the_plain_rule_file():
    rules_groups = jsonnet(f"{MIXIN}.prometheusRules")["groups"]
    alert_groups = jsonnet(f"{MIXIN}.prometheusAlerts")["groups"]
    assert rules_groups + alert_groups == GROUPS


@pytest.mark.external
@pytest.mark.parametrize("line", LINES)
def test_mixin_config_tunes_the_rules(tmp_path, line):
    config = ('{_config+:: {clusterLabel: "region", jobSelector: \'job="numa"\', '
              'disabledAlerts: ["PodresourcesDataIssues"], extraLabels: {team: "hpc"}, '
              'runbookBaseUrl: "https://runbooks.example.com/", '
              'alerts: {PodresourcesNumaCpuExhausted: {threshold: 0.9, "for": "30m"}, '
              'PodresourcesSnapshotStale: {threshold: 600, severity: "critical"}}}}')
    recording = jsonnet(f"({MIXIN} + {config}).prometheusRules")["groups"]
    alerting = jsonnet(f"({MIXIN} + {config}).prometheusAlerts")["groups"]
    assert recording == rules.groups(cluster="region", job='job="numa"')[:-1]
    alerts = {rule["alert"]: rule for rule in alerting[0]["rules"]}
    assert set(alerts) == set(rules.ALERT_NAMES) - {"PodresourcesDataIssues"}
    assert alerts["PodresourcesExporterDown"]["expr"] == 'up{job="numa"} == 0'
    assert "on (region, job, instance)" in alerts["PodresourcesKubeletUnreachable"]["expr"]
    cpu = alerts["PodresourcesNumaCpuExhausted"]
    assert cpu["expr"].endswith(">= 0.9") and cpu["for"] == "30m"
    assert alerts["PodresourcesSnapshotStale"]["expr"].endswith("> 600")
    assert alerts["PodresourcesSnapshotStale"]["labels"] == {"severity": "critical",
                                                             "team": "hpc"}
    assert all(rule["annotations"]["runbook_url"] == "https://runbooks.example.com/"
               + name.lower() for name, rule in alerts.items())
    promtool = tool(line, "promtool")
    path = tmp_path / "mixin.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": recording + alerting}))
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
