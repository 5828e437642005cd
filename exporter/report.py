"""The ``snapshot`` command's output: a per-NUMA table for humans, or JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .accounting import UNKNOWN, Accounting, label_ids
from .health import Capabilities
from .model import Topology
from .topology import format_cpulist, hugepage_resource_name


def _bytes(value: int) -> str:
    for unit, suffix in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= unit:
            return f"{value / unit:.1f} {suffix}"
    return f"{value} B"


def _ratio(accounting: Accounting, numa: str, resource: str) -> str:
    value = accounting.utilization.get((numa, resource))
    return "-" if value is None else f"{value * 100:.1f}%"


def _numa_order(label: str) -> tuple[bool, tuple[int, ...]]:
    return (label == UNKNOWN, label_ids(label) if label != UNKNOWN else ())


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]
    return lines


def format_table(accounting: Accounting, topology: Topology, caps: Capabilities,
                 node_name: str = "") -> str:
    lines = [f"Node {node_name or '(unnamed)'}: kubelet podresources API {caps.api_version}; "
             f"GetAllocatableResources {caps.get_allocatable}, Get {caps.get}, "
             f"pod-level resources {caps.pod_level}; {accounting.pods} pods, "
             f"{accounting.containers} containers", ""]
    rows = []
    labels = set(str(n) for n in topology.numa_nodes) | set(accounting.cpus_allocated or {}) | set(
        accounting.cpus_allocatable or {})
    for label in sorted(labels, key=_numa_order):
        node = topology.numa_nodes.get(int(label)) if label != UNKNOWN else None
        rows.append([
            label,
            (format_cpulist(node.cpus) or "none") if node else "-",
            str((accounting.cpus_allocatable or {}).get(label, "-")),
            str((accounting.cpus_allocated or {}).get(label, "-")),
            _ratio(accounting, label, "cpu"),
            _bytes(node.memory_bytes) if node and node.memory_bytes else "-",
            ", ".join(f"{pages} x {hugepage_resource_name(size)[len('hugepages-'):]}"
                      for size, pages in sorted(node.hugepages.items())) if node else "-",
        ])
    lines.append("CPUs (exclusive)")
    lines += _table(["NUMA", "CPU list", "allocatable", "allocated", "used", "memory (sysfs)",
                     "hugepages (sysfs)"], rows)
    if accounting.cpus_allocatable is None and not accounting.cpus_allocated:
        lines.append("(no exclusive CPU data: CPU manager policy none, or kubelet API v1alpha1)")

    memory_keys = sorted(set(accounting.memory_allocatable) | set(accounting.memory_allocated),
                         key=lambda k: (k[1], _numa_order(k[0])))
    lines += ["", "Memory and hugepages (memory manager)"]
    if memory_keys:
        lines += _table(["NUMA", "type", "allocatable", "allocated", "used"], [
            [numa, memory_type,
             _bytes(accounting.memory_allocatable[(numa, memory_type)])
             if (numa, memory_type) in accounting.memory_allocatable else "-",
             _bytes(accounting.memory_allocated.get((numa, memory_type), 0)),
             _ratio(accounting, numa, memory_type)]
            for numa, memory_type in memory_keys])
        if any("," in numa for numa, _ in memory_keys):
            lines.append("(blocks spanning NUMA nodes are apportioned to their members in "
                         "\"used\": an estimate)")
    else:
        lines.append("(no memory data: memory manager policy None)")

    device_keys = sorted(set(accounting.devices_allocatable) | set(accounting.devices_allocated),
                         key=lambda k: (k[1], _numa_order(k[0])))
    lines += ["", "Devices (device plugins)"]
    unavailable = accounting.devices_allocated_unavailable
    if device_keys:
        headers = ["NUMA", "resource", "allocatable", "allocated", "used"]
        if unavailable is not None:
            headers.insert(4, "unavailable")
        rows = []
        for numa, resource in device_keys:
            row = [numa, resource,
                   str(accounting.devices_allocatable.get((numa, resource), "-")),
                   str(accounting.devices_allocated.get((numa, resource), 0)),
                   _ratio(accounting, numa, resource) if "," not in numa else "-"]
            if unavailable is not None:
                row.insert(4, str(unavailable.get((numa, resource), 0)))
            rows.append(row)
        lines += _table(headers, rows)
        if unavailable and any(unavailable.values()):
            lines.append("(unavailable: assigned, but not listed as allocatable by the kubelet: "
                         "unhealthy, plugin not registered, or registered without NUMA nodes; "
                         "they count toward no \"used\")")
    else:
        lines.append("(no devices)")
    if accounting.dra_devices_allocated:
        lines += ["", "DRA devices prepared"]
        lines += _table(["driver", "pool", "devices"], [
            [driver, pool, str(count)]
            for (driver, pool), count in sorted(accounting.dra_devices_allocated.items())])
    misaligned = sorted(k for k, v in accounting.container_numa_nodes.items() if v > 1)
    if accounting.misaligned_containers is not None:
        lines += ["", f"Containers spanning NUMA nodes: {accounting.misaligned_containers}"]
        for key in misaligned:
            lines.append(f"  {'/'.join(key)}: needs {accounting.container_numa_nodes[key]} "
                         "NUMA nodes")
    issues = {k: v for k, v in accounting.data_issues.items() if v}
    lines += ["", "Data issues: " + (", ".join(f"{k}={v}" for k, v in sorted(issues.items()))
                                     if issues else "none")]
    return "\n".join(lines) + "\n"


def format_json(accounting: Accounting, topology: Topology, caps: Capabilities,
                node_name: str = "") -> str:
    def keyed(values: Mapping[Any, Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
        rows = []
        for key, value in sorted(values.items()):
            key = key if isinstance(key, tuple) else (key,)
            rows.append({**dict(zip(names, key)), "value": value})
        return rows

    document = {
        "node": node_name,
        "kubelet": vars(caps),
        "numa_nodes": [{"numa_node": n.numa_id, "cpus": format_cpulist(n.cpus),
                        "memory_bytes": n.memory_bytes,
                        "hugepages": {hugepage_resource_name(s): p for s, p in n.hugepages.items()}}
                       for n in sorted(topology.numa_nodes.values(), key=lambda n: n.numa_id)],
        "cpus_allocatable": accounting.cpus_allocatable,
        "cpus_allocated": accounting.cpus_allocated,
        "memory_allocatable_bytes": keyed(accounting.memory_allocatable,
                                          ("numa_node", "memory_type")),
        "memory_allocated_bytes": keyed(accounting.memory_allocated, ("numa_node", "memory_type")),
        "devices_allocatable": keyed(accounting.devices_allocatable, ("numa_node", "resource")),
        "devices_allocated": keyed(accounting.devices_allocated, ("numa_node", "resource")),
        "devices_allocated_unavailable": None
        if accounting.devices_allocated_unavailable is None
        else keyed(accounting.devices_allocated_unavailable, ("numa_node", "resource")),
        "utilization_ratio": keyed(accounting.utilization, ("numa_node", "resource")),
        "dra_devices_allocated": keyed(accounting.dra_devices_allocated, ("driver", "pool")),
        "misaligned_containers": accounting.misaligned_containers,
        "containers": keyed(accounting.container_numa_nodes, ("namespace", "pod", "container")),
        "data_issues": {k: v for k, v in accounting.data_issues.items() if v},
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
