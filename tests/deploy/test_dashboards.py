"""The committed dashboards are what the generator makes, and follow the Grafana conventions.

Conventions (reference conventions section 3, docs/dashboards.md): datasource variable, stable
uids of at most 40 characters, null id, a unit and a description on every panel,
``$__rate_interval`` in rates, tables as instant queries, only metric names from
docs/metrics.md or the recording rules, minified copies for the chart.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from dashboards import generate, panels as building_blocks

from ..support.docs import documented_metrics, metric_names
from ..support.grafana import panels
from ..support.harness import REPO, require_tool

DASHBOARDS = {path.stem: json.loads(path.read_text(encoding="utf-8"))
              for path in sorted(generate.DASHBOARD_DIR.glob("*.json"))}
UIDS = {
    "numa-overview": "podresources-numa-overview",
    "cluster-topology-fit": "podresources-cluster-topology-fit",
    "exporter-health": "podresources-exporter-health",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRAFANA_VARIABLES = {"__rate_interval"}


def targets(model: dict) -> list[tuple[dict, dict]]:
    return [(panel, target) for panel in panels(model) for target in panel["targets"]]


def recorded_metrics() -> set[str]:
    groups = yaml.safe_load(generate.RULES.read_text(encoding="utf-8"))["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


def test_regenerating_gives_the_committed_files():
    assert generate.stale(generate.outputs()) == []


def test_generator_check_mode_names_an_out_of_date_file(tmp_path, monkeypatch, capsys):
    copies = {tmp_path / path.relative_to(generate.REPO): content
              for path, content in generate.outputs().items()}
    monkeypatch.setattr(generate, "outputs", lambda: copies)
    monkeypatch.setattr(generate, "REPO", tmp_path)
    monkeypatch.setattr(generate, "GENERATED", tuple(
        (tmp_path / directory.relative_to(REPO), pattern)
        for directory, pattern in generate.GENERATED))
    assert generate.main([]) == 0
    assert generate.main(["--check"]) == 0
    (tmp_path / "dashboards" / "numa-overview.json").write_text("{}", encoding="utf-8")
    (tmp_path / "dashboards" / "renamed.json").write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert generate.main(["--check"]) == 1
    assert capsys.readouterr().err.splitlines()[:2] == [
        "out of date: dashboards/numa-overview.json", "out of date: dashboards/renamed.json"]
    assert generate.main([]) == 0
    assert not (tmp_path / "dashboards" / "renamed.json").exists()  # left-overs are removed


def test_the_three_dashboards_with_stable_short_uids():
    assert {name: model["uid"] for name, model in DASHBOARDS.items()} == UIDS
    assert all(len(uid) <= 40 for uid in UIDS.values())


@pytest.mark.parametrize("name", sorted(UIDS))
def test_dashboard_is_bare_provisionable_json(name):
    """Grafana's classic model, which file provisioning (the dashboard sidecar's path) loads in
    Grafana 12 and 13. Grafana 13 refuses there what it takes for a v2 dashboard (elements or
    layout) or a Kubernetes-style resource (apiVersion, kind, metadata, spec):
    grafana/grafana#122663, #127928."""
    model = DASHBOARDS[name]
    assert model["id"] is None
    assert not {"elements", "layout", "apiVersion", "kind", "metadata", "spec"} & set(model)
    assert model["title"] and model["panels"] and model["templating"]["list"]
    assert model["graphTooltip"] == 1
    assert model["schemaVersion"] >= 39
    assert "podresources-exporter" in model["tags"]
    assert model["annotations"]["list"][0]["builtIn"] == 1


@pytest.mark.parametrize("name", sorted(UIDS))
def test_every_query_uses_the_datasource_variable(name):
    model = DASHBOARDS[name]
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]
    for panel, target in targets(model):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert target["datasource"] == DATASOURCE, panel["title"]
    assert "DS_PROMETHEUS" not in json.dumps(model) and "__inputs" not in model


@pytest.mark.parametrize("name", sorted(UIDS))
def test_every_panel_has_a_unit_a_description_and_a_unique_title_and_id(name):
    model = DASHBOARDS[name]
    titles = [panel["title"] for panel in panels(model)]
    assert len(titles) == len(set(titles)), titles
    ids = [panel["id"] for top in model["panels"] for panel in [top, *top.get("panels", [])]]
    assert ids == list(range(1, len(ids) + 1))
    for panel in panels(model):
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        assert panel.get("description"), panel["title"]
        assert panel["targets"], panel["title"]
        assert [t["refId"] for t in panel["targets"]] == list("ABCDEFGH"[:len(panel["targets"])])


@pytest.mark.parametrize("name", sorted(UIDS))
def test_queries_follow_the_conventions(name):
    model = DASHBOARDS[name]
    defined = {v["name"] for v in model["templating"]["list"]} | GRAFANA_VARIABLES
    for panel, target in targets(model):
        expr = target["expr"]
        for window in re.findall(r"\b(?:rate|irate)\([^()]*\[([^\]]*)\]", expr):
            assert window == "$__rate_interval", (panel["title"], expr)
        assert not re.search(r"\b(?:by|without)\s*\([^)]*\b(?:instance|job)\b", expr), expr
        used = set(re.findall(r"\$\{?(\w+)", expr + panel["title"]))
        assert used <= defined, (panel["title"], used - defined)
        if panel["type"] == "table":
            assert target["format"] == "table" and target["instant"], panel["title"]
        elif panel["type"] in ("stat", "bargauge"):
            assert target["instant"], panel["title"]


@pytest.mark.parametrize("name", sorted(UIDS))
def test_queries_use_only_documented_metrics_and_recording_rules(name):
    known = documented_metrics() | recorded_metrics() | {"up"}
    histogram_series = re.compile(r"_(bucket|sum|count)$")
    for panel, target in targets(DASHBOARDS[name]):
        for metric in metric_names(target["expr"]):
            assert histogram_series.sub("", metric) in known or metric in known, \
                (panel["title"], metric)


def test_node_variable_comes_from_the_exporters_node_label():
    for name, model in DASHBOARDS.items():
        node = next(v for v in model["templating"]["list"] if v["name"] == "node")
        assert re.fullmatch(r"label_values\(podresources_(node|build)_info.*, node\)",
                            node["query"]), name
    overview = {v["name"]: v for v in DASHBOARDS["numa-overview"]["templating"]["list"]}
    assert not overview["node"].get("multi")  # one node at a time
    assert overview["numa_node"]["includeAll"] and overview["namespace"]["includeAll"]


def test_chart_gets_minified_copies():
    for name, model in DASHBOARDS.items():
        copy = generate.CHART_DASHBOARDS / f"{name}.json"
        text = copy.read_text(encoding="utf-8")
        assert "\n" not in text and len(text.encode()) < 256 * 1024  # last-applied annotation
        assert json.loads(text) == model
    assert sorted(p.name for p in generate.CHART_DASHBOARDS.glob("*")) == \
        sorted(f"{name}.json" for name in UIDS)


@pytest.mark.parametrize("name", sorted(UIDS))
def test_every_query_selects_one_cluster_with_a_hidden_picker(name):
    model = DASHBOARDS[name]
    variables = model["templating"]["list"]
    picker = next(v for v in variables if v["name"] == "cluster")
    assert picker["type"] == "query"
    assert picker["query"] == "label_values(podresources_build_info, cluster)"
    assert not picker.get("multi") and not picker.get("includeAll")  # one cluster at a time
    assert [v["name"] for v in variables if v.get("hide") == 2] == ["cluster"]  # the only one
    assert '"hide":2' not in json.dumps(
        [v for v in variables if v["name"] != "cluster"], separators=(",", ":"))
    for panel, target in targets(model):
        assert 'cluster="$cluster"' in target["expr"], (panel["title"], target["expr"])
        for metric in re.findall(r"\b(podresources_\w+|DCGM_\w+|up|[a-z_]+:[a-z_:]+)\{([^}]*)\}",
                                 target["expr"]):
            assert 'cluster="$cluster"' in metric[1], (panel["title"], metric)
    for variable in variables:
        if variable["type"] == "query" and variable["name"] not in ("cluster",):
            assert 'cluster="$cluster"' in variable["query"], variable["name"]


def test_relabel_renames_the_cluster_label_everywhere_and_nothing_else():
    for name in UIDS:
        text = (generate.DASHBOARD_DIR / f"{name}.json").read_text(encoding="utf-8")
        renamed = json.loads(building_blocks.relabel(text, "region"))
        exprs = [target["expr"] for _, target in targets(renamed)]
        assert all('region="$cluster"' in expr for expr in exprs)
        assert not any("cluster=" in expr or "(cluster" in expr for expr in exprs)
        picker = next(v for v in renamed["templating"]["list"] if v["name"] == "cluster")
        assert picker["query"] == picker["definition"] == \
            "label_values(podresources_build_info, region)"
        # titles, descriptions and the $cluster variable itself are untouched
        original = json.loads(text)
        assert [p["title"] for p in panels_of(renamed)] == [p["title"] for p in panels_of(original)]


def panels_of(model: dict) -> list[dict]:
    return panels(model)


def all_links(model: dict) -> list[tuple[str, dict]]:
    found = []
    for panel in panels(model):
        for override in panel["fieldConfig"].get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] == "links":
                    found += [(panel["title"], link) for link in prop["value"]]
    return found


def test_data_links_lead_to_the_node_overview_and_the_mixin_pod_dashboard():
    links = {name: all_links(model) for name, model in DASHBOARDS.items()}
    node_url = "/d/podresources-numa-overview/"
    pod_url = "/d/6581e46e4e5c7ba40a07646395ef7b23/k8s-resources-pod?"
    cluster_links = [link["url"] for _, link in links["cluster-topology-fit"]]
    assert cluster_links and all(url.startswith(node_url) for url in cluster_links)
    assert any("var-node=${__value.raw}" in url for url in cluster_links)  # table cells
    assert any("var-node=${__field.labels.node}" in url for url in cluster_links)  # series
    overview_links = [link["url"] for _, link in links["numa-overview"]]
    assert overview_links and all(url.startswith(pod_url) for url in overview_links)
    assert all("var-namespace=${__data.fields.namespace}&var-pod=${__value.raw}" in url
               for url in overview_links)
    assert links["exporter-health"]
    for name, found in links.items():
        for title, link in found:
            # time range, data source and cluster go along
            assert "${datasource:queryparam}&${cluster:queryparam}&${__url_time_range}" in \
                link["url"], (name, title)
            assert link["title"]
    assert UIDS["numa-overview"] in node_url


def test_gpu_row_joins_dcgm_to_pods_and_numa_nodes():
    model = DASHBOARDS["numa-overview"]
    gpu_row = next(panel for panel in model["panels"] if panel["title"] == "GPUs (dcgm-exporter)")
    assert gpu_row["type"] == "row" and gpu_row["collapsed"] is True
    inner = gpu_row["panels"]
    assert [panel["title"] for panel in inner] == [
        "GPUs: utilization and memory by pod and NUMA node", "GPU utilization by NUMA node",
        "GPU memory used by pod"]
    exprs = " ".join(target["expr"] for panel in inner for target in panel["targets"])
    # every DCGM metric under both names, the canonical one (dcgm-exporter 4.9 and later, base
    # units) first and the legacy one converted to the same unit, per GPU: a GPU that both
    # releases report during an upgrade counts once
    pairs = (("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_GPU_UTIL", "/ 100"),
             ("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_USED", "* 1048576"),
             ("DCGM_FI_DEV_FB_FREE_BYTES", "DCGM_FI_DEV_FB_FREE", "* 1048576"))
    for canonical, legacy, convert in pairs:
        either = (f'(max by (UUID) ({canonical}{{cluster="$cluster",UUID=~"$gpu"}}) or '
                  f'max by (UUID) ({legacy}{{cluster="$cluster",UUID=~"$gpu"}}) {convert})')
        assert either in exprs, canonical
    assert exprs.count("DCGM_FI_DEV_FB_FREE") == 2  # only the memory share reads it
    # DCGM's UUID meets the recorded physical GPU of every held device, on this node's GPUs only;
    # the holders are the many side (a time-sliced GPU has several), keyed on resource and
    # device id, never on a device id alone
    holdings = ('max by (UUID, resource, device_id, numa_node, namespace, pod, container) '
                '(gpu:podresources_device_info:relabel{cluster="$cluster",node="$node",'
                'UUID=~"$gpu"}) * on (UUID) group_left() (max by (UUID) (DCGM_')
    assert exprs.count(holdings) == 5  # the memory share divides by two DCGM series more
    assert "topk" not in exprs and "label_join" not in exprs and "$1" not in exprs
    # dcgm-exporter's series are read for this node's GPUs only (by UUID), never the cluster's
    dcgm = re.findall(r"DCGM_\w+\{([^}]*)\}", exprs)
    assert len(dcgm) == 14 and set(dcgm) == {'cluster="$cluster",UUID=~"$gpu"'}
    units = {panel["title"]: panel["fieldConfig"]["defaults"]["unit"] for panel in inner}
    assert units == {"GPUs: utilization and memory by pod and NUMA node": "short",
                     "GPU utilization by NUMA node": "percentunit",
                     "GPU memory used by pod": "bytes"}
    gpu = next(v for v in model["templating"]["list"] if v["name"] == "gpu")
    assert gpu["query"] == ('label_values(gpu:podresources_device_info:relabel{'
                            'cluster="$cluster",node="$node"}, UUID)')
    # All means the node's GPUs (Grafana writes them as (a|b|...)), not ".*"
    assert gpu["multi"] and gpu["includeAll"] and not gpu.get("allValue")
    assert gpu["current"]["value"] == "$__all" and not gpu.get("hide")
    # the regular expressions that find the GPU in a device id live in a recording rule
    record = next(r for g in yaml.safe_load(generate.RULES.read_text(encoding="utf-8"))["groups"]
                  for r in g["rules"] if r.get("record") == "gpu:podresources_device_info:relabel")
    assert '"(GPU-[^:]+)(::[0-9]+)?"' in record["expr"]
    assert '"(nvidia[0-9]+)/vgpu[0-9]+"' in record["expr"]


def test_dra_devices_per_numa_node_on_the_overview_and_summed_on_the_cluster_dashboard():
    overview = {panel["title"]: panel for panel in panels(DASHBOARDS["numa-overview"])}
    exprs = [t["expr"] for t in overview["DRA devices per NUMA node"]["targets"]]
    node = 'cluster="$cluster",node="$node"'
    assert exprs == [f"max by (driver, pool, numa_node) (podresources_dra_{metric}{{{node}}})"
                     for metric in ("devices_allocatable", "devices_allocated", "device_shares")]
    assert overview["Tainted DRA devices"]["targets"][0]["expr"] == (
        "max by (driver, pool, numa_node, effect) "
        f"(podresources_dra_devices_tainted{{{node}}}) > 0")
    assert "numa_node" in overview["DRA devices → pods"]["targets"][0]["expr"]
    assert "no NUMA" not in overview["DRA devices → pods"]["description"]
    device_bars = [t["expr"] for t in overview["Device utilization"]["targets"]]
    assert 'resource=~".+/.+"' in device_bars[0]
    assert 'resource=~".+\\\\..+",resource!~".*/.*"' in device_bars[1]  # DRA drivers
    cluster = {panel["title"]: panel for panel in panels(DASHBOARDS["cluster-topology-fit"])}
    summed = ("sum by (node, driver, pool) (max by (node, driver, pool, numa_node) "
              '(podresources_dra_devices_allocated{cluster="$cluster",node=~"$node"}))')
    assert cluster["DRA devices by node, driver and pool"]["targets"][0]["expr"] == summed
    assert cluster["DRA devices by driver"]["targets"][0]["expr"] == f"sum by (driver) ({summed})"


# What a fleet's Prometheus pays per panel (docs/performance.md, benchmarks/fleet/): the raw
# series every node carries many of are read through recording rules, never plotted raw.
RECORDED_ONLY = ("podresources_api_request_duration_seconds_bucket",
                 "podresources_refresh_duration_seconds_bucket",
                 "podresources_api_requests_total", "podresources_data_issues_total")


@pytest.mark.parametrize("name", sorted(UIDS))
def test_panels_read_histograms_and_per_kind_counters_through_recording_rules(name):
    for panel, target in targets(DASHBOARDS[name]):
        for metric in RECORDED_ONLY:
            assert metric not in target["expr"], (panel["title"], target["expr"])
    if name == "exporter-health":
        exprs = " ".join(target["expr"] for _, target in targets(DASHBOARDS[name]))
        for record in ("node_method_code:podresources_api_requests:rate5m",
                       "node_method_quantile:podresources_api_request_duration_seconds:"
                       "histogram_quantile",
                       "node_quantile:podresources_refresh_duration_seconds:histogram_quantile",
                       "node_kind:podresources_data_issues:rate5m"):
            assert record in exprs and record in recorded_metrics()


def test_docs_name_the_minimum_grafana_version_for_the_schema():
    text = (REPO / "docs" / "dashboards.md").read_text(encoding="utf-8")
    versions = {model["schemaVersion"] for model in DASHBOARDS.values()}
    assert versions == {42}
    assert "schemaVersion 42" in text and "Grafana 12.2" in text


def mixin_dashboards(config: str = "{}") -> dict:
    binary = require_tool("jsonnet", "PyPI package jsonnet (tests/install-tools.sh)")
    result = subprocess.run(
        [binary, "-J", str(REPO / "mixin"), "-e",
         f'((import "mixin.libsonnet") + {config}).grafanaDashboards'],
        capture_output=True, text=True, timeout=60, cwd=REPO / "mixin")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.external
def test_mixin_dashboards_are_the_generated_ones_renamed_by_its_config():
    names = {f"{UIDS[name]}.json": name for name in UIDS}
    assert {names[key]: model for key, model in mixin_dashboards().items()} == DASHBOARDS
    renamed = mixin_dashboards('{_config+:: {clusterLabel: "region", showMultiCluster: true}}')
    for key, model in renamed.items():
        text = (generate.DASHBOARD_DIR / f"{names[key]}.json").read_text(encoding="utf-8")
        expected = json.loads(building_blocks.relabel(text, "region"))
        for variable in expected["templating"]["list"]:
            if variable["name"] == "cluster":
                variable["hide"] = 0
        assert model == expected


def test_fit_answers_per_shape_and_the_cpus_list_cannot_show():
    overview = {panel["title"]: panel for panel in panels(DASHBOARDS["numa-overview"])}
    node = 'cluster="$cluster",node="$node"'
    admitted = [t["expr"] for t in overview["Pod shapes: admitted"]["targets"]]
    assert admitted[0] == f"max by (shape) (podresources_shape_admitted{{{node}}})"
    assert f"podresources_shape_rejection_info{{{node}}}" in admitted[1]
    assert '"reason", "admitted"' in admitted[1] and "$1" not in admitted[1]
    assert "podresources_kubelet_config_info" in \
        overview["Kubelet configuration"]["targets"][0]["expr"]
    # the kubelet's own count, of this node's kubelet target only, minus what List shows
    hidden = overview["Exclusive CPUs the kubelet holds that List cannot show"]
    assert hidden["targets"][0]["expr"] == (
        'max by (numa_node) (kubelet_cpu_manager_allocation_per_numa{cluster="$cluster",'
        'instance="$kubelet"}) - max by (numa_node) '
        f"(podresources_cpus_allocated{{{node}}})")
    variables = {v["name"]: v for v in DASHBOARDS["numa-overview"]["templating"]["list"]}
    assert variables["kubelet"]["query"] == \
        f"label_values(kubelet_node_name{{{node}}}, instance)"
    assert not variables["kubelet"].get("multi")
    # the cluster dashboard reads the fit answers through recording rules, one per node
    cluster = " ".join(t["expr"] for _, t in targets(DASHBOARDS["cluster-topology-fit"]))
    for record in ("node_shape:podresources_shape_admitted:max",
                   "node_shape_reason:podresources_shape_rejection_info:max",
                   "node_shape:podresources_shape_capacity:max"):
        assert record in cluster and record in recorded_metrics()
    assert "podresources_shape_admitted{" not in cluster
    assert "podresources_shape_rejection_info{" not in cluster
