"""The kubelet configuration a differential case draws beside its node: what real nodes set
and the older draw never did.

- **Reservations** as real nodes write them: ``systemReserved`` and ``kubeReserved`` (CPU in
  millicores, memory), the hard eviction threshold left out (the kubelet's default
  ``memory.available<100Mi``), set to another quantity, to a percentage (with the memory
  manager ``None``: a ``Static`` one would need the byte-exact sum in ``reservedMemory``) or to
  none; ``reservedSystemCPUs`` kept (it overrides both reservations' CPU) or dropped (the
  static CPU manager then reserves ``ceil(cpu)`` CPUs it picks itself).
- **Per-NUMA reserved memory** (memory manager ``Static``): the reservation's total, which the
  memory manager requires to equal ``systemReserved`` + ``kubeReserved`` + the eviction
  threshold, laid out on NUMA node 0, evenly over every node, over the first and last, or in
  random shares.
- **maxPods** tight enough that the pods before and a copy or two of the candidate reach it
  (``OutOfpods``).
- **Feature gates** that change what admission or ``List`` does: ``KubeletPodResourcesListUse
  ActivePods`` off (``List`` shows inactive pods again: a rejected pod's leftovers);
  ``PodLevelResourceManagers`` on (1.36, 1.37; the runner leaves it out where the release has
  no such gate) with half the Guaranteed pods before the candidate given pod-level resources
  (on 1.34 and 1.35, and with the gate off, the managers give such pods nothing exclusive).

Drawn from ``random.Random(f"{seed}:{index}:kubelet")``, apart from the node's own stream, so a
case's node and pods are the same with or without it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from exporter.podspec import effective_requests

if TYPE_CHECKING:
    from .cases import ContainerDraw, PodDraw

MiB = 1 << 20


@dataclass(frozen=True)
class KubeletDraw:
    """The description's kubelet fields beyond the node's (``tests/realkubelet/config.go``),
    ``None`` where the older description's are kept."""

    system_reserved: dict[str, str] | None = None
    kube_reserved: dict[str, str] | None = None
    # None with a reservation: left out of the file, the kubelet's default (100Mi)
    eviction_hard: dict[str, str] | None = None
    reservation: bool = False  # the three fields above are the configuration's
    max_pods: int | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)

    def description(self) -> dict[str, Any]:
        """What goes into the node description's ``kubelet`` section."""
        out: dict[str, Any] = {}
        if self.reservation:
            out["system_reserved"] = dict(self.system_reserved or {})
            out["kube_reserved"] = dict(self.kube_reserved or {})
            if self.eviction_hard is not None:
                out["eviction_hard"] = dict(self.eviction_hard)
        return out


def _mib(value: str) -> int:
    amount, unit = int(value[:-2]), value[-2:]
    return amount * (1024 if unit == "Gi" else 1)


def draw_kubelet(seed: int, index: int, profile: dict[str, Any], pods: tuple[PodDraw, ...]
                 ) -> tuple[dict[str, Any], KubeletDraw, tuple[PodDraw, ...]]:
    """The case's profile (its reserved CPUs and memory as the configuration has them), the
    kubelet fields it adds, and its pods (some with pod-level resources)."""
    rng = random.Random(f"{seed}:{index}:kubelet")
    profile = dict(profile)
    max_pods = len(pods) + rng.choice((1, 2, 3)) if rng.random() < 0.2 else None
    gates = {"KubeletPodResourcesListUseActivePods": False} if rng.random() < 0.15 else {}
    if rng.random() < 0.25:
        gates["PodLevelResourceManagers"] = True  # 1.36 (alpha) and 1.37 (beta) have it
        pods = tuple(_pod_level(p) if p.qos == "Guaranteed" and rng.random() < 0.5 else p
                     for p in pods)
    if rng.random() < 0.5:
        return profile, KubeletDraw(max_pods=max_pods, feature_gates=gates), pods
    cpu_static = profile["cpu_manager_policy"] == "static"
    memory_static = profile["memory_manager_policy"] == "Static"
    system = {"cpu": rng.choice(("250m", "500m", "1")), "memory": rng.choice(("256Mi", "512Mi",
                                                                             "1Gi"))}
    kube: dict[str, str] = {}
    if rng.random() < 0.6:
        kube = {"cpu": rng.choice(("100m", "500m")), "memory": rng.choice(("128Mi", "256Mi"))}
    if cpu_static and rng.random() < 0.4:
        profile["reserved_cpus"] = ""  # the CPU manager picks ceil(cpu) CPUs itself
    choices: list[dict[str, str] | None] = [None, None, {"memory.available": "200Mi"}, {}]
    if not memory_static:
        choices.append({"memory.available": rng.choice(("1%", "2.5%", "5%"))})
    eviction = rng.choice(choices)
    if memory_static:
        evicted = 100 if eviction is None else _mib(eviction.get("memory.available", "0Mi"))
        total = _mib(system["memory"]) + _mib(kube.get("memory", "0Mi")) + evicted
        profile["reserved_memory"] = _layout(rng, total, len(profile["numa_nodes"]))
    return profile, KubeletDraw(system, kube, eviction, True, max_pods, gates), pods


def _pod_level(pod: PodDraw) -> PodDraw:
    """``pod`` with pod-level CPU and memory, requests equal to limits (Guaranteed), as large
    as its containers' aggregate request, the CPU rounded up to whole CPUs (the pod's own
    pool of exclusive CPUs under PodLevelResourceManagers). The API server refuses less
    (``validatePodResourceConsistency``: ``resourcehelper.AggregateContainerRequests``, where a
    regular init container counts with the sidecars started before it)."""
    def effective(amount: Callable[[ContainerDraw], int]) -> int:
        apps = ({"r": amount(c)} for c in pod.containers if c.kind == "app")
        inits = (({"r": amount(c)}, c.kind == "sidecar") for c in pod.containers
                 if c.kind != "app")
        return effective_requests(apps, inits).get("r", 0)
    cpu = -(-effective(lambda c: c.cpu_millis) // 1000)
    memory = effective(lambda c: c.memory) or 256 * MiB
    return replace(pod, pod_level={"cpu": str(max(cpu, 1)), "memory": str(memory)})


def _layout(rng: random.Random, total_mib: int, numa_count: int) -> dict[str, dict[str, str]]:
    """The memory manager's reservedMemory: ``total_mib`` over the NUMA nodes."""
    form = rng.choice(("first", "even", "ends", "random"))
    if form == "first" or numa_count == 1:
        shares = {0: total_mib}
    elif form == "ends":
        shares = {0: total_mib - total_mib // 2, numa_count - 1: total_mib // 2}
    elif form == "even":
        shares = {n: total_mib // numa_count for n in range(numa_count)}
        shares[0] += total_mib - sum(shares.values())
    else:
        weights = [rng.randint(0, 3) for _ in range(numa_count)]
        weights[0] += 1
        shares = {n: total_mib * w // sum(weights) for n, w in enumerate(weights)}
        shares[0] += total_mib - sum(shares.values())
    return {str(n): {"memory": f"{mib}Mi"} for n, mib in sorted(shares.items()) if mib}
