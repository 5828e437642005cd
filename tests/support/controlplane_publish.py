"""The real kubelet's pods and Node in the real API server, in the order a cluster makes them,
for the exporter's Kubernetes-API view to read (the differential's pod context where the
release serves no Pods API, 1.34 to 1.36: its cases and its sequences):

1. :meth:`Publisher.create_pods`: the pods created in the API server, bound to the node, before
   the kubelet sees them (or one by one, :meth:`Publisher.create_pod`, as a sequence admits
   them); the kubelet admits the objects the server stored. The API server sets a
   pod's ``metadata.uid`` itself (``rest.FillObjectMetaSystemFields``, whatever the request
   says), and the kubelet keys its state files by that UID (``cpu_manager_state``,
   ``memory_manager_state``, the device manager's checkpoint): the exporter matches them to the
   pods it reads by UID, as the managers' ``removeStaleState`` matches them to the active pods.
2. :meth:`Publisher.publish`: the Node as the kubelet registers it (status from the node
   status setters) and each pod's status as the status manager syncs it (a rejected pod
   ``Failed`` with its reason). A pod the kubelet holds that was not created here has a UID the
   server never gave: refused, not published under another UID.

One process (one differential worker) publishes to an API server of its own (the kubelet names
its pods alike on every node, ``default/pod-0``), started on first use (:func:`publisher`) and
stopped when the process exits. Between two cases only what changed is written: a pod whose
manifest is the same is kept (the reset kubelet admits it again, same UID), the others go in
one collection delete and the new ones are created (a pod's spec is immutable); a status, or
the Node, only when it differs. The writes of a step go side by side (``WRITERS``), each on a
kept-alive connection."""

from __future__ import annotations

import copy
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .controlplane import ApiStatus, Client, ControlPlane

NAMESPACE_SETUP = "default"
WRITERS = 4  # requests in flight at once, each on its own kept-alive connection
# what the API server sets itself and refuses, or ignores, on create
SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "selfLink",
                 "generation")


class PublishError(RuntimeError):
    """The kubelet holds a pod the API server never handed it."""


@dataclass
class Held:
    """One pod on the server: the manifest sent, the object stored, the status last written."""

    sent: dict[str, Any]
    stored: dict[str, Any]
    status: dict[str, Any] | None = None

    @property
    def uid(self) -> str:
        return str(self.stored["metadata"]["uid"])


class Publisher:
    """Publishes one node's objects, keeping what it wrote last."""

    def __init__(self, client: Client, kubeconfig: str):
        self.client = client
        self.kubeconfig = kubeconfig
        self.node: dict[str, Any] | None = None  # as sent
        self._node_stored: dict[str, Any] | None = None
        self.pods: dict[tuple[str, str], Held] = {}
        self.writes = 0  # requests that wrote (a collection delete counts one)
        self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="publish")
        self._accounts: set[str] = set()

    def create_pods(self, manifests: list[dict[str, Any]], node_name: str
                    ) -> list[dict[str, Any]]:
        """The pods as the API server stores them, bound to ``node_name``, in order: what the
        kubelet admits (each UID is the server's). Every other pod is deleted: a pod sent as
        before is kept, the rest go in one collection delete per namespace, and the new ones
        are created side by side."""
        bodies = [_pod_body(manifest, node_name) for manifest in manifests]
        kept = {key for key, body in bodies
                if key in self.pods and self.pods[key].sent == body}
        self._delete_pods([key for key in self.pods if key not in kept])
        for namespace in {key[0] for key, _ in bodies} - self._accounts:
            self._default_account(namespace)
        created = self._pool.map(lambda item: self.client.create(item[1], item[0][0]),
                                 [item for item in bodies if item[0] not in kept])
        for (key, body), stored in zip([i for i in bodies if i[0] not in kept], created,
                                       strict=True):
            self.pods[key] = Held(body, stored)
            self.writes += 1
        return [copy.deepcopy(self.pods[key].stored) for key, _ in bodies]

    def create_pod(self, manifest: dict[str, Any], node_name: str) -> dict[str, Any]:
        """One more pod, as :meth:`create_pods` makes each, the others kept (a sequence's
        admission: tests/support/differential/steps.py)."""
        key, body = _pod_body(manifest, node_name)
        if key in self.pods:
            self._delete_pods([key])
        if key[0] not in self._accounts:
            self._default_account(key[0])
        self.pods[key] = Held(body, self.client.create(body, key[0]))
        self.writes += 1
        return copy.deepcopy(self.pods[key].stored)

    def publish(self, node: dict[str, Any], pods: list[dict[str, Any]]) -> str:
        """Make the server hold ``node`` and exactly ``pods`` with their statuses (written
        side by side); returns the node's name. Every pod must have come from
        :meth:`create_pods`."""
        wanted_node = _clean(node, "v1", "Node")
        if wanted_node != self.node:
            self._put_node(wanted_node)
            self.node = wanted_node
        seen: set[tuple[str, str]] = set()
        changed: list[tuple[Held, dict[str, Any]]] = []
        for pod in pods:
            meta = pod["metadata"]
            key = (meta.get("namespace") or "default", meta["name"])
            held = self.pods.get(key)
            if held is None or held.uid != meta.get("uid"):
                raise PublishError(f"the kubelet holds pod {key[0]}/{key[1]} (UID "
                                   f"{meta.get('uid')}) the API server did not create: "
                                   "create it with create_pods and admit what it returns")
            seen.add(key)
            status = pod.get("status") or {}
            if held.status != status:
                changed.append((held, status))
        self._delete_pods([key for key in self.pods if key not in seen])

        def put_status(item: tuple[Held, dict[str, Any]]) -> dict[str, Any]:
            body = copy.deepcopy(item[0].stored)
            body["status"] = item[1]
            return self.client.put_status(body)

        for (held, status), stored in zip(changed, self._pool.map(put_status, changed),
                                          strict=True):
            held.stored, held.status = stored, status
            self.writes += 1
        self._settle()
        return str(wanted_node["metadata"]["name"])

    def _settle(self) -> None:
        """Wait until the API server's watch caches hold every write above. The exporter's
        view lists from the cache (``resourceVersion=0``, as client-go's reflector does), which
        may lag etcd by a moment under load: a pod deleted for the previous case, or a status
        not yet written, would then be read. A consistent list gives etcd's current revision;
        a ``NotOlderThan`` list of each resource the view reads is served from its cache only
        once the cache has reached it (``waitUntilFreshAndBlock``)."""
        current = self.client.request("GET", "/api/v1/pods", query={"limit": "1"}).body
        revision = str((current.get("metadata") or {}).get("resourceVersion") or "")
        if not revision:
            return
        for path in ("/api/v1/pods", "/api/v1/nodes"):
            self.client.request("GET", path, query={
                "resourceVersion": revision, "resourceVersionMatch": "NotOlderThan",
                "limit": "1"})

    # ---- the writes -------------------------------------------------------------------------

    def _put_node(self, node: dict[str, Any]) -> None:
        """The Node with its status: created as the kubelet registers it, else updated (the
        same name on every case of this worker)."""
        name = node["metadata"]["name"]
        if self._node_stored is None or self._node_stored["metadata"]["name"] != name:
            current = self.client.request("GET", f"/api/v1/nodes/{name}", check=False)
            self._node_stored = current.body if current.status == 200 else None
        if self._node_stored is None:
            stored = self.client.create(node)  # the status is kept on create, for a Node
            self.writes += 1
        elif _without_status(node) != _without_status(self.node or {}):
            body = copy.deepcopy(node)
            body["metadata"]["resourceVersion"] = self._node_stored["metadata"]["resourceVersion"]
            stored = self.client.request("PUT", f"/api/v1/nodes/{name}", body,
                                         query={"fieldValidation": "Strict"}).body
            self.writes += 1
        else:
            stored = self._node_stored
        if stored.get("status") != node.get("status", {}):
            stored["status"] = node.get("status", {})
            stored = self.client.put_status(stored)
            self.writes += 1
        self._node_stored = stored

    def _delete_pods(self, keys: list[tuple[str, str]]) -> None:
        """One collection delete per namespace, of every pod there but the ones held and not
        named (grace period 0: nothing runs them, they are gone when the answer comes)."""
        for namespace in sorted({key[0] for key in keys}):
            keep = [name for (ns, name) in self.pods if ns == namespace
                    and (ns, name) not in keys]
            query = {"gracePeriodSeconds": "0"}
            if keep:
                query["fieldSelector"] = ",".join(f"metadata.name!={name}" for name in keep)
            self.client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", query=query)
            self.writes += 1
        for key in keys:
            self.pods.pop(key, None)

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


def _pod_body(manifest: dict[str, Any], node_name: str
              ) -> tuple[tuple[str, str], dict[str, Any]]:
    """The pod as it is sent, bound to the node; with its (namespace, name)."""
    body = _clean(manifest, "v1", "Pod")
    body.pop("status", None)
    body["spec"]["nodeName"] = node_name
    meta = body["metadata"]
    return (meta.setdefault("namespace", "default"), meta["name"]), body


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key != "status"}


def _clean(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    body = copy.deepcopy(obj)
    body["apiVersion"], body["kind"] = api_version, kind
    for key in SERVER_FIELDS:
        body.setdefault("metadata", {}).pop(key, None)
    return body


_publisher: Publisher | None = None


def publisher() -> Publisher:
    """This process's publisher, to a control plane this process starts on first use (skips
    the test locally, fails it under CI=true, when the control plane is not built) and stops
    when it exits."""
    global _publisher
    if _publisher is None:
        from multiprocessing import util

        directory = Path(tempfile.mkdtemp(prefix="controlplane-"))
        plane = ControlPlane.start(directory)

        def close() -> None:  # its etcd's data too (some 100 MB)
            plane.close()
            shutil.rmtree(directory, ignore_errors=True)

        util.Finalize(None, close, exitpriority=10)  # run when the process exits
        _publisher = Publisher(plane.client(), str(plane.admin_kubeconfig))
    return _publisher
