"""Metric families from an accounting snapshot, and the exposition text served on /metrics.

Families are rebuilt from each snapshot (the client_python custom-collector pattern), so a pod
that left the node leaves ``/metrics`` with the next refresh. The data section is rendered once
per refresh, never per scrape. Every family here is a gauge, and gauges render byte-for-byte
the same in the Prometheus text format and in OpenMetrics (help texts avoid double quotes for
that reason), so one rendering serves both formats.

``CATALOG`` is the single list of every metric the exporter can expose, with its type, help
text and labels; ``docs/metrics.md`` is checked against it and against a live ``/metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from .accounting import Accounting
from .model import Topology


@dataclass(frozen=True)
class MetricDef:
    name: str
    type: str  # gauge | counter | histogram
    help: str
    labels: tuple[str, ...] = ()
    group: str = "node"  # node | workload | health | kube-api


CATALOG: tuple[MetricDef, ...] = (
    # ---- node and NUMA level ----
    MetricDef("podresources_node_info", "gauge",
              "Always 1; node is the Kubernetes node name, kubelet_api the podresources API "
              "version in use (v1, v1alpha1, or none before first contact).",
              ("node", "kubelet_api")),
    MetricDef("podresources_numa_node_cpus", "gauge",
              "Online logical CPUs on the NUMA node, from sysfs.", ("numa_node",)),
    MetricDef("podresources_cpus_allocatable", "gauge",
              "CPUs the kubelet can assign exclusively (GetAllocatableResources; absent under "
              "CPU manager policy none).", ("numa_node",)),
    MetricDef("podresources_cpus_allocated", "gauge",
              "Exclusive CPUs assigned to pods and containers, each CPU counted once.",
              ("numa_node",)),
    MetricDef("podresources_memory_allocatable_bytes", "gauge",
              "Memory and hugepages the memory manager can assign (absent under memory manager "
              "policy None).", ("numa_node", "memory_type")),
    MetricDef("podresources_memory_allocated_bytes", "gauge",
              "Memory and hugepages assigned by the memory manager; a block spanning NUMA nodes "
              "is attributed once to the group (numa_node 0,1).", ("numa_node", "memory_type")),
    MetricDef("podresources_devices_allocatable", "gauge",
              "Healthy device-plugin devices (distinct ids); a device local to several NUMA "
              "nodes is attributed once to the group.", ("numa_node", "resource")),
    MetricDef("podresources_devices_allocated", "gauge",
              "Device-plugin devices assigned to containers (distinct ids).",
              ("numa_node", "resource")),
    MetricDef("podresources_numa_utilization_ratio", "gauge",
              "Allocated over allocatable per single NUMA node, capped at 1; resource is cpu, a "
              "memory type or a device resource. Memory spanning nodes is apportioned (an "
              "estimate).", ("numa_node", "resource")),
    MetricDef("podresources_dra_devices_allocated", "gauge",
              "Distinct DRA devices prepared for containers.", ("driver", "pool")),
    MetricDef("podresources_misaligned_containers", "gauge",
              "Containers whose exclusive CPUs, memory and devices need more than one NUMA "
              "node."),
    # ---- workload level ----
    MetricDef("podresources_container_cpus", "gauge", "Exclusive CPUs of a container.",
              ("namespace", "pod", "container", "numa_node"), "workload"),
    MetricDef("podresources_container_memory_bytes", "gauge",
              "Memory and hugepages assigned to a container by the memory manager.",
              ("namespace", "pod", "container", "numa_node", "memory_type"), "workload"),
    MetricDef("podresources_container_devices", "gauge",
              "Device-plugin devices assigned to a container.",
              ("namespace", "pod", "container", "resource", "numa_node"), "workload"),
    MetricDef("podresources_container_numa_nodes", "gauge",
              "NUMA nodes the container's exclusive CPUs, memory and devices need (1 means "
              "aligned).", ("namespace", "pod", "container"), "workload"),
    MetricDef("podresources_pod_cpus", "gauge",
              "Pod-level exclusive CPUs (pod-level resource managers, Kubernetes 1.37 and "
              "later); they include the containers' own.", ("namespace", "pod", "numa_node"),
              "workload"),
    MetricDef("podresources_pod_memory_bytes", "gauge",
              "Pod-level memory and hugepages (Kubernetes 1.37 and later).",
              ("namespace", "pod", "numa_node", "memory_type"), "workload"),
    MetricDef("podresources_device_info", "gauge",
              "1 per device assigned to a container, to join device metrics to pods.",
              ("resource", "device_id", "numa_node", "namespace", "pod", "container"), "workload"),
    MetricDef("podresources_dra_device_info", "gauge",
              "1 per DRA device prepared for a container; share_id is set for shared devices.",
              ("driver", "pool", "device", "claim", "namespace", "pod", "container", "share_id"),
              "workload"),
    # ---- exporter health ----
    MetricDef("podresources_up", "gauge",
              "1 if the last refresh from the kubelet succeeded, else 0.", (), "health"),
    MetricDef("podresources_last_refresh_timestamp_seconds", "gauge",
              "Unix time of the last successful refresh (0 before the first one).", (), "health"),
    MetricDef("podresources_refresh_duration_seconds", "histogram",
              "Duration of one refresh: kubelet calls, decoding, accounting and rendering.",
              (), "health"),
    MetricDef("podresources_api_requests_total", "counter",
              "Calls to the kubelet podresources API by method and gRPC status code.",
              ("method", "code"), "health"),
    MetricDef("podresources_api_request_duration_seconds", "histogram",
              "Duration of calls to the kubelet podresources API.", ("method",), "health"),
    MetricDef("podresources_backoff_seconds", "gauge",
              "Current delay imposed by back-off after failed calls; 0 when healthy.", (),
              "health"),
    MetricDef("podresources_kubelet_api_info", "gauge",
              "What the kubelet supports, as detected: API version, GetAllocatableResources, "
              "Get, and pod-level resources (true, false or unknown).",
              ("api_version", "get_allocatable", "get", "pod_level"), "health"),
    MetricDef("podresources_data_issues_total", "counter",
              "Inconsistent items seen in kubelet data, by kind; the rest of each snapshot is "
              "still exported.", ("kind",), "health"),
    MetricDef("podresources_build_info", "gauge",
              "Always 1; the exporter version, the source revision it was built from (unknown "
              "outside a release image) and the Python version running it.",
              ("version", "revision", "python_version"), "health"),
    # ---- the Kubernetes-API view (--kube-api) ----
    MetricDef("podresources_extended_resource_capacity", "gauge",
              "Node status.capacity of an extended resource (a domain-qualified resource name "
              "outside kubernetes.io, from a device plugin or a Node status patch).",
              ("resource",), "kube-api"),
    MetricDef("podresources_extended_resource_allocatable", "gauge",
              "Node status.allocatable of an extended resource.", ("resource",), "kube-api"),
    MetricDef("podresources_extended_resource_requested", "gauge",
              "Effective requests of an extended resource summed over the pods bound to this "
              "node that have not terminated (init containers and sidecars by the Kubernetes "
              "rule, plus pod overhead).", ("resource",), "kube-api"),
    MetricDef("podresources_extended_resource_stale", "gauge",
              "1 when the node advertises the extended resource but no device plugin serves "
              "it: capacity 0, or no healthy device in GetAllocatableResources and nothing "
              "requested; else 0.", ("resource",), "kube-api"),
    MetricDef("podresources_dra_devices_allocatable", "gauge",
              "Devices published in the ResourceSlices of this node (spec.nodeName), per driver "
              "and pool; only the newest generation of a pool counts.", ("driver", "pool"),
              "kube-api"),
    MetricDef("podresources_kube_api_up", "gauge",
              "1 if the last list or watch of the resource (node, pods, resourceslices) in the "
              "Kubernetes API succeeded, else 0.", ("resource",), "kube-api"),
    MetricDef("podresources_kube_api_errors_total", "counter",
              "Failed list and watch attempts against the Kubernetes API, by resource.",
              ("resource",), "kube-api"),
)

HELP = {m.name: m.help for m in CATALOG}


@dataclass(frozen=True)
class RenderOptions:
    workload_metrics: bool = True
    device_info: bool = True


def _gauge(name: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, HELP[name], labels=list(labels))


def _family(name: str, labels: tuple[str, ...], values: dict) -> GaugeMetricFamily:
    family = _gauge(name, labels)
    for key in sorted(values):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], values[key])
    return family


def node_series(accounting: Accounting, topology: Topology) -> list[tuple[str, tuple, dict]]:
    """Node and NUMA series as (name, label names, {label values: value}), those that exist."""
    series: list[tuple[str, tuple, dict]] = [
        ("podresources_numa_node_cpus", ("numa_node",),
         {(str(n.numa_id),): len(n.cpus) for n in topology.numa_nodes.values()}),
    ]

    def add(name: str, labels: tuple, values: dict | None) -> None:
        if values:
            series.append((name, labels, {k if isinstance(k, tuple) else (k,): v
                                          for k, v in values.items()}))

    if accounting.cpus_allocatable is not None:
        add("podresources_cpus_allocatable", ("numa_node",), accounting.cpus_allocatable)
    add("podresources_cpus_allocated", ("numa_node",), accounting.cpus_allocated)
    add("podresources_memory_allocatable_bytes", ("numa_node", "memory_type"),
        accounting.memory_allocatable)
    add("podresources_memory_allocated_bytes", ("numa_node", "memory_type"),
        accounting.memory_allocated)
    add("podresources_devices_allocatable", ("numa_node", "resource"),
        accounting.devices_allocatable)
    add("podresources_devices_allocated", ("numa_node", "resource"), accounting.devices_allocated)
    add("podresources_numa_utilization_ratio", ("numa_node", "resource"), accounting.utilization)
    add("podresources_dra_devices_allocated", ("driver", "pool"),
        accounting.dra_devices_allocated)
    if accounting.misaligned_containers is not None:
        series.append(("podresources_misaligned_containers", (),
                       {(): accounting.misaligned_containers}))
    return series


def node_families(accounting: Accounting, topology: Topology) -> list[Metric]:
    """Node and NUMA families (no workload, no health metrics)."""
    return [_family(name, labels, values)
            for name, labels, values in node_series(accounting, topology)]


def workload_families(source, options: RenderOptions = RenderOptions()) -> list[Metric]:
    """Workload families from an :class:`Accounting` or one pod's :class:`PodFigures`."""
    container = ("namespace", "pod", "container")
    families = [
        _family("podresources_container_cpus", (*container, "numa_node"), source.container_cpus),
        _family("podresources_container_memory_bytes", (*container, "numa_node", "memory_type"),
                source.container_memory),
        _family("podresources_container_devices", (*container, "resource", "numa_node"),
                source.container_devices),
        _family("podresources_container_numa_nodes", container, source.container_numa_nodes),
        _family("podresources_pod_cpus", ("namespace", "pod", "numa_node"), source.pod_cpus),
        _family("podresources_pod_memory_bytes", ("namespace", "pod", "numa_node", "memory_type"),
                source.pod_memory),
    ]
    if options.device_info:
        families.append(_family(
            "podresources_device_info",
            ("resource", "device_id", "numa_node", "namespace", "pod", "container"),
            {row: 1 for row in source.device_info}))
        dra = Metric("podresources_dra_device_info",
                     HELP["podresources_dra_device_info"], "gauge")
        names = ("driver", "pool", "device", "claim", "namespace", "pod", "container")
        for row in source.dra_device_info:
            labels = dict(zip(names, row[:7]))
            if row[7] is not None:
                labels["share_id"] = row[7]
            dra.add_sample("podresources_dra_device_info", labels, 1)
        families.append(dra)
    return families


def data_families(accounting: Accounting, topology: Topology,
                  options: RenderOptions = RenderOptions()) -> list[Metric]:
    """Every data family of one snapshot, built in one go (the reference for :class:`Renderer`)."""
    families = node_families(accounting, topology)
    if options.workload_metrics:
        families.extend(workload_families(accounting, options))
    return [f for f in families if f.samples or f.name == "podresources_misaligned_containers"]


class _Families:
    """The minimal registry interface ``generate_latest`` needs."""

    def __init__(self, families):
        self._families = families

    def collect(self):
        return iter(self._families)


def render_text(families: list[Metric]) -> bytes:
    """Prometheus text format 0.0.4 (also valid OpenMetrics for gauge-only families)."""
    return generate_latest(_Families(families))


class Renderer:
    """Renders the data section of /metrics, doing as little as the change requires.

    A pod's workload series depend only on that pod, so they are rendered (by
    ``prometheus_client``, in one call per pod) when the pod first appears or changes, and kept
    with its :class:`PodFigures`; each workload family is those blocks joined under one
    HELP/TYPE header. Node series keep their label sets from one snapshot to the next, so each
    one's ``name{labels} `` prefix is rendered by ``prometheus_client`` once and the value is
    formatted with its ``floatToGoString``.
    """

    _PREFIX_CACHE_LIMIT = 100_000

    def __init__(self, options: RenderOptions = RenderOptions()):
        self.options = options
        self._names = [m.name for m in CATALOG if m.group == "workload"
                       and (options.device_info or not m.name.endswith("device_info"))]
        self._rows: dict[int, tuple[bytes, ...]] = {}  # id of a PodFigures -> its blocks
        self._held: dict[int, object] = {}  # keeps those PodFigures alive
        self._headers: dict[str, str] = {}
        self._prefixes: dict[tuple, str] = {}
        self._node_cache: dict[str, tuple[dict, str]] = {}  # family -> (values, text)

    def render(self, accounting: Accounting, topology: Topology) -> bytes:
        parts = [self._node_section(accounting, topology).encode()]
        if self.options.workload_metrics:
            pods = accounting.pod_figures
            ids = list(map(id, pods))
            # the cache holds its pods, so an id found there is that very pod
            rows = list(map(self._rows.get, ids))
            for index, row in enumerate(rows):
                if row is None:
                    rows[index] = self._render_pod(pods[index])
            # rows are aligned to self._names: transpose them into one column per family
            for name, column in zip(self._names, zip(*rows)):
                body = b"".join(column)
                if body:
                    parts.append(self._header(name).encode() + body)
            for gone in self._rows.keys() - set(ids):
                del self._rows[gone], self._held[gone]
        return b"".join(parts)

    def _node_section(self, accounting: Accounting, topology: Topology) -> str:
        if len(self._prefixes) > self._PREFIX_CACHE_LIMIT:
            self._prefixes = {}
        texts = []
        for name, labels, values in node_series(accounting, topology):
            cached = self._node_cache.get(name)
            if cached is not None and cached[0] == values:
                texts.append(cached[1])
                continue
            lines = [self._header(name)]
            for key in sorted(values):
                lines.append(self._prefix(name, labels, key))
                lines.append(floatToGoString(values[key]))
                lines.append("\n")
            text = "".join(lines)
            self._node_cache[name] = (values, text)
            texts.append(text)
        return "".join(texts)

    def _prefix(self, name: str, labels: tuple[str, ...], values: tuple[str, ...]) -> str:
        key = (name, values)
        prefix = self._prefixes.get(key)
        if prefix is None:
            family = GaugeMetricFamily(name, "", labels=list(labels))
            family.add_metric(list(values), 0)
            line = render_text([family]).decode().split("\n")[2]
            prefix = self._prefixes[key] = line[:line.rindex(" ") + 1]
        return prefix

    def _render_pod(self, pod) -> tuple[bytes, ...]:
        families = [f for f in workload_families(pod, self.options) if f.samples]
        blocks: dict[str, bytes] = {}
        if families:
            # one rendering for the pod, cut into per-family blocks without HELP/TYPE lines
            # (label values never hold a raw newline, so "\n# HELP " only starts a family)
            text = b"\n" + render_text(families)
            for family, chunk in zip(families, text.split(b"\n# HELP ")[1:]):
                body = chunk.split(b"\n", 2)[2]
                blocks[family.name] = body if body.endswith(b"\n") else body + b"\n"
        row = tuple(blocks.get(name, b"") for name in self._names)
        self._rows[id(pod)] = row
        self._held[id(pod)] = pod
        return row

    def _header(self, name: str) -> str:
        header = self._headers.get(name)
        if header is None:
            header = self._headers[name] = render_text([Metric(name, HELP[name], "gauge")]).decode()
        return header
