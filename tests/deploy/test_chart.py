"""The Helm chart, rendered by the real helm binary and checked as a cluster operator would.

helm lint and template for the defaults and every ci/*-values.yaml; the standard objects
validated against the Kubernetes API schemas (oldest and newest available); checkov with every
deliberate finding explained in the chart; the values schema refusing bad values; NOTES and
Chart.yaml. What the rendered objects say is asserted value by value in the test_chart_*.py
beside this file, by chart feature.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from exporter import __version__

from ..support.chart import CHART, NAMESPACE, RELEASE, kinds, render, run_helm
from ..support.harness import require_tool, short_tmpdir

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")  # the oldest and newest schemas kubernetes-validate has
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
# Checkov findings the chart explains (checkov.io/skipN annotations); any other is a failure.
EXPLAINED_CHECKS = {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_40", "CKV2_K8S_6",
                    "CKV_K8S_38", "CKV_K8S_8", "CKV_K8S_9"}


pytestmark = pytest.mark.external


def values_options(path: Path | None) -> list[str]:
    return ["--values", str(path)] if path else []


VALUE_SETS = [None, *CI_VALUES]
VALUE_IDS = ["chart-defaults", *(path.name for path in CI_VALUES)]


# ---- helm lint, template, Kubernetes schemas, checkov ------------------------------------

@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_helm_lint_strict(helm, values):
    result = run_helm(helm, "lint", "--strict", *values_options(values))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ERROR]" not in result.stdout and "[WARNING]" not in result.stdout, result.stdout


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_rendered_objects_validate_against_kubernetes_schemas(helm, values, tmp_path):
    validate = require_tool("kubernetes-validate", "PyPI package kubernetes-validate")
    docs = render(helm, *values_options(values))
    standard = [doc for doc in docs if doc["kind"] not in OPERATOR_KINDS]
    assert {"DaemonSet", "ServiceAccount"} <= set(kinds(standard))
    manifest = tmp_path / "standard.yaml"
    manifest.write_text(yaml.safe_dump_all(standard))
    for version in KUBERNETES_VERSIONS:
        result = subprocess.run([validate, "--strict", "--quiet", "-k", version, str(manifest)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"Kubernetes {version}:\n{result.stdout}{result.stderr}"


def test_checkov_has_no_unexplained_finding(helm, tmp_path):
    checkov = require_tool("checkov", "PyPI package checkov")
    for values, name in zip(VALUE_SETS, VALUE_IDS):
        docs = render(helm, *values_options(values))
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    result = subprocess.run([checkov, "--directory", str(tmp_path), "--framework", "kubernetes",
                             "--skip-download", "--compact", "--output", "json"],
                            capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout)
    report = report[0] if isinstance(report, list) else report
    failed = [(c["check_id"], c["check_name"], c["resource"], c["file_path"])
              for c in report["results"]["failed_checks"]]
    assert failed == []
    skipped = report["results"]["skipped_checks"]
    assert report["summary"]["passed"] > 500 and skipped
    for check in skipped:
        assert check["check_id"] in EXPLAINED_CHECKS, check["check_id"]
        assert len(check["check_result"]["suppress_comment"]) > 30, check  # a reason


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_rendered_manifests_have_no_trailing_whitespace(helm, values):
    result = run_helm(helm, "template", "--namespace", NAMESPACE, "--set",
                      "serviceMonitor.enabled=true" if values is None else "tests.enabled=true",
                      *values_options(values))
    assert result.returncode == 0, result.stderr
    offending = [line for line in result.stdout.splitlines() if line != line.rstrip()]
    assert offending == []


@pytest.mark.parametrize("setting, message", [
    ("nosuchkey=1", "additional properties 'nosuchkey' not allowed"),
    ("kubeletRootDir=var/lib/kubelet", "does not match pattern '^/'"),
    ("image.digest=latest", "/image/digest"),
    ("serviceMonitor.intervl=30s", "additional properties 'intervl' not allowed"),
    ("logFormat=xml", "/logFormat"),
    ("extraArgs={interval=30}", "/extraArgs/0"),
    ("webConfig.config.basic_auth_users.admin=plaintext", "/webConfig/config/basic_auth_users"),
])
def test_schema_rejects_bad_values(helm, setting, message):
    result = run_helm(helm, "template", "--set", setting)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


# ---- NOTES, Chart.yaml --------------------------------------------------------------------

def test_notes_tell_the_operator_about_pod_security(helm):
    result = subprocess.run([helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                             "--dry-run=client"], capture_output=True, text=True, timeout=120,
                            env={"KUBECONFIG": "/nonexistent", "HOME": str(short_tmpdir())})
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert f"kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged" \
        in notes
    assert ("/var/lib/kubelet/pod-resources read-only, /var/lib/kubelet/pods-api read-only, "
            "/sys/devices/system read-only") in notes
    assert "Nothing scrapes the exporter yet" in notes


def test_notes_promise_no_grafana_folder_the_sidecar_does_not_make(helm):
    result = subprocess.run([helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                             "--dry-run=client", "--set", "dashboards.enabled=true"],
                            capture_output=True, text=True, timeout=120,
                            env={"KUBECONFIG": "/nonexistent", "HOME": str(short_tmpdir())})
    assert result.returncode == 0, result.stderr
    notes = " ".join(result.stdout.split("NOTES:", 1)[1].split())
    assert 'folder "NUMA"' not in notes
    assert ("the sidecar files them in that folder only if it is set up for it (grafana chart: "
            "sidecar.dashboards.folderAnnotation=grafana_folder and "
            "sidecar.dashboards.provider.foldersFromFilesStructure=true), otherwise in the "
            "General folder") in notes


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["type"] == "application"
    assert chart["appVersion"] == __version__
    assert chart["kubeVersion"].startswith(">=")
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    images = yaml.safe_load(annotations["artifacthub.io/images"])
    assert images[0]["image"].endswith(f":{chart['appVersion']}")
    assert "ci/" in (CHART / ".helmignore").read_text().split()
