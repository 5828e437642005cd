"""The real kubelet's objects published into the real API server, for the exporter's
Kubernetes-API view to read (the differential's 1.34 pod-context path, ``--why`` through the
API): the Node as the kubelet registers it (status from the node status setter) and each pod
bound to it with the status the kubelet sets (a rejected pod ``Failed`` with its reason).

One process (one differential worker) publishes to an API server of its own (the kubelet
names its pods alike on every node), under a node name of its own; between two cases only what
changed is written (a pod whose spec changed is deleted and created again: a pod's spec is
immutable). ``$PODRESOURCES_CONTROL_PLANE`` says where: ``per-worker``, or a JSON file the
control plane fixture writes (:func:`connection_file`) for a single process."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .controlplane import ApiStatus, Client, ControlPlane

ENVIRONMENT = "PODRESOURCES_CONTROL_PLANE"
NAMESPACE_SETUP = "default"
# what the API server sets itself and refuses, or ignores, on create
SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "selfLink",
                 "generation")


def connection_file(plane: ControlPlane, path: Path) -> Path:
    """Where a worker finds the API server and the admin's credentials."""
    path.write_text(json.dumps({"server": plane.server, "ca": str(plane.ca),
                                "cert": str(plane.admin_cert), "key": str(plane.admin_key),
                                "kubeconfig": str(plane.admin_kubeconfig)}))
    return path


class Publisher:
    """Publishes one node's objects, keeping what it wrote last."""

    def __init__(self, connection: dict[str, str], suffix: str):
        self.client = Client(connection["server"], Path(connection["ca"]),
                             cert=(Path(connection["cert"]), Path(connection["key"])))
        self.kubeconfig = connection["kubeconfig"]
        self.suffix = suffix
        self.node: dict[str, Any] | None = None
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}  # what is on the server
        self.writes = 0
        self._accounts: set[str] = set()

    def node_name(self, name: str) -> str:
        return f"{name}-{self.suffix}"

    def publish(self, node: dict[str, Any], pods: list[dict[str, Any]]) -> str:
        """Make the server hold exactly ``node`` and ``pods`` (renamed to this publisher's
        node); returns the node's name there."""
        name = self.node_name(node["metadata"]["name"])
        wanted_node = _clean(node, "v1", "Node")
        wanted_node["metadata"]["name"] = name
        if wanted_node != self.node:
            self._put_node(wanted_node)
            self.node = wanted_node
        wanted: dict[tuple[str, str], dict[str, Any]] = {}
        for pod in pods:
            body = _clean(pod, "v1", "Pod")
            body["spec"]["nodeName"] = name
            meta = body["metadata"]
            wanted[(meta.get("namespace") or "default", meta["name"])] = body
        for key in [k for k in self.pods if k not in wanted]:
            self._delete_pod(key)
        for key, body in wanted.items():
            if self.pods.get(key) != body:
                self._put_pod(key, body)
        return name

    # ---- the writes -------------------------------------------------------------------------

    def _put_node(self, node: dict[str, Any]) -> None:
        path = self.client.path(node, named=True)
        current = self.client.request("GET", path, check=False)
        if current.status == 404:
            self.client.create(node)  # the kubelet registers its Node with its status
        else:
            body = copy.deepcopy(node)
            body["metadata"]["resourceVersion"] = current.body["metadata"]["resourceVersion"]
            stored = self.client.request("PUT", path, body,
                                         query={"fieldValidation": "Strict"}).body
            stored["status"] = node.get("status", {})
            self.client.put_status(stored)
        self.writes += 1

    def _put_pod(self, key: tuple[str, str], pod: dict[str, Any]) -> None:
        namespace, name = key
        if namespace not in self._accounts:
            self._default_account(namespace)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        if key in self.pods:
            old = self.pods[key]
            if old["spec"] != pod["spec"] or old["metadata"] != pod["metadata"]:
                self._delete_pod(key)
        if key in self.pods:  # only the status changed
            current = self.client.get(path)
        else:
            body = copy.deepcopy(pod)
            status = body.pop("status", None)
            current = self.client.create(body, namespace)
            self.writes += 1
            if not status:
                self.pods[key] = pod
                return
        current["status"] = pod.get("status", {})
        self.client.put_status(current)
        self.writes += 1
        self.pods[key] = pod

    def _delete_pod(self, key: tuple[str, str]) -> None:
        namespace, name = key
        self.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")
        self.pods.pop(key, None)
        self.writes += 1

    def _default_account(self, namespace: str) -> None:
        """A pod needs its ServiceAccount (the ServiceAccount admission plugin); the service
        account controller would have made ``default``."""
        if namespace != NAMESPACE_SETUP:
            try:
                self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})
            except ApiStatus as error:
                if error.status != 409:
                    raise
        try:
            self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": "default", "namespace": namespace}})
        except ApiStatus as error:
            if error.status != 409:
                raise
        self._accounts.add(namespace)


def _clean(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    body = copy.deepcopy(obj)
    body["apiVersion"], body["kind"] = api_version, kind
    for key in SERVER_FIELDS:
        body.setdefault("metadata", {}).pop(key, None)
    return body


_publisher: Publisher | None = None
PER_WORKER = "per-worker"


def publisher() -> Publisher | None:
    """This process's publisher: with ``$PODRESOURCES_CONTROL_PLANE`` a connection file, to
    that control plane; ``per-worker``, to one this process starts (and stops when it exits).
    Workers sharing one API server would share its namespaces, and the kubelet names its pods
    alike on every node (``default/pod-0``): the differential's workers each start their own."""
    global _publisher
    setting = os.environ.get(ENVIRONMENT)
    if not setting:
        return None
    if _publisher is None:
        if setting == PER_WORKER:
            from multiprocessing import util

            plane = ControlPlane.start(Path(tempfile.mkdtemp(prefix="controlplane-")))
            util.Finalize(None, plane.close, exitpriority=10)  # run when the worker exits
            connection = json.loads(connection_file(plane, plane.dir / "api.json").read_text())
        else:
            connection = json.loads(Path(setting).read_text())
        _publisher = Publisher(connection, f"p{os.getpid()}")
    return _publisher


def publish_kubelet_objects(api_objects: tuple[dict[str, Any], list[dict[str, Any]]]
                            ) -> tuple[dict[str, str], str] | None:
    """The kubelet's Node and pods on the real API server, when there is one: the exporter's
    environment (``KUBECONFIG``, the admin's) and the node's name there; None otherwise."""
    target = publisher()
    if target is None:
        return None
    node, pods = api_objects
    name = target.publish(node, pods)
    return {"KUBECONFIG": target.kubeconfig}, name
