"""Where the Kubernetes API is and who the exporter is to it: in a pod (``KUBERNETES_SERVICE_HOST``
and a projected service-account token, renewed while running), a client certificate over TLS,
an untrusted server certificate reported clearly, and an exec credential plugin.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import sys
from pathlib import Path

import aiohttp
import pytest

from exporter.kubeapi import config

from ..support.fakeapiserver.auth import tls_context
from ..support.fakeapiserver.server import FakeApiServer
from ..support.harness import Exporter, Node
from ..support.kubeapi import DONGLE, cluster, kubelet_profile, synced, until
from ..support.kubeconfig import PLUGIN
from ..support.pki import CA, server_pki
from ..support.volumes import update_volume

RESOURCES = ("node", "pods", "resourceslices", "devicetaintrules")
COLLECTIONS = ("nodes", "pods", "resourceslices", "devicetaintrules")


def all_up(value: int):
    return lambda s: s.by("podresources_kube_api_up", "resource") == dict.fromkeys(RESOURCES,
                                                                                   value)


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@pytest.fixture
def pki(tmp_path):
    """A cluster CA and the API server's certificate (for localhost and 127.0.0.1)."""
    return server_pki(tmp_path, "cluster-ca", "apiserver")


async def status_without_credentials(server: FakeApiServer, ca: CA, **headers: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(
            server.url + "/api/v1/nodes", headers=headers,
            ssl=ssl.create_default_context(cafile=ca.path)) as response:
        return response.status


async def test_in_cluster_a_renewed_token_is_used_from_the_next_request(
        tmp_path, monkeypatch, pki, quick_backoff, caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    ca, cert, key = pki
    account = tmp_path / "serviceaccount"
    update_volume(account, {"token": b"token-1", "ca.crt": ca.path.read_bytes()})
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", account)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    server = FakeApiServer(tokens={"token-1"}, ssl_context=tls_context(cert, key))
    await server.start()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync over TLS")
            # the kubelet renews the token; the API server takes only the new one from now on
            update_volume(account, {"token": b"token-2", "ca.crt": ca.path.read_bytes()})
            server.tokens = {"token-2"}
            renewed = len(server.identities)
            assert server.end_watches() == 4
            await until(lambda: all(len(server.watches(c)) == 2 for c in COLLECTIONS),
                        what="the watches to resume")
            assert server.identities[renewed:] == ["token:token-2"] * 4
            assert server.rejected == []
            assert await status_without_credentials(
                server, ca, Authorization="Bearer token-1") == 401
            s = await exporter.scrape()
            assert s.by("podresources_kube_api_errors_total", "resource") == dict.fromkeys(
                RESOURCES, 0)
            # a token that expired before the file was renewed: 401s until it is
            server.tokens = {"token-3"}
            server.end_watches()
            s = await exporter.wait_for(all_up(0), what="the view to notice the 401s")
            assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
            update_volume(account, {"token": b"token-3", "ca.crt": ca.path.read_bytes()})
            await exporter.wait_for(synced, timeout=15, what="the view back with the new token")
    finally:
        await server.stop()
    assert {authorization for _, authorization in server.rejected} == {
        "Bearer token-1", "Bearer token-2"}
    assert server.identities[-1] == "token:token-3"
    messages = [r.getMessage() for r in caplog.records]
    for resource in RESOURCES:
        assert messages.count(f"Kubernetes API: {resource} unreachable (HTTP 401 Unauthorized: "
                              "Unauthorized); retrying with back-off, keeping the last "
                              "values") == 1
        assert messages.count(f"Kubernetes API: {resource} reachable again; watching") == 1


@pytest.mark.parametrize("as_data", [True, False], ids=["data", "files"])
async def test_a_client_certificate_over_tls(tmp_path, monkeypatch, pki, as_data):
    ca, cert, key = pki
    client_cert, client_key = ca.issue("podresources-exporter", client=True)
    server = FakeApiServer(tokens=(), client_names={"podresources-exporter"},
                           ssl_context=tls_context(cert, key, client_ca=ca.path))
    await server.start()
    if as_data:
        user = {"client-certificate-data": b64(client_cert),
                "client-key-data": b64(client_key)}
        cluster_fields = {"certificate-authority-data": b64(ca.path)}
    else:  # paths relative to the kubeconfig's directory
        user = {"client-certificate": client_cert.name, "client-key": client_key.name}
        cluster_fields = {"certificate-authority": ca.path.name}
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(
        tmp_path / "kubeconfig", user, cluster_fields)))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view to sync")
            assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
        assert await status_without_credentials(server, ca) == 401  # the certificate counts
    finally:
        await server.stop()
    assert set(server.identities) == {"cert:podresources-exporter"}
    assert server.rejected == [("/api/v1/nodes", "")]


async def test_an_untrusted_server_certificate_is_reported_clearly(tmp_path, monkeypatch, pki,
                                                                   caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    _, cert, key = pki
    other = CA(tmp_path, "other-ca")
    server = FakeApiServer(ssl_context=tls_context(cert, key))
    await server.start()
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(
        tmp_path / "kubeconfig", cluster={"certificate-authority": str(other.path)})))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(
                lambda s: s.get("podresources_kube_api_errors_total", resource="node") >= 1
                and s.get("podresources_up") == 1, what="the failed handshake")
            assert s.value("podresources_kube_api_up", resource="node") == 0
            assert not s.series("podresources_extended_resource_capacity")
    finally:
        await server.stop()
    assert server.identities == []
    assert (f"Kubernetes API: node unreachable (TLS: the API server's certificate at "
            f"{server.url} cannot be verified (unable to get local issuer certificate); check "
            "the certificate authority the configuration names); retrying with back-off, "
            "keeping the last values") in [r.getMessage() for r in caplog.records]


async def test_an_exec_plugin_kubeconfig_with_the_kube_extra(tmp_path, monkeypatch,
                                                             quick_backoff):
    runs = tmp_path / "runs"
    server = FakeApiServer(tokens={"exec-token"})
    await server.start()
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(tmp_path / "kubeconfig", {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                 "args": ["-c", PLUGIN, str(runs), json.dumps({"token": "exec-token"})],
                 "interactiveMode": "Never"}})))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync")
            assert runs.read_text() == "1"  # one run serves all three watches
            # the server refuses the token: the plugin runs again for the next request
            server.tokens = set()
            server.end_watches()
            await exporter.wait_for(all_up(0), what="the 401s")
            server.tokens = {"exec-token"}
            await exporter.wait_for(synced, timeout=15, what="the view back")
    finally:
        await server.stop()
    assert int(runs.read_text()) >= 2
    assert set(server.identities) == {"token:exec-token"}
