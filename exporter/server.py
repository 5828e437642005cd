"""HTTP endpoints: /metrics, /healthz, /readyz and a landing page.

Scrapes never reach the kubelet: ``/metrics`` returns the exposition the refresh loop rendered
last, in the Prometheus text format or OpenMetrics as the ``Accept`` header asks, gzipped when
the client accepts it (compressed once per rendering). Unknown paths answer 404 whatever the
method; known paths answer 405 to anything but GET and HEAD.
"""

from __future__ import annotations

import html
import logging
import ssl

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from . import __version__
from .refresh import Refresher

log = logging.getLogger(__name__)

OPENMETRICS = "application/openmetrics-text"
REFRESHER = web.AppKey("refresher", Refresher)
_ALLOWED = ("GET", "HEAD")

_LANDING = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>podresources-exporter</title></head>
<body>
<h1>podresources-exporter {version}</h1>
<p>Per-NUMA use of the kubelet's exclusive CPUs, memory, hugepages, devices and DRA devices.</p>
<ul>
<li><a href="metrics">/metrics</a> &mdash; Prometheus metrics</li>
<li><a href="healthz">/healthz</a> &mdash; liveness</li>
<li><a href="readyz">/readyz</a> &mdash; readiness (first refresh attempted)</li>
</ul>
<p>Kubelet socket: <code>{socket}</code>; node: <code>{node}</code></p>
</body></html>
"""


def _method_guard(handler):
    async def guarded(request: web.Request) -> web.StreamResponse:
        if request.method not in _ALLOWED:
            raise web.HTTPMethodNotAllowed(request.method, _ALLOWED)
        return await handler(request)
    return guarded


async def metrics(request: web.Request) -> web.Response:
    refresher = request.app[REFRESHER]
    _, content_type = choose_encoder(request.headers.get("Accept", ""))
    openmetrics = content_type.startswith(OPENMETRICS)
    headers = {"Content-Type": content_type, "Cache-Control": "no-store"}
    compressed = "gzip" in request.headers.get("Accept-Encoding", "").lower()
    if compressed:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=refresher.body(openmetrics, compressed), headers=headers)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    if request.app[REFRESHER].attempted:
        return web.Response(text="ready\n")
    return web.Response(status=503, text="first refresh not attempted yet\n")


async def landing(request: web.Request) -> web.Response:
    refresher = request.app[REFRESHER]
    page = _LANDING.format(version=__version__,
                           socket=html.escape(refresher.client.target),
                           node=html.escape(refresher.settings.node_name or "(unset)"))
    return web.Response(text=page, content_type="text/html")


def make_app(refresher: Refresher, middlewares=()) -> web.Application:
    app = web.Application(middlewares=list(middlewares), client_max_size=64 * 1024)
    app[REFRESHER] = refresher
    for path, handler in (("/metrics", metrics), ("/healthz", healthz), ("/readyz", readyz),
                          ("/", landing)):
        app.router.add_route("*", path, _method_guard(handler))
    return app


async def start_http(app: web.Application, host: str, port: int,
                     ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the bound port (``port`` 0 picks one)."""
    # Request limits: scrapers send short requests; anything larger is answered 4xx.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0, max_line_size=4096,
                           max_field_size=8190, max_headers=64)
    await runner.setup()
    site = web.TCPSite(runner, host or None, port, ssl_context=ssl_context, backlog=128)
    await site.start()
    addresses = runner.addresses
    return runner, (addresses[0][1] if addresses else port)
