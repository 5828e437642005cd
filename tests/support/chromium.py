"""Debian's chromium, headless, driven over the DevTools protocol from Python (aiohttp).

No browser automation package and no browser download: the tests and the node map's
screenshot use the ``chromium`` that ``tests/tools/chromium.sh`` installs from Debian, started
with a fresh profile directory, and talk to it over its DevTools websocket. Enough of the
protocol for the tests: open a page, send headers, wait for the load event, evaluate script,
collect console errors and uncaught exceptions, take a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--hide-scrollbars", "--remote-debugging-port=0")
START_SECONDS = 30.0


class BrowserError(Exception):
    pass


class Browser:
    """One chromium process with a profile of its own, closed (and removed) on exit."""

    def __init__(self, executable: str):
        self.executable = executable
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-"))
        self.process: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, list[dict[str, Any]]] = {}  # by session
        self._event_waiters: list[tuple[str, str, asyncio.Future[dict[str, Any]]]] = []
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        self.process = await asyncio.create_subprocess_exec(
            self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_SECONDS
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if self.process.returncode is not None or time.monotonic() > deadline:
                await self.__aexit__()
                raise BrowserError(f"{self.executable} did not start")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self._http = aiohttp.ClientSession()
        self._socket = await self._http.ws_connect(f"ws://127.0.0.1:{port}{path}",
                                                   max_msg_size=256 << 20)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send("Browser.close"), 5)
            await self._socket.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
        if self.process is not None and self.process.returncode is None:
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _read(self) -> None:
        assert self._socket is not None
        async for message in self._socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(BrowserError(str(data["error"])))
                    else:
                        future.set_result(data.get("result", {}))
                continue
            session = data.get("sessionId", "")
            self._events.setdefault(session, []).append(data)
            for waiter in list(self._event_waiters):
                if waiter[0] == session and waiter[1] == data.get("method"):
                    self._event_waiters.remove(waiter)
                    if not waiter[2].done():
                        waiter[2].set_result(data.get("params", {}))

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   session: str = "") -> dict[str, Any]:
        assert self._socket is not None
        message: dict[str, Any] = {"id": next(self._ids), "method": method,
                                   "params": params or {}}
        if session:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message["id"]] = future
        await self._socket.send_str(json.dumps(message))
        return await future

    def expect(self, session: str, method: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next ``method`` event of ``session`` (ask before acting)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._event_waiters.append((session, method, future))
        return future

    def events(self, session: str) -> list[dict[str, Any]]:
        return self._events.get(session, [])

    async def page(self, width: int = 1400, height: int = 1000) -> Page:
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send("Target.attachToTarget",
                                   {"targetId": target["targetId"], "flatten": True})
        page = Page(self, attached["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            await page.send(f"{domain}.enable")
        await page.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1,
                         "mobile": False})
        return page


class Page:
    """One tab."""

    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.browser.send(method, params, self.session)

    async def headers(self, headers: dict[str, str]) -> None:
        await self.send("Network.setExtraHTTPHeaders", {"headers": headers})

    async def goto(self, url: str, timeout: float = 60.0) -> None:
        loaded = self.browser.expect(self.session, "Page.loadEventFired")
        result = await self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        await asyncio.wait_for(loaded, timeout)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression,
                                                      "returnByValue": True,
                                                      "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions, and errors the browser logged (a refused
        script or style, a failed load) since the page was opened."""
        found = []
        for event in self.browser.events(self.session):
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                 "assert"):
                found.append(" ".join(str(a.get("value", a.get("description")))
                                      for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(str(params["entry"].get("text")))
        return found

    async def screenshot(self, path: Path, width: int) -> None:
        """The whole page, ``width`` pixels wide, as PNG."""
        height = await self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": int(height), "deviceScaleFactor": 1,
                         "mobile": False})
        shot = await self.send("Page.captureScreenshot", {"format": "png",
                                                          "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(shot["data"]))
