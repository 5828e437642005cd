"""Reading the kubelet: which podresources API it serves, whether it offers ``Get`` and
``GetAllocatableResources``, when to ask for allocatable resources again, and whether it was
restarted.

``List`` is asked every refresh, under v1 when served (v1alpha1 otherwise, probed again for v1
every ``--allocatable-interval``). ``GetAllocatableResources`` is asked every
``--allocatable-interval`` and whenever ``List`` names a device resource the allocatable view
lacks. ``Get`` is probed once per kubelet. A re-created socket or a lost kubelet makes all of it
detected again: the kubelet may come back as another version. What is found out is written to
:class:`~exporter.kubelet.status.KubeletStatus` and each change logged once.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Protocol

from ..model import Allocatable, ApiVersion, PodAssignment
from . import client as kubelet
from .client import KubeletClient, KubeletError
from .decode import Replies
from .status import CAPABILITY_NAMES, Capability, KubeletStatus

PROBE_POD = ("kube-system", "podresources-exporter-get-probe")


class Decoder(Protocol):
    """Where the replies are decoded (the refresh loop: in its worker thread)."""

    async def pods(self, raw: bytes, api_version: ApiVersion) -> tuple[PodAssignment, ...]: ...

    async def allocatable(self, raw: bytes) -> Allocatable: ...


class KubeletReader:
    """One refresh's calls to the kubelet, and what they found out about it.

    ``log``: the logger the findings go to (the refresh loop's, whose story they are part of).
    """

    def __init__(self, client: KubeletClient, socket: str, interval: float,
                 allocatable_interval: float, log: logging.Logger):
        self.client = client
        self.status = KubeletStatus()  # capabilities written here; up/back-off by the loop
        self.allocatable: Allocatable | None = None
        self._socket = socket
        self._interval = interval
        self._allocatable_interval = allocatable_interval
        self._log = log
        self._allocatable_reply: bytes | None = None
        self._allocatable_at = float("-inf")
        self._allocatable_missing: frozenset[str] = frozenset()
        self._missing_wait = interval  # re-read delay while a resource stays missing
        # the last listing, its pods' ids and the device resources they hold
        self._named: tuple[tuple[PodAssignment, ...], frozenset[int], frozenset[str]] = (
            (), frozenset(), frozenset())
        # the allocatable view last walked, and its device resources
        self._resources: tuple[Allocatable | None, frozenset[str]] = (None, frozenset())
        self._redetect = True
        self._socket_id: tuple[int, int, int] | None = None  # the kubelet's socket, as last seen
        self._v1_probed_at = float("-inf")
        self._get_probed = False
        self._get_probed_at = float("-inf")

    async def read(self, decoder: Decoder) -> Replies:
        """The replies of one refresh; raises :class:`KubeletError` when a call fails."""
        caps = self.status.capabilities  # as of the previous refresh
        self._notice_restart()
        if caps.api_version == ApiVersion.V1ALPHA1 and \
                time.monotonic() - self._v1_probed_at >= self._allocatable_interval:
            self._redetect = True  # a lowered capability is probed again: is v1 served now?
        if self._redetect or caps.api_version == ApiVersion.V1:
            try:
                raw = (await self.client.list_pods()).raw
                pods = await decoder.pods(raw, ApiVersion.V1)
                if caps.api_version != ApiVersion.V1:  # first contact, or an upgraded kubelet
                    self._get_probed = False
                    self._allocatable_at = float("-inf")
                self.set_capabilities(api_version=ApiVersion.V1)
            except KubeletError as error:
                if error.kind != kubelet.ErrorKind.UNIMPLEMENTED:
                    raise
                self._v1_probed_at = time.monotonic()
                raw = (await self.client.list_pods_v1alpha1()).raw
                pods = await decoder.pods(raw, ApiVersion.V1ALPHA1)
                self.set_capabilities(api_version=ApiVersion.V1ALPHA1,
                                      get_allocatable=Capability.FALSE, get=Capability.FALSE,
                                      pod_level=Capability.UNKNOWN)  # v1alpha1 cannot carry it
        else:
            raw = (await self.client.list_pods_v1alpha1()).raw
            pods = await decoder.pods(raw, ApiVersion.V1ALPHA1)
        self._redetect = False
        if self.status.capabilities.api_version != ApiVersion.V1:
            return Replies(raw, ApiVersion.V1ALPHA1)
        await self._probe_get(pods)
        await self._refresh_allocatable(pods, decoder)
        return Replies(raw, ApiVersion.V1, self._allocatable_reply)

    async def _probe_get(self, pods: tuple[PodAssignment, ...]) -> None:
        """Whether ``Get`` is served: asked once per kubelet, and again at least every
        ``--allocatable-interval`` while the answer is no (an upgraded kubelet may serve it)."""
        if self._get_probed and (
                self.status.capabilities.get != Capability.FALSE
                or time.monotonic() - self._get_probed_at < self._allocatable_interval):
            return
        namespace, name = (pods[0].namespace, pods[0].name) if pods else PROBE_POD
        try:
            await self.client.get_pod(namespace, name)
            supported = Capability.TRUE
        except KubeletError as error:
            if error.kind in (kubelet.ErrorKind.NOT_FOUND,):
                supported = Capability.TRUE
            elif error.kind in (kubelet.ErrorKind.UNIMPLEMENTED, kubelet.ErrorKind.DISABLED):
                supported = Capability.FALSE
            else:
                return  # transient: ask again on the next refresh
        self._get_probed = True
        self._get_probed_at = time.monotonic()
        self.set_capabilities(get=supported)

    async def _refresh_allocatable(self, pods: tuple[PodAssignment, ...],
                                   decoder: Decoder) -> None:
        caps = self.status.capabilities
        now = time.monotonic()
        due = now - self._allocatable_at >= self._allocatable_interval
        missing = self._named_resources(pods) - self._allocatable_resources()
        if not missing:
            self._allocatable_missing = missing  # so the next missing resource counts as new
        elif caps.get_allocatable != Capability.FALSE:
            if missing != self._allocatable_missing:
                due = True  # a new device resource appeared: re-read allocatable for it
                self._missing_wait = self._interval
            elif now - self._allocatable_at >= self._missing_wait:
                # still missing, e.g. its plugin not registered again yet after a kubelet
                # restart: ask again, less and less often, at least every allocatable interval
                due = True
                self._missing_wait = min(2 * self._missing_wait, self._allocatable_interval)
        if not due:
            return
        try:
            raw = (await self.client.get_allocatable()).raw
            self.allocatable = await decoder.allocatable(raw)
            self._allocatable_reply = raw
            self.set_capabilities(get_allocatable=Capability.TRUE)
        except KubeletError as error:
            if error.kind not in (kubelet.ErrorKind.UNIMPLEMENTED, kubelet.ErrorKind.DISABLED):
                raise
            self.allocatable = self._allocatable_reply = None
            self.set_capabilities(get_allocatable=Capability.FALSE)
        self._allocatable_at = now
        self._allocatable_missing = missing

    def _allocatable_resources(self) -> frozenset[str]:
        """The device resources of the allocatable view, walked once per view read."""
        allocatable = self.allocatable
        if self._resources[0] is not allocatable:
            self._resources = (allocatable, frozenset(
                d.resource for d in allocatable.devices) if allocatable else frozenset())
        return self._resources[1]

    def _named_resources(self, pods: tuple[PodAssignment, ...]) -> frozenset[str]:
        """The device resources the pods hold, walked again only when the pods changed (the
        decoder hands back the same object for an unchanged pod; the previous listing is kept,
        so an id seen there is still that pod's)."""
        ids = frozenset(map(id, pods))
        listed, listed_ids, named = self._named
        if ids != listed_ids or len(pods) != len(listed):
            named = frozenset(d.resource for p in pods for c in p.containers for d in c.devices
                              if d.resource)
            self._named = (pods, ids, named)
        return named

    def kubelet_changed(self) -> None:
        """The kubelet may come back as another version: detect everything again."""
        self._redetect = True
        self._get_probed = False
        self._allocatable_at = float("-inf")

    def _notice_restart(self) -> None:
        """A restarted kubelet re-creates its socket. A restart shorter than ``--interval``
        fails no call, so the socket's identity is compared on every refresh."""
        path = kubelet.socket_path(self._socket)
        identity = _socket_identity(path)
        if identity == self._socket_id:
            return
        previous, self._socket_id = self._socket_id, identity
        if identity is None:
            return  # gone: the next call fails and says so
        self.kubelet_changed()
        if previous is not None:
            self._log.info("kubelet socket %s was re-created (kubelet restarted); detecting its "
                           "capabilities again", path)

    def set_capabilities(self, **found: str) -> None:
        """Record what was found out (``name=value`` per capability), logging each change."""
        before = self.status.capabilities
        self.status.capabilities = after = replace(before, **found)
        for name, old, value in zip(CAPABILITY_NAMES, before.labels(), after.labels()):
            if old == value:
                continue
            if old not in ("none", Capability.UNKNOWN):
                self._log.info("kubelet capability %s changed: %s -> %s", name, old, value)
            elif name == "api_version" and value == ApiVersion.V1ALPHA1:
                self._log.warning("kubelet does not serve podresources v1; using v1alpha1 "
                                  "(devices only, no CPU, memory or topology data)")
            elif value == Capability.FALSE:
                self._log.info("kubelet does not offer %s; related series are not exported",
                               name)


def _socket_identity(path: str) -> tuple[int, int, int] | None:
    """(device, inode, change time) of the socket file, None when it is absent."""
    try:
        result = os.stat(path)
    except OSError:
        return None
    return (result.st_dev, result.st_ino, result.st_ctime_ns)
