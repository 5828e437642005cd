"""HTTP control endpoint of a running simulator, for scripts in another process.

``GET /state`` describes the simulator (faults, pods, call counts by method and code);
``POST /faults`` with a JSON object changes fault switches (``{"rate_limit_storm": true}``);
``POST /restart`` with ``{"downtime": 2}`` restarts the simulated kubelet;
``POST /churn`` with ``{"pods": 5}`` replaces that many pods;
``POST /health`` with ``{"device": "<id>", "healthy": false}`` flips a device's health.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from .server import Simulator


def control_app(simulator: Simulator) -> web.Application:
    app = web.Application()
    background: set[asyncio.Task] = set()

    async def state(request: web.Request) -> web.Response:
        return web.json_response(simulator.describe())

    async def faults(request: web.Request) -> web.Response:
        try:
            simulator.faults.update(await request.json())
        except (ValueError, TypeError) as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.json_response(simulator.describe())

    async def restart(request: web.Request) -> web.Response:
        body = await _json(request)
        task = asyncio.create_task(simulator.restart(float(body.get("downtime", 1.0))))
        background.add(task)
        task.add_done_callback(background.discard)
        return web.json_response({"restarting": True})

    async def churn(request: web.Request) -> web.Response:
        body = await _json(request)
        gone, added = simulator.churn(int(body.get("pods", 1)))
        return web.json_response({"removed": gone, "added": added})

    async def health(request: web.Request) -> web.Response:
        body = await _json(request)
        simulator.state.mark_unhealthy(str(body["device"]), bool(body.get("healthy", False)))
        return web.json_response({"ok": True})

    app.router.add_get("/state", state)
    app.router.add_post("/faults", faults)
    app.router.add_post("/restart", restart)
    app.router.add_post("/churn", churn)
    app.router.add_post("/health", health)
    return app


async def _json(request: web.Request) -> dict:
    if not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
