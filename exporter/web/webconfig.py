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

Basic auth guards ``/metrics``, ``/numa``, ``/`` and unknown paths; ``/healthz`` and
``/readyz`` stay open so kubelet probes (which cannot send credentials) work. TLS applies to
every path. The file is checked at start (anything this implementation cannot honour exactly
is refused with the reason, never silently ignored) and watched afterwards: when it, or a
certificate file it names, changes, the next request or connection uses the new version; a
broken new version is logged once and the previous one kept.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from ..files import FileStamp
from .basicauth import REALM, BasicAuth

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz"})

_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
# TLS 1.2 suites: AEAD ciphers with forward secrecy only (no CBC, no static RSA, no DHE);
# TLS 1.3 has nothing else.
_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"
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
    """One version of the web-config file, as parsed and checked."""

    path: Path
    tls: TLSSettings | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    _live: LiveWebConfig | None = field(default=None, repr=False, compare=False)

    def live(self) -> LiveWebConfig:
        """The server's view of the file: this version until the file changes."""
        if self._live is None:
            self._live = LiveWebConfig(self)
        return self._live

    def ssl_context(self) -> Callable[[], ssl.SSLContext | None]:
        """For ``start_http``: a function giving each new connection its TLS context (or None
        for plain HTTP), as the file says at that moment."""
        return self.live().tls_context

    def middlewares(self) -> list[Any]:
        """For ``make_app``: basic auth and the configured response headers, kept current."""
        return [self.live().middleware]

    def summary(self) -> str:
        return (f"{'HTTPS' if self.tls else 'plain HTTP'}, basic auth "
                + (f"for {len(self.users)} users" if self.users else "off"))


class _DuplicateKey(yaml.YAMLError):  # type: ignore[misc]  # yaml has no stubs here
    pass


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, refusing a key given twice (PyYAML keeps the last silently)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: Any) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "found an unhashable key", key_node.start_mark) from None
        if duplicate:
            raise _DuplicateKey(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
        seen.add(key)
    loader.flatten_mapping(node)
    return dict(loader.construct_mapping(node, deep=True))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _mapping_without_duplicates)


def load(path: str | os.PathLike[str]) -> WebConfig:
    """Read and check a web-config file; raises WebConfigError with a one-line reason."""
    path = Path(path)
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    except OSError as error:
        raise WebConfigError(f"{path}: {error.strerror or error}") from None
    except _DuplicateKey as error:
        raise WebConfigError(f"{path}: {error}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise WebConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise WebConfigError(f"{path}: not valid YAML: nested too deeply") from None
    if document is None:
        document = {}
    try:
        config = _parse(document, path)
        if config.tls:
            _build_context(config.tls)  # fail at start, not at the first scrape
    except WebConfigError as error:
        raise WebConfigError(f"{path}: {error}") from None
    return config


def _parse(document: Any, path: Path) -> WebConfig:
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
    if config.users and config.tls is None and "tls_server_config" in document:
        # exporter-toolkit would serve plain HTTP here: passwords in clear text, unasked.
        raise WebConfigError("tls_server_config has no cert_file and key_file, so basic auth "
                             "would send passwords over plain HTTP; set both, or remove "
                             "tls_server_config to serve plain HTTP on purpose")
    return config


def _parse_tls(tls: dict[str, Any], directory: Path) -> TLSSettings | None:
    _known_keys(tls, _TLS_KEYS, "tls_server_config.")
    for key in ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version",
                "max_version"):
        if tls.get(key) is not None and not isinstance(tls[key], str):
            raise WebConfigError(f"tls_server_config.{key} must be a string")
        if isinstance(tls.get(key), str) and "\x00" in tls[key]:
            raise WebConfigError(f"tls_server_config.{key} contains a NUL character")
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


def _parse_headers(headers: Any) -> dict[str, str]:
    _mapping(headers, "http_server_config.headers")
    parsed = {}
    for name, value in headers.items():
        canonical = next((known for known in _HEADERS if known.lower() == str(name).lower()),
                         None)
        if canonical is None:
            raise WebConfigError(f"http_server_config.headers: {name!r} is not allowed; "
                                 f"allowed: {', '.join(_HEADERS)}")
        if not isinstance(value, str) or not value or not value.isascii() \
                or any((ord(char) < 0x20 and char != "\t") or char == "\x7f" for char in value):
            raise WebConfigError(f"http_server_config.headers.{canonical} must be one line of "
                                 "printable ASCII")
        allowed = _HEADERS[canonical]
        if allowed is not None and value.lower() not in allowed:
            raise WebConfigError(f"http_server_config.headers.{canonical}: {value!r} is not "
                                 f"allowed; expected one of {', '.join(sorted(allowed))}")
        parsed[canonical] = value
    return parsed


def _parse_users(users: dict[str, Any]) -> dict[str, bytes]:
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


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WebConfigError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _known_keys(mapping: dict[str, Any], known: set[str], prefix: str) -> None:
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
    context.set_ciphers(_CIPHERS)
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


class _TLSFiles:
    """The TLS context, rebuilt when the certificate, key or CA file changes.

    Kubernetes updates a mounted Secret in place and cert-manager renews long before expiry, so
    the files' stamps are compared whenever a connection starts (a few stat calls); a rotation
    needs no restart. A half-written update is kept out, with one warning, until it is whole.
    """

    def __init__(self, tls: TLSSettings):
        self.tls = tls
        self._stamp = FileStamp(tls.cert_file, tls.key_file, tls.client_ca_file)
        self._context = _build_context(tls)

    def context(self) -> ssl.SSLContext:
        if self._stamp.changed():
            try:
                self._context = _build_context(self.tls)
                log.info("web config: reloaded TLS certificate files")
            except WebConfigError as error:
                log.warning("web config: keeping the previous TLS certificate: %s", error)
        return self._context


# ---- the file as it is now ----------------------------------------------------------------

def _in_clear(config: WebConfig) -> bool:
    return bool(config.users) and config.tls is None


class LiveWebConfig:
    """The web config the server applies: the file's latest good version.

    Revoking a password or rotating a certificate must not wait for a restart. exporter-toolkit
    re-reads its file on every request; here one stat per request or new connection tells
    whether the file changed, and only then is it read again. A version that fails the checks
    ``load`` makes at start is logged once and the previous version stays in force.
    """

    def __init__(self, config: WebConfig):
        self.path = config.path
        self._stamp = FileStamp(self.path)
        self.config = config
        self.auth: BasicAuth | None = None
        self.tls: _TLSFiles | None = None
        self._install(config)

    def _install(self, config: WebConfig) -> None:
        if config.tls is None:
            self.tls = None
        elif self.tls is None or self.tls.tls != config.tls:
            self.tls = _TLSFiles(config.tls)
        self.auth = BasicAuth(config.users) if config.users else None
        if _in_clear(config) and (config is self.config or not _in_clear(self.config)):
            log.warning("web config %s: basic auth over plain HTTP: passwords cross the "
                        "network unencrypted", self.path)
        self.config = config

    def refresh(self) -> None:
        if not self._stamp.changed():
            return
        try:
            config = load(self.path)
            self._install(config)
        except WebConfigError as error:
            log.warning("web config: keeping the previous settings: %s", error)
            return
        log.info("web config %s reloaded: %s", self.path, config.summary())

    def tls_context(self) -> ssl.SSLContext | None:
        self.refresh()
        return self.tls.context() if self.tls is not None else None

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                         ) -> web.StreamResponse:
        self.refresh()
        headers, auth = self.config.headers, self.auth
        response: web.StreamResponse | None = None
        resource = request.match_info.route.resource
        if auth is not None and (resource is None or resource.canonical not in OPEN_PATHS):
            verdict = await auth.check(request.headers.get("Authorization"),
                                       request.remote or "")
            if verdict is None:
                response = web.Response(status=429, text="429 Too Many Requests: too many "
                                        "password checks at once; retry shortly\n",
                                        headers={"Retry-After": "1"})
            elif not verdict:
                response = web.Response(status=401, text="401 Unauthorized\n",
                                        headers={"WWW-Authenticate": f'Basic realm="{REALM}"'})
        if response is None:
            try:
                response = await handler(request)
            except web.HTTPException as error:
                error.headers.update(headers)
                raise
        response.headers.update(headers)
        return response
