"""HTTP endpoints: /metrics, /healthz, /readyz, /numa (the node map) and a landing page.

Scrapes never reach the kubelet: ``/metrics`` returns the exposition the refresh loop rendered
last, in the Prometheus text format or OpenMetrics and gzipped or not as the request negotiates
(``exporter.web.negotiation``; every variant is finished in advance,
``exporter.exposition.bodies``).
Unknown paths answer 404 whatever the method; known paths answer 405 to anything but GET and
HEAD. Connections are accepted,
capped and timed out by ``exporter.web.listener``.
"""

from __future__ import annotations

import asyncio
import html
import logging
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from .. import __version__
from ..exposition.bodies import Body
from .listener import Limits, Listener
from .negotiation import choose_coding, choose_format

log = logging.getLogger(__name__)



class MetricsSource(Protocol):
    """What the endpoints serve (the refresh loop): finished bodies, readiness, and what the
    landing page names."""

    def metrics_body(self, openmetrics: bool, compressed: bool) -> Body: ...

    @property
    def ready(self) -> bool: ...

    def landing_info(self) -> tuple[str, str]:
        """(kubelet socket, node name)"""
        ...


class PageSource(Protocol):
    """What ``/numa`` serves (:class:`~exporter.nodemap.pagecache.PageCache`)."""

    async def page(self, compressed: bool = False) -> bytes | None:
        """The node map page of the last successful refresh (gzipped or not); None before
        one."""
        ...


SOURCE: web.AppKey[MetricsSource] = web.AppKey("source")
NUMA_PAGE: web.AppKey[PageSource | None] = web.AppKey("numa_page")
_ALLOWED = ("GET", "HEAD")
# /metrics bodies reach megabytes on big nodes: written in slices, each waiting for the peer to
# take the previous ones, so a slow reader holds a slice rather than a copy of the body.
_SLICE = 64 * 1024

_LANDING = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>podresources-exporter</title></head>
<body>
<h1>podresources-exporter {version}</h1>
<p>Per-NUMA use of the kubelet's exclusive CPUs, memory, hugepages, devices and DRA devices.</p>
<ul>
<li><a href="metrics">/metrics</a> &mdash; Prometheus metrics</li>
<li><a href="healthz">/healthz</a> &mdash; liveness</li>
<li><a href="readyz">/readyz</a> &mdash; readiness (first refresh attempted)</li>
{numa}</ul>
<p>Kubelet socket: <code>{socket}</code>; node: <code>{node}</code></p>
</body></html>
"""

DEFAULT_LIMITS = Limits()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _method_guard(handler: Handler) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        if request.method not in _ALLOWED:
            raise web.HTTPMethodNotAllowed(request.method, _ALLOWED)
        response: web.StreamResponse = await handler(request)
        return response
    return guarded


async def metrics(request: web.Request) -> web.StreamResponse:
    headers = {"Cache-Control": "no-store", "Vary": "Accept, Accept-Encoding"}
    coding = choose_coding(request.headers.get("Accept-Encoding"))
    if coding is None:
        return web.Response(status=406, headers=headers,
                            text="406 Not Acceptable: this endpoint offers the gzip and identity "
                                 "content codings\n")
    chosen = choose_format(request.headers.get("Accept"))
    compressed = coding == "gzip"
    # finished by the refresh: choosing it costs a lookup, whatever the node's size
    body = request.app[SOURCE].metrics_body(chosen.openmetrics, compressed)
    headers["Content-Type"] = chosen.content_type
    if compressed:
        headers["Content-Encoding"] = "gzip"
    if body.length <= _SLICE:
        return web.Response(body=bytes(body), headers=headers)
    response = web.StreamResponse(headers=headers)
    response.content_length = body.length
    await response.prepare(request)
    if request.method != "HEAD":
        try:
            for piece in body.slices(_SLICE):
                await response.write(piece)
        except ConnectionError:
            pass  # the peer left, or was dropped for not reading: nothing left to answer
    return response


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    if request.app[SOURCE].ready:
        return web.Response(text="ready\n")
    return web.Response(status=503, text="first refresh not attempted yet\n")


async def landing(request: web.Request) -> web.Response:
    socket, node = request.app[SOURCE].landing_info()
    numa = ('<li><a href="numa">/numa</a> &mdash; the node map: NUMA nodes, cores, memory and '
            "devices, who holds what</li>\n") if request.app[NUMA_PAGE] is not None else ""
    page = _LANDING.format(version=__version__, socket=html.escape(socket),
                           node=html.escape(node or "(unset)"), numa=numa)
    return web.Response(text=page, content_type="text/html")


async def numa(request: web.Request) -> web.Response:
    """The node map of the last refresh (drawn by the page source, never from the kubelet)."""
    from ..nodemap.page import CONTENT_SECURITY_POLICY  # only for those who look at it

    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": CONTENT_SECURITY_POLICY, "Vary": "Accept-Encoding"}
    coding = choose_coding(request.headers.get("Accept-Encoding"))
    if coding is None:
        return web.Response(status=406, headers=headers,
                            text="406 Not Acceptable: this page offers the gzip and identity "
                                 "content codings\n")
    source = request.app[NUMA_PAGE]
    page = await source.page(coding == "gzip") if source is not None else None
    if page is None:
        return web.Response(status=503, headers={**headers, "Retry-After": "5"},
                            text="503 Service Unavailable: no node map to show: no snapshot of "
                                 "the kubelet yet (the first refresh has not succeeded), or it "
                                 "could not be drawn (the log says why)\n")
    if coding == "gzip":
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=page, headers=headers, content_type="text/html",
                        charset="utf-8")


def _refuse_unknown_expectations(
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    """Answer an ``Expect`` other than 100-continue with 417, before aiohttp's routing does.

    aiohttp's own answer echoes the header's value and fails with a 500 when the value is not
    valid UTF-8; nothing here reads a request body, so nothing else is worth expecting.
    """
    async def guarded(request: web.BaseRequest) -> web.StreamResponse:
        expect = request.headers.get("Expect")
        if expect is not None and expect.strip().lower() != "100-continue":
            return web.Response(status=417, text="417 Expectation Failed: only 100-continue "
                                                 "is understood\n")
        response: web.StreamResponse = await handler(request)
        return response
    return guarded


def make_app(source: MetricsSource, middlewares: Iterable[Any] = (),
             numa_page: PageSource | None = None) -> web.Application:
    """The endpoints; ``/numa`` only with a ``numa_page`` to serve (``--no-numa-page``: none,
    404)."""
    app = web.Application(middlewares=list(middlewares), client_max_size=64 * 1024)
    app[SOURCE] = source
    app[NUMA_PAGE] = numa_page
    routes: list[tuple[str, Handler]] = [("/metrics", metrics), ("/healthz", healthz),
                                         ("/readyz", readyz), ("/", landing)]
    if numa_page is not None:
        routes.append(("/numa", numa))
    for path, handler in routes:
        app.router.add_route("*", path, _method_guard(handler))
    return app


class _PeerFaultsAtDebug(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, with what a peer can cause moved to debug and to one line.

    aiohttp logs every malformed request (bad request line, oversized header, TLS bytes on the
    plain port, ...) and every vanished peer as an ERROR with a traceback: anyone who can reach
    the port could fill the log. Exceptions raised by the exporter's own handlers stay errors.
    """

    def exception(self, msg: Any, *args: Any, exc_info: Any = True,
                  **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(error, (HttpProcessingError, ConnectionError, asyncio.TimeoutError)):
            if self.logger.isEnabledFor(logging.DEBUG):
                self.logger.debug("%s: %s", msg % args if args else msg,
                                  " ".join(str(error).split()) or type(error).__name__)
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)


class HTTPServer:
    """The running server: the listener in front, aiohttp's runner behind it."""

    def __init__(self, runner: web.AppRunner, listener: Listener, port: int):
        self.runner, self.listener, self.port = runner, listener, port

    @property
    def addresses(self) -> list[Any]:
        return [sock.getsockname() for sock in self.listener.sockets
                if sock.fileno() != -1]

    async def cleanup(self) -> None:
        """Stop accepting, finish the requests in flight (briefly), close everything."""
        self.listener.close()
        try:
            await self.runner.cleanup()
        finally:
            self.listener.abort_all()


def _track_requests(listener: Listener) -> Any:
    @web.middleware
    async def tracked(request: web.Request, handler: Handler) -> web.StreamResponse:
        done = listener.request_started(request.protocol)
        if done is not None:
            task = asyncio.current_task()
            if task is not None:  # aiohttp runs each request in a task of its own
                task.add_done_callback(lambda _: done())
            else:
                done()
        return await handler(request)
    return tracked


async def start_http(app: web.Application, host: str, port: int,
                     ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext | None]
                     | None = None,
                     limits: Limits = DEFAULT_LIMITS) -> tuple[HTTPServer, int]:
    """Start serving; returns the server and the bound port (``port`` 0 picks one).

    ``ssl_context`` may be a function returning the context for each new connection (None:
    plain HTTP), so that rotated certificates and a reloaded web config apply without a restart.
    """
    # Request limits: scrapers send short requests; anything larger is answered 4xx.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0, max_line_size=4096,
                           max_field_size=8190, max_headers=64,
                           keepalive_timeout=limits.idle_timeout,
                           logger=_PeerFaultsAtDebug(logging.getLogger("aiohttp.server"), {}))
    source = ssl_context if callable(ssl_context) or ssl_context is None \
        else (lambda: ssl_context)
    listener = Listener(lambda: runner.server(), source, limits)  # type: ignore[misc]
    app.middlewares.insert(0, _track_requests(listener))
    await runner.setup()
    assert runner.server is not None
    runner.server.request_handler = _refuse_unknown_expectations(runner.server.request_handler)
    try:
        bound = await listener.bind(host, port)
    except BaseException:
        await runner.cleanup()
        raise
    return HTTPServer(runner, listener, bound), bound
