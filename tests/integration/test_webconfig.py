"""--web-config-file: TLS, client certificates and basic auth on a running exporter.

What the file may say and how a bad one is refused (one line, exit 2), served: HTTPS with basic
auth, client certificates required or verified when given, bcrypt hashes of every style and
passwords past bcrypt's 72 bytes, TLS 1.2's cipher suites. A file changing while served is in
test_webconfig_reload.py; bcrypt's cost under load in test_basicauth.py.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys

import aiohttp
import bcrypt
import pytest

from exporter.cli import main
from exporter.web import basicauth, webconfig

from ..support.harness import REPO, Node, Scrape, small_profile
from ..support.pki import CA
from ..support.webconfig import HASH, PASSWORD, Served, auth, client_context, write_config


async def test_https_with_basic_auth(pki, tmp_path):
    ca, _cert, _key = pki
    path = write_config(tmp_path, f"""
tls_server_config: {{cert_file: server.crt, key_file: server.key}}
http_server_config:
  headers: {{Strict-Transport-Security: max-age=31536000}}
basic_auth_users: {{prometheus: '{HASH}'}}
""")
    tls = client_context(ca)
    async with Node(small_profile()) as node, Served(node, path) as served:
        status, headers, body = await served.get("/metrics", ssl_context=tls,
                                                 headers=auth("prometheus", PASSWORD))
        assert status == 200
        assert "podresources_build_info" in Scrape(body).families
        assert headers["Strict-Transport-Security"] == "max-age=31536000"

        for credentials in ({}, auth("prometheus", "wrong"), auth("grafana", PASSWORD),
                            {"Authorization": "Basic !!notbase64"},
                            {"Authorization": "Bearer abc"}):
            status, headers, body = await served.get("/metrics", ssl_context=tls,
                                                     headers=credentials)
            assert status == 401, credentials
            assert headers["WWW-Authenticate"].startswith("Basic ")
            assert "podresources_" not in body
            assert headers["Strict-Transport-Security"] == "max-age=31536000"

        status, _, _ = await served.get("/", ssl_context=tls)
        assert status == 401  # the landing page names the socket and node: guarded too
        status, _, body = await served.get("/numa", ssl_context=tls)
        assert status == 401 and "NUMA map" not in body  # the node map: pods and devices
        status, _, body = await served.get("/numa", ssl_context=tls,
                                           headers=auth("prometheus", PASSWORD))
        assert status in (200, 503) and "no such" not in body
        status, _, _ = await served.get("/no-such-page", ssl_context=tls)
        assert status == 401
        for probe in ("/healthz", "/readyz"):  # kubelet probes send no credentials
            status, _, _ = await served.get(probe, ssl_context=tls)
            assert status in (200, 503), probe

        with pytest.raises(aiohttp.ClientError):  # plain HTTP to the TLS port
            await served.get("/healthz", scheme="http")
        with pytest.raises(aiohttp.ClientConnectorCertificateError):  # untrusted server
            await served.get("/healthz", ssl_context=ssl.create_default_context())


async def test_basic_auth_without_tls_and_bcrypt_cache(tmp_path, monkeypatch):
    path = write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    calls = []
    real = bcrypt.checkpw
    monkeypatch.setattr(basicauth.bcrypt, "checkpw",
                        lambda password, hashed: calls.append(password) or real(password, hashed))
    async with Node(small_profile()) as node, Served(node, path) as served:
        for _ in range(5):
            status, _, _ = await served.get("/metrics", scheme="http",
                                            headers=auth("prometheus", PASSWORD))
            assert status == 200
        assert len(calls) == 1  # one bcrypt check for five scrapes
        for _ in range(2):
            status, _, _ = await served.get("/metrics", scheme="http",
                                            headers=auth("prometheus", "wrong"))
            assert status == 401
        assert len(calls) == 2  # a wrong password is remembered as wrong, too


async def test_client_certificate_required(pki, tmp_path):
    ca, _, _ = pki
    client_cert, client_key = ca.issue("scraper", client=True)
    stranger = CA(tmp_path, "other-ca")
    stranger_cert, stranger_key = stranger.issue("stranger", client=True)
    path = write_config(tmp_path, """
tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_ca_file: ca.crt
  client_auth_type: RequireAndVerifyClientCert
  min_version: TLS13
""")
    async with Node(small_profile()) as node, Served(node, path) as served:
        status, _, body = await served.get("/metrics",
                                           ssl_context=client_context(ca, client_cert, client_key))
        assert status == 200 and "podresources_up" in body
        for context in (client_context(ca), client_context(ca, stranger_cert, stranger_key)):
            with pytest.raises(aiohttp.ClientError):
                await served.get("/metrics", ssl_context=context)
        old_client = client_context(ca, client_cert, client_key)
        old_client.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(aiohttp.ClientError):  # min_version TLS13
            await served.get("/healthz", ssl_context=old_client)


async def test_verify_client_cert_if_given(pki, tmp_path):
    ca, _, _ = pki
    stranger = CA(tmp_path, "other-ca")
    stranger_cert, stranger_key = stranger.issue("stranger", client=True)
    path = write_config(tmp_path, """
tls_server_config: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt,
                    client_auth_type: VerifyClientCertIfGiven}
""")
    async with Node(small_profile()) as node, Served(node, path) as served:
        status, _, _ = await served.get("/metrics", ssl_context=client_context(ca))
        assert status == 200
        with pytest.raises(aiohttp.ClientError):
            await served.get("/metrics",
                             ssl_context=client_context(ca, stranger_cert, stranger_key))


@pytest.mark.parametrize("text, reason", [
    ("- a list\n", "the file must be a mapping"),
    ("tls_server_config: [\n", "not valid YAML"),
    ("basic_auth_user: {}\n", "unknown key 'basic_auth_user'"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, ca_file: x}\n",
     "unknown key 'tls_server_config.ca_file'"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, "
     "cipher_suites: [TLS_AES_128_GCM_SHA256]}\n", "cipher_suites is not supported"),
    ("rate_limit: {interval: 1s}\n", "rate_limit is not supported"),
    ("basic_auth_users: {prometheus: secret}\n", "basic_auth_users.prometheus: not a bcrypt hash"),
    (f"basic_auth_users: {{'a:b': '{HASH}'}}\n", "bad user name 'a:b'"),
    ("tls_server_config: {cert_file: server.crt}\n", "key_file is missing"),
    ("tls_server_config: {cert_file: missing.crt, key_file: server.key}\n",
     "cannot read {dir}/missing.crt"),
    ("tls_server_config: {cert_file: server.crt, key_file: other.key}\n",
     "are not a usable pair"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, "
     "client_auth_type: RequireAnyClientCert, client_ca_file: ca.crt}\n",
     "RequireAnyClientCert is not supported"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, "
     "client_auth_type: RequireAndVerifyClientCert}\n", "needs client_ca_file"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}\n",
     "never verifies client certificates"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, "
     "client_auth_type: Sometimes}\n", "unknown value 'Sometimes'"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, min_version: TLS11}\n",
     "below TLS 1.2 are not allowed"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, min_version: TLS13, "
     "max_version: TLS12}\n", "min_version is above max_version"),
    ("tls_server_config: {cert_file: server.crt, key_file: server.key, "
     "client_ca_file: server.key, client_auth_type: RequireAndVerifyClientCert}\n",
     "cannot use client_ca_file"),
    ("http_server_config: {headers: {Server: nginx}}\n", "'Server' is not allowed"),
    ("http_server_config: {headers: {X-Frame-Options: allow}}\n", "'allow' is not allowed"),
    # TLS asked for but given no certificate: basic auth would go over plain HTTP
    (f"tls_server_config: {{cert_file: '', key_file: ''}}\nbasic_auth_users: {{a: '{HASH}'}}\n",
     "basic auth would send passwords over plain HTTP"),
    (f"tls_server_config: {{}}\nbasic_auth_users: {{a: '{HASH}'}}\n",
     "basic auth would send passwords over plain HTTP"),
    # PyYAML keeps the last of two equal keys; a web config must not guess which was meant
    (f"basic_auth_users: {{a: '{HASH}'}}\nbasic_auth_users: {{}}\n",
     "duplicate key 'basic_auth_users' (line 2)"),
    (f"basic_auth_users:\n  a: '{HASH}'\n  a: '{HASH}'\n", "duplicate key 'a' (line 3)"),
    ("tls_server_config: {cert_file: \"server.crt\\0\", key_file: server.key}\n",
     "cert_file contains a NUL character"),
    ("http_server_config: {headers: {Content-Security-Policy: \"a\\x1bb\"}}\n",
     "must be one line of printable ASCII"),
    ("a: " + "[" * 5000 + "\n", "not valid YAML: nested too deeply"),
])
def test_bad_web_config_exits_2_with_one_line(pki, tmp_path, capsys, text, reason):
    _ca, _, _ = pki
    CA(tmp_path, "other")  # other.key does not match server.crt
    path = write_config(tmp_path, text)
    assert main(["--web-config-file", str(path), "--listen-address", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"podresources-exporter: error: --web-config-file: {path}: ")
    assert reason.format(dir=tmp_path) in err


def test_missing_web_config_file_exits_2_from_a_real_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "exporter", "--web-config-file",
                             str(tmp_path / "absent.yml")], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == (f"podresources-exporter: error: --web-config-file: "
                             f"{tmp_path}/absent.yml: No such file or directory\n")


def test_web_config_from_environment_twin(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PODRESOURCES_EXPORTER_WEB_CONFIG_FILE", str(tmp_path / "absent.yml"))
    assert main(["--listen-address", "127.0.0.1:0"]) == 2
    assert "--web-config-file: " in capsys.readouterr().err


def test_empty_and_certificate_less_configs_mean_plain_http(tmp_path):
    assert webconfig.load(write_config(tmp_path, "")).ssl_context()() is None
    config = webconfig.load(write_config(tmp_path, "tls_server_config: {}\nhttp_server_config: "
                                                   "{http2: false}\n"))
    assert config.tls is None and config.users == {} and config.ssl_context()() is None


def test_htpasswd_style_2y_hashes_are_accepted(tmp_path):
    hashed = "$2y$" + HASH[4:]
    config = webconfig.load(write_config(tmp_path, f"basic_auth_users: {{admin: '{hashed}'}}\n"))
    assert asyncio.run(basicauth.BasicAuth(config.users).check(
        auth("admin", PASSWORD)["Authorization"]))


# ---- passwords over 72 bytes ----------------------------------------------------------------

# Made with htpasswd 2.4.68 (Debian 12): htpasswd -nbBC 4 prometheus "$LONG". htpasswd, Go's
# x/crypto/bcrypt (exporter-toolkit) and Python bcrypt before 5.0 read 72 bytes of a password.
LONG = ("correct horse battery staple, " * 3)[:85]
LONG_HASH = "$2y$04$8rAxmlM3uyc0oT1GsKyTFua/t80MAP5fEC0or8887.sQsngwkvX9y"


async def test_long_passwords_get_401_or_in_never_500(tmp_path):
    path = write_config(tmp_path, f"basic_auth_users: {{prometheus: '{HASH}', "
                                  f"grafana: '{LONG_HASH}'}}\n")
    async with Node(small_profile()) as node, Served(node, path) as served:
        for user, password in (("prometheus", "x" * 100), ("grafana", "x" * 100),
                               ("nobody", "x" * 100), ("prometheus", PASSWORD + "x" * 80),
                               ("grafana", LONG[:71])):
            status, headers, _ = await served.get("/metrics", scheme="http",
                                                  headers=auth(user, password))
            assert status == 401, (user, len(password))
            assert headers["WWW-Authenticate"].startswith("Basic ")
        status, _, body = await served.get("/metrics", scheme="http", headers=auth("grafana", LONG))
        assert status == 200 and "podresources_up" in body
        # bcrypt's own limit: a password that agrees on the first 72 bytes is the same password
        status, _, _ = await served.get("/metrics", scheme="http",
                                        headers=auth("grafana", LONG[:72] + "anything"))
        assert status == 200


# ---- TLS cipher suites ----------------------------------------------------------------------

@pytest.mark.parametrize("ciphers, accepted", [
    ("ECDHE-ECDSA-AES128-GCM-SHA256", True),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", True),
    ("ECDHE-ECDSA-AES128-SHA256", False),   # CBC
    ("ECDHE-ECDSA-AES256-SHA384", False),   # CBC
    ("ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0", False),  # CBC with SHA-1
])
async def test_tls12_offers_only_aead_suites(pki, tmp_path, ciphers, accepted):
    ca, _, _ = pki
    path = write_config(tmp_path, "tls_server_config: {cert_file: server.crt, key_file: "
                                  "server.key}\n")
    client = client_context(ca)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    client.set_ciphers(ciphers)
    async with Node(small_profile()) as node, Served(node, path) as served:
        if accepted:
            status, _, _ = await served.get("/healthz", ssl_context=client)
            assert status == 200
        else:
            with pytest.raises(aiohttp.ClientError):
                await served.get("/healthz", ssl_context=client)
