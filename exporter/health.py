"""The exporter's own health metrics: is the kubelet reachable, how are calls going.

Counters and histograms are ordinary ``prometheus_client`` objects in a private registry
(direct instrumentation is right for an exporter's internals); the info-style gauges whose
label values change (``kubelet_api_info``, ``node_info``) are built from the current state at
render time, so an old label set never lingers.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client import generate_latest as generate_text
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from . import __version__, kubelet
from .catalog import (
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
    REFRESH_DURATION,
    UP,
)
from .issues import IssueKind

UNKNOWN = "unknown"
# The source revision an image was built from: the Dockerfile writes it here (build argument
# REVISION); a source checkout has none and reports "unknown".
REVISION_FILE = Path(__file__).with_name("REVISION")

# Every data issue kind, pre-initialised so increase() works from the first occurrence.
ISSUE_KINDS = tuple(IssueKind)
# What the Kubernetes-API view (--kube-api) lists and watches, as the resource label says it.
KUBE_API_RESOURCES = ("node", "pods", "resourceslices")
METHODS = (kubelet.METHOD_LIST, kubelet.METHOD_GET_ALLOCATABLE, kubelet.METHOD_GET)

_REFRESH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Capabilities:
    """What the kubelet supports, as far as the exporter has found out."""

    api_version: str = "none"  # v1 | v1alpha1 | none
    get_allocatable: str = UNKNOWN  # true | false | unknown
    get: str = UNKNOWN
    pod_level: str = UNKNOWN  # true once pod-level data has been seen

    def labels(self) -> tuple[str, str, str, str]:
        return (self.api_version, self.get_allocatable, self.get, self.pod_level)


class Health:
    """State and instruments behind the health section of /metrics."""

    def __init__(self, node_name: str):
        disable_created_metrics()
        self.node_name = node_name
        self.capabilities = Capabilities()
        self.up = 0
        self.last_success = 0.0
        self.backoff_seconds = 0.0
        self.kube_api_up: dict[str, int] | None = None  # set by track_kube_api
        self.registry = CollectorRegistry(auto_describe=False)
        # (a counter's catalogued name ends in _total, which prometheus_client accepts as is)
        self.requests = Counter(API_REQUESTS.name, API_REQUESTS.help, API_REQUESTS.labels,
                                registry=self.registry)
        self.request_duration = Histogram(
            API_REQUEST_DURATION.name, API_REQUEST_DURATION.help, API_REQUEST_DURATION.labels,
            buckets=_CALL_BUCKETS, registry=self.registry)
        self.refresh_duration = Histogram(
            REFRESH_DURATION.name, REFRESH_DURATION.help, REFRESH_DURATION.labels,
            buckets=_REFRESH_BUCKETS, registry=self.registry)
        self.data_issues = Counter(DATA_ISSUES.name, DATA_ISSUES.help, DATA_ISSUES.labels,
                                   registry=self.registry)
        for method in METHODS:
            self.requests.labels(method, "OK")
            self.request_duration.labels(method)
        for kind in ISSUE_KINDS:
            self.data_issues.labels(kind)
        self.registry.register(_StateCollector(self))
        # process_* (memory, CPU, open files, start time), as every exporter has them.
        ProcessCollector(registry=self.registry)
        self.revision = build_revision()

    def track_kube_api(self) -> None:
        """Export the Kubernetes-API view's health; only with --kube-api."""
        self.kube_api_up = dict.fromkeys(KUBE_API_RESOURCES, 0)
        self.kube_api_errors = Counter(KUBE_API_ERRORS.name, KUBE_API_ERRORS.help,
                                       KUBE_API_ERRORS.labels, registry=self.registry)
        for resource in KUBE_API_RESOURCES:
            self.kube_api_errors.labels(resource)

    def observe_call(self, method: str, code: str, seconds: float) -> None:
        """Hook for :class:`exporter.kubelet.KubeletClient`: one finished call."""
        self.requests.labels(method, code).inc()
        self.request_duration.labels(method).observe(seconds)

    def count_issues(self, issues: dict[str, int]) -> None:
        for kind, count in issues.items():
            if count:
                self.data_issues.labels(kind).inc(count)

    def render(self, openmetrics: bool) -> bytes:
        """The health section; OpenMetrics output ends without ``# EOF`` (the caller adds it)."""
        if openmetrics:
            text = bytes(generate_openmetrics(self.registry))
            return text[: -len(b"# EOF\n")] if text.endswith(b"# EOF\n") else text
        return bytes(generate_text(self.registry))


def build_revision() -> str:
    try:
        revision = REVISION_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        return UNKNOWN
    return revision or UNKNOWN


class _StateCollector:
    def __init__(self, health: Health):
        self.health = health

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Sequence[Metric]:
        health = self.health
        up = GaugeMetricFamily(UP.name, UP.help)
        up.add_metric([], health.up)
        last = GaugeMetricFamily(LAST_REFRESH.name, LAST_REFRESH.help)
        last.add_metric([], health.last_success)
        backoff = GaugeMetricFamily(BACKOFF.name, BACKOFF.help)
        backoff.add_metric([], round(health.backoff_seconds, 3))
        api = GaugeMetricFamily(KUBELET_API_INFO.name, KUBELET_API_INFO.help,
                                labels=KUBELET_API_INFO.labels)
        api.add_metric(list(health.capabilities.labels()), 1)
        node = GaugeMetricFamily(NODE_INFO.name, NODE_INFO.help, labels=NODE_INFO.labels)
        node.add_metric([health.node_name, health.capabilities.api_version], 1)
        build = GaugeMetricFamily(BUILD_INFO.name, BUILD_INFO.help, labels=BUILD_INFO.labels)
        build.add_metric([__version__, health.revision, platform.python_version()], 1)
        families = [up, last, backoff, api, node, build]
        if health.kube_api_up is not None:
            kube = GaugeMetricFamily(KUBE_API_UP.name, KUBE_API_UP.help, labels=KUBE_API_UP.labels)
            for resource, value in health.kube_api_up.items():
                kube.add_metric([resource], value)
            families.append(kube)
        return families
