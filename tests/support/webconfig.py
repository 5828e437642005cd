"""A running exporter behind a web config, and what the tests of --web-config-file share: a
password and its (cheap) bcrypt hash, the config file, Basic headers, a client's TLS context."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path

import aiohttp
import bcrypt

from exporter.cli import serve
from exporter.web import webconfig

from .harness import Node
from .pki import CA

PASSWORD = "correct horse battery staple"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


def write_config(directory: Path, text: str) -> Path:
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


def auth(user: str, password: str) -> dict:
    """The Authorization header of HTTP Basic auth."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


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
