"""The alerting and recording rules, written once and rendered three ways.

``python -m dashboards.generate`` turns the rules below, through ``rule_files.py``, into:

- ``dashboards/rules/podresources-exporter.rules.yaml``: a plain Prometheus rule file with the
  defaults (cluster label ``cluster``, the chart's job name, today's thresholds);
- ``charts/podresources-exporter/templates/_rules.tpl``: the same rules as a Helm template, so the
  chart's PrometheusRule takes the cluster label, job selector, thresholds, ``for``, severities,
  labels, annotations and runbook URL from values (rendered with the defaults it is exactly the
  plain file, which a test checks);
- ``mixin/rules.json``: the same rules with their placeholders, for the jsonnet mixin to fill
  from its ``_config``.

Placeholders in expressions and texts: ``<<cluster>>`` (the label that tells clusters apart; every
aggregation keeps it, so a global ruler never merges two clusters), ``<<job>>`` (label matchers
selecting the exporter's scrape job), ``<<threshold>>`` and ``<<for>>`` (the alert's own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLUSTER_LABEL = "cluster"
JOB_SELECTOR = 'job=~".*podresources-exporter.*"'
RUNBOOK_BASE_URL = ("https://github.com/podresources-exporter/podresources-exporter/blob/main/"
                    "docs/alerts.md#")
RECORDING_GROUP = "podresources-exporter.rules"
UTILIZATION_GROUP = "podresources-exporter.utilization.rules"
HEALTH_GROUP = "podresources-exporter.health.rules"
REFRESH_GROUP = "podresources-exporter.refresh.rules"
LATENCY_GROUP = "podresources-exporter.latency.rules"
ALLOCATABLE_LATENCY_GROUP = "podresources-exporter.latency.allocatable.rules"
GET_LATENCY_GROUP = "podresources-exporter.latency.get.rules"
GPU_GROUP = "podresources-exporter.gpu.rules"
ALERTING_GROUP = "podresources-exporter.alerts"
PLACEHOLDER = re.compile(r"<<(cluster|job|threshold|for)>>")


@dataclass(frozen=True)
class Record:
    record: str
    expr: str
    comment: str = ""
    # Labels the rule sets on its series: (name, value) pairs.
    labels: tuple[tuple[str, str], ...] = ()

    def rendered(self, cluster: str = CLUSTER_LABEL, job: str = JOB_SELECTOR) -> dict:
        rule = {"record": self.record, "expr": fill(self.expr, cluster=cluster, job=job)}
        return {**rule, "labels": dict(self.labels)} if self.labels else rule


@dataclass(frozen=True)
class Alert:
    alert: str
    expr: str
    for_: str
    summary: str
    description: str
    severity: str = "warning"
    threshold: int | float | None = None
    comment: str = ""
    # What the threshold means, for docs/alerts.md and the chart's values.
    threshold_means: str = ""


NUMA_RECORDS = (
    Record("node_numa_node:podresources_cpus_free:sum",
           "max by (<<cluster>>, node, numa_node) (podresources_cpus_allocatable)\n"
           "  - max by (<<cluster>>, node, numa_node) (podresources_cpus_allocated)",
           "Free exclusive CPUs per node and NUMA node."),
    Record("node:podresources_cpus_free:sum",
           "sum by (<<cluster>>, node) (node_numa_node:podresources_cpus_free:sum)"),
    Record("node:podresources_cpus_free_on_one_numa_node:max",
           'max by (<<cluster>>, node) (node_numa_node:podresources_cpus_free:sum'
           '{numa_node!="unknown"})',
           "The largest number of exclusive CPUs one NUMA node can still give (single-numa-node "
           "fit)."),
    Record("node_resource:podresources_utilization:ratio",
           "node_resource:podresources_allocated:sum\n"
           "  / (node_resource:podresources_allocatable:sum > 0)"),
    Record("node_resource:podresources_numa_utilization_ratio:max",
           "max by (<<cluster>>, node, resource) (podresources_numa_utilization_ratio)",
           "The fullest NUMA node of each node, per resource."),
    Record("node_shape:podresources_shape_capacity:max",
           "max by (<<cluster>>, node, shape) (podresources_shape_capacity)",
           "Pods of each --fit-shapes shape the node's kubelet would still admit, one after "
           "another, under the Topology Manager policy and scope in use (one series per node, "
           "however many monitors scrape it)."),
    Record("node_shape:podresources_shape_admitted:max",
           "max by (<<cluster>>, node, shape) (podresources_shape_admitted)",
           "1 where the node's kubelet would admit one more pod of the shape now."),
    Record("node_shape_reason:podresources_shape_rejection_info:max",
           "max by (<<cluster>>, node, shape, reason, blocking_resource) "
           "(podresources_shape_rejection_info)",
           "Why the node's kubelet would reject one more pod of the shape (only while it "
           "would)."),
)

# Allocatable and allocated per node and resource: the NUMA rules that read the most series (cpu,
# every memory type, every device resource of every NUMA node), in a group of their own so that
# each group's evaluation stays short on a fleet (docs/performance.md); groups are evaluated
# concurrently, and node_resource:podresources_utilization:ratio reads their latest values.
UTILIZATION_RECORDS = (
    Record("node_resource:podresources_allocatable:sum",
           "label_replace(\n"
           "  sum by (<<cluster>>, node) (max by (<<cluster>>, node, numa_node) "
           "(podresources_cpus_allocatable)),\n"
           '  "resource", "cpu", "", "")\n'
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  label_replace(\n"
           "    max by (<<cluster>>, node, numa_node, memory_type) "
           "(podresources_memory_allocatable_bytes),\n"
           '    "resource", "$1", "memory_type", "(.+)"))\n'
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  max by (<<cluster>>, node, numa_node, resource) (podresources_devices_allocatable))\n"
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  label_replace(\n"
           "    max by (<<cluster>>, node, numa_node, driver, pool) "
           "(podresources_dra_devices_allocatable)\n"
           "    unless on (<<cluster>>, node, driver) "
           'podresources_cpu_allocator_info{allocator="dra"},\n'
           '    "resource", "$1", "driver", "(.+)"))',
           "Allocatable and allocated per node and resource; `resource` is cpu, a memory type, "
           "a device resource or a DRA driver, as in podresources_numa_utilization_ratio (not "
           "a DRA CPU driver, whose devices' CPUs are cpu's). "
           "Node-level sums are exact: an item local to several NUMA nodes is exported once, "
           "under its group."),
    Record("node_resource:podresources_allocated:sum",
           "label_replace(\n"
           "  sum by (<<cluster>>, node) (max by (<<cluster>>, node, numa_node) "
           "(podresources_cpus_allocated)),\n"
           '  "resource", "cpu", "", "")\n'
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  label_replace(\n"
           "    max by (<<cluster>>, node, numa_node, memory_type) "
           "(podresources_memory_allocated_bytes),\n"
           '    "resource", "$1", "memory_type", "(.+)"))\n'
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  max by (<<cluster>>, node, numa_node, resource) (podresources_devices_allocated))\n"
           "or\n"
           "sum by (<<cluster>>, node, resource) (\n"
           "  label_replace(\n"
           "    max by (<<cluster>>, node, numa_node, driver, pool) "
           "(podresources_dra_devices_allocated)\n"
           "    unless on (<<cluster>>, node, driver) "
           'podresources_cpu_allocator_info{allocator="dra"},\n'
           '    "resource", "$1", "driver", "(.+)"))'),
)


def quantile(q: str, histogram: str, by: str, selector: str = "") -> str:
    """The ``q`` quantile of a histogram per ``by``, labelled quantile="q", read from either
    form Prometheus may store it in: the classic ``_bucket`` series, or the native histogram
    with custom buckets (NHCB) that Prometheus 3 makes of them when it converts classic
    histograms (``convert_classic_histograms_to_nhcb``) and drops the buckets. Where both are
    stored, the classic one is used; on Prometheus 2 the native name selects nothing."""
    matchers = f"{{{selector}}}" if selector else ""
    return ("label_replace(\n"
            f"  histogram_quantile({q}, sum by ({by}, le) (\n"
            f"    rate({histogram}_bucket{matchers}[5m])))\n"
            "  or\n"
            f"  histogram_quantile({q}, sum by ({by}) (\n"
            f"    rate({histogram}{matchers}[5m]))),\n"
            f'  "quantile", "{q}", "", "")')


# The exporter's own health, per node: what the health dashboard plots per node, recorded so
# that a panel reads one series per node and method instead of every bucket of every node. They
# keep `job` (the health dashboard's job variable); max/sum over the rest strips target labels.
# The two histograms' quantiles read the most series of any rule (13 buckets per node for the
# refresh duration, twice; 14 per method for the call latency), so each is in groups of its
# own, the call latency one group per method (the same record, disjoint label sets): groups
# are evaluated concurrently, and each stays short on a fleet (docs/performance.md).
HEALTH_RECORDS = (
    Record("node_method_code:podresources_api_requests:rate5m",
           "max by (<<cluster>>, job, node, method, code) (\n"
           "  rate(podresources_api_requests_total[5m]))",
           "Kubelet calls per second per node, method and gRPC status code (max: a node scraped "
           "twice is counted once)."),
    Record("node_kind:podresources_data_issues:rate5m",
           "max by (<<cluster>>, job, node, kind) (\n"
           "  rate(podresources_data_issues_total[5m])) > 0",
           "Data issues per second per node and kind, only where some were counted: every node "
           "exports ~17 kinds that are almost always 0, and a fleet's panel need not read them."),
)
REFRESH_RECORDS = (
    Record("node_quantile:podresources_refresh_duration_seconds:histogram_quantile",
           quantile("0.99", "podresources_refresh_duration_seconds", "<<cluster>>, job, node")
           + "\nor\n"
           + quantile("0.5", "podresources_refresh_duration_seconds", "<<cluster>>, job, node"),
           "The 99th and 50th percentiles of refresh durations per node (label quantile), from "
           "the classic buckets or, where a Prometheus converts them (NHCB), the native "
           "histogram."),
)
CALL_LATENCY = "node_method_quantile:podresources_api_request_duration_seconds:histogram_quantile"


def call_latency(selector: str, calls: str, method: str = "") -> tuple[Record]:
    """The call latency of some methods. A rule for one method also sets that method as a
    label: no change to its series, which carry it already, but it tells the rules apart for
    promtool's duplicate-rule check (same record, same labels)."""
    return (Record(CALL_LATENCY,
                   quantile("0.99", "podresources_api_request_duration_seconds",
                            "<<cluster>>, job, node, method", selector),
                   f"The 99th percentile of kubelet call durations per node, {calls} (label "
                   "quantile), from the classic buckets or the native histogram (NHCB).",
                   (("method", method),) if method else ()),)


LATENCY_RECORDS = call_latency('method="List"', "List calls", "List")
ALLOCATABLE_LATENCY_RECORDS = call_latency('method="GetAllocatableResources"',
                                           "GetAllocatableResources calls",
                                           "GetAllocatableResources")
GET_LATENCY_RECORDS = call_latency('method!~"List|GetAllocatableResources"',
                                   "Get calls and any other method")

# The physical GPU behind each GPU a container holds, as dcgm-exporter names it (label UUID), for
# the NUMA overview's GPU row. The device plugin's device ids take several forms: a whole GPU
# "GPU-<uuid>", a time-slicing replica "GPU-<uuid>::<n>" (several containers on one GPU), GKE's
# shared GPU "nvidia<n>/vgpu<m>", which names the GPU by its device file: that one is looked up
# in dcgm-exporter's own series of the same node by device="nvidia<n>". The node is
# dcgm-exporter's hostname label (the node name, from NODE_NAME, as its chart and the GPU
# operator set it), spelt Hostname before dcgm-exporter 4.8.3: both are read, and a series with
# neither is left out rather than joined as a node without a name (where two nodes' nvidia0
# would collide and fail the whole rule). A GPU that NVIDIA's DRA driver (gpu.nvidia.com)
# prepared for a claim is a DRA device (podresources_dra_device_info: driver, pool, device);
# dcgm-exporter's DRA path (KUBERNETES_ENABLE_DRA) labels that GPU's series with the same three
# (dra_driver_name, dra_pool_name, dra_device_name), which give its UUID. MIG devices
# ("MIG-<uuid>", resources nvidia.com/mig-*) are not here: dcgm-exporter never shows a MIG
# device's UUID. Any series of every GPU does for the lookups: the framebuffer memory used, under
# its name before dcgm-exporter 4.9 (DCGM_FI_DEV_FB_USED) and since (DCGM_FI_DEV_FB_USED_BYTES).
# The regular expressions live here, not in the dashboards, because Grafana would read
# label_replace's "$1" as one of its variables.
GPU_HOLDINGS = ("max by (<<cluster>>, node, resource, device_id, numa_node, namespace, pod, "
                "container, UUID)")
DCGM_HOSTNAME_LABELS = ("hostname", "Hostname")
DCGM_ANY_GPU_SERIES = '__name__=~"DCGM_FI_DEV_FB_USED_BYTES|DCGM_FI_DEV_FB_USED"'
DCGM_NODES = "\n    or\n".join(
    f'    label_replace({{{DCGM_ANY_GPU_SERIES},{label}!=""}}, "node", "$1", "{label}", "(.+)")'
    for label in DCGM_HOSTNAME_LABELS)
DRA_GPU_DRIVER = "gpu.nvidia.com"
DCGM_DRA_DEVICES = (
    "    label_replace(label_replace(label_replace(\n"
    f"      {{{DCGM_ANY_GPU_SERIES},dra_device_name!=\"\"}},\n"
    '      "driver", "$1", "dra_driver_name", "(.+)"),\n'
    '      "pool", "$1", "dra_pool_name", "(.+)"),\n'
    '      "device", "$1", "dra_device_name", "(.+)")')
GPU_RECORDS = (
    Record("gpu:podresources_device_info:relabel",
           f"{GPU_HOLDINGS} (\n"
           "  label_replace(\n"
           '    podresources_device_info{resource=~"nvidia.com/gpu.*",device_id=~"GPU-.+"},\n'
           '    "UUID", "$1", "device_id", "(GPU-[^:]+)(::[0-9]+)?"))\n'
           "or\n"
           f"{GPU_HOLDINGS} (\n"
           "  label_replace(\n"
           '    podresources_device_info{resource=~"nvidia.com/gpu.*",'
           'device_id=~"nvidia[0-9]+/vgpu[0-9]+"},\n'
           '    "device", "$1", "device_id", "(nvidia[0-9]+)/vgpu[0-9]+")\n'
           "  * on (<<cluster>>, node, device) group_left(UUID)\n"
           "  group by (<<cluster>>, node, device, UUID) (\n"
           f"{DCGM_NODES}))\n"
           "or\n"
           f"{GPU_HOLDINGS} (\n"
           "  label_join(\n"
           "    label_replace(\n"
           f'      podresources_dra_device_info{{driver="{DRA_GPU_DRIVER}"}},\n'
           '      "resource", "$1", "driver", "(.+)"),\n'
           '    "device_id", "/", "pool", "device")\n'
           "  * on (<<cluster>>, driver, pool, device) group_left(UUID)\n"
           "  group by (<<cluster>>, driver, pool, device, UUID) (\n"
           f"{DCGM_DRA_DEVICES}))",
           "One series per GPU a container holds, with the physical GPU's UUID (label UUID), "
           "for every device id form that names one: GPU-<uuid>, GPU-<uuid>::<n>, GKE's "
           "nvidia<n>/vgpu<m> (through dcgm-exporter's device label on the same node, named by "
           "its hostname label, Hostname before dcgm-exporter 4.8.3), and a GPU prepared by "
           "NVIDIA's DRA driver (resource gpu.nvidia.com, device_id <pool>/<device>, through "
           "dcgm-exporter's dra_* labels)."),
)

RECORDING_GROUPS = ((RECORDING_GROUP, NUMA_RECORDS), (UTILIZATION_GROUP, UTILIZATION_RECORDS),
                    (HEALTH_GROUP, HEALTH_RECORDS), (REFRESH_GROUP, REFRESH_RECORDS),
                    (LATENCY_GROUP, LATENCY_RECORDS),
                    (ALLOCATABLE_LATENCY_GROUP, ALLOCATABLE_LATENCY_RECORDS),
                    (GET_LATENCY_GROUP, GET_LATENCY_RECORDS), (GPU_GROUP, GPU_RECORDS))
RECORDS = tuple(record for _, records in RECORDING_GROUPS for record in records)

ALERTS = (
    Alert("PodresourcesExporterDown", "up{<<job>>} == 0", "5m",
          "Prometheus cannot scrape podresources-exporter.",
          "The podresources-exporter target {{ $labels.instance }} on node {{ $labels.node }} "
          "has not answered scrapes for <<for>>; the node's NUMA allocation metrics are "
          "missing."),
    Alert("PodresourcesKubeletUnreachable",
          "podresources_up == 0\n"
          "and on (<<cluster>>, job, instance)\n"
          'increase(podresources_api_requests_total{code="UNAVAILABLE"}[5m]) > 0',
          "5m",
          "podresources-exporter cannot read the kubelet podresources API.",
          "The kubelet podresources socket on node {{ $labels.node }} has not answered for "
          "<<for>>; the exporter keeps serving its last good snapshot.",
          comment="UNAVAILABLE: no socket, or nothing answering on it. A kubelet that "
                  "rate-limits, answers too much or too slowly is reachable; "
                  "PodresourcesKubeletRateLimited and PodresourcesSnapshotStale cover those."),
    Alert("PodresourcesKubeletRateLimited",
          "sum without (method, code) (\n"
          '  increase(podresources_api_requests_total{code="RESOURCE_EXHAUSTED"}[5m])\n'
          ") > 0",
          "10m",
          "The kubelet keeps rejecting podresources-exporter's calls.",
          "The kubelet on node {{ $labels.node }} answered {{ $value | humanize }} podresources "
          "calls with RESOURCE_EXHAUSTED in the last 5 minutes, for <<for>> on end: the "
          "node-wide rate limit is drained (or replies exceed the receive limit), and the "
          "exporter is backing off."),
    Alert("PodresourcesSnapshotStale",
          "time() - podresources_last_refresh_timestamp_seconds > <<threshold>>", "5m",
          "podresources-exporter is serving an old snapshot.",
          "The NUMA allocation data exported for node {{ $labels.node }} is "
          "{{ $value | humanizeDuration }} old; dashboards and alerts for this node show the "
          "past.",
          threshold=300, threshold_means="age of the snapshot, in seconds"),
    Alert("PodresourcesNumaCpuExhausted",
          'podresources_numa_utilization_ratio{resource="cpu"} >= <<threshold>>', "15m",
          "A NUMA node has almost no exclusive CPUs left.",
          "NUMA node {{ $labels.numa_node }} of node {{ $labels.node }} has "
          "{{ $value | humanizePercentage }} of its exclusively assignable CPUs allocated; "
          "Guaranteed pods that need CPUs on one NUMA node may not be admitted there.",
          threshold=0.95, threshold_means="utilization ratio (0 to 1)"),
    Alert("PodresourcesNumaMemoryExhausted",
          'podresources_numa_utilization_ratio{resource="memory"} >= <<threshold>>', "15m",
          "A NUMA node has almost no assignable memory left.",
          "NUMA node {{ $labels.numa_node }} of node {{ $labels.node }} has "
          "{{ $value | humanizePercentage }} of the memory the memory manager can assign "
          "allocated (memory spanning NUMA nodes is apportioned, an estimate).",
          threshold=0.95, threshold_means="utilization ratio (0 to 1)"),
    Alert("PodresourcesNumaHugepagesExhausted",
          'podresources_numa_utilization_ratio{resource=~"hugepages-.+"} >= <<threshold>>', "15m",
          "A NUMA node has almost no hugepages of one size left.",
          "NUMA node {{ $labels.numa_node }} of node {{ $labels.node }} has "
          "{{ $value | humanizePercentage }} of its {{ $labels.resource }} allocated.",
          threshold=0.95, threshold_means="utilization ratio (0 to 1)"),
    Alert("PodresourcesNumaDevicesExhausted",
          'podresources_numa_utilization_ratio{resource!~"cpu|memory|hugepages-.+"} '
          ">= <<threshold>>", "15m",
          "Every healthy device of a resource on a NUMA node is allocated.",
          "All healthy {{ $labels.resource }} devices local to NUMA node "
          "{{ $labels.numa_node }} of node {{ $labels.node }} are allocated; a pod needing one "
          "there, aligned with CPUs on that NUMA node, cannot be admitted.",
          severity="info", threshold=1, threshold_means="utilization ratio (0 to 1)"),
    Alert("PodresourcesContainersMisaligned",
          "podresources_misaligned_containers > <<threshold>>", "30m",
          "Containers' exclusive resources span NUMA nodes.",
          "{{ $value }} containers on node {{ $labels.node }} have exclusive CPUs, memory or "
          "devices on more than one NUMA node, which costs latency and memory bandwidth.",
          threshold=0, threshold_means="misaligned containers on the node tolerated"),
    Alert("PodresourcesShapeNoCapacity",
          "sum by (<<cluster>>, shape) (node_shape:podresources_shape_capacity:max) == 0", "30m",
          "No node can admit another pod of a fit shape.",
          "Not one node's kubelet would admit another pod of shape {{ $labels.shape }} "
          "under its Topology Manager policy and scope, for <<for>>: such a pod would stay "
          "Pending, or be rejected at admission if the scheduler placed it; "
          "podresources_shape_rejection_info{shape=\"{{ $labels.shape }}\"} says why on each "
          "node.",
          comment="Cluster-wide: one alert per shape, not per node. Shapes come from each "
                  "exporter's --fit-shapes (the chart's fitShapes); capacity is what each "
                  "node's kubelet would admit under its policy and scope."),
    Alert("PodresourcesDataIssues",
          "increase(podresources_data_issues_total[10m]) > 0", "30m",
          "The kubelet's podresources data is inconsistent.",
          "The exporter on node {{ $labels.node }} keeps finding inconsistent kubelet data of "
          "kind {{ $labels.kind }} ({{ $value | humanize }} items in 10 minutes); the affected "
          "items are skipped or counted once, so the node's figures may be off."),
)

ALERT_NAMES = tuple(alert.alert for alert in ALERTS)


def fill(text: str, *, cluster: str = CLUSTER_LABEL, job: str = JOB_SELECTOR,
         threshold=None, for_: str = "") -> str:
    values = {"cluster": cluster, "job": job, "threshold": number(threshold), "for": for_}
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], text)


def number(value) -> str:
    """A threshold as PromQL and Go's templates print it: 300, 0.95, 1."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def groups(cluster: str = CLUSTER_LABEL, job: str = JOB_SELECTOR,
           runbook_base_url: str = RUNBOOK_BASE_URL) -> list[dict]:
    """The rule groups with the given settings and every alert's defaults."""
    recording = [{"name": name, "rules": [
        r.rendered(cluster, job) for r in records]}
        for name, records in RECORDING_GROUPS]
    alerts = []
    for a in ALERTS:
        alerts.append({
            "alert": a.alert,
            "expr": fill(a.expr, cluster=cluster, job=job, threshold=a.threshold),
            "for": a.for_,
            "labels": {"severity": a.severity},
            "annotations": {
                "summary": a.summary,
                "description": fill(a.description, for_=a.for_),
                "runbook_url": runbook_base_url + a.alert.lower(),
            },
        })
    return [*recording, {"name": ALERTING_GROUP, "rules": alerts}]
