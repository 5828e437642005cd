"""The monitors and rules as the Prometheus Operator runs them, with the real API server
(tests/controlplane) and Prometheus 3.13's own Kubernetes service discovery.

The Operator itself cannot run here (its root module is not served by the Go module proxy):
its scrape configuration is translated from the chart's PodMonitor and ServiceMonitor as its
config generator writes it (tests/support/controlplane_monitors.py), and the PrometheusRule's
groups are loaded as its rule file. The chart is installed by the real helm (its objects
validated against the Operator's CRDs); the exporter pod is published as the kubelet reports
it (Running, its pod IP this machine's address, relayed to the exporter under test), with the
EndpointSlice the EndpointSlice controller would make for the chart's Service. Prometheus finds
the exporter through the API server, scrapes it with the chart's labels, keeps the classic
histograms where native ones are made, and the recording rules give the figures the proofs
(test_prometheus_proof.py) expect for this node.
"""

from __future__ import annotations

import contextlib

import pytest
import yaml

from ..support.controlplane import ApiStatus, ControlPlane
from ..support.controlplane_api import Gate, pod_address
from ..support.controlplane_chart import Helm, install_operator_crds, pod_from_template
from ..support.controlplane_monitors import pod_monitor_config, rule_file, service_monitor_config
from ..support.harness import Exporter, Node
from ..support.prometheus import Prometheus, tool

pytestmark = pytest.mark.external

NAMESPACE = "monitoring-sd"
NODE = "gpu-node-01"  # profile dual-socket-gpu, as east's gpu-node-01 in the proofs
PROMETHEUS_RULES = [
    # (verb, group, resources): what kube-prometheus-stack grants Prometheus
    ("", ["nodes", "nodes/metrics", "services", "endpoints", "pods"], ["get", "list", "watch"]),
    ("discovery.k8s.io", ["endpointslices"], ["get", "list", "watch"]),
]


def prometheus_identity(plane: ControlPlane) -> str:
    """A ServiceAccount for Prometheus with the discovery rights kube-prometheus-stack gives
    it; its token from the TokenRequest API."""
    admin = plane.client()
    with contextlib.suppress(ApiStatus):
        plane.namespace("prometheus")
    rules = [{"apiGroups": [group], "resources": resources, "verbs": verbs}
             for group, resources, verbs in PROMETHEUS_RULES]
    admin.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "prometheus", "namespace": "prometheus"}})
    admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "prometheus-discovery"}, "rules": rules})
    admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": "prometheus-discovery"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "prometheus-discovery"},
                 "subjects": [{"kind": "ServiceAccount", "name": "prometheus",
                               "namespace": "prometheus"}]})
    return admin.request_token("prometheus", "prometheus")


def publish_exporter(plane: ControlPlane, docs: list[dict], address: str, port: int) -> dict:
    """The exporter's pod as the DaemonSet controller creates it, scheduled to NODE and reported
    Running by the kubelet at ``address``; and the EndpointSlice of the chart's Service, if it
    has one, as the EndpointSlice controller writes it."""
    admin = plane.client()
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = pod_from_template(daemonset, f"{daemonset['metadata']['name']}-x7k2p")
    pod["spec"]["nodeName"] = NODE
    stored = admin.create(pod, NAMESPACE)
    stored["status"] = {"phase": "Running", "podIP": address,
                        "podIPs": [{"ip": address}], "hostIP": address,
                        "conditions": [{"type": "Ready", "status": "True"}]}
    stored = admin.put_status(stored)
    service = next((d for d in docs if d["kind"] == "Service"), None)
    if service is not None:
        admin.create({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service['metadata']['name']}-abcde",
                         "labels": {"kubernetes.io/service-name": service["metadata"]["name"],
                                    "endpointslice.kubernetes.io/managed-by":
                                        "endpointslice-controller.k8s.io",
                                    **service["metadata"]["labels"]}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True},
                           "nodeName": NODE,
                           "targetRef": {"kind": "Pod", "namespace": NAMESPACE,
                                         "name": stored["metadata"]["name"],
                                         "uid": stored["metadata"]["uid"]}}],
            "ports": [{"name": "metrics", "port": port, "protocol": "TCP"}]}, NAMESPACE)
    return stored


@pytest.fixture(scope="module")
def stage(control_plane: ControlPlane, helm: str, tmp_path_factory):
    install_operator_crds(control_plane)
    with contextlib.suppress(ApiStatus):
        control_plane.namespace(NAMESPACE, enforce="privileged")
    api = {"api_server": control_plane.server,
           "tls_config": {"ca_file": str(control_plane.ca)},
           "authorization": {"credentials": prometheus_identity(control_plane)}}
    return Helm(helm, control_plane, tmp_path_factory.mktemp("helm-home")), api


@pytest.mark.parametrize("monitor", ["PodMonitor", "ServiceMonitor"])
async def test_prometheus_discovers_and_scrapes_the_exporter_as_the_operator_configures_it(
        stage, control_plane, monitor):
    helm, api = stage
    prometheus_binary = tool("3.13", "prometheus")
    release = "sd-pod" if monitor == "PodMonitor" else "sd-svc"
    key = "podMonitor" if monitor == "PodMonitor" else "serviceMonitor"
    admin = control_plane.client()
    name = f"{release}-podresources-exporter"
    group = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}"
    async with Node("dual-socket-gpu") as kubelet, \
            Exporter(kubelet.settings(node_name=NODE)) as exporter:
        await exporter.ready()
        # the pod's IP: this machine's address (an EndpointSlice may not name the loopback),
        # relayed to the exporter under test, which listens on the loopback
        relay = await Gate(exporter.port, listen=pod_address()).start()
        port = relay.address
        # the chart's pods listen where the relay does
        values = ["--set", f"containerPort={port}", "--set", f"service.port={port}",
                  "--set", f"{key}.enabled=true", "--set", "prometheusRule.enabled=true"]
        installed = helm.install(release, NAMESPACE, *values)
        assert installed.returncode == 0, installed.stderr
        pod = publish_exporter(control_plane, helm.template(release, NAMESPACE, *values),
                               relay.listen, port)
        try:
            stored_monitor = admin.get(f"{group}/{monitor.lower()}s/{name}")
            rules = admin.get(f"{group}/prometheusrules/{name}")
            translate = pod_monitor_config if monitor == "PodMonitor" \
                else service_monitor_config
            rules_path = control_plane.dir / f"{NAMESPACE}-{name}-rules.yaml"
            rules_path.write_text(yaml.safe_dump(rule_file(rules)))
            async with Prometheus(prometheus_binary, [translate(stored_monitor, api)],
                                  rules=[rules_path], global_options={
                                      "convert_classic_histograms_to_nhcb": True}) as prometheus:
                targets = await prometheus.wait_until(
                    lambda: _active(prometheus), f"{monitor}'s target to be scraped")
                assert len(targets) == 1, targets
                labels = targets[0]["labels"]
                assert (labels["job"], labels["node"], labels["endpoint"],
                        labels["instance"]) == ("podresources-exporter", NODE, "metrics",
                                                f"{relay.listen}:{port}")
                free = await prometheus.wait_until(lambda: prometheus.instant(
                    "node_numa_node:podresources_cpus_free:sum"), "the recording rules")
                assert {(s["metric"]["node"], s["metric"]["numa_node"]): float(s["value"][1])
                        for s in free} == {(NODE, "0"): 0.0, (NODE, "1"): 4.0}
                up = await prometheus.instant('up{job="podresources-exporter"}')
                assert [(s["metric"]["namespace"], s["metric"]["pod"], s["value"][1])
                        for s in up] == [(NAMESPACE, pod["metadata"]["name"], "1")]
                # classic buckets kept though native histograms are made from them
                buckets = await prometheus.instant(
                    "count(podresources_api_request_duration_seconds_bucket)")
                assert buckets and float(buckets[0]["value"][1]) > 0
                groups = (await prometheus.api("/api/v1/rules"))["groups"]
                assert sorted(g["name"] for g in groups) == sorted(
                    g["name"] for g in rules["spec"]["groups"])
                assert {r.get("health") for g in groups for r in g["rules"]} <= {"ok",
                                                                                  "unknown"}
        finally:
            admin.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"
                         "?gracePeriodSeconds=0")
            admin.delete(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices")
            await relay.stop()
            assert helm.uninstall(release, NAMESPACE).returncode == 0


async def _active(prometheus: Prometheus) -> list[dict]:
    data = await prometheus.api("/api/v1/targets", state="active")
    return [t for t in data["activeTargets"] if t.get("health") == "up"]
