"""Metric families from an accounting snapshot, and the exposition text served on /metrics.

Families are rebuilt from each snapshot (the client_python custom-collector pattern), so a pod
that left the node leaves ``/metrics`` with the next refresh. The data section is rendered once
per refresh, never per scrape. Every family here is a gauge, and gauges render byte-for-byte
the same in the Prometheus text format and in OpenMetrics (help texts avoid double quotes for
that reason), so one rendering serves both formats. Names, help texts and labels come from
:mod:`exporter.catalog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import catalog
from ..accounting import Accounting
from ..catalog import CATALOG, HELP, MetricDef
from ..model import Topology
from .textformat import Family, float_text, header, line_prefix, write

if TYPE_CHECKING:
    from prometheus_client.core import Metric


# label values -> value; a single label's value may stand alone instead of a 1-tuple
SeriesValues = Mapping[Any, float]
# one family's samples: (label name, value) pairs and the sample's value
Rows = list[tuple[list[tuple[str, str]], float]]


class WorkloadFigures(Protocol):
    """What :func:`workload_families` reads: an :class:`Accounting` or one pod's figures."""

    @property
    def container_cpus(self) -> SeriesValues: ...
    @property
    def container_memory(self) -> SeriesValues: ...
    @property
    def container_devices(self) -> SeriesValues: ...
    @property
    def container_numa_nodes(self) -> SeriesValues: ...
    @property
    def pod_cpus(self) -> SeriesValues: ...
    @property
    def pod_memory(self) -> SeriesValues: ...
    @property
    def device_info(self) -> Iterable[tuple[str, ...]]: ...
    @property
    def dra_device_info(self) -> Iterable[tuple[str | None, ...]]: ...  # share_id may be None


@dataclass(frozen=True)
class RenderOptions:
    workload_metrics: bool = True
    device_info: bool = True


def gauge_family(metric: MetricDef, values: SeriesValues) -> Family:
    """The gauge family of ``metric`` with one sample per ``{label values: value}`` item (a
    single label's value may stand alone), in label order (for the sections of optional parts:
    the fit answers, the Kubernetes-API view; written by :func:`render_text`)."""
    family = Family(metric.name, metric.help)
    labels = metric.labels
    for key in sorted(values):
        family.add(dict(zip(labels, key if isinstance(key, tuple) else (key,))), values[key])
    return family


def gauge_rows(metric: MetricDef, values: SeriesValues) -> Rows:
    """The samples :func:`gauge_family` makes, as label pairs and values."""
    return [(list(zip(metric.labels, key if isinstance(key, tuple) else (key,))), values[key])
            for key in sorted(values)]


def node_series(accounting: Accounting, topology: Topology,
                ) -> list[tuple[MetricDef, dict[tuple[str, ...], float]]]:
    """Node and NUMA series as (metric, {label values: value}), those that exist."""
    series: list[tuple[MetricDef, dict[tuple[str, ...], float]]] = [
        (catalog.NUMA_NODE_CPUS,
         {(str(n.numa_id),): len(n.cpus) for n in topology.numa_nodes.values()}),
    ]

    def add(metric: MetricDef, values: SeriesValues | None) -> None:
        if values:
            series.append((metric, {k if isinstance(k, tuple) else (k,): v
                                    for k, v in values.items()}))

    if accounting.cpus_allocatable is not None:
        add(catalog.CPUS_ALLOCATABLE, accounting.cpus_allocatable)
    add(catalog.CPUS_ALLOCATED, accounting.cpus_allocated)
    add(catalog.CPU_ALLOCATOR_INFO, accounting.cpu_allocators)
    add(catalog.MEMORY_ALLOCATABLE, accounting.memory_allocatable)
    add(catalog.MEMORY_ALLOCATED, accounting.memory_allocated)
    add(catalog.DEVICES_ALLOCATABLE, accounting.devices_allocatable)
    add(catalog.DEVICES_ALLOCATED, accounting.devices_allocated)
    add(catalog.DEVICES_ALLOCATED_UNAVAILABLE, accounting.devices_allocated_unavailable)
    add(catalog.NUMA_UTILIZATION, accounting.utilization)
    add(catalog.DRA_DEVICES_ALLOCATED, accounting.dra_devices_allocated)
    add(catalog.DRA_DEVICE_SHARES, accounting.dra_device_shares)
    add(catalog.DRA_DEVICES_ALLOCATABLE, accounting.dra_devices_allocatable)
    add(catalog.DRA_DEVICES_TAINTED, accounting.dra_devices_tainted)
    if accounting.misaligned_containers is not None:
        series.append((catalog.MISALIGNED_CONTAINERS, {(): accounting.misaligned_containers}))
    return series


def node_families(accounting: Accounting, topology: Topology) -> list[Family]:
    """Node and NUMA families (no workload, no health metrics)."""
    return [gauge_family(metric, values) for metric, values in node_series(accounting, topology)]


def workload_rows(source: WorkloadFigures,
                  options: RenderOptions = RenderOptions()) -> list[tuple[MetricDef, Rows]]:
    """Workload samples of an :class:`Accounting` or one pod's :class:`PodFigures`, per
    family."""
    families = [
        (catalog.CONTAINER_CPUS, gauge_rows(catalog.CONTAINER_CPUS, source.container_cpus)),
        (catalog.CONTAINER_MEMORY,
         gauge_rows(catalog.CONTAINER_MEMORY, source.container_memory)),
        (catalog.CONTAINER_DEVICES,
         gauge_rows(catalog.CONTAINER_DEVICES, source.container_devices)),
        (catalog.CONTAINER_NUMA_NODES,
         gauge_rows(catalog.CONTAINER_NUMA_NODES, source.container_numa_nodes)),
        (catalog.POD_CPUS, gauge_rows(catalog.POD_CPUS, source.pod_cpus)),
        (catalog.POD_MEMORY, gauge_rows(catalog.POD_MEMORY, source.pod_memory)),
    ]
    if options.device_info:
        families.append((catalog.DEVICE_INFO, gauge_rows(
            catalog.DEVICE_INFO, {row: 1 for row in source.device_info})))
        metric = catalog.DRA_DEVICE_INFO
        *names, share_id = metric.labels  # share_id only on the series of shared devices
        dra: Rows = []
        for *values, shared in source.dra_device_info:
            labels = [(name, value or "") for name, value in zip(names, values)]
            if shared is not None:
                labels.append((share_id, shared))
            dra.append((labels, 1))
        families.append((metric, dra))
    return families


def workload_families(source: WorkloadFigures,
                      options: RenderOptions = RenderOptions()) -> list[Metric]:
    """:func:`workload_rows` as ``prometheus_client`` families."""
    from prometheus_client.core import Metric
    families = []
    for metric, rows in workload_rows(source, options):
        family = Metric(metric.name, metric.help, metric.type)
        for labels, value in rows:
            family.add_sample(metric.name, dict(labels), value)
        families.append(family)
    return families


def data_families(accounting: Accounting, topology: Topology,
                  options: RenderOptions = RenderOptions()) -> list[Family | Metric]:
    """Every data family of one snapshot, built in one go (the reference for :class:`Renderer`)."""
    families: list[Family | Metric] = list(node_families(accounting, topology))
    if options.workload_metrics:
        families.extend(workload_families(accounting, options))
    return [f for f in families if f.samples or f.name == catalog.MISALIGNED_CONTAINERS.name]


class _Families:
    """The registry interface ``prometheus_client``'s ``generate_latest`` reads (the tests
    compare this module's bytes with it)."""

    def __init__(self, families: Iterable[Family | Metric]):
        self._families = families

    def collect(self) -> Iterator[Family | Metric]:
        return iter(self._families)


def render_text(families: Sequence[Family | Metric]) -> bytes:
    """Prometheus text format 0.0.4 (also valid OpenMetrics for gauge-only families), as
    ``prometheus_client`` writes it, without importing it (:mod:`.textformat`)."""
    return write(families)


class FamilyWriter:
    """Writes collected families in one format, reusing each family's header and each sample's
    ``name{labels} `` prefix (written the first time a label set appears) and formatting only
    the values. For instruments whose label sets persist while their values change: the
    exporter's own health metrics, gauges and counters, ours or ``prometheus_client``'s.
    Byte-for-byte what ``prometheus_client`` writes (OpenMetrics without ``# EOF``)."""

    _CACHE_LIMIT = 10_000

    def __init__(self, openmetrics: bool):
        self.openmetrics = openmetrics
        self._headers: dict[tuple[str, str, str], bytes] = {}
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    def write(self, families: Iterable[Family | Metric]) -> bytes:
        if len(self._prefixes) > self._CACHE_LIMIT:
            self._prefixes = {}
        parts: list[bytes] = []
        for family in families:
            key = (family.name, family.type, family.documentation)
            family_header = self._headers.get(key)
            if family_header is None:
                family_header = self._headers[key] = header(
                    family.name, family.documentation, family.type, self.openmetrics)
            parts.append(family_header)
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                prefix = self._prefixes.get((sample.name, labels))
                if prefix is None:
                    prefix = self._prefixes[(sample.name, labels)] = line_prefix(
                        sample.name, labels)
                parts.append(prefix)
                parts.append(float_text(sample.value).encode())
                parts.append(b"\n")
        return b"".join(parts)


class Renderer:
    """Renders the data section of /metrics, doing as little as the change requires.

    A pod's workload series depend only on that pod, so they are rendered when the pod first
    appears or changes, and kept with its :class:`PodFigures`; each workload family is those
    blocks joined under one HELP/TYPE header. Node series keep their label sets from one
    snapshot to the next, so each one's ``name{labels} `` prefix is written once and only the
    value is formatted. The bytes are ``prometheus_client``'s (:mod:`.textformat`; a property
    test compares them with :func:`render_text` of :func:`data_families`).
    """

    _PREFIX_CACHE_LIMIT = 100_000

    def __init__(self, options: RenderOptions = RenderOptions()):
        self.options = options
        self._names = [m.name for m in CATALOG if m.group == "workload"
                       and (options.device_info or not m.name.endswith("device_info"))]
        self._rows: dict[int, tuple[bytes, ...]] = {}  # id of a PodFigures -> its blocks
        self._held: dict[int, object] = {}  # keeps those PodFigures alive
        self._headers: dict[str, str] = {}
        self._prefixes: dict[tuple[str, tuple[str, ...]], str] = {}
        # family -> (values, text)
        self._node_cache: dict[str, tuple[dict[tuple[str, ...], float], str]] = {}

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
                lines.append(float_text(values[key]))
                lines.append("\n")
            text = "".join(lines)
            self._node_cache[name] = (values, text)
            texts.append(text)
        return "".join(texts)

    def _prefix(self, name: str, labels: tuple[str, ...], values: tuple[str, ...]) -> str:
        key = (name, values)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = line_prefix(name, zip(labels, values)).decode()
        return prefix

    def _render_pod(self, pod: WorkloadFigures) -> tuple[bytes, ...]:
        blocks: dict[str, bytes] = {}
        for metric, rows in workload_rows(pod, self.options):
            if rows:
                blocks[metric.name] = b"".join(
                    line_prefix(metric.name, labels) + float_text(value).encode() + b"\n"
                    for labels, value in rows)
        row = tuple(blocks.get(name, b"") for name in self._names)
        self._rows[id(pod)] = row
        self._held[id(pod)] = pod
        return row

    def _header(self, name: str) -> str:
        text = self._headers.get(name)
        if text is None:
            text = self._headers[name] = header(name, HELP[name], "gauge", False).decode()
        return text
