"""Metric families from an accounting snapshot, and the exposition text served on /metrics.

Families are rebuilt from each snapshot (the client_python custom-collector pattern), so a pod
that left the node leaves ``/metrics`` with the next refresh. The data section is rendered once
per refresh, never per scrape. Every family here is a gauge, and gauges render byte-for-byte
the same in the Prometheus text format and in OpenMetrics (help texts avoid double quotes for
that reason), so one rendering serves both formats. Names, help texts and labels come from
:mod:`exporter.catalog`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from . import catalog
from .accounting import Accounting, PodFigures
from .catalog import CATALOG, HELP, MetricDef
from .model import Topology


@dataclass(frozen=True)
class RenderOptions:
    workload_metrics: bool = True
    device_info: bool = True


def gauge_family(metric: MetricDef, values: Mapping[Any, float]) -> GaugeMetricFamily:
    """The gauge family of ``metric`` with one sample per ``{label values: value}`` item (a
    single label's value may stand alone), in label order."""
    family = GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))
    for key in sorted(values):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], values[key])
    return family


def node_series(accounting: Accounting,
                topology: Topology) -> list[tuple[MetricDef, dict[Any, float]]]:
    """Node and NUMA series as (metric, {label values: value}), those that exist."""
    series: list[tuple[MetricDef, dict[Any, float]]] = [
        (catalog.NUMA_NODE_CPUS,
         {(str(n.numa_id),): len(n.cpus) for n in topology.numa_nodes.values()}),
    ]

    def add(metric: MetricDef, values: Mapping[Any, float] | None) -> None:
        if values:
            series.append((metric, {k if isinstance(k, tuple) else (k,): v
                                    for k, v in values.items()}))

    if accounting.cpus_allocatable is not None:
        add(catalog.CPUS_ALLOCATABLE, accounting.cpus_allocatable)
    add(catalog.CPUS_ALLOCATED, accounting.cpus_allocated)
    add(catalog.MEMORY_ALLOCATABLE, accounting.memory_allocatable)
    add(catalog.MEMORY_ALLOCATED, accounting.memory_allocated)
    add(catalog.DEVICES_ALLOCATABLE, accounting.devices_allocatable)
    add(catalog.DEVICES_ALLOCATED, accounting.devices_allocated)
    add(catalog.DEVICES_ALLOCATED_UNAVAILABLE, accounting.devices_allocated_unavailable)
    add(catalog.NUMA_UTILIZATION, accounting.utilization)
    add(catalog.DRA_DEVICES_ALLOCATED, accounting.dra_devices_allocated)
    if accounting.misaligned_containers is not None:
        series.append((catalog.MISALIGNED_CONTAINERS, {(): accounting.misaligned_containers}))
    return series


def node_families(accounting: Accounting, topology: Topology) -> list[Metric]:
    """Node and NUMA families (no workload, no health metrics)."""
    return [gauge_family(metric, values) for metric, values in node_series(accounting, topology)]


def workload_families(source: Accounting | PodFigures,
                      options: RenderOptions = RenderOptions()) -> list[Metric]:
    """Workload families from an :class:`Accounting` or one pod's :class:`PodFigures`."""
    families: list[Metric] = [
        gauge_family(catalog.CONTAINER_CPUS, source.container_cpus),
        gauge_family(catalog.CONTAINER_MEMORY, source.container_memory),
        gauge_family(catalog.CONTAINER_DEVICES, source.container_devices),
        gauge_family(catalog.CONTAINER_NUMA_NODES, source.container_numa_nodes),
        gauge_family(catalog.POD_CPUS, source.pod_cpus),
        gauge_family(catalog.POD_MEMORY, source.pod_memory),
    ]
    if options.device_info:
        families.append(gauge_family(catalog.DEVICE_INFO, {row: 1 for row in source.device_info}))
        metric = catalog.DRA_DEVICE_INFO
        dra = Metric(metric.name, metric.help, metric.type)
        *names, share_id = metric.labels  # share_id only on the series of shared devices
        for *values, shared in source.dra_device_info:
            labels = dict(zip(names, values))
            if shared is not None:
                labels[share_id] = shared
            dra.add_sample(metric.name, labels, 1)
        families.append(dra)
    return families


def data_families(accounting: Accounting, topology: Topology,
                  options: RenderOptions = RenderOptions()) -> list[Metric]:
    """Every data family of one snapshot, built in one go (the reference for :class:`Renderer`)."""
    families = node_families(accounting, topology)
    if options.workload_metrics:
        families.extend(workload_families(accounting, options))
    return [f for f in families if f.samples or f.name == catalog.MISALIGNED_CONTAINERS.name]


class _Families:
    """The minimal registry interface ``generate_latest`` needs."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
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
        self._prefixes: dict[tuple[Any, ...], str] = {}
        self._node_cache: dict[str, tuple[dict[Any, float], str]] = {}  # -> (values, text)

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
        for metric, values in node_series(accounting, topology):
            name = metric.name
            cached = self._node_cache.get(name)
            if cached is not None and cached[0] == values:
                texts.append(cached[1])
                continue
            lines = [self._header(name)]
            for key in sorted(values):
                lines.append(self._prefix(name, metric.labels, key))
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

    def _render_pod(self, pod: PodFigures) -> tuple[bytes, ...]:
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
