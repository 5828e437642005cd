"""The per-NUMA figures the exporter must report for a state of the real kubelet's managers,
worked out from the component's dump (tests/realkubelet) with plain counting: which CPU sits
on which NUMA node comes from the node description, never from the exporter's accounting.
``expected_figures`` is what ``List`` and ``GetAllocatableResources`` give for the dump;
``reported_figures`` reads the same figures from ``snapshot --format json`` and
``metrics_figures`` from a /metrics page."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from .harness import Scrape

FIGURES = {"cpus_allocatable": ("numa_node",), "cpus_allocated": ("numa_node",),
           "memory_allocatable_bytes": ("numa_node", "memory_type"),
           "memory_allocated_bytes": ("numa_node", "memory_type"),
           "devices_allocatable": ("numa_node", "resource"),
           "devices_allocated": ("numa_node", "resource"),
           "devices_allocated_unavailable": ("numa_node", "resource")}


def label(numa_ids: list[int] | tuple[int, ...] | None) -> str:
    if not numa_ids:
        return "unknown"
    return ",".join(str(n) for n in sorted(set(numa_ids)))


def listed_containers(dump: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod, container) of every container ``List`` shows: the active pods' sidecars and app
    containers."""
    for pod in dump["pods"] or ():
        if pod["active"]:
            for container in pod["containers"] or ():
                if container["kind"] != "init":
                    yield pod, container


def expected_figures(dump: dict[str, Any], node: dict[str, Any]) -> dict[str, dict[tuple, int]]:
    """The per-NUMA figures ``List`` and ``GetAllocatableResources`` give for the managers'
    state: the containers ``List`` shows are the active pods' sidecars and app containers."""
    cpu_numa = {cpu["id"]: cpu["numa"] for cpu in node["cpus"]}
    figures: dict[str, Counter[tuple]] = {k: Counter() for k in (
        "cpus_allocatable", "cpus_allocated", "memory_allocatable_bytes",
        "memory_allocated_bytes", "devices_allocatable", "devices_allocated",
        "devices_allocated_unavailable")}
    if dump["cpu_manager"]["policy"] == "static":
        for cpu in dump["cpu_manager"]["allocatable"]:
            figures["cpus_allocatable"][(str(cpu_numa[cpu]),)] += 1
        for numa in {str(cpu_numa[c]) for c in dump["cpu_manager"]["allocatable"]}:
            figures["cpus_allocated"][(numa,)] += 0
    memory_static = dump["memory_manager"]["policy"] == "Static"
    if memory_static:
        for numa, state in dump["memory_manager"]["machine_state"].items():
            for memory_type, table in state["memory"].items():
                if table["allocatable"]:
                    figures["memory_allocatable_bytes"][(numa, memory_type)] += table["allocatable"]
                    figures["memory_allocated_bytes"][(numa, memory_type)] += 0
    healthy = set()
    for resource, devices in dump["device_manager"]["registered"].items():
        for device_id, device in devices.items():
            if device["healthy"] and device["numa"] != []:
                healthy.add((resource, device_id))
                where = label(device["numa"])
                figures["devices_allocatable"][(where, resource)] += 1
                figures["devices_allocated"][(where, resource)] += 0
                figures["devices_allocated_unavailable"][(where, resource)] += 0
    for _, container in listed_containers(dump):
        for cpu in container["cpus"]:
            figures["cpus_allocated"][(str(cpu_numa[cpu]),)] += 1
        if memory_static:
            for block in container["memory"]:
                figures["memory_allocated_bytes"][(label(block["numa"]), block["type"])] += \
                    block["size"]
        for resource, ids in container["devices"].items():
            for device_id in ids:
                numa = dump["device_manager"]["registered"][resource][device_id]["numa"]
                if numa == []:
                    continue  # a topology naming no NUMA node: in no reply
                key = (label(numa), resource)
                figures["devices_allocated"][key] += 1
                # of those, the ones GetAllocatableResources does not list (unhealthy, or
                # their plugin not registered again yet)
                figures["devices_allocated_unavailable"][key] += \
                    (resource, device_id) not in healthy
    return {k: dict(v) for k, v in figures.items()}


def reported_figures(document: dict[str, Any]) -> dict[str, dict[tuple, int]]:
    return {kind: {tuple(row[k] for k in names): row["value"] for row in document[kind] or ()}
            for kind, names in FIGURES.items()}


def metrics_figures(scrape: Scrape) -> dict[str, dict[tuple, int]]:
    """The same figures from a /metrics page (``podresources_<figure>``)."""
    figures: dict[str, dict[tuple, int]] = {}
    for kind, names in FIGURES.items():
        found = scrape.by(f"podresources_{kind}", *names)
        figures[kind] = {(k,) if len(names) == 1 else k: int(v) for k, v in found.items()}
    return figures
