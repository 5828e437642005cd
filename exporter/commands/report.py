"""The ``snapshot`` command's output: a per-NUMA table for humans, or JSON for scripts.

Both say the same things in the same order: the node and its kubelet, per-NUMA CPUs, memory
and devices (allocatable, allocated, used), DRA devices, alignment, data issues, and who holds
what (each pod's and container's exclusive CPUs, memory blocks and device ids, with their NUMA
nodes). The JSON shape is documented in ``docs/snapshot.md``: every figure keyed by labels is
a list of objects (the label fields, then ``value``), a NUMA node is always its label as a
string (``"0"``, ``"0,1"``, ``"unknown"``), CPU sets are cpulists, sizes are bytes, and
``null`` means the kubelet does not report that resource at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..accounting import DRA, UNKNOWN, Accounting, label_ids
from ..kubelet.status import Capabilities
from ..model import MemoryBlock, NumaIds, PodAssignment, Topology
from ..topology import format_cpulist, hugepage_resource_name

JSON_FORMAT_VERSION = 1  # bumped when a key changes meaning or goes away


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


# ---- who holds what ------------------------------------------------------------------------

def _numa_label(numa_ids: NumaIds, topology: Topology) -> str:
    """An item's NUMA label as the metrics give it: ids sysfs knows, joined; else unknown."""
    known = sorted({n for n in numa_ids or () if n in topology.numa_nodes})
    return ",".join(str(n) for n in known) if known else UNKNOWN


def _cpus(cpu_ids: Iterable[int], topology: Topology) -> list[dict[str, str]]:
    """A CPU set split by NUMA node: ``[{"numa_node": "0", "cpus": "2-9"}, ...]``."""
    by_numa: dict[str, set[int]] = {}
    for cpu in cpu_ids:
        numa = topology.cpu_to_numa.get(cpu)
        by_numa.setdefault(UNKNOWN if numa is None else str(numa), set()).add(cpu)
    return [{"numa_node": numa, "cpus": format_cpulist(frozenset(cpus))}
            for numa, cpus in sorted(by_numa.items(), key=lambda item: _numa_order(item[0]))]


def _memory(blocks: Iterable[MemoryBlock], topology: Topology) -> list[dict[str, Any]]:
    return [{"memory_type": block.memory_type, "numa_node": _numa_label(block.numa_ids, topology),
             "bytes": block.size}
            for block in sorted(blocks, key=lambda b: (b.memory_type, b.numa_ids or ()))]


def holdings(pods: Sequence[PodAssignment], topology: Topology) -> list[dict[str, Any]]:
    """Who holds what: per pod (in namespace/name order), its pod-level exclusive CPUs and
    memory and per container its exclusive CPUs, memory blocks, device ids and DRA devices,
    each with its NUMA node label. Containers holding nothing exclusive (the shared pool) are
    left out; a pod is listed when it or a container holds something."""
    result = []
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        containers = []
        for container in pod.containers:
            devices: dict[tuple[str, str], set[int]] = {}
            unlocated: set[tuple[str, str]] = set()
            for entry in container.devices:
                for device_id in entry.device_ids:
                    key = (entry.resource, device_id)
                    devices.setdefault(key, set())
                    if entry.numa_ids is None:
                        unlocated.add(key)
                    else:
                        devices[key].update(entry.numa_ids)
            if not (container.cpu_ids or container.memory or devices or container.dra_devices):
                continue
            cpus = _cpus(container.cpu_ids, topology)
            memory = _memory(container.memory, topology)
            device_rows = [{"resource": resource, "device_id": device_id,
                            "numa_node": _numa_label(tuple(numa_ids), topology)}
                           for (resource, device_id), numa_ids in sorted(devices.items())]
            used = {row["numa_node"] for row in (*cpus, *memory, *device_rows)} - {UNKNOWN}
            numa_nodes = sorted({int(n) for label in used for n in label.split(",")})
            containers.append({
                "container": container.name,
                "numa_nodes": [str(n) for n in numa_nodes],
                "cpus": format_cpulist(frozenset(container.cpu_ids)),
                "cpus_by_numa_node": cpus,
                "memory": memory,
                "devices": device_rows,
                "dra_devices": [{"driver": d.driver, "pool": d.pool, "device": d.device,
                                 "claim": f"{d.claim_namespace}/{d.claim_name}"}
                                for d in sorted(container.dra_devices,
                                                key=lambda d: (d.driver, d.pool, d.device))],
            })
        if not (containers or pod.cpu_ids or pod.memory):
            continue
        result.append({
            "namespace": pod.namespace, "pod": pod.name,
            "pod_level": {"cpus": format_cpulist(frozenset(pod.cpu_ids)),
                          "cpus_by_numa_node": _cpus(pod.cpu_ids, topology),
                          "memory": _memory(pod.memory, topology)}
            if pod.cpu_ids or pod.memory else None,
            "containers": containers,
        })
    return result


def _held_memory(rows: list[dict[str, Any]]) -> str:
    return "; ".join(f"{row['memory_type']} {_bytes(row['bytes'])} @{row['numa_node']}"
                     for row in rows) or "-"


def _held_devices(rows: list[dict[str, Any]], dra: list[dict[str, Any]]) -> str:
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        grouped.setdefault((row["resource"], row["numa_node"]), []).append(row["device_id"])
    parts = [f"{resource} {','.join(ids)} @{numa}" for (resource, numa), ids in grouped.items()]
    parts += [f"{d['driver']} {d['pool']}/{d['device']} (DRA)" for d in dra]
    return "; ".join(parts) or "-"


def _held_cpus(rows: list[dict[str, str]]) -> str:
    return " ".join(f"{row['cpus']}@{row['numa_node']}" for row in rows) or "-"


def holdings_table(held: list[dict[str, Any]]) -> list[str]:
    """The "who holds what" section of the table, from :func:`holdings`."""
    rows = []
    for pod in held:
        name = f"{pod['namespace']}/{pod['pod']}"
        level = pod["pod_level"]
        if level is not None:
            rows.append([name, "(pod level)", "-", _held_cpus(level["cpus_by_numa_node"]),
                         _held_memory(level["memory"]), "-"])
        for container in pod["containers"]:
            rows.append([name, container["container"], ",".join(container["numa_nodes"]) or "-",
                         _held_cpus(container["cpus_by_numa_node"]),
                         _held_memory(container["memory"]),
                         _held_devices(container["devices"], container["dra_devices"])])
    lines = ["", "Who holds what (exclusive resources; CPUs@NUMA node, memory and devices "
             "@NUMA node)"]
    if rows:
        lines += _table(["pod", "container", "NUMA", "CPUs", "memory", "devices"], rows)
    else:
        lines.append("(no pod holds exclusive resources)")
    return lines


def format_table(accounting: Accounting, topology: Topology, caps: Capabilities,
                 node_name: str = "", pods: Sequence[PodAssignment] = ()) -> str:
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
    lines += _dra_cpus(accounting)

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
        allocatable = accounting.dra_devices_allocatable or {}
        shares = accounting.dra_device_shares
        lines += _table(["driver", "pool", "NUMA", "devices", "shares", "allocatable"], [
            [driver, pool, numa, str(count), str(shares.get((driver, pool, numa), 0)),
             str(allocatable[(driver, pool, numa)])
             if (driver, pool, numa) in allocatable else "-"]
            for (driver, pool, numa), count in sorted(accounting.dra_devices_allocated.items())])
    misaligned = sorted(k for k, v in accounting.container_numa_nodes.items() if v > 1)
    if accounting.misaligned_containers is not None:
        lines += ["", f"Containers spanning NUMA nodes: {accounting.misaligned_containers}"]
        for key in misaligned:
            lines.append(f"  {'/'.join(key)}: needs {accounting.container_numa_nodes[key]} "
                         "NUMA nodes")
    issues = {k: v for k, v in accounting.data_issues.items() if v}
    lines += ["", "Data issues: " + (", ".join(f"{k}={v}" for k, v in sorted(issues.items()))
                                     if issues else "none")]
    lines += holdings_table(holdings(pods, topology))
    return "\n".join(lines) + "\n"


def _dra_cpus(accounting: Accounting) -> list[str]:
    """Who allocates exclusive CPUs through DRA, and the CPUs of grouped devices, which have
    no ids: a count per container from its CPU request."""
    drivers = [driver for allocator, driver in accounting.cpu_allocators if allocator == DRA]
    if not drivers:
        return []
    lines = [f"(exclusive CPUs from DRA, driver {', '.join(drivers)}: in the figures above; "
             "those of devices grouping CPUs are counted from the containers' CPU requests, "
             "their ids unknown)"]
    if accounting.dra_cpus:
        lines += _table(["pod", "container", "NUMA", "CPUs (ids unknown)"], [
            [f"{namespace}/{pod}", container, numa, str(count)]
            for (namespace, pod, container, numa), count in sorted(accounting.dra_cpus.items())])
    return lines


def format_json(accounting: Accounting, topology: Topology, caps: Capabilities,
                 node_name: str = "", pods: Sequence[PodAssignment] = ()) -> str:
    """The report as one JSON document; its shape is documented in ``docs/snapshot.md``."""
    def keyed(values: Mapping[Any, Any] | None,
              names: tuple[str, ...]) -> list[dict[str, Any]] | None:
        if values is None:
            return None
        rows = []
        for key, value in sorted(values.items()):
            key = key if isinstance(key, tuple) else (key,)
            rows.append({**dict(zip(names, key)), "value": value})
        return rows

    document = {
        "format_version": JSON_FORMAT_VERSION,
        "node": node_name,
        "kubelet": vars(caps),
        "numa_nodes": [{"numa_node": str(n.numa_id), "cpus": format_cpulist(n.cpus),
                        "memory_bytes": n.memory_bytes,
                        "hugepages": {hugepage_resource_name(s): p for s, p in n.hugepages.items()}}
                       for n in sorted(topology.numa_nodes.values(), key=lambda n: n.numa_id)],
        "cpus_allocatable": keyed(accounting.cpus_allocatable, ("numa_node",)),
        "cpus_allocated": keyed(accounting.cpus_allocated, ("numa_node",)),
        "cpu_allocators": keyed(accounting.cpu_allocators, ("allocator", "driver")),
        "dra_cpus": keyed(accounting.dra_cpus, ("namespace", "pod", "container", "numa_node")),
        "memory_allocatable_bytes": keyed(accounting.memory_allocatable,
                                          ("numa_node", "memory_type")),
        "memory_allocated_bytes": keyed(accounting.memory_allocated,
                                        ("numa_node", "memory_type")),
        "devices_allocatable": keyed(accounting.devices_allocatable, ("numa_node", "resource")),
        "devices_allocated": keyed(accounting.devices_allocated, ("numa_node", "resource")),
        "devices_allocated_unavailable": keyed(accounting.devices_allocated_unavailable,
                                               ("numa_node", "resource")),
        "utilization_ratio": keyed(accounting.utilization, ("numa_node", "resource")),
        "dra_devices_allocated": keyed(accounting.dra_devices_allocated,
                                       ("driver", "pool", "numa_node")),
        "dra_device_shares": keyed(accounting.dra_device_shares, ("driver", "pool", "numa_node")),
        "misaligned_containers": accounting.misaligned_containers,
        "container_numa_nodes": keyed(accounting.container_numa_nodes,
                                      ("namespace", "pod", "container")),
        "data_issues": keyed({k: v for k, v in accounting.data_issues.items() if v}, ("kind",)),
        "pods": holdings(pods, topology),
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
