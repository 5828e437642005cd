"""The chart's least privilege: what the exporter may touch on the node and in the cluster.

Host paths mounted read-only (the socket's directory, never the socket file; sysfs; the Pods
API), a gRPC client working through a read-only bind mount as the kubelet gives it, the
container's security context, RBAC and a service-account token only with the Kubernetes-API
view, and the web config Secret (TLS and basic auth) mounted as a directory.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ..support.chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    assert_scrape_endpoint,
    exporter_container,
    kinds,
    mount,
    one,
    pod_spec,
    render,
    run_helm,
    volume,
)
from ..support.harness import IN_CI, REPO, Node, short_tmpdir

pytestmark = pytest.mark.external


# ---- host mounts ----------------------------------------------------------------------------

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


def test_custom_kubelet_root_dir_moves_the_host_path_only(helm):
    for root in ("/data/kubelet", "/data/kubelet/"):
        docs = render(helm, "--set", f"kubeletRootDir={root}", "--set", "watchPath.enabled=true")
        assert volume(docs, "pod-resources")["hostPath"]["path"] == "/data/kubelet/pod-resources"
        assert mount(docs, "pod-resources")["mountPath"] == "/var/lib/kubelet/pod-resources"
        assert volume(docs, "kubelet-root")["hostPath"] == {"path": "/data/kubelet",
                                                            "type": "Directory"}


def test_watch_path_mounts_the_kubelet_root_read_only(helm, defaults):
    docs = render(helm, "--set", "watchPath.enabled=true")
    assert "--watch-path=/host/kubelet" in exporter_container(docs)["args"]
    assert volume(docs, "kubelet-root")["hostPath"] == {"path": "/var/lib/kubelet",
                                                        "type": "Directory"}
    assert mount(docs, "kubelet-root") == {"name": "kubelet-root", "mountPath": "/host/kubelet",
                                           "readOnly": True}
    assert not any(a.startswith("--watch-path") for a in exporter_container(defaults)["args"])


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


# ---- security context, RBAC, token -------------------------------------------------------

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


def test_no_rbac_and_no_token_without_the_kubernetes_api_view(defaults):
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(kinds(defaults))
    assert pod_spec(defaults)["automountServiceAccountToken"] is False
    assert one(defaults, "ServiceAccount")["automountServiceAccountToken"] is False
    assert "--kube-api" not in exporter_container(defaults)["args"]


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
