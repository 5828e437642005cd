"""kubeconfig files written for the Kubernetes-API configuration tests, an exec credential
plugin (a Python one-liner that counts its runs), and the kube extra made absent."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import exporter.kubeapi
from exporter.kubeapi.auth import Auth
from exporter.kubeapi.config import from_kubeconfig

SERVER = "https://api.example.com:6443"


def kubeconfig(path: Path, user: dict | None = None, cluster: dict | None = None,
               **document) -> Path:
    """A one-context kubeconfig (JSON is YAML) at ``path``."""
    body = {"apiVersion": "v1", "kind": "Config", "current-context": "work",
            "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
            "users": [{"name": "u", "user": user or {}}],
            "contexts": [{"name": "work", "context": {"cluster": "c", "user": "u"}}]}
    body.update(document)
    path.write_text(json.dumps(body))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def auth_of(path: Path) -> Auth:
    return await from_kubeconfig(str(path)).credentials.current()


PLUGIN = """
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": json.loads(sys.argv[2])}))
"""


# the same, handing out the token a file holds now
TOKEN_FILE_PLUGIN = """
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": pathlib.Path(sys.argv[2]).read_text().strip()}}))
"""


def exec_user(runs: Path, status: dict) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": ["-c", PLUGIN, str(runs), json.dumps(status)],
                     "interactiveMode": "Never"}}


def timestamp(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def without_kubernetes(monkeypatch) -> None:
    """As if the kube extra were not installed: importing kubernetes raises ImportError."""
    for name in [n for n in sys.modules if n.split(".")[0] == "kubernetes"] + ["kubernetes"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "exporter.kubeapi.plugins", raising=False)
    monkeypatch.delattr(exporter.kubeapi, "plugins", raising=False)
