"""Where the Kubernetes API server is and how to authenticate to it: in-cluster or a kubeconfig.

The two sources client-go knows. Inside a pod: ``KUBERNETES_SERVICE_HOST`` and
``KUBERNETES_SERVICE_PORT``, and the service account's token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount``. Outside: the kubeconfig files that
``$KUBECONFIG`` names, merged as kubectl merges them, at their current context. Files are
named, not copied: a token, CA or client certificate file is read again for each request, so a
rotated service-account token (bound tokens are renewed every hour) is used from the next
request on. Exec credential plugins and auth providers need the optional ``kubernetes``
package (:mod:`.plugins`); everything else is plain files, base64 data and :mod:`ssl`.

Anything that keeps a configuration from being used is a :class:`ConfigError`, raised while
loading (the exporter exits with status 2), not at the first request.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from .auth import (
    Auth,
    ConfigError,
    Credentials,
    CredentialsError,
    FileCredentials,
    Pem,
)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER = "in-cluster service account"
EXTRA = "podresources-exporter[kube]"


@dataclass(frozen=True)
class ApiConfig:
    """How to reach the API server."""

    server: str  # scheme://host:port[/path prefix], no trailing slash
    origin: str  # where this came from, for the log: IN_CLUSTER or "kubeconfig PATH, ..."
    credentials: Credentials
    ca: Pem | None = None  # None: the system's trust store
    insecure: bool = False  # insecure-skip-tls-verify
    tls_server_name: str | None = None
    proxy: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # impersonation (the kubeconfig's "as")

    @property
    def https(self) -> bool:
        return self.server.startswith("https://")


def load_config(environ: Mapping[str, str]) -> ApiConfig:
    """The kubeconfig when ``$KUBECONFIG`` is set, else the in-cluster configuration."""
    if environ.get("KUBECONFIG"):
        return from_kubeconfig(environ["KUBECONFIG"])
    return in_cluster(environ)


# ---- in-cluster ---------------------------------------------------------------------------

def in_cluster(environ: Mapping[str, str], directory: Path | None = None) -> ApiConfig:
    """The pod's service account, as client-go's ``rest.InClusterConfig`` reads it."""
    directory = directory or SERVICE_ACCOUNT_DIR
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("no Kubernetes API configuration: not running in a pod "
                          "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set) "
                          "and $KUBECONFIG is not set")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service address
    token_file = directory / "token"
    config = ApiConfig(server=f"https://{host}:{port}", origin=IN_CLUSTER,
                       credentials=FileCredentials(token_file=token_file),
                       ca=Pem("service account CA", path=directory / "ca.crt"))
    check(config)
    return config


# ---- kubeconfig ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    """A named cluster, user or context, and the directory its relative paths start from."""

    body: dict[str, Any]
    base: Path


def from_kubeconfig(paths: str) -> ApiConfig:
    """The current context of the kubeconfig files in ``paths`` (``$KUBECONFIG``: a list
    separated by colons). Merged as kubectl merges them: the first file to name a cluster,
    user or context, or to set ``current-context``, wins; files that do not exist are
    skipped."""
    sections: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    loaded = []
    for name in filter(None, paths.split(os.pathsep)):
        path = Path(name).expanduser()
        document = _read_kubeconfig(path)
        if document is None:
            continue
        loaded.append(str(path))
        current = current or str(document.get("current-context") or "")
        for section, key in (("clusters", "cluster"), ("users", "user"),
                             ("contexts", "context")):
            for item in document.get(section) or ():
                if isinstance(item, dict) and item.get("name") \
                        and str(item["name"]) not in sections[section]:
                    body = item.get(key) or {}
                    if not isinstance(body, dict):
                        raise ConfigError(f"kubeconfig {path}: {section} entry {item['name']!r} "
                                          f"has no {key} mapping")
                    sections[section][str(item["name"])] = _Entry(body, path.parent)
    if not loaded:
        raise ConfigError(f"no Kubernetes API configuration: no file named by $KUBECONFIG "
                          f"exists ({paths})")
    where = f"kubeconfig {', '.join(loaded)}"
    if not current:
        raise ConfigError(f"{where}: no current-context is set")
    context = sections["contexts"].get(current)
    if context is None:
        raise ConfigError(f"{where}: the current context {current!r} is not defined")
    cluster_name = str(context.body.get("cluster") or "")
    cluster = sections["clusters"].get(cluster_name)
    if cluster is None:
        raise ConfigError(f"{where}: context {current!r}: cluster {cluster_name!r} is not "
                          "defined")
    user_name = str(context.body.get("user") or "")
    user = sections["users"].get(user_name) if user_name else _Entry({}, cluster.base)
    if user is None:
        raise ConfigError(f"{where}: context {current!r}: user {user_name!r} is not defined")
    try:
        config = _config(cluster, user, user_name, f"{where}, context {current}")
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    check(config)
    return config


def _read_kubeconfig(path: Path) -> dict[str, Any] | None:
    import yaml  # only for a kubeconfig: in a pod, the view reads no YAML

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"kubeconfig {path}: cannot read it: "
                          f"{getattr(error, 'strerror', None) or error}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or type(error).__name__
        raise ConfigError(f"kubeconfig {path}: not valid YAML ({problem})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (a mapping is expected)")
    return document


def _config(cluster: _Entry, user: _Entry, user_name: str, origin: str) -> ApiConfig:
    body = cluster.body
    server = str(body.get("server") or "").rstrip("/")
    parts = urlsplit(server)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"the cluster's server {server!r} is not an http(s) URL")
    insecure = body.get("insecure-skip-tls-verify") is True
    ca = _pem(body, "certificate-authority", cluster.base)
    if insecure and ca is not None:
        raise ConfigError("specifying a root certificates file with the insecure flag is not "
                          "allowed (certificate-authority and insecure-skip-tls-verify)")
    proxy = str(body.get("proxy-url") or "") or None
    if proxy is not None and urlsplit(proxy).scheme not in ("http", "https"):
        raise ConfigError(f"proxy-url {proxy!r}: only http:// and https:// proxies are "
                          "supported")
    return ApiConfig(server=server, origin=origin,
                     credentials=_credentials(user, user_name, body, server),
                     ca=ca, insecure=insecure,
                     tls_server_name=str(body.get("tls-server-name") or "") or None,
                     proxy=proxy, headers=tuple(_impersonation(user.body)))


def _credentials(user: _Entry, user_name: str, cluster: dict[str, Any],
                 server: str) -> Credentials:
    body = user.body
    if "exec" in body or "auth-provider" in body:
        what = (f"an exec credential plugin ({(body['exec'] or {}).get('command')})"
                if "exec" in body else
                f"the auth provider {(body['auth-provider'] or {}).get('name')!r}")
        try:
            from . import plugins
        except ImportError as error:
            raise ConfigError(f"user {user_name!r} gets its credentials from {what}, which needs "
                              f"the kubernetes package ({error}); install {EXTRA}") from None
        if "exec" in body:
            return plugins.ExecCredentials(body["exec"], user.base, {**cluster, "server": server})
        return plugins.AuthProviderCredentials(body, user.base, server)
    cert = _pem(body, "client-certificate", user.base)
    key = _pem(body, "client-key", user.base)
    if (cert is None) != (key is None):
        raise ConfigError(f"user {user_name!r}: client-certificate and client-key go together")
    token_file = str(body.get("tokenFile") or "")
    basic = None
    if body.get("username") or body.get("password"):
        basic = (str(body.get("username") or ""), str(body.get("password") or ""))
    return FileCredentials(token=str(body.get("token") or "") or None,
                           token_file=user.base / token_file if token_file else None,
                           basic=basic, client_cert=cert, client_key=key)


def _pem(body: dict[str, Any], key: str, base: Path) -> Pem | None:
    """``key-data`` (base64, preferred) or ``key`` (a path, relative to the kubeconfig)."""
    data = body.get(f"{key}-data")
    if data:
        try:
            return Pem(key, data=base64.b64decode(str(data), validate=True))
        except (binascii.Error, ValueError):
            raise ConfigError(f"{key}-data is not valid base64") from None
    if body.get(key):
        return Pem(key, path=base / str(body[key]))
    return None


def _impersonation(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The ``as`` fields of a kubeconfig user, as client-go sends them."""
    if body.get("as"):
        yield "Impersonate-User", str(body["as"])
    if body.get("as-uid"):
        yield "Impersonate-Uid", str(body["as-uid"])
    for group in body.get("as-groups") or ():
        yield "Impersonate-Group", str(group)
    for key, values in (body.get("as-user-extra") or {}).items():
        for value in values or ():
            yield f"Impersonate-Extra-{quote(str(key), safe='')}", str(value)


# ---- TLS ------------------------------------------------------------------------------------

def check(config: ApiConfig) -> None:
    """Read the files a configuration names and build its TLS context once, so a missing file
    or bad PEM stops the exporter at start (credentials from plugins come later)."""
    try:
        auth = config.credentials.auth() if isinstance(config.credentials,
                                                       FileCredentials) else Auth()
        if config.https:
            ssl_context(config, auth)
    except CredentialsError as error:
        raise ConfigError(f"{config.origin}: {error}") from None


def ssl_context(config: ApiConfig, auth: Auth) -> ssl.SSLContext:
    """The TLS client context: only the configured CA is trusted when one is given (as in
    client-go), the system's store otherwise; no verification with insecure-skip-tls-verify."""
    if config.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        pem = config.ca.read()
        try:
            context.load_verify_locations(cadata=pem.decode("latin-1"))
        except (ssl.SSLError, ValueError) as error:
            raise CredentialsError(f"the {config.ca.what} holds no usable certificate "
                                   f"({_ssl_reason(error)})") from None
    else:
        context = ssl.create_default_context()
    if auth.client_cert is not None and auth.client_key is not None:
        try:
            with _pem_file(auth.client_cert + b"\n" + auth.client_key) as path:
                context.load_cert_chain(path)
        except ssl.SSLError as error:
            raise CredentialsError(f"the client certificate and key cannot be used "
                                   f"({_ssl_reason(error)})") from None
    return context


@contextlib.contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """``data`` as a file name for :meth:`ssl.SSLContext.load_cert_chain`, which reads only
    files: an anonymous memory file, never on disk (the root filesystem is read-only anyway)."""
    try:
        fd = os.memfd_create("kube-client-cert", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # not Linux: a private temporary file
        fd, name = tempfile.mkstemp(prefix="kube-client-cert-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            yield name
        finally:
            os.unlink(name)
        return
    try:
        with os.fdopen(fd, "wb", closefd=False) as file:
            file.write(data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _ssl_reason(error: Exception) -> str:
    return str(getattr(error, "reason", None) or error)
