"""The chart on the real control plane: the Operator's CRDs installed first, the real helm
installing, upgrading and uninstalling releases, and what is left on the server afterwards."""

from __future__ import annotations

import copy
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .chart import CHART
from .controlplane import ApiStatus, ControlPlane, operator_crds

# Every kind the chart renders, with where to look for what a release left behind. The
# helm test Pod is a hook; helm deletes it when it succeeded.
CHART_KINDS = {
    "DaemonSet": "/apis/apps/v1/daemonsets",
    "ServiceAccount": "/api/v1/serviceaccounts",
    "Service": "/api/v1/services",
    "ConfigMap": "/api/v1/configmaps",
    "Secret": "/api/v1/secrets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/networkpolicies",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ServiceMonitor": "/apis/monitoring.coreos.com/v1/servicemonitors",
    "PodMonitor": "/apis/monitoring.coreos.com/v1/podmonitors",
    "PrometheusRule": "/apis/monitoring.coreos.com/v1/prometheusrules",
    "Pod": "/api/v1/pods",
}
# Azure Monitor's managed Prometheus reads the same monitors under a group of its own
# (serviceMonitor.apiVersion: azmonitoring.coreos.com/v1 in two ci/ values files).
AZURE_GROUP = "azmonitoring.coreos.com"
AZURE_KINDS = {"ServiceMonitor": f"/apis/{AZURE_GROUP}/v1/servicemonitors",
               "PodMonitor": f"/apis/{AZURE_GROUP}/v1/podmonitors"}


def install_operator_crds(plane: ControlPlane) -> list[str]:
    """The Operator's CRDs for ServiceMonitor, PodMonitor and PrometheusRule (generated from
    its API types) applied with strict field validation, and the same ServiceMonitor and
    PodMonitor schemas under Azure's group; returns the CRDs' names once each is Established."""
    admin = plane.client()
    names = []
    for path in operator_crds():
        crd = yaml.safe_load(path.read_text())
        admin.apply(crd)
        names.append(crd["metadata"]["name"])
        if crd["spec"]["names"]["kind"] in AZURE_KINDS:
            azure = copy.deepcopy(crd)
            azure["spec"]["group"] = AZURE_GROUP
            azure["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{AZURE_GROUP}"}
            admin.apply(azure)
            names.append(azure["metadata"]["name"])
    deadline = time.monotonic() + 30
    for name in names:
        while True:
            crd = admin.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions",
                                                                                      [])}
            if conditions.get("Established") == "True":
                break
            assert time.monotonic() < deadline, f"CRD {name} not established: {conditions}"
            time.sleep(0.05)
    return names


@dataclass
class HelmRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class Helm:
    """The real helm binary against the control plane, as its admin."""

    def __init__(self, binary: str, plane: ControlPlane, home: Path):
        self.binary, self.plane = binary, plane
        home.mkdir(parents=True, exist_ok=True)
        self.env = {"HOME": str(home), "KUBECONFIG": str(plane.admin_kubeconfig),
                    "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_DATA_HOME": str(home / "data"), "PATH": "/usr/bin:/bin"}

    def run(self, *args: str, timeout: float = 120) -> HelmRun:
        started = time.monotonic()
        result = subprocess.run([self.binary, *args], capture_output=True, text=True,
                                timeout=timeout, env=self.env)
        return HelmRun(result.returncode, result.stdout, result.stderr,
                       time.monotonic() - started)

    def install(self, release: str, namespace: str, *options: str) -> HelmRun:
        return self.run("install", release, str(CHART), "--namespace", namespace, *options)

    def upgrade(self, release: str, namespace: str, *options: str) -> HelmRun:
        return self.run("upgrade", release, str(CHART), "--namespace", namespace, *options)

    def uninstall(self, release: str, namespace: str) -> HelmRun:
        return self.run("uninstall", release, "--namespace", namespace)

    def template(self, release: str, namespace: str, *options: str) -> list[dict[str, Any]]:
        result = self.run("template", release, str(CHART), "--namespace", namespace, *options)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def leftovers(plane: ControlPlane, release: str) -> list[str]:
    """Every object of a kind the chart makes that still carries the release's instance
    label, in any namespace, and helm's own release records: what an uninstall left."""
    admin = plane.client()
    found = []
    kinds = dict(CHART_KINDS)
    kinds.update({f"{kind} ({AZURE_GROUP})": path for kind, path in AZURE_KINDS.items()})
    for kind, path in kinds.items():
        try:
            items = admin.get(path, labelSelector=f"app.kubernetes.io/instance={release}")
        except ApiStatus as error:
            if error.status == 404:  # the group is not served (no CRD)
                continue
            raise
        found += [f"{kind} {i['metadata'].get('namespace', '')}/{i['metadata']['name']}"
                  for i in items["items"]]
    records = admin.get("/api/v1/secrets", labelSelector=f"owner=helm,name={release}")
    found += [f"helm release {i['metadata']['name']}" for i in records["items"]]
    return found


def object_path(plane: ControlPlane, obj: dict[str, Any], namespace: str) -> str:
    return plane.client().path(obj, named=True, namespace=namespace)


def pod_from_template(daemonset: dict[str, Any], name: str) -> dict[str, Any]:
    """The Pod the DaemonSet controller would create from the template (its name, the
    template's metadata and spec); the node is left to the scheduler's part, not set."""
    template = copy.deepcopy(daemonset["spec"]["template"])
    metadata = template.get("metadata") or {}
    metadata["name"] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
