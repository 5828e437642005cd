"""The simulated kubelet's podresources gRPC server.

It serves the real ``v1`` and ``v1alpha1`` services on a real unix socket, shaped like the
kubelet's replies (SPEC section 5): one device entry per device per NUMA node in random order,
sidecars before app containers, pod-level ``cpu_ids``/``memory`` overlapping the containers',
healthy devices only in ``GetAllocatableResources``, DRA claims, and one global token bucket
(100 QPS, burst 10) in front of every method answering ``RESOURCE_EXHAUSTED``
"rejected by rate limit". Fault switches (``Faults``) make it misbehave on purpose.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc
import grpc.aio

from .._proto.v1 import api_pb2 as v1
from .._proto.v1alpha1 import api_pb2 as v1alpha1
from ..model import DeviceEntry, MemoryBlock, PodAssignment
from .state import NodeState, SimPod

log = logging.getLogger(__name__)

DEFAULT_QPS = 100.0
DEFAULT_BURST = 10
RATE_LIMIT_MESSAGE = "rejected by rate limit"
_REPLY_VARIANTS = 4  # differently ordered List replies cached per state version


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

    def update(self, changes: dict) -> None:
        for key, value in changes.items():
            if not hasattr(self, key):
                raise ValueError(f"unknown fault {key!r}")
            current = getattr(self, key)
            setattr(self, key, type(current)(value))


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

    def __init__(self, state: NodeState, socket_path: str | os.PathLike,
                 faults: Faults | None = None, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST):
        self.state = state
        self.spec = state.spec
        self.socket_path = Path(socket_path)
        self.faults = faults or Faults()
        self.limiter = TokenBucket(qps, burst)
        self.stats = CallStats()
        self.rng = random.Random(state.spec.seed + 1)
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

    async def stop(self) -> None:
        """Stop serving and remove the socket, as a stopping kubelet does."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    async def restart(self, downtime: float = 1.0) -> None:
        """A kubelet restart: socket removed, and re-created ``downtime`` seconds later."""
        await self.stop()
        await asyncio.sleep(downtime)
        await self.start()

    def churn(self, count: int) -> tuple[list[str], list[str]]:
        return self.state.churn(count)

    async def keep_state_files(self, directory: str | os.PathLike, period: float = 0.05) -> None:
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
        def method(name, request_type, produce):
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

    def _wrap(self, path: str, produce, v1_service: bool):
        async def handler(request, context: grpc.aio.ServicerContext):
            stats = self.stats
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                return await answer(request, context)
            finally:
                stats.in_flight -= 1

        async def answer(request, context: grpc.aio.ServicerContext):
            try:
                if v1_service and not (self.faults.v1 and self.spec.feature("V1")):
                    # grpc-go answers an unregistered service before any interceptor runs
                    raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                                 "unknown service v1.PodResourcesLister")
                if self.faults.rate_limit_storm or not self.limiter.allow():
                    raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)
                if self.faults.slow_seconds > 0:
                    await asyncio.sleep(self.faults.slow_seconds)
                reply = produce(request)
            except _Abort as abort:
                self.stats.add(path, abort.code.name)
                await context.abort(abort.code, abort.details)
            self.stats.add(path, "OK")
            return reply
        return handler

    def _list_v1(self, request) -> bytes:
        if self.faults.garbage == "bytes":
            return b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        if self.faults.garbage == "inconsistent":
            return hostile_list(self.rng, self.state).SerializeToString()
        active_only = self.spec.feature("ListActivePodsOnly")
        key = (self.state.version, self._next_variant(), active_only, True)
        reply = self._cache.get(key)
        if reply is None:
            if len(self._cache) > 4 * _REPLY_VARIANTS:
                self._cache.clear()
            message = v1.ListPodResourcesResponse(pod_resources=[
                self._pod_v1(p) for p in self.state.listed_pods(active_only)])
            reply = self._cache[key] = message.SerializeToString()
        if self.faults.oversize_bytes > len(reply):
            padding = v1.PodResources(namespace="padding", name="x" * self.faults.oversize_bytes)
            reply += v1.ListPodResourcesResponse(pod_resources=[padding]).SerializeToString()
        return reply

    def _next_variant(self) -> int:
        self._variant = (self._variant + 1) % _REPLY_VARIANTS
        return self._variant

    def _allocatable(self, request) -> bytes:
        mode = self.faults.get_allocatable
        if mode == "unimplemented" or not self.spec.feature("GetAllocatable"):
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                         "unknown method GetAllocatableResources for service v1.PodResourcesLister")
        if mode == "disabled" or not self.spec.feature("GetAllocatableEnabled"):
            raise _Abort(grpc.StatusCode.UNKNOWN,
                         "Pod Resources API GetAllocatableResources disabled")
        if self.faults.garbage == "bytes":
            return b"\x0a\xff\xff\xff\xff\x0f"
        allocatable = self.state.allocatable()
        entries = _device_entries(go_map_order(allocatable.devices, self.rng))
        return v1.AllocatableResourcesResponse(
            devices=entries,
            cpu_ids=allocatable.cpu_ids,
            memory=[_memory_v1(b) for b in allocatable.memory],
        ).SerializeToString()

    def _get(self, request) -> bytes:
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
        return v1.GetPodResourcesResponse(pod_resources=self._pod_v1(sim)).SerializeToString()

    def _list_v1alpha1(self, request) -> bytes:
        # v1alpha1 lists every pod the kubelet knows and only spec.containers (no sidecars).
        pods = []
        for sim in self.state.pods.values():
            sidecars = {c.name for c in sim.spec.sidecars}
            pods.append(v1alpha1.PodResources(
                name=sim.assignment.name, namespace=sim.assignment.namespace,
                containers=[v1alpha1.ContainerResources(
                    name=c.name,
                    devices=[v1alpha1.ContainerDevices(resource_name=d.resource,
                                                       device_ids=d.device_ids)
                             for d in c.devices])
                    for c in sim.assignment.containers if c.name not in sidecars]))
        return v1alpha1.ListPodResourcesResponse(pod_resources=pods).SerializeToString()

    def _pod_v1(self, sim: SimPod) -> v1.PodResources:
        assignment: PodAssignment = sim.assignment
        sidecars = {c.name for c in sim.spec.sidecars}
        with_sidecars = self.spec.feature("Sidecars")
        with_dra = self.spec.feature("DynamicResources")
        containers = []
        for container in assignment.containers:
            if container.name in sidecars and not with_sidecars:
                continue
            devices = _device_entries(go_map_order(container.devices, self.rng))
            claims: dict[tuple[str, str], list] = {}
            if with_dra:
                for dra in container.dra_devices:
                    claims.setdefault((dra.claim_name, dra.claim_namespace), []).append(
                        v1.ClaimResource(
                            cdi_devices=[v1.CDIDevice(name=n) for n in dra.cdi_devices],
                            driver_name=dra.driver, pool_name=dra.pool,
                            device_name=dra.device, share_id=dra.share_id))
            dynamic = []
            for (claim_name, claim_namespace), resources in claims.items():
                resources = _rotated(resources, self.rng)
                dynamic.append(v1.DynamicResource(claim_name=claim_name,
                                                  claim_namespace=claim_namespace,
                                                  claim_resources=resources))
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

    def describe(self) -> dict:
        """State for the control endpoint and for humans."""
        return {
            "profile": self.spec.name,
            "socket": str(self.socket_path),
            "running": self.running,
            "pods": len(self.state.pods),
            "faults": asdict(self.faults),
            "calls": self.stats.by_code(),
        }


def _rotated(items: list, rng: random.Random) -> list:
    """Go iterates a small map from a random slot, wrapping around: a random rotation."""
    if len(items) < 2:
        return list(items)
    start = rng.randrange(len(items))
    return items[start:] + items[:start]


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

    cpus: dict = {}
    memory: dict = {}
    devices: list = []
    claims: dict = {}
    for (namespace, name), pod in state.pods.items():
        uid = f"{namespace}/{name}"
        for container in pod.assignment.containers:
            if container.cpu_ids:
                cpus.setdefault(uid, {})[container.name] = format_cpulist(container.cpu_ids)
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
    files = {
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


def _to_bytes(reply) -> bytes:
    return reply if isinstance(reply, bytes) else reply.SerializeToString()


def _topology(numa_ids) -> v1.TopologyInfo:
    return v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in numa_ids])


def _memory_v1(block: MemoryBlock) -> v1.ContainerMemory:
    message = v1.ContainerMemory(memory_type=block.memory_type, size=block.size)
    if block.numa_ids is not None:
        message.topology.CopyFrom(_topology(block.numa_ids))
    return message


def _device_entries(devices: tuple[DeviceEntry, ...]) -> list[v1.ContainerDevices]:
    """The kubelet's shape: one entry per device per NUMA node; none for a topology-less one."""
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
