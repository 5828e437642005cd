"""The ``snapshot`` command: read the kubelet once and print the per-NUMA picture or a fit
answer; a failure is one line and exit status 1."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..kubelet import client as kubelet
from ..kubelet.client import KubeletError
from ..model import DeviceEntry, KubeletSnapshot, MemoryBlock, Topology
from ..refresh.loop import Refresher
from ..refresh.settings import Settings
from ..topology import format_cpulist
from .serve import PROG, UsageError, build_refresher, read_sysfs_topology

if TYPE_CHECKING:
    from ..fit.explain import PodQuestion
    from ..podsapi.sources import PodSources


async def snapshot(settings: Settings, output_format: str, log_level: str,
                   shape: str | None = None, why: str | None = None,
                   sysfs_given: bool = True) -> int:
    """Read the kubelet once and print the per-NUMA picture (``table`` or ``json``, or the node
    map as ``svg`` or ``html``); with ``shape`` or ``why``, the fit answer instead
    (:mod:`exporter.fit.explain`).

    A failed call is reported in one line and exits 1: there is no retry and no earlier
    snapshot here, so the refresh loop's own messages (which say both) are kept out.
    ``sysfs_given``: whether ``--sysfs-root`` was chosen, not defaulted (see
    :func:`_foreign_kubelet`).
    """
    from .report import format_json, format_table

    question = _fit_question(shape, why)
    if question is not None and output_format in MAP_FORMATS:
        raise UsageError(f"--format {output_format} draws the node map; --shape and --why "
                         "answer in table or json")
    topology = read_sysfs_topology(settings.sysfs_root)
    if log_level == "info":
        logging.getLogger().setLevel(logging.WARNING)  # the report is the output
    refresher, pods = await read_once(settings, topology, quiet=log_level != "debug")
    if refresher.accounting is None or refresher.snapshot is None:
        reason = _one_shot_failure(refresher.last_error, settings, refresher.client.target)
        print(f"{PROG}: {reason}", file=sys.stderr)
        return 1
    foreign = _foreign_kubelet(refresher.snapshot, refresher.topology)
    if foreign:
        where = (f"the kubelet at {refresher.client.target} reports {foreign} that "
                 f"{settings.sysfs_root} does not have")
        if not sysfs_given:
            raise UsageError(
                f"--sysfs-root: {where}, so the two are not the same machine (a simulated "
                "kubelet's socket?); give the --sysfs-root that goes with the socket (the demo "
                "prints the whole snapshot command)")
        print(f"{PROG}: warning: {where}; they are counted under NUMA node \"unknown\" and as "
              "data issues below", file=sys.stderr)
    if question is not None:
        return await _answer(question, refresher, output_format, pods)
    if output_format in MAP_FORMATS:
        sys.stdout.write(_node_map(refresher, output_format))
        return 0
    formatter = format_json if output_format == "json" else format_table
    sys.stdout.write(formatter(refresher.accounting, refresher.topology,
                               refresher.status.capabilities, settings.node_name,
                               pods=refresher.snapshot.pods))
    if output_format != "json" and refresher.fit is not None and refresher.fit.state is not None:
        from ..fit.explain import free_table, shapes_summary
        sys.stdout.write("\n" + free_table(refresher.fit.state))
        if refresher.fit.answers:
            sys.stdout.write("\n" + shapes_summary(refresher.fit.answers))
    return 0


MAP_FORMATS = ("svg", "html")
QUIET_LOGGERS = ("exporter.refresh.loop", "exporter.podsapi.source", "exporter.podsapi.sources",
                 "exporter.kubeapi.view", "exporter.fit.fitview")


async def read_once(settings: Settings, topology: Topology | None = None, quiet: bool = True,
                    kube_environ: Mapping[str, str] | None = None
                    ) -> tuple[Refresher, list[dict[str, Any]] | None]:
    """One read of everything ``serve`` reads: the pod context (Pods API or Kubernetes-API
    view), then one refresh (the kubelet, the state files, the kubelet's config file), the fit
    view answering on it. Returns the refresher, closed, and the Pods API's pods (None when
    pod context came from elsewhere). ``quiet``: the loop's own lines, which speak of
    retrying, are kept out."""
    refresher = build_refresher(settings, topology, kube_environ)
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    saved = [logger.level for logger in loggers]
    if quiet:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
    try:
        pods = await read_pod_context(refresher.pod_sources)
        await refresher.refresh_once()
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)
        await refresher.client.close()
        if refresher.pod_sources is not None:
            await refresher.pod_sources.join()
        if refresher.kube_view is not None:
            await refresher.kube_view.join()
    return refresher, pods


def _node_map(refresher: Refresher, output_format: str) -> str:
    """The node map of this one refresh, as a file to attach to a ticket."""
    from ..nodemap.build import build_map
    from ..nodemap.page import render_document, render_page

    inputs = refresher.map_inputs()
    assert inputs is not None  # the refresh succeeded
    nodemap = build_map(inputs)
    return render_page(nodemap) if output_format == "html" else render_document(nodemap)


def _fit_question(shape: str | None, why: str | None) -> object:
    """``--shape`` as a Shape, ``--why`` as (namespace, pod), checked before the kubelet is
    read; None for neither."""
    if shape and why:
        raise UsageError("--shape and --why are two questions: ask one at a time")
    if shape:
        from ..fit.shapes import ShapeError, ShapeName, parse_shape_argument
        if "=" not in shape:
            return ShapeName(shape.strip())  # a shape of --fit-shapes, looked up later
        try:
            return parse_shape_argument(shape, "request")
        except ShapeError as error:
            raise UsageError(f"--shape: {error}") from None
    if why:
        from ..fit.explain import parse_pod_name
        try:
            return parse_pod_name(why)
        except ValueError as error:
            raise UsageError(f"--why: {error}") from None
    return None


async def read_pod_context(sources: PodSources | None) -> list[dict[str, Any]] | None:
    """Read the pod context once, from where ``serve`` would take it now: the kubelet's Pods
    API (one ``ListPods``) when its socket exists, else the Kubernetes-API view (one list of
    each resource), which also lists the node, its ResourceSlices and DeviceTaintRules.
    Returns the Pods API's pods (API JSON), None when they come from elsewhere."""
    if sources is None:
        return None
    from ..podsapi.source import State
    from ..podsapi.sources import Source
    sources.fallback_seconds = 0  # one read: a failed Pods API leaves it to the view at once
    pods: list[dict[str, Any]] | None = None
    if sources.pods_api is not None:
        pods = await sources.pods_api.list_once()
        if sources.pods_api.state == State.FAILING:
            fallback = "the Kubernetes API" if sources.view is not None else "nowhere"
            print(f"{PROG}: warning: cannot read the kubelet's Pods API at "
                  f"{sources.pods_api.path} ({sources.pods_api.reason}); pod context from "
                  f"{fallback}", file=sys.stderr)
    source = sources.choose()
    if sources.view is not None:
        await sources.view.sync_once()
    return pods if source == Source.PODS_API else None


async def _answer(question: object, refresher: Refresher, output_format: str,
                  pods: list[dict[str, Any]] | None) -> int:
    from ..fit.explain import ExplainError, shape_report, why_report
    from ..fit.kubelet.podshape import PodShape
    from ..fit.shapes import ShapeName

    fit = refresher.fit
    if fit is None or fit.state is None or fit.config is None:
        print(f"{PROG}: the kubelet does not report allocatable resources (GetAllocatableResources "
              "unavailable, or API v1alpha1): nothing can be said about fit", file=sys.stderr)
        return 1
    if isinstance(question, ShapeName):
        named = {shape.name: shape for shape in fit.current_shapes()}
        if question not in named:
            known = ", ".join(sorted(named)) or "none (no --fit-shapes)"
            raise UsageError(f"--shape: no shape named {question!r} in --fit-shapes (known: "
                             f"{known}); or give RESOURCE=QUANTITY,...")
        question = named[question]
    if isinstance(question, PodShape):
        sys.stdout.write(shape_report(question, fit.state, fit.config, output_format,
                                      fit.answer))
        return 0
    assert isinstance(question, tuple)
    namespace, name = question
    try:
        pod = (await read_pod(namespace, name) if pods is None
               else pod_from_pods_api(namespace, name, pods, refresher))
    except ExplainError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(why_report(pod, fit.state, fit.config, output_format, fit.answer))
    return 0


def pod_from_pods_api(namespace: str, name: str, pods: list[dict[str, Any]],
                      refresher: Refresher) -> PodQuestion:
    """The pod as the kubelet's Pods API listed it."""
    from ..fit.explain import ExplainError, PodQuestion
    for obj in pods:
        meta = obj.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == (namespace, name):
            return PodQuestion.of(namespace, name, obj)
    where = refresher.pod_sources.pods_api_path if refresher.pod_sources else ""
    raise ExplainError(f"pod {namespace}/{name} is not on this node (the kubelet's Pods API "
                       f"at {where} does not have it)")


async def read_pod(namespace: str, name: str,
                   environ: Mapping[str, str] | None = None) -> PodQuestion:
    """One GET of the pod, with the Kubernetes-API view's configuration and credentials."""
    from ..fit.explain import ExplainError, PodQuestion
    from ..kubeapi.auth import ConfigError
    from ..kubeapi.client import ApiClient, ApiError, describe_failure
    from ..kubeapi.config import load_config

    try:
        config = load_config(os.environ if environ is None else environ)
    except ConfigError as error:
        raise ExplainError(f"--why needs the Kubernetes API: {error}") from None
    client = ApiClient(config)
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    try:
        obj = await client.list(path, {})
    except ApiError as error:
        if error.status == 404:
            raise ExplainError(f"pod {namespace}/{name} not found") from None
        raise ExplainError(f"cannot read pod {namespace}/{name}: {error}") from None
    except Exception as error:  # connection refused, TLS, credentials: say which
        raise ExplainError(f"cannot read pod {namespace}/{name}: "
                           f"{describe_failure(error, config.server)}") from None
    finally:
        await client.close()
    return PodQuestion.of(namespace, name, obj)


def _one_shot_failure(error: KubeletError | None, settings: Settings, target: str) -> str:
    """Why a single read of the kubelet failed, in one line."""
    if error is None:
        return f"cannot read the kubelet at {target}"
    reason = kubelet.describe(error, target, settings.max_message_bytes, settings.timeout)
    if error.kind == kubelet.ErrorKind.RATE_LIMITED:
        reason += "; try again in a few seconds"
    return f"cannot read the kubelet: {reason}"


def _foreign_kubelet(snapshot: KubeletSnapshot, topology: Topology) -> str:
    """What the kubelet reports that the sysfs tree does not have ("" when nothing).

    A kubelet reports only CPUs and NUMA nodes of its own machine; a socket whose kubelet names
    others belongs to another machine, usually a simulator's, whose sysfs tree is elsewhere.
    """
    cpus: set[int] = set()
    numa_ids: set[int] = set()
    located: list[MemoryBlock | DeviceEntry] = []
    if snapshot.allocatable is not None:
        cpus.update(snapshot.allocatable.cpu_ids)
        located += [*snapshot.allocatable.memory, *snapshot.allocatable.devices]
    for pod in snapshot.pods:
        cpus.update(pod.cpu_ids)
        for container in pod.containers:
            cpus.update(container.cpu_ids)
            located += [*container.memory, *container.devices]
    for item in located:
        numa_ids.update(item.numa_ids or ())
    unknown_cpus = cpus - topology.cpu_to_numa.keys()
    unknown_numa = {n for n in numa_ids if n >= 0} - topology.numa_nodes.keys()
    parts = []
    if unknown_cpus:
        cpulist = format_cpulist(frozenset(unknown_cpus))
        if len(cpulist) > 60:  # a hostile reply may name thousands: the line stays short
            cpulist = f"{cpulist[:60].rsplit(',', 1)[0]},... ({len(unknown_cpus)} in all)"
        parts.append(f"CPUs {cpulist}")
    if unknown_numa:
        shown = sorted(unknown_numa)[:8]
        more = f" and {len(unknown_numa) - 8} more" if len(unknown_numa) > 8 else ""
        parts.append(f"NUMA node{'s' if len(unknown_numa) > 1 else ''} "
                     f"{', '.join(str(n) for n in shown)}{more}")
    return " and ".join(parts)
