"""The Kubernetes-API view (``--kube-api``): its state, the terminated-pod filter, its families.

One :class:`~exporter.kubeapi.reflector.Reflector` per resource (this Node, the pods bound to
it, its ResourceSlices) feeds the view from a task on the event loop, so its state changes
only there, and rendering and the refresh need no lock. Requests go through
:class:`~exporter.kubeapi.client.ApiClient` (aiohttp); the official ``kubernetes`` package is
imported only for a kubeconfig whose credentials come from an exec plugin or auth provider.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from .. import catalog
from ..exposition.health import KUBE_API_RESOURCES, Health
from ..exposition.rendering import gauge_family, render_text
from ..exposition.textformat import Family
from ..model import Allocatable, DraInventory, PodAssignment
from ..podcontext import NodeContext
from ..podspec import Rejection, without_dra_served
from .auth import ConfigError
from .client import ApiClient
from .config import load_config
from .records import PodRecord, node_record, pod_record, total_requests
from .reflector import Reflector
from .resourceslices import inventory, pci_reader, slice_record, taint_rule_record

log = logging.getLogger(__name__)

NODE, PODS, SLICES, TAINT_RULES = KUBE_API_RESOURCES
# resource.k8s.io versions serving ResourceSlices and DeviceTaintRules, newest first
SLICE_GROUP = "resource.k8s.io"
SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
JOIN_SECONDS = 2.0


class ViewError(Exception):
    """The view cannot start: there is no usable API configuration."""


PodRecords = Callable[[], Mapping[Hashable, PodRecord]]


class KubeView:
    """A node-scoped view of the Node, its pods and its ResourceSlices, and its metric families.

    Built at start-up, beside the refresh loop that uses it (it connects nothing until
    :meth:`start`); the refresh asks it for :meth:`terminated` and :meth:`render`. It
    is the reflectors' sink: :meth:`replaced`, :meth:`changed`, :meth:`reached` and
    :meth:`failed`.

    Its pods may come from elsewhere (:meth:`take_pods_from`: the kubelet's Pods API); it
    then does not watch them.
    """

    def __init__(self, node_name: str, health: Health,
                 environ: Mapping[str, str] | None = None, sysfs_root: str = "/sys"):
        try:
            config = load_config(os.environ if environ is None else environ)
        except ConfigError as error:
            raise ViewError(str(error)) from None
        self.node_name = node_name
        self.health = health
        self.version = 0  # bumped on every change of the view's state
        self.server = config.server
        self.origin = config.origin
        self._client = ApiClient(config)
        self._records: dict[str, dict[Any, Any]] = {resource: {} for resource in KUBE_API_RESOURCES}
        self._terminated: set[Hashable] = set()
        self._states = dict.fromkeys(KUBE_API_RESOURCES, "starting")
        # the reasons logged for each lost resource, while it stays lost
        self._down_reasons: dict[str, set[str]] = {}
        self._rendered = b""
        self._rendered_for: tuple[int, Allocatable | None] | None = None
        self._pci_numa = pci_reader(sysfs_root)
        self._inventory: tuple[int, DraInventory] | None = None
        self._context: tuple[int, NodeContext] | None = None
        self._dra_version = 0  # bumped on every change of the slices or the taint rules
        self._started = False
        # the pods' records, when they come from elsewhere (pods_changed says when they change)
        self._pods_from: PodRecords | None = None
        self._terminated_from: tuple[int, frozenset[Hashable]] = (-1, frozenset())
        health.track_kube_api()
        by_node = f"spec.nodeName={node_name}"
        self._pods = Reflector(PODS, [("v1", "/api/v1/pods")], by_node,
                               lambda obj: pod_record(without_dra_served(obj)), self,
                               self._client)
        self._reflectors = [
            Reflector(NODE, [("v1", "/api/v1/nodes")], f"metadata.name={node_name}",
                      node_record, self, self._client),
            self._pods,
            Reflector(SLICES, [(v, f"/apis/{SLICE_GROUP}/{v}/resourceslices")
                               for v in SLICE_VERSIONS],
                      by_node, slice_record, self, self._client, optional=True,
                      group=SLICE_GROUP, unserved="no DRA allocatable series"),
            Reflector(TAINT_RULES, [(v, f"/apis/{SLICE_GROUP}/{v}/devicetaintrules")
                                    for v in TAINT_RULE_VERSIONS],
                      "", taint_rule_record, self, self._client, optional=True,
                      group=SLICE_GROUP, unserved="only the ResourceSlices' own device taints"),
        ]

    # ---- life cycle (event loop) ---------------------------------------------------------

    def start(self) -> None:
        """Start the reflectors' tasks on the running event loop."""
        pods = "its pods, " if self._pods_from is None else ""
        log.info("Kubernetes-API view: watching node %s, %sits ResourceSlices at %s (%s)",
                 self.node_name, pods, self.server, self.origin)
        self._started = True
        for reflector in self._watched():
            reflector.start()

    def _watched(self) -> list[Reflector]:
        return [r for r in self._reflectors if r is not self._pods or self._pods_from is None]

    async def sync_once(self) -> None:
        """List every watched resource once (for a one-off ``snapshot``); a failure leaves
        that resource empty, as :meth:`failed` says."""
        await asyncio.gather(*(reflector.list_once() for reflector in self._watched()))

    # ---- where the pods come from (event loop) -------------------------------------------

    def take_pods_from(self, records: PodRecords) -> None:
        """Take the pods' records from elsewhere and stop watching pods; :meth:`pods_changed`
        is to be called when they change."""
        if self._pods_from is not None:
            return
        self._pods_from = records
        self._pods.stop()
        self._records[PODS] = {}
        self._terminated = set()
        if self.health.kube_api_up is not None:
            self.health.kube_api_up.pop(PODS, None)
        self._states[PODS] = "starting"
        self.version += 1

    def watch_pods(self) -> None:
        """Watch the pods again (their other source is gone)."""
        if self._pods_from is None:
            return
        self._pods_from = None
        if self.health.kube_api_up is not None:
            self.health.kube_api_up[PODS] = 0
        self._pods.rv = None  # list afresh
        if self._started:
            self._pods.start()
        self.version += 1

    def pods_changed(self) -> None:
        """The pods from elsewhere changed."""
        self.version += 1

    def pod_records(self) -> Mapping[Hashable, PodRecord]:
        """The node's pods: watched, or from elsewhere."""
        return self._records[PODS] if self._pods_from is None else self._pods_from()

    def stop(self) -> None:
        """Cancel the reflectors: open watches are closed at once."""
        for reflector in self._reflectors:
            reflector.stop()

    async def join(self, timeout: float = JOIN_SECONDS) -> None:
        """Wait for the stopped reflectors, then close the connections."""
        self._started = False
        try:
            await asyncio.wait_for(asyncio.gather(*(r.join() for r in self._reflectors)),
                                   timeout)
        except TimeoutError:
            log.warning("Kubernetes-API view: the watches did not stop within %.1fs", timeout)
        await self._client.close()

    # ---- what the refresh and the scrape ask (event loop) --------------------------------

    def terminated(self) -> frozenset[Hashable]:
        """(namespace, name) of the pods the API knows as Succeeded or Failed, as of now (a
        copy: the refresh filters with it in its worker thread)."""
        if self._pods_from is not None:
            if self._terminated_from[0] != self.version:
                self._terminated_from = (self.version, frozenset(
                    k for k, r in self._pods_from().items() if r.terminated))
            return self._terminated_from[1]
        return frozenset(self._terminated)

    def without_terminated(self, pods: tuple[PodAssignment, ...]) -> tuple[PodAssignment, ...]:
        """The kubelet's pods minus those the API knows as Succeeded or Failed; the same
        objects, so the ledger sees the rest unchanged."""
        terminated = self.terminated()
        if not terminated:
            return pods
        return tuple(pod for pod in pods if (pod.namespace, pod.name) not in terminated)

    def render(self, allocatable: Allocatable | None) -> bytes:
        """The view's section of /metrics, rendered once per state and allocatable view.
        ``allocatable`` is the kubelet's latest ``GetAllocatableResources`` view (None when the
        kubelet does not offer it), which decides staleness together with the Node."""
        cached = self._rendered_for
        if cached is None or cached[0] != self.version or cached[1] is not allocatable:
            self._rendered = render_text([f for f in self.families(allocatable) if f.samples])
            self._rendered_for = (self.version, allocatable)
        return self._rendered

    def dra_inventory(self) -> DraInventory:
        """The DRA devices this node's ResourceSlices publish, with locality and taints; the
        same object until the slices or the taint rules change (the accounting recounts the
        DRA devices only for a new one)."""
        cached = self._inventory
        if cached is None or cached[0] != self._dra_version:
            value = inventory(self._records[SLICES].values(), self._records[TAINT_RULES].values(),
                              self._pci_numa)
            if cached is not None and cached[1] == value:
                value = cached[1]  # a list again with the same content: nothing to recount
            self._inventory = cached = (self._dra_version, value)
        return cached[1]

    def pod_context(self) -> NodeContext | None:
        """The pods bound to this node and the Node's allocatable, as the fit answers read
        them; ``None`` until the pods are listed; the same object until the view changes.
        With pods from elsewhere (:meth:`take_pods_from`), those pods."""
        external = self._pods_from is not None
        if not external and self._states[PODS] == "starting":
            return None
        cached = self._context
        if cached is None or cached[0] != self.version:
            node = self._records[NODE].get(self.node_name)
            pods = tuple(r.context for r in self.pod_records().values() if r.context is not None)
            value = NodeContext("pods-api" if external else "kube-api", pods,
                                dict(node.resources) if node else None,
                                node.kubelet_version if node else "",
                                dict(node.capacity) if node else None)
            if cached is not None and cached[1] == value:
                value = cached[1]
            self._context = cached = (self.version, value)
        return cached[1]

    def rejections(self) -> dict[tuple[str, str], Rejection]:
        """Pods of this node the API shows rejected at admission for exclusive resources."""
        return {key: record.rejection for key, record in self._records[PODS].items()
                if record.rejection is not None}

    def families(self, allocatable: Allocatable | None) -> list[Family]:
        node = self._records[NODE].get(self.node_name)
        capacity = node.capacity if node else {}
        node_allocatable = node.allocatable if node else {}
        advertised = capacity.keys() | node_allocatable.keys()
        requested = total_requests(self.pod_records().values())
        if self._pods_from is not None:
            # Pods from the kubelet carry no status.extendedResourceClaimStatus; the
            # scheduler serves a request through DRA exactly where the node's allocatable of
            # it is 0 (dynamicresources filterExtendedResources): count only the others.
            requested = {name: amount for name, amount in requested.items()
                         if node_allocatable.get(name)}
        healthy = None if allocatable is None else {d.resource for d in allocatable.devices}
        stale = {name: int(capacity.get(name) == 0
                           or (healthy is not None and name not in healthy
                               and not requested.get(name)))
                 for name in advertised}
        return [
            gauge_family(catalog.EXTENDED_RESOURCE_CAPACITY, capacity),
            gauge_family(catalog.EXTENDED_RESOURCE_ALLOCATABLE, node_allocatable),
            gauge_family(catalog.EXTENDED_RESOURCE_REQUESTED,
                         {name: requested.get(name, 0) for name in advertised | requested.keys()}),
            gauge_family(catalog.EXTENDED_RESOURCE_STALE, stale),
        ]

    # ---- the reflectors' sink (event loop) -------------------------------------------------

    def replaced(self, resource: str, records: dict[Any, Any], detail: str) -> None:
        """A fresh list of the resource (the whole state of it)."""
        self._records[resource] = records
        if resource in (SLICES, TAINT_RULES):
            self._dra_version += 1
        if resource == PODS:
            self._terminated = {key for key, record in records.items() if record.terminated}
        self.version += 1
        self._reach(resource, detail or f"{len(records)} listed")

    def changed(self, resource: str, key: Hashable, record: Any) -> None:
        """An ADDED or MODIFIED (record) or DELETED (None) watch event."""
        records = self._records[resource]
        if record is None:
            records.pop(key, None)
        else:
            records[key] = record
        if resource in (SLICES, TAINT_RULES):
            self._dra_version += 1
        if resource == PODS:
            if record is not None and record.terminated:
                self._terminated.add(key)
            else:
                self._terminated.discard(key)
        self.version += 1

    def reached(self, resource: str) -> None:
        self._reach(resource)

    def _reach(self, resource: str, detail: str = "") -> None:
        state = self._states[resource]
        if state == "starting":
            log.info("Kubernetes API: %s synced (%s)", resource, detail)
        elif state == "failed":
            log.info("Kubernetes API: %s reachable again; watching", resource)
        self._states[resource] = "ok"
        self._down_reasons.pop(resource, None)
        kube_api_up = self.health.kube_api_up
        if kube_api_up is not None and kube_api_up[resource] != 1:
            kube_api_up[resource] = 1
            self.version += 1

    def failed(self, resource: str, reason: str, down: bool) -> None:
        self.health.kube_api_errors.labels(resource).inc()
        if down:
            if self._states[resource] != "failed":
                log.warning("Kubernetes API: %s unreachable (%s); retrying with back-off, "
                            "keeping the last values", resource, reason)
            elif reason not in self._down_reasons.get(resource, ()):
                # e.g. an API server that comes back refusing the token: the new reason is
                # the one to act on (each reason once per outage, however attempts alternate)
                log.warning("Kubernetes API: %s still unreachable, now: %s", resource, reason)
            self._down_reasons.setdefault(resource, set()).add(reason)
            self._states[resource] = "failed"
            if self.health.kube_api_up is not None:
                self.health.kube_api_up[resource] = 0
        else:
            log.debug("Kubernetes API: the watch of %s broke (%s); resuming", resource, reason)
        self.version += 1
