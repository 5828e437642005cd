"""--web-config-file changing while the exporter serves, as a mounted Secret changes: a rotated
certificate, a revoked password and new headers, TLS switched on, all without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import aiohttp
import bcrypt
import pytest

from ..support.harness import Node, small_profile
from ..support.volumes import update_volume
from ..support.webconfig import HASH, PASSWORD, Served, auth, client_context, write_config


async def test_rotated_certificate_is_served_without_restart(pki, tmp_path):
    ca, cert, key = pki
    volume = tmp_path / "secret"
    config = b"tls_server_config: {cert_file: tls.crt, key_file: tls.key}\n"
    update_volume(volume, {"web-config.yml": config, "tls.crt": cert.read_bytes(),
                           "tls.key": key.read_bytes()})
    async with Node(small_profile()) as node, Served(node, volume / "web-config.yml") as served:
        def presented() -> str:
            return ssl.get_server_certificate(("127.0.0.1", served.port))

        before = await asyncio.to_thread(presented)
        assert before == cert.read_text()
        new_cert, new_key = ca.issue("server-renewed")
        update_volume(volume, {"web-config.yml": config, "tls.crt": new_cert.read_bytes(),
                               "tls.key": new_key.read_bytes()})
        after = await asyncio.to_thread(presented)
        assert after == new_cert.read_text() and after != before
        status, _, _ = await served.get("/healthz", ssl_context=client_context(ca))
        assert status == 200


async def test_revoked_password_and_new_headers_apply_without_restart(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="exporter.web.webconfig")
    other = "new password for prometheus"
    other_hash = bcrypt.hashpw(other.encode(), bcrypt.gensalt(rounds=4)).decode()
    volume = tmp_path / "secret"
    update_volume(volume, {"web-config.yml": f"basic_auth_users: {{prometheus: '{HASH}'}}\n"
                                             .encode()})
    async with Node(small_profile()) as node, \
            Served(node, volume / "web-config.yml") as served:
        status, headers, _ = await served.get("/metrics", scheme="http",
                                              headers=auth("prometheus", PASSWORD))
        assert status == 200 and "X-Frame-Options" not in headers
        update_volume(volume, {"web-config.yml": (
            f"basic_auth_users: {{prometheus: '{other_hash}'}}\n"
            "http_server_config: {headers: {X-Frame-Options: deny}}\n").encode()})
        status, headers, _ = await served.get("/metrics", scheme="http",
                                              headers=auth("prometheus", PASSWORD))
        assert status == 401 and headers["X-Frame-Options"] == "deny"
        status, _, _ = await served.get("/metrics", scheme="http",
                                        headers=auth("prometheus", other))
        assert status == 200
        # a broken version is refused, once, and the last good one stays in force
        update_volume(volume, {"web-config.yml": b"basic_auth_users: {prometheus: plain}\n"})
        for _ in range(3):
            status, _, _ = await served.get("/metrics", scheme="http",
                                            headers=auth("prometheus", other))
            assert status == 200
        status, _, _ = await served.get("/metrics", scheme="http")
        assert status == 401
    messages = [(r.levelname, r.getMessage()) for r in caplog.records
                if r.name == "exporter.web.webconfig" and "over plain HTTP" not in r.getMessage()]
    assert messages[0] == ("INFO", f"web config {volume}/web-config.yml reloaded: plain HTTP, "
                                   "basic auth for 1 users")
    assert messages[1][0] == "WARNING" and messages[1][1].startswith(
        "web config: keeping the previous settings: ")
    assert "basic_auth_users.prometheus: not a bcrypt hash" in messages[1][1]
    assert len([m for m in messages if m[0] == "WARNING"
                and "keeping the previous settings" in m[1]]) == 1


async def test_tls_is_switched_on_by_a_reload(pki, tmp_path):
    ca, _, _ = pki
    path = write_config(tmp_path, "")
    async with Node(small_profile()) as node, Served(node, path) as served:
        status, _, _ = await served.get("/healthz", scheme="http")
        assert status == 200
        path.write_text("tls_server_config: {cert_file: server.crt, key_file: server.key}\n")
        status, _, _ = await served.get("/healthz", ssl_context=client_context(ca))
        assert status == 200
        with pytest.raises(aiohttp.ClientError):
            await served.get("/healthz", scheme="http")
