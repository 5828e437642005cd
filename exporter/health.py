"""The exporter's own health metrics: is the kubelet reachable, how are calls going.

Counters and histograms are ordinary ``prometheus_client`` objects in a private registry
(direct instrumentation is right for an exporter's internals); the info-style gauges whose
label values change (``kubelet_api_info``, ``node_info``) are built from the current state at
render time, so an old label set never lingers.
"""

from __future__ import annotations

import platform
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
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from . import __version__, accounting, kubelet
from .rendering import HELP

UNKNOWN = "unknown"
# The source revision an image was built from: the Dockerfile writes it here (build argument
# REVISION); a source checkout has none and reports "unknown".
REVISION_FILE = Path(__file__).with_name("REVISION")

# Every data issue kind, pre-initialised so increase() works from the first occurrence.
ISSUE_KINDS = (
    accounting.ISSUE_ALLOCATED_EXCEEDS_ALLOCATABLE,
    accounting.ISSUE_CPU_MULTIPLE_OWNERS,
    accounting.ISSUE_CPU_NOT_ALLOCATABLE,
    accounting.ISSUE_DEVICE_MULTIPLE_OWNERS,
    accounting.ISSUE_DUPLICATE_ENTRY,
    accounting.ISSUE_INVALID_ENTRY,
    accounting.ISSUE_NEGATIVE_NUMA_ID,
    accounting.ISSUE_POD_MEMORY_BELOW_CONTAINERS,
    accounting.ISSUE_UNKNOWN_CPU,
    accounting.ISSUE_UNKNOWN_NUMA_ID,
    "invalid_reply",
    "message_too_large",
    "terminated_pod",
)
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
        self.requests = Counter("podresources_api_requests", HELP["podresources_api_requests_total"],
                                ["method", "code"], registry=self.registry)
        self.request_duration = Histogram(
            "podresources_api_request_duration_seconds",
            HELP["podresources_api_request_duration_seconds"], ["method"],
            buckets=_CALL_BUCKETS, registry=self.registry)
        self.refresh_duration = Histogram(
            "podresources_refresh_duration_seconds",
            HELP["podresources_refresh_duration_seconds"], buckets=_REFRESH_BUCKETS,
            registry=self.registry)
        self.data_issues = Counter("podresources_data_issues", HELP["podresources_data_issues_total"],
                                   ["kind"], registry=self.registry)
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
        self.kube_api_errors = Counter("podresources_kube_api_errors",
                                       HELP["podresources_kube_api_errors_total"], ["resource"],
                                       registry=self.registry)
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
            text = generate_openmetrics(self.registry)
            return text[: -len(b"# EOF\n")] if text.endswith(b"# EOF\n") else text
        return generate_text(self.registry)


def build_revision() -> str:
    try:
        revision = REVISION_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        return UNKNOWN
    return revision or UNKNOWN


class _StateCollector:
    def __init__(self, health: Health):
        self.health = health

    def describe(self):
        return []

    def collect(self):
        health = self.health
        up = GaugeMetricFamily("podresources_up", HELP["podresources_up"])
        up.add_metric([], health.up)
        last = GaugeMetricFamily("podresources_last_refresh_timestamp_seconds",
                                 HELP["podresources_last_refresh_timestamp_seconds"])
        last.add_metric([], health.last_success)
        backoff = GaugeMetricFamily("podresources_backoff_seconds",
                                    HELP["podresources_backoff_seconds"])
        backoff.add_metric([], round(health.backoff_seconds, 3))
        api = GaugeMetricFamily("podresources_kubelet_api_info",
                                HELP["podresources_kubelet_api_info"],
                                labels=["api_version", "get_allocatable", "get", "pod_level"])
        api.add_metric(list(health.capabilities.labels()), 1)
        node = GaugeMetricFamily("podresources_node_info", HELP["podresources_node_info"],
                                 labels=["node", "kubelet_api"])
        node.add_metric([health.node_name, health.capabilities.api_version], 1)
        build = GaugeMetricFamily("podresources_build_info", HELP["podresources_build_info"],
                                  labels=["version", "revision", "python_version"])
        build.add_metric([__version__, health.revision, platform.python_version()], 1)
        families = [up, last, backoff, api, node, build]
        if health.kube_api_up is not None:
            kube = GaugeMetricFamily("podresources_kube_api_up", HELP["podresources_kube_api_up"],
                                     labels=["resource"])
            for resource, value in health.kube_api_up.items():
                kube.add_metric([resource], value)
            families.append(kube)
        return families
