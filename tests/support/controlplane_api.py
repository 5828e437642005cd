"""The Kubernetes-API view's cluster on the real API server: the objects a test puts there (as
the kubelet, a DRA driver or an operator would), who the exporter is to it (the chart's
ServiceAccount and ClusterRole, a token from the TokenRequest API in a projected volume), and
the requests the exporter made, read back from the API server's audit log.

``RealApi`` speaks the part of the fake API server's interface the view's tests use (``put``,
``delete``, ``requests``), so a test written against one runs against the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import urllib.parse
from pathlib import Path
from typing import Any

from .controlplane import ApiStatus, Client, ControlPlane, service_account_user, token_claims
from .controlplane_chart import Helm, pod_from_template
from .pki import CA
from .volumes import update_volume

COLLECTIONS = {"nodes": ("v1", "Node"), "pods": ("v1", "Pod"),
               "resourceslices": ("resource.k8s.io/v1", "ResourceSlice"),
               "devicetaintrules": ("resource.k8s.io/v1", "DeviceTaintRule")}
# The list and watch paths of the view (API version v1 of each group)
PATHS = {"node": "/api/v1/nodes", "pods": "/api/v1/pods",
         "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
         "devicetaintrules": "/apis/resource.k8s.io/v1/devicetaintrules"}


class RealApi:
    """Objects put on the real API server as their owners would write them: a Node with its
    status (the kubelet registers it so), a Pod created bound to its node and its status then
    set (the API server resets a new pod's status; the kubelet reports the phase), slices and
    taint rules as a driver or an operator creates them."""

    def __init__(self, plane: ControlPlane, user: str | None = None):
        self.plane = plane
        self.admin: Client = plane.client()
        self.user = user  # whose requests ``requests`` lists
        self.mark = plane.audit_mark()
        self.namespaces: set[str] = set()

    # ---- the exporter's identity ---------------------------------------------------------

    def write_kubeconfig(self, path: Path, user: dict[str, Any] | None = None,
                         cluster: dict[str, Any] | None = None) -> Path:
        """A kubeconfig for the exporter: a client certificate of its own (user
        ``podresources-exporter``, bound to a ClusterRole with the view's rules, those the
        chart grants), or ``user`` instead; ``cluster`` adds to or replaces the cluster's
        fields (the server and its CA; None leaves one out)."""
        if user is None:
            cert, key = exporter_certificate(self.plane)
            user = {"client-certificate": str(cert), "client-key": str(key)}
        fields = {"server": self.plane.server, "certificate-authority": str(self.plane.ca),
                  **(cluster or {})}
        fields = {name: value for name, value in fields.items() if value is not None}
        document = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
                    "clusters": [{"name": "controlplane", "cluster": fields}],
                    "users": [{"name": "exporter", "user": user}],
                    "contexts": [{"name": "test", "context": {"cluster": "controlplane",
                                                              "user": "exporter"}}]}
        path.write_text(json.dumps(document))
        return path

    # ---- writing -------------------------------------------------------------------------

    def put(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        api_version, kind = COLLECTIONS[collection]
        body = copy.deepcopy(obj)
        body["apiVersion"], body["kind"] = api_version, kind
        meta = body["metadata"]
        namespace = meta.get("namespace")
        if namespace and namespace not in self.namespaces:
            with contextlib.suppress(ApiStatus):
                self.plane.namespace(namespace)
            self.namespaces.add(namespace)
        status = body.pop("status", None)
        path = self.admin.path(body, named=True)
        created = self.admin.request("POST", self.admin.path(body), body,
                                     query={"fieldValidation": "Strict"}, check=False)
        if created.status == 409 and kind == "Pod":
            # a pod's spec is immutable but for a few fields: a changed pod is a new pod
            self.admin.delete(path + "?gracePeriodSeconds=0")
            created = self.admin.request("POST", self.admin.path(body), body,
                                         query={"fieldValidation": "Strict"}, check=False)
        if created.status == 409:
            current = self.admin.get(path)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            stored = self.admin.request("PUT", path, body,
                                        query={"fieldValidation": "Strict"}).body
        elif created.status >= 300:
            raise ApiStatus(created.status, created.body)
        else:
            stored = created.body
        if status is not None:
            stored["status"] = {**stored.get("status", {}), **status}
            stored = self.admin.put_status(stored)
        return dict(stored)

    def delete(self, collection: str, name: str, namespace: str | None = None) -> None:
        api_version, kind = COLLECTIONS[collection]
        obj = {"apiVersion": api_version, "kind": kind,
               "metadata": {"name": name, "namespace": namespace}}
        self.admin.delete(self.admin.path(obj, named=True) + "?gracePeriodSeconds=0")

    def clear(self) -> None:
        """Delete what the view reads: every Node, Pod (in the namespaces put here),
        ResourceSlice and DeviceTaintRule."""
        for path in ("/api/v1/nodes", "/apis/resource.k8s.io/v1/resourceslices",
                     "/apis/resource.k8s.io/v1/devicetaintrules"):
            self.admin.delete(path)
        for namespace in self.namespaces:
            self.admin.delete(f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion the API server has handed out (etcd's revision)."""
        return self.plane.revision()

    # ---- what the exporter asked --------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        return self.plane.audit(self.mark, user=self.user)

    @property
    def requests(self) -> list[tuple[str, dict[str, str]]]:
        """The exporter's requests since this object was made: (path, query), in order."""
        result = []
        for event in self.events():
            url = urllib.parse.urlsplit(event["requestURI"])
            result.append((url.path, dict(urllib.parse.parse_qsl(url.query))))
        return result

    def watches(self, collection: str) -> list[dict[str, str]]:
        path = PATHS["node" if collection == "nodes" else collection]
        return [q for p, q in self.requests if p == path and q.get("watch") == "true"]


EXPORTER_USER = "podresources-exporter"
# the view's rules, as the chart's ClusterRole grants them (kubeApi.enabled)
EXPORTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"],
     "verbs": ["list", "watch"]},
]


def exporter_role(plane: ControlPlane) -> str:
    """The ClusterRole with the view's rules (made once per plane): its name."""
    name = f"{EXPORTER_USER}-tests"
    if (plane.dir / f"{name}.made").exists():
        return name
    with contextlib.suppress(ApiStatus):
        plane.client().create({"apiVersion": "rbac.authorization.k8s.io/v1",
                               "kind": "ClusterRole", "metadata": {"name": name},
                               "rules": EXPORTER_RULES})
    (plane.dir / f"{name}.made").touch()
    return name


def bind_exporter_role(plane: ControlPlane, subject: dict[str, str], name: str) -> None:
    role = exporter_role(plane)
    with contextlib.suppress(ApiStatus):  # already bound
        plane.client().create({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [subject]})


def exporter_certificate(plane: ControlPlane) -> tuple[Path, Path]:
    """A client certificate for user ``podresources-exporter`` from the control plane's CA,
    bound to the view's rules (made once per plane)."""
    cert, key = plane.dir / f"{EXPORTER_USER}.crt", plane.dir / f"{EXPORTER_USER}.key"
    if cert.exists():
        return cert, key
    bind_exporter_role(plane, {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                               "name": EXPORTER_USER}, f"{EXPORTER_USER}-tests")
    # written last: its presence says the role and binding are there
    return CA.load(plane.dir, plane.ca, plane.ca_key).issue(EXPORTER_USER, client=True)


def exporter_account(plane: ControlPlane, namespace: str, account: str) -> str:
    """A ServiceAccount bound to the view's rules, in a namespace of its own (made here):
    its user name, for tokens from the TokenRequest API."""
    plane.namespace(namespace)
    plane.client().create({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": account, "namespace": namespace}})
    bind_exporter_role(plane, {"kind": "ServiceAccount", "name": account,
                               "namespace": namespace}, f"{namespace}-{account}")
    return service_account_user(namespace, account)


class ChartIdentity:
    """The exporter as the chart deploys it with ``kubeApi.enabled``: the chart's
    ServiceAccount and ClusterRole (installed by the real helm), the pod it runs as (made from
    the DaemonSet's template, as the DaemonSet controller makes it) and the projected
    service-account volume the kubelet keeps for that pod (token, ca.crt, namespace), each
    token minted by the TokenRequest API with the default audience and bound to the pod."""

    def __init__(self, plane: ControlPlane, helm: Helm, namespace: str, release: str,
                 volume: Path, *values: str):
        self.plane, self.helm = plane, helm
        self.namespace, self.release = namespace, release
        self.account = f"{release}-podresources-exporter"
        self.user = service_account_user(namespace, self.account)
        self.volume = volume
        self.values = ("--set", "kubeApi.enabled=true", *values)
        self.tokens: list[str] = []
        self.pod: dict[str, Any] | None = None
        self.pods = 0

    def install(self) -> None:
        with contextlib.suppress(ApiStatus):
            self.plane.namespace(self.namespace, enforce="privileged")
        result = self.helm.install(self.release, self.namespace, *self.values)
        assert result.returncode == 0, result.stderr
        self.start_pod()

    def uninstall(self) -> None:
        self.stop_pod()
        self.helm.uninstall(self.release, self.namespace)

    def start_pod(self) -> str:
        """A new exporter pod, and its first token in the volume."""
        docs = self.helm.template(self.release, self.namespace, *self.values)
        daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
        self.pods += 1
        pod = pod_from_template(daemonset, f"{self.account}-{self.pods}")
        self.pod = self.plane.client().create(pod, self.namespace)
        return self.renew()

    def stop_pod(self) -> None:
        """The pod deleted: every token bound to it is refused from now on."""
        if self.pod is not None:
            self.plane.client().delete(f"/api/v1/namespaces/{self.namespace}/pods/"
                                       f"{self.pod['metadata']['name']}?gracePeriodSeconds=0")
            self.pod = None

    def renew(self) -> str:
        """A new token in the volume, swapped in as the kubelet's atomic writer does."""
        token = self.plane.client().request_token(self.namespace, self.account, pod=self.pod)
        self.tokens.append(token)
        update_volume(self.volume, {"token": token.encode(), "ca.crt": self.plane.ca.read_bytes(),
                                    "namespace": self.namespace.encode()})
        return token

    def client(self) -> Client:
        return self.plane.client(token=self.tokens[-1])

    def environ(self) -> dict[str, str]:
        """What a pod's environment says of the API server (the kubernetes Service's address
        is the loopback here)."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(self.plane.info["port"])}


def credential_id(event: dict[str, Any]) -> str:
    """Which token a request carried: the API server records its JWT ID in the audit event."""
    extra = event["user"].get("extra") or {}
    return (extra.get("authentication.kubernetes.io/credential-id") or [""])[0]


def jti(token: str) -> str:
    return f"JTI={token_claims(token)['jti']}"


class Gate:
    """A TCP relay between the exporter and the API server (a load balancer's place) that a
    test can shut: ``shut`` drops every connection through it and refuses new ones, as an
    unreachable API server does; ``open`` lets them through again. TLS passes through."""

    def __init__(self, port: int, listen: str = "127.0.0.1"):
        self.port = port  # where it relays to, on the loopback
        self.listen = listen
        self.open_ = True
        self.server: asyncio.Server | None = None
        self.links: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self) -> Gate:
        self.server = await asyncio.start_server(self._relay, self.listen, 0)
        return self

    async def stop(self) -> None:
        self.shut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def shut(self) -> None:
        self.open_ = False
        for writer in list(self.links):
            writer.transport.abort()
        self.links.clear()

    def open(self) -> None:
        self.open_ = True

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open_:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            writer.transport.abort()
            return
        self.links.update((writer, upstream))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, upstream), pipe(upstream_reader, writer))
        self.links.difference_update((writer, upstream))


def pod_address() -> str:
    """An IPv4 address of this machine outside the loopback range, which an EndpointSlice may
    name (the API server refuses 127.0.0.0/8 there): where a relay stands for a pod's IP."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("no IPv4 address outside the loopback range for a pod's IP")
    return address
