"""TLS and basic auth for the HTTP server, from a Prometheus exporter-toolkit web-config file.

``--web-config-file`` takes the file format node_exporter and every Go exporter take with
``--web.config.file``, so operators reuse their files, their bcrypt hashes and their habits:

    tls_server_config:
      cert_file: tls.crt            # relative paths are relative to the web-config file
      key_file: tls.key
      client_ca_file: ca.crt        # optional
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12
    http_server_config:
      headers: {Strict-Transport-Security: max-age=31536000}
    basic_auth_users:
      prometheus: $2b$12$...        # bcrypt hash (htpasswd -nBC 12 prometheus)

Basic auth guards ``/metrics``, ``/`` and unknown paths; ``/healthz`` and ``/readyz`` stay open
so kubelet probes (which cannot send credentials) work. TLS applies to every path. Certificate
and key files are re-read when they change (cert-manager rotation needs no restart); the
web-config file itself is read once at start. Anything this implementation cannot honour
exactly is refused at start with the reason, never silently ignored.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import ssl
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import yaml
from aiohttp import web

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
REALM = "podresources-exporter"

_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    # exporter-toolkit name -> verify mode. RequestClientCert asks for a certificate it never
    # checks, which authenticates nobody, exactly like NoClientCert; so it is served as that.
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_SECTIONS = {"tls_server_config", "http_server_config", "basic_auth_users"}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version",
             "max_version", "prefer_server_cipher_suites"}
_HTTP_KEYS = {"headers", "http2"}
# Keys exporter-toolkit knows that this server cannot honour: refused rather than ignored.
_UNSUPPORTED = {
    "rate_limit": "rate limiting is not implemented",
    "tls_server_config.cert": "inline certificates are not supported; use cert_file",
    "tls_server_config.key": "inline keys are not supported; use key_file",
    "tls_server_config.client_ca": "inline CAs are not supported; use client_ca_file",
    "tls_server_config.cipher_suites": "Go cipher suite names cannot be applied to OpenSSL; "
                                       "the defaults allow only AEAD suites with forward secrecy",
    "tls_server_config.curve_preferences": "curve preferences are not supported",
    "tls_server_config.client_allowed_sans": "client SAN filtering is not supported",
}
# exporter-toolkit's allowed response headers, with their allowed values (None: any).
_HEADERS = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": {"nosniff"},
    "X-Frame-Options": {"deny", "sameorigin"},
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
_BCRYPT = re.compile(rb"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_CACHE_SIZE = 256


class WebConfigError(Exception):
    """The web-config file is unusable; the message is one line naming the reason."""


@dataclass(frozen=True)
class TLSSettings:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth_type: str = "NoClientCert"
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    prefer_server_cipher_suites: bool = True


@dataclass
class WebConfig:
    path: Path
    tls: TLSSettings | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (None for plain HTTP); it re-reads rotated files itself."""
        return _ReloadingTLS(self.tls).context if self.tls else None

    def middlewares(self) -> list:
        chain = []
        if self.headers:
            chain.append(_headers_middleware(self.headers))
        if self.users:
            chain.append(BasicAuth(self.users).middleware)
        return chain


def load(path: str | os.PathLike) -> WebConfig:
    """Read and check a web-config file; raises WebConfigError with a one-line reason."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise WebConfigError(f"{path}: {error.strerror or error}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise WebConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    if document is None:
        document = {}
    try:
        config = _parse(document, path)
        if config.tls:
            _build_context(config.tls)  # fail at start, not at the first scrape
    except WebConfigError as error:
        raise WebConfigError(f"{path}: {error}") from None
    return config


def _parse(document, path: Path) -> WebConfig:
    _mapping(document, "the file")
    _known_keys(document, _SECTIONS, "")
    # Relative to the file's directory as named, symlinks kept: a Secret volume's files are
    # links through ..data to a directory the kubelet replaces on every update.
    config = WebConfig(path=path.absolute())
    if document.get("tls_server_config") is not None:
        config.tls = _parse_tls(_mapping(document["tls_server_config"], "tls_server_config"),
                                path.absolute().parent)
    if document.get("http_server_config") is not None:
        http = _mapping(document["http_server_config"], "http_server_config")
        _known_keys(http, _HTTP_KEYS, "http_server_config.")
        if "http2" in http and not isinstance(http["http2"], bool):
            raise WebConfigError("http_server_config.http2 must be true or false")
        config.headers = _parse_headers(http.get("headers") or {})
    if document.get("basic_auth_users") is not None:
        config.users = _parse_users(_mapping(document["basic_auth_users"], "basic_auth_users"))
    return config


def _parse_tls(tls: dict, directory: Path) -> TLSSettings | None:
    _known_keys(tls, _TLS_KEYS, "tls_server_config.")
    for key in ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version",
                "max_version"):
        if tls.get(key) is not None and not isinstance(tls[key], str):
            raise WebConfigError(f"tls_server_config.{key} must be a string")
    cert, key = tls.get("cert_file") or "", tls.get("key_file") or ""
    ca = tls.get("client_ca_file") or ""
    auth = tls.get("client_auth_type") or "NoClientCert"
    if not cert and not key:
        if ca or tls.get("client_auth_type"):
            raise WebConfigError("tls_server_config: client certificates need cert_file and "
                                 "key_file")
        return None  # exporter-toolkit: no certificate means plain HTTP
    if not cert:
        raise WebConfigError("tls_server_config: key_file is set but cert_file is missing")
    if not key:
        raise WebConfigError("tls_server_config: cert_file is set but key_file is missing")
    if auth == "RequireAnyClientCert":
        raise WebConfigError("tls_server_config.client_auth_type RequireAnyClientCert is not "
                             "supported (Python's TLS cannot require a certificate without "
                             "verifying it); use RequireAndVerifyClientCert with client_ca_file")
    if auth not in _CLIENT_AUTH:
        raise WebConfigError(f"tls_server_config.client_auth_type: unknown value {auth!r}; "
                             f"expected one of {', '.join(_CLIENT_AUTH)}")
    if ca and _CLIENT_AUTH[auth] == ssl.CERT_NONE:
        raise WebConfigError("tls_server_config: client_ca_file is set but client_auth_type "
                             f"{auth} never verifies client certificates")
    if not ca and _CLIENT_AUTH[auth] != ssl.CERT_NONE:
        raise WebConfigError(f"tls_server_config.client_auth_type {auth} needs client_ca_file")
    versions = []
    for name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        value = tls.get(name) or default
        if value in ("TLS10", "TLS11"):
            raise WebConfigError(f"tls_server_config.{name} {value}: versions below TLS 1.2 "
                                 "are not allowed")
        if value not in _TLS_VERSIONS:
            raise WebConfigError(f"tls_server_config.{name}: unknown value {value!r}; "
                                 "expected TLS12 or TLS13")
        versions.append(value)
    if _TLS_VERSIONS[versions[0]] > _TLS_VERSIONS[versions[1]]:
        raise WebConfigError("tls_server_config: min_version is above max_version")
    prefer = tls.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise WebConfigError("tls_server_config.prefer_server_cipher_suites must be true or false")
    return TLSSettings(cert_file=directory / cert, key_file=directory / key,
                       client_ca_file=directory / ca if ca else None, client_auth_type=auth,
                       min_version=versions[0], max_version=versions[1],
                       prefer_server_cipher_suites=prefer)


def _parse_headers(headers) -> dict[str, str]:
    _mapping(headers, "http_server_config.headers")
    parsed = {}
    for name, value in headers.items():
        canonical = next((known for known in _HEADERS if known.lower() == str(name).lower()),
                         None)
        if canonical is None:
            raise WebConfigError(f"http_server_config.headers: {name!r} is not allowed; "
                                 f"allowed: {', '.join(_HEADERS)}")
        if not isinstance(value, str) or not value or "\n" in value or "\r" in value:
            raise WebConfigError(f"http_server_config.headers.{canonical} must be a one-line "
                                 "string")
        allowed = _HEADERS[canonical]
        if allowed is not None and value.lower() not in allowed:
            raise WebConfigError(f"http_server_config.headers.{canonical}: {value!r} is not "
                                 f"allowed; expected one of {', '.join(sorted(allowed))}")
        parsed[canonical] = value
    return parsed


def _parse_users(users: dict) -> dict[str, bytes]:
    parsed = {}
    for name, hashed in users.items():
        if not isinstance(name, str) or not name or ":" in name:
            raise WebConfigError(f"basic_auth_users: bad user name {name!r} (a non-empty string "
                                 "without ':')")
        encoded = hashed.encode() if isinstance(hashed, str) else b""
        if not _BCRYPT.match(encoded):
            raise WebConfigError(f"basic_auth_users.{name}: not a bcrypt hash "
                                 "(expected $2a$, $2b$ or $2y$, as htpasswd -nB makes)")
        parsed[name] = encoded
    return parsed


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise WebConfigError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _known_keys(mapping: dict, known: set[str], prefix: str) -> None:
    for key in mapping:
        qualified = f"{prefix}{key}"
        if qualified in _UNSUPPORTED:
            raise WebConfigError(f"{qualified} is not supported: {_UNSUPPORTED[qualified]}")
        if key not in known:
            raise WebConfigError(f"unknown key {qualified!r}")


# ---- TLS ----------------------------------------------------------------------------------

def _build_context(tls: TLSSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = _TLS_VERSIONS[tls.min_version]
    context.maximum_version = _TLS_VERSIONS[tls.max_version]
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as error:  # before OSError, its base class
        raise WebConfigError(f"tls_server_config: cert_file {tls.cert_file} and key_file "
                             f"{tls.key_file} are not a usable pair: "
                             f"{error.reason or error}") from None
    except OSError as error:
        missing = tls.cert_file if not tls.cert_file.exists() else tls.key_file
        raise WebConfigError(f"tls_server_config: cannot read {missing}: "
                             f"{error.strerror or error}") from None
    context.verify_mode = _CLIENT_AUTH[tls.client_auth_type]
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (OSError, ssl.SSLError) as error:
            reason = getattr(error, "strerror", None) or getattr(error, "reason", None) or error
            raise WebConfigError(f"tls_server_config: cannot use client_ca_file "
                                 f"{tls.client_ca_file}: {reason}") from None
    return context


class _ReloadingTLS:
    """A server context that swaps in freshly read certificate files on the next handshake.

    Kubernetes updates a mounted Secret in place, and cert-manager renews long before expiry,
    so watching the files' stamps at each handshake (a few stat calls; Prometheus keeps its
    connections alive) spares the operator a restart and the outage a stale certificate makes.
    """

    def __init__(self, tls: TLSSettings):
        self.tls = tls
        self._stamp = self._files_stamp()
        self.context = _build_context(tls)
        self._current = self.context
        self.context.sni_callback = self._on_client_hello

    def _files_stamp(self) -> tuple:
        stamp = []
        for each in (self.tls.cert_file, self.tls.key_file, self.tls.client_ca_file):
            try:
                info = os.stat(each) if each is not None else None
            except OSError:
                info = None
            stamp.append((info.st_mtime_ns, info.st_size, info.st_ino) if info else None)
        return tuple(stamp)

    def _on_client_hello(self, ssl_object, server_name, context) -> None:
        stamp = self._files_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._current = _build_context(self.tls)
                log.info("web config: reloaded TLS certificate files")
            except WebConfigError as error:  # e.g. caught half-way through an update
                log.warning("web config: keeping the previous TLS certificate: %s", error)
        if self._current is not context:
            ssl_object.context = self._current


# ---- basic auth and headers ---------------------------------------------------------------

class BasicAuth:
    """Checks ``Authorization: Basic`` against bcrypt hashes, remembering recent answers.

    bcrypt is slow on purpose (tens of milliseconds); a scrape every few seconds must not pay
    that each time, nor block the event loop that serves probes, so checks run in a thread and
    their answers are kept in a small LRU keyed by an HMAC of the credentials under a
    per-process random key. Unknown users are checked against a dummy hash of the same cost so
    their answers take as long as a wrong password.
    """

    def __init__(self, users: dict[str, bytes]):
        self._users = users
        cost = int(next(iter(users.values()))[4:6])
        self._dummy = bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(rounds=cost))
        self._key = os.urandom(32)
        self._answers: OrderedDict[bytes, bool] = OrderedDict()

    async def check(self, authorization: str | None) -> bool:
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        key = hmac.new(self._key, user + b"\0" + password, hashlib.sha256).digest()
        answer = self._answers.get(key)
        if answer is None:
            name = user.decode("utf-8", "replace")
            hashed = self._users.get(name)
            matched = await asyncio.to_thread(bcrypt.checkpw, password, hashed or self._dummy)
            answer = matched and hashed is not None
            self._answers[key] = answer
            if len(self._answers) > _CACHE_SIZE:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(key)
        return answer

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        resource = request.match_info.route.resource
        if resource is not None and resource.canonical in OPEN_PATHS:
            return await handler(request)
        if await self.check(request.headers.get("Authorization")):
            return await handler(request)
        return web.Response(status=401, text="401 Unauthorized\n",
                            headers={"WWW-Authenticate": f'Basic realm="{REALM}"'})


def _basic_credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    if not authorization:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def _headers_middleware(headers: dict[str, str]):
    @web.middleware
    async def add_headers(request: web.Request, handler):
        try:
            response = await handler(request)
        except web.HTTPException as error:
            error.headers.update(headers)
            raise
        response.headers.update(headers)
        return response
    return add_headers
