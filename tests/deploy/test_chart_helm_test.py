"""The chart's ``helm test`` pod: it passes on a live exporter and fails when the kubelet is down,
and over HTTPS it sends its credentials only after verifying the server's certificate (CA and
server name from values).
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from aiohttp import web

from ..support.chart import CHART, FULLNAME, NAMESPACE, one, render
from ..support.harness import Exporter, Node, short_tmpdir, small_profile
from ..support.pki import CA

pytestmark = pytest.mark.external


def helm_test_command(docs: list[dict]) -> tuple[list[str], str]:
    container = one(docs, "Pod")["spec"]["containers"][0]
    return container["command"] + container["args"], container["env"][0]["value"]


async def test_helm_test_pod_passes_on_a_live_exporter_and_fails_when_the_kubelet_is_down(
        defaults):
    test_pod = one(defaults, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    command, url = helm_test_command(defaults)
    assert url == f"http://{FULLNAME}.{NAMESPACE}.svc:10075/metrics"
    command[0] = shutil.which("python3")

    async def run_against(exporter: Exporter) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(
            subprocess.run, command, env={"METRICS_URL": exporter.url + "/metrics"},
            capture_output=True, text=True, timeout=60)

    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        passed = await run_against(exporter)
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert passed.stdout.strip() == "podresources_up 1.0"
        await node.simulator.stop()
        await exporter.wait_for(lambda s: s.get("podresources_up") == 0.0, what="up == 0")
        failed = await run_against(exporter)
        assert failed.returncode == 1 and failed.stdout.strip() == "podresources_up 0.0"


class AuthRecordingServer:
    """An HTTPS /metrics that needs basic auth and records every Authorization it receives."""

    def __init__(self, cert: Path, key: Path):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.received: list[str] = []

    async def metrics(self, request: web.Request) -> web.Response:
        self.received.append(request.headers.get("Authorization", ""))
        expected = "Basic " + base64.b64encode(b"prometheus:s3cret").decode()
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401)
        return web.Response(text="podresources_up 1\n")

    async def __aenter__(self) -> AuthRecordingServer:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


async def test_helm_test_pod_sends_credentials_only_after_verifying_the_certificate(helm):
    docs = render(helm, "--values", str(CHART / "ci" / "webconfig-values.yaml"))
    command, url = helm_test_command(docs)
    env = {e["name"]: e["value"] for e in one(docs, "Pod")["spec"]["containers"][0]["env"]}
    assert url == f"https://{FULLNAME}.{NAMESPACE}.svc:10075/metrics"
    assert env["TLS_SERVER_NAME"] == "podresources-exporter.monitoring.svc"  # tests.tls
    ca_volume = next(v for v in one(docs, "Pod")["spec"]["volumes"] if v["name"] == "tls-ca")
    assert ca_volume["secret"] == {"secretName": "podresources-exporter-tls", "defaultMode": 0o444,
                                   "optional": True, "items": [{"key": "ca.crt",
                                                                "path": "ca.crt"}]}
    command[0] = shutil.which("python3")
    directory = short_tmpdir()
    try:
        ca, impostor = CA(directory, "ca"), CA(directory, "impostor")
        cert, key = ca.issue("exporter")  # names: localhost, 127.0.0.1
        auth = directory / "auth"
        auth.mkdir()
        (auth / "username").write_text("prometheus\n")
        (auth / "password").write_text("s3cret\n")

        async def run(server: AuthRecordingServer, ca_file: Path, server_name: str):
            return await asyncio.to_thread(subprocess.run, command, capture_output=True,
                                           text=True, timeout=60, env={
                "METRICS_URL": f"https://127.0.0.1:{server.port}/metrics",
                "TLS_SERVER_NAME": server_name, "AUTH_DIR": str(auth),
                "CA_FILE": str(ca_file), "SSL_CERT_FILE": str(directory / "no-system-store")})

        async with AuthRecordingServer(cert, key) as server:
            passed = await run(server, ca.path, "localhost")
            assert passed.returncode == 0, passed.stdout + passed.stderr
            assert passed.stdout.strip() == "podresources_up 1"
            assert server.received == ["Basic " + base64.b64encode(b"prometheus:s3cret").decode()]
            server.received.clear()
            # Another CA, a name the certificate lacks, no CA at all (and an empty system trust
            # store): the handshake fails, nothing is sent, and the test fails at once.
            for ca_file, name in ((impostor.path, "localhost"), (ca.path, "evil.example"),
                                  (directory / "absent.crt", "localhost")):
                failed = await run(server, ca_file, name)
                assert failed.returncode == 1, (ca_file, name, failed.stdout + failed.stderr)
                assert "CERTIFICATE_VERIFY_FAILED" in failed.stdout, failed.stdout
                assert "tests.tls.caSecret" in failed.stdout
            assert server.received == []
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_helm_test_pod_ca_and_server_name_from_values(helm):
    docs = render(helm, "--set", "webConfig.enabled=true", "--set", "webConfig.https=true",
                  "--set", "webConfig.existingSecret=web", "--set", "tests.basicAuthSecret=scrape",
                  "--set", "tests.tls.caSecret=my-ca", "--set", "tests.tls.caKey=root.pem",
                  "--set", "tests.tls.serverName=metrics.example.com")
    pod = one(docs, "Pod")["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["TLS_SERVER_NAME"] == "metrics.example.com"
    ca_volume = next(v for v in pod["volumes"] if v["name"] == "tls-ca")
    assert ca_volume["secret"]["secretName"] == "my-ca"
    assert ca_volume["secret"]["items"] == [{"key": "root.pem", "path": "ca.crt"}]
    assert {"name": "tls-ca", "mountPath": "/tls", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    default_name = one(render(helm, "--set", "webConfig.enabled=true",
                              "--set", "webConfig.https=true",
                              "--set", "webConfig.existingSecret=web"), "Pod")["spec"]
    default_env = {e["name"]: e["value"] for e in default_name["containers"][0]["env"]}
    assert default_env["TLS_SERVER_NAME"] == f"{FULLNAME}.{NAMESPACE}.svc"
    assert "volumes" not in default_name  # no CA Secret named: the image's trust store
    plain = one(render(helm), "Pod")["spec"]
    assert "volumes" not in plain
    assert [e["name"] for e in plain["containers"][0]["env"]] == ["METRICS_URL"]
