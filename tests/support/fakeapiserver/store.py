"""What the fake API server holds: the objects by kind, their resourceVersions, the event history
a watch replays, and the open watches each change reaches.

Kept apart from the HTTP side (:mod:`.server`) because it is the cluster's state, not its
protocol: tests and the simulator's mirror (:mod:`.cluster`) change it directly, and the
server only reads it to list, watch and get. ``COLLECTIONS`` lists the object kinds, one entry
per kind; :func:`shown` spells an object as the API version asked for does.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..kubeobjects import Obj

SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")


@dataclass(frozen=True)
class Collection:
    """An object kind the server lists and watches: in the core API (``/api/v1/<name>``) when
    ``group`` is None, else at ``/apis/<group>/<version>/<name>`` for each of ``versions``."""

    kind: str
    group: str | None = None
    versions: tuple[str, ...] = ("v1",)


# The object kinds served, by collection name. Another kind is one more entry here; its objects
# are then put, deleted, listed and watched like the others (builders in .objects).
COLLECTIONS: dict[str, Collection] = {
    "nodes": Collection("Node"),
    "pods": Collection("Pod"),
    "resourceslices": Collection("ResourceSlice", "resource.k8s.io", SLICE_VERSIONS),
    "devicetaintrules": Collection("DeviceTaintRule", "resource.k8s.io", ("v1",)),
}

Terms = list[tuple[str, str]]  # a field selector: (field path, value) pairs, all must hold


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = (value or {}).get(part)
    return "" if value is None else str(value)


def matches(obj: Obj, terms: Terms) -> bool:
    return all(_field(obj, name) == value for name, value in terms)


def api_version(collection: str, version: str | None) -> str:
    group = COLLECTIONS[collection].group
    return "v1" if group is None else f"{group}/{version}"


def shown(obj: Obj, collection: str, version: str | None) -> Obj:
    """The object as the requested API version spells it."""
    result = {"kind": COLLECTIONS[collection].kind,
              "apiVersion": api_version(collection, version), **obj}
    if collection == "resourceslices" and version == "v1beta1":
        # v1beta1 wraps each device's attributes and capacity in "basic"
        spec = dict(result.get("spec") or {})
        spec["devices"] = [{"name": d["name"], "basic": {k: v for k, v in d.items()
                                                         if k != "name"}}
                           for d in spec.get("devices") or ()]
        result["spec"] = spec
    return result


class Watcher:
    """An open watch: what it selects and the events queued for it (None ends it); ``abort``
    cuts its connection."""

    def __init__(self, collection: str, terms: Terms, version: str | None,
                 abort: Callable[[], None]):
        self.collection = collection
        self.terms = terms
        self.version = version  # resource.k8s.io version the watcher sees objects as
        self.abort = abort
        self.queue: asyncio.Queue[tuple[str, Obj] | None] = asyncio.Queue()


class ClusterStore:
    """The objects of a tiny cluster, versioned, with their history and open watches."""

    def __init__(self) -> None:
        self.resource_version = 1
        self.compacted = 0  # watches from a resourceVersion below this get 410 Gone
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {c: {} for c in COLLECTIONS}
        self.history: list[tuple[int, str, str, Obj]] = []  # rv, collection, type, object
        self.watchers: list[Watcher] = []

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
                if abort:
                    watcher.abort()
                watcher.queue.put_nowait(None)
                self.watchers.remove(watcher)
                closed += 1
        return closed

    def _event(self, collection: str, kind: str, obj: Obj) -> None:
        self.history.append((self.resource_version, collection, kind, obj))
        for watcher in self.watchers:
            if watcher.collection == collection and matches(obj, watcher.terms):
                watcher.queue.put_nowait((kind, obj))
