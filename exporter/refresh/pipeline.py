"""One refresh's computation: kubelet replies in, the rendered kubelet section out.

decode → filter → ledger → render, synchronous and free of I/O, so the refresh loop can run
it off the event loop (in a worker thread) and the benchmark and the ``snapshot`` command run
the very same code. The caches that make a steady refresh cheap live here, across runs: the
decoders hand back the same object for an unchanged pod, the :class:`~exporter.accounting.Ledger`
applies only the pods that changed, and the section is rendered again only when the accounting
changed.

A :class:`Pipeline` is not thread-safe: one refresh at a time, as the loop does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..accounting import DEFAULT_CPU_DRIVERS, Accounting, CpuRequestSource, Ledger
from ..exposition.rendering import Renderer, RenderOptions
from ..issues import IssueKind
from ..kubelet.decode import AllocatableDecoder, ListDecoder, Replies
from ..model import (
    Allocatable,
    ApiVersion,
    DraInventory,
    KubeletSnapshot,
    PodAssignment,
    Topology,
)

PodFilter = Callable[[tuple[PodAssignment, ...]], tuple[PodAssignment, ...]]


@dataclass(frozen=True, slots=True)
class Result:
    """What one refresh computed."""

    snapshot: KubeletSnapshot  # as the kubelet reported it, before filtering
    accounting: Accounting  # the same object as last time when nothing changed
    section: bytes  # the kubelet section of /metrics (node and workload families)
    issues: Mapping[str, int]  # data issues of this refresh, by kind
    examples: Mapping[str, str]  # one example per kind
    left_out: int = 0  # listed pods the filter left out


class Pipeline:
    """decode → filter → ledger → render, keeping what did not change from one run to the next."""

    def __init__(self, options: RenderOptions | None = None,
                 cpu_drivers: frozenset[str] = DEFAULT_CPU_DRIVERS) -> None:
        """``cpu_drivers``: the DRA drivers whose devices are exclusive CPUs."""
        self._decoders = {ApiVersion.V1: ListDecoder.v1(),
                          ApiVersion.V1ALPHA1: ListDecoder.v1alpha1()}
        self._allocatable_decoder = AllocatableDecoder()
        self._ledger = Ledger(cpu_drivers)
        self._renderer = Renderer(options or RenderOptions())
        self._decoded: tuple[bytes, ApiVersion, tuple[PodAssignment, ...]] | None = None
        self._decoded_allocatable: tuple[bytes, Allocatable] | None = None
        self._accounting: Accounting | None = None
        self._section = b""

    def pods(self, list_reply: bytes,
             api_version: ApiVersion = ApiVersion.V1) -> tuple[PodAssignment, ...]:
        """The pods of a ``List`` reply; the same reply object is decoded once.

        Raises :class:`~exporter.kubelet.client.KubeletError` (``invalid_reply``) for bytes that are
        not a valid reply.
        """
        last = self._decoded
        if last is not None and last[0] is list_reply and last[1] == api_version:
            return last[2]
        pods = self._decoders[api_version].decode(list_reply)
        self._decoded = (list_reply, api_version, pods)
        return pods

    def allocatable(self, reply: bytes) -> Allocatable:
        """A ``GetAllocatableResources`` reply; an unchanged one gives the same object."""
        last = self._decoded_allocatable
        if last is not None and last[0] is reply:
            return last[1]
        value = self._allocatable_decoder.decode(reply)
        self._decoded_allocatable = (reply, value)
        return value

    def run(self, replies: Replies, topology: Topology, keep: PodFilter | None = None,
            dra: DraInventory | None = None,
            requests: CpuRequestSource | None = None) -> Result:
        """Account and render one refresh; ``keep`` leaves out pods that have ended; ``dra``:
        the DRA devices the node's ResourceSlices publish (the Kubernetes-API view);
        ``requests``: the pods' CPU requests from the pod context (None without one)."""
        pods = self.pods(replies.list_reply, replies.api_version)
        allocatable = None
        if replies.allocatable_reply is not None and replies.api_version == ApiVersion.V1:
            allocatable = self.allocatable(replies.allocatable_reply)
        snapshot = KubeletSnapshot(pods, allocatable, replies.api_version)
        kept = keep(pods) if keep is not None else pods
        accounting = self._ledger.update(kept, allocatable, topology, replies.api_version, dra,
                                         requests)
        if accounting is not self._accounting:  # the ledger returns the same object when unchanged
            self._section = self._renderer.render(accounting, topology)
            self._accounting = accounting
        issues: Mapping[str, int] = accounting.data_issues
        examples: Mapping[str, str] = accounting.issue_examples
        left_out = len(pods) - len(kept)
        if left_out:
            issues = {**issues, IssueKind.TERMINATED_POD: left_out}
            examples = {**examples, IssueKind.TERMINATED_POD:
                        "a pod the Kubernetes API reports Succeeded or Failed, left out of the "
                        "figures"}
        return Result(snapshot, accounting, self._section, issues, examples, left_out)
