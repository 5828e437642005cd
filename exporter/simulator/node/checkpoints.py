"""The kubelet's checkpoint files as the simulated kubelet writes them, for ``--watch-path``."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from .book import SimulatedNode


def write_state_files(state: SimulatedNode, directory: Path) -> None:
    """``cpu_manager_state``, ``memory_manager_state``, ``dra_manager_state`` and
    ``device-plugins/kubelet_internal_checkpoint``, shaped like the kubelet's checkpoints (each
    pod by its UID, finished init containers included) and replaced atomically (write, then
    rename), as its checkpoint manager does."""
    from ...topology import format_cpulist

    cpus: dict[str, Any] = {}
    memory: dict[str, Any] = {}
    devices: list[Any] = []
    claims: dict[str, Any] = {}
    for pod in state.pods.values():
        if pod.released:
            continue  # the managers removed what a terminated pod held
        uid = pod.uid
        # finished init containers keep their CPUs and devices (not their memory): the
        # kubelet's checkpoints show them, List does not
        for container in (*pod.init_containers, *pod.assignment.containers):
            if container.cpu_ids:
                cpus.setdefault(uid, {})[container.name] = format_cpulist(
                    list(container.cpu_ids))
            if container.memory:
                memory.setdefault(uid, {})[container.name] = [
                    {"numaAffinity": list(b.numa_ids or ()), "type": b.memory_type, "size": b.size}
                    for b in container.memory]
            for device in container.devices:
                devices.append({"PodUID": uid, "ContainerName": container.name,
                                "ResourceName": device.resource,
                                "DeviceIDs": {str(n): list(device.device_ids)
                                              for n in (device.numa_ids or (-1,))}})
            for dra in container.dra_devices:
                claims.setdefault(f"{dra.claim_namespace}/{dra.claim_name}", []).append(
                    {"driver": dra.driver, "pool": dra.pool, "device": dra.device})
    free = set().union(*state.free_cpus.values()) if state.free_cpus else set()
    files: dict[str, dict[str, Any]] = {
        "cpu_manager_state": {"policyName": state.spec.cpu_manager_policy,
                              "defaultCpuSet": format_cpulist(free), "entries": cpus},
        "memory_manager_state": {"policyName": state.spec.memory_manager_policy,
                                 "machineState": _machine_state(state), "entries": memory},
        "dra_manager_state": {"claims": claims},
        "device-plugins/kubelet_internal_checkpoint": {"Data": {"PodDeviceEntries": devices}},
    }
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(content, sort_keys=True)
        data = json.dumps({**content, "checksum": zlib.crc32(text.encode())}, sort_keys=True)
        scratch = path.with_name(f".{path.name}.tmp")
        scratch.write_text(data)
        os.replace(scratch, path)


def _machine_state(state: SimulatedNode) -> dict[str, Any]:
    """The memory manager's ``machineState`` (``memorymanager/state``): per NUMA node its
    assignments, group (``cells``) and, per memory type, allocatable, reserved and free."""
    nodes = state.managers().memory or {}
    return {str(numa): {
        "numberOfAssignments": node.assignments, "cells": sorted(node.group),
        "memoryMap": {kind: {"total": amount, "systemReserved": 0, "allocatable": amount,
                             "reserved": amount - node.free.get(kind, 0),
                             "free": node.free.get(kind, 0)}
                      for kind, amount in sorted(node.allocatable.items())}}
        for numa, node in sorted(nodes.items())}
