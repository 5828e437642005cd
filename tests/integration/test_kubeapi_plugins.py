"""Credentials from the optional kubernetes package: exec credential plugins (real processes)
and auth providers, as a kubeconfig names them (exporter/kubeapi/plugins.py)."""

from __future__ import annotations

import json
import sys
import time

import pytest

from exporter.kubeapi.auth import Auth, ConfigError, CredentialsError
from exporter.kubeapi.config import from_kubeconfig

from ..support.kubeconfig import auth_of, b64, exec_user, kubeconfig, timestamp, without_kubernetes
from ..support.pki import client_pki


@pytest.fixture
def pki(tmp_path):
    return client_pki(tmp_path)


async def test_an_exec_plugin_runs_once_until_its_token_expires_or_is_rejected(tmp_path):
    runs = tmp_path / "runs"
    path = kubeconfig(tmp_path / "config", exec_user(
        runs, {"token": "exec-token", "expirationTimestamp": timestamp(3600)}))
    credentials = from_kubeconfig(str(path)).credentials
    assert [await credentials.current() for _ in range(3)] == [Auth("Bearer exec-token")] * 3
    assert runs.read_text() == "1"
    credentials.rejected()  # a 401: the next request runs the plugin again
    assert await credentials.current() == Auth("Bearer exec-token")
    assert runs.read_text() == "2"


async def test_an_exec_token_close_to_expiry_is_renewed(tmp_path):
    runs = tmp_path / "runs"
    path = kubeconfig(tmp_path / "config", exec_user(
        runs, {"token": "short", "expirationTimestamp": timestamp(30)}))  # < 60 s margin
    credentials = from_kubeconfig(str(path)).credentials
    await credentials.current()
    await credentials.current()
    assert runs.read_text() == "2"


async def test_an_exec_plugin_may_hand_out_a_client_certificate(tmp_path, pki):
    _, cert, key = pki
    path = kubeconfig(tmp_path / "config", exec_user(
        tmp_path / "runs", {"clientCertificateData": cert.read_text(),
                            "clientKeyData": key.read_text()}))
    assert await auth_of(path) == Auth(None, cert.read_bytes(), key.read_bytes())


async def test_a_failing_exec_plugin(tmp_path):
    path = kubeconfig(tmp_path / "config", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": ["-c", "import sys; sys.exit('no session: run aws sso login')"]}})
    credentials = from_kubeconfig(str(path)).credentials
    with pytest.raises(CredentialsError) as caught:
        await credentials.current()
    assert str(caught.value) == (f"exec plugin {sys.executable}: exec: process returned 1. "
                                 "no session: run aws sso login")


def test_an_exec_plugin_without_the_kubernetes_package(tmp_path, monkeypatch):
    without_kubernetes(monkeypatch)
    path = kubeconfig(tmp_path / "config", exec_user(tmp_path / "runs", {"token": "t"}))
    with pytest.raises(ConfigError) as caught:
        from_kubeconfig(str(path))
    message = str(caught.value)
    assert message.startswith(f"kubeconfig {path}: user 'u' gets its credentials from an exec "
                              f"credential plugin ({sys.executable}), which needs the "
                              "kubernetes package (")
    assert message.endswith("); install podresources-exporter[kube]")
    assert "\n" not in message


async def test_an_oidc_auth_provider(tmp_path):
    claims = b64(json.dumps({"iss": "https://idp.example.com", "exp": time.time() + 3600})
                 .encode()).rstrip("=").replace("+", "-").replace("/", "_")
    id_token = f"eyJhbGciOiJSUzI1NiJ9.{claims}.c2lnbmF0dXJl"
    path = kubeconfig(tmp_path / "config", {"auth-provider": {"name": "oidc", "config": {
        "client-id": "exporter", "idp-issuer-url": "https://idp.example.com",
        "id-token": id_token}}})
    assert await auth_of(path) == Auth(f"Bearer {id_token}")
