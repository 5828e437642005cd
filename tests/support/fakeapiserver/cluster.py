"""A simulated node as the Kubernetes API shows it, put into the fake API server's store.

:class:`SimulatedCluster` keeps the store showing a running simulator's node and pods, admitted
and rejected, and the ResourceSlices its DRA drivers publish (the ``demo`` command does this);
:func:`cluster_from_profile` puts a profile's node there once, its pods as large as a real
cluster's, for measurements. Kept apart from the server: this is what the simulator knows
turned into API objects, not how the API serves them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid

from exporter.simulator.node.admitting import simulated_node_allocatable
from exporter.simulator.node.book import SimulatedNode
from exporter.simulator.podobjects import pod_object
from exporter.simulator.profile import ContainerSpec, PodSpec
from exporter.topology import hugepage_resource_name

from ..kubeobjects import Obj, container, node, pod, resource_slice, resource_slices
from .store import ClusterStore

SLICES_PER_POOL = 4


def simulated_node(state: SimulatedNode) -> Obj:
    """The simulated node as the API shows it: CPUs, memory and hugepages of every NUMA node
    and each device-plugin resource's devices in capacity; in allocatable what the kubelet's
    resource-fit predicate counts against (less the reserved CPUs and memory, ``maxPods``, the
    healthy devices)."""
    spec = state.spec
    capacity = {"cpu": str(len(spec.all_cpus)),
                "memory": f"{sum(n.memory_bytes for n in spec.numa_nodes) // 1024}Ki",
                "pods": str(spec.max_pods)}
    for numa in spec.numa_nodes:
        for size, pages in numa.hugepages.items():
            name = hugepage_resource_name(size)
            capacity[name] = str(int(capacity.get(name, "0")) + size * pages)
    for device in state.devices:
        capacity[device.resource] = str(int(capacity.get(device.resource, "0")) + 1)
    allocatable = simulated_node_allocatable(spec, state.devices, state.unregistered)
    shown = {name: (f"{amount}m" if name == "cpu" else str(amount))
             for name, amount in allocatable.items()}
    return node(spec.name, capacity, shown)


class SimulatedCluster:
    """Keeps a cluster store (a fake API server's) showing what a simulated kubelet has: its
    node, one ResourceSlice per DRA pool, every pod it knows (admitted ones in their phase,
    ``Running`` by default) and the pods it rejected at admission (phase ``Failed``,
    ``status.reason`` the kubelet's reason), as the kubelet reports them to the API server.
    Each pod keeps its uid while it exists."""

    def __init__(self, server: ClusterStore, state: SimulatedNode, pods: bool = True):
        self.server = server
        self.state = state
        self.pods = pods  # False: the node and its ResourceSlices only (the kubelet's Pods
        # API serves the pods)
        self._shown: dict[tuple[str, str], str] = {}  # pod key -> the JSON last put
        self._uids: dict[tuple[str, str], str] = {}
        self._version = -1

    def sync(self) -> bool:
        """Bring the server up to date; False when nothing changed since the last call."""
        if self.state.version == self._version:
            return False
        self._version = self.state.version
        if not self.server.objects["nodes"]:
            self.server.put("nodes", simulated_node(self.state))
            for obj in resource_slices(self.state.spec):  # what its DRA drivers publish
                self.server.put("resourceslices", obj)
        wanted: dict[tuple[str, str], Obj] = {}
        for key, sim in self.state.pods.items() if self.pods else ():
            uid = self._uids.setdefault(key, sim.uid or str(uuid.uuid4()))
            wanted[key] = pod_object(sim.spec, self.state.spec.name, sim.spec.phase, uid=uid)
        for key, obj in self.state.rejected_pods.items() if self.pods else ():
            wanted[key] = copy.deepcopy(obj)
        for key in set(self._shown) - set(wanted):
            del self._shown[key]
            self._uids.pop(key, None)
            self.server.delete("pods", key[1], key[0])
        for key, obj in wanted.items():
            text = json.dumps(obj, sort_keys=True)
            if self._shown.get(key) != text:
                self._shown[key] = text
                self.server.put("pods", obj)
        return True

    async def follow(self, interval: float = 0.5) -> None:
        """Sync every ``interval`` seconds until cancelled."""
        while True:
            self.sync()
            await asyncio.sleep(interval)


def cluster_from_profile(server: ClusterStore, profile: str) -> str:
    """Put a simulator profile's node in the API as a cluster would show it: its pods with
    their requests (sidecars as restartable init containers), managed fields and statuses; the
    device resources plus a patched ``example.com/dongle: 4`` and two dead Akri entries at 0;
    each DRA pool in a few ResourceSlices. Returns the node name."""
    from exporter.simulator.profile import load_profile

    spec = load_profile(profile)
    state = SimulatedNode(spec)
    extended: dict[str, str] = {}
    for device in spec.devices:
        extended[device.resource] = str(int(extended.get(device.resource, "0")) + 1)
    extended.update({"example.com/dongle": "4", "akri.sh/zeroconf-a1b2c3": "0",
                     "akri.sh/zeroconf-d4e5f6": "0"})
    server.put("nodes", node(spec.name, extended))
    for index, sim in enumerate(state.pods.values()):
        server.put("pods", _realistic_pod(sim.spec, spec.name, index))
    for index, pool in enumerate(spec.dra_pools):
        for part in range(SLICES_PER_POOL):  # as drivers split big pools
            server.put("resourceslices", resource_slice(
                f"{spec.name}-{index}-{part}", spec.name, pool.driver, pool.pool,
                pool.devices[part::SLICES_PER_POOL], slice_count=SLICES_PER_POOL))
    return spec.name


def _requests_of(sim_container: ContainerSpec, dongles: int) -> dict[str, str]:
    requests = {"cpu": str(sim_container.cpus or 1), "memory": "512Mi"}
    for memory_type, size in sim_container.memory.items():
        requests[memory_type] = str(size)
    for resource, count in sim_container.devices.items():
        requests[resource] = str(count)
    if dongles:
        requests["example.com/dongle"] = str(dongles)
    return requests


def _realistic_pod(spec: PodSpec, node_name: str, index: int) -> Obj:
    """A pod about the size the API server returns (labels, owner, managed fields, status)."""
    containers = [container(c.name, _requests_of(c, 1 if index < 3 and not n else 0))
                  for n, c in enumerate(spec.containers)]
    inits = [container(c.name, _requests_of(c, 0), "Always") for c in spec.sidecars]
    inits += [container(c.name, _requests_of(c, 0)) for c in spec.init_containers]
    obj = pod(spec.namespace, spec.name, node_name, containers, inits, spec.phase)
    for entry in obj["spec"]["containers"] + obj["spec"].get("initContainers", []):
        entry.update({"env": [{"name": f"VAR_{i}", "value": "x" * 24} for i in range(6)],
                      "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                        "mountPath": "/var/run/secrets/kubernetes.io/"
                                                     "serviceaccount"}],
                      "imagePullPolicy": "IfNotPresent",
                      "terminationMessagePath": "/dev/termination-log"})
    obj["metadata"].update({
        "labels": {"app.kubernetes.io/name": spec.name.rsplit("-", 1)[0],
                   "pod-template-hash": "7d9f8c6b5"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True,
                             "name": spec.name.rsplit("-", 1)[0] + "-7d9f8c6b5",
                             "uid": str(uuid.uuid4())}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                           "apiVersion": "v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {
                               "f:containers": {f"k:{{\"name\":\"{c['name']}\"}}": {
                                   "f:image": {}, "f:resources": {}} for c in containers}}}}]})
    obj["spec"].update({"serviceAccountName": "default", "schedulerName": "default-scheduler",
                        "tolerations": [{"key": "node.kubernetes.io/not-ready",
                                         "operator": "Exists", "effect": "NoExecute",
                                         "tolerationSeconds": 300}],
                        "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}}]}}]})
    obj["status"].update({
        "qosClass": "Guaranteed" if spec.guaranteed else "Burstable",
        "podIP": f"10.244.{index // 250}.{index % 250 + 2}", "hostIP": "192.0.2.10",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime":
                        "2026-11-21T12:00:00Z"} for t in ("Initialized", "Ready",
                                                           "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                               "image": c["image"], "imageID": "sha256:" + "ab" * 32,
                               "containerID": "containerd://" + "cd" * 32,
                               "state": {"running": {"startedAt": "2026-11-21T12:00:05Z"}}}
                              for c in containers]})
    return obj
