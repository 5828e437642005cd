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
from collections.abc import Hashable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from .. import catalog
from ..exposition.health import KUBE_API_RESOURCES, Health
from ..exposition.rendering import gauge_family, render_text
from ..model import Allocatable, DraInventory, PodAssignment
from ..podcontext import NodeContext
from ..podspec import Rejection, without_dra_served
from .auth import ConfigError
from .client import ApiClient
from .config import load_config
from .records import node_record, pod_record, total_requests
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


class KubeView:
    """A node-scoped view of the Node, its pods and its ResourceSlices, and its metric families.

    Built at start-up, beside the refresh loop that uses it (it connects nothing until
    :meth:`start`); the refresh asks it for :meth:`without_terminated` and :meth:`render`. It
    is the reflectors' sink: :meth:`replaced`, :meth:`changed`, :meth:`reached` and
    :meth:`failed`.
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
        self._rendered = b""
        self._rendered_for: tuple[int, Allocatable | None] | None = None
        self._pci_numa = pci_reader(sysfs_root)
        self._inventory: tuple[int, DraInventory] | None = None
        self._context: tuple[int, NodeContext] | None = None
        self._dra_version = 0  # bumped on every change of the slices or the taint rules
        health.track_kube_api()
        by_node = f"spec.nodeName={node_name}"
        self._reflectors = [
            Reflector(NODE, [("v1", "/api/v1/nodes")], f"metadata.name={node_name}",
                      node_record, self, self._client),
            Reflector(PODS, [("v1", "/api/v1/pods")], by_node,
                      lambda obj: pod_record(without_dra_served(obj)), self, self._client),
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
        log.info("Kubernetes-API view: watching node %s, its pods and ResourceSlices at %s "
                 "(%s)", self.node_name, self.server, self.origin)
        for reflector in self._reflectors:
            reflector.start()

    def stop(self) -> None:
        """Cancel the reflectors: open watches are closed at once."""
        for reflector in self._reflectors:
            reflector.stop()

    async def join(self, timeout: float = JOIN_SECONDS) -> None:
        """Wait for the stopped reflectors, then close the connections."""
        try:
            await asyncio.wait_for(asyncio.gather(*(r.join() for r in self._reflectors)),
                                   timeout)
        except TimeoutError:
            log.warning("Kubernetes-API view: the watches did not stop within %.1fs", timeout)
        await self._client.close()

    # ---- what the refresh and the scrape ask (event loop) --------------------------------

    def without_terminated(self, pods: tuple[PodAssignment, ...]) -> tuple[PodAssignment, ...]:
        """The kubelet's pods minus those the API knows as Succeeded or Failed; the same
        objects, so the ledger sees the rest unchanged."""
        terminated = self._terminated
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
        them; ``None`` until the pods are listed; the same object until the view changes."""
        if self._states[PODS] == "starting":
            return None
        cached = self._context
        if cached is None or cached[0] != self.version:
            node = self._records[NODE].get(self.node_name)
            pods = tuple(r.context for r in self._records[PODS].values() if r.context is not None)
            value = NodeContext("kube-api", pods, dict(node.resources) if node else None)
            if cached is not None and cached[1] == value:
                value = cached[1]
            self._context = cached = (self.version, value)
        return cached[1]

    def rejections(self) -> dict[tuple[str, str], Rejection]:
        """Pods of this node the API shows rejected at admission for exclusive resources."""
        return {key: record.rejection for key, record in self._records[PODS].items()
                if record.rejection is not None}

    def families(self, allocatable: Allocatable | None) -> list[GaugeMetricFamily]:
        node = self._records[NODE].get(self.node_name)
        capacity = node.capacity if node else {}
        node_allocatable = node.allocatable if node else {}
        advertised = capacity.keys() | node_allocatable.keys()
        requested = total_requests(self._records[PODS].values())
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
            self._states[resource] = "failed"
            if self.health.kube_api_up is not None:
                self.health.kube_api_up[resource] = 0
        else:
            log.debug("Kubernetes API: the watch of %s broke (%s); resuming", resource, reason)
        self.version += 1
