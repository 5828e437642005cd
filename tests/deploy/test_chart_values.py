"""The chart's DaemonSet as its values shape it: the defaults (the minimum of objects, the
node name, scheduling on every node, probes, resources, a stable selector), the extras
(SELinux, priority, arguments, an image digest) and the values the reference charts have
(ci/umbrella-extras-values.yaml: registry, pull secrets, affinity, extra volumes and containers).
"""

from __future__ import annotations

import pytest

from exporter import __version__

from ..support.chart import (
    NAMESPACE,
    RELEASE,
    exporter_container,
    kinds,
    mount,
    one,
    pod_spec,
    render,
)

pytestmark = pytest.mark.external


# ---- the DaemonSet ------------------------------------------------------------------------

def test_default_objects_are_the_minimum(defaults):
    assert kinds(defaults) == ["DaemonSet", "Pod", "Service", "ServiceAccount"]
    for doc in defaults:
        assert doc["metadata"]["namespace"] == NAMESPACE


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


def test_selector_is_stable_and_matches_the_pods(defaults):
    daemonset = one(defaults, "DaemonSet")
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "podresources-exporter",
                        "app.kubernetes.io/instance": RELEASE}
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert one(defaults, "Service")["spec"]["selector"] == selector


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


# ---- values the reference charts have (ci/umbrella-extras-values.yaml) -------------------

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


def test_test_pod_carries_the_common_labels(extras):
    labels = one(extras, "Pod")["metadata"]["labels"]
    assert labels["team"] == "hpc-platform"
    assert labels["app.kubernetes.io/component"] == "test"
    for doc in extras:
        assert doc["metadata"]["labels"]["team"] == "hpc-platform", doc["kind"]
