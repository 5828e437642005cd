"""The Prometheus Operator's side, where the Operator itself cannot run (its root module is not
served by the Go module proxy): the scrape configuration it generates from a PodMonitor or a
ServiceMonitor, and the rule file it writes from a PrometheusRule, translated as its config
generator does (prometheus-operator pkg/prometheus/promcfg.go: ``generatePodMonitorConfig``,
``generateServiceMonitorConfig``, ``initRelabelings``, ``generateRunningFilter``,
``generateK8SSDConfig``; pkg/prometheus/operator.go writes a PrometheusRule's ``spec`` as a
rule file). Only what the chart's monitors use is translated; anything else is refused, so a
new field in the chart cannot be silently left out here.

The API server is given as the Operator's ``Prometheus.spec.apiserverConfig`` gives it (host,
CA, bearer token): the Prometheus under test runs outside the cluster."""

from __future__ import annotations

import re
from typing import Any

INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
# The monitor fields this translation knows (spec, then endpoint).
MONITOR_FIELDS = {"jobLabel", "podTargetLabels", "targetLabels", "attachMetadata",
                  "namespaceSelector", "selector", "sampleLimit", "scrapeClassicHistograms",
                  "endpoints", "podMetricsEndpoints"}
ENDPOINT_FIELDS = {"port", "path", "scheme", "honorLabels", "interval", "scrapeTimeout",
                   "relabelings", "metricRelabelings", "tlsConfig", "basicAuth",
                   "authorization"}


def sanitize(name: str) -> str:
    """``sanitizeLabelName``: a Kubernetes label name as a Prometheus label name."""
    return INVALID_LABEL_CHARS.sub("_", name)


def relabel(config: dict[str, Any]) -> dict[str, Any]:
    """A monitor's RelabelConfig (camelCase) as Prometheus' relabel_config."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label",
             "separator": "separator", "regex": "regex", "modulus": "modulus",
             "replacement": "replacement", "action": "action"}
    unknown = set(config) - set(names)
    assert not unknown, f"relabel fields not translated: {unknown}"
    return {names[key]: value for key, value in config.items()}


def _sd_config(role: str, namespaces: list[str], attach: dict[str, Any] | None,
               api: dict[str, Any]) -> dict[str, Any]:
    sd: dict[str, Any] = {"role": role, "namespaces": {"names": namespaces}, **api}
    if attach and attach.get("node"):
        sd["attach_metadata"] = {"node": True}
    return sd


def _selector_keeps(prefix: str, selector: dict[str, Any]) -> list[dict[str, Any]]:
    assert set(selector) <= {"matchLabels"}, f"selector not translated: {selector}"
    return [{"action": "keep",
             "source_labels": [f"__meta_kubernetes_{prefix}_label_{sanitize(k)}",
                               f"__meta_kubernetes_{prefix}_labelpresent_{sanitize(k)}"],
             "regex": f"({v});true"}
            for k, v in sorted((selector.get("matchLabels") or {}).items())]


def _common(job: str, spec: dict[str, Any], endpoint: dict[str, Any], role: str,
            api: dict[str, Any]) -> dict[str, Any]:
    unknown = (set(spec) - MONITOR_FIELDS) | (set(endpoint) - ENDPOINT_FIELDS)
    assert not unknown, f"monitor fields not translated: {unknown}"
    for auth in ("tlsConfig", "basicAuth", "authorization"):
        assert not endpoint.get(auth), f"{auth} needs the Secrets the Operator reads"
    config: dict[str, Any] = {"job_name": job, "honor_labels": bool(endpoint.get("honorLabels"))}
    config["kubernetes_sd_configs"] = [_sd_config(
        role, spec["namespaceSelector"]["matchNames"], spec.get("attachMetadata"), api)]
    for key, name in (("interval", "scrape_interval"), ("scrapeTimeout", "scrape_timeout"),
                      ("path", "metrics_path"), ("scheme", "scheme")):
        if endpoint.get(key):
            config[name] = endpoint[key]
    return config


def _tail(config: dict[str, Any], spec: dict[str, Any], endpoint: dict[str, Any],
          relabelings: list[dict[str, Any]]) -> dict[str, Any]:
    relabelings += [relabel(r) for r in endpoint.get("relabelings") or ()]
    # one shard: appendShardingRelabelingWithAddress (the config reloader puts 0 for $(SHARD))
    relabelings += [{"source_labels": ["__address__"], "target_label": "__tmp_hash",
                     "modulus": 1, "action": "hashmod"},
                    {"source_labels": ["__tmp_hash"], "regex": "0", "action": "keep"}]
    config["relabel_configs"] = relabelings
    if spec.get("sampleLimit"):
        config["sample_limit"] = spec["sampleLimit"]
    if spec.get("scrapeClassicHistograms") is not None:
        config["always_scrape_classic_histograms"] = spec["scrapeClassicHistograms"]
    if endpoint.get("metricRelabelings"):
        config["metric_relabel_configs"] = [relabel(r) for r in endpoint["metricRelabelings"]]
    return config


def pod_monitor_config(monitor: dict[str, Any], api: dict[str, Any],
                       index: int = 0) -> dict[str, Any]:
    """``generatePodMonitorConfig`` for the monitor's endpoint ``index``."""
    meta, spec = monitor["metadata"], monitor["spec"]
    endpoint = spec["podMetricsEndpoints"][index]
    config = _common(f"podMonitor/{meta['namespace']}/{meta['name']}/{index}", spec, endpoint,
                     "pod", api)
    relabelings: list[dict[str, Any]] = [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
         "regex": "(Failed|Succeeded)"},
        *_selector_keeps("pod", spec["selector"]),
        {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
         "regex": endpoint["port"]},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    ]
    relabelings += [{"source_labels": [f"__meta_kubernetes_pod_label_{sanitize(label)}"],
                     "target_label": sanitize(label), "regex": "(.+)", "replacement": "${1}"}
                    for label in spec.get("podTargetLabels") or ()]
    relabelings.append({"target_label": "job",
                        "replacement": f"{meta['namespace']}/{meta['name']}"})
    if spec.get("jobLabel"):
        relabelings.append({"source_labels": [
            f"__meta_kubernetes_pod_label_{sanitize(spec['jobLabel'])}"],
            "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
    relabelings.append({"target_label": "endpoint", "replacement": endpoint["port"]})
    return _tail(config, spec, endpoint, relabelings)


def service_monitor_config(monitor: dict[str, Any], api: dict[str, Any],
                           index: int = 0) -> dict[str, Any]:
    """``generateServiceMonitorConfig`` for the monitor's endpoint ``index``, with the
    EndpointSlice role (``Prometheus.spec.serviceDiscoveryRole: EndpointSlice``)."""
    meta, spec = monitor["metadata"], monitor["spec"]
    endpoint = spec["endpoints"][index]
    config = _common(f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}", spec,
                     endpoint, "endpointslice", api)
    relabelings: list[dict[str, Any]] = [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        *_selector_keeps("service", spec["selector"]),
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
         "regex": endpoint["port"]},
        {"source_labels": ["__meta_kubernetes_endpointslice_address_target_kind",
                           "__meta_kubernetes_endpointslice_address_target_name"],
         "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
        {"source_labels": ["__meta_kubernetes_endpointslice_address_target_kind",
                           "__meta_kubernetes_endpointslice_address_target_name"],
         "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
         "regex": "(Failed|Succeeded)"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
    ]
    relabelings += [{"source_labels": [f"__meta_kubernetes_service_label_{sanitize(label)}"],
                     "target_label": sanitize(label), "regex": "(.+)", "replacement": "${1}"}
                    for label in spec.get("targetLabels") or ()]
    relabelings += [{"source_labels": [f"__meta_kubernetes_pod_label_{sanitize(label)}"],
                     "target_label": sanitize(label), "regex": "(.+)", "replacement": "${1}"}
                    for label in spec.get("podTargetLabels") or ()]
    relabelings.append({"source_labels": ["__meta_kubernetes_service_name"],
                        "target_label": "job", "replacement": "${1}"})
    if spec.get("jobLabel"):
        relabelings.append({"source_labels": [
            f"__meta_kubernetes_service_label_{sanitize(spec['jobLabel'])}"],
            "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
    relabelings.append({"target_label": "endpoint", "replacement": endpoint["port"]})
    return _tail(config, spec, endpoint, relabelings)


def rule_file(rule: dict[str, Any]) -> dict[str, Any]:
    """What the Operator writes for a PrometheusRule: its ``spec`` (``groups``) as the rule
    file ``<namespace>-<name>-<uid>.yaml`` in the rules ConfigMap."""
    assert set(rule["spec"]) == {"groups"}, set(rule["spec"])
    return {"groups": rule["spec"]["groups"]}
