"""Simulator profiles: a node's hardware, kubelet policies and workloads, as JSON data files.

A profile describes what a cluster operator would know about a node: its NUMA nodes, the
device plugins on it, the kubelet's configuration, and the pods scheduled to it with their
*requests*, in the order the kubelet admitted them. The kubelet's admission (``admitting.py``,
the fit engine's rules) turns requests into concrete CPU ids, memory blocks and device ids, so
profiles stay readable and where a pod lands is what the kubelet decides: a pod admitted
before the node's configuration changed says so (``admitted_under``).

The bundled profiles live in ``profiles/<name>.json``; ``load_profile`` also accepts a path.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..topology import hugepage_resource_name, parse_cpulist
from .cpulayout import CpuLayoutError, CpuLayoutSpec, parse_cpu_layout
from .quantities import (
    ProfileError as ProfileError,
    hugepage_size_bytes,
    millis,
    parse_bytes,
    parse_cpus,
)

PROFILE_NAMES = ("small", "dual-socket-gpu", "epyc-nps4", "large", "huge", "gb200-tray",
                 "dra-cpu")
# Pod phases as the kubelet knows them; Succeeded and Failed are terminal.
PHASES = ("Pending", "Running", "Succeeded", "Failed")
TERMINAL_PHASES = ("Succeeded", "Failed")
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES = ("container", "pod")


@dataclass
class NumaSpec:
    numa_id: int
    cpus: frozenset[int]
    memory_bytes: int
    hugepages: dict[int, int]  # page size in bytes -> pages
    # the node's row of the NUMA distance table, in ascending NUMA id order (sysfs
    # nodeN/distance); empty: 10 to itself, 20 to the others (the ACPI SLIT defaults)
    distances: tuple[int, ...] = ()


@dataclass
class SimDevice:
    resource: str
    device_id: str
    # None: the plugin reports no topology; (): it registered a topology naming no NUMA node
    # (allocated as topology-less, absent from GetAllocatableResources; SPEC section 2, fact 4)
    numa_ids: tuple[int, ...] | None
    healthy: bool = True


@dataclass
class DraPool:
    """A DRA driver's pool on the node. ``published``: what its ResourceSlice says of a device
    beyond its name (``attributes``, ``taints``), as the driver publishes it; the kubelet's
    podresources API never shows it (SPEC section 2 fact 7)."""

    driver: str
    pool: str
    devices: list[str]
    cdi_prefix: str
    published: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ContainerSpec:
    name: str
    cpus: int = 0
    exclusive_cpus: bool = False
    cpu_millis: int = 0  # the request as written: 1500 for "1500m"
    memory: dict[str, int] = field(default_factory=dict)  # memory type -> bytes
    devices: dict[str, int] = field(default_factory=dict)  # resource -> count
    claims: list[str] = field(default_factory=list)  # names of the pod's claims


@dataclass
class ClaimSpec:
    name: str
    driver: str
    count: int = 1
    shared: bool = False  # consumable capacity: the device is shared, each user gets a share_id
    # the extended resource (e.g. nvidia.com/gpu) this claim serves in the pod's spec, when the
    # scheduler made it from a DeviceClass's extendedResourceName (KEP-5004)
    extended_resource: str | None = None
    # the devices the scheduler allocated, by name (a CEL selector's choice, e.g. the CPU group
    # of one NUMA node); empty: the driver's first free ones
    devices: tuple[str, ...] = ()


@dataclass
class PodSpec:
    namespace: str
    name: str
    containers: list[ContainerSpec]
    sidecars: list[ContainerSpec] = field(default_factory=list)
    init_containers: list[ContainerSpec] = field(default_factory=list)
    guaranteed: bool = True
    pod_cpus: int = 0  # pod-level exclusive CPUs beyond the containers' own
    # pod-level resources (Kubernetes 1.37+): memory types named at pod level -> bytes the pod
    # holds beyond its containers' blocks of that type (0: only the containers')
    pod_memory: dict[str, int] = field(default_factory=dict)
    claims: list[ClaimSpec] = field(default_factory=list)
    # the kubelet configuration (KubeletConfiguration keys, as POST /config takes them) in
    # force when the kubelet admitted this pod, where it differs from the node's now
    admitted_under: dict[str, Any] = field(default_factory=dict)
    phase: str = "Running"  # Pending | Running | Succeeded | Failed (PHASES)
    terminating: bool = False  # deleted, the kubelet still tearing it down
    # the reason the kubelet rejects this pod with at admission ("": it admits it)
    rejected_with: str = ""

    @property
    def uses_pod_level(self) -> bool:
        return self.pod_cpus > 0 or bool(self.pod_memory)

    @property
    def active(self) -> bool:
        """What the kubelet's ``GetActivePods`` keeps: admitted and not terminal, or terminal
        with termination still in progress (SPEC section 2, fact 1). Active pods hold their
        exclusive resources; Pending ones too (admission assigns them before containers start).
        """
        return self.terminating or self.phase not in TERMINAL_PHASES


@dataclass
class GenerateSpec:
    """Pods made from weighted templates, for the large profiles."""

    count: int
    templates: list[tuple[float, dict[str, Any]]]
    namespaces: list[str]


@dataclass
class NodeSpec:
    name: str
    description: str
    kubernetes_version: tuple[int, int]
    numa_nodes: list[NumaSpec]
    cpu_manager_policy: str = "static"
    memory_manager_policy: str = "Static"
    reserved_cpus: frozenset[int] = frozenset()
    reserved_memory: dict[tuple[int, str], int] = field(default_factory=dict)
    devices: list[SimDevice] = field(default_factory=list)
    dra_pools: list[DraPool] = field(default_factory=list)
    # PCI address -> NUMA node as sysfs bus/pci/devices/<BDF>/numa_node holds it (-1: none)
    pci_numa: dict[str, int] = field(default_factory=dict)
    pods: list[PodSpec] = field(default_factory=list)
    generate: GenerateSpec | None = None
    seed: int = 1
    cdi_accumulation: bool = False
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # SMT: hardware threads per physical core (1: no SMT)
    threads_per_core: int = 1
    max_pods: int = 110  # the kubelet's maxPods (its default 110)
    topology_manager_policy: str = "single-numa-node"
    topology_manager_scope: str = "container"
    # kubelet config maps of option name -> "true"/"false" (admission honours full-pcpus-only
    # and prefer-closest-numa-nodes)
    cpu_manager_policy_options: dict[str, str] = field(default_factory=dict)
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    # sockets, dies, L3 caches (cpulayout.py): one socket per NUMA node, no caches by default
    cpu_layout: CpuLayoutSpec = field(default_factory=CpuLayoutSpec)

    def allocatable_memory(self) -> dict[tuple[int, str], int]:
        """(NUMA id, memory type) -> what the memory manager can hand out there: each node's
        memory and preallocated hugepages less ``reserved_memory``, only where non-zero (as
        ``GetAllocatableResources`` lists it)."""
        allocatable: dict[tuple[int, str], int] = {}
        for node in self.numa_nodes:
            capacity = {"memory": node.memory_bytes}
            for size, pages in node.hugepages.items():
                capacity[hugepage_resource_name(size)] = size * pages
            for memory_type, amount in capacity.items():
                left = amount - self.reserved_memory.get((node.numa_id, memory_type), 0)
                if left > 0:
                    allocatable[(node.numa_id, memory_type)] = left
        return allocatable

    def distances(self) -> dict[int, dict[int, int]]:
        """The NUMA distance table: ``distances()[a][b]``."""
        ids = sorted(n.numa_id for n in self.numa_nodes)
        table = {}
        for numa in self.numa_nodes:
            row = numa.distances or tuple(10 if other == numa.numa_id else 20 for other in ids)
            table[numa.numa_id] = dict(zip(ids, row, strict=True))
        return table

    @property
    def all_cpus(self) -> frozenset[int]:
        return frozenset().union(*(n.cpus for n in self.numa_nodes))

    def thread_siblings(self) -> dict[int, frozenset[int]]:
        """Each CPU's core siblings as Linux numbers them on x86: with T threads per core and
        N logical CPUs, core k holds CPUs k, k + N/T, k + 2N/T, ... (the first thread of every
        core first), so ``0-15,32-47`` on a 64-CPU two-socket machine is 16 whole cores."""
        cpus = sorted(self.all_cpus)
        threads = self.threads_per_core
        if threads <= 1 or not cpus:
            return {cpu: frozenset({cpu}) for cpu in cpus}
        stride = len(cpus) // threads
        index = {cpu: position for position, cpu in enumerate(cpus)}
        return {cpu: frozenset(cpus[index[cpu] % stride + t * stride] for t in range(threads))
                for cpu in cpus}

    def feature(self, gate: str) -> bool:
        """Kubelet feature state at this version (profile ``feature_gates`` override)."""
        if gate in self.feature_gates:
            return self.feature_gates[gate]
        version = self.kubernetes_version
        defaults = {
            "GetAllocatable": version >= (1, 21),
            "GetAllocatableEnabled": version >= (1, 23),
            "Get": version >= (1, 27),
            "GetEnabled": version >= (1, 34),
            "Sidecars": version >= (1, 29),
            "DynamicResources": version >= (1, 34),
            "ListActivePodsOnly": version >= (1, 34),
            "PodLevelResources": version >= (1, 37),
            "V1": version >= (1, 20),
        }
        return defaults[gate]


def load_profile(name_or_path: str) -> NodeSpec:
    """Load a bundled profile by name, or a profile file by path.

    A path is told from a name by its form, never by what the working directory holds: it
    contains a slash or ends in ``.json`` (``./large``, ``large.json``); anything else names a
    bundled profile, so ``large`` is the bundled one even next to a file called ``large``.
    """
    path = Path(name_or_path)
    if "/" in name_or_path or path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except OSError as error:
            raise ProfileError(f"cannot read profile {name_or_path}: "
                               f"{error.strerror or error}") from error
        except (ValueError, RecursionError) as error:  # JSON syntax, or not UTF-8
            raise ProfileError(f"profile {name_or_path} is not valid JSON: {error}") from error
        if not isinstance(data, dict):
            raise ProfileError(f"profile {name_or_path} is not a JSON object")
    else:
        if name_or_path not in PROFILE_NAMES:
            raise ProfileError(f"unknown profile {name_or_path!r}; bundled profiles: "
                               f"{', '.join(PROFILE_NAMES)} (a file needs a path with a slash "
                               "or a .json name, e.g. ./my-node.json)")
        text = resources.files(__package__).joinpath("profiles", f"{name_or_path}.json").read_text()
        data = json.loads(text)
    return parse_profile(data)


def parse_profile(data: dict[str, Any]) -> NodeSpec:
    """Build a :class:`NodeSpec` from profile JSON, checking it as it goes."""
    try:
        return _parse_profile(data)
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, ProfileError):
            raise
        if isinstance(error, CpuLayoutError):
            raise ProfileError(str(error)) from None
        raise ProfileError(f"bad profile: {error!r}") from error


def _parse_profile(data: dict[str, Any]) -> NodeSpec:
    seed = int(data.get("seed", 1))
    rng = random.Random(seed)
    major, minor = (int(p) for p in str(data.get("kubernetes_version", "1.37")).split(".")[:2])
    numa_nodes = []
    for entry in data["numa_nodes"]:
        numa_nodes.append(NumaSpec(
            numa_id=int(entry["id"]),
            cpus=parse_cpulist(entry["cpus"]),
            memory_bytes=parse_bytes(entry.get("memory", "16Gi")),
            hugepages={hugepage_size_bytes(size): int(pages)
                       for size, pages in entry.get("hugepages", {}).items()},
            distances=tuple(int(d) for d in entry.get("distances", ())),
        ))
    known_numa = {n.numa_id for n in numa_nodes}
    for numa in numa_nodes:
        if numa.distances and len(numa.distances) != len(numa_nodes):
            raise ProfileError(f"NUMA node {numa.numa_id}: distances must name all "
                               f"{len(numa_nodes)} NUMA nodes")
    reserved_memory = {}
    for numa_id, amounts in data.get("reserved_memory", {}).items():
        for memory_type, amount in amounts.items():
            reserved_memory[(int(numa_id), memory_type)] = parse_bytes(amount)
    devices: list[SimDevice] = []
    for group in data.get("devices", []):
        devices.extend(_parse_devices(group, known_numa, rng))
    unhealthy = set(data.get("unhealthy_devices", []))
    for device in devices:
        if device.device_id in unhealthy:
            device.healthy = False
    dra_pools = [_dra_pool(p) for p in data.get("dra_pools", [])]
    pods = [parse_pod(p) for p in data.get("pods", [])]
    published = {(p.driver, d) for p in dra_pools for d in p.devices}
    for pod in pods:
        for claim in pod.claims:
            unknown = [d for d in claim.devices if (claim.driver, d) not in published]
            if unknown:
                raise ProfileError(f"pod {pod.name}: claim {claim.name} names devices "
                                   f"{unknown} that no {claim.driver} pool has")
    generate = None
    if "generate" in data:
        gen = data["generate"]
        generate = GenerateSpec(
            count=int(gen["count"]),
            templates=[(float(t.get("weight", 1)), t) for t in gen["templates"]],
            namespaces=list(gen.get("namespaces", ["default"])),
        )
    return NodeSpec(
        name=data.get("node_name", data.get("name", "node")),
        description=data.get("description", ""),
        kubernetes_version=(major, minor),
        numa_nodes=numa_nodes,
        cpu_manager_policy=data.get("cpu_manager_policy", "static"),
        memory_manager_policy=data.get("memory_manager_policy", "Static"),
        reserved_cpus=parse_cpulist(data.get("reserved_cpus", "")),
        reserved_memory=reserved_memory,
        devices=devices,
        dra_pools=dra_pools,
        pci_numa={str(k): int(v) for k, v in data.get("pci_numa", {}).items()},
        pods=pods,
        generate=generate,
        seed=seed,
        cdi_accumulation=bool(data.get("cdi_accumulation", False)),
        feature_gates={k: bool(v) for k, v in data.get("feature_gates", {}).items()},
        threads_per_core=_threads_per_core(data, numa_nodes),
        max_pods=_max_pods(data),
        topology_manager_policy=_choice(data, "topology_manager_policy",
                                        _default_policy(numa_nodes, data),
                                        TOPOLOGY_MANAGER_POLICIES),
        topology_manager_scope=_choice(data, "topology_manager_scope", "container",
                                       TOPOLOGY_MANAGER_SCOPES),
        cpu_manager_policy_options=_options(data, "cpu_manager_policy_options"),
        topology_manager_policy_options=_options(data, "topology_manager_policy_options"),
        cpu_layout=parse_cpu_layout(data.get("cpu_layout"),
                                    frozenset().union(*(n.cpus for n in numa_nodes))),
    )


def _default_policy(numa_nodes: list[Any], data: dict[str, Any]) -> str:
    """``single-numa-node`` unless the machine has more NUMA nodes than the kubelet accepts
    with a policy (``max-allowable-numa-nodes``, default 8; topology_manager.go refuses to start
    otherwise): such a node runs with policy ``none``."""
    options = data.get("topology_manager_policy_options") or {}
    raw = options.get("max-allowable-numa-nodes", 8) if isinstance(options, dict) else 8
    try:
        allowed = int(raw)
    except (TypeError, ValueError):
        allowed = 8  # a bad option is refused later, with its own message
    return "single-numa-node" if len(numa_nodes) <= allowed else "none"


def _choice(data: dict[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    value = data.get(key, default)
    if value not in allowed:
        raise ProfileError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _options(data: dict[str, Any], key: str) -> dict[str, str]:
    options = data.get(key, {})
    if not isinstance(options, dict):
        raise ProfileError(f"{key} must be an object of option names to \"true\"/\"false\"")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


def _max_pods(data: dict[str, Any]) -> int:
    value = data.get("max_pods", 110)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProfileError(f"max_pods must be a whole number, got {value!r}")
    return int(value)


def _threads_per_core(data: dict[str, Any], numa_nodes: list[NumaSpec]) -> int:
    threads = int(data.get("threads_per_core", 1))
    total = sum(len(n.cpus) for n in numa_nodes)
    if threads < 1 or total % threads:
        raise ProfileError(f"threads_per_core {threads} does not divide the {total} CPUs")
    return threads


def _parse_devices(group: dict[str, Any], known_numa: set[int],
                   rng: random.Random) -> list[SimDevice]:
    resource = group["resource"]
    style = group.get("id_style", "index")
    prefix = group.get("id_prefix", resource.rsplit("/", 1)[-1] + "-")
    placements: list[tuple[int, ...] | None] = []
    if "per_numa" in group:
        for numa_id, count in sorted(group["per_numa"].items(), key=lambda kv: int(kv[0])):
            if int(numa_id) not in known_numa:
                raise ProfileError(f"{resource}: NUMA node {numa_id} is not in numa_nodes")
            placements.extend([(int(numa_id),)] * int(count))
    else:
        numa = group.get("numa")
        ids = None if numa is None else tuple(int(i) for i in numa)
        placements.extend([ids] * int(group["count"]))
    devices = []
    ordinals: dict[tuple[int, ...] | None, int] = {}
    for index, numa_ids in enumerate(placements):
        ordinal = ordinals[numa_ids] = ordinals.get(numa_ids, -1) + 1
        devices.append(SimDevice(resource, _device_id(style, prefix, index, ordinal, numa_ids,
                                                      rng), numa_ids))
    # "unhealthy": N marks the group's last N devices unhealthy (gone from allocatable)
    for device in devices[len(devices) - int(group.get("unhealthy", 0)):]:
        device.healthy = False
    return devices


def _device_id(style: str, prefix: str, index: int, ordinal: int, numa_ids: Any,
               rng: random.Random) -> str:
    """A plausible device id: GPU UUIDs, PCI addresses of VFs (per NUMA node), or prefix+n."""
    if style == "uuid":
        return "GPU-" + str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if style == "pci":
        numa = numa_ids[0] if numa_ids else 0
        domain, bus = numa // 2, 0x17 + 0x80 * (numa % 2) + ordinal // 256
        return f"{domain:04x}:{bus:02x}:{(ordinal % 256) // 8:02x}.{ordinal % 8}"
    return f"{prefix}{index}"


def parse_container(data: dict[str, Any]) -> ContainerSpec:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ProfileError(f"a container is an object with a name, not {data!r}")
    devices = data.get("devices", {})
    if not isinstance(devices, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in devices.values()):
        raise ProfileError(f"container {data['name']}: devices must map resources to counts")
    cpus, exclusive = parse_cpus(data.get("cpus"))
    memory = {}
    for key, value in data.items():
        if key == "memory" or key.startswith("hugepages-"):
            memory[key] = parse_bytes(value)
    return ContainerSpec(
        name=data["name"],
        cpus=cpus,
        exclusive_cpus=exclusive,
        cpu_millis=millis(data.get("cpus")),
        memory=memory,
        devices={str(k): int(v) for k, v in devices.items()},
        claims=list(data.get("claims", [])),
    )


def parse_pod(data: dict[str, Any]) -> PodSpec:
    for key in ("namespace", "name"):
        if not isinstance(data.get(key, "default"), str):
            raise ProfileError(f"pod {key} must be a string, got {data.get(key)!r}")
    for key in ("containers", "sidecars", "init_containers"):
        if not isinstance(data.get(key, []), list):
            raise ProfileError(f"pod {key} must be a list of containers")
    pod_level = data.get("pod_level", {})
    return PodSpec(
        namespace=data.get("namespace", "default"),
        name=data["name"],
        containers=[parse_container(c) for c in data.get("containers", [])],
        sidecars=[parse_container(c) for c in data.get("sidecars", [])],
        init_containers=[parse_container(c) for c in data.get("init_containers", [])],
        guaranteed=_qos(data.get("qos", "Guaranteed")) == "Guaranteed",
        pod_cpus=parse_cpus(pod_level.get("cpus"))[0],
        pod_memory={k: parse_bytes(v) for k, v in pod_level.items()
                    if k == "memory" or k.startswith("hugepages-")},
        claims=[_claim(c) for c in data.get("claims", [])],
        admitted_under=_admitted_under(data),
        phase=_phase(data.get("phase", "Running")),
        terminating=bool(data.get("terminating", False)),
        rejected_with=str(data.get("rejected_with", "")),
    )


def _claim(data: dict[str, Any]) -> ClaimSpec:
    devices = data.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise ProfileError(f"claim {data.get('name')}: devices must be a list of device names")
    return ClaimSpec(data["name"], data["driver"], int(data.get("count", len(devices) or 1)),
                     bool(data.get("shared")), data.get("extended_resource"), tuple(devices))


def _admitted_under(data: dict[str, Any]) -> dict[str, Any]:
    for key in ("numa", "placement"):
        if key in data:
            raise ProfileError(f"pod {data.get('name')}: {key!r} is gone: the kubelet's "
                               "admission decides where a pod goes; name the configuration it "
                               "was admitted under with admitted_under")
    under = data.get("admitted_under", {})
    if not isinstance(under, dict):
        raise ProfileError(f"pod {data.get('name')}: admitted_under must be an object of "
                           "kubelet configuration settings")
    return under


def _qos(value: Any) -> str:
    if value not in QOS_CLASSES:
        raise ProfileError(f"bad pod qos {value!r}; one of {', '.join(QOS_CLASSES)}")
    return str(value)


def _phase(value: Any) -> str:
    if value not in PHASES:
        raise ProfileError(f"bad pod phase {value!r}; one of {', '.join(PHASES)}")
    return str(value)


def _dra_pool(data: dict[str, Any]) -> DraPool:
    """A pool; a device is a name, or ``{"name", "attributes", "taints"}`` as its slice shows
    it (attribute values in the API's form: ``{"int": 0}``, ``{"ints": [1, 0]}``, ...)."""
    names: list[str] = []
    published: dict[str, dict[str, Any]] = {}
    for item in data["devices"]:
        if isinstance(item, str):
            names.append(item)
        else:
            names.append(str(item["name"]))
            published[str(item["name"])] = {k: v for k, v in item.items() if k != "name"}
    return DraPool(data["driver"], data["pool"], names,
                   data.get("cdi_prefix", data["driver"] + "/device"), published)
