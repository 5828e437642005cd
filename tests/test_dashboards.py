"""The committed dashboards are what the generator makes, and follow the Grafana conventions.

Conventions (reference conventions section 3, docs/dashboards.md): datasource variable, stable
uids of at most 40 characters, null id, a unit and a description on every panel,
``$__rate_interval`` in rates, tables as instant queries, only metric names from
docs/metrics.md or the recording rules, minified copies for the chart.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from dashboards import generate

from .helpers import REPO

DASHBOARDS = {path.stem: json.loads(path.read_text(encoding="utf-8"))
              for path in sorted(generate.DASHBOARD_DIR.glob("*.json"))}
UIDS = {
    "numa-overview": "podresources-numa-overview",
    "cluster-topology-fit": "podresources-cluster-topology-fit",
    "exporter-health": "podresources-exporter-health",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRAFANA_VARIABLES = {"__rate_interval"}


def panels(model: dict) -> list[dict]:
    found = []
    for panel in model["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return [panel for panel in found if panel["type"] != "row"]


def targets(model: dict) -> list[tuple[dict, dict]]:
    return [(panel, target) for panel in panels(model) for target in panel["targets"]]


def documented_metrics() -> set[str]:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(podresources_\w+)` \|", text, re.MULTILINE))


def recorded_metrics() -> set[str]:
    groups = yaml.safe_load(generate.RULES.read_text(encoding="utf-8"))["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: exporter series and recording rules."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    return {name for name in re.findall(r"[a-zA-Z_:][\w:]*", without_strings)
            if name.startswith("podresources_") or ":" in name}


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
    model = DASHBOARDS[name]
    assert model["id"] is None
    assert "kind" not in model and "spec" not in model  # not the app-platform Manifest wrapper
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
    ids = [panel["id"] for panel in model["panels"]]
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
