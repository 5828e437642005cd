"""The kubelet's own state files: what its CPU and device managers hold that ``List`` hides.

A finished regular init container keeps its exclusive CPUs and devices for the pod's whole life,
except those the pod's later containers reuse: nothing calls the CPU manager's
``RemoveContainer`` for it (``cpu_manager.go`` ``reconcileState`` skips terminated containers,
``removeStaleState`` keeps every container of an active pod), and the device manager's
``podDevices`` keeps its devices until the pod goes (``UpdateAllocatedDevices``). ``List``
shows app containers and sidecars only, and ``GetAllocatableResources`` still lists those CPUs
and devices, so *allocatable - listed* overstates what is free. The checkpoints the managers
write under the kubelet's root directory hold every container's share:

* ``cpu_manager_state`` (``cpumanager/state/checkpoint.go``): ``entries`` pod UID ->
  container -> cpuset, in every version (V2 at the top level; V3 adds ``podEntries``; V4, 1.37,
  keeps the V2 fields and puts the whole payload in ``data``, a JSON string);
* ``device-plugins/kubelet_internal_checkpoint`` (``devicemanager/checkpoint``):
  ``Data.PodDeviceEntries``, each pod UID, container, resource and ``DeviceIDs`` per NUMA node;
  ``Data.RegisteredDevices``, each resource a device plugin registered with its healthy devices
  (``writeCheckpoint``: ``healthyDevices``), so a resource whose every device is unhealthy is
  still known to be the device manager's (neither podresources API names it then).

* ``memory_manager_state`` (``memorymanager/state/checkpoint.go``, V1 at the top level, V2 in
  ``data``): the memory manager's own ``machineState`` (per NUMA node and memory type the
  allocatable and free bytes, ``cells``, ``numberOfAssignments``) and its ``entries`` (and
  pod-level ``podEntries``). An init container keeps its memory until the pod's next
  container is added (``memory_manager.go`` ``AddContainer``): a pod admitted and not yet
  started holds its init containers' memory, which ``List`` does not show.

Read with :class:`StateFiles`, again only when a file changed; a file that is missing,
unreadable or malformed reads as absent (the answers then say they assume it).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...topology import parse_cpulist

log = logging.getLogger(__name__)

CPU_MANAGER_STATE = "cpu_manager_state"
MEMORY_MANAGER_STATE = "memory_manager_state"
DEVICE_CHECKPOINT = "device-plugins/kubelet_internal_checkpoint"
POD_LEVEL = ""  # the container name under which a pod-level CPU set is kept
MAX_STATE_BYTES = 64 << 20  # a state file larger than this is not the kubelet's

# pod UID -> container -> CPUs; pod UID -> container -> resource -> (device id, NUMA ids)
CpuEntries = Mapping[str, Mapping[str, frozenset[int]]]
DeviceEntries = Mapping[str, Mapping[str, Mapping[str, Mapping[str, frozenset[int]]]]]


# resource -> its healthy device ids, for every resource a device plugin registered
Registered = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class DeviceCheckpoint:
    """The device manager's checkpoint: what each container holds, and the registry."""

    entries: DeviceEntries
    registered: Registered


@dataclass(frozen=True)
class MemoryTable:
    """One memory type on one NUMA node, as the memory manager keeps it (bytes)."""

    allocatable: int
    reserved: int
    free: int


@dataclass(frozen=True)
class MemoryCell:
    """One NUMA node of the memory manager's ``machineState``."""

    tables: Mapping[str, MemoryTable]
    cells: frozenset[int]
    assignments: int


# (memory type, bytes, NUMA ids) as a memory block of the state file
Block = tuple[str, int, tuple[int, ...]]


@dataclass(frozen=True)
class MemoryManagerState:
    """The memory manager's checkpoint: its machine state and every assignment (pod UID ->
    container -> blocks; the pod-level blocks under :data:`POD_LEVEL`)."""

    policy: str
    machine: Mapping[int, MemoryCell]
    entries: Mapping[str, Mapping[str, tuple[Block, ...]]]


@dataclass(frozen=True)
class KubeletState:
    """What the state files say; ``cpus``/``devices``/``registered``/``memory`` are ``None``
    when that file was not read."""

    cpus: CpuEntries | None = None
    devices: DeviceEntries | None = None
    registered: Registered | None = None
    memory: MemoryManagerState | None = None
    # cpus inferred from pod context (init_cpus.py), not read; decided: for every pod
    cpus_inferred: bool = False
    cpus_decided: bool = True


def _payload(text: str) -> dict[str, Any]:
    """A checkpoint's content: the top level, or the JSON string in ``data`` of the versions
    that keep the authoritative copy there (the CPU manager's V4, the memory manager's V2).
    ValueError when it is not a JSON object."""
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if isinstance(document.get("data"), str) and document["data"]:
        payload = json.loads(document["data"])
        if not isinstance(payload, dict):
            raise ValueError("data is not a JSON object")
        return payload
    return document


def parse_cpu_manager_state(text: str) -> CpuEntries:
    """``entries`` (and V3/V4 ``podEntries``, kept under container ``""``) of any version.
    ValueError when it is not such a file."""
    payload = _payload(text)
    entries: dict[str, dict[str, frozenset[int]]] = {}
    for uid, containers in (payload.get("entries") or {}).items():
        if isinstance(containers, dict):
            entries[str(uid)] = {str(name): parse_cpulist(str(cpus))
                                 for name, cpus in containers.items() if cpus}
    for uid, pod in (payload.get("podEntries") or {}).items():
        cpus = pod.get("cpuSet") if isinstance(pod, dict) else pod
        if isinstance(cpus, str) and cpus:
            entries.setdefault(str(uid), {})[POD_LEVEL] = parse_cpulist(cpus)
    return entries


def _blocks(value: object) -> tuple[Block, ...]:
    blocks: list[Block] = []
    for block in value if isinstance(value, list) else ():
        if isinstance(block, dict):
            numa = block.get("numaAffinity") or []
            blocks.append((str(block.get("type", "")), int(block.get("size", 0)),
                           tuple(int(n) for n in numa)))
    return tuple(blocks)


def parse_memory_manager_state(text: str) -> MemoryManagerState:
    """``machineState`` and ``entries``/``podEntries`` of any version (V2: ``data``).
    ValueError when it is not such a file."""
    payload = _payload(text)
    machine: dict[int, MemoryCell] = {}
    for numa, node in (payload.get("machineState") or {}).items():
        if not isinstance(node, dict):
            raise ValueError(f"machineState {numa} is not an object")
        tables = {str(kind): MemoryTable(int(t.get("allocatable", 0)), int(t.get("reserved", 0)),
                                         int(t.get("free", 0)))
                  for kind, t in (node.get("memoryMap") or {}).items() if isinstance(t, dict)}
        cells = frozenset(int(c) for c in node.get("cells") or [numa])
        machine[int(numa)] = MemoryCell(tables, cells, int(node.get("numberOfAssignments", 0)))
    entries: dict[str, dict[str, tuple[Block, ...]]] = {}
    for uid, containers in (payload.get("entries") or {}).items():
        if isinstance(containers, dict):
            entries[str(uid)] = {str(name): _blocks(blocks)
                                 for name, blocks in containers.items()}
    for uid, pod in (payload.get("podEntries") or {}).items():
        if isinstance(pod, dict):
            entries.setdefault(str(uid), {})[POD_LEVEL] = _blocks(pod.get("memoryBlocks"))
    return MemoryManagerState(str(payload.get("policyName", "")), machine, entries)


def parse_device_checkpoint(text: str) -> DeviceCheckpoint:
    """``Data.PodDeviceEntries``: per pod UID, container and resource, each device id with
    its NUMA nodes (none for ``-1``); ``Data.RegisteredDevices``: each registered resource's
    healthy device ids. ValueError when it is not such a file."""
    document = json.loads(text)
    data = document.get("Data") if isinstance(document, dict) else None
    if not isinstance(data, dict):
        raise ValueError("no Data object")
    registered: dict[str, frozenset[str]] = {}
    listed = data.get("RegisteredDevices") or {}
    if isinstance(listed, dict):
        for resource, ids in listed.items():
            if resource:
                registered[str(resource)] = frozenset(
                    i for i in (ids if isinstance(ids, list) else ()) if isinstance(i, str))
    entries: dict[str, dict[str, dict[str, dict[str, frozenset[int]]]]] = {}
    for entry in data.get("PodDeviceEntries") or ():
        if not isinstance(entry, dict):
            continue
        uid, container = str(entry.get("PodUID", "")), str(entry.get("ContainerName", ""))
        resource = str(entry.get("ResourceName", ""))
        per_numa = entry.get("DeviceIDs") or {}
        if not uid or not resource or not isinstance(per_numa, dict):
            continue
        devices = entries.setdefault(uid, {}).setdefault(container, {}).setdefault(resource, {})
        for numa, ids in per_numa.items():
            node = int(numa)
            for device in ids or ():
                known = devices.get(str(device), frozenset())
                devices[str(device)] = known | ({node} if node >= 0 else set())
    return DeviceCheckpoint(entries, registered)


@dataclass
class StateFiles:
    """The state files under the kubelet's root directory, parsed again only when one's size
    or modification time changed; one log line per file when it turns unusable."""

    directory: str
    _seen: dict[str, tuple[tuple[int, int] | None, Any]] = field(default_factory=dict)
    _problems: dict[str, str] = field(default_factory=dict)
    _last: KubeletState = field(default_factory=KubeletState)

    def current(self) -> KubeletState:
        """The files as they are now; the same object while neither changed."""
        cpus = self._read(CPU_MANAGER_STATE, parse_cpu_manager_state)
        checkpoint = self._read(DEVICE_CHECKPOINT, parse_device_checkpoint)
        memory = self._read(MEMORY_MANAGER_STATE, parse_memory_manager_state)
        devices = checkpoint.entries if checkpoint is not None else None
        last = self._last
        if cpus is not last.cpus or devices is not last.devices or memory is not last.memory:
            self._last = KubeletState(cpus, devices,
                                      checkpoint.registered if checkpoint is not None else None,
                                      memory)
        return self._last

    def _read(self, name: str, parse: Any) -> Any:
        path = Path(self.directory) / name
        try:
            info = os.stat(path)
        except OSError:
            self._seen.pop(name, None)
            return None
        stamp = (info.st_size, info.st_mtime_ns)
        cached = self._seen.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        value = None
        try:
            if info.st_size > MAX_STATE_BYTES:
                raise ValueError(f"larger than {MAX_STATE_BYTES} bytes")
            value = parse(path.read_text(encoding="utf-8"))
            self._problems.pop(name, None)
        except (OSError, ValueError, TypeError, AttributeError) as error:
            problem = f"{path}: {error}"
            if self._problems.get(name) != problem:
                log.warning("ignoring the kubelet's state file %s", problem)
            self._problems[name] = problem
        self._seen[name] = (stamp, value)
        return value
