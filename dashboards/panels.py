"""Building blocks the three dashboards share, on top of grafana-foundation-sdk 0.0.21.

Conventions they enforce (docs/dashboards.md, reference conventions section 3): every query goes to
the ``${datasource}`` variable, every panel has a unit and a description, panel ids and query
refIds are assigned once at the end so that they are stable, the dashboard ``id`` is null.
Queries strip target labels with ``max by (...)`` (one exporter per node, so a node scraped twice
is not counted twice) and add things up with ``sum by (...)``; none of them groups by ``job`` or
``instance``. Every query selects one cluster (``cluster="$cluster"``, the hidden-by-default
``cluster`` variable), so nothing adds up two clusters where one Grafana reads several.
"""

from __future__ import annotations

import json
import string
import warnings

# The SDK nudges towards the v2 (app-platform) dashboard schema; Grafana's file provisioning and
# the sidecar take the classic dashboard JSON, which is what we generate.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import (
        bargauge as bargauge_builder,
        common as common_builder,
        dashboard as dashboard_builder,
        prometheus as prometheus_builder,
        stat as stat_builder,
        statetimeline as statetimeline_builder,
        table as table_builder,
        timeseries as timeseries_builder,
    )
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.common import (
        BarGaugeDisplayMode,
        BigValueColorMode,
        BigValueGraphMode,
        BigValueTextMode,
        DataSourceRef,
        GraphThresholdsStyleMode,
        LegendDisplayMode,
        LegendPlacement,
        SortOrder,
        TooltipDisplayMode,
        VisibilityMode,
        VizOrientation,
    )
    from grafana_foundation_sdk.models.dashboard import (
        DashboardCursorSync,
        DashboardLinkType,
        DataTransformerConfig,
        DynamicConfigValue,
        Threshold,
        ThresholdsMode,
        ValueMap,
        ValueMappingResult,
        VariableHide,
        VariableOption,
        VariableRefresh,
        VariableSort,
    )
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
TAG = "podresources-exporter"
REFRESH = "30s"

# The label that tells clusters apart, as the committed JSON has it. The chart (clusterLabel) and
# the mixin (_config.clusterLabel) rewrite exactly the two forms relabel() rewrites.
CLUSTER_LABEL = "cluster"
CLUSTER = 'cluster="$cluster"'
CLUSTER_VALUES = "label_values(podresources_build_info, cluster)"

# Data links keep the time range, the data source and the cluster.
KEEP = "${datasource:queryparam}&${cluster:queryparam}&${__url_time_range}"
NODE_OVERVIEW = "/d/podresources-numa-overview/podresources-node-numa-overview"
# kubernetes-mixin's "Kubernetes / Compute Resources / Pod" (uid md5("k8s-resources-pod.json"),
# as kube-prometheus-stack ships it); its variables are datasource, cluster, namespace and pod.
MIXIN_POD = "/d/6581e46e4e5c7ba40a07646395ef7b23/k8s-resources-pod"


def node_link(node: str = "${__value.raw}") -> tuple[str, str]:
    return ("NUMA overview of this node", f"{NODE_OVERVIEW}?{KEEP}&var-node={node}")


def pod_link(namespace: str = "${__data.fields.namespace}",
             pod: str = "${__value.raw}") -> tuple[str, str]:
    return ("Pod's compute resources (kubernetes-mixin)",
            f"{MIXIN_POD}?{KEEP}&var-namespace={namespace}&var-pod={pod}")


def links_property(links) -> DynamicConfigValue:
    return DynamicConfigValue(id_val="links",
                              value=[{"title": title, "url": url} for title, url in links])


def relabel(text: str, label: str) -> str:
    """A dashboard's JSON (as text) with the cluster label renamed: its matcher in every query
    and its name in the cluster variable's label_values()."""
    return (text.replace('cluster=\\"$cluster\\"', f'{label}=\\"$cluster\\"')
            .replace('cluster="$cluster"', f'{label}="$cluster"')
            .replace(", cluster)", f", {label})"))

# Utilization: orange from 80 %, red from 95 % (the exhaustion alerts' threshold).
UTILIZATION_STEPS = ((None, "green"), (0.8, "orange"), (0.95, "red"))
UP_MAPPING = {"0": ("down", "red"), "1": ("up", "green")}


def numa_matcher() -> str:
    """``numa_node`` matcher that also keeps items attributed to a group containing the choice.

    A device local to NUMA nodes 0 and 1 is exported once under ``numa_node="0,1"``; it belongs
    in a view of NUMA node 0 as much as in one of NUMA node 1.
    """
    return 'numa_node=~"(.*,)?($numa_node)(,.*)?"'


def query(expr: str, legend: str = "", *, instant: bool = False,
          table: bool = False) -> prometheus_builder.Dataquery:
    """A Prometheus query against the datasource variable; tables are instant by nature."""
    target = prometheus_builder.Dataquery().expr(expr).datasource(DATASOURCE)
    if legend:
        target = target.legend_format(legend)
    if table:
        target = target.format(PromQueryFormat.TABLE).instant()
    elif instant:
        target = target.instant()
    else:
        target = target.range()
    return target


def thresholds(steps=UTILIZATION_STEPS) -> dashboard_builder.ThresholdsConfig:
    return dashboard_builder.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(
        [Threshold(value=value, color=color) for value, color in steps])


def value_mappings(mapping: dict[str, tuple[str, str]]) -> list[ValueMap]:
    return [ValueMap(options={value: ValueMappingResult(text=text, color=color, index=index)
                              for index, (value, (text, color)) in enumerate(mapping.items())})]


def _common(panel, title: str, description: str, unit: str, targets, width: int, height: int):
    panel = panel.title(title).description(description).unit(unit).datasource(DATASOURCE)
    for target in targets:
        panel = panel.with_target(target)
    return panel.span(width).height(height)


def bar_gauge(title: str, description: str, targets, *, unit: str = "percentunit",
              max_value: float | None = 1, steps=UTILIZATION_STEPS, width: int = 6,
              height: int = 8) -> bargauge_builder.Panel:
    """Horizontal bars, one per series, reduced to the last value."""
    panel = (bargauge_builder.Panel().min(0).thresholds(thresholds(steps))
             .display_mode(BarGaugeDisplayMode.GRADIENT)
             .orientation(VizOrientation.HORIZONTAL)
             .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"])
                             .values(False)))
    if max_value is not None:
        panel = panel.max(max_value)
    return _common(panel, title, description, unit, targets, width, height)


def stat(title: str, description: str, targets, *, unit: str = "short", steps=None,
         mapping: dict[str, tuple[str, str]] | None = None,
         text_mode: BigValueTextMode = BigValueTextMode.AUTO, width: int = 4,
         height: int = 4) -> stat_builder.Panel:
    panel = (stat_builder.Panel().graph_mode(BigValueGraphMode.NONE)
             .color_mode(BigValueColorMode.VALUE).text_mode(text_mode)
             .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"])
                             .values(False)))
    panel = panel.thresholds(thresholds(steps or ((None, "green"),)))
    if mapping:
        panel = panel.mappings(value_mappings(mapping))
    return _common(panel, title, description, unit, targets, width, height)


def timeseries(title: str, description: str, targets, *, unit: str, width: int = 12,
               height: int = 8, dashed_regex: str = "", steps=None,
               links=()) -> timeseries_builder.Panel:
    """Lines with a table legend; ``dashed_regex`` names the capacity series drawn dashed."""
    panel = (timeseries_builder.Panel().fill_opacity(10).show_points(VisibilityMode.NEVER)
             .line_width(1).min(0)
             .legend(common_builder.VizLegendOptions().show_legend(True)
                     .display_mode(LegendDisplayMode.TABLE).placement(LegendPlacement.BOTTOM)
                     .calcs(["lastNotNull", "max"]))
             .tooltip(common_builder.VizTooltipOptions().mode(TooltipDisplayMode.MULTI)
                      .sort(SortOrder.DESCENDING)))
    if steps:
        panel = panel.thresholds(thresholds(steps)).thresholds_style(
            common_builder.GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED))
    if dashed_regex:
        panel = panel.override_by_regexp(dashed_regex, [
            DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
            DynamicConfigValue(id_val="custom.fillOpacity", value=0)])
    if links:
        panel = panel.override_by_regexp(".*", [links_property(links)])
    return _common(panel, title, description, unit, targets, width, height)


def state_timeline(title: str, description: str, targets, *, width: int = 24,
                   height: int = 6, links=()) -> statetimeline_builder.Panel:
    """Up/down per series over time."""
    panel = (statetimeline_builder.Panel().mappings(value_mappings(UP_MAPPING))
             .thresholds(thresholds(((None, "red"), (1, "green"))))
             .show_value(VisibilityMode.NEVER))
    if links:
        panel = panel.override_by_regexp(".*", [links_property(links)])
    return _common(panel, title, description, "none", targets, width, height)


COLOR_BACKGROUND = {"type": "color-background"}


def table(title: str, description: str, targets, *, unit: str = "short",
          transformations: list[DataTransformerConfig] = (), units: dict[str, str] | None = None,
          colored: dict[str, tuple] | None = None,
          mapped: dict[str, dict[str, tuple[str, str]]] | None = None, sort_by: str = "",
          links: dict[str, list[tuple[str, str]]] | None = None,
          width: int = 24, height: int = 8) -> table_builder.Panel:
    """An instant table; ``units``, ``colored`` (thresholds), ``mapped`` (value mappings) and
    ``links`` (data links) are per column name."""
    panel = table_builder.Panel().filterable(True)
    for transformation in transformations:
        panel = panel.with_transformation(transformation)
    properties: dict[str, list[DynamicConfigValue]] = {}
    for column, column_unit in (units or {}).items():
        properties.setdefault(column, []).append(DynamicConfigValue(id_val="unit",
                                                                    value=column_unit))
    for column, steps in (colored or {}).items():
        properties.setdefault(column, []).extend([
            DynamicConfigValue(id_val="custom.cellOptions", value=COLOR_BACKGROUND),
            DynamicConfigValue(id_val="thresholds", value=thresholds(steps).build())])
    for column, mapping in (mapped or {}).items():
        properties.setdefault(column, []).append(
            DynamicConfigValue(id_val="mappings", value=value_mappings(mapping)))
    for column, column_links in (links or {}).items():
        properties.setdefault(column, []).append(links_property(column_links))
    for column, column_properties in properties.items():
        panel = panel.override_by_name(column, column_properties)
    if sort_by:
        panel = panel.sort_by([common_builder.TableSortByFieldState().display_name(sort_by)
                               .desc(True)])
    return _common(panel, title, description, unit, targets, width, height)


def merge() -> DataTransformerConfig:
    """Join the instant tables of several queries on their common label columns."""
    return DataTransformerConfig(id_val="merge", options={})


def organize(rename: dict[str, str], hide: tuple[str, ...] = ("Time",),
             order: tuple[str, ...] = ()) -> DataTransformerConfig:
    return DataTransformerConfig(id_val="organize", options={
        "excludeByName": {name: True for name in hide},
        "renameByName": rename,
        "indexByName": {name: index for index, name in enumerate(order)},
    })


def matrix_table(title: str, description: str, expr: str, row_field: str, column_field: str,
                 *, unit: str, steps, width: int = 12, height: int = 9,
                 row_links=()) -> table_builder.Panel:
    """One row per ``row_field`` value, one coloured column per ``column_field`` value."""
    panel = (table_builder.Panel().filterable(True).thresholds(thresholds(steps))
             .cell_options(COLOR_BACKGROUND)
             .with_transformation(DataTransformerConfig(id_val="groupingToMatrix", options={
                 "rowField": row_field, "columnField": column_field, "valueField": "Value",
                 "emptyValue": "null"}))
             .with_transformation(organize({f"{row_field}\\{column_field}": row_field}))
             .override_by_name(row_field, [
                 DynamicConfigValue(id_val="custom.cellOptions", value={"type": "auto"}),
                 *([links_property(row_links)] if row_links else [])]))
    return _common(panel, title, description, unit, [query(expr, table=True)], width, height)


def row(title: str, *, collapsed_panels=()) -> dashboard_builder.Row:
    """A row; with ``collapsed_panels`` it is folded and holds them (shown when opened)."""
    builder = dashboard_builder.Row(title)
    if collapsed_panels:
        builder = builder.collapsed(True)
        for panel in collapsed_panels:
            builder = builder.with_panel(panel)
    return builder


def cluster_variable() -> dashboard_builder.QueryVariable:
    """Which cluster, where one Grafana reads several (Thanos, Mimir); hidden by default, as in
    kubernetes-mixin: with one cluster there is nothing to choose (the chart's
    dashboards.multiCluster and the mixin's showMultiCluster show it). The only hidden variable,
    so that switch can find it."""
    return (dashboard_builder.QueryVariable("cluster").label("Cluster").datasource(DATASOURCE)
            .query(CLUSTER_VALUES).definition(CLUSTER_VALUES)
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.NATURAL_ASC)
            .hide(VariableHide.HIDE_VARIABLE)
            .description("The cluster whose exporters the panels show (label "
                         f"{CLUSTER_LABEL}); every query selects exactly one."))


def datasource_variable() -> dashboard_builder.DatasourceVariable:
    return (dashboard_builder.DatasourceVariable("datasource").label("Data source")
            .type("prometheus"))


def query_variable(name: str, label: str, definition: str, *, multi: bool = False,
                   description: str = "", all_value: str | None = ".*"
                   ) -> dashboard_builder.QueryVariable:
    """A ``label_values(...)`` variable; multi-value ones default to All: ``.*``, or with
    ``all_value=None`` every value the variable offers, as a regex alternation (``(a|b)``), which
    selects by those values instead of matching everything."""
    variable = (dashboard_builder.QueryVariable(name).label(label).datasource(DATASOURCE)
                .query(definition).definition(definition)
                .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.NATURAL_ASC))
    if description:
        variable = variable.description(description)
    if multi:
        variable = (variable.multi(True).include_all(True)
                    .current(VariableOption(selected=True, text="All", value="$__all")))
        if all_value is not None:
            variable = variable.all_value(all_value)
    return variable


def custom_variable(name: str, label: str, values: list[str], default: str,
                    description: str) -> dashboard_builder.CustomVariable:
    return (dashboard_builder.CustomVariable(name).label(label).description(description)
            .values(",".join(values)).allow_custom_value(True)
            .options([VariableOption(selected=value == default, text=value, value=value)
                      for value in values])
            .current(VariableOption(selected=True, text=default, value=default)))


def dashboard(title: str, uid: str, description: str, variables, panels) -> dict:
    """Assemble, encode and stamp a dashboard: null id, sequential panel ids and refIds."""
    builder = (dashboard_builder.Dashboard(title).uid(uid).description(description).tags([TAG])
               .tooltip(DashboardCursorSync.CROSSHAIR).refresh(REFRESH).time("now-1h", "now")
               .timezone("browser").editable()
               .link(dashboard_builder.DashboardLink("Podresources dashboards")
                     .type(DashboardLinkType.DASHBOARDS).tags([TAG]).as_dropdown(True)
                     .include_vars(True).keep_time(True))
               .annotation(dashboard_builder.AnnotationQuery().name("Annotations & Alerts")
                           .datasource(DataSourceRef(type_val="grafana", uid="-- Grafana --"))
                           .enable(True).hide(True).icon_color("rgba(0, 211, 255, 1)")
                           .type("dashboard").built_in(1)))
    for variable in variables:
        builder = builder.with_variable(variable)
    for panel in panels:
        builder = builder.with_row(panel) if isinstance(panel, dashboard_builder.Row) \
            else builder.with_panel(panel)
    model = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    model["id"] = None
    every = [nested for panel in model["panels"] for nested in [panel, *panel.get("panels", [])]]
    for panel_id, panel in enumerate(every, start=1):
        panel["id"] = panel_id
        for letter, target in zip(string.ascii_uppercase, panel.get("targets", [])):
            target["refId"] = letter
    return model
