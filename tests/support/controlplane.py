"""The real control plane as a test component: a driver for ``tests/controlplane`` (its README
has the protocol), a small synchronous client for setting the stage, and what the controllers
would create, since none runs.

    plane = ControlPlane.start(directory)           # skips (or fails under CI=true) if not built
    admin = plane.client()                          # client certificate, group system:masters
    admin.create({"apiVersion": "v1", "kind": "Namespace", ...})
    plane.namespace("monitoring", enforce="restricted")  # + default ServiceAccount, CA ConfigMap
    token = admin.request_token("monitoring", "podresources-exporter")  # TokenRequest
    plane.kubeconfig(path, token_file=...)          # what the exporter reads
    plane.compact(); plane.restart(); plane.audit() # etcd compaction, a new API server, requests
    plane.close()

The component is built by ``tests/controlplane/build.sh`` (``bash tests/run.sh`` runs it) into
``.tools/controlplane/controlplane``.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import select
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.client import HTTPResponse, HTTPSConnection
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / ".tools" / "controlplane" / "controlplane"
CRDS = REPO / ".tools" / "operatorcrds" / "crds"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
START_TIMEOUT_SECONDS = 180.0
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
RETRIES_429 = 20


def missing(what: str, path: Path, log: Path, how: str) -> None:
    """Skip the test locally, fail it under CI=true, naming the build's last error."""
    reason = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    message = f"{what} is not built ({path}); {how}" + (": " + " / ".join(reason) if reason
                                                         else "")
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require() -> Path:
    if not BINARY.exists():
        missing("the real control plane", BINARY, BINARY.with_suffix(".log"),
                "bash tests/run.sh builds it (tests/controlplane/build.sh)")
    return BINARY


def operator_crds() -> list[Path]:
    """The Prometheus Operator's CRDs generated from its API types (tests/tools/operatorcrds.sh)."""
    wanted = [CRDS / f"monitoring.coreos.com_{plural}.yaml"
              for plural in ("servicemonitors", "podmonitors", "prometheusrules")]
    if not all(path.exists() for path in wanted):
        missing("the Prometheus Operator's CRDs", CRDS, CRDS.parent / "build.log",
                "bash tests/run.sh generates them (tests/tools/operatorcrds.sh)")
    return wanted


class ApiStatus(Exception):
    """The API server refused a request: its HTTP status and ``Status`` object."""

    def __init__(self, status: int, body: Any):
        super().__init__(status, body)  # picklable: a differential worker may raise it
        self.status, self.body = status, body
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        self.message = body.get("message", "") if isinstance(body, dict) else str(body)

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.reason}: {self.message}"


@dataclass
class Reply:
    status: int
    body: Any
    warnings: list[str] = field(default_factory=list)


class Client:
    """A synchronous client for one identity: enough of the API for setting up a test
    (create, apply, get, list, delete, TokenRequest, reviews), with discovery for the paths."""

    def __init__(self, server: str, ca: Path, *, cert: tuple[Path, Path] | None = None,
                 token: str | None = None):
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.context = ssl.create_default_context(cafile=str(ca))
        if cert:
            self.context.load_cert_chain(str(cert[0]), str(cert[1]))
        self.token = token
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self._local = threading.local()

    def request(self, method: str, path: str, body: Any = None, *,
                query: dict[str, str] | None = None,
                content_type: str = "application/json", check: bool = True) -> Reply:
        if query:
            path += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # 429 with Retry-After: e.g. a new CRD's storage "is (re)initializing"; client-go waits
        # and tries again, so does this client (a few times)
        for attempt in range(RETRIES_429 + 1):
            response, raw = self._exchange(method, path, data, headers)
            warnings = [value for key, value in response.getheaders()
                        if key.lower() == "warning"]
            retry_after = response.getheader("Retry-After")
            if response.status != 429 or not retry_after or attempt == RETRIES_429:
                break
            time.sleep(min(float(retry_after), 1.0))
        decoded: Any = json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()
        if check and response.status >= 300:
            raise ApiStatus(response.status, decoded)
        return Reply(response.status, decoded, warnings)

    def _exchange(self, method: str, path: str, data: bytes | None,
                  headers: dict[str, str]) -> tuple[HTTPResponse, bytes]:
        """One request on this thread's kept-alive connection (a TLS handshake per request
        would cost more than the request). A connection the server closed while it was idle
        (an API server restart) fails before anything was read, as a reset or, over TLS, as
        an EOF while sending: the request is sent again on a new one, once."""
        connection = getattr(self._local, "connection", None)
        for fresh in ((False, True) if connection is not None else (True,)):
            if fresh:
                connection = HTTPSConnection(self.host, self.port, context=self.context,
                                             timeout=60)
                self._local.connection = connection
            assert connection is not None
            try:
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                raw = response.read()
            except (ConnectionError, ssl.SSLEOFError, http.client.RemoteDisconnected,
                    http.client.CannotSendRequest, http.client.BadStatusLine):
                connection.close()
                self._local.connection = None
                if fresh:
                    raise
                continue
            if response.will_close:
                connection.close()
                self._local.connection = None
            return response, raw
        raise AssertionError("unreachable")

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    # ---- discovery ------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """The collection's plural name and whether it is namespaced, from discovery."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for each in self.request("GET", base).body["resources"]:
                if "/" not in each["name"]:
                    self._resources[(api_version, each["kind"])] = (each["name"],
                                                                    each["namespaced"])
        if key not in self._resources:
            raise KeyError(f"{kind} is not served as {api_version}")
        return self._resources[key]

    def path(self, obj: dict[str, Any], *, named: bool = False,
             namespace: str | None = None) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        meta = obj.get("metadata") or {}
        if namespaced:
            base += f"/namespaces/{meta.get('namespace') or namespace or 'default'}"
        base += f"/{plural}"
        return base + (f"/{meta['name']}" if named else "")

    # ---- verbs ----------------------------------------------------------------------------

    def create(self, obj: dict[str, Any], namespace: str | None = None, *,
               strict: bool = True) -> dict[str, Any]:
        query = {"fieldValidation": "Strict"} if strict else None
        return self.request("POST", self.path(obj, namespace=namespace), obj,
                            query=query).body

    def apply(self, obj: dict[str, Any], namespace: str | None = None,
              manager: str = "tests") -> dict[str, Any]:
        """Server-side apply with strict field validation, as helm v4 sends its objects."""
        return self.request("PATCH", self.path(obj, named=True, namespace=namespace), obj,
                            query={"fieldManager": manager, "fieldValidation": "Strict",
                                   "force": "true"},
                            content_type="application/apply-patch+yaml").body

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query or None).body

    def delete(self, path: str) -> None:
        reply = self.request("DELETE", path, check=False)
        if reply.status not in (200, 202, 404):
            raise ApiStatus(reply.status, reply.body)

    def put_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.request("PUT", self.path(obj, named=True) + "/status", obj).body

    def request_token(self, namespace: str, service_account: str, *,
                      audiences: list[str] | None = None, seconds: int = 3607,
                      pod: dict[str, Any] | None = None) -> str:
        """A token from the TokenRequest API, as the kubelet asks for a projected volume
        (3607 s: the kubelet's default expirationSeconds for the token it mounts), bound to
        ``pod`` when given (the token is refused once the pod is gone)."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audiences:
            spec["audiences"] = audiences
        if pod is not None:
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod",
                                      "name": pod["metadata"]["name"],
                                      "uid": pod["metadata"]["uid"]}
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        reply = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            body)
        return str(reply.body["status"]["token"])

    def can(self, verb: str, resource: str, *, group: str = "", namespace: str = "",
            name: str = "", subresource: str = "", user: str | None = None,
            groups: list[str] | None = None) -> bool:
        """The authorizer's answer: a SelfSubjectAccessReview for this client's identity, or a
        SubjectAccessReview for ``user`` (in ``groups``)."""
        attributes = {"verb": verb, "resource": resource, "group": group,
                      "namespace": namespace, "name": name, "subresource": subresource}
        kind = "SubjectAccessReview" if user else "SelfSubjectAccessReview"
        spec: dict[str, Any] = {"resourceAttributes": attributes}
        if user:
            spec.update(user=user, groups=groups or [])
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
        path = f"/apis/authorization.k8s.io/v1/{kind.lower()}s"
        return bool(self.request("POST", path, body).body["status"].get("allowed"))

    def rules(self, namespace: str) -> dict[str, Any]:
        """A SelfSubjectRulesReview: every rule this identity has in ``namespace``."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": namespace}}
        return self.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                            body).body["status"]


class ControlPlane:
    """The running component: etcd and kube-apiserver in one process of ours."""

    def __init__(self, proc: subprocess.Popen[str], ready: dict[str, Any], seconds: float):
        self.proc = proc
        self.info = ready
        self.start_seconds = seconds  # from the process's start to /readyz answering 200
        self.server: str = ready["server"]
        self.ca = Path(ready["ca"])
        self.ca_key = Path(ready["ca_key"])
        self.admin_cert, self.admin_key = Path(ready["admin_cert"]), Path(ready["admin_key"])
        self.admin_kubeconfig = Path(ready["admin_kubeconfig"])
        self.audit_log = Path(ready["audit_log"])
        self.version: str = ready["kubernetes_version"]
        self.dir = Path(ready["dir"])

    @classmethod
    def start(cls, directory: Path, *flags: str) -> ControlPlane:
        binary = require()
        directory.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        proc = subprocess.Popen([str(binary), "-dir", str(directory), *flags],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=open(directory / "controlplane.stderr", "w"),  # noqa: SIM115
                                text=True, bufsize=1)
        line = _read_line(proc, START_TIMEOUT_SECONDS)
        ready = json.loads(line) if line else {"ok": False, "error": "no answer"}
        if not ready.get("ok"):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the control plane did not start: {ready.get('error')}")
        return cls(proc, ready, time.monotonic() - started)

    def op(self, op: str, timeout: float = 200.0, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        line = _read_line(self.proc, timeout)
        reply = json.loads(line) if line else {"ok": False, "error": "no answer"}
        if not reply.get("ok"):
            raise RuntimeError(f"control plane {op}: {reply.get('error')}")
        return reply

    def compact(self) -> int:
        """etcd compaction at its current revision; returns the revision."""
        return int(self.op("compact")["revision"])

    def revision(self) -> int:
        return int(self.op("revision")["revision"])

    def restart(self, *flags: str) -> float:
        """Stop kube-apiserver and start it again on the same etcd; the seconds it took."""
        return float(self.op("restart", flags=list(flags))["restart_seconds"])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.op("close", timeout=60)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # ---- identities -----------------------------------------------------------------------

    def client(self, token: str | None = None) -> Client:
        """The admin (client certificate, system:masters), or whoever ``token`` is."""
        if token is not None:
            return Client(self.server, self.ca, token=token)
        return Client(self.server, self.ca, cert=(self.admin_cert, self.admin_key))

    def kubeconfig(self, path: Path, *, token_file: Path | None = None,
                   token: str | None = None) -> Path:
        """A kubeconfig for this API server: the admin's client certificate, or a bearer token
        (``tokenFile``, read again for every request, as a projected volume's file is)."""
        if token_file is not None:
            user: dict[str, Any] = {"tokenFile": str(token_file)}
        elif token is not None:
            user = {"token": token}
        else:
            user = {"client-certificate": str(self.admin_cert),
                    "client-key": str(self.admin_key)}
        document = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
                    "clusters": [{"name": "controlplane", "cluster": {
                        "server": self.server, "certificate-authority": str(self.ca)}}],
                    "users": [{"name": "test", "user": user}],
                    "contexts": [{"name": "test", "context": {"cluster": "controlplane",
                                                              "user": "test"}}]}
        path.write_text(json.dumps(document))
        return path

    # ---- what the controllers would make --------------------------------------------------

    def namespace(self, name: str, *, enforce: str | None = None,
                  labels: dict[str, str] | None = None) -> None:
        """A namespace as a cluster has it after its controllers ran: its ``default``
        ServiceAccount (the service account controller) and ``kube-root-ca.crt`` (the root CA
        publisher). ``enforce``: the Pod Security level the namespace enforces."""
        admin = self.client()
        all_labels = dict(labels or {})
        if enforce:
            all_labels["pod-security.kubernetes.io/enforce"] = enforce
            all_labels["pod-security.kubernetes.io/enforce-version"] = "latest"
        admin.create({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": name, "labels": all_labels}})
        admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": "default", "namespace": name}})
        admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "kube-root-ca.crt", "namespace": name},
                      "data": {"ca.crt": self.ca.read_text()}})

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace and what it holds: the namespace controller's work, done here
        (the namespace then waits on its finalizer no controller removes, so it is finalized
        by hand)."""
        admin = self.client()
        admin.delete(f"/api/v1/namespaces/{name}")
        with contextlib.suppress(ApiStatus):
            current = admin.get(f"/api/v1/namespaces/{name}")
            current["spec"]["finalizers"] = []
            admin.request("PUT", f"/api/v1/namespaces/{name}/finalize", current)

    # ---- what the API server saw ----------------------------------------------------------

    def audit_mark(self) -> int:
        """The audit log's length now: pass it to :meth:`audit` for what came after."""
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit(self, since: int = 0, user: str | None = None) -> list[dict[str, Any]]:
        """The requests the API server received since ``since``, one event each, in order, as
        finally answered: a watch is logged when its answer starts and again when it ends
        (``ResponseStarted``, ``ResponseComplete``); a request counts where it was first
        logged, with its last event (the status it ended with)."""
        with self.audit_log.open("rb") as log:
            lines = log.read().splitlines()
        first: dict[str, int] = {}
        last: dict[str, dict[str, Any]] = {}
        offset = 0
        for line in lines:
            if line.strip():
                event = json.loads(line)
                first.setdefault(event["auditID"], offset)
                last[event["auditID"]] = event
            offset += len(line) + 1
        events = [last[audit_id] for audit_id, at in sorted(first.items(), key=lambda i: i[1])
                  if at >= since]
        return [e for e in events if user is None or e["user"].get("username") == user]


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def token_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (the API server has verified it)."""
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return ""
    return proc.stdout.readline()


@contextlib.contextmanager
def started(directory: Path, *flags: str) -> Iterator[ControlPlane]:
    plane = ControlPlane.start(directory, *flags)
    try:
        yield plane
    finally:
        plane.close()
