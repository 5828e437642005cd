"""Fuzzing the HTTP surface and the web config (loopback only, bounded, a few seconds).

Real exporter processes behind a web config (basic auth over plain HTTP, and TLS) face
generated requests over raw sockets: methods, paths, Accept, Accept-Encoding, Authorization and
other headers, and plain garbage. Whatever arrives, the answer is never a 5xx, the log never
holds an error or a traceback, /healthz keeps answering and memory stays put. Web-config
documents, well-formed YAML or not, load or fail with WebConfigError and nothing else.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import bcrypt
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from exporter.simulator import load_profile, write_sysfs
from exporter.web import webconfig
from exporter.web.negotiation import choose_coding, choose_format

from ..support.harness import REPO, free_port, short_tmpdir
from ..support.pki import CA

PASSWORD = "fuzz-password"
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Served:
    """An exporter process with a web config, its log in a file."""

    def __init__(self, directory: Path, name: str, config: str, node_socket: Path, sysfs: Path):
        self.port = free_port()
        self.config = directory / f"{name}.yml"
        self.config.write_text(config)
        self.log_path = directory / f"{name}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115  # the child's log, open while it runs
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exporter", "--socket", str(node_socket), "--sysfs-root",
             str(sysfs), "--listen-address", f"127.0.0.1:{self.port}", "--web-config-file",
             str(self.config), "--interval", "1"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=self.log)
        self.tls: ssl.SSLContext | None = None

    def wait_listening(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"exporter did not listen; log:\n{self.log_path.read_text()}")

    def connect(self, timeout: float = 5.0) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname="localhost")
        return sock

    def exchange(self, raw: bytes, timeout: float = 3.0) -> bytes:
        """Send raw bytes and read until one whole response, the end, or ``timeout`` of silence.

        No half-close: aiohttp, like many servers, drops a connection whose peer half-closed
        before the answer was written, which would hide the answer from the test.
        """
        head_only = raw.split(b" ", 1)[0] == b"HEAD"
        sock = self.connect(timeout=timeout)
        answer = b""
        try:
            sock.sendall(raw)
            while not _complete(answer, head_only):
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except (OSError, ssl.SSLError):  # timeouts, resets: the answer so far is the answer
            pass
        finally:
            sock.close()
        return answer

    def healthy(self) -> bool:
        return self.exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") \
            .startswith(b"HTTP/1.1 200 OK")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
        return self.log_path.read_text(errors="replace")


def _complete(answer: bytes, head_only: bool) -> bool:
    """Whether ``answer`` holds a whole final response."""
    while True:
        head, sep, body = answer.partition(b"\r\n\r\n")
        if not sep or len(head) < 12:
            return False
        status = head[9:12]
        if not status.startswith(b"1"):
            break
        answer = body  # an interim 1xx response; the final one follows
    if head_only or status in (b"204", b"304"):
        return True
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            try:
                return len(body) >= int(line.split(b":", 1)[1])
            except ValueError:
                return False
    return False  # delimited by the end of the connection


def statuses(answer: bytes) -> list[int]:
    """The status of every response in an answer (pipelined requests get several)."""
    found = []
    for line in answer.split(b"\r\n"):
        if line.startswith(b"HTTP/1.") and len(line) >= 12 and line[9:12].isdigit():
            found.append(int(line[9:12]))
    return found


@pytest.fixture(scope="module")
def exporters():
    directory = short_tmpdir()
    spec = load_profile("small")
    sysfs = write_sysfs(spec, directory / "sys")
    node_socket = directory / "pod-resources" / "kubelet.sock"
    simulator = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--profile", "small", "--socket",
         str(node_socket), "--sysfs-root", str(sysfs), "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    ca = CA(directory, "ca")
    ca.issue("server")
    plain = Served(directory, "plain", f"basic_auth_users: {{prometheus: '{hashed}'}}\n"
                   "http_server_config: {headers: {X-Content-Type-Options: nosniff}}\n",
                   node_socket, sysfs)
    tls = Served(directory, "tls", "tls_server_config: {cert_file: server.crt, key_file: "
                 f"server.key}}\nbasic_auth_users: {{prometheus: '{hashed}'}}\n",
                 node_socket, sysfs)
    tls.tls = ssl.create_default_context(cafile=ca.path)
    try:
        plain.wait_listening()
        tls.wait_listening()
        yield {"plain": plain, "tls": tls, "rss": {}}
    finally:
        logs = {name: served.stop() for name, served in (("plain", plain), ("tls", tls))}
        simulator.terminate()
        simulator.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
    for _name, log in logs.items():  # nothing anyone sent made the exporter complain
        assert "Traceback" not in log, log
        assert " ERROR " not in log, log


# ---- generated requests -------------------------------------------------------------------

TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                         "!#$%&'*+-.^_`|~", min_size=1, max_size=12)
ANY_TEXT = st.text(st.characters(codec="latin-1"), max_size=60)
# A header value an HTTP parser accepts (mostly): what reaches the exporter's own code.
VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=60)
TEXT = st.one_of(VALUE, VALUE, VALUE, VALUE, VALUE, VALUE, ANY_TEXT)
QUALITY = st.one_of(st.sampled_from(["0", "1", "0.5", "0.001", "1.000", "-1", "2", "x", "nan",
                                     "1e3", ""]), TEXT)
MEDIA = st.sampled_from(["application/openmetrics-text", "text/plain", "*/*", "text/*",
                         "application/*", "application/json", "*/plain", "/", "", "text"])
PARAMETER = st.one_of(
    st.tuples(st.sampled_from(["version", "charset", "escaping", "q", "foo"]),
              st.sampled_from(["1.0.0", "0.0.1", "0.0.4", "2.0.0", "utf-8", "allow-utf-8",
                               "underscores", '"1.0.0"', "0", "0.5", ""])),
    st.tuples(TOKEN, TEXT))
MEDIA_RANGE = st.builds(lambda media, params: media + "".join(f";{k}={v}" for k, v in params),
                        MEDIA, st.lists(PARAMETER, max_size=4))
ACCEPT = st.one_of(st.lists(MEDIA_RANGE, max_size=6).map(", ".join), TEXT)
CODING = st.builds(lambda coding, q: coding + (f";q={q}" if q is not None else ""),
                   st.sampled_from(["gzip", "x-gzip", "identity", "*", "br", "deflate", "GZIP",
                                    ""]), st.one_of(st.none(), QUALITY))
ACCEPT_ENCODING = st.one_of(st.lists(CODING, max_size=5).map(", ".join), TEXT)
CREDENTIALS = st.one_of(
    st.builds(lambda user, password: user + b":" + password,
              st.sampled_from([b"prometheus", b"", b"nobody", b"\xff\xfe", b"a" * 300]),
              st.one_of(st.just(PASSWORD.encode()), st.binary(max_size=120),
                        st.just(PASSWORD.encode() + b"x" * 80))),
    st.binary(max_size=200))
AUTHORIZATION = st.one_of(
    st.builds(lambda scheme, blob: f"{scheme} {base64.b64encode(blob).decode()}",
              st.sampled_from(["Basic", "basic", "BASIC", "Bearer", "Digest", ""]), CREDENTIALS),
    st.builds(lambda scheme, text: f"{scheme} {text}", st.sampled_from(["Basic", "Bearer"]),
              TEXT),
    TEXT)
PATH = st.one_of(st.sampled_from(["/metrics"] * 8 + ["/healthz", "/readyz", "/", "/metrics/",
                                  "/METRICS", "/metrics?x=1", "//metrics", "/%2e%2e/",
                                  "/metrics#frag", "*", "http://x/metrics"]),
                 st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=80)
                 .map(lambda p: "/" + p))
METHOD = st.one_of(st.sampled_from(["GET"] * 8 + ["HEAD"] * 2 + [
    "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PATCH", "PRI", "get"]), TOKEN)
VERSION = st.sampled_from(["HTTP/1.1"] * 12 + ["HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.1x",
                                               ""])
EXTRA = st.lists(st.one_of(TOKEN, st.sampled_from(
    ["Content-Length", "Transfer-Encoding", "Connection", "Expect", "Upgrade", "Host",
     "Cookie", "Range"])), max_size=2)


@st.composite
def requests(draw) -> bytes:
    """Mostly requests an HTTP parser accepts, so that the exporter's own code sees them."""
    if draw(st.integers(0, 4)) == 0:  # one in five: anything goes
        method, version, sane = draw(METHOD), draw(VERSION), False
    else:
        method, version, sane = draw(st.sampled_from(["GET"] * 6 + ["HEAD", "POST"])), \
            "HTTP/1.1", True

    def field(strategy) -> str:
        value = draw(strategy)
        return "".join(c for c in value if " " <= c < "\x7f") if sane else value

    lines = [f"{method} {draw(PATH)} {version}", "Host: localhost"]
    valid = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    for name, strategy in (("Accept", ACCEPT), ("Accept-Encoding", ACCEPT_ENCODING),
                           ("Authorization", st.one_of(st.just(valid), AUTHORIZATION))):
        if draw(st.integers(0, 3)):
            lines.append(f"{name}: {field(strategy)}")
    lines += [f"{name}: {field(TEXT)}" for name in draw(EXTRA)]
    raw = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
    return raw + draw(st.one_of(st.just(b""), st.just(b""), st.binary(max_size=64)))


@FUZZ
@given(raw=requests())
def test_generated_requests_never_get_a_5xx(exporters, raw):
    answer = exporters["plain"].exchange(raw)
    assert all(status < 500 for status in statuses(answer)), (raw, answer[:300])


@FUZZ
@given(raw=st.one_of(st.binary(max_size=2048),
                     st.builds(lambda head, tail: head + tail,
                               st.sampled_from([b"GET /metrics HTTP/1.1\r\n", b"GET / HTTP/1.1",
                                                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
                                                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b""]),
                               st.binary(max_size=512))))
def test_raw_bytes_never_get_a_5xx(exporters, raw):
    answer = exporters["plain"].exchange(raw, timeout=0.5)  # incomplete ones get no answer
    assert all(status < 500 for status in statuses(answer)), (raw, answer[:300])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(raw=requests())
def test_generated_requests_over_tls_never_get_a_5xx(exporters, raw):
    answer = exporters["tls"].exchange(raw)
    assert all(status < 500 for status in statuses(answer)), (raw, answer[:300])


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=1024))
def test_garbage_on_the_tls_port_is_dropped(exporters, raw):
    served = exporters["tls"]
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=15)
    try:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):  # whatever it answers, it ends the connection
            pass
    except ConnectionError:
        pass
    finally:
        sock.close()


def test_after_the_fuzz_both_still_serve_and_memory_stayed_put(exporters):
    """Runs last in this module: the exporters answer, and fuzzing left no memory behind."""
    for name in ("plain", "tls"):
        served = exporters[name]
        assert served.healthy(), name
        token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
        answer = served.exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                 b"Authorization: Basic " + token.encode() + b"\r\n\r\n")
        assert statuses(answer) == [200] and b"podresources_build_info" in answer
        before = rss_kib(served.proc.pid)
        for _ in range(300):  # one more round of the commonest garbage, then compare
            served.exchange(b"GET /metrics HTTP/1.1\r\nAuthorization: Basic "
                            + base64.b64encode(os.urandom(90)) + b"\r\n\r\n")
        assert rss_kib(served.proc.pid) - before < 16 * 1024, name


# ---- negotiation and web-config documents, in-process -----------------------------------

@settings(max_examples=500, deadline=None, derandomize=True)
@given(accept=st.one_of(ACCEPT, st.text(max_size=300)),
       encoding=st.one_of(ACCEPT_ENCODING, st.text(max_size=300)))
def test_negotiation_answers_anything(accept, encoding):
    chosen = choose_format(accept)
    assert chosen.content_type.startswith(("text/plain; version=0.0.4",
                                           "application/openmetrics-text; version="))
    assert choose_coding(encoding) in ("gzip", "identity", None)


SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                   st.text(max_size=20), st.sampled_from(
                       ["server.crt", "server.key", "ca.crt", "", "TLS12", "TLS13", "TLS11",
                        "RequireAndVerifyClientCert", "NoClientCert", "VerifyClientCertIfGiven",
                        "$2b$04$" + "a" * 53, "nosniff", "deny", "max-age=1", "/dev/null",
                        "/proc/self/status", "server.crt\x00", "../../etc/passwd"]))
KEYS = st.one_of(st.sampled_from(
    ["tls_server_config", "http_server_config", "basic_auth_users", "cert_file", "key_file",
     "client_ca_file", "client_auth_type", "min_version", "max_version",
     "prefer_server_cipher_suites", "headers", "http2", "X-Frame-Options",
     "Strict-Transport-Security", "prometheus", "cipher_suites", "rate_limit"]),
    st.text(max_size=10))
DOCUMENT = st.recursive(SCALAR, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)), max_leaves=20)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=DOCUMENT, text=st.one_of(st.none(), st.text(max_size=200)))
def test_any_web_config_document_loads_or_fails_with_one_reason(tmp_path_factory, document,
                                                                text):
    directory = tmp_path_factory.getbasetemp() / "fuzz-config"
    if not directory.exists():
        directory.mkdir()
        ca = CA(directory, "ca")
        ca.issue("server")
    path = directory / "web-config.yml"
    path.write_text(text if text is not None else yaml.safe_dump(document), encoding="utf-8")
    try:
        config = webconfig.load(path)
    except webconfig.WebConfigError as error:
        assert "\n" not in str(error)
        return
    live = config.live()  # what the server builds from an accepted file
    assert live.tls_context() is None or isinstance(live.tls_context(), ssl.SSLContext)
