"""Reading the kubelet: which podresources API it serves, whether it offers ``Get`` and
``GetAllocatableResources``, when to ask for allocatable resources again, and whether it was
restarted.

``List`` is asked every refresh, under v1 when served (v1alpha1 otherwise, probed again for v1
every ``--allocatable-interval``). ``GetAllocatableResources`` is asked every
``--allocatable-interval``, whenever ``List`` names a device resource the allocatable view
lacks, and when the device manager's healthy devices changed
(:meth:`~KubeletReader.notice_healthy_devices`, from its checkpoint). ``Get`` is probed once
per kubelet. A re-created socket or a lost kubelet makes all of it detected again: the kubelet
may come back as another version. What is found out is written to
:class:`~exporter.kubelet.status.KubeletStatus` and each change logged once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace

from google.protobuf.message import DecodeError

from .._proto.v1 import api_pb2 as v1
from ..model import Allocatable, ApiVersion, PodAssignment
from . import client as kubelet
from .client import KubeletClient, KubeletError
from .decode import Replies, split_repeated_field
from .status import CAPABILITY_NAMES, Capability, KubeletStatus

PROBE_POD = ("kube-system", "podresources-exporter-get-probe")


class KubeletReader:
    """One refresh's calls to the kubelet, and what they found out about it.

    :meth:`read` returns the replies undecoded: the refresh decodes and accounts them in one go,
    off the event loop, then tells the reader what they held (:meth:`noted`): the pods (the
    ``Get`` probe names one) and the allocatable view, so that a device resource the pods hold
    and the view lacks has the view read again. ``log``: the logger the findings go to (the
    refresh loop's, whose story they are part of).
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
        self._missing_now: frozenset[str] = frozenset()
        self._allocatable_read = False  # in this refresh
        self._pods: tuple[PodAssignment, ...] = ()  # as of the last refresh
        self._missing_wait = interval  # re-read delay while a resource stays missing
        self._registered: Mapping[str, frozenset[str]] | None = None  # as last noticed
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

    async def read(self) -> Replies:
        """The replies of one refresh, undecoded; raises :class:`KubeletError` when a call
        fails."""
        caps = self.status.capabilities  # as of the previous refresh
        self._notice_restart()
        if caps.api_version == ApiVersion.V1ALPHA1 and \
                time.monotonic() - self._v1_probed_at >= self._allocatable_interval:
            self._redetect = True  # a lowered capability is probed again: is v1 served now?
        if self._redetect or caps.api_version == ApiVersion.V1:
            try:
                raw = (await self.client.list_pods()).raw
                if caps.api_version != ApiVersion.V1:  # first contact, or an upgraded kubelet
                    self._get_probed = False
                    self._allocatable_at = float("-inf")
                self.set_capabilities(api_version=ApiVersion.V1)
            except KubeletError as error:
                if error.kind != kubelet.ErrorKind.UNIMPLEMENTED:
                    raise
                self._v1_probed_at = time.monotonic()
                raw = (await self.client.list_pods_v1alpha1()).raw
                self.set_capabilities(api_version=ApiVersion.V1ALPHA1,
                                      get_allocatable=Capability.FALSE, get=Capability.FALSE,
                                      pod_level=Capability.UNKNOWN)  # v1alpha1 cannot carry it
        else:
            raw = (await self.client.list_pods_v1alpha1()).raw
        self._redetect = False
        self._allocatable_read = False
        if self.status.capabilities.api_version != ApiVersion.V1:
            return Replies(raw, ApiVersion.V1ALPHA1)
        await self._probe_get(raw)
        if self._allocatable_due(time.monotonic()):
            await self._read_allocatable()
        return Replies(raw, ApiVersion.V1, self._allocatable_reply)

    def noted(self, pods: tuple[PodAssignment, ...], allocatable: Allocatable | None) -> bool:
        """What the refresh decoded from :meth:`read`'s replies: its pods and the allocatable
        view. True when the pods hold a device resource the view lacks that no re-read has
        been asked for yet and the view was not read this refresh: :meth:`read_allocatable`
        now, and account again (a pod of a newly registered device plugin)."""
        self._pods = pods
        self.allocatable = allocatable
        if self._allocatable_read or self.status.capabilities.api_version != ApiVersion.V1:
            return False
        missing = self._named_resources(pods) - self._allocatable_resources()
        return bool(missing) and missing != self._allocatable_missing \
            and self.status.capabilities.get_allocatable != Capability.FALSE

    async def read_allocatable(self, replies: Replies) -> Replies:
        """``replies`` with the allocatable view read again (see :meth:`noted`)."""
        self._allocatable_due(time.monotonic())
        await self._read_allocatable()
        return Replies(replies.list_reply, replies.api_version, self._allocatable_reply)

    async def _probe_get(self, list_reply: bytes) -> None:
        """Whether ``Get`` is served: asked once per kubelet, and again at least every
        ``--allocatable-interval`` while the answer is no (an upgraded kubelet may serve it);
        for the first pod ``List`` just listed (an answer, not a not-found error, when there is
        one)."""
        if self._get_probed and (
                self.status.capabilities.get != Capability.FALSE
                or time.monotonic() - self._get_probed_at < self._allocatable_interval):
            return
        namespace, name = first_pod(list_reply) or PROBE_POD
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

    def _allocatable_due(self, now: float) -> bool:
        """Whether ``GetAllocatableResources`` is due: every ``--allocatable-interval``, and
        sooner while the pods hold a device resource the view lacks (at once for a new one,
        then less and less often: its plugin may not have registered again yet after a
        kubelet restart)."""
        due = now - self._allocatable_at >= self._allocatable_interval
        missing = self._named_resources(self._pods) - self._allocatable_resources()
        if not missing:
            self._allocatable_missing = missing  # so the next missing resource counts as new
        elif self.status.capabilities.get_allocatable != Capability.FALSE:
            if missing != self._allocatable_missing:
                due = True  # a new device resource appeared: re-read allocatable for it
                self._missing_wait = self._interval
            elif now - self._allocatable_at >= self._missing_wait:
                # still missing, e.g. its plugin not registered again yet after a kubelet
                # restart: ask again, less and less often, at least every allocatable interval
                due = True
                self._missing_wait = min(2 * self._missing_wait, self._allocatable_interval)
        self._missing_now = missing
        return due

    async def _read_allocatable(self) -> None:
        """``GetAllocatableResources`` (decoded by the refresh); a kubelet that does not offer
        it has no allocatable view."""
        now = time.monotonic()
        try:
            self._allocatable_reply = (await self.client.get_allocatable()).raw
            self.set_capabilities(get_allocatable=Capability.TRUE)
        except KubeletError as error:
            if error.kind not in (kubelet.ErrorKind.UNIMPLEMENTED, kubelet.ErrorKind.DISABLED):
                raise
            self.allocatable = self._allocatable_reply = None
            self.set_capabilities(get_allocatable=Capability.FALSE)
        self._allocatable_at = now
        self._allocatable_missing = self._missing_now
        self._allocatable_read = True

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
        so an id seen there is still that pod's). The same listing (:meth:`noted`'s, asked
        again by the next refresh) is not even compared."""
        listed, listed_ids, named = self._named
        if pods is listed:
            return named
        ids = frozenset(map(id, pods))
        if ids != listed_ids or len(pods) != len(listed):
            named = frozenset(d.resource for p in pods for c in p.containers for d in c.devices
                              if d.resource)
            self._named = (pods, ids, named)
        return named

    def notice_healthy_devices(self, registered: Mapping[str, frozenset[str]] | None) -> None:
        """The device checkpoint's healthy devices by resource (``registered``; None without
        the state files). A device turning unhealthy or healthy again, or a plugin registering
        after a kubelet restart, makes the device manager write its checkpoint
        (``genericDeviceUpdateCallback``, ``writeCheckpoint``); when a new one's healthy
        devices are not those ``GetAllocatableResources`` last listed, allocatable resources
        are asked again at the next refresh, not at the next ``--allocatable-interval``."""
        if registered is None or registered is self._registered:
            return  # the same checkpoint as last time (the file is parsed once per change)
        self._registered = registered
        if self.allocatable is None:
            return
        listed: dict[str, set[str]] = {}
        for entry in self.allocatable.devices:
            listed.setdefault(entry.resource, set()).update(entry.device_ids)
        if any(registered.get(resource, frozenset()) != listed.get(resource, set())
               for resource in registered.keys() | listed.keys()):
            self._allocatable_at = float("-inf")

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


def first_pod(list_reply: bytes) -> tuple[str, str] | None:
    """(namespace, name) of a v1 ``List`` reply's first pod, read from its bytes alone; None
    when it lists none or cannot be read (the reply is decoded, and judged, elsewhere)."""
    try:
        chunks = split_repeated_field(list_reply)
        pod = v1.PodResources.FromString(chunks[0]) if chunks else None
    except (ValueError, DecodeError, RecursionError):
        return None
    return (pod.namespace, pod.name) if pod is not None and pod.name else None


def _socket_identity(path: str) -> tuple[int, int, int] | None:
    """(device, inode, change time) of the socket file, None when it is absent."""
    try:
        result = os.stat(path)
    except OSError:
        return None
    return (result.st_dev, result.st_ino, result.st_ctime_ns)
