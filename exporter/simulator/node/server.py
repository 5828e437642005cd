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
  ``RESOURCE_EXHAUSTED`` "rejected by rate limit";
* with ``pods_api_socket``, the kubelet's local Pods API on that socket too
  (:mod:`exporter.simulator.podsapi.server`), started, stopped and restarted with
  podresources.

Fault switches (``Faults``) make it misbehave on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from ..._proto.v1 import api_pb2 as v1
from ..._proto.v1alpha1 import api_pb2 as v1alpha1
from ...model import PodAssignment
from .allocator import SimPod
from .book import SimulatedNode
from .checkpoints import write_state_files
from .faults import DEFAULT_BURST, DEFAULT_QPS, CallStats, Faults, TokenBucket
from .wire import (
    claim_entries,
    device_entries,
    go_map_order,
    hostile_list,
    memory_v1,
    rotated,
    to_bytes,
)

if TYPE_CHECKING:
    from ..podsapi.server import PodsApiServer

log = logging.getLogger(__name__)

# Device plugins notice a restarted kubelet (its registration socket re-created) and register
# again within seconds; until then the kubelet lists none of their devices as allocatable.
DEFAULT_REREGISTER_SECONDS = 3.0
RATE_LIMIT_MESSAGE = "rejected by rate limit"
_REPLY_VARIANTS = 4  # differently ordered List replies cached per state version

Producer = Callable[[Any], bytes]  # a request -> the encoded reply


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        self.code = code
        self.details = details


class Simulator:
    """A simulated kubelet podresources endpoint on ``socket_path``."""

    def __init__(self, state: SimulatedNode, socket_path: str | os.PathLike[str],
                 faults: Faults | None = None, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST,
                 reregister_seconds: float = DEFAULT_REREGISTER_SECONDS,
                 pods_api_socket: str | os.PathLike[str] | None = None):
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
        self.pods_api: PodsApiServer | None = None
        if pods_api_socket is not None:
            from ..podsapi.server import PodsApiServer
            self.pods_api = PodsApiServer(state, pods_api_socket, self.faults, self.stats,
                                          qps, burst)

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
        if self.pods_api is not None:
            await self.pods_api.start()
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
        if self.pods_api is not None:
            await self.pods_api.stop()

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
                response_serializer=to_bytes)
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
                response_serializer=to_bytes),
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
        entries = device_entries(go_map_order(allocatable.devices, self.rng))
        return bytes(v1.AllocatableResourcesResponse(
            devices=entries,
            cpu_ids=allocatable.cpu_ids,
            memory=[memory_v1(b) for b in allocatable.memory],
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
                    for e in device_entries(devices)]))
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
            devices = [] if collected else device_entries(
                go_map_order(container.devices, self.rng))
            dynamic = []
            if with_dra:
                for (claim_name, claim_namespace), resources in claim_entries(
                        container.dra_devices):
                    dynamic.append(v1.DynamicResource(
                        claim_name=claim_name, claim_namespace=claim_namespace,
                        claim_resources=rotated(resources, self.rng)))
            containers.append(v1.ContainerResources(
                name=container.name, devices=devices, cpu_ids=container.cpu_ids,
                memory=[memory_v1(b) for b in container.memory],
                dynamic_resources=dynamic))
        pod = v1.PodResources(name=assignment.name, namespace=assignment.namespace,
                              containers=containers)
        if self.spec.feature("PodLevelResources"):
            pod.cpu_ids.extend(assignment.cpu_ids)
            pod.memory.extend(memory_v1(b) for b in assignment.memory)
        return pod

    def describe(self) -> dict[str, Any]:
        """State for the control endpoint and for humans."""
        return {
            "profile": self.spec.name,
            "socket": str(self.socket_path),
            "pods_api_socket": str(self.pods_api.socket_path) if self.pods_api else None,
            "running": self.running,
            "restarts": self.restarts,
            "pods": len(self.state.pods),
            "faults": asdict(self.faults),
            "device_plugins": {resource: resource not in self.unregistered_plugins
                               for resource in self.state.device_resources},
            "calls": self.stats.by_code(),
        }


