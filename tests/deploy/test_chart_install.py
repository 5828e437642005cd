"""The chart installed for real: the real helm against the real kube-apiserver (tests/
controlplane), the Prometheus Operator's CRDs generated from its API types installed first.

Every values file installs into a namespace that enforces Pod Security ``restricted``, every
object sent by helm v4's server-side apply with ``fieldValidation=Strict`` (read back from the
API server's audit log) and validated against the real schemas; upgrades between values files
and the uninstall leave nothing behind. Pod Security is measured: the DaemonSet's pod, made
from its rendered template, is created in namespaces enforcing each level, and the API
server's exact verdicts are asserted.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ..support.chart import CHART
from ..support.controlplane import ApiStatus, ControlPlane
from ..support.controlplane_chart import (
    AZURE_GROUP,
    Helm,
    install_operator_crds,
    leftovers,
    object_path,
)

pytestmark = pytest.mark.external

NAMESPACE = "monitoring"  # the namespace the ci/ values files name (webconfig's serverName)
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
VALUE_SETS = [None, *CI_VALUES]
VALUE_IDS = ["chart-defaults", *(path.name for path in CI_VALUES)]
# What the API server says of the DaemonSet's pod template when it is created in a restricted
# namespace: a warning (the DaemonSet is accepted, its pods would not be).
RESTRICTED_WARNING = 'would violate PodSecurity "restricted:latest"'


def values_options(path: Path | None) -> list[str]:
    return ["--values", str(path)] if path else []


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, helm: str, tmp_path_factory) -> Helm:
    """The control plane with the Operator's CRDs, a restricted namespace for the releases
    and the namespace one values file puts the dashboards in."""
    install_operator_crds(control_plane)
    for name in (NAMESPACE, "grafana"):
        try:
            control_plane.namespace(name, enforce="restricted")
        except ApiStatus as error:
            if error.status != 409:
                raise
    return Helm(helm, control_plane, tmp_path_factory.mktemp("helm-home"))


def report(capsys, line: str) -> None:
    with capsys.disabled():
        print(f"\n{line}")


# ---- install, every values file ---------------------------------------------------------

@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_every_values_file_installs_with_strict_validation(cluster, control_plane, values,
                                                           capsys):
    release = f"v{VALUE_SETS.index(values)}"
    options = values_options(values)
    rendered = [doc for doc in cluster.template(release, NAMESPACE, *options)
                if "helm.sh/hook" not in (doc["metadata"].get("annotations") or {})]
    mark = control_plane.audit_mark()
    result = cluster.install(release, NAMESPACE, *options)
    assert result.returncode == 0, result.stderr
    report(capsys, f"helm install {values.name if values else 'chart defaults'}: "
                   f"{result.seconds:.2f} s, {len(rendered)} objects")
    admin = control_plane.client()
    for doc in rendered:
        admin.get(object_path(control_plane, doc, NAMESPACE))  # 404 would raise
    # helm v4 sent every object by server-side apply, asking for strict field validation
    writes = [e for e in control_plane.audit(mark, user="kubernetes-admin")
              if e["verb"] in ("create", "patch", "update")]
    applied = {(e["objectRef"]["resource"], e["objectRef"]["name"]) for e in writes
               if "fieldValidation=Strict" in e["requestURI"] and e["verb"] == "patch"}
    for doc in rendered:
        plural, _ = admin.resource(doc["apiVersion"], doc["kind"])
        assert (plural, doc["metadata"]["name"]) in applied, (doc["kind"], writes)
    # the DaemonSet is accepted in a restricted namespace; its pods would not be
    # (helm prints the API server's warnings through klog, quotes escaped)
    assert RESTRICTED_WARNING in result.stderr.replace('\\"', '"'), result.stderr
    uninstall = cluster.uninstall(release, NAMESPACE)
    assert uninstall.returncode == 0, uninstall.stderr
    assert leftovers(control_plane, release) == []


def test_strict_validation_refuses_a_misspelt_monitor_field(cluster, control_plane):
    """What strict validation against the Operator's schema catches, as the API server says
    it: an unknown field (server-side apply, as helm v4 sends objects, and a plain create), and
    a wrong type, each with the field's path."""
    admin = control_plane.client()
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
               "metadata": {"name": "typo", "namespace": NAMESPACE},
               "spec": {"selector": {"matchLabels": {"app": "x"}},
                        "podMetricsEndpoints": [{"port": "metrics", "honorLabel": True}]}}
    with pytest.raises(ApiStatus) as refused:
        admin.apply(monitor)
    # server-side apply cannot build its typed patch: kube-apiserver 1.37 answers 500
    assert (refused.value.status, refused.value.message) == (
        500, "failed to create typed patch object (monitoring/typo; monitoring.coreos.com/v1, "
             "Kind=PodMonitor): .spec.podMetricsEndpoints[0].honorLabel: field not declared "
             "in schema")
    with pytest.raises(ApiStatus) as refused:
        admin.create(monitor)
    assert (refused.value.status, refused.value.reason) == (400, "BadRequest")
    assert refused.value.message == ('PodMonitor in version "v1" cannot be handled as a '
                                     'PodMonitor: strict decoding error: unknown field '
                                     '"spec.podMetricsEndpoints[0].honorLabel"')
    monitor["spec"]["podMetricsEndpoints"][0] = {"port": "metrics", "honorLabels": "yes"}
    with pytest.raises(ApiStatus) as refused:
        admin.apply(monitor)
    assert (refused.value.status, refused.value.message) == (
        500, "failed to create typed patch object (monitoring/typo; monitoring.coreos.com/v1, "
             "Kind=PodMonitor): .spec.podMetricsEndpoints[0].honorLabels: expected boolean, "
             "got &{yes}")
    with pytest.raises(ApiStatus) as refused:
        admin.create(monitor)
    assert refused.value.status == 422
    assert 'spec.podMetricsEndpoints[0].honorLabels: Invalid value: "string": ' \
           'spec.podMetricsEndpoints[0].honorLabels in body must be of type boolean' \
        in refused.value.message, refused.value.message


# ---- upgrade and uninstall ----------------------------------------------------------------

def test_upgrade_between_values_files_and_uninstall_leave_nothing(cluster, control_plane):
    admin = control_plane.client()
    release = "up"
    operator = CHART / "ci" / "prometheus-operator-values.yaml"
    podmonitor = CHART / "ci" / "podmonitor-annotations-values.yaml"
    name = f"{release}-podresources-exporter"
    first = cluster.install(release, NAMESPACE, "--values", str(operator))
    assert first.returncode == 0, first.stderr
    monitors = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/servicemonitors"
    assert [m["metadata"]["name"] for m in admin.get(monitors)["items"]] == [name]
    rules = admin.get(f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/"
                      f"prometheusrules/{name}")
    assert rules["spec"]["groups"]
    dashboards = admin.get("/api/v1/namespaces/grafana/configmaps",
                           labelSelector="grafana_dashboard=1")["items"]
    assert len(dashboards) == 3
    second = cluster.upgrade(release, NAMESPACE, "--values", str(podmonitor))
    assert second.returncode == 0, second.stderr
    # the ServiceMonitor, rules, dashboards and the Service went; a PodMonitor came (Azure's)
    assert admin.get(monitors)["items"] == []
    assert admin.get(f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/"
                     "prometheusrules")["items"] == []
    assert admin.get("/api/v1/namespaces/grafana/configmaps",
                     labelSelector="grafana_dashboard=1")["items"] == []
    with pytest.raises(ApiStatus) as gone:
        admin.get(f"/api/v1/namespaces/{NAMESPACE}/services/{name}")
    assert gone.value.status == 404
    podmonitors = admin.get(f"/apis/{AZURE_GROUP}/v1/namespaces/{NAMESPACE}/podmonitors")
    assert [m["metadata"]["name"] for m in podmonitors["items"]] == [name]
    daemonset = admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{name}")
    assert daemonset["spec"]["template"]["metadata"]["annotations"][
        "prometheus.io/scrape"] == "true"
    uninstall = cluster.uninstall(release, NAMESPACE)
    assert uninstall.returncode == 0, uninstall.stderr
    assert leftovers(control_plane, release) == []


# ---- helm test under restricted -------------------------------------------------------------

def test_helm_test_pod_is_admitted_under_restricted(cluster, control_plane):
    """``helm test`` creates its pod in the restricted namespace; the API server admits it.
    No kubelet runs it here: the test reports it Succeeded, as the kubelet would once the
    script passed (its script runs against a real exporter in test_chart_helm_test.py), and
    helm deletes it (hook-succeeded)."""
    admin = control_plane.client()
    release = "ht"
    installed = cluster.install(release, NAMESPACE)
    assert installed.returncode == 0, installed.stderr
    pod_path = f"/api/v1/namespaces/{NAMESPACE}/pods/{release}-podresources-exporter-test"
    outcome: dict[str, object] = {}
    runner = threading.Thread(target=lambda: outcome.update(
        run=cluster.run("test", release, "--namespace", NAMESPACE, "--timeout", "60s")))
    runner.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            pod = admin.get(pod_path)
            break
        except ApiStatus:
            assert time.monotonic() < deadline, "helm test created no pod"
            time.sleep(0.1)
    namespace = admin.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pod["status"] = {"phase": "Succeeded"}
    admin.put_status(pod)
    runner.join(90)
    run = outcome["run"]
    assert run.returncode == 0, run.stderr  # type: ignore[attr-defined]
    assert "Phase:          Succeeded" in run.stdout  # type: ignore[attr-defined]
    assert cluster.uninstall(release, NAMESPACE).returncode == 0
    assert leftovers(control_plane, release) == []
