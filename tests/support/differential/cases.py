"""Seeded random cases for the differential fit test: a node, a kubelet configuration, the pods
already on the node, and a candidate pod shape.

Case ``n`` of seed ``s`` is drawn from ``random.Random(f"{s}:{n}")`` alone, so any case is
rebuilt from its two numbers. Nodes are simulator profiles (2 to 8 NUMA nodes, SMT on or off,
reserved CPUs, memory and hugepages, device resources of every topology form: NUMA-local,
multi-NUMA, topology-less, a topology naming no NUMA node, unhealthy devices), which
:func:`tests.support.realkubelet.node_description` spells out for the real kubelet. Pods are
written once, as ``v1.Pod`` manifests, and the candidate also as a ``--fit-shapes`` shape.
Nothing here knows what the answer should be: the real kubelet says that.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from exporter.simulator.profile import NodeSpec, parse_profile

from .kubeletconfig import KubeletDraw, draw_kubelet
from .layouts import draw_layout

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")
MiB, GiB = 1 << 20, 1 << 30


@dataclass(frozen=True)
class ContainerDraw:
    name: str
    kind: str  # init, sidecar or app
    cpu_millis: int  # 0: none
    memory: int  # bytes, 0: none
    hugepages: dict[str, int]  # hugepages-2Mi / hugepages-1Gi -> bytes
    devices: dict[str, int]


@dataclass(frozen=True)
class PodDraw:
    name: str
    qos: str
    containers: tuple[ContainerDraw, ...]  # init containers (and sidecars) in order, then apps
    start: bool = True  # started after admission (else left Pending)
    # pod-level resources (.spec.resources, requests equal to limits): kubeletconfig.py
    pod_level: dict[str, str] = field(default_factory=dict)

    def manifest(self, name: str | None = None, namespace: str = "default") -> dict[str, Any]:
        """The pod as the API server hands it to the kubelet."""
        init, app = [], []
        for c in self.containers:
            entry: dict[str, Any] = {"name": c.name, "image": "pause",
                                     "resources": _resources(self.qos, c)}
            if c.kind == "sidecar":
                entry["restartPolicy"] = "Always"
            (app if c.kind == "app" else init).append(entry)
        spec: dict[str, Any] = {"containers": app, "initContainers": init}
        if self.pod_level:
            spec["resources"] = {"requests": dict(self.pod_level),
                                 "limits": dict(self.pod_level)}
        return {"metadata": {"name": name or self.name, "namespace": namespace},
                "spec": spec, "status": {"phase": "Pending"}}

    def shape(self) -> dict[str, Any]:
        """The same pod as a ``--fit-shapes`` shape."""
        def requests(c: ContainerDraw) -> dict[str, Any]:
            out: dict[str, Any] = {"name": c.name}
            if c.cpu_millis:
                out["cpu"] = f"{c.cpu_millis}m"
            if c.memory:
                out["memory"] = c.memory
            out.update(c.hugepages)
            out.update(c.devices)
            if c.kind == "sidecar":
                out["sidecar"] = True
            return out

        shape: dict[str, Any] = {"qos": self.qos,
                                 "containers": [requests(c) for c in self.containers
                                                if c.kind == "app"]}
        inits = [requests(c) for c in self.containers if c.kind != "app"]
        if inits:
            shape["initContainers"] = inits
        return shape


def _resources(qos: str, c: ContainerDraw) -> dict[str, dict[str, str]]:
    compute: dict[str, str] = {}
    if c.cpu_millis:
        compute["cpu"] = f"{c.cpu_millis}m"
    if c.memory:
        compute["memory"] = str(c.memory)
    compute.update({k: str(v) for k, v in c.hugepages.items()})
    devices = {k: str(v) for k, v in c.devices.items()}
    if qos == "Guaranteed":
        return {"requests": {**compute, **devices}, "limits": {**compute, **devices}}
    resources: dict[str, dict[str, str]] = {}
    if compute or devices:
        resources["requests"] = {**compute, **devices}
    limits = dict(devices)
    if compute.keys() & {k for k in compute if k.startswith("hugepages-")}:
        limits.update({k: v for k, v in compute.items() if k.startswith("hugepages-")})
    if limits:
        resources["limits"] = limits
    return resources


@dataclass(frozen=True)
class Case:
    seed: int
    index: int
    profile: dict[str, Any]  # a simulator profile: the node and the kubelet configuration
    pods: tuple[PodDraw, ...]  # admitted (or refused) in order before the question
    candidate: PodDraw
    kubelet: KubeletDraw = field(default_factory=KubeletDraw)  # kubeletconfig.py

    @property
    def spec(self) -> NodeSpec:
        return parse_profile(self.profile)

    def describe(self) -> str:
        p = self.profile
        layout = p.get("cpu_layout", {})
        cpuless = sum(1 for n in p["numa_nodes"] if not n["cpus"])
        return (f"seed {self.seed} case {self.index}: {len(p['numa_nodes'])} NUMA nodes"
                f"{f' ({cpuless} without CPUs)' if cpuless else ''}, "
                f"{len(layout.get('sockets', {})) or len(p['numa_nodes'])} sockets, "
                f"{len(layout.get('l3', {}))} L3 caches"
                f"{', core_id per die' if layout.get('core_id_per_die') else ''}, "
                f"{p.get('threads_per_core', 1)} threads/core, policy "
                f"{p['topology_manager_policy']}, scope {p['topology_manager_scope']}, CPU "
                f"{p['cpu_manager_policy']} {p.get('cpu_manager_policy_options', {})}, memory "
                f"{p['memory_manager_policy']}, {len(self.pods)} pods before")


def draw_case(seed: int, index: int) -> Case:
    rng = random.Random(f"{seed}:{index}")
    profile = _node(rng)
    resources = [d["resource"] for d in profile.get("devices", [])]
    hugepage_types = sorted({f"hugepages-{size}" for n in profile["numa_nodes"]
                             for size in n.get("hugepages", {})})
    pods = tuple(_pod(rng, f"pod-{i}", resources, hugepage_types, profile)
                 for i in range(rng.choice((0, 1, 2, 3, 4, 5, 6, 8))))
    candidate = _pod(rng, "candidate", resources, hugepage_types, profile, start=False)
    profile, kubelet, pods = draw_kubelet(seed, index, profile, pods)
    return Case(seed, index, profile, pods, candidate, kubelet)


def _node(rng: random.Random) -> dict[str, Any]:
    numa_count = rng.choice((2, 2, 2, 3, 4, 4, 6, 8))
    threads = rng.choice((1, 2))
    cores = rng.choice((2, 3, 4, 6))
    per_numa = cores * threads
    total = per_numa * numa_count
    numa_nodes = []
    for n in range(numa_count):
        first = list(range(n * cores, (n + 1) * cores))
        cpus = first + [c + total // threads for c in first] if threads == 2 else first
        hugepages = {}
        if rng.random() < 0.5:
            hugepages["2Mi"] = rng.choice((256, 512, 1024))
        if rng.random() < 0.3:
            hugepages["1Gi"] = rng.choice((1, 2, 4))
        numa_nodes.append({"id": n, "cpus": ",".join(map(str, cpus)),
                           "memory": f"{rng.choice((4, 6, 8, 12))}Gi", "hugepages": hugepages})
    if rng.random() < 0.5:  # distances: 10 to itself, a symmetric table otherwise
        table = [[10] * numa_count for _ in range(numa_count)]
        for a in range(numa_count):
            for b in range(a + 1, numa_count):
                table[a][b] = table[b][a] = rng.choice((11, 12, 20, 21, 32))
        for n, row in zip(numa_nodes, table, strict=True):
            n["distances"] = row
    cpu_static = rng.random() < 0.85
    memory_static = rng.random() < 0.8
    reserved = sorted(rng.sample(range(total), rng.choice((1, 1, 2))))
    profile: dict[str, Any] = {
        "name": "differential", "node_name": "differential-node", "kubernetes_version": "1.37",
        "numa_nodes": numa_nodes, "threads_per_core": threads,
        "cpu_manager_policy": "static" if cpu_static else "none",
        "reserved_cpus": ",".join(map(str, reserved)) if cpu_static else "",
        "memory_manager_policy": "Static" if memory_static else "None",
        "topology_manager_policy": rng.choice(POLICIES),
        "topology_manager_scope": rng.choice(SCOPES),
        "devices": _devices(rng, numa_count),
    }
    if memory_static:
        reserved_size = f"{rng.choice((256, 512, 1024))}Mi"
        reserved_memory: dict[str, dict[str, str]] = {"0": {"memory": reserved_size}}
        if numa_count > 2 and rng.random() < 0.3:
            reserved_memory[str(numa_count - 1)] = {"memory": "256Mi"}
        profile["reserved_memory"] = reserved_memory
    cpu_options = {}
    if cpu_static and rng.random() < 0.3:
        cpu_options["full-pcpus-only"] = "true"
    if cpu_options:
        profile["cpu_manager_policy_options"] = cpu_options
    if profile["topology_manager_policy"] in ("best-effort", "restricted") and rng.random() < 0.4:
        profile["topology_manager_policy_options"] = {"prefer-closest-numa-nodes": "true"}
    draw_layout(rng, profile, cores, threads)  # sockets, L3, CPU-less nodes, CPU options
    return profile


def _devices(rng: random.Random, numa_count: int) -> list[dict[str, Any]]:
    groups = []
    for index in range(rng.choice((0, 1, 1, 2, 3))):
        resource = f"example.com/dev{index}"
        form = rng.choice(("local", "local", "multi", "none", "mixed"))
        group: dict[str, Any] = {"resource": resource, "id_prefix": f"d{index}-"}
        if form == "local":
            group["per_numa"] = {str(n): rng.choice((0, 1, 2, 3)) for n in range(numa_count)}
        elif form == "multi":
            first = rng.randrange(numa_count - 1)
            group["numa"] = [first, first + 1]
            group["count"] = rng.choice((1, 2, 4))
        elif form == "none":
            group["count"] = rng.choice((1, 2, 3))
        else:  # a resource with a topology-aware part and a topology-less part
            groups.append({"resource": resource, "id_prefix": f"d{index}x-",
                           "count": rng.choice((1, 2))})
            group["per_numa"] = {str(n): rng.choice((0, 1, 2)) for n in range(numa_count)}
        total = sum(group.get("per_numa", {}).values()) + group.get("count", 0)
        if total and rng.random() < 0.3:
            group["unhealthy"] = 1
        if total:
            groups.append(group)
    return groups


def _pod(rng: random.Random, name: str, resources: list[str], hugepage_types: list[str],
         profile: dict[str, Any], start: bool = True) -> PodDraw:
    qos = rng.choices(("Guaranteed", "Burstable", "BestEffort"), (0.75, 0.18, 0.07))[0]
    if qos == "BestEffort" and not start and not resources:
        qos = "Burstable"  # a shape's container must ask for something: here, a device
    kinds = ["app"] * rng.choice((1, 1, 1, 2, 3))
    extra = rng.choice(((), (), ("init",), ("sidecar",), ("init", "sidecar"), ("sidecar", "init"),
                        ("init", "init")))
    containers = []
    for i, kind in enumerate([*extra, *kinds]):
        container = _container(rng, f"{kind}-{i}", kind, qos, resources, hugepage_types)
        if not start and not (container.cpu_millis or container.memory or container.hugepages
                              or container.devices):
            # the candidate is asked as a --fit-shapes shape, whose containers ask for something
            container = replace(container, devices={rng.choice(resources): 1}) if resources \
                else replace(container, cpu_millis=500)
        containers.append(container)
    return PodDraw(name, qos, tuple(containers), start and rng.random() < 0.85)


def _container(rng: random.Random, name: str, kind: str, qos: str, resources: list[str],
               hugepage_types: list[str]) -> ContainerDraw:
    cpu = memory = 0
    hugepages: dict[str, int] = {}
    if qos != "BestEffort":
        cpu = rng.choice((1000, 1000, 2000, 2000, 3000, 4000, 500, 1500))
        memory = rng.choice((128, 256, 512, 1024, 2048)) * MiB
        if qos == "Burstable" and rng.random() < 0.3:
            memory = 0
        if hugepage_types and rng.random() < 0.25:
            kind_of_pages = rng.choice(hugepage_types)
            hugepages[kind_of_pages] = (rng.choice((64, 128, 256)) * MiB
                                        if kind_of_pages == "hugepages-2Mi" else GiB)
    devices = {}
    if resources and rng.random() < 0.35:
        devices[rng.choice(resources)] = rng.choice((1, 1, 2))
    return ContainerDraw(name, kind, cpu, memory, hugepages, devices)
