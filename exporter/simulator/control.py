"""HTTP control endpoint of a running simulator, for scripts in another process.

``GET /state`` describes the simulator (faults, device plugins, pods, call counts by method and
code); ``POST /faults`` with a JSON object changes fault switches (``{"rate_limit_storm": true}``,
``{"plugin_disconnect": "nvidia.com/gpu"}``); ``POST /restart`` with ``{"downtime": 2}`` restarts
the simulated kubelet (``"reregister_seconds"``: when its device plugins register again);
``POST /churn`` with ``{"pods": 5}`` replaces that many pods; ``POST /health`` with
``{"device": "<id>", "healthy": false}`` flips a device's health.

``POST /pods`` with a pod in profile form (``{"namespace": "demo", "name": "p", "qos":
"Guaranteed", "containers": [{"name": "c", "cpus": 2, "memory": "2Gi", "devices": {...}}]}``,
``sidecars`` and ``init_containers`` alike) admits it as the kubelet would under the admission
configuration in use (:mod:`.node.admitting`): 200 with each container's NUMA nodes, CPUs, memory
blocks and devices, or 409 with the kubelet's ``reason`` and ``message``, the pod then kept as
the failed pod the Kubernetes API would show. ``POST /pods/delete`` with ``{"namespace",
"name"}`` removes either. ``GET /config`` shows the admission configuration in the kubelet
config file's terms, ``POST /config`` changes it (``topologyManagerPolicy``,
``topologyManagerScope``, ``cpuManagerPolicyOptions``, ``topologyManagerPolicyOptions``,
``featureGates``). Bad input is answered 400 with the reason, an unknown device or pod 404.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .node.admissionconfig import check_runs, updated_config
from .node.admitting import PlacedContainer
from .node.server import Simulator
from .profile import ProfileError, parse_pod


class _BadRequest(Exception):
    pass


def control_app(simulator: Simulator) -> web.Application:
    app = web.Application(middlewares=[_errors])
    background: set[asyncio.Task[None]] = set()

    async def state(request: web.Request) -> web.Response:
        return web.json_response(simulator.describe())

    async def faults(request: web.Request) -> web.Response:
        try:
            simulator.set_faults(await _json(request))
        except ValueError as error:
            raise _BadRequest(str(error)) from None
        return web.json_response(simulator.describe())

    async def restart(request: web.Request) -> web.Response:
        body = await _json(request)
        downtime = _number(body, "downtime", 1.0)
        reregister = _number(body, "reregister_seconds", simulator.reregister_seconds)
        task = asyncio.create_task(simulator.restart(downtime, reregister))
        background.add(task)
        task.add_done_callback(background.discard)
        return web.json_response({"restarting": True, "downtime": downtime,
                                  "reregister_seconds": reregister})

    async def churn(request: web.Request) -> web.Response:
        body = await _json(request)
        pods = body.get("pods", 1)
        if isinstance(pods, bool) or not isinstance(pods, int) or pods < 0:
            raise _BadRequest(f"pods must be a non-negative whole number, got {pods!r}")
        gone, added = simulator.churn(pods)
        return web.json_response({"removed": gone, "added": added})

    async def health(request: web.Request) -> web.Response:
        body = await _json(request)
        device, healthy = body.get("device"), body.get("healthy", False)
        if not isinstance(device, str) or not device:
            raise _BadRequest("device must be a device id")
        if not isinstance(healthy, bool):
            raise _BadRequest(f"healthy must be true or false, got {healthy!r}")
        if not any(d.device_id == device for d in simulator.state.devices):
            raise web.HTTPNotFound(text=f"no device {device!r} on this node\n")
        simulator.state.mark_unhealthy(device, healthy)
        return web.json_response({"ok": True})

    async def create_pod(request: web.Request) -> web.Response:
        body = await _json(request)
        try:
            pod = parse_pod(body)
            result = simulator.state.admit(pod)
        except (ProfileError, KeyError, TypeError, ValueError) as error:
            raise _BadRequest(f"bad pod: {error}") from None
        key = f"{pod.namespace}/{pod.name}"
        config = simulator.state.admission_config
        under = {"topologyManagerPolicy": config.topology_manager_policy,
                 "topologyManagerScope": config.topology_manager_scope}
        if result.admitted:
            return web.json_response({
                "pod": key, "admitted": True, **under,
                "containers": [_placed(container) for container in result.containers]})
        return web.json_response({"pod": key, "admitted": False, "reason": result.reason,
                                  "message": result.message, **under}, status=409)

    async def get_config(request: web.Request) -> web.Response:
        return web.json_response(simulator.state.admission_config.document())

    async def set_config(request: web.Request) -> web.Response:
        body = await _json(request)
        try:
            config = updated_config(simulator.state.admission_config, body)
            check_runs(simulator.state.spec, config)
            simulator.state.admission_config = config
        except ValueError as error:
            raise _BadRequest(str(error)) from None
        return web.json_response(config.document())

    async def delete_pod(request: web.Request) -> web.Response:
        body = await _json(request)
        namespace, name = body.get("namespace"), body.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            raise _BadRequest("namespace and name must be strings")
        state_ = simulator.state
        if state_.rejected_pods.pop((namespace, name), None) is not None:
            state_.version += 1
            return web.json_response({"removed": f"{namespace}/{name}"})
        if not state_.remove(namespace, name):
            raise web.HTTPNotFound(text=f"no pod {namespace}/{name}\n")
        return web.json_response({"removed": f"{namespace}/{name}"})

    app.router.add_post("/pods", create_pod)
    app.router.add_get("/config", get_config)
    app.router.add_post("/config", set_config)
    app.router.add_post("/pods/delete", delete_pod)
    app.router.add_get("/state", state)
    app.router.add_post("/faults", faults)
    app.router.add_post("/restart", restart)
    app.router.add_post("/churn", churn)
    app.router.add_post("/health", health)
    return app


@web.middleware
async def _errors(request: web.Request,
                  handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                  ) -> web.StreamResponse:
    try:
        return await handler(request)
    except _BadRequest as error:
        return web.json_response({"error": str(error)}, status=400)


async def _json(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; an empty body is ``{}``, anything else but an object a 400."""
    if not request.can_read_body:
        return {}
    text = await request.text()
    if not text.strip():
        return {}
    try:
        body = json.loads(text)
    except ValueError as error:
        raise _BadRequest(f"body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise _BadRequest("body must be a JSON object")
    return body


def _placed(container: PlacedContainer) -> dict[str, Any]:
    return {"name": container.name, "numa": sorted(container.numa), "cpus": list(container.cpus),
            "memory": [{"type": b.memory_type, "size": b.size, "numa": list(b.numa_ids or ())}
                       for b in container.memory],
            "devices": [{"resource": d.resource, "id": d.device_ids[0],
                         "numa": list(d.numa_ids or ())} for d in container.devices]}


def _number(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise _BadRequest(f"{key} must be a non-negative number of seconds, got {value!r}")
    return float(value)
