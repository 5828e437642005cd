"""The Kubernetes-API view (``--kube-api``): its state, the terminated-pod filter, its families.

One :class:`~exporter.kubeapi.reflector.Reflector` per resource (this Node, the pods bound to
it, its ResourceSlices) feeds the view from a worker thread; the view hands every change over to
the event loop with ``call_soon_threadsafe``, so its state changes only on the loop thread and
rendering and the refresh need no lock. The ``kubernetes`` package is imported when a view is
built, never otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Hashable
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from .. import catalog
from ..health import KUBE_API_RESOURCES, Health
from ..model import Allocatable, PodAssignment
from ..rendering import gauge_family, render_text
from .records import dra_allocatable, node_record, pod_record, slice_record, total_requests
from .reflector import Reflector, SinkClosed, with_field_selector

log = logging.getLogger(__name__)

NODE, PODS, SLICES = KUBE_API_RESOURCES
# resource.k8s.io versions serving ResourceSlices, newest first, with their client classes
SLICE_GROUP = "resource.k8s.io"
SLICE_VERSIONS = (("v1", "ResourceV1Api"), ("v1beta2", "ResourceV1beta2Api"),
                  ("v1beta1", "ResourceV1beta1Api"))
JOIN_SECONDS = 2.0


class ViewError(Exception):
    """The view cannot start: the client is missing or there is no API configuration."""


class KubeView:
    """A node-scoped view of the Node, its pods and its ResourceSlices, and its metric families.

    Built at start-up, beside the refresh loop that uses it (it connects nothing until
    :meth:`start`); the refresh asks it for
    :meth:`without_terminated` and :meth:`render`. It is the reflectors' sink: their calls
    (:meth:`replaced`, :meth:`changed`, :meth:`reached`, :meth:`failed`) come from worker
    threads and take effect on the loop thread.
    """

    def __init__(self, node_name: str, health: Health):
        try:
            from kubernetes import client, config
            from kubernetes.client.exceptions import ApiException
        except ImportError as error:
            raise ViewError(f"cannot import the kubernetes package ({error}); install "
                            "podresources-exporter[kube]") from None
        configuration = client.Configuration()
        try:
            if os.environ.get("KUBECONFIG"):
                config.load_kube_config(config_file=os.environ["KUBECONFIG"],
                                        client_configuration=configuration, persist_config=False)
            else:
                config.load_incluster_config(client_configuration=configuration)
        except (config.ConfigException, OSError, ValueError, TypeError) as error:
            raise ViewError(f"no Kubernetes API configuration: {error}") from None
        # The workers retry with back-off; urllib3's own retries would log each attempt.
        configuration.retries = False
        self.node_name = node_name
        self.health = health
        self.version = 0  # bumped on every change of the view's state
        self.server = configuration.host
        self._api = client.ApiClient(configuration)
        self._records: dict[str, dict[Any, Any]] = {resource: {} for resource in KUBE_API_RESOURCES}
        self._terminated: set[tuple[str, str]] = set()
        self._states = dict.fromkeys(KUBE_API_RESOURCES, "starting")
        self._rendered = b""
        self._rendered_for: tuple[int, Allocatable | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        health.track_kube_api()
        core = client.CoreV1Api(self._api)
        slice_listers = []
        for version, class_name in SLICE_VERSIONS:
            api_class = getattr(client, class_name, None)  # older clients lack newer versions
            if api_class is not None:
                slice_listers.append((version, api_class(self._api).list_resource_slice))
        by_node = f"spec.nodeName={node_name}"
        self._reflectors = [
            Reflector(NODE, [("v1", with_field_selector(core.list_node,
                                                        f"metadata.name={node_name}"))],
                      node_record, self, ApiException),
            Reflector(PODS, [("v1", with_field_selector(core.list_pod_for_all_namespaces,
                                                        by_node))],
                      pod_record, self, ApiException),
            Reflector(SLICES, [(v, with_field_selector(call, by_node))
                               for v, call in slice_listers],
                      slice_record, self, ApiException, optional=True, group=SLICE_GROUP,
                      unserved="no DRA allocatable series"),
        ]

    # ---- life cycle (loop thread) --------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        log.info("Kubernetes-API view: watching node %s, its pods and ResourceSlices at %s",
                 self.node_name, self.server)
        for reflector in self._reflectors:
            reflector.start()

    def stop(self) -> None:
        """Ask the workers to stop and cut their open watches; returns at once."""
        for reflector in self._reflectors:
            reflector.stop()

    def join(self, timeout: float = JOIN_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        for reflector in self._reflectors:
            reflector.join(max(0.0, deadline - time.monotonic()))
        self._api.close()

    # ---- what the refresh and the scrape ask (loop thread) --------------------------------

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
            gauge_family(catalog.DRA_DEVICES_ALLOCATABLE,
                         dra_allocatable(self._records[SLICES].values())),
        ]

    # ---- the reflectors' sink (worker threads) -------------------------------------------

    def replaced(self, resource: str, records: dict[Any, Any], detail: str) -> None:
        self._post(self._replace, resource, records, detail)

    def changed(self, resource: str, key: Hashable, record: Any) -> None:
        self._post(self._change, resource, key, record)

    def reached(self, resource: str) -> None:
        self._post(self._reach, resource)

    def failed(self, resource: str, reason: str, down: bool) -> None:
        self._post(self._fail, resource, reason, down)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop thread."""
        if self._loop is None:
            raise SinkClosed
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed
            raise SinkClosed from None

    # ---- changes of state (loop thread) ---------------------------------------------------

    def _replace(self, resource: str, records: dict[Any, Any], detail: str) -> None:
        """A fresh list of the resource (the whole state of it)."""
        self._records[resource] = records
        if resource == PODS:
            self._terminated = {key for key, record in records.items() if record.terminated}
        self.version += 1
        self._reach(resource, detail or f"{len(records)} listed")

    def _change(self, resource: str, key: Any, record: Any) -> None:
        """An ADDED or MODIFIED (record) or DELETED (None) watch event."""
        records = self._records[resource]
        if record is None:
            records.pop(key, None)
        else:
            records[key] = record
        if resource == PODS:
            if record is not None and record.terminated:
                self._terminated.add(key)
            else:
                self._terminated.discard(key)
        self.version += 1

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

    def _fail(self, resource: str, reason: str, down: bool) -> None:
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
