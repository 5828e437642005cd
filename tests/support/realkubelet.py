"""The real kubelet as a test component: a driver for ``tests/realkubelet`` (its README has the
protocol), and the node description one simulator profile gives both sides.

The component runs the kubelet's own code (Topology Manager, CPU, memory and device managers
with the kubelet's stub device plugins, pod manager, allocation manager and admit handlers,
podresources server with its rate limiter) for one node, built for four releases::

    kubelet = RealKubelet.start("1.37")          # skips (or fails under CI=true) when not built
    node = kubelet.reset(node_description(spec))  # fresh managers, state, sockets and sysfs
    verdict = kubelet.admit(pod_manifest(pod_spec, spec.name))
    verdict.admitted, verdict.reason, verdict.containers["app"].cpus / .numa / .devices
    kubelet.start_containers("ns", "pod")        # the kubelet's container starts (AddContainer)
    kubelet.remove("ns", "pod"); kubelet.set_health("vendor.com/gpu", "gpu-0", False)
    kubelet.restart()                            # managers from their checkpoints, pods again
    kubelet.dump()                               # the managers' own state, as JSON
    kubelet.close()

``node.socket``, ``node.sysfs_root``, ``node.pods_api_socket`` (1.37) and ``node.root_dir``
are what the exporter reads (``--socket``, ``--sysfs-root``, ``--pods-api-socket``,
``--watch-path``). ``RealKubelet`` is a context manager too. Binaries come from
``tests/realkubelet/build.sh`` (``bash tests/run.sh`` runs it): ``.tools/realkubelet/
realkubelet-<release>``, with the build's error, when it failed, beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from exporter.simulator.cpulayout import cpu_entries
from exporter.simulator.podobjects import pod_object
from exporter.simulator.profile import NodeSpec, PodSpec

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO / ".tools" / "realkubelet"
RELEASES = {"1.37": "1.37.2", "1.36": "1.36.3", "1.35": "1.35.4", "1.34": "1.34.4"}
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# the feature gates of a profile that are the real kubelet's (the others describe the
# simulator's podresources API, e.g. ListActivePodsOnly)
KUBELET_GATES = ("PodLevelResourceManagers", "PodLevelResources", "PodsAPI",
                 "CPUManagerPolicyAlphaOptions", "CPUManagerPolicyBetaOptions")
DEFAULT_MAX_PODS = 110
SHARED_MEMORY = "/dev/shm"


class RealKubeletError(RuntimeError):
    """The component refused a request (the message is its one-line reason)."""


class RealKubeletTimeout(RealKubeletError):
    """A request took longer than the caller allowed; the component was stopped and started
    again, with no node (reset next)."""


def binary(release: str) -> Path:
    return BUILD_DIR / f"realkubelet-{release}"


def require(release: str) -> Path:
    """The built component for ``release``; skips the test locally when it is not built (with the
    build's error), fails it under CI=true."""
    path = binary(release)
    if path.exists():
        return path
    log = BUILD_DIR / f"realkubelet-{release}.log"
    reason = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    message = (f"the real kubelet {release} is not built ({path}); bash tests/run.sh builds it"
               + (": " + " / ".join(reason) if reason else ""))
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Container:
    name: str
    kind: str  # init, sidecar or app
    cpus: tuple[int, ...]
    memory: tuple[tuple[str, int, tuple[int, ...]], ...]  # (type, bytes, NUMA ids)
    devices: dict[str, tuple[str, ...]]
    numa: tuple[int, ...] | None  # the Topology Manager's affinity; None: no hint
    preferred: bool

    @classmethod
    def of(cls, data: dict[str, Any]) -> Container:
        return cls(data["name"], data["kind"], tuple(data["cpus"]),
                   tuple((b["type"], b["size"], tuple(b["numa"])) for b in data["memory"]),
                   {r: tuple(ids) for r, ids in data["devices"].items()},
                   tuple(data["numa"]) if data["numa"] is not None else None,
                   bool(data["preferred"]))


@dataclass(frozen=True)
class Merge:
    """One merge of the Topology Manager during an admission (``mergepolicy.go``): the hint
    lists' lengths and their product, how long it took, whether it was the policy's own loop
    or its reduction (``reduced``), and, when both ran, whether they agreed."""

    lists: tuple[int, ...]
    permutations: float
    seconds: float
    reduced: bool
    checked: bool
    agreed: bool
    hint: tuple[int, ...] | None
    preferred: bool

    @classmethod
    def of(cls, data: dict[str, Any]) -> Merge:
        return cls(tuple(data["lists"] or ()), float(data["permutations"]), data["seconds"],
                   data["reduced"], data["checked"], data["agreed"],
                   tuple(data["hint"]) if data["hint"] is not None else None,
                   data["preferred"])


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    message: str
    uid: str
    containers: dict[str, Container] = field(default_factory=dict)
    seconds: float = 0.0  # the admit handlers' time, in the component
    merges: tuple[Merge, ...] = ()


@dataclass(frozen=True)
class NodeHandle:
    """What a reset gives: the sockets, sysfs tree and state directory of the fresh node."""

    release: str
    socket: str
    sysfs_root: str
    sockets: dict[str, str]
    # the kubelet's root directory: cpu_manager_state, memory_manager_state,
    # device-plugins/kubelet_internal_checkpoint, the sockets' directories
    root_dir: str = ""

    @property
    def pods_api_socket(self) -> str | None:
        """The kubelet's local Pods API (1.37, gate PodsAPI on); ``None`` where not served."""
        return self.sockets.get("pods_api")


class RealKubelet:
    """One component process for one release, driven over its stdin/stdout."""

    def __init__(self, path: Path, release: str, verbosity: int = 0):
        self.release = release
        self._command = [str(path), f"-v={verbosity}"]
        if os.access(SHARED_MEMORY, os.W_OK):
            # the managers' checkpoints are written (and synced) on every change: on tmpfs
            # that costs nothing
            self._command.append(f"-dir={SHARED_MEMORY}")
        self._verbosity = verbosity
        self._node_dir = ""  # the current node's directory (state, sockets, sysfs)
        self._process = self._spawn()

    def _spawn(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if self._verbosity else subprocess.DEVNULL, text=True, bufsize=1)

    @classmethod
    def start(cls, release: str = "1.37", verbosity: int = 0) -> RealKubelet:
        return cls(require(release), release, verbosity)

    def __enter__(self) -> RealKubelet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, op: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """One request; the reply without ``ok``, or :class:`RealKubeletError`
        (:class:`RealKubeletTimeout` after ``timeout`` seconds)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self._process.stdin.flush()
        if timeout is not None:
            ready, _, _ = select.select([self._process.stdout], [], [], timeout)
            if not ready:
                self._process.kill()
                self._process.wait()
                if self._node_dir:  # what the killed process cannot remove itself
                    shutil.rmtree(self._node_dir, ignore_errors=True)
                    self._node_dir = ""
                self._process = self._spawn()
                raise RealKubeletTimeout(f"{op} took more than {timeout:g}s")
        line = self._process.stdout.readline()
        if not line:
            raise RealKubeletError(f"the real kubelet exited (status {self._process.wait()})")
        reply: dict[str, Any] = json.loads(line)
        if not reply.pop("ok"):
            raise RealKubeletError(reply["error"])
        return reply

    def reset(self, node: dict[str, Any]) -> NodeHandle:
        reply = self.call("reset", node=node)
        self._node_dir = reply["root_dir"]
        return NodeHandle(self.release, reply["podresources_socket"], reply["sysfs_root"],
                          reply["sockets"], reply["root_dir"])

    def admit(self, pod: dict[str, Any], timeout: float | None = None) -> Admission:
        result = self.call("admit", timeout=timeout, pod=pod)["result"]
        return Admission(result["admitted"], result["reason"], result["message"], result["uid"],
                         {c["name"]: Container.of(c) for c in result["containers"] or ()},
                         result.get("seconds", 0.0),
                         tuple(Merge.of(m) for m in result.get("merges") or ()))

    def containers(self, namespace: str, name: str) -> dict[str, Container]:
        """The pod's containers as the managers hold them now."""
        reply = self.call("pod", namespace=namespace, name=name)
        return {c["name"]: Container.of(c) for c in reply["containers"] or ()}

    def start_containers(self, namespace: str, name: str,
                         containers: list[str] | None = None) -> None:
        """Start the named containers, or the whole pod (init containers in order, each regular
        one finishing, then the app containers)."""
        self.call("start", namespace=namespace, name=name, containers=containers or [])

    def finish(self, namespace: str, name: str, container: str) -> None:
        self.call("finish", namespace=namespace, name=name, container=container)

    def set_phase(self, namespace: str, name: str, phase: str = "",
                  terminating: bool = False) -> None:
        self.call("phase", namespace=namespace, name=name, phase=phase, terminating=terminating)

    def remove(self, namespace: str, name: str) -> None:
        self.call("remove", namespace=namespace, name=name)

    def set_health(self, resource: str, device_id: str, healthy: bool) -> None:
        self.call("health", resource=resource, device=device_id, healthy=healthy)

    def restart(self, plugins_late: bool = False) -> None:
        """The kubelet restarted on the same root directory: its managers built again from
        their checkpoints, its sockets made again, the node's pods admitted again; its device
        plugins registered again, or with ``plugins_late`` only at :meth:`register_plugins`."""
        self.call("restart", plugins_late=plugins_late)

    def register_plugins(self) -> None:
        self.call("plugins")

    def api_objects(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The Node and the pods as the API server holds them for this node (the kubelet's
        node status and pod statuses), for a Kubernetes-API view."""
        reply = self.call("objects")
        return reply["node"], reply["pods"]

    def cpu_topology(self) -> dict[str, Any]:
        """The CPU manager's ``CPUTopology`` (``topology.Discover`` over cAdvisor's reading
        of the node's sysfs tree): counts, and per CPU its core, socket, NUMA node and uncore
        cache; ``numa_nodes``: every NUMA node of cAdvisor's machine info."""
        topology: dict[str, Any] = self.call("topology")["topology"]
        topology["cpus"] = {int(cpu): info for cpu, info in topology["cpus"].items()}
        return topology

    def dump(self) -> dict[str, Any]:
        dumped: dict[str, Any] = self.call("dump")["dump"]
        return dumped

    def close(self) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(RealKubeletError, OSError, ValueError):
                self.call("close")
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


# ---- one node description for both sides -------------------------------------------------


def node_description(spec: NodeSpec, max_pods: int | None = None,
                     reconcile_period: str = "") -> dict[str, Any]:
    """``spec`` spelled out for the component: every CPU with its ``core_id``, socket, die, L3
    cache and NUMA node (the profile's ``cpu_layout``, :mod:`exporter.simulator.cpulayout`);
    each NUMA node's MemTotal (memory plus hugepages, as the kernel counts it), hugepages and
    distances; the reserved CPUs and memory; every device with its NUMA set and health; the
    kubelet's policies, options and feature gates."""
    cpus = []
    for entry in cpu_entries(spec):
        cpu: dict[str, Any] = {"id": entry.cpu, "core": entry.core_id, "socket": entry.socket,
                               "numa": entry.numa, "die": entry.die}
        if entry.l3 is not None:
            cpu["l3"] = entry.l3
        cpus.append(cpu)
    distances = spec.distances()
    numa_nodes = []
    # every NUMA node has a directory for each page size the machine has (nr_hugepages 0 where
    # none are set aside), and cAdvisor reports them all
    sizes = sorted({size for numa in spec.numa_nodes for size in numa.hugepages})
    for numa in spec.numa_nodes:
        hugepages = {str(size): numa.hugepages.get(size, 0) for size in sizes}
        total = numa.memory_bytes + sum(size * pages for size, pages in numa.hugepages.items())
        numa_nodes.append({"id": numa.numa_id, "memory": total, "hugepages": hugepages,
                           "distances": [distances[numa.numa_id][other]
                                         for other in sorted(distances)]})
    reserved_memory = [{"numa": numa_id, "type": memory_type, "bytes": amount}
                       for (numa_id, memory_type), amount in sorted(spec.reserved_memory.items())]
    devices = [{"resource": d.resource, "id": d.device_id,
                "numa": None if d.numa_ids is None else list(d.numa_ids), "healthy": d.healthy}
               for d in spec.devices]
    pods = len(spec.pods) + (spec.generate.count if spec.generate else 0)
    return {
        "name": spec.name,
        "cpus": cpus,
        "numa_nodes": numa_nodes,
        "reserved_cpus": sorted(spec.reserved_cpus),
        "reserved_memory": reserved_memory,
        "devices": devices,
        "kubelet": {
            "topology_manager_policy": spec.topology_manager_policy,
            "topology_manager_scope": spec.topology_manager_scope,
            "topology_manager_policy_options": dict(spec.topology_manager_policy_options),
            "cpu_manager_policy": spec.cpu_manager_policy,
            "cpu_manager_policy_options": dict(spec.cpu_manager_policy_options),
            "cpu_manager_reconcile_period": reconcile_period,
            "memory_manager_policy": spec.memory_manager_policy,
            "feature_gates": {g: on for g, on in spec.feature_gates.items()
                              if g in KUBELET_GATES},
            "max_pods": max_pods or max(DEFAULT_MAX_PODS, pods + 16),
        },
    }


def pod_manifest(pod: PodSpec, node_name: str) -> dict[str, Any]:
    """``pod`` as the API server hands it to the kubelet (``v1.Pod``): the simulator's own
    API objects (:mod:`exporter.simulator.podobjects`), Pending, without a uid (the component
    gives one). An extended resource the scheduler served through DRA stays named in
    ``status.extendedResourceClaimStatus``, where the device manager looks
    (``isDRAExtendedResource``, 1.37)."""
    manifest = pod_object(pod, node_name, "Pending")
    manifest["metadata"].pop("uid", None)
    served = manifest["status"].get("extendedResourceClaimStatus")
    manifest["status"] = {"phase": "Pending"}
    if served:
        manifest["status"]["extendedResourceClaimStatus"] = served
    return manifest


def write_kubelet_config(description: dict[str, Any], path: str | Path) -> Path:
    """The ``KubeletConfiguration`` file of the component as ``description`` configures it
    (what a deployed exporter reads with ``--kubelet-config``): the Topology Manager's policy,
    scope and options, the CPU manager's policy and options, the memory manager's policy, the
    reserved CPUs and memory, ``systemReserved``, ``kubeReserved`` and ``evictionHard`` (left
    out when the description leaves it to the kubelet's default), ``maxPods`` and the feature
    gates. JSON is YAML."""
    kubelet = description["kubelet"]
    reserved_memory: dict[int, dict[str, str]] = {}
    for entry in description["reserved_memory"]:
        reserved_memory.setdefault(entry["numa"], {})[entry["type"]] = str(entry["bytes"])
    # without systemReserved, kubeReserved or evictionHard in the description, the component's
    # reservation (GetNodeAllocatableReservation) is the reserved CPUs and the reserved memory,
    # with no eviction threshold: systemReserved holds the memory, and evictionHard is empty
    # (no kubelet default of 100Mi)
    system_reserved = {"memory": str(sum(e["bytes"] for e in description["reserved_memory"]))}
    kube_reserved: dict[str, str] = {}
    eviction_hard: dict[str, str] | None = {}
    if any(k in kubelet for k in ("system_reserved", "kube_reserved", "eviction_hard")):
        system_reserved = dict(kubelet.get("system_reserved") or {})
        kube_reserved = dict(kubelet.get("kube_reserved") or {})
        eviction_hard = kubelet.get("eviction_hard")  # None: left out, the kubelet's default
    document: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "topologyManagerPolicy": kubelet["topology_manager_policy"],
        "topologyManagerScope": kubelet["topology_manager_scope"],
        "topologyManagerPolicyOptions": kubelet["topology_manager_policy_options"],
        "cpuManagerPolicy": kubelet["cpu_manager_policy"],
        "cpuManagerPolicyOptions": kubelet["cpu_manager_policy_options"],
        "memoryManagerPolicy": kubelet["memory_manager_policy"],
        "reservedSystemCPUs": ",".join(map(str, description["reserved_cpus"])),
        "reservedMemory": [{"numaNode": numa, "limits": limits}
                           for numa, limits in sorted(reserved_memory.items())],
        "systemReserved": system_reserved,
        "kubeReserved": kube_reserved,
        "evictionHard": eviction_hard,
        "maxPods": kubelet["max_pods"],
        "featureGates": kubelet["feature_gates"],
    }
    if eviction_hard is None:
        del document["evictionHard"]
    path = Path(path)
    path.write_text(json.dumps(document, indent=1))
    return path
