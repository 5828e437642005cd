"""The simulated kubelet's podresources gRPC server.

It serves the real ``v1`` and ``v1alpha1`` services on a real unix socket, shaped like the
kubelet's replies (SPEC sections 2 and 5):

* ``List`` lists every active pod (Pending and terminating ones too), in a different pod order
  on every call (the kubelet walks a Go map); kubelets before 1.34 also list terminated pods,
  without devices (``UpdateAllocatedDevices`` has garbage-collected them);
* one device entry per device per NUMA node in random order, also in ``v1alpha1`` (without
  topology, so the same id repeats); a device registered with a topology naming no NUMA node is
  one entry without topology in ``List`` and none in ``GetAllocatableResources``;
* sidecars before app containers, pod-level ``cpu_ids``/``memory`` overlapping the containers';
* DRA claims, the whole claim entry once per time the container names the claim;
* ``GetAllocatableResources`` lists healthy devices of registered plugins only: after a restart
  (socket re-created) every plugin is unregistered until it re-registers
  ``reregister_seconds`` later, while ``List`` keeps the assignments;
* one global token bucket (100 QPS, burst 10) in front of every method, answering
  ``RESOURCE_EXHAUSTED`` "rejected by rate limit".

Fault switches (``Faults``) make it misbehave on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio

from .._proto.v1 import api_pb2 as v1
from .._proto.v1alpha1 import api_pb2 as v1alpha1
from ..model import DeviceEntry, MemoryBlock, PodAssignment
from .state import NodeState, SimPod

log = logging.getLogger(__name__)

DEFAULT_QPS = 100.0
DEFAULT_BURST = 10
# Device plugins notice a restarted kubelet (its registration socket re-created) and register
# again within seconds; until then the kubelet lists none of their devices as allocatable.
DEFAULT_REREGISTER_SECONDS = 3.0
RATE_LIMIT_MESSAGE = "rejected by rate limit"
_REPLY_VARIANTS = 4  # differently ordered List replies cached per state version

T = TypeVar("T")
Producer = Callable[[Any], bytes]  # a request -> the encoded reply


class TokenBucket:
    """``golang.org/x/time/rate``'s limiter as the kubelet uses it: ``Allow()`` or reject."""

    def __init__(self, rate: float = DEFAULT_QPS, burst: int = DEFAULT_BURST):
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


_METHOD_MODES = ("ok", "disabled", "unimplemented")
_CHOICES = {"get_allocatable": _METHOD_MODES, "get": _METHOD_MODES,
            "garbage": ("", "bytes", "inconsistent")}


@dataclass
class Faults:
    """Switches that make the simulated kubelet misbehave; change them at any time."""

    rate_limit_storm: bool = False  # a neighbour drains the quota: every call is rejected
    get_allocatable: str = "ok"  # "ok" | "disabled" | "unimplemented"
    get: str = "ok"  # "ok" | "disabled" | "unimplemented"
    v1: bool = True  # False: only v1alpha1 is served (v1 answers UNIMPLEMENTED)
    slow_seconds: float = 0.0  # delay before every reply
    oversize_bytes: int = 0  # pad List replies to at least this many bytes
    garbage: str = ""  # "" | "bytes" (undecodable replies) | "inconsistent" (hostile data)
    # a device resource whose plugin is disconnected: the kubelet marks its devices unhealthy,
    # so they leave GetAllocatableResources, while List keeps their assignments ("": none)
    plugin_disconnect: str = ""

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``{switch: value}``, all or nothing; ``ValueError`` names a bad one."""
        if not isinstance(changes, dict):
            raise ValueError("faults must be a JSON object of switches")
        values = {key: _fault_value(self, key, value) for key, value in changes.items()}
        for key, value in values.items():
            setattr(self, key, value)


def _fault_value(faults: Faults, key: str, value: Any) -> Any:
    if key not in Faults.__dataclass_fields__:
        raise ValueError(f"unknown fault {key!r}; switches: "
                         f"{', '.join(Faults.__dataclass_fields__)}")
    current = getattr(faults, key)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return value
    if isinstance(current, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise ValueError(f"{key} must be a non-negative number, got {value!r}")
        if isinstance(current, int) and value != int(value):
            raise ValueError(f"{key} must be a whole number, got {value!r}")
        return type(current)(value)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    choices = _CHOICES.get(key)
    if choices is not None and value not in choices:
        raise ValueError(f"{key} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


@dataclass
class CallRecord:
    at: float  # time.monotonic()
    method: str  # e.g. "/v1.PodResourcesLister/List"
    code: str  # gRPC status name


@dataclass
class CallStats:
    """Every call the simulator answered, for assertions such as "at most N calls"."""

    records: list[CallRecord] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def add(self, method: str, code: str) -> None:
        self.records.append(CallRecord(time.monotonic(), method, code))

    def count(self, method: str | None = None, code: str | None = None,
              since: float | None = None, until: float | None = None) -> int:
        return sum(1 for r in self.records
                   if (method is None or r.method.endswith(method))
                   and (code is None or r.code == code)
                   and (since is None or r.at >= since)
                   and (until is None or r.at <= until))

    def by_code(self) -> dict[str, int]:
        return dict(Counter(f"{r.method} {r.code}" for r in self.records))


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        self.code = code
        self.details = details


class Simulator:
    """A simulated kubelet podresources endpoint on ``socket_path``."""

    def __init__(self, state: NodeState, socket_path: str | os.PathLike[str],
                 faults: Faults | None = None, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST,
                 reregister_seconds: float = DEFAULT_REREGISTER_SECONDS):
        self.state = state
        self.spec = state.spec
        self.socket_path = Path(socket_path)
        self.faults = faults or Faults()
        self.limiter = TokenBucket(qps, burst)
        self.stats = CallStats()
        self.rng = random.Random(state.spec.seed + 1)
        self.reregister_seconds = reregister_seconds
        self.restarts = 0
        self._unregistered: frozenset[str] = frozenset()  # plugins not registered since restart
        self._reregister: asyncio.Task[None] | None = None
        self._reregister_delay = reregister_seconds
        self._server: grpc.aio.Server | None = None
        self._cache: dict[tuple[int, int, bool, bool], bytes] = {}
        self._variant = 0

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        if self._server is not None:
            return
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if self.socket_path.exists() or self.socket_path.is_symlink():
            self.socket_path.unlink()
        server = grpc.aio.server(options=[("grpc.max_send_message_length", 1 << 30)])
        server.add_generic_rpc_handlers((self._v1_handler(), self._v1alpha1_handler()))
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self._server = server
        log.info("simulated kubelet serving podresources on %s", self.socket_path)
        if self._unregistered and self._reregister is None:
            self._reregister = asyncio.create_task(
                self._register_plugins_after(self._reregister_delay))

    async def stop(self) -> None:
        """Stop serving and remove the socket, as a stopping kubelet does."""
        self._cancel_reregistration()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def restart(self, downtime: float = 1.0, reregister_seconds: float | None = None) -> None:
        """A kubelet restart: socket removed, and re-created ``downtime`` seconds later.

        The restarted kubelet restores assignments from its checkpoint, so ``List`` reports
        them as before; but its device manager marks every restored resource as having no
        healthy device "so that the resource capacity will stay zero till the corresponding
        device plugin re-registers" (SPEC section 2, fact 5). Each plugin registers again
        ``reregister_seconds`` (default: the simulator's) after the socket is back.
        """
        await self.stop()
        self.restarts += 1
        self._unregistered = frozenset(self.state.device_resources)
        self._reregister_delay = (self.reregister_seconds if reregister_seconds is None
                                  else reregister_seconds)
        await asyncio.sleep(downtime)
        await self.start()

    async def _register_plugins_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._unregistered = frozenset()
        self._reregister = None
        log.info("simulated device plugins registered again: %s",
                 ", ".join(self.state.device_resources))

    def _cancel_reregistration(self) -> None:
        if self._reregister is not None:
            self._reregister.cancel()
            self._reregister = None

    @property
    def unregistered_plugins(self) -> frozenset[str]:
        """Device resources whose plugin is not registered now: not yet back after a restart,
        or disconnected by the ``plugin_disconnect`` fault."""
        down = self._unregistered
        if self.faults.plugin_disconnect:
            down = down | {self.faults.plugin_disconnect}
        return down

    def set_faults(self, changes: dict[str, Any]) -> None:
        """Change fault switches after checking them against this node (``ValueError``)."""
        resource = changes.get("plugin_disconnect", "") if isinstance(changes, dict) else ""
        if resource and resource not in self.state.device_resources:
            known = ", ".join(self.state.device_resources) or "none"
            raise ValueError(f"plugin_disconnect: no device plugin serves {resource!r} on this "
                             f"node (resources: {known})")
        self.faults.update(changes)

    def _sync_plugins(self) -> None:
        self.state.unregistered = self.unregistered_plugins

    def churn(self, count: int) -> tuple[list[str], list[str]]:
        self._sync_plugins()
        return self.state.churn(count)

    async def keep_state_files(self, directory: str | os.PathLike[str],
                               period: float = 0.05) -> None:
        """Rewrite kubelet-like state files under ``directory`` whenever assignments change,
        as the kubelet's CPU, memory, device and DRA managers do (for ``--watch-path``)."""
        written = None
        while True:
            if self.state.version != written:
                written = self.state.version
                write_state_files(self.state, Path(directory))
            await asyncio.sleep(period)

    # ---- request handling ----------------------------------------------------------------

    def _v1_handler(self) -> grpc.GenericRpcHandler:
        def method(name: str, request_type: Any, produce: Producer) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(f"/v1.PodResourcesLister/{name}", produce, v1_service=True),
                request_deserializer=request_type.FromString,
                response_serializer=_to_bytes)
        return grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": method("List", v1.ListPodResourcesRequest, self._list_v1),
            "GetAllocatableResources": method("GetAllocatableResources",
                                              v1.AllocatableResourcesRequest, self._allocatable),
            "Get": method("Get", v1.GetPodResourcesRequest, self._get),
        })

    def _v1alpha1_handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler("v1alpha1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                self._wrap("/v1alpha1.PodResourcesLister/List", self._list_v1alpha1,
                           v1_service=False),
                request_deserializer=v1alpha1.ListPodResourcesRequest.FromString,
                response_serializer=_to_bytes),
        })

    def _wrap(self, path: str, produce: Producer, v1_service: bool) -> Any:
        async def handler(request: Any, context: grpc.aio.ServicerContext) -> Any:
            stats = self.stats
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                return await answer(request, context)
            finally:
                stats.in_flight -= 1

        async def answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                if v1_service and not (self.faults.v1 and self.spec.feature("V1")):
                    # grpc-go answers an unregistered service before any interceptor runs
                    raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                                 "unknown service v1.PodResourcesLister")
                if self.faults.rate_limit_storm or not self.limiter.allow():
                    raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)
                if self.faults.slow_seconds > 0:
                    await asyncio.sleep(self.faults.slow_seconds)
                self._sync_plugins()
                reply = produce(request)
            except _Abort as abort:
                self.stats.add(path, abort.code.name)
                await context.abort(abort.code, abort.details)
            self.stats.add(path, "OK")
            return reply
        return handler

    def _list_v1(self, request: Any) -> bytes:
        if self.faults.garbage == "bytes":
            return b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        if self.faults.garbage == "inconsistent":
            return bytes(hostile_list(self.rng, self.state).SerializeToString())
        active_only = self.spec.feature("ListActivePodsOnly")
        key = (self.state.version, self._next_variant(), active_only, True)
        reply = self._cache.get(key)
        if reply is None:
            if len(self._cache) > 4 * _REPLY_VARIANTS:
                self._cache.clear()
            message = v1.ListPodResourcesResponse(pod_resources=[
                self._pod_v1(p, listing=True) for p in self._pod_order(active_only)])
            reply = self._cache[key] = message.SerializeToString()
        if self.faults.oversize_bytes > len(reply):
            padding = v1.PodResources(namespace="padding", name="x" * self.faults.oversize_bytes)
            reply += v1.ListPodResourcesResponse(pod_resources=[padding]).SerializeToString()
        return reply

    def _next_variant(self) -> int:
        self._variant = (self._variant + 1) % _REPLY_VARIANTS
        return self._variant

    def _pod_order(self, active_only: bool) -> list[SimPod]:
        """The listed pods in random order: the kubelet builds the list from a Go map."""
        pods = self.state.listed_pods(active_only)
        self.rng.shuffle(pods)
        return pods

    def _allocatable(self, request: Any) -> bytes:
        mode = self.faults.get_allocatable
        if mode == "unimplemented" or not self.spec.feature("GetAllocatable"):
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                         "unknown method GetAllocatableResources for service v1.PodResourcesLister")
        if mode == "disabled" or not self.spec.feature("GetAllocatableEnabled"):
            raise _Abort(grpc.StatusCode.UNKNOWN,
                         "Pod Resources API GetAllocatableResources disabled")
        if self.faults.garbage == "bytes":
            return b"\x0a\xff\xff\xff\xff\x0f"
        allocatable = self.state.allocatable()  # healthy devices of registered plugins
        entries = _device_entries(go_map_order(allocatable.devices, self.rng))
        return bytes(v1.AllocatableResourcesResponse(
            devices=entries,
            cpu_ids=allocatable.cpu_ids,
            memory=[_memory_v1(b) for b in allocatable.memory],
        ).SerializeToString())

    def _get(self, request: Any) -> bytes:
        mode = self.faults.get
        if mode == "unimplemented" or not self.spec.feature("Get"):
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                         "unknown method Get for service v1.PodResourcesLister")
        if mode == "disabled" or not self.spec.feature("GetEnabled"):
            raise _Abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        # Get looks the pod up among every pod the kubelet knows, terminated ones included.
        sim = self.state.pods.get((request.pod_namespace, request.pod_name))
        if sim is None:
            raise _Abort(grpc.StatusCode.UNKNOWN,
                         f"pod {request.pod_name} in namespace {request.pod_namespace} not found")
        return bytes(v1.GetPodResourcesResponse(
            pod_resources=self._pod_v1(sim)).SerializeToString())

    def _list_v1alpha1(self, request: Any) -> bytes:
        """v1alpha1 ``List`` lists every pod the kubelet knows (terminated ones without
        devices, garbage-collected first) and only ``spec.containers`` (no sidecars). Its
        device entries are the v1 ones converted one to one, so the per-NUMA entries survive
        without topology: a device local to two NUMA nodes repeats its id."""
        pods = []
        for sim in self._pod_order(active_only=False):
            sidecars = {c.name for c in sim.spec.sidecars}
            containers = []
            for c in sim.assignment.containers:
                if c.name in sidecars:
                    continue
                devices = () if not sim.spec.active else go_map_order(c.devices, self.rng)
                containers.append(v1alpha1.ContainerResources(name=c.name, devices=[
                    v1alpha1.ContainerDevices(resource_name=e.resource_name,
                                              device_ids=e.device_ids)
                    for e in _device_entries(devices)]))
            pods.append(v1alpha1.PodResources(name=sim.assignment.name,
                                              namespace=sim.assignment.namespace,
                                              containers=containers))
        return bytes(v1alpha1.ListPodResourcesResponse(pod_resources=pods).SerializeToString())

    def _pod_v1(self, sim: SimPod, listing: bool = False) -> v1.PodResources:
        """One pod as ``List`` (``listing``) or ``Get`` reports it. ``List`` runs the device
        manager's ``UpdateAllocatedDevices`` first, which drops the devices of pods no longer
        active; ``Get`` does not, so it may still show them."""
        assignment: PodAssignment = sim.assignment
        sidecars = {c.name for c in sim.spec.sidecars}
        with_sidecars = self.spec.feature("Sidecars")
        with_dra = self.spec.feature("DynamicResources")
        collected = listing and not sim.spec.active
        containers = []
        for container in assignment.containers:
            if container.name in sidecars and not with_sidecars:
                continue
            devices = [] if collected else _device_entries(
                go_map_order(container.devices, self.rng))
            dynamic = []
            if with_dra:
                for (claim_name, claim_namespace), resources in _claim_entries(
                        container.dra_devices):
                    dynamic.append(v1.DynamicResource(
                        claim_name=claim_name, claim_namespace=claim_namespace,
                        claim_resources=_rotated(resources, self.rng)))
            containers.append(v1.ContainerResources(
                name=container.name, devices=devices, cpu_ids=container.cpu_ids,
                memory=[_memory_v1(b) for b in container.memory],
                dynamic_resources=dynamic))
        pod = v1.PodResources(name=assignment.name, namespace=assignment.namespace,
                              containers=containers)
        if self.spec.feature("PodLevelResources"):
            pod.cpu_ids.extend(assignment.cpu_ids)
            pod.memory.extend(_memory_v1(b) for b in assignment.memory)
        return pod

    def describe(self) -> dict[str, Any]:
        """State for the control endpoint and for humans."""
        return {
            "profile": self.spec.name,
            "socket": str(self.socket_path),
            "running": self.running,
            "restarts": self.restarts,
            "pods": len(self.state.pods),
            "faults": asdict(self.faults),
            "device_plugins": {resource: resource not in self.unregistered_plugins
                               for resource in self.state.device_resources},
            "calls": self.stats.by_code(),
        }


def _claim_entries(dra_devices: Any) -> list[tuple[tuple[str, str], list[v1.ClaimResource]]]:
    """A container's DRA devices as ``DynamicResource`` entries: one per claim the container
    names, and the whole entry again each time it names the claim again (the kubelet appends
    the claim's info once per matching entry of ``resources.claims``; SPEC section 2, fact 7).
    A device already in the claim's latest entry starts the claim's next entry."""
    entries: list[tuple[tuple[str, str], list[v1.ClaimResource]]] = []
    latest: dict[tuple[str, str], tuple[set[Any], list[Any]]] = {}
    for dra in dra_devices:
        claim = (dra.claim_name, dra.claim_namespace)
        device = (dra.driver, dra.pool, dra.device, dra.share_id)
        held = latest.get(claim)
        if held is None or device in held[0]:
            held = latest[claim] = (set(), [])
            entries.append((claim, held[1]))
        held[0].add(device)
        held[1].append(v1.ClaimResource(
            cdi_devices=[v1.CDIDevice(name=n) for n in dra.cdi_devices],
            driver_name=dra.driver, pool_name=dra.pool, device_name=dra.device,
            share_id=dra.share_id))
    return entries


def _rotated(items: Sequence[T], rng: random.Random) -> list[T]:
    """Go iterates a small map from a random slot, wrapping around: a random rotation."""
    if len(items) < 2:
        return list(items)
    start = rng.randrange(len(items))
    return [*items[start:], *items[:start]]


def go_map_order(devices: tuple[DeviceEntry, ...], rng: random.Random) -> list[DeviceEntry]:
    """Devices in the order the kubelet emits them: it walks ``map[resource]map[deviceID]``,
    so resources come in a rotated order and each resource's devices in a rotated order."""
    by_resource: dict[str, list[DeviceEntry]] = {}
    for device in devices:
        by_resource.setdefault(device.resource, []).append(device)
    ordered: list[DeviceEntry] = []
    for resource in _rotated(list(by_resource), rng):
        ordered.extend(_rotated(by_resource[resource], rng))
    return ordered


def write_state_files(state: NodeState, directory: Path) -> None:
    """``cpu_manager_state``, ``memory_manager_state``, ``dra_manager_state`` and
    ``device-plugins/kubelet_internal_checkpoint``, shaped like the kubelet's checkpoints and
    replaced atomically (write, then rename), as its checkpoint manager does."""
    from ..topology import format_cpulist

    cpus: dict[str, Any] = {}
    memory: dict[str, Any] = {}
    devices: list[Any] = []
    claims: dict[str, Any] = {}
    for (namespace, name), pod in state.pods.items():
        uid = f"{namespace}/{name}"
        for container in pod.assignment.containers:
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
                                 "entries": memory},
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


def _to_bytes(reply: Any) -> bytes:
    return reply if isinstance(reply, bytes) else bytes(reply.SerializeToString())


def _topology(numa_ids: Iterable[int]) -> v1.TopologyInfo:
    return v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in numa_ids])


def _memory_v1(block: MemoryBlock) -> v1.ContainerMemory:
    message = v1.ContainerMemory(memory_type=block.memory_type, size=block.size)
    if block.numa_ids is not None:
        message.topology.CopyFrom(_topology(block.numa_ids))
    return message


def _device_entries(devices: Any) -> list[v1.ContainerDevices]:
    """The kubelet's shape: one entry per device per NUMA node, each with that one node; one
    entry without topology for a device without topology; none for a device whose topology
    names no NUMA node (``GetAllocatableResources`` converts such a registration as is; an
    assigned one is held without topology, see ``NodeState``)."""
    entries = []
    for device in devices:
        for device_id in device.device_ids:
            if device.numa_ids is None:
                entries.append(v1.ContainerDevices(resource_name=device.resource,
                                                   device_ids=[device_id]))
                continue
            for numa_id in device.numa_ids:
                entries.append(v1.ContainerDevices(resource_name=device.resource,
                                                   device_ids=[device_id],
                                                   topology=_topology([numa_id])))
    return entries


def hostile_list(rng: random.Random, state: NodeState) -> v1.ListPodResourcesResponse:
    """A List reply full of things a kubelet should never say (but an exporter must survive).

    CPUs held by two pods, CPUs and NUMA ids sysfs does not know, negative ids, empty and
    repeated names, devices with an empty topology, memory blocks far beyond allocatable,
    pod-level blocks smaller than the containers', and huge numbers.
    """
    cpus = sorted(state.cpu_numa) or [0]
    max_numa = max(state.numa_ids, default=0)
    pods = []
    for index in range(rng.randint(3, 12)):
        containers = []
        for c in range(rng.randint(0, 3)):
            shared = rng.sample(cpus, k=min(len(cpus), rng.randint(0, 4)))
            containers.append(v1.ContainerResources(
                name=rng.choice(["", "app", "app", f"c{c}"]),
                cpu_ids=shared + rng.choice([[], [-1], [10**9], [cpus[0], cpus[0]]]),
                devices=[v1.ContainerDevices(
                    resource_name=rng.choice(["", "vendor.com/dev", "nvidia.com/gpu"]),
                    device_ids=rng.choice([[], [""], ["dev-0"], ["dev-0", "dev-0"], ["dev-1"]]),
                    topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in rng.choice(
                        [[], [0], [-3], [max_numa + 5], [0, 0], [1, 0, max_numa + 1]])]))
                    for _ in range(rng.randint(0, 4))],
                memory=[v1.ContainerMemory(
                    memory_type=rng.choice(["", "memory", "hugepages-2Mi", "hugepages-1Gi"]),
                    size=rng.choice([0, 1, 1 << 30, (1 << 64) - 1]),
                    topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in rng.choice(
                        [[], [0], [0, 1], [-1], [max_numa + 2]])]))
                    for _ in range(rng.randint(0, 2))],
                dynamic_resources=[v1.DynamicResource(
                    claim_name=rng.choice(["", "claim"]), claim_namespace="ns",
                    claim_resources=[v1.ClaimResource(
                        driver_name=rng.choice(["", "drv.example.com"]),
                        pool_name=rng.choice(["", "pool"]), device_name=rng.choice(["", "d0"]),
                        cdi_devices=[v1.CDIDevice(name="x=y")] * rng.randint(0, 3))])]
                if rng.random() < 0.3 else []))
        pods.append(v1.PodResources(
            name=rng.choice(["", "pod", f"pod-{index}", "pod-1"]),
            namespace=rng.choice(["", "default", "ns"]),
            containers=containers,
            cpu_ids=rng.sample(cpus, k=min(len(cpus), rng.randint(0, 3))),
            memory=[v1.ContainerMemory(memory_type="memory", size=rng.choice([0, 1, 1 << 20]),
                                       topology=_topology([0]))] if rng.random() < 0.3 else []))
    return v1.ListPodResourcesResponse(pod_resources=pods)
