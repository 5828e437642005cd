"""How the chart gets the exporter scraped and watched: ServiceMonitor or PodMonitor (also with
the reference charts' options), scrape annotations, the PrometheusRule (alerts tuned from
values, checked by promtool), the Grafana dashboards' ConfigMaps, and the NetworkPolicy.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from dashboards import generate, panels, rules

from ..support.chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    assert_scrape_endpoint,
    kinds,
    one,
    render,
    run_helm,
)
from ..support.harness import short_tmpdir
from ..support.prometheus import LINES, tool

pytestmark = pytest.mark.external


# ---- monitors and annotations ---------------------------------------------------------------

def test_service_monitor(helm):
    docs = render(helm, "--set", "serviceMonitor.enabled=true",
                  "--set", "serviceMonitor.additionalLabels.release=kube-prometheus-stack",
                  "--set", "serviceMonitor.relabelings[0].targetLabel=cluster",
                  "--set", "serviceMonitor.relabelings[0].replacement=prod")
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    service_labels = one(docs, "Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert service_labels["app.kubernetes.io/name"] == "podresources-exporter"  # job name
    (endpoint,) = monitor["spec"]["endpoints"]
    assert_scrape_endpoint(endpoint)
    assert endpoint["relabelings"][1] == {"targetLabel": "cluster", "replacement": "prod"}
    # where Prometheus converts classic histograms to native ones, the buckets stay
    assert monitor["spec"]["scrapeClassicHistograms"] is True


def test_pod_monitor_and_not_both(helm):
    docs = render(helm, "--set", "podMonitor.enabled=true", "--set", "service.enabled=false")
    monitor = one(docs, "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert_scrape_endpoint(endpoint)
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert "Service" not in kinds(docs) and "Pod" not in kinds(docs)  # the test needs a Service
    both = run_helm(helm, "template", "--set", "podMonitor.enabled=true",
                    "--set", "serviceMonitor.enabled=true")
    assert both.returncode != 0 and "enable one of serviceMonitor and podMonitor" in both.stderr
    assert monitor["spec"]["scrapeClassicHistograms"] is True


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_monitors_keep_classic_histograms_unless_told_otherwise(helm, monitor):
    """scrapeClassicHistograms (Prometheus Operator 0.78+) is a setting; null leaves it out for
    an older operator, whose CRD does not know the field."""
    kind = monitor[0].upper() + monitor[1:]
    base = ("--set", f"{monitor}.enabled=true", "--set", "service.enabled=true")
    spec = one(render(helm, *base, "--set", f"{monitor}.scrapeClassicHistograms=false"),
               kind)["spec"]
    assert spec["scrapeClassicHistograms"] is False
    spec = one(render(helm, *base, "--set", f"{monitor}.scrapeClassicHistograms=null"),
               kind)["spec"]
    assert "scrapeClassicHistograms" not in spec


def test_service_monitor_options_of_the_reference_charts(extras):
    monitor = one(extras, "ServiceMonitor")
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert spec["targetLabels"] == ["app.kubernetes.io/instance"]
    assert spec["podTargetLabels"] == ["team"]
    assert spec["attachMetadata"] == {"node": True}
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "podresources-exporter",
                                                "app.kubernetes.io/instance": "pre"}}
    (endpoint,) = spec["endpoints"]
    assert endpoint["authorization"] == {"type": "Bearer",
                                         "credentials": {"name": "scrape-token", "key": "token"}}
    assert_scrape_endpoint(endpoint)


def test_pod_monitor_options_of_the_reference_charts(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "podmonitor-annotations-values.yaml"))
    monitor = one(docs, "PodMonitor")
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert spec["podTargetLabels"] == ["app.kubernetes.io/instance"]
    assert spec["attachMetadata"] == {"node": True}
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "podresources-exporter"}}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert "targetLabels" not in spec


def test_scrape_annotations_for_plain_prometheus(helm, defaults):
    docs = render(helm, "--set", "scrapeAnnotations.enabled=true")
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "10075"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/scheme"] == "http"
    default_annotations = one(defaults, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in default_annotations


# ---- rules ------------------------------------------------------------------------------------

def test_prometheus_rule_with_defaults_is_the_plain_rule_file(helm):
    """The chart's template and the plain file come from one source (dashboards/rules.py)."""
    expected = yaml.safe_load(generate.RULES.read_text())["groups"]
    docs = render(helm, "--set", "prometheusRule.enabled=true",
                  "--set", "prometheusRule.additionalLabels.release=kube-prometheus-stack")
    rule = one(docs, "PrometheusRule")
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"


def alert_rules(rule: dict) -> dict[str, dict]:
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]
            if "alert" in r}


@pytest.mark.parametrize("line", LINES)
def test_alerts_tuned_from_values(helm, tmp_path, line):
    docs = render(helm, "--values", str(CHART / "ci" / "alerts-multicluster-values.yaml"))
    rule = one(docs, "PrometheusRule")
    alerts = alert_rules(rule)
    assert set(alerts) == set(rules.ALERT_NAMES) - {"PodresourcesContainersMisaligned"}
    # the cluster label is `region` in every aggregation, and `cluster` nowhere
    text = json.dumps(rule["spec"])
    assert "cluster" not in text.replace("Cluster", "")
    for group in rule["spec"]["groups"]:
        for each in group["rules"]:
            for labels in re.findall(r"\b(?:by|on) \(([^)]*)\)", each["expr"]):
                assert "region" in labels.split(", "), each["expr"]
    down = alerts["PodresourcesExporterDown"]
    assert down["expr"] == 'up{job="numa-exporter"} == 0'
    assert down["for"] == "10m"
    assert down["annotations"]["summary"] == "The NUMA exporter is not scraped."
    assert "has not answered scrapes for 10m;" in down["annotations"]["description"]
    cpu = alerts["PodresourcesNumaCpuExhausted"]
    assert cpu["expr"] == 'podresources_numa_utilization_ratio{resource="cpu"} >= 0.9'
    assert cpu["for"] == "30m"
    assert cpu["labels"] == {"severity": "warning", "team": "hpc-platform", "pager": "true"}
    stale = alerts["PodresourcesSnapshotStale"]
    assert stale["expr"] == "time() - podresources_last_refresh_timestamp_seconds > 600"
    assert stale["labels"] == {"severity": "critical", "team": "hpc-platform"}
    # untouched alerts keep their defaults, plus the extra labels and annotations
    memory = alerts["PodresourcesNumaMemoryExhausted"]
    assert memory["expr"].endswith(">= 0.95") and memory["for"] == "15m"
    for name, alert in alerts.items():
        assert alert["annotations"]["runbook_url"] == \
            "https://runbooks.example.com/podresources/" + name.lower()
        assert alert["annotations"]["dashboard_url"] == \
            "https://grafana.example.com/d/podresources-numa-overview"
        assert alert["labels"]["team"] == "hpc-platform"
    # and Prometheus accepts the result
    promtool = tool(line, "promtool")
    path = tmp_path / "rendered.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules.RECORDS) + len(alerts)} rules found" in checked.stdout


def test_disabling_every_alert_leaves_the_recording_rules(helm):
    setting = "prometheusRule.disabled={" + ",".join(rules.ALERT_NAMES) + "}"
    rule = one(render(helm, "--set", "prometheusRule.enabled=true", "--set", setting),
               "PrometheusRule")
    assert [group["name"] for group in rule["spec"]["groups"]] == \
        [name for name, _ in rules.RECORDING_GROUPS]


@pytest.mark.parametrize("setting, message", [
    ("prometheusRule.alerts.NoSuchAlert.for=5m", "additional properties 'NoSuchAlert'"),
    ("prometheusRule.alerts.PodresourcesExporterDown.threshold=2",
     "additional properties 'threshold' not allowed"),
    ("prometheusRule.alerts.PodresourcesSnapshotStale.for=soon",
     "/prometheusRule/alerts/PodresourcesSnapshotStale/for"),
    ("prometheusRule.disabled={PodresourcesNoSuch}", "/prometheusRule/disabled/0"),
    ("prometheusRule.extraLabels.severity=page", "invalid propertyName 'severity'"),
    ("clusterLabel=not-a-label", "/clusterLabel"),
])
def test_schema_rejects_bad_alert_settings(helm, setting, message):
    result = run_helm(helm, "template", "--set", "prometheusRule.enabled=true", "--set", setting)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


# ---- dashboards, NetworkPolicy -----------------------------------------------------------------

def test_one_dashboard_config_map_per_file(helm):
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    docs = render(helm, "--set", "dashboards.enabled=true", "--set", "dashboards.namespace=grafana")
    maps = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ConfigMap"}
    assert len(maps) == len(files)
    for path in files:
        config_map = maps[f"{FULLNAME}-{path.stem}"[:63].rstrip("-")]
        assert config_map["metadata"]["namespace"] == "grafana"
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"]["grafana_folder"] == "NUMA"
        assert config_map["data"] == {path.name: path.read_text().rstrip("\n")}
        assert json.loads(config_map["data"][path.name]) == json.loads(path.read_text())


@pytest.mark.parametrize("layout", ["absent", "empty"])
def test_dashboards_render_without_their_files(helm, layout):
    chart = short_tmpdir() / "podresources-exporter"
    try:
        shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("files"))
        if layout == "empty":
            (chart / "files" / "dashboards").mkdir(parents=True)
        docs = render(helm, "--set", "prometheusRule.enabled=true",
                      "--set", "dashboards.enabled=true", chart=chart)
        assert "ConfigMap" not in kinds(docs)
        assert {"DaemonSet", "PrometheusRule"} <= set(kinds(docs))  # rules are a template
    finally:
        shutil.rmtree(chart.parent, ignore_errors=True)


def test_dashboards_follow_the_cluster_label_and_show_the_cluster_picker(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "alerts-multicluster-values.yaml"))
    maps = [doc for doc in docs if doc["kind"] == "ConfigMap"]
    assert len(maps) == 3
    for config_map in maps:
        ((name, text),) = config_map["data"].items()
        source = (CHART / "files" / "dashboards" / name).read_text()
        # exactly what the generator's relabel() makes, with the picker shown
        assert text == panels.relabel(source, "region").replace('"hide":2', '"hide":0')
        model = json.loads(text)
        picker = next(v for v in model["templating"]["list"] if v["name"] == "cluster")
        assert picker["hide"] == 0
        assert picker["query"] == "label_values(podresources_build_info, region)"
        exprs = [target["expr"] for panel in model["panels"]
                 for each in [panel, *panel.get("panels", [])]
                 for target in each.get("targets", [])]
        assert exprs and all('region="$cluster"' in expr for expr in exprs)
        assert not any('cluster="' in expr for expr in exprs)
    defaults = render(helm, "--set", "dashboards.enabled=true")
    for config_map in (doc for doc in defaults if doc["kind"] == "ConfigMap"):
        ((name, text),) = config_map["data"].items()
        assert text == (CHART / "files" / "dashboards" / name).read_text().rstrip("\n")


def test_network_policy(helm, defaults):
    assert "NetworkPolicy" not in kinds(defaults)
    policy = one(render(helm, "--set", "networkPolicy.enabled=true"), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"port": 10075, "protocol": "TCP"}]}]
    assert policy["egress"] == []  # the kubelet is a unix socket away
    # The Kubernetes-API view needs egress; without addresses it would be egress anywhere.
    anywhere = run_helm(helm, "template", "--set", "networkPolicy.enabled=true",
                        "--set", "kubeApi.enabled=true")
    assert anywhere.returncode != 0
    assert ("networkPolicy with kubeApi.enabled needs networkPolicy.apiServerCidrs"
            in anywhere.stderr), anywhere.stderr
    docs = render(helm, "--set", "networkPolicy.enabled=true", "--set", "kubeApi.enabled=true",
                  "--set", "networkPolicy.apiServerCidrs={10.0.0.1/32,10.0.0.2/32}",
                  "--set", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.team=obs")
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"},
                                           {"port": 6443, "protocol": "TCP"}],
                                 "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}},
                                        {"ipBlock": {"cidr": "10.0.0.2/32"}}]}]
    peers = policy["ingress"][0]["from"]
    assert peers[0] == {"namespaceSelector": {"matchLabels": {"team": "obs"}}}
    test_pod_labels = one(docs, "Pod")["metadata"]["labels"]
    assert peers[1]["podSelector"]["matchLabels"].items() <= test_pod_labels.items()
