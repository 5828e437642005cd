"""A fake kube-apiserver for the Kubernetes-API view: list and watch, as the real one speaks them.

HTTP, or HTTPS with an ``ssl_context``, on 127.0.0.1 (aiohttp), serving what the exporter's
client asks for: ``/api/v1/nodes``, ``/api/v1/pods``,
``/apis/resource.k8s.io/<version>/resourceslices`` and ``.../v1/devicetaintrules`` (cluster
scoped), with field selectors, paged lists
(``limit``/``continue``) carrying ``metadata.resourceVersion``, and watches (``watch=true``)
streaming newline-delimited JSON events in chunks: a watch replays the history after its
``resourceVersion``, then follows changes until its ``timeoutSeconds``.

Every request is authenticated first, as the real server does: a bearer token must be one of
``tokens`` (an unknown token is refused even beside a good certificate); without one, a client
certificate verified by the server's TLS context whose common name is in ``client_names``;
anything else gets 401 Unauthorized (``tokens=None`` admits anonymous requests).
``identities`` records who each admitted request came as (``token:...``, ``cert:...``),
``rejected`` the path and Authorization header of each refused one.

Controls for tests: :meth:`FakeApiServer.put` / :meth:`delete` objects (each change bumps the
resourceVersion and reaches open watches), :meth:`bookmark`, :meth:`end_watches` (as their
timeout would), :meth:`drop_watches` (cut the connections mid-stream), :meth:`compact` (watches
from older versions get 410 Gone, as an ERROR event or, with ``gone_as_status``, as the HTTP
status), ``expire_next_continue`` (a paged list's token expires), ``served_slice_versions``
(which resource.k8s.io versions exist), ``fail_status`` (answer every request with that
status), and :meth:`stop` / :meth:`start` on the same port (an unreachable API server).

:class:`SimulatedCluster` keeps such a server showing a running simulator's node and pods,
admitted and rejected, and the ResourceSlices its DRA drivers publish (the ``demo`` command does
this). The object kinds served are listed in
``COLLECTIONS``, one entry per kind.

Run alone it serves a cluster-shaped node built from a simulator profile, for measurements:

    python -m exporter.simulator.apiserver --profile large --port 18443 --kubeconfig /tmp/kubeconfig
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import json
import ssl
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from ..topology import hugepage_resource_name
from .admitting import node_allocatable
from .podobjects import pod_object
from .profile import ContainerSpec, PodSpec
from .slices import resource_slices
from .state import NodeState

SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")


@dataclass(frozen=True)
class Collection:
    """An object kind the server lists and watches: in the core API (``/api/v1/<name>``) when
    ``group`` is None, else at ``/apis/<group>/<version>/<name>`` for each of ``versions``."""

    kind: str
    group: str | None = None
    versions: tuple[str, ...] = ("v1",)


# The object kinds served, by collection name. Another kind is one more entry here; its objects
# are then put, deleted, listed and watched like the others (builders below, under "objects").
COLLECTIONS: dict[str, Collection] = {
    "nodes": Collection("Node"),
    "pods": Collection("Pod"),
    "resourceslices": Collection("ResourceSlice", "resource.k8s.io", SLICE_VERSIONS),
    "devicetaintrules": Collection("DeviceTaintRule", "resource.k8s.io", ("v1",)),
}
SELECTABLE = {"metadata.name", "metadata.namespace", "spec.nodeName"}
SLICES_PER_POOL = 4
TOKEN = "fake-token"

Obj = dict[str, Any]  # a Kubernetes object as JSON
Terms = list[tuple[str, str]]


def status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = (value or {}).get(part)
    return "" if value is None else str(value)


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


class _Watcher:
    def __init__(self, collection: str, terms: Terms, version: str | None,
                 response: web.StreamResponse, request: web.Request):
        self.collection = collection
        self.terms = terms
        self.version = version  # resource.k8s.io version the watcher sees objects as
        self.response = response
        self.request = request
        self.queue: asyncio.Queue[tuple[str, Obj] | None] = asyncio.Queue()


class FakeApiServer:
    """The state of a tiny cluster and an HTTP server answering list and watch on it."""

    def __init__(self, served_slice_versions: Iterable[str] = SLICE_VERSIONS,
                 gone_as_status: bool = False,
                 tokens: Iterable[str] | None = (TOKEN,), client_names: Iterable[str] = (),
                 ssl_context: ssl.SSLContext | None = None):
        self.served_slice_versions = set(served_slice_versions)
        self.tokens = None if tokens is None else set(tokens)
        self.client_names = set(client_names)
        self.ssl_context = ssl_context
        self.identities: list[str] = []  # who each admitted request came as
        self.rejected: list[tuple[str, str]] = []  # path and Authorization of refused ones
        self.gone_as_status = gone_as_status
        self.fail_status: int | None = None
        self.expire_next_continue = False  # answer the next continued list with 410
        self.resource_version = 1
        self.compacted = 0  # watches from a resourceVersion below this get 410 Gone
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {c: {} for c in COLLECTIONS}
        self.history: list[tuple[int, str, str, Obj]] = []  # rv, collection, type, object
        self.watchers: list[_Watcher] = []
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

    # ---- controls -------------------------------------------------------------------------

    def put(self, collection: str, obj: Obj) -> Obj:
        """Create or replace an object (ADDED or MODIFIED to watchers); returns the stored copy."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        old = self.objects[collection].get(key)
        meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", "2026-11-21T12:00:00Z")
        self.resource_version += 1
        meta["resourceVersion"] = str(self.resource_version)
        self.objects[collection][key] = obj
        self._event(collection, "MODIFIED" if old else "ADDED", obj)
        return obj

    def delete(self, collection: str, name: str, namespace: str = "") -> None:
        obj = copy.deepcopy(self.objects[collection].pop((namespace, name)))
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        self._event(collection, "DELETED", obj)

    def bookmark(self, collection: str) -> None:
        """A BOOKMARK to the collection's watchers: 'nothing for you up to this version'."""
        self.resource_version += 1
        mark = {"kind": "", "apiVersion": "",
                "metadata": {"resourceVersion": str(self.resource_version)}}
        for watcher in self.watchers:
            if watcher.collection == collection:
                watcher.queue.put_nowait(("BOOKMARK", mark))

    def compact(self) -> None:
        """Forget the history so far: a watch resuming from an older version gets 410 Gone."""
        self.compacted = self.resource_version
        self.history.clear()

    def end_watches(self, collection: str | None = None) -> int:
        """End open watches cleanly, as their timeoutSeconds would; returns how many."""
        return self._close_watches(collection, abort=False)

    def drop_watches(self, collection: str | None = None) -> int:
        """Cut open watch connections mid-reply (a network failure); returns how many."""
        return self._close_watches(collection, abort=True)

    def _close_watches(self, collection: str | None, abort: bool) -> int:
        closed = 0
        for watcher in list(self.watchers):
            if collection in (None, watcher.collection):
                if abort and watcher.request.transport is not None:
                    watcher.request.transport.abort()
                watcher.queue.put_nowait(None)
                self.watchers.remove(watcher)
                closed += 1
        return closed

    def watches(self, collection: str) -> list[dict[str, str]]:
        """Queries of the watch requests received for a collection, in order."""
        return [query for path, query in self.requests
                if path.endswith("/" + collection) and query.get("watch") in ("true", "1")]

    def _event(self, collection: str, kind: str, obj: Obj) -> None:
        self.history.append((self.resource_version, collection, kind, obj))
        for watcher in self.watchers:
            if watcher.collection == collection and self._matches(obj, watcher.terms):
                watcher.queue.put_nowait((kind, obj))

    # ---- HTTP -----------------------------------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                            ) -> web.StreamResponse:
        identity = self._identity(request)
        if identity is None:
            self.rejected.append((request.path, request.headers.get("Authorization", "")))
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        self.identities.append(identity)
        return await handler(request)

    def _identity(self, request: web.Request) -> str | None:
        authorization = request.headers.get("Authorization", "")
        if authorization:
            scheme, _, token = authorization.partition(" ")
            known = scheme == "Bearer" and (self.tokens is None or token in self.tokens)
            return f"token:{token}" if known else None
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        names = [value for rdn in (peer or {}).get("subject", ()) for key, value in rdn
                 if key == "commonName"]
        if names and names[0] in self.client_names:
            return f"cert:{names[0]}"
        return "anonymous" if self.tokens is None else None

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
        return web.json_response(self._shown(obj, "pods", None))

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
                       if self._matches(o, terms))
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
            "apiVersion": self._api_version(collection, version),
            "metadata": meta, "items": [self._shown(o, collection, version) for _, o in page]})

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
        watcher = _Watcher(collection, terms, version, response, request)
        if since in ("", "0"):  # from "any" version: the current objects first
            for obj in self.objects[collection].values():
                if self._matches(obj, terms):
                    watcher.queue.put_nowait(("ADDED", obj))
        else:
            for rv, kind_collection, kind, obj in self.history:
                if rv > int(since) and kind_collection == collection \
                        and self._matches(obj, terms):
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
                shown = obj if kind == "BOOKMARK" else self._shown(obj, collection, version)
                await response.write(json.dumps({"type": kind, "object": shown}).encode() + b"\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if watcher in self.watchers:
                self.watchers.remove(watcher)
        return response

    @staticmethod
    def _matches(obj: Obj, terms: Terms) -> bool:
        return all(_field(obj, name) == value for name, value in terms)

    @staticmethod
    def _api_version(collection: str, version: str | None) -> str:
        group = COLLECTIONS[collection].group
        return "v1" if group is None else f"{group}/{version}"

    def _shown(self, obj: Obj, collection: str, version: str | None) -> Obj:
        """The object as the requested API version spells it."""
        shown = {"kind": COLLECTIONS[collection].kind,
                 "apiVersion": self._api_version(collection, version), **obj}
        if collection == "resourceslices" and version == "v1beta1":
            # v1beta1 wraps each device's attributes and capacity in "basic"
            spec = dict(shown.get("spec") or {})
            spec["devices"] = [{"name": d["name"], "basic": {k: v for k, v in d.items()
                                                             if k != "name"}}
                               for d in spec.get("devices") or ()]
            shown["spec"] = spec
        return shown


def tls_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """The server side of TLS; with ``client_ca``, client certificates are verified against
    it when presented (a client without one is then judged by its token)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


# ---- objects ------------------------------------------------------------------------------

def node(name: str, capacity: dict[str, str], allocatable: dict[str, str] | None = None) -> Obj:
    base = {"cpu": "64", "memory": "263856064Ki", "pods": "110",
            "ephemeral-storage": "936484380Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"capacity": {**base, **capacity},
                       "allocatable": {**base, **(capacity if allocatable is None
                                                  else allocatable)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def container(name: str, requests: dict[str, str] | None = None,
              restart_policy: str | None = None) -> Obj:
    result: Obj = {"name": name, "image": f"registry.example.com/{name}:1.0",
              "resources": {"requests": dict(requests or {}), "limits": dict(requests or {})}}
    if restart_policy:
        result["restartPolicy"] = restart_policy
    return result


def pod(namespace: str, name: str, node_name: str, containers: Sequence[Obj],
        init_containers: Sequence[Obj] = (), phase: str = "Running",
        overhead: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"nodeName": node_name, "containers": list(containers), "restartPolicy": "Always"}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    return {"metadata": {"namespace": namespace, "name": name}, "spec": spec,
            "status": {"phase": phase}}


def resource_slice(name: str, node_name: str, driver: str, pool: str, devices: list[str],
                   generation: int = 1, slice_count: int = 1) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": pool, "generation": generation,
                              "resourceSliceCount": slice_count},
                     "devices": [{"name": d, "attributes": {"index": {"int": i}}}
                                 for i, d in enumerate(devices)]}}


# ---- a simulated kubelet's node and pods ----------------------------------------------------

def device_taint_rule(name: str, effect: str, driver: str = "", pool: str = "",
                      device: str = "", key: str = "example.com/taint") -> Obj:
    """A DeviceTaintRule putting a taint on the devices its selector names (KEP-5055)."""
    selector = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", device)) if v}
    return {"metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": key, "effect": effect}}}


def simulated_node(state: NodeState) -> Obj:
    """The simulated node as the API shows it: CPUs, memory and hugepages of every NUMA node
    and each device-plugin resource's devices in capacity; in allocatable what the kubelet's
    resource-fit predicate counts against (less the reserved CPUs and memory, ``maxPods``, the
    healthy devices)."""
    spec = state.spec
    capacity = {"cpu": str(len(spec.all_cpus)),
                "memory": f"{sum(n.memory_bytes for n in spec.numa_nodes) // 1024}Ki",
                "pods": str(spec.max_pods)}
    for numa in spec.numa_nodes:
        for size, pages in numa.hugepages.items():
            name = hugepage_resource_name(size)
            capacity[name] = str(int(capacity.get(name, "0")) + size * pages)
    for device in state.devices:
        capacity[device.resource] = str(int(capacity.get(device.resource, "0")) + 1)
    allocatable = node_allocatable(spec, state.devices, state.unregistered)
    shown = {name: (f"{amount}m" if name == "cpu" else str(amount))
             for name, amount in allocatable.items()}
    return node(spec.name, capacity, shown)


class SimulatedCluster:
    """Keeps a :class:`FakeApiServer` showing what a simulated kubelet has: its node, one
    ResourceSlice per DRA pool, every pod it knows (admitted ones in their phase, ``Running``
    by default) and the pods it rejected at admission (phase ``Failed``, ``status.reason`` the
    kubelet's reason), as the kubelet reports them to the API server. Each pod keeps its uid
    while it exists."""

    def __init__(self, server: FakeApiServer, state: NodeState, pods: bool = True):
        self.server = server
        self.state = state
        self.pods = pods  # False: the node and its ResourceSlices only (the kubelet's Pods
        # API serves the pods)
        self._shown: dict[tuple[str, str], str] = {}  # pod key -> the JSON last put
        self._uids: dict[tuple[str, str], str] = {}
        self._version = -1

    def sync(self) -> bool:
        """Bring the server up to date; False when nothing changed since the last call."""
        if self.state.version == self._version:
            return False
        self._version = self.state.version
        if not self.server.objects["nodes"]:
            self.server.put("nodes", simulated_node(self.state))
            for obj in resource_slices(self.state.spec):  # what its DRA drivers publish
                self.server.put("resourceslices", obj)
        wanted: dict[tuple[str, str], Obj] = {}
        for key, sim in self.state.pods.items() if self.pods else ():
            uid = self._uids.setdefault(key, sim.uid or str(uuid.uuid4()))
            wanted[key] = pod_object(sim.spec, self.state.spec.name, sim.spec.phase, uid=uid)
        for key, obj in self.state.rejected_pods.items() if self.pods else ():
            wanted[key] = copy.deepcopy(obj)
        for key in set(self._shown) - set(wanted):
            del self._shown[key]
            self._uids.pop(key, None)
            self.server.delete("pods", key[1], key[0])
        for key, obj in wanted.items():
            text = json.dumps(obj, sort_keys=True)
            if self._shown.get(key) != text:
                self._shown[key] = text
                self.server.put("pods", obj)
        return True

    async def follow(self, interval: float = 0.5) -> None:
        """Sync every ``interval`` seconds until cancelled."""
        while True:
            self.sync()
            await asyncio.sleep(interval)


def cluster_from_profile(server: FakeApiServer, profile: str) -> str:
    """Put a simulator profile's node in the API as a cluster would show it: its pods with
    their requests (sidecars as restartable init containers), managed fields and statuses; the
    device resources plus a patched ``example.com/dongle: 4`` and two dead Akri entries at 0;
    each DRA pool in a few ResourceSlices. Returns the node name."""
    from .profile import load_profile

    spec = load_profile(profile)
    state = NodeState(spec)
    extended: dict[str, str] = {}
    for device in spec.devices:
        extended[device.resource] = str(int(extended.get(device.resource, "0")) + 1)
    extended.update({"example.com/dongle": "4", "akri.sh/zeroconf-a1b2c3": "0",
                     "akri.sh/zeroconf-d4e5f6": "0"})
    server.put("nodes", node(spec.name, extended))
    for index, sim in enumerate(state.pods.values()):
        server.put("pods", _realistic_pod(sim.spec, spec.name, index))
    for index, pool in enumerate(spec.dra_pools):
        for part in range(SLICES_PER_POOL):  # as drivers split big pools
            server.put("resourceslices", resource_slice(
                f"{spec.name}-{index}-{part}", spec.name, pool.driver, pool.pool,
                pool.devices[part::SLICES_PER_POOL], slice_count=SLICES_PER_POOL))
    return spec.name


def _requests_of(sim_container: ContainerSpec, dongles: int) -> dict[str, str]:
    requests = {"cpu": str(sim_container.cpus or 1), "memory": "512Mi"}
    for memory_type, size in sim_container.memory.items():
        requests[memory_type] = str(size)
    for resource, count in sim_container.devices.items():
        requests[resource] = str(count)
    if dongles:
        requests["example.com/dongle"] = str(dongles)
    return requests


def _realistic_pod(spec: PodSpec, node_name: str, index: int) -> Obj:
    """A pod about the size the API server returns (labels, owner, managed fields, status)."""
    containers = [container(c.name, _requests_of(c, 1 if index < 3 and not n else 0))
                  for n, c in enumerate(spec.containers)]
    inits = [container(c.name, _requests_of(c, 0), "Always") for c in spec.sidecars]
    inits += [container(c.name, _requests_of(c, 0)) for c in spec.init_containers]
    obj = pod(spec.namespace, spec.name, node_name, containers, inits, spec.phase)
    for entry in obj["spec"]["containers"] + obj["spec"].get("initContainers", []):
        entry.update({"env": [{"name": f"VAR_{i}", "value": "x" * 24} for i in range(6)],
                      "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                        "mountPath": "/var/run/secrets/kubernetes.io/"
                                                     "serviceaccount"}],
                      "imagePullPolicy": "IfNotPresent",
                      "terminationMessagePath": "/dev/termination-log"})
    obj["metadata"].update({
        "labels": {"app.kubernetes.io/name": spec.name.rsplit("-", 1)[0],
                   "pod-template-hash": "7d9f8c6b5"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True,
                             "name": spec.name.rsplit("-", 1)[0] + "-7d9f8c6b5",
                             "uid": str(uuid.uuid4())}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                           "apiVersion": "v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {
                               "f:containers": {f"k:{{\"name\":\"{c['name']}\"}}": {
                                   "f:image": {}, "f:resources": {}} for c in containers}}}}]})
    obj["spec"].update({"serviceAccountName": "default", "schedulerName": "default-scheduler",
                        "tolerations": [{"key": "node.kubernetes.io/not-ready",
                                         "operator": "Exists", "effect": "NoExecute",
                                         "tolerationSeconds": 300}],
                        "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}}]}}]})
    obj["status"].update({
        "qosClass": "Guaranteed" if spec.guaranteed else "Burstable",
        "podIP": f"10.244.{index // 250}.{index % 250 + 2}", "hostIP": "192.0.2.10",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime":
                        "2026-11-21T12:00:00Z"} for t in ("Initialized", "Ready",
                                                           "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                               "image": c["image"], "imageID": "sha256:" + "ab" * 32,
                               "containerID": "containerd://" + "cd" * 32,
                               "state": {"running": {"startedAt": "2026-11-21T12:00:05Z"}}}
                              for c in containers]})
    return obj


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
