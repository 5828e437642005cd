"""Exporter health: is every node's exporter scraped, talking to its kubelet, and fresh?"""

from __future__ import annotations

from .panels import (
    CLUSTER,
    cluster_variable,
    dashboard,
    datasource_variable,
    merge,
    node_link,
    organize,
    query,
    query_variable,
    row,
    stat,
    state_timeline,
    table,
    timeseries,
)

UID = "podresources-exporter-health"
TITLE = "Podresources / Exporter health"

SELECTED = f'{CLUSTER},job=~"$job",node=~"$node"'
RATE = "[$__rate_interval]"
STALE_STEPS = ((None, "green"), (60, "orange"), (300, "red"))
NOT_OK = ',code!="OK"'
# An hour of a recorded rate, one point a minute. Prometheus 3 leaves the window's start out
# (60 points), 2.x keeps it (61): the sum is divided by the number of points, never multiplied
# by 60, so both give the hour's mean.
HOUR_BY_MINUTE = "[1h:1m]"


# Recording rules (dashboards/rules.py, groups podresources-exporter.health.rules, .refresh.rules
# and .latency.rules): one series per node (and method, code, kind) instead of every bucket and
# counter of every node.
CALLS = "node_method_code:podresources_api_requests:rate5m"
CALL_QUANTILE = "node_method_quantile:podresources_api_request_duration_seconds:histogram_quantile"
REFRESH_QUANTILE = "node_quantile:podresources_refresh_duration_seconds:histogram_quantile"
ISSUES = "node_kind:podresources_data_issues:rate5m"


def calls(code_matcher: str = "") -> str:
    """Kubelet calls per second by node, optionally only those with some status codes."""
    return f"sum by (node) ({CALLS}{{{SELECTED}{code_matcher}}})"


def quantile(q: str, metric: str, by: str) -> str:
    return f'max by ({by}) ({metric}{{{SELECTED},quantile="{q}"}})'


def status() -> list:
    return [
        row("Status"),
        stat("Targets up", "Exporter targets Prometheus scrapes successfully.",
             [query(f"sum(up{{{SELECTED}}})", instant=True)]),
        stat("Targets down", "Exporter targets Prometheus cannot scrape.",
             [query(f"sum(up{{{SELECTED}}} == bool 0)", instant=True)],
             steps=((None, "green"), (1, "red"))),
        stat("Kubelet unreachable",
             "Exporters whose last refresh from the kubelet podresources API failed.",
             [query(f"sum(podresources_up{{{SELECTED}}} == bool 0)", instant=True)],
             steps=((None, "green"), (1, "red"))),
        stat("Backing off", "Exporters currently delaying calls after failures.",
             [query(f"sum(podresources_backoff_seconds{{{SELECTED}}} > bool 0)", instant=True)],
             steps=((None, "green"), (1, "orange"))),
        stat("Oldest snapshot", "Age of the oldest data any selected exporter serves.",
             [query(f"max(time() - podresources_last_refresh_timestamp_seconds{{{SELECTED}}})",
                    instant=True)],
             unit="s", steps=STALE_STEPS),
        stat("Data issues (1h)",
             "Inconsistent kubelet items seen in the last hour, all kinds (see the panel below); "
             "the recorded per-second rates averaged minute by minute over the hour, times "
             "3,600 s, so an estimate.",
             [query(f"round(sum(sum_over_time({ISSUES}{{{SELECTED}}}{HOUR_BY_MINUTE})) * 3600 "
                    f"/ scalar(count_over_time(vector(1){HOUR_BY_MINUTE}))) or vector(0)",
                    instant=True)],
             steps=((None, "green"), (1, "orange"))),
        state_timeline("Scrape and kubelet status per node",
                       "Whether Prometheus reaches each exporter (scrape) and each exporter "
                       "reaches its kubelet (kubelet), over time.",
                       [query(f"max by (node) (up{{{SELECTED}}})", "{{node}} scrape"),
                        query(f"max by (node) (podresources_up{{{SELECTED}}})",
                              "{{node}} kubelet")],
                       links=[node_link("${__field.labels.node}")]),
    ]


def kubelet_calls() -> list:
    return [
        row("Kubelet calls"),
        timeseries("Kubelet calls by method and code",
                   "Calls to the kubelet podresources API per second, by method and gRPC status "
                   "code. RESOURCE_EXHAUSTED is the node-wide rate limit (or a reply over the "
                   "receive limit).",
                   [query(f"max by (node, method, code) ({CALLS}{{{SELECTED}}})",
                          "{{node}} {{method}} {{code}}")],
                   unit="reqps"),
        timeseries("Failed kubelet calls",
                   "Share of kubelet calls that did not answer OK, per node (0 when all did).",
                   [query(f"({calls(NOT_OK)} or 0 * {calls()}) / {calls()}",
                          "{{node}}")],
                   unit="percentunit", steps=((None, "green"), (0.01, "red"))),
        timeseries("Kubelet call latency (p99)",
                   "99th percentile duration of kubelet calls, by method.",
                   [query(quantile("0.99", CALL_QUANTILE, "node, method"),
                          "{{node}} {{method}}")],
                   unit="s"),
        timeseries("Back-off delay",
                   "Delay the exporter imposes on itself after failed calls; 0 when healthy. "
                   "Rate limiting backs off up to 60 s.",
                   [query(f"max by (node) (podresources_backoff_seconds{{{SELECTED}}})",
                          "{{node}}")],
                   unit="s"),
    ]


def refreshes() -> list:
    return [
        row("Refreshes and data"),
        timeseries("Refresh duration",
                   "Duration of one refresh (kubelet calls, decoding, accounting, rendering).",
                   [query(quantile("0.99", REFRESH_QUANTILE, "node"), "{{node}} p99"),
                    query(quantile("0.5", REFRESH_QUANTILE, "node"), "{{node}} p50")],
                   unit="s"),
        timeseries("Refreshes",
                   "Refreshes per second: 1 / --interval, more with --watch-path, fewer while "
                   "backing off.",
                   [query("sum by (node) (rate(podresources_refresh_duration_seconds_count"
                          f"{{{SELECTED}}}{RATE})) or sum by (node) (histogram_count(rate("
                          f"podresources_refresh_duration_seconds{{{SELECTED}}}{RATE})))",
                          "{{node}}")],
                   unit="ops"),
        timeseries("Snapshot age",
                   "Time since each exporter's last successful refresh (the alert fires above "
                   "5 minutes).",
                   [query("max by (node) (time() - podresources_last_refresh_timestamp_seconds"
                          f"{{{SELECTED}}})", "{{node}}")],
                   unit="s", steps=STALE_STEPS, links=[node_link("${__field.labels.node}")]),
        timeseries("Exporter memory",
                   "Resident memory of each exporter process (process_resident_memory_bytes); "
                   "the chart's limit is 192Mi (256Mi with the Kubernetes-API view).",
                   [query("max by (node) (process_resident_memory_bytes"
                          f"{{{SELECTED}}})", "{{node}}")],
                   unit="bytes"),
        timeseries("Exporter CPU",
                   "CPU time each exporter process uses, in cores (process_cpu_seconds_total).",
                   [query("max by (node) (rate(process_cpu_seconds_total"
                          f"{{{SELECTED}}}{RATE}))", "{{node}}")],
                   unit="short"),
        timeseries("Data issues by kind",
                   "Inconsistent items found in kubelet data per second, by kind "
                   "(docs/metrics.md lists the kinds); affected items are skipped or counted "
                   "once. Only nodes and kinds with issues have a line (over 5-minute windows); "
                   "without any, one line at 0.",
                   [query(f"max by (node, kind) ({ISSUES}{{{SELECTED}}}) or on () "
                          'label_replace(vector(0), "node", "all nodes", "", "")',
                          "{{node}} {{kind}}")],
                   unit="ops"),
    ]


def versions() -> list:
    return [
        row("Build and kubelet"),
        table("Build and kubelet API per node",
              "Exporter version and source revision, Python version, and what each node's "
              "kubelet offers: API version, GetAllocatableResources, Get and pod-level "
              "resources.",
              [query("max by (node, version, revision, python_version) "
                     f"(podresources_build_info{{{SELECTED}}})", table=True),
               query("max by (node, api_version, get_allocatable, get, pod_level) "
                     f"(podresources_kubelet_api_info{{{SELECTED}}})", table=True)],
              unit="none", transformations=[merge(), organize(
                  {"python_version": "Python", "api_version": "kubelet API",
                   "get_allocatable": "GetAllocatableResources", "get": "Get",
                   "pod_level": "pod-level resources"},
                  hide=("Time", "Value #A", "Value #B"),
                  order=("node", "version", "revision", "python_version", "api_version",
                         "get_allocatable", "get", "pod_level"))],
              links={"node": [node_link()]}, height=8),
    ]


def build() -> dict:
    variables = [
        datasource_variable(),
        cluster_variable(),
        query_variable("job", "Job", f"label_values(podresources_build_info{{{CLUSTER}}}, job)",
                       multi=True),
        query_variable("node", "Nodes",
                       f'label_values(podresources_build_info{{{CLUSTER},job=~"$job"}}, node)',
                       multi=True),
    ]
    panels = status() + kubelet_calls() + refreshes() + versions()
    return dashboard(TITLE, UID,
                     "Is every node's podresources-exporter scraped, talking to its kubelet and "
                     "serving fresh data?", variables, panels)
