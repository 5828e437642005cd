"""The dashboards for every loader, from the one generated source: the Grafana sidecar's
ConfigMaps, grafana-operator's GrafanaDashboards and the perses-operator's PersesDashboards,
each behind its own chart value.

PersesDashboards are checked by Perses' own Go model (``tests/tools/persescheck``, Perses
v0.54.0): it must accept each dashboard and keep it field for field. No registry here serves
grafana-operator's CRD or API types, so a GrafanaDashboard is checked against what the operator
documents for grafana.integreatly.org/v1beta1 (``spec.instanceSelector`` required, the dashboard
JSON as the string ``spec.json``) and against the sidecar's JSON, which it must equal.
"""

from __future__ import annotations

import json
import subprocess

from dashboards import generate, perses

from ..support.chart import CHART, FULLNAME, NAMESPACE, kinds, render, run_helm
from ..support.harness import REPO
from ..support.prometheus import unavailable

PERSESCHECK = REPO / ".tools" / "persescheck" / "persescheck"
NAMES = ("cluster-topology-fit", "exporter-health", "numa-overview")


def persescheck(paths: list) -> str:
    if not PERSESCHECK.exists():
        log = PERSESCHECK.parent / "build.log"
        unavailable("persescheck is not built (" + (log.read_text().strip()[-200:]
                                                     if log.exists() else "never built")
                    + "); bash tests/tools/persescheck.sh builds it, tests/run.sh runs that")
    result = subprocess.run([str(PERSESCHECK), *map(str, paths)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"].removeprefix(FULLNAME + "-"): doc for doc in docs
            if doc["kind"] == kind}


def exprs_of_grafana(model: dict) -> list[str]:
    return sorted(target["expr"] for panel in model["panels"]
                  for each in [panel, *panel.get("panels", [])]
                  for target in each.get("targets", []))


def exprs_of_perses(config: dict) -> list[str]:
    return sorted(query["spec"]["plugin"]["spec"]["query"] for panel in config["panels"].values()
                  for query in panel["spec"]["queries"])


# Every loader at once, as a cluster with several would set them (not a ci/ values file: the
# control-plane tests install every one of those where only the Prometheus Operator's CRDs are).
EVERY_LOADER = ("--set", "dashboards.enabled=true", "--set", "dashboards.namespace=observability",
                "--set", "dashboards.grafanaOperator.enabled=true",
                "--set", "dashboards.grafanaOperator.instanceSelector.matchLabels.team=hpc",
                "--set", "dashboards.grafanaOperator.folder=HPC",
                "--set", "dashboards.grafanaOperator.resyncPeriod=5m",
                "--set", "dashboards.grafanaOperator.allowCrossNamespaceImport=true",
                "--set", "dashboards.perses.enabled=true",
                "--set", "dashboards.perses.instanceSelector.matchLabels.app=perses")


def test_every_loader_lints_strictly(helm):
    result = run_helm(helm, "lint", "--strict", *EVERY_LOADER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout, result.stdout
    docs = render(helm, *EVERY_LOADER)
    operator = by_kind(docs, "GrafanaDashboard")["numa-overview"]["spec"]
    # --set adds to the default selector's labels (a values file replaces it with null first)
    assert {key: operator[key] for key in operator if key != "json"} == {
        "instanceSelector": {"matchLabels": {"dashboards": "grafana", "team": "hpc"}},
        "folder": "HPC",
        "resyncPeriod": "5m", "allowCrossNamespaceImport": True}
    assert {doc["metadata"]["namespace"] for doc in docs if doc["kind"] in (
        "ConfigMap", "GrafanaDashboard", "PersesDashboard")} == {"observability"}
    bad = run_helm(helm, "template", "--set", "dashboards.grafanaOperator.resyncPeriod=often")
    assert bad.returncode != 0 and "resyncPeriod" in bad.stderr, bad.stderr


def test_each_loader_has_its_switch(helm):
    assert not {"ConfigMap", "GrafanaDashboard", "PersesDashboard"} & set(kinds(render(helm)))
    for value, kind in (("dashboards.enabled", "ConfigMap"),
                        ("dashboards.grafanaOperator.enabled", "GrafanaDashboard"),
                        ("dashboards.perses.enabled", "PersesDashboard")):
        docs = render(helm, "--set", f"{value}=true")
        assert set(kinds(docs)) & {"ConfigMap", "GrafanaDashboard", "PersesDashboard"} == {kind}
        assert sorted(by_kind(docs, kind)) == list(NAMES)


def test_grafana_dashboards_carry_the_sidecars_json(helm):
    docs = render(helm, "--set", "dashboards.enabled=true",
                  "--set", "dashboards.grafanaOperator.enabled=true",
                  "--set", "dashboards.namespace=grafana",
                  "--set", "dashboards.grafanaOperator.resyncPeriod=10m")
    maps, operator = by_kind(docs, "ConfigMap"), by_kind(docs, "GrafanaDashboard")
    for name in NAMES:
        resource = operator[name]
        assert resource["apiVersion"] == "grafana.integreatly.org/v1beta1"
        assert resource["metadata"]["namespace"] == "grafana"
        assert resource["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}
        assert resource["spec"]["folder"] == "NUMA"
        assert resource["spec"]["resyncPeriod"] == "10m"
        assert set(resource["spec"]) == {"instanceSelector", "folder", "resyncPeriod", "json"}
        assert resource["spec"]["json"] == maps[name]["data"][f"{name}.json"]
        assert json.loads(resource["spec"]["json"]) == \
            json.loads((CHART / "files" / "dashboards" / f"{name}.json").read_text())


def test_perses_dashboards_pass_perses_own_model_and_match_grafanas(helm, tmp_path):
    docs = render(helm, "--set", "dashboards.perses.enabled=true",
                  "--set", "dashboards.perses.instanceSelector.matchLabels.app=perses")
    resources = by_kind(docs, "PersesDashboard")
    paths = []
    for name, resource in resources.items():
        assert resource["apiVersion"] == perses.API_VERSION
        assert resource["metadata"]["namespace"] == NAMESPACE
        assert resource["spec"]["instanceSelector"] == {"matchLabels": {"app": "perses"}}
        (path := tmp_path / f"{name}.json").write_text(json.dumps(resource))
        paths.append(path)
        # the same source: every Grafana query, title and the layout's rows, and the files
        # generated for kubectl apply hold the chart's spec
        grafana = json.loads((REPO / "dashboards" / f"{name}.json").read_text())
        config = resource["spec"]["config"]
        assert exprs_of_perses(config) == exprs_of_grafana(grafana)
        assert config["display"]["name"] == grafana["title"]
        assert [layout["spec"]["display"]["title"] for layout in config["layouts"]] == \
            [panel["title"] for panel in grafana["panels"] if panel["type"] == "row"]
        assert json.loads((REPO / "dashboards" / "perses" / f"{name}.json").read_text())[
            "spec"]["config"] == config
    paths.append(generate.PERSES_DIR / "numa-overview.json")
    assert persescheck(paths).count(": ok") == len(NAMES) + 1


def test_perses_dashboards_follow_the_cluster_label_and_show_the_cluster_picker(helm, tmp_path):
    docs = render(helm, "--values", str(CHART / "ci" / "alerts-multicluster-values.yaml"),
                  "--set", "dashboards.perses.enabled=true")
    resources = by_kind(docs, "PersesDashboard")
    assert sorted(resources) == list(NAMES)
    for name, resource in resources.items():
        config = resource["spec"]["config"]
        picker = next(v["spec"] for v in config["variables"] if v["spec"]["name"] == "cluster")
        assert picker["display"]["hidden"] is False
        assert picker["plugin"]["spec"] == {"labelName": "region",
                                            "matchers": ["podresources_build_info"]}
        exprs = exprs_of_perses(config)
        assert exprs and all('region="$cluster"' in expr for expr in exprs)
        assert not any('cluster="' in expr for expr in exprs)
        (tmp_path / f"{name}.json").write_text(json.dumps(resource))
    persescheck(sorted(tmp_path.glob("*.json")))


def test_perses_variables_and_panels_as_grafanas():
    """Hand-picked: the overview's variables and GPU table in Perses' terms."""
    config = perses.dashboard_spec(json.loads(
        (REPO / "dashboards" / "numa-overview.json").read_text()))
    variables = {v["spec"]["name"]: v["spec"] for v in config["variables"]}
    assert list(variables) == ["cluster", "node", "numa_node", "namespace", "gpu", "kubelet"]
    assert variables["gpu"]["allowMultiple"] and variables["gpu"]["allowAllValue"]
    assert "customAllValue" not in variables["gpu"]  # All: every GPU offered, not .*
    assert variables["numa_node"]["customAllValue"] == ".*"
    assert variables["node"]["plugin"] == {"kind": "PrometheusLabelValuesVariable", "spec": {
        "labelName": "node", "matchers": ['podresources_node_info{cluster="$cluster"}']}}
    gpu_table = next(p["spec"] for p in config["panels"].values()
                     if p["spec"]["display"]["name"].startswith("GPUs: utilization"))
    assert gpu_table["plugin"]["kind"] == "Table"
    assert gpu_table["plugin"]["spec"]["transforms"] == [{"kind": "MergeSeries", "spec": {}}]
    columns = {c["name"]: c for c in gpu_table["plugin"]["spec"]["columnSettings"]}
    assert columns["value #1"] == {"name": "value #1", "header": "utilization",
                                   "format": {"unit": "percent-decimal"}}
    assert columns["value #2"]["format"] == {"unit": "bytes"}
    assert columns["Time"] == {"name": "Time", "hide": True}
    gpu_row = next(layout["spec"] for layout in config["layouts"]
                   if layout["spec"]["display"]["title"] == "GPUs (dcgm-exporter)")
    assert gpu_row["display"]["collapse"] == {"open": False} and len(gpu_row["items"]) == 3
    assert config["duration"] == "1h"
