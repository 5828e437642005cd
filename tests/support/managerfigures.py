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


def active_holdings(dump: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container of the active pods, init containers included: what the managers hold
    for pods that are not stale (a rejected, ended or deleted pod's leftovers go at the next
    admission's removeStaleState, and count as free)."""
    for pod in dump["pods"] or ():
        if pod["active"]:
            yield from pod["containers"] or ()


def expected_numa_free(dump: dict[str, Any], node: dict[str, Any]) -> dict[tuple, int]:
    """``podresources_numa_free`` as SPEC 7.3 defines it, for the managers' state: per NUMA
    node, the allocatable CPUs no active pod's container holds; each memory type's allocatable
    less the active pods' blocks on that node (left out when an active pod holds a block
    spanning nodes: the group rule then decides); each device resource's healthy devices no
    active pod's container holds, on every NUMA node they are local to, or under ``unknown``
    for a resource none of whose devices has a NUMA node. Devices whose topology names no NUMA
    node are in no podresources reply and count nowhere."""
    cpu_numa = {cpu["id"]: cpu["numa"] for cpu in node["cpus"]}
    numa_ids = sorted({n["id"] for n in node["numa_nodes"]})
    free: dict[tuple, int] = {}
    containers = list(active_holdings(dump))
    if dump["cpu_manager"]["policy"] == "static":
        held = {c for container in containers for c in container["cpus"]}
        for numa in numa_ids:
            free[(str(numa), "cpu")] = sum(1 for c in dump["cpu_manager"]["allocatable"]
                                           if cpu_numa[c] == numa and c not in held)
    blocks = [b for container in containers for b in container["memory"]]
    if dump["memory_manager"]["policy"] == "Static" and all(len(b["numa"]) == 1
                                                           for b in blocks):
        machine = dump["memory_manager"]["machine_state"]
        types = {t for state in machine.values() for t in state["memory"]}
        for numa in numa_ids:
            tables = machine[str(numa)]["memory"]
            for memory_type in types:
                used = sum(b["size"] for b in blocks
                           if b["type"] == memory_type and b["numa"] == [numa])
                allocatable = tables.get(memory_type, {}).get("allocatable", 0)
                free[(str(numa), memory_type)] = max(0, allocatable - used)
    held_devices = {(r, d) for container in containers
                    for r, ids in container["devices"].items() for d in ids}
    for resource, devices in dump["device_manager"]["registered"].items():
        seen = {d: device for d, device in devices.items()
                if device["numa"] != [] and (device["healthy"] or (resource, d) in held_devices)}
        unheld = [device["numa"] for d, device in seen.items()
                  if device["healthy"] and (resource, d) not in held_devices]
        if not seen or any(device["numa"] for device in seen.values()):
            for numa in numa_ids:
                free[(str(numa), resource)] = sum(1 for n in unheld if n and numa in n)
        else:
            free[("unknown", resource)] = len(unheld)
    return free


def metrics_numa_free(scrape: Scrape) -> dict[tuple, int]:
    return {k: int(v) for k, v in scrape.by("podresources_numa_free", "numa_node",
                                             "resource").items()}
