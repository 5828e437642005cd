"""Credentials from kubeconfig users that need the official ``kubernetes`` package.

Exec credential plugins (``aws eks get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``, ...)
and auth providers (``oidc``) are run by the package's own code: the optional extra
``podresources-exporter[kube]``. Importing this module imports that package, so it is
imported only for such a kubeconfig. The plugin runs in a daemon thread (it starts a process
or talks to an identity provider, and one that hangs must not hold up the exporter's exit), at
most one run at a time; its credentials are kept until they expire or the API server rejects
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader

from .auth import Auth, ConfigError, CredentialsError

EXPIRY_MARGIN_SECONDS = 60.0  # obtain new credentials this long before the old ones expire

Result = TypeVar("Result")


async def in_daemon_thread(function: Callable[[], Result]) -> Result:
    """``function()`` in a daemon thread of its own: a plugin that hangs must not hold up the
    exporter's exit, as a thread of the default executor would (the interpreter joins those)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Result] = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        def settle() -> None:
            if not future.done():  # else cancelled meanwhile: the exporter is stopping
                setter(value)
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(settle)

    def run() -> None:
        try:
            result = function()
        except Exception as error:
            deliver(future.set_exception, error)
        else:
            deliver(future.set_result, result)

    threading.Thread(target=run, name="kube-api-credentials", daemon=True).start()
    return await future


class ExecCredentials:
    """An exec plugin's ``ExecCredential`` status: a token, or a client certificate and key."""

    def __init__(self, exec_config: dict[str, Any], base: Path, cluster: dict[str, Any]):
        self.command = str((exec_config or {}).get("command") or "")
        node = ConfigNode("exec", exec_config or {})
        try:
            try:
                self._provider = ExecProvider(node, str(base), ConfigNode("cluster", cluster))
            except TypeError:  # older clients cannot hand the cluster on (provideClusterInfo)
                self._provider = ExecProvider(node, str(base))
        except ConfigException as error:
            raise ConfigError(str(error)) from None
        self._auth: Auth | None = None
        self._expires: float | None = None
        self._lock = asyncio.Lock()

    async def current(self) -> Auth:
        async with self._lock:
            auth = self._auth
            if auth is None or (self._expires is not None
                                and time.time() >= self._expires - EXPIRY_MARGIN_SECONDS):
                fresh, self._expires = await in_daemon_thread(self._run)
                self._auth = fresh
                return fresh
            return auth

    def rejected(self) -> None:
        self._auth = None

    def _run(self) -> tuple[Auth, float | None]:
        try:
            status = self._provider.run()
        except ConfigException as error:
            raise CredentialsError(f"exec plugin {self.command}: {error}") from None
        except OSError as error:
            raise CredentialsError(f"exec plugin {self.command}: "
                                   f"{error.strerror or error}") from None
        if not isinstance(status, dict):
            raise CredentialsError(f"exec plugin {self.command}: no status in its output")
        expires = None
        if status.get("expirationTimestamp"):
            try:
                expires = datetime.datetime.fromisoformat(
                    str(status["expirationTimestamp"])).timestamp()
            except ValueError:
                raise CredentialsError(f"exec plugin {self.command}: bad expirationTimestamp "
                                       f"{status['expirationTimestamp']!r}") from None
        if status.get("token"):
            return Auth(f"Bearer {status['token']}"), expires
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            return Auth(None, str(status["clientCertificateData"]).encode(),
                        str(status["clientKeyData"]).encode()), expires
        raise CredentialsError(f"exec plugin {self.command}: its output has neither a token "
                               "nor clientCertificateData and clientKeyData")


class AuthProviderCredentials:
    """An ``auth-provider`` user (``oidc``, and ``gcp`` with google-auth), through the
    package's kubeconfig loader, which refreshes an expired token itself."""

    def __init__(self, user: dict[str, Any], base: Path, server: str):
        self.name = str((user.get("auth-provider") or {}).get("name") or "")
        document = {
            "current-context": "view",
            "contexts": [{"name": "view", "context": {"cluster": "view", "user": "view"}}],
            "clusters": [{"name": "view", "cluster": {"server": server}}],
            "users": [{"name": "view", "user": user}]}
        try:
            self._loader = KubeConfigLoader(config_dict=document, config_base_path=str(base))
        except ConfigException as error:
            raise ConfigError(str(error)) from None
        self._configuration = Configuration()
        self._loaded = False
        self._lock = asyncio.Lock()

    async def current(self) -> Auth:
        async with self._lock:
            return await in_daemon_thread(self._token)

    def rejected(self) -> None:
        self._loaded = False

    def _token(self) -> Auth:
        configuration = self._configuration
        try:
            if not self._loaded:
                self._loader.load_and_set(configuration)
                self._loaded = True
            elif configuration.refresh_api_key_hook is not None:
                configuration.refresh_api_key_hook(configuration)  # renews an expired token
        except Exception as error:  # the provider's own errors: network, JWT, google-auth
            self._loaded = False
            raise CredentialsError(f"auth provider {self.name}: {error}") from None
        token = configuration.api_key.get("BearerToken")
        if not token:
            raise CredentialsError(f"auth provider {self.name} gave no token")
        return Auth(str(token))
