"""The fit answers on /metrics: one section rendered after every refresh.

:class:`FitView` holds what the fit answers need beyond one snapshot: the shapes (re-read when
their file changes), the kubelet's configuration, and the pods already judged after an
admission rejection. After each successful refresh, :meth:`FitView.update` computes the free
capacity from that refresh's snapshot (no extra kubelet call), holds every shape and every newly
seen rejection against it, and renders the gauges; the admission counter lives in the health
registry (it is a counter, rendered per exposition format there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from .. import catalog
from ..accounting import Accounting
from ..catalog import MetricDef
from ..model import KubeletSnapshot, Topology
from ..podspec import Rejection
from .engine import FreeCapacity, Shape, ShapeFit, evaluate, free_capacity, verdict
from .kubeletconfig import KubeletConfig, KubeletConfigError, KubeletConfigFile
from .shapes import ShapeError, ShapeFile

log = logging.getLogger(__name__)


# the configuration without --kubelet-config
NOT_READ = KubeletConfig()


class FitSetupError(Exception):
    """A ``--fit-shapes`` or ``--kubelet-config`` file that cannot be used at start-up."""


def build_fit_view(fit_shapes: str | None, kubelet_config: str | None, full_pcpus_only: bool,
                   registry: CollectorRegistry | None = None,
                   rejections: Rejections | None = None) -> FitView:
    """The fit view of the flags; :class:`FitSetupError` names the flag and the reason."""
    try:
        shapes = ShapeFile(fit_shapes) if fit_shapes else None
    except ShapeError as error:
        raise FitSetupError(f"--fit-shapes: {error}") from None
    try:
        config = KubeletConfigFile(kubelet_config) if kubelet_config else None
    except KubeletConfigError as error:
        raise FitSetupError(f"--kubelet-config: {error}") from None
    return FitView(shapes, config, full_pcpus_only, rejections, registry)

NONE, MULTIPLE = "none", "multiple"
RejectionKey = tuple[str, str]
# where rejected pods come from: the Kubernetes-API view, or the demo's simulator
Rejections = Callable[[], Mapping[RejectionKey, Rejection]]


def blocking_resource(fit: ShapeFit) -> str:
    """The admission failures' ``blocking_resource``: the one resource no single NUMA node had
    enough of; ``multiple`` when several (or when each node lacks something different);
    ``none`` when the pod would fit now."""
    if fit.smt_misaligned:
        return "cpu"
    if any(fit.fits.values()) or not fit.constrained:
        return NONE
    blocking = fit.blocking()
    return blocking[0] if len(blocking) == 1 else MULTIPLE


@dataclass
class Judged:
    uid: str
    reason: str
    blocking: str
    sentence: str


@dataclass
class FitView:
    """Shapes, kubelet configuration and admission verdicts, and their section of /metrics."""

    shapes: ShapeFile | None = None
    kubelet_config: KubeletConfigFile | None = None
    full_pcpus_only: bool = False
    # where rejected pods come from (the Kubernetes-API view), None without --kube-api
    rejections: Rejections | None = None
    registry: CollectorRegistry | None = None  # the health registry, for the counter
    free: FreeCapacity | None = None
    fits: list[ShapeFit] = field(default_factory=list)
    judged: dict[RejectionKey, Judged] = field(default_factory=dict)
    _counter: Counter | None = None
    _config_problem: str | None = None
    _inputs: tuple[object, ...] = ()
    _rendered: bytes = b""
    _failed: bool = False

    def config(self) -> KubeletConfig:
        if self.kubelet_config is None:
            return NOT_READ  # the same object every time: update() compares inputs by identity
        config = self.kubelet_config.current()
        problem = self.kubelet_config.problem
        if problem and problem != self._config_problem:
            log.warning("keeping the last kubelet configuration read: %s", problem)
        self._config_problem = problem
        return config

    def current_shapes(self) -> tuple[Shape, ...]:
        return self.shapes.current() if self.shapes is not None else ()

    def update(self, snapshot: KubeletSnapshot, topology: Topology,
               accounting: Accounting) -> bytes:
        """Recompute from one refresh's snapshot; returns the section's text. A failure here
        never costs the refresh its other figures: the previous section stays, logged once."""
        try:
            section = self._update(snapshot, topology, accounting)
        except Exception:
            if not self._failed:
                log.exception("fit answers not updated; keeping the previous ones")
            self._failed = True
            return self._rendered
        self._failed = False
        return section

    def _update(self, snapshot: KubeletSnapshot, topology: Topology,
                accounting: Accounting) -> bytes:
        config = self.config()
        shapes = self.current_shapes()
        full = self.full_pcpus_only or config.full_pcpus_only
        # the ledger hands back the same accounting object when nothing changed
        inputs = (accounting, snapshot.allocatable, snapshot.api_version, topology, shapes,
                  config, full)
        changed = len(inputs) != len(self._inputs) or any(
            a is not b for a, b in zip(inputs, self._inputs))
        if changed:
            self._inputs = inputs
            self.free = free_capacity(snapshot, topology, accounting, full)
            self.fits = ([evaluate(shape, self.free) for shape in shapes]
                         if self.free is not None else [])
        if self._judge() or changed:
            self._rendered = render(self.families(config))
        return self._rendered

    def _judge(self) -> bool:
        """Judge rejections seen since the last refresh; whether the judged set changed."""
        if self.rejections is None:
            return False
        current = self.rejections()
        gone = [k for k, j in self.judged.items() if k not in current or current[k].uid != j.uid]
        for key in gone:
            del self.judged[key]
        if self.free is None:
            return bool(gone)  # new ones are judged at the first refresh that can tell
        fresh = sorted((k, r) for k, r in current.items() if k not in self.judged)
        for key, rejection in fresh:
            fit = evaluate(Shape(f"{key[0]}/{key[1]}", dict(rejection.requests)), self.free)
            judged = Judged(rejection.uid, rejection.reason, blocking_resource(fit),
                            verdict(fit))
            self.judged[key] = judged
            self._count(judged)
            log.warning("pod %s/%s was rejected at admission (%s); blocking resource %s: %s",
                        key[0], key[1], rejection.reason, judged.blocking, judged.sentence)
        return bool(gone or fresh)

    def _count(self, judged: Judged) -> None:
        if self.registry is None:
            return
        if self._counter is None:  # registered at the first rejection: no empty family
            metric = catalog.ADMISSION_FAILURES
            self._counter = Counter(metric.name, metric.help, metric.labels,
                                    registry=self.registry)
        self._counter.labels(judged.reason, judged.blocking).inc()

    def families(self, config: KubeletConfig) -> list[Metric]:
        families: list[Metric] = [gauge(catalog.KUBELET_CONFIG_INFO, {config.labels(): 1})]
        free = self.free
        if free is not None:
            families.append(gauge(catalog.NUMA_FREE, free.series()))
            families.append(gauge(catalog.NUMA_FREE_FULL_CORES, free.full_cores_series()))
        families.extend(shape_families(self.fits))
        info: dict[tuple[str, ...], float] = {
            (key[0], key[1], j.reason, j.blocking): 1 for key, j in self.judged.items()}
        families.append(gauge(catalog.ADMISSION_FAILURE_INFO, info))
        return [f for f in families if f.samples]


def shape_families(fits: Iterable[ShapeFit]) -> list[Metric]:
    fits_series: dict[tuple[str, ...], float] = {}
    shortfall: dict[tuple[str, ...], float] = {}
    capacity: dict[tuple[str, ...], float] = {}
    smallest: dict[tuple[str, ...], float] = {}
    for fit in fits:
        name = fit.shape.name
        for numa_id, ok in fit.fits.items():
            fits_series[(name, str(numa_id))] = int(ok)
            for resource, amount in fit.shortfall[numa_id].items():
                shortfall[(name, str(numa_id), resource)] = amount
        if fit.capacity is not None:
            capacity[(name,)] = fit.capacity
        if fit.min_numa_nodes is not None:
            smallest[(name,)] = fit.min_numa_nodes
    return [gauge(catalog.SHAPE_FITS, fits_series), gauge(catalog.SHAPE_SHORTFALL, shortfall),
            gauge(catalog.SHAPE_CAPACITY, capacity),
            gauge(catalog.SHAPE_MIN_NUMA_NODES, smallest)]


def gauge(metric: MetricDef, values: Mapping[Any, float]) -> GaugeMetricFamily:
    """The family of ``metric``; keys are label values (a single label's value may stand
    alone)."""
    family = GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))
    rows: list[tuple[tuple[str, ...], float]] = [
        ((key,) if isinstance(key, str) else tuple(key), value) for key, value in values.items()]
    for labels, value in sorted(rows):
        family.add_metric(list(labels), value)
    return family


class _Families:
    def __init__(self, families: list[Metric]):
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)


def render(families: list[Metric]) -> bytes:
    """Gauges only, so the text is the same in both exposition formats."""
    if not families:
        return b""
    return generate_latest(_Families(families))
