"""The Helm chart rendered by the real helm binary, and the objects a test looks at in it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from .harness import REPO

CHART = REPO / "charts" / "podresources-exporter"
RELEASE, NAMESPACE, FULLNAME = "pre", "monitoring", "pre-podresources-exporter"


def run_helm(helm: str, *args: str, chart: Path = CHART) -> subprocess.CompletedProcess:
    return subprocess.run([helm, *args[:1], *(["pre"] if args[0] == "template" else []),
                           str(chart), *args[1:]], capture_output=True, text=True, timeout=120)


def render(helm: str, *options: str, chart: Path = CHART) -> list[dict]:
    result = run_helm(helm, "template", "--namespace", NAMESPACE, *options, chart=chart)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(docs: list[dict], kind: str) -> dict:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def kinds(docs: list[dict]) -> list[str]:
    return sorted(doc["kind"] for doc in docs)


def exporter_container(docs: list[dict]) -> dict:
    containers = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert containers[0]["name"] == "exporter"  # first; extraContainers follow
    return containers[0]


def pod_spec(docs: list[dict]) -> dict:
    return one(docs, "DaemonSet")["spec"]["template"]["spec"]


def volume(docs: list[dict], name: str) -> dict:
    return next(v for v in pod_spec(docs)["volumes"] if v["name"] == name)


def mount(docs: list[dict], name: str) -> dict:
    return next(m for m in exporter_container(docs)["volumeMounts"] if m["name"] == name)


def assert_scrape_endpoint(endpoint: dict, scheme: str = "http") -> None:
    """A ServiceMonitor or PodMonitor endpoint as the chart writes it, over ``scheme``."""
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == scheme
    assert endpoint["honorLabels"] is True
    assert endpoint["relabelings"][0] == {"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                          "targetLabel": "node", "action": "replace"}
