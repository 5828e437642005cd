"""--web-config-file: TLS, client certificates and basic auth on a running exporter."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
import bcrypt
import pytest

from exporter.cli import main, serve
from exporter.web import basicauth, webconfig

from ..support.harness import REPO, Node, Scrape, small_profile
from ..support.pki import CA

PASSWORD = "correct horse battery staple"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


def write_config(directory: Path, text: str) -> Path:
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


def auth(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# ---- a running exporter behind a web config -----------------------------------------------

class Served:
    """``cli.serve`` (the real wiring) on a free port, with a simulated kubelet."""

    def __init__(self, node: Node, config_path: Path):
        self.node, self.config = node, webconfig.load(config_path)
        self.stop = asyncio.Event()

    async def __aenter__(self) -> Served:
        started = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(serve(
            self.node.settings(), ("127.0.0.1", 0), stop=self.stop,
            started=lambda port, refresher: started.set_result(port),
            web_config=self.config))
        self.port = await asyncio.wait_for(started, 10)
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        assert await asyncio.wait_for(self.task, 10) == 0

    async def get(self, path: str, scheme: str = "https", ssl_context=None, **kwargs):
        async with aiohttp.ClientSession() as session, session.get(
                f"{scheme}://127.0.0.1:{self.port}{path}", ssl=ssl_context, **kwargs) as response:
            return response.status, response.headers, await response.text()


def client_context(ca: CA, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.path)
    if cert:
        context.load_cert_chain(cert, key)
    return context


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


def secret_volume(volume: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` the way the kubelet updates a Secret volume: a new timestamped directory,
    an atomic swap of the ``..data`` link, the old directory deleted; names link via ``..data``."""
    volume.mkdir(exist_ok=True)
    old = os.readlink(volume / "..data") if (volume / "..data").is_symlink() else None
    fresh = Path(tempfile.mkdtemp(prefix="..20", dir=volume))
    for name, content in files.items():
        (fresh / name).write_bytes(content)
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(Path("..data") / name)
    (volume / "..data_tmp").symlink_to(fresh.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    if old:
        shutil.rmtree(volume / old)


async def test_rotated_certificate_is_served_without_restart(pki, tmp_path):
    ca, cert, key = pki
    volume = tmp_path / "secret"
    config = b"tls_server_config: {cert_file: tls.crt, key_file: tls.key}\n"
    secret_volume(volume, {"web-config.yml": config, "tls.crt": cert.read_bytes(),
                           "tls.key": key.read_bytes()})
    async with Node(small_profile()) as node, Served(node, volume / "web-config.yml") as served:
        def presented() -> str:
            return ssl.get_server_certificate(("127.0.0.1", served.port))

        before = await asyncio.to_thread(presented)
        assert before == cert.read_text()
        new_cert, new_key = ca.issue("server-renewed")
        secret_volume(volume, {"web-config.yml": config, "tls.crt": new_cert.read_bytes(),
                               "tls.key": new_key.read_bytes()})
        after = await asyncio.to_thread(presented)
        assert after == new_cert.read_text() and after != before
        status, _, _ = await served.get("/healthz", ssl_context=client_context(ca))
        assert status == 200


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


# ---- the file changes while serving ---------------------------------------------------------

async def test_revoked_password_and_new_headers_apply_without_restart(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="exporter.web.webconfig")
    other = "new password for prometheus"
    other_hash = bcrypt.hashpw(other.encode(), bcrypt.gensalt(rounds=4)).decode()
    volume = tmp_path / "secret"
    secret_volume(volume, {"web-config.yml": f"basic_auth_users: {{prometheus: '{HASH}'}}\n"
                                             .encode()})
    async with Node(small_profile()) as node, \
            Served(node, volume / "web-config.yml") as served:
        status, headers, _ = await served.get("/metrics", scheme="http",
                                              headers=auth("prometheus", PASSWORD))
        assert status == 200 and "X-Frame-Options" not in headers
        secret_volume(volume, {"web-config.yml": (
            f"basic_auth_users: {{prometheus: '{other_hash}'}}\n"
            "http_server_config: {headers: {X-Frame-Options: deny}}\n").encode()})
        status, headers, _ = await served.get("/metrics", scheme="http",
                                              headers=auth("prometheus", PASSWORD))
        assert status == 401 and headers["X-Frame-Options"] == "deny"
        status, _, _ = await served.get("/metrics", scheme="http",
                                        headers=auth("prometheus", other))
        assert status == 200
        # a broken version is refused, once, and the last good one stays in force
        secret_volume(volume, {"web-config.yml": b"basic_auth_users: {prometheus: plain}\n"})
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


# ---- bcrypt's cost, bounded -----------------------------------------------------------------

class CountingCheckpw:
    """bcrypt.checkpw as it is, counting calls and the most that ran at once."""

    def __init__(self):
        self.hashes: list[bytes] = []
        self.passwords: list[bytes] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.real = bcrypt.checkpw

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self.lock:
            self.hashes.append(hashed)
            self.passwords.append(password)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.02)  # long enough for concurrent checks to overlap, if they could
            return self.real(password, hashed)
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def checkpw(monkeypatch):
    counting = CountingCheckpw()
    monkeypatch.setattr(basicauth.bcrypt, "checkpw", counting)
    return counting


def header(user: str, password: str) -> str:
    return auth(user, password)["Authorization"]


async def test_unknown_users_cost_what_the_costliest_user_costs(checkpw):
    cheap = bcrypt.hashpw(b"a", bcrypt.gensalt(rounds=4))
    costly = bcrypt.hashpw(b"b", bcrypt.gensalt(rounds=6))
    basic = basicauth.BasicAuth({"cheap": cheap, "costly": costly})
    assert await basic.check(header("nobody", "x")) is False
    assert checkpw.hashes[-1][:7] == b"$2b$06$"
    # a wrong password for the cheap user waits out the difference: 2**(6-4) - 1 = 3 checks
    sleeps = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds):
        sleeps.append(seconds)
        await real_sleep(0)
    basicauth.asyncio.sleep, saved = recording_sleep, basicauth.asyncio.sleep
    try:
        assert await basic.check(header("cheap", "wrong")) is False
        assert await basic.check(header("costly", "wrong")) is False
        assert await basic.check(header("cheap", "a")) is True
    finally:
        basicauth.asyncio.sleep = saved
    assert len(sleeps) == 1 and sleeps[0] >= 3 * 0.02  # the check itself took 20 ms or more


async def test_a_flood_of_wrong_passwords_neither_evicts_nor_queues_the_right_one(checkpw):
    basic = basicauth.BasicAuth({"prometheus": HASH.encode()})
    assert await basic.check(header("prometheus", PASSWORD), "10.0.0.1") is True
    answers = await asyncio.gather(*(basic.check(header("prometheus", f"wrong {n}"), "10.6.6.6")
                                     for n in range(400)))
    assert checkpw.most == 1                       # one check at a time
    assert answers.count(False) == 2               # two from one address at a time ...
    assert answers.count(None) == 398              # ... the rest answered 429 at once
    calls = len(checkpw.hashes)
    for n in range(300):                           # more wrong ones than the caches hold
        await basic.check(header("prometheus", f"again {n}"), f"10.7.{n // 250}.{n % 250}")
    calls = len(checkpw.hashes)
    assert await basic.check(header("prometheus", PASSWORD), "10.0.0.1") is True
    assert len(checkpw.hashes) == calls            # still remembered: no check needed
    assert await basic.check(header("prometheus", "again 299"), "10.6.6.6") is False
    assert len(checkpw.hashes) == calls            # a repeated wrong one costs nothing either


async def test_concurrent_requests_with_the_same_credentials_share_one_check(checkpw):
    basic = basicauth.BasicAuth({"prometheus": HASH.encode()})
    answers = await asyncio.gather(*(basic.check(header("prometheus", PASSWORD), "10.0.0.1")
                                     for _ in range(20)))
    assert answers == [True] * 20 and len(checkpw.hashes) == 1


async def test_too_many_checks_at_once_get_429(tmp_path, checkpw):
    path = write_config(tmp_path, f"basic_auth_users: {{prometheus: '{HASH}'}}\n")
    async with Node(small_profile()) as node, Served(node, path) as served:
        answers = await asyncio.gather(*(served.get("/metrics", scheme="http",
                                                    headers=auth("prometheus", f"wrong {n}"))
                                         for n in range(10)))
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [401, 401] + [429] * 8
    assert all(headers["Retry-After"] == "1" for status, headers, _ in answers if status == 429)


async def test_a_wrong_password_flood_leaves_legitimate_scrapes_answering(tmp_path, checkpw):
    """A real server under a flood of new wrong passwords from one address, more than the
    caches hold: a scraper on another address is checked once, answered 200 throughout; the
    flood gets 401 or 429, bcrypt runs one check at a time, probes answer."""
    path = write_config(tmp_path, f"basic_auth_users: {{prometheus: '{HASH}'}}\n")
    legit: list[int] = []
    probes: list[int] = []
    async with Node(small_profile()) as node, Served(node, path) as served:
        url = f"http://127.0.0.1:{served.port}"
        flood_started = asyncio.Event()

        async def flood() -> list[int]:
            # 50 connections at a time: under the connection limit, so this is about bcrypt
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=50)) as session:
                async def wrong(n: int) -> int:
                    async with session.get(url + "/metrics",
                                           headers=auth("prometheus", f"wrong {n}")) as response:
                        await response.read()
                        return response.status
                tasks = [asyncio.create_task(wrong(n)) for n in range(300)]
                flood_started.set()
                return await asyncio.gather(*tasks)

        async def scraper() -> None:
            await flood_started.wait()
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
                    local_addr=("127.0.0.2", 0))) as session:
                for _ in range(10):
                    async with session.get(url + "/metrics",
                                           headers=auth("prometheus", PASSWORD)) as response:
                        body = await response.text()
                        legit.append(response.status)
                        assert "podresources_up" in body
                    async with session.get(url + "/healthz") as response:
                        probes.append(response.status)

        answers, _ = await asyncio.gather(flood(), scraper())
    assert legit == [200] * 10
    assert probes == [200] * 10
    assert set(answers) <= {401, 429} and answers.count(429) > 0
    assert checkpw.most == 1
    # one check for the right password, whatever the flood did to the caches
    assert checkpw.passwords.count(PASSWORD.encode()) == 1
