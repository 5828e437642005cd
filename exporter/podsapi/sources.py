"""Where the exporter's pod context comes from: the kubelet's Pods API, else the
Kubernetes-API view, else nowhere.

Pod context is what the fit answers and the rejection counters need of the node's pods (QoS,
init containers and sidecars, requests, pod-level resources, phase, admission rejections).
The kubelet serves it itself through its Pods API (1.36 alpha, 1.37 beta and on by default),
needing neither a token nor RBAC nor a watch on the API server; the Kubernetes-API view
(``--kube-api``) watches the node's pods otherwise, and stays the source of what the kubelet
does not hold (node status, ResourceSlices, DeviceTaintRules) either way.

The Pods API is the source while its socket exists and its watch works, and for
``FALLBACK_SECONDS`` after it stopped working or its socket went away (a kubelet restart makes
a new one); after that, and whenever there never was a socket, the view watches the pods
again if it is on. Without the view, a Pods API whose watch fails stays the source, with its
last pods, while its socket exists. Each change of source is logged once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..kubeapi.records import PodRecord
from ..model import CpuRequests, PodAssignment
from ..podcontext import NodeContext
from ..podspec import Rejection
from .source import PodsApi, State

if TYPE_CHECKING:
    from ..kubeapi.view import KubeView

log = logging.getLogger(__name__)

FALLBACK_SECONDS = 60.0


class Source(StrEnum):
    """Where pod context comes from now (the ``source`` label)."""

    PODS_API = "pods_api"
    KUBE_API = "kube_api"
    NONE = "none"


class PodSources:
    """The node's pods from the source in use; :meth:`choose` decides which."""

    def __init__(self, pods_api: PodsApi | None, view: KubeView | None,
                 fallback_seconds: float = FALLBACK_SECONDS, now: float | None = None):
        self.pods_api = pods_api
        self.view = view
        self.fallback_seconds = fallback_seconds
        self.source = Source.NONE
        self._trouble_since: float | None = None  # since when the Pods API has not worked
        self._context: tuple[int, NodeContext] | None = None  # by the Pods API's version
        self._terminated: tuple[int, frozenset[Hashable]] | None = None  # the same
        if pods_api is not None:
            pods_api.on_change = self._pods_api_changed
        # said at start, when it counts; ``now`` (monotonic seconds) only for tests' clocks
        self.source = self._wanted(time.monotonic() if now is None else now)
        if view is not None and self.source == Source.PODS_API:
            view.take_pods_from(self._records)

    # ---- life cycle (event loop) ---------------------------------------------------------

    def start(self) -> None:
        self._say(self.source, Source.NONE)
        if self.pods_api is not None:
            self.pods_api.start()

    def stop(self) -> None:
        if self.pods_api is not None:
            self.pods_api.stop()

    async def join(self) -> None:
        if self.pods_api is not None:
            await self.pods_api.join()

    # ---- the choice ----------------------------------------------------------------------

    def choose(self, now: float | None = None) -> Source:
        """Decide the source now (at start, on every change of the Pods API, and on every
        refresh, where a fallback's delay runs out); tell the view whether to watch pods."""
        wanted = self._wanted(time.monotonic() if now is None else now)
        if wanted != self.source:
            self._switch(wanted)
        return self.source

    def _wanted(self, now: float) -> Source:
        api = self.pods_api
        fallback = Source.KUBE_API if self.view is not None else Source.NONE
        if api is None or (api.state == State.ABSENT and not api.synced_once):
            self._trouble_since = None
            return fallback  # this kubelet does not serve it (or not yet)
        if api.state == State.WATCHING:
            self._trouble_since = None
            return Source.PODS_API
        # starting, failing, or its socket gone after it worked (a restart makes a new one)
        if self._trouble_since is None:
            self._trouble_since = now
        if now - self._trouble_since < self.fallback_seconds:
            return Source.PODS_API
        if api.state == State.ABSENT:
            return fallback
        return fallback if self.view is not None else Source.PODS_API

    def _switch(self, source: Source) -> None:
        previous, self.source = self.source, source
        if self.view is not None:
            if source == Source.PODS_API:
                self.view.take_pods_from(self._records)
            else:
                self.view.watch_pods()
        self._say(source, previous)

    def _say(self, source: Source, previous: Source) -> None:
        if source == Source.PODS_API:
            log.info("pod context: from the kubelet's Pods API at %s", self.pods_api_path)
        elif source == Source.KUBE_API:
            why = ""
            if previous == Source.PODS_API and self.pods_api is not None:
                why = (f" (the Pods API has not answered for {self.fallback_seconds:g} s: "
                       f"{self.pods_api.reason})" if self.pods_api.state != State.ABSENT
                       else " (the Pods API's socket is gone)")
            log.info("pod context: from the Kubernetes API (--kube-api)%s", why)
        elif previous != Source.NONE:
            log.info("pod context: none (the Pods API's socket is gone)")

    @property
    def pods_api_path(self) -> str:
        return self.pods_api.path if self.pods_api is not None else ""

    def _pods_api_changed(self) -> None:
        self.choose()
        if self.source == Source.PODS_API and self.view is not None:
            self.view.pods_changed()

    # ---- what the exporter reads ---------------------------------------------------------

    def _records(self) -> Mapping[Any, PodRecord]:
        return self.pods_api.records if self.pods_api is not None else {}

    def records(self) -> Mapping[Any, PodRecord]:
        """The node's pods from the source in use."""
        if self.source == Source.PODS_API:
            return self._records()
        if self.source == Source.KUBE_API and self.view is not None:
            return self.view.pod_records()
        return {}

    def node_context(self) -> NodeContext | None:
        """The node's pods as the fit answers read them, from the source in use (with the
        Node's allocatable when the view has the Node); None without a source, and before the
        Pods API's first list."""
        if self.source == Source.PODS_API:
            api = self.pods_api
            if api is None or not api.synced_once:
                return None
            if self.view is not None:
                return self.view.pod_context()
            cached = self._context
            if cached is None or cached[0] != api.version:
                pods = tuple(r.context for r in api.records.values() if r.context is not None)
                self._context = cached = (api.version, NodeContext("pods-api", pods, None))
            return cached[1]
        if self.source == Source.KUBE_API and self.view is not None:
            return self.view.pod_context()
        return None

    def cpu_requests(self) -> Callable[[str, str], CpuRequests | None] | None:
        """The pods' CPU requests, looked up by (namespace, name) in the source in use, as the
        accounting counts grouped DRA CPUs by them; None without a source."""
        if self.source == Source.NONE:
            return None
        records = self.records()

        def lookup(namespace: str, name: str) -> CpuRequests | None:
            record = records.get((namespace, name))
            context = record.context if record is not None else None
            return context.cpu_requests() if context is not None else None

        return lookup

    def rejections(self) -> dict[tuple[str, str], Rejection]:
        """Pods the kubelet rejected at admission for exclusive resources."""
        return {key: record.rejection for key, record in self.records().items()
                if record.rejection is not None}

    def terminated(self) -> frozenset[Hashable]:
        """(namespace, name) of the listed pods the source knows as finished, as of now (a
        copy: the refresh leaves them out in its worker thread)."""
        if self.view is not None:
            return self.view.terminated()
        api = self.pods_api
        if self.source != Source.PODS_API or api is None:
            return frozenset()
        cached = self._terminated
        if cached is None or cached[0] != api.version:
            self._terminated = cached = (api.version, frozenset(
                key for key, record in api.records.items() if record.terminated))
        return cached[1]

    def without_terminated(self, pods: tuple[PodAssignment, ...]) -> tuple[PodAssignment, ...]:
        """The kubelet's listed pods minus those the source knows as finished."""
        terminated = self.terminated()
        if not terminated:
            return pods
        return tuple(pod for pod in pods if (pod.namespace, pod.name) not in terminated)

    def labels(self) -> tuple[str, str]:
        """``podresources_pods_source_info``'s labels: the source, the Pods API's state."""
        return self.source, "off" if self.pods_api is None else self.pods_api.state
