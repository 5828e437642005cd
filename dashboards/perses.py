"""The dashboards as Perses dashboards, made from the same panels as the Grafana JSON.

Perses (kube-prometheus' Perses addon, OpenShift's monitoring through the Cluster Observability
Operator) loads dashboards as ``PersesDashboard`` resources of the perses-operator, API version
``perses.dev/v1alpha2``: ``spec.config`` is a Perses dashboard spec (``display``, ``variables``,
``panels``, ``layouts``, ``duration``, ``refreshInterval``) and ``spec.instanceSelector`` picks
the Perses servers. This module translates each generated Grafana dashboard (``build()`` of
``overview``, ``cluster``, ``health``), so both formats show the same queries, titles,
descriptions, units and layout:

- a query variable ``label_values(<selector>, <label>)`` becomes a ``ListVariable`` with the
  ``PrometheusLabelValuesVariable`` plugin (multi-value ones allow All: ``.*``, or every value
  offered where the Grafana variable has no custom all value); the custom variable a
  ``StaticListVariable``; the ``datasource`` variable is left out (Perses queries the project's
  default Prometheus data source);
- time series panels become ``TimeSeriesChart``, stats ``StatChart``, bar gauges ``BarChart``,
  the state timeline ``StatusHistoryChart``, tables ``Table`` (several queries joined on their
  label columns, as Grafana's merge does; renamed and hidden columns as Grafana's organize does);
  every query is a ``PrometheusTimeSeriesQuery`` with the same expression and legend;
- each Grafana row becomes a grid layout with the row's title, folded where the row is.

Grafana's ``$__rate_interval`` and ``$var`` work the same in Perses. What does not carry over:
data links, value mappings and cell colours (Perses shows the numbers).
"""

from __future__ import annotations

import re

API_VERSION = "perses.dev/v1alpha2"
UNITS = {"short": "decimal", "none": "decimal", "percentunit": "percent-decimal",
         "percent": "percent", "bytes": "bytes", "s": "seconds", "ops": "ops/sec",
         "reqps": "requests/sec"}
LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\)$")


def unit(grafana_unit: str | None) -> dict:
    return {"unit": UNITS.get(grafana_unit or "short", "decimal")}


def panel_key(title: str, panel_id: int) -> str:
    """A Perses panel id from the title: letters, digits and underscores."""
    slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:48]
    return f"{slug}_{panel_id}"


def variable(grafana: dict) -> dict | None:
    name = grafana["name"]
    display = {"name": grafana.get("label") or name, "hidden": grafana.get("hide", 0) == 2}
    if grafana.get("description"):
        display["description"] = grafana["description"]
    if grafana["type"] == "datasource":
        return None
    spec: dict = {"name": name, "display": display,
                  "allowMultiple": bool(grafana.get("multi")),
                  "allowAllValue": bool(grafana.get("includeAll"))}
    if grafana["type"] == "custom":
        values = [option["value"] for option in grafana["options"]]
        spec["plugin"] = {"kind": "StaticListVariable", "spec": {"values": values}}
        spec["defaultValue"] = grafana["current"]["value"]
        return {"kind": "ListVariable", "spec": spec}
    match = LABEL_VALUES.match(grafana["query"])
    assert match, grafana["query"]
    selector, label = match.groups()
    plugin_spec: dict = {"labelName": label}
    if selector:
        plugin_spec["matchers"] = [selector]
    spec["plugin"] = {"kind": "PrometheusLabelValuesVariable", "spec": plugin_spec}
    if grafana.get("includeAll"):
        spec["defaultValue"] = "$__all"
        if grafana.get("allValue"):
            spec["customAllValue"] = grafana["allValue"]
    spec["sort"] = "alphabetical-asc"
    return {"kind": "ListVariable", "spec": spec}


def queries(grafana: dict) -> list[dict]:
    out = []
    for target in grafana.get("targets", []):
        query: dict = {"query": target["expr"]}
        if target.get("legendFormat"):
            query["seriesNameFormat"] = target["legendFormat"]
        out.append({"kind": "TimeSeriesQuery", "spec": {"plugin": {
            "kind": "PrometheusTimeSeriesQuery", "spec": query}}})
    return out


def table_spec(grafana: dict) -> dict:
    """Perses' Table: one query's labels and value, or several joined on their common label
    columns (value columns ``value #1``, ``value #2``... in query order), with Grafana's
    renames and hidden columns."""
    targets = grafana.get("targets", [])
    refs = [target["refId"] for target in targets]
    spec: dict = {"density": "compact"}
    rename: dict[str, str] = {}
    hidden: set[str] = set()
    for transformation in grafana.get("transformations", []):
        if transformation["id"] == "organize":
            rename.update(transformation["options"].get("renameByName", {}))
            hidden |= set(transformation["options"].get("excludeByName", {}))
    if len(targets) > 1:
        spec["transforms"] = [{"kind": "MergeSeries", "spec": {}}]
    columns = []

    def perses_column(grafana_column: str) -> str:
        if grafana_column.startswith("Value #"):
            return f"value #{refs.index(grafana_column.removeprefix('Value #')) + 1}"
        return "value" if grafana_column == "Value" else grafana_column

    for grafana_column in sorted(set(rename) | hidden):
        column: dict = {"name": perses_column(grafana_column)}
        if grafana_column in hidden:
            column["hide"] = True
        elif grafana_column in rename:
            column["header"] = rename[grafana_column]
        columns.append(column)
    column_units = {override["matcher"]["options"]: prop["value"]
                    for override in grafana["fieldConfig"].get("overrides", [])
                    if override["matcher"]["id"] == "byName"
                    for prop in override["properties"] if prop["id"] == "unit"}
    for column in columns:
        if column.get("header") in column_units:
            column["format"] = unit(column_units[column["header"]])
    if columns:
        spec["columnSettings"] = columns
    return spec


def plugin(grafana: dict) -> dict:
    kind = grafana["type"]
    grafana_unit = grafana["fieldConfig"]["defaults"].get("unit")
    if kind == "timeseries":
        return {"kind": "TimeSeriesChart", "spec": {
            "legend": {"position": "bottom", "mode": "table", "values": ["last", "max"]},
            "yAxis": {"format": unit(grafana_unit), "min": 0}}}
    if kind == "stat":
        return {"kind": "StatChart", "spec": {"calculation": "last-number",
                                              "format": unit(grafana_unit)}}
    if kind == "bargauge":
        return {"kind": "BarChart", "spec": {"calculation": "last-number",
                                             "format": unit(grafana_unit), "sort": "desc",
                                             "mode": "value"}}
    if kind == "state-timeline":
        return {"kind": "StatusHistoryChart", "spec": {"legend": {"position": "bottom"}}}
    if kind == "table":
        return {"kind": "Table", "spec": table_spec(grafana)}
    raise ValueError(f"no Perses panel for Grafana's {kind!r}")


def panel(grafana: dict) -> dict:
    display = {"name": grafana["title"]}
    if grafana.get("description"):
        display["description"] = grafana["description"]
    return {"kind": "Panel", "spec": {"display": display, "plugin": plugin(grafana),
                                      "queries": queries(grafana)}}


def layouts_and_panels(grafana_panels: list[dict]) -> tuple[list[dict], dict[str, dict]]:
    """One grid per Grafana row (a row's panels follow it; a folded row holds its own), item
    positions relative to the row."""
    panels: dict[str, dict] = {}
    layouts: list[dict] = []
    grid: dict | None = None
    origin = 0

    def add(grafana: dict) -> None:
        assert grid is not None, "every panel follows a row"
        key = panel_key(grafana["title"], grafana["id"])
        panels[key] = panel(grafana)
        position = grafana["gridPos"]
        grid["spec"]["items"].append({
            "x": position["x"], "y": position["y"] - origin, "width": position["w"],
            "height": position["h"], "content": {"$ref": f"#/spec/panels/{key}"}})

    for grafana in grafana_panels:
        if grafana["type"] == "row":
            grid = {"kind": "Grid", "spec": {"display": {
                "title": grafana["title"],
                "collapse": {"open": not grafana.get("collapsed", False)}}, "items": []}}
            layouts.append(grid)
            origin = grafana["gridPos"]["y"] + 1
            inner = grafana.get("panels", [])
            if inner:
                origin = min(p["gridPos"]["y"] for p in inner)
            for nested in inner:
                add(nested)
            continue
        add(grafana)
    return layouts, panels


def dashboard_spec(grafana: dict) -> dict:
    """The Perses dashboard spec (``spec.config`` of a PersesDashboard) of a Grafana model."""
    layouts, panels = layouts_and_panels(grafana["panels"])
    variables = [v for v in map(variable, grafana["templating"]["list"]) if v]
    return {"display": {"name": grafana["title"], "description": grafana["description"]},
            "variables": variables, "panels": panels, "layouts": layouts,
            "duration": grafana["time"]["from"].removeprefix("now-"),
            "refreshInterval": grafana["refresh"]}


def resource(name: str, grafana: dict, namespace: str = "monitoring") -> dict:
    """A complete PersesDashboard, for ``kubectl apply`` without the chart."""
    return {"apiVersion": API_VERSION, "kind": "PersesDashboard",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "podresources-exporter"}},
            "spec": {"config": dashboard_spec(grafana)}}
