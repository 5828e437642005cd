"""A small Kubernetes API client on aiohttp: list a collection, watch it, nothing else.

The view needs two requests of the API: a (paged) list and a watch, both GETs that answer
JSON. That is a few dozen lines over aiohttp, which the exporter already runs, instead of a
general client library (the official one costs ~40 MiB of memory and ~120 MB on disk). Every
request asks the configuration's :class:`~exporter.kubeapi.config.Credentials` first, so a
rotated token or certificate is used as soon as it is on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import aiohttp

from .. import __version__
from .auth import Auth, CredentialsError
from .config import ApiConfig, ssl_context

USER_AGENT = f"podresources-exporter/{__version__}"
CONNECT_TIMEOUT_SECONDS = 10.0
LIST_TIMEOUT_SECONDS = 60.0
MAX_EVENT_BYTES = 16 << 20  # a watch event larger than this is not an API object
MAX_ERROR_BYTES = 64 << 10


class ApiError(Exception):
    """The API server answered with an error status (its ``Status`` object's reason and
    message when it sent one)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(status, reason, message)
        self.status, self.reason, self.message = status, reason, message

    def __str__(self) -> str:
        text = f"HTTP {self.status} {self.reason}".rstrip()
        return f"{text}: {self.message}" if self.message else text


class ApiClient:
    """GET requests to one API server, over one connection pool (made at the first request,
    on the running event loop)."""

    def __init__(self, config: ApiConfig):
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._tls: tuple[tuple[bytes | None, ...], ssl.SSLContext] | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """One page of a list: the decoded ``*List`` object."""
        timeout = aiohttp.ClientTimeout(total=LIST_TIMEOUT_SECONDS,
                                        sock_connect=CONNECT_TIMEOUT_SECONDS)
        async with self._get(path, params, timeout) as response:
            body = await response.read()
        document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError(f"the list of {path} is not a JSON object")
        return document

    @contextlib.asynccontextmanager
    async def watch(self, path: str, params: Mapping[str, str],
                    read_timeout: float) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Open a watch; yields its events as they arrive. ``read_timeout``: the longest
        silence before the connection is taken for dead."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECONDS,
                                        sock_read=read_timeout)
        async with self._get(path, {**params, "watch": "true"}, timeout) as response:
            events = _events(response)
            try:
                yield events
            finally:
                await events.aclose()

    @contextlib.asynccontextmanager
    async def _get(self, path: str, params: Mapping[str, str],
                   timeout: aiohttp.ClientTimeout) -> AsyncIterator[aiohttp.ClientResponse]:
        config = self.config
        session = self._session
        if session is None:
            session = self._session = aiohttp.ClientSession(
                headers=list(config.headers), trust_env=False,
                connector=aiohttp.TCPConnector(limit=8))
        credentials = config.credentials
        auth = await credentials.current()
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if auth.authorization:
            headers["Authorization"] = auth.authorization
        async with session.get(
                config.server + path, params=dict(params), headers=headers, timeout=timeout,
                ssl=self._ssl(auth) if config.https else True,
                server_hostname=config.tls_server_name if config.https else None,
                proxy=config.proxy, allow_redirects=False) as response:
            if response.status >= 300:
                if response.status == 401:
                    credentials.rejected()
                raise await _error(response)
            yield response

    def _ssl(self, auth: Auth) -> ssl.SSLContext:
        """The TLS context for ``auth``, made again when the CA or client certificate
        changes (both may be files that are rotated)."""
        ca = self.config.ca.read() if self.config.ca is not None else None
        key = (ca, auth.client_cert, auth.client_key)
        if self._tls is None or self._tls[0] != key:
            self._tls = (key, ssl_context(self.config, auth))
        return self._tls[1]


async def _error(response: aiohttp.ClientResponse) -> ApiError:
    reason, message = response.reason or "", ""
    with contextlib.suppress(Exception):  # an error page from a proxy, or nothing
        body = b""
        while len(body) < MAX_ERROR_BYTES:
            chunk = await response.content.read(MAX_ERROR_BYTES - len(body))
            if not chunk:
                break
            body += chunk
        status = json.loads(body)
        if isinstance(status, dict):
            reason = str(status.get("reason") or reason)
            message = str(status.get("message") or "")
    return ApiError(response.status, reason, message)


async def _events(response: aiohttp.ClientResponse) -> AsyncGenerator[dict[str, Any], None]:
    """The newline-delimited JSON events of a watch, as the chunks of the reply arrive
    (aiohttp's own line reader would refuse an event over 128 KiB: a big Node is larger)."""
    buffer = bytearray()
    async for chunk in response.content.iter_any():
        buffer += chunk
        if b"\n" not in chunk:
            if len(buffer) > MAX_EVENT_BYTES:
                raise ValueError(f"a watch event over {MAX_EVENT_BYTES} bytes")
            continue
        *lines, rest = bytes(buffer).split(b"\n")
        buffer = bytearray(rest)
        for line in lines:
            if line.strip():
                yield _event(line)
    if buffer.strip():
        yield _event(bytes(buffer))


def _event(line: bytes) -> dict[str, Any]:
    event = json.loads(line)
    if not isinstance(event, dict):
        raise ValueError("a watch event that is not a JSON object")
    return event


def describe_failure(error: BaseException, server: str) -> str:
    """A failed request in one line an operator can act on."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cause = error.certificate_error
        detail = getattr(cause, "verify_message", None) or getattr(cause, "reason", None) \
            or cause
        return (f"TLS: the API server's certificate at {server} cannot be verified "
                f"({detail}); check the certificate authority the configuration names")
    if isinstance(error, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake with {server} failed: {_os_reason(error.os_error)}"
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"cannot connect to {server}: {_os_reason(error.os_error)}"
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return f"no answer from {server} in time"
    if isinstance(error, ApiError | CredentialsError | ValueError):
        return str(error)[:300]
    return f"{type(error).__name__}: {error}"[:300]


def _os_reason(error: OSError) -> str:
    reason = getattr(error, "reason", None)  # ssl.SSLError
    return str(reason or error.strerror or error)
