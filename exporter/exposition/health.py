"""The exporter's own health metrics: is the kubelet reachable, how are calls going.

Counters and histograms are the exporter's own plain-value instruments
(:mod:`exporter.exposition.instruments`), written without a ``prometheus_client`` collection: only
the label sets that changed since the last rendering are formatted again. The state behind the
gauges — up, last success, back-off, the kubelet's capabilities — belongs to the refresh loop
(:class:`exporter.kubelet.status.KubeletStatus`) and is handed to :meth:`Health.render`, which
builds those families from it each time, so an old label set never lingers.

The section is rendered when a scrape asks for it, in the format it asks for, at most once per
refresh attempt (:class:`exporter.exposition.bodies.Exposition`): a refresh nobody scrapes
renders nothing. The ``process_*`` figures, the gauges and what others register in
:attr:`Health.registry` are collected each time and written by
:class:`exporter.exposition.rendering.FamilyWriter`, which reuses each header and label prefix
it wrote the first time. ``prometheus_client`` is imported only when another module asks for the
registry (nothing the exporter runs does; the fit answers' admission counter is one of the
instruments here). What a scrape sees is as of the first scrape after the last refresh
attempt (or change of the Kubernetes-API view), ``process_*`` figures included.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..catalog import (
    ADMISSION_FAILURES,
    API_REQUEST_DURATION,
    API_REQUESTS,
    BACKOFF,
    BUILD_INFO,
    DATA_ISSUES,
    KUBE_API_ERRORS,
    KUBE_API_UP,
    KUBELET_API_INFO,
    LAST_REFRESH,
    NODE_INFO,
    PODS_SOURCE_INFO,
    REFRESH_DURATION,
    UP,
)
from ..issues import IssueKind
from ..kubelet import client as kubelet
from ..kubelet.status import Capabilities, KubeletStatus
from .instruments import Counter, Histogram
from .process import ProcessFigures
from .rendering import FamilyWriter
from .textformat import Family, gauge

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

# The source revision an image was built from: the Dockerfile writes it here (build argument
# REVISION); a source checkout has none and reports "unknown".
REVISION_FILE = Path(__file__).with_name("REVISION")

# Every data issue kind, pre-initialised so increase() works from the first occurrence.
ISSUE_KINDS = tuple(IssueKind)
# What the Kubernetes-API view (--kube-api) lists and watches, as the resource label says it.
KUBE_API_RESOURCES = ("node", "pods", "resourceslices", "devicetaintrules")
METHODS = (kubelet.METHOD_LIST, kubelet.METHOD_GET_ALLOCATABLE, kubelet.METHOD_GET)

_REFRESH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Health:
    """The instruments behind the health section of /metrics, and its rendering."""

    def __init__(self, node_name: str):
        self.node_name = node_name
        self.kube_api_up: dict[str, int] | None = None  # set by track_kube_api
        # where pod context comes from, and the state of the kubelet's Pods API; set by the
        # refresh loop
        self.pods_source = ("none", "off")
        self._registry: CollectorRegistry | None = None
        self.requests = Counter(API_REQUESTS)
        self.request_duration = Histogram(API_REQUEST_DURATION, _CALL_BUCKETS)
        self.refresh_duration = Histogram(REFRESH_DURATION, _REFRESH_BUCKETS)
        self.data_issues = Counter(DATA_ISSUES)
        self.kube_api_errors = Counter(KUBE_API_ERRORS)  # written with track_kube_api only
        # the fit answers' judged rejections; written from the first one (no empty family)
        self.admission_failures: Counter | None = None
        for method in METHODS:
            self.requests.labels(method, "OK")
            self.request_duration.labels(method)
        for kind in ISSUE_KINDS:
            self.data_issues.labels(kind)
        # process_* (memory, CPU, open files, start time), as every exporter has them.
        self.process = ProcessFigures()
        self.revision = build_revision()
        self._writers = (FamilyWriter(openmetrics=False), FamilyWriter(openmetrics=True))

    @property
    def registry(self) -> CollectorRegistry:
        """A ``prometheus_client`` registry for instruments of other modules, written after
        the exporter's own; the package is imported here, with ``_created`` samples turned off
        (the writer leaves them out)."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry, disable_created_metrics
            disable_created_metrics()
            self._registry = CollectorRegistry(auto_describe=False)
        return self._registry

    def track_kube_api(self) -> None:
        """Export the Kubernetes-API view's health; only with --kube-api."""
        self.kube_api_up = dict.fromkeys(KUBE_API_RESOURCES, 0)
        for resource in KUBE_API_RESOURCES:
            self.kube_api_errors.labels(resource)

    def observe_call(self, method: str, code: str, seconds: float) -> None:
        """Hook for :class:`exporter.kubelet.client.KubeletClient`: one finished call."""
        self.requests.labels(method, code).inc()
        self.request_duration.labels(method).observe(seconds)

    def count_admission_failure(self, reason: str, blocking: str) -> None:
        """Hook for :class:`exporter.fit.fitview.FitView`: a rejected pod judged."""
        if self.admission_failures is None:
            self.admission_failures = Counter(ADMISSION_FAILURES)
        self.admission_failures.labels(reason, blocking).inc()

    def count_issues(self, issues: dict[str, int]) -> None:
        for kind, count in issues.items():
            if count:
                self.data_issues.labels(kind).inc(count)

    def render_both(self, status: KubeletStatus) -> tuple[bytes, bytes]:
        """The health section in the text format and in OpenMetrics (without ``# EOF``)."""
        return self.render(False, status), self.render(True, status)

    def render(self, openmetrics: bool, status: KubeletStatus | None = None) -> bytes:
        """The health section in one format (OpenMetrics without ``# EOF``), its families in
        a fixed order: the kubelet calls' counter and histogram, the refresh histogram, the
        data issues, ``process_*``, the Kubernetes-API view's errors, what others registered,
        the gauges. ``status`` defaults to the state before the first refresh."""
        own = (self.requests, self.request_duration, self.refresh_duration, self.data_issues)
        others: list[Family | Metric] = [
            *(self._registry.collect() if self._registry is not None else ()),
            *self._state_families(status or KubeletStatus())]
        writer = self._writers[openmetrics]
        parts = [instrument.write(openmetrics) for instrument in own]
        parts.append(writer.write(list(self.process.collect())))
        if self.kube_api_up is not None:
            parts.append(self.kube_api_errors.write(openmetrics))
        if self.admission_failures is not None:
            parts.append(self.admission_failures.write(openmetrics))
        parts.append(writer.write(others))
        return b"".join(parts)

    def _state_families(self, status: KubeletStatus) -> list[Family]:
        capabilities: Capabilities = status.capabilities
        families = [gauge(UP.name, UP.help, status.up),
                    gauge(LAST_REFRESH.name, LAST_REFRESH.help, status.last_success),
                    gauge(BACKOFF.name, BACKOFF.help, round(status.backoff_seconds, 3))]
        for metric, values in (
                (KUBELET_API_INFO, capabilities.labels()),
                (NODE_INFO, (self.node_name, capabilities.api_version)),
                (BUILD_INFO, (__version__, self.revision, platform.python_version())),
                (PODS_SOURCE_INFO, self.pods_source)):
            family = Family(metric.name, metric.help)
            family.add(dict(zip(metric.labels, values, strict=True)), 1)
            families.append(family)
        if self.kube_api_up is not None:
            kube = Family(KUBE_API_UP.name, KUBE_API_UP.help)
            for resource, value in self.kube_api_up.items():
                kube.add(dict(zip(KUBE_API_UP.labels, (resource,), strict=True)), value)
            families.append(kube)
        return families


UNKNOWN_REVISION = "unknown"  # the build_info revision when the image names none


def build_revision() -> str:
    try:
        revision = REVISION_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        return UNKNOWN_REVISION
    return revision or UNKNOWN_REVISION
