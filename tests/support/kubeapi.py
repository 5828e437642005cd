"""The cluster the Kubernetes-API view's tests run against: a node, its pods and the
ResourceSlices of a DRA driver put in the API server (the real one, or the fake where a test
needs it), the simulated kubelet beside it, and the scrape that says the view has synced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

from .harness import Scrape, small_profile
from .kubeobjects import container, node, pod, resource_slice

NODE = "test-node"
DONGLE = "example.com/dongle"
AKRI_A, AKRI_B = "akri.sh/zeroconf-a1b2c3", "akri.sh/zeroconf-d4e5f6"
GPU_DRA = "gpu.example.com"


def dongles(n: int, restart_policy: str | None = None, name: str = "c") -> dict:
    """A container asking for ``n`` dongles and a CPU."""
    return container(name, {DONGLE: str(n), "cpu": "1"}, restart_policy)


def kubelet_profile(**overrides) -> dict:
    """The simulated kubelet: two GPUs served by a device plugin, one pod holding one."""
    profile = small_profile(
        devices=[{"resource": "nvidia.com/gpu", "count": 2, "numa": [0]}],
        pods=[{"namespace": "ml", "name": "trainer",
               "containers": [{"name": "c", "cpus": 1, "devices": {"nvidia.com/gpu": 1}}]}])
    profile.update(overrides)
    return profile


class ApiServer(Protocol):
    """What a test writes through: the real API server's ``RealApi`` or the fake."""

    def put(self, collection: str, obj: dict[str, Any]) -> Any: ...


def cluster(server: ApiServer, name: str = NODE) -> None:
    """The node as an operator knows it: a patched dongle resource, a dead Akri plugin's
    entries, a device plugin's GPUs, a QAT resource whose plugin is gone; pods using dongles
    (one through an init container and a sidecar; a finished one not counting); a DRA driver
    that published two generations of its pool, and a slice of another node."""
    server.put("nodes", node(name, {DONGLE: "4", AKRI_A: "0", AKRI_B: "0", "nvidia.com/gpu": "2",
                                    "intel.com/qat": "8"}))
    server.put("pods", pod("ml", "trainer", name, [container("c", {"nvidia.com/gpu": "1",
                                                                   DONGLE: "1"})]))
    server.put("pods", pod("ml", "etl", name, [dongles(1, name="main")],
                           [dongles(1, "Always", "proxy"), dongles(2, name="fetch")]))
    server.put("pods", pod("ml", "done", name, [dongles(2)], phase="Succeeded"))
    server.put("pods", pod("ml", "elsewhere", "other-node", [dongles(3)]))
    server.put("resourceslices", resource_slice("old", name, GPU_DRA, name,
                                                [f"g{i}" for i in range(8)], 1))
    server.put("resourceslices", resource_slice("new-0", name, GPU_DRA, name, ["g0", "g1"], 2, 2))
    server.put("resourceslices", resource_slice("new-1", name, GPU_DRA, name, ["g2"], 2, 2))
    server.put("resourceslices", resource_slice("nics", name, "nic.example.com", "nics",
                                                ["n0", "n1", "n2", "n3"]))
    server.put("resourceslices", resource_slice("far", "other-node", GPU_DRA, "other-node",
                                                ["g0", "g1"]))


def synced(scrape: Scrape) -> bool:
    """Every watched resource up, and the kubelet too."""
    return scrape.by("podresources_kube_api_up", "resource") == {
        "node": 1, "pods": 1, "resourceslices": 1, "devicetaintrules": 1} \
        and scrape.get("podresources_up") == 1


async def until(predicate: Callable[[], object], timeout: float = 10.0,
                what: str = "condition") -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
