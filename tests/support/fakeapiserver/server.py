"""A fake kube-apiserver for the Kubernetes-API view: list and watch, as the real one speaks them.

HTTP, or HTTPS with an ``ssl_context``, on 127.0.0.1 (aiohttp), serving what the exporter's
client asks for: ``/api/v1/nodes``, ``/api/v1/pods``,
``/apis/resource.k8s.io/<version>/resourceslices`` and ``.../v1/devicetaintrules`` (cluster
scoped), with field selectors, paged lists
(``limit``/``continue``) carrying ``metadata.resourceVersion``, and watches (``watch=true``)
streaming newline-delimited JSON events in chunks: a watch replays the history after its
``resourceVersion``, then follows changes until its ``timeoutSeconds``.

This module is the protocol; the objects, their versions and the open watches are the
:class:`~.store.ClusterStore` a :class:`FakeApiServer` is, who a request comes as is
:mod:`.auth`, the objects' builders are :mod:`.objects`, and a simulated node shown in the API
is :mod:`.cluster`; callers import each from where it is defined.

Every request is authenticated first (:func:`.auth.request_identity`; ``tokens=None`` admits
anonymous requests); ``identities`` records who each admitted request came as (``token:...``,
``cert:...``), ``rejected`` the path and Authorization header of each refused one (401).

Controls for tests: :meth:`FakeApiServer.put` / :meth:`delete` objects (each change bumps the
resourceVersion and reaches open watches), :meth:`bookmark`, :meth:`end_watches` (as their
timeout would), :meth:`drop_watches` (cut the connections mid-stream), :meth:`compact` (watches
from older versions get 410 Gone, as an ERROR event or, with ``gone_as_status``, as the HTTP
status), ``expire_next_continue`` (a paged list's token expires), ``served_slice_versions``
(which resource.k8s.io versions exist), ``fail_status`` (answer every request with that
status), and :meth:`stop` / :meth:`start` on the same port (an unreachable API server).

Run alone it serves a cluster-shaped node built from a simulator profile, for measurements:

    python -m tests.support.fakeapiserver.server --profile large --port 18443 \
        --kubeconfig /tmp/kubeconfig
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

from aiohttp import web

from ..kubeobjects import (
    Obj,
    status,
)
from .auth import TOKEN, request_identity
from .cluster import (
    cluster_from_profile,
)
from .store import (
    COLLECTIONS,
    SLICE_VERSIONS,
    ClusterStore,
    Terms,
    Watcher,
    api_version,
    matches,
    shown,
)

__all__ = ["FakeApiServer"]

SELECTABLE = {"metadata.name", "metadata.namespace", "spec.nodeName"}


def _selector(text: str) -> Terms:
    """``a=b,c==d`` -> [(a, b), (c, d)]; only the fields the real server selects on here."""
    terms = []
    for term in filter(None, text.split(",")):
        name, _, value = term.replace("==", "=").partition("=")
        if name not in SELECTABLE:
            raise web.HTTPBadRequest(
                text=json.dumps(status(400, "BadRequest", f"field label not supported: {name}")),
                content_type="application/json")
        terms.append((name, value))
    return terms


def _abort(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()


class FakeApiServer(ClusterStore):
    """A tiny cluster's store and an HTTP server answering list, watch and get on it."""

    def __init__(self, served_slice_versions: Iterable[str] = SLICE_VERSIONS,
                 gone_as_status: bool = False,
                 tokens: Iterable[str] | None = (TOKEN,), client_names: Iterable[str] = (),
                 ssl_context: ssl.SSLContext | None = None):
        super().__init__()
        self.served_slice_versions = set(served_slice_versions)
        self.tokens = None if tokens is None else set(tokens)
        self.client_names = set(client_names)
        self.ssl_context = ssl_context
        self.identities: list[str] = []  # who each admitted request came as
        self.rejected: list[tuple[str, str]] = []  # path and Authorization of refused ones
        self.gone_as_status = gone_as_status
        self.fail_status: int | None = None
        self.expire_next_continue = False  # answer the next continued list with 410
        self.requests: list[tuple[str, dict[str, str]]] = []  # path and query of each request
        self.port = 0
        self._runner: web.AppRunner | None = None

    # ---- server life cycle --------------------------------------------------------------

    async def start(self) -> FakeApiServer:
        """Serve on 127.0.0.1 (the same port again after :meth:`stop`)."""
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/api/v1/{collection}", self._core)
        app.router.add_get("/api/v1/namespaces/{namespace}/pods/{name}", self._pod)
        app.router.add_get("/apis/{group}/{version}/{collection}", self._resource)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True,
                           ssl_context=self.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Stop answering: open watches are cut, new connections refused."""
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: Path, user: Obj | None = None,
                         cluster: Obj | None = None) -> Path:
        """A kubeconfig pointing the exporter at this server (JSON is YAML): by default with
        the token the server accepts; ``user`` and ``cluster`` replace or add fields."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url, **(cluster or {})}}],
            "users": [{"name": "exporter", "user": {"token": TOKEN} if user is None else user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "exporter"}}],
        }))
        return path

    def watches(self, collection: str) -> list[dict[str, str]]:
        """Queries of the watch requests received for a collection, in order."""
        return [query for path, query in self.requests
                if path.endswith("/" + collection) and query.get("watch") in ("true", "1")]

    # ---- HTTP -----------------------------------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                            ) -> web.StreamResponse:
        identity = request_identity(request, self.tokens, self.client_names)
        if identity is None:
            self.rejected.append((request.path, request.headers.get("Authorization", "")))
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        self.identities.append(identity)
        return await handler(request)

    async def _core(self, request: web.Request) -> web.StreamResponse:
        collection = request.match_info["collection"]
        if collection not in COLLECTIONS or COLLECTIONS[collection].group is not None:
            return await self._unknown(request)
        return await self._serve(request, collection, None)

    async def _pod(self, request: web.Request) -> web.Response:
        """GET of one pod (what ``snapshot --why`` asks)."""
        self.requests.append((request.path, dict(request.query)))
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        obj = self.objects["pods"].get((namespace, name))
        if obj is None:
            return web.json_response(status(404, "NotFound", f'pods "{name}" not found'),
                                     status=404)
        return web.json_response(shown(obj, "pods", None))

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        version, collection = request.match_info["version"], request.match_info["collection"]
        served = COLLECTIONS.get(collection)
        if served is None or served.group != request.match_info["group"]:
            return await self._unknown(request)
        versions = self.served_slice_versions if collection == "resourceslices" \
            else set(served.versions)
        if version not in versions:
            return await self._unknown(request)
        return await self._serve(request, collection, version)

    async def _unknown(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, dict(request.query)))
        return web.json_response(status(404, "NotFound", "the server could not find the "
                                                         "requested resource"), status=404)

    async def _serve(self, request: web.Request, collection: str,
                     version: str | None) -> web.StreamResponse:
        query = request.query
        self.requests.append((request.path, dict(query)))
        if self.fail_status is not None:
            return web.json_response(status(self.fail_status, "InternalError", "injected"),
                                     status=self.fail_status)
        terms = _selector(query.get("fieldSelector", ""))
        if query.get("watch") in ("true", "1"):
            return await self._watch(request, collection, version, terms)
        return self._list(collection, version, terms, query)

    def _list(self, collection: str, version: str | None, terms: Terms,
              query: Mapping[str, str]) -> web.Response:
        items = sorted((k, o) for k, o in self.objects[collection].items()
                       if matches(o, terms))
        start, list_rv = 0, self.resource_version
        if query.get("continue"):
            token = json.loads(base64.b64decode(query["continue"]))
            start, list_rv = token["start"], token["rv"]
            if list_rv < self.compacted or self.expire_next_continue:
                self.expire_next_continue = False
                return web.json_response(status(410, "Expired", "The provided continue parameter "
                                                "is too old"), status=410)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        meta: Obj = {"resourceVersion": str(list_rv)}
        if start + limit < len(items):
            meta["continue"] = base64.b64encode(json.dumps(
                {"start": start + limit, "rv": list_rv}).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        return web.json_response({
            "kind": COLLECTIONS[collection].kind + "List",
            "apiVersion": api_version(collection, version),
            "metadata": meta, "items": [shown(o, collection, version) for _, o in page]})

    async def _watch(self, request: web.Request, collection: str, version: str | None,
                     terms: Terms) -> web.StreamResponse:
        since = request.query.get("resourceVersion", "")
        too_old = since not in ("", "0") and int(since) < self.compacted
        gone = status(410, "Expired", f"too old resource version: {since} ({self.compacted})")
        if too_old and self.gone_as_status:
            return web.json_response(gone, status=410)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if too_old:
            await response.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            await response.write_eof()
            return response
        watcher = Watcher(collection, terms, version, abort=lambda: _abort(request))
        if since in ("", "0"):  # from "any" version: the current objects first
            for obj in self.objects[collection].values():
                if matches(obj, terms):
                    watcher.queue.put_nowait(("ADDED", obj))
        else:
            for rv, kind_collection, kind, obj in self.history:
                if rv > int(since) and kind_collection == collection \
                        and matches(obj, terms):
                    watcher.queue.put_nowait((kind, obj))
        self.watchers.append(watcher)
        deadline = asyncio.get_running_loop().time() + int(request.query.get("timeoutSeconds",
                                                                             1800))
        try:
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(watcher.queue.get(), remaining)
                except TimeoutError:
                    break
                if item is None:  # ended or dropped
                    break
                kind, obj = item
                sent = obj if kind == "BOOKMARK" else shown(obj, collection, version)
                await response.write(json.dumps({"type": kind, "object": sent}).encode() + b"\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if watcher in self.watchers:
                self.watchers.remove(watcher)
        return response


async def _main() -> None:
    parser = argparse.ArgumentParser(description="Serve a simulator profile's node as a fake "
                                                 "Kubernetes API server.")
    parser.add_argument("--profile", default="large")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", type=Path, required=True,
                        help="write a kubeconfig pointing at this server here")
    args = parser.parse_args()
    server = FakeApiServer()
    server.port = args.port
    name = cluster_from_profile(server, args.profile)
    await server.start()
    server.write_kubeconfig(args.kubeconfig)
    print(f"fake API server for node {name} on {server.url}: {len(server.objects['pods'])} pods, "
          f"{len(server.objects['resourceslices'])} ResourceSlices", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
