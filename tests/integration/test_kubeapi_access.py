"""Where the Kubernetes API is and who the exporter is to it, on the real API server (fixture
``api``): a client certificate over TLS (inline or as files), an untrusted server certificate
reported clearly, and an exec credential plugin handing out a ServiceAccount's token, run again
when the server refuses it. In a pod (``KUBERNETES_SERVICE_HOST`` and a projected token renewed
while running, then revoked): test_controlplane_faults.py.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import shutil
import ssl
import sys
from pathlib import Path

import aiohttp
import pytest

from ..support.controlplane import ControlPlane
from ..support.controlplane_api import (
    EXPORTER_USER,
    Gate,
    RealApi,
    exporter_account,
    exporter_certificate,
)
from ..support.harness import Exporter, Node
from ..support.kubeapi import DONGLE, cluster, kubelet_profile, synced, until
from ..support.kubeconfig import TOKEN_FILE_PLUGIN
from ..support.pki import CA

RESOURCES = ("node", "pods", "resourceslices", "devicetaintrules")


def all_up(value: int):
    return lambda s: s.by("podresources_kube_api_up", "resource") == dict.fromkeys(RESOURCES,
                                                                                   value)


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def callers(plane: ControlPlane, api: RealApi) -> set[str]:
    """Who the API server heard from since the test began, but the test's own admin (a request
    it refused as unauthenticated names no one)."""
    return {e["user"]["username"] for e in plane.audit(api.mark)
            if "username" in e["user"]} - {"kubernetes-admin"}


async def status_without_credentials(plane: ControlPlane) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(
            plane.server + "/api/v1/nodes",
            ssl=ssl.create_default_context(cafile=str(plane.ca))) as response:
        return response.status, (await response.json())["message"]


@pytest.mark.parametrize("as_data", [True, False], ids=["data", "files"])
async def test_a_client_certificate_over_tls(api, control_plane, tmp_path, monkeypatch, as_data):
    client_cert, client_key = exporter_certificate(control_plane)
    if as_data:
        user = {"client-certificate-data": b64(client_cert),
                "client-key-data": b64(client_key)}
        cluster_fields = {"certificate-authority": None,
                          "certificate-authority-data": b64(control_plane.ca)}
    else:  # paths relative to the kubeconfig's directory
        for path in (client_cert, client_key, control_plane.ca):
            shutil.copy(path, tmp_path / path.name)
        user = {"client-certificate": client_cert.name, "client-key": client_key.name}
        cluster_fields = {"certificate-authority": control_plane.ca.name}
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(
        tmp_path / "kubeconfig", user, cluster_fields)))
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(synced, what="the view to sync")
        assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
    assert callers(control_plane, api) == {EXPORTER_USER}  # the certificate's subject
    # without it, the API server takes the request as anonymous's, and refuses it
    assert await status_without_credentials(control_plane) == (
        403, 'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API '
        'group "" at the cluster scope')


async def test_an_untrusted_server_certificate_is_reported_clearly(api, control_plane, tmp_path,
                                                                   monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    other = CA(tmp_path, "other-ca")
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(
        tmp_path / "kubeconfig", cluster={"certificate-authority": str(other.path)})))
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(
            lambda s: s.get("podresources_kube_api_errors_total", resource="node") >= 1
            and s.get("podresources_up") == 1, what="the failed handshake")
        assert s.value("podresources_kube_api_up", resource="node") == 0
        assert not s.series("podresources_extended_resource_capacity")
    assert callers(control_plane, api) == set()  # no request got through
    assert (f"Kubernetes API: node unreachable (TLS: the API server's certificate at "
            f"{control_plane.server} cannot be verified (unable to get local issuer "
            "certificate); check the certificate authority the configuration names); retrying "
            "with back-off, keeping the last values") in [r.getMessage() for r in caplog.records]


def holder_pod(plane: ControlPlane, namespace: str, name: str, account: str) -> dict:
    """A pod running as ``account`` to bind its token to: refused once the pod is gone."""
    return plane.client().create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {"serviceAccountName": account,
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})


async def test_an_exec_plugin_kubeconfig_with_the_kube_extra(api, control_plane, tmp_path,
                                                             monkeypatch, quick_backoff):
    namespace, account = "exec-plugin", "exporter"
    api.user = exporter_account(control_plane, namespace, account)
    admin = control_plane.client()
    first = holder_pod(control_plane, namespace, "first", account)
    token = tmp_path / "token"  # what the plugin hands out
    token.write_text(admin.request_token(namespace, account, pod=first))
    runs = tmp_path / "runs"
    gate = await Gate(control_plane.info["port"]).start()
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kubeconfig", {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                 "args": ["-c", TOKEN_FILE_PLUGIN, str(runs), str(token)],
                 "interactiveMode": "Never"}},
        {"server": f"https://127.0.0.1:{gate.address}"})))
    cluster(api)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync")
            assert runs.read_text() == "1"  # one run serves all four watches
            # the token's pod goes: the server refuses the token from the next request on,
            # once its authentication cache lets go (TokenSuccessCacheTTL: 10 s); the open
            # watches then end (a load balancer's idle timeout)
            admin.delete(f"/api/v1/namespaces/{namespace}/pods/first?gracePeriodSeconds=0")
            await asyncio.sleep(10.5)
            gate.shut()
            gate.open()
            await exporter.wait_for(all_up(0), timeout=30, what="the 401s")
            # a 401 drops the credentials: the next request runs the plugin again
            await until(lambda: int(runs.read_text()) >= 2, timeout=15,
                        what="the plugin to run again")
            second = holder_pod(control_plane, namespace, "second", account)
            token.write_text(admin.request_token(namespace, account, pod=second))
            await exporter.wait_for(synced, timeout=15, what="the view back")
    finally:
        await gate.stop()
        control_plane.delete_namespace(namespace)
    assert {e["responseStatus"]["code"] for e in api.events()} == {200}
    refused = [e for e in control_plane.audit(api.mark) if e["responseStatus"]["code"] == 401]
    assert refused and all("username" not in e["user"] for e in refused)
    assert callers(control_plane, api) == {api.user}
