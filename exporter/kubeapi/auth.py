"""What a request to the Kubernetes API server authenticates with, and where it comes from.

Plain data and files: :class:`Auth` for one request, the :class:`Credentials` a configuration
holds (:class:`FileCredentials` here; the plugins' in :mod:`.plugins`), and the two errors the
configuration and the credentials raise. Both :mod:`.config` and :mod:`.plugins` build on it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class ConfigError(Exception):
    """The API configuration is missing or cannot be used (one line, for exit status 2)."""


class CredentialsError(Exception):
    """Credentials could not be obtained for a request (a token file gone, a plugin failed)."""


@dataclass(frozen=True)
class Pem:
    """PEM material a configuration names: a file, read again each time, or inline data."""

    what: str  # what it is, for messages: "certificate-authority", "client-key", ...
    path: Path | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        try:
            return self.path.read_bytes()
        except OSError as error:
            raise CredentialsError(f"cannot read the {self.what} {self.path}: "
                                   f"{error.strerror or error}") from None


@dataclass(frozen=True)
class Auth:
    """What one request authenticates with."""

    authorization: str | None = None  # the Authorization header's value
    client_cert: bytes | None = None  # PEM, with client_key
    client_key: bytes | None = None


class Credentials(Protocol):
    """A source of :class:`Auth`, asked before every request."""

    async def current(self) -> Auth:
        """The credentials to use now (may read a file or run a plugin)."""

    def rejected(self) -> None:
        """The API server answered 401 Unauthorized: obtain fresh credentials next time."""


@dataclass(frozen=True)
class FileCredentials:
    """A bearer token (inline or a file read for every request), basic auth, and a client
    certificate: what a service account or a plain kubeconfig user holds."""

    token: str | None = None
    token_file: Path | None = None
    basic: tuple[str, str] | None = None
    client_cert: Pem | None = None
    client_key: Pem | None = None

    def auth(self) -> Auth:
        authorization = None
        if self.token_file is not None:  # client-go: the file wins over an inline token
            authorization = f"Bearer {read_token(self.token_file)}"
        elif self.token:
            authorization = f"Bearer {self.token}"
        elif self.basic is not None:
            pair = base64.b64encode(":".join(self.basic).encode()).decode()
            authorization = f"Basic {pair}"
        if self.client_cert is None or self.client_key is None:
            return Auth(authorization)
        return Auth(authorization, self.client_cert.read(), self.client_key.read())

    async def current(self) -> Auth:
        return self.auth()

    def rejected(self) -> None:
        """Nothing to drop: files are read for every request anyway."""


def read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as error:
        raise CredentialsError(f"cannot read the token file {path}: "
                               f"{error.strerror or error}") from None
    if not token:
        raise CredentialsError(f"the token file {path} is empty")
    return token
