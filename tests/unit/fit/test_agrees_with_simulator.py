"""The exporter's fit engine and the simulator's admission, two implementations of the
kubelet's rules written independently, agree on random pods and node states.

A node is drawn in a neutral form (NUMA nodes, CPUs per node with SMT pairs, reserved and taken
CPUs, memory per node with an optional group spanning two nodes, devices per set of NUMA
nodes) and handed to each implementation in its own types; neither imports the other's logic.
The verdicts compared: admitted or not, and the kubelet's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings, strategies as st

from exporter.fit.admission import Rules, admit
from exporter.fit.nodestate import CpuState, DeviceState, MemoryNode, NodeState
from exporter.fit.pod import ContainerShape, Managers, PodShape
from exporter.simulator import admission as sim

MiB = 1 << 20
GPU, VF = "example.com/gpu", "example.com/vf"


@dataclass(frozen=True)
class Node:
    numa: int
    cpus_per_numa: int  # even: SMT pairs (2k, 2k+1)
    reserved: frozenset[int]
    taken: frozenset[int]
    memory: tuple[tuple[int, int], ...]  # per NUMA node (allocatable MiB, free MiB)
    grouped: bool  # nodes 0 and 1 hold one block spanning both
    single_assigned: frozenset[int]  # nodes holding a single-node block
    devices: tuple[tuple[str, tuple[int, ...], bool], ...]  # (resource, numa ids, free)
    far: frozenset[int]  # NUMA nodes 30 away from the others (11 between the rest)


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    numa = draw(st.integers(2, 4))
    per = draw(st.sampled_from([2, 4, 6]))
    every = range(numa * per)
    reserved = frozenset(draw(st.sets(st.sampled_from(list(every)), max_size=1)))
    taken = frozenset(draw(st.sets(st.sampled_from(list(every)), max_size=numa * per)))
    taken -= reserved
    memory = tuple((alloc, draw(st.integers(0, alloc)))
                   for alloc in (draw(st.sampled_from([1024, 2048, 4096])) for _ in range(numa)))
    grouped = draw(st.booleans())
    singles = frozenset(n for n in range(numa) if (not grouped or n > 1)
                        and memory[n][1] < memory[n][0])
    devices = tuple(draw(st.lists(st.tuples(
        st.sampled_from([GPU, VF]),
        st.sampled_from([(n,) for n in range(numa)] + [(0, 1), ()]),
        st.booleans()), max_size=8)))
    far = frozenset(draw(st.sets(st.integers(0, numa - 1), max_size=2)))
    return Node(numa, per, reserved, taken, memory, grouped, singles, devices, far)


def distances(node: Node) -> dict[int, dict[int, int]]:
    return {i: {j: 10 if i == j else 30 if (i in node.far) != (j in node.far) else 11
                for j in range(node.numa)} for i in range(node.numa)}


@st.composite
def containers(draw: st.DrawFn, name: str, sidecar: bool = False) -> dict[str, object]:
    return {"name": name, "sidecar": sidecar,
            "cpu": draw(st.sampled_from([0, 500, 1000, 2000, 3000, 4000, 6000])),
            "memory": draw(st.sampled_from([0, 256, 1024, 3072])),
            "gpu": draw(st.integers(0, 2)), "vf": draw(st.integers(0, 2))}


@st.composite
def pods(draw: st.DrawFn) -> tuple[str, list[dict[str, object]], list[dict[str, object]]]:
    qos = draw(st.sampled_from(["Guaranteed", "Guaranteed", "Burstable", "BestEffort"]))
    apps = [draw(containers(f"app{i}")) for i in range(draw(st.integers(1, 2)))]
    inits = [draw(containers(f"init{i}", draw(st.booleans())))
             for i in range(draw(st.integers(0, 1)))]
    if qos == "BestEffort":
        for c in apps + inits:
            c["cpu"], c["memory"] = 0, 0
    return qos, apps, inits


def numa_of(node: Node, cpu: int) -> int:
    return cpu // node.cpus_per_numa


def exporter_state(node: Node) -> NodeState:
    online = {n: frozenset(range(n * node.cpus_per_numa, (n + 1) * node.cpus_per_numa))
              for n in range(node.numa)}
    every = frozenset().union(*online.values())
    siblings = {c: frozenset({c - c % 2, c - c % 2 + 1}) for c in every}
    reserved_cores = frozenset(s for r in node.reserved for s in siblings[r])
    cpu = CpuState(online, every - node.reserved - node.taken,
                   {c: numa_of(node, c) for c in every}, siblings, 2, reserved_cores)
    memory = {}
    for n, (alloc, free) in enumerate(node.memory):
        group = frozenset({0, 1}) if node.grouped and n < 2 else frozenset({n})
        assigned = int(len(group) > 1 or n in node.single_assigned)
        memory[n] = MemoryNode({"memory": alloc * MiB}, {"memory": free * MiB}, group, assigned)
    devices: dict[str, tuple[dict[frozenset[int], int], dict[frozenset[int], int]]] = {}
    for resource, ids, free in node.devices:
        registered, available = devices.setdefault(resource, ({}, {}))
        key = frozenset(ids)
        registered[key] = registered.get(key, 0) + 1
        if free:
            available[key] = available.get(key, 0) + 1
    return NodeState(tuple(range(node.numa)), cpu, memory,
                     {r: DeviceState(reg, free) for r, (reg, free) in devices.items()},
                     distances(node))


def simulator_node(node: Node) -> sim.AdmissionNode:
    every = range(node.numa * node.cpus_per_numa)
    memory_cells = {}
    allocatable, free, assignments = {}, {}, {}
    for n, (alloc, left) in enumerate(node.memory):
        group = frozenset({0, 1}) if node.grouped and n < 2 else frozenset({n})
        memory_cells[n] = group
        allocatable[(n, "memory")] = alloc * MiB
        free[(n, "memory")] = left * MiB
        assignments[n] = int(len(group) > 1 or n in node.single_assigned)
    devices: dict[str, list[sim.Device]] = {}
    allocated = set()
    for i, (resource, ids, available) in enumerate(node.devices):
        devices.setdefault(resource, []).append(sim.Device(f"d{i}", ids or None))
        if not available:
            allocated.add((resource, f"d{i}"))
    return sim.AdmissionNode(
        numa_ids=tuple(range(node.numa)),
        cpu_numa={c: numa_of(node, c) for c in every},
        siblings={c: frozenset({c - c % 2, c - c % 2 + 1}) for c in every},
        reserved_cpus=node.reserved,
        free_cpus=set(every) - node.reserved - node.taken,
        memory_allocatable=allocatable, memory_free=free, memory_cells=memory_cells,
        memory_assignments=assignments, devices=devices, allocated_devices=allocated,
        distances=distances(node))


def requests(c: dict[str, object]) -> dict[str, int]:
    found = {"cpu": c["cpu"], "memory": int(c["memory"]) * MiB,  # type: ignore[call-overload]
             GPU: c["gpu"], VF: c["vf"]}
    return {r: int(a) for r, a in found.items() if a}  # type: ignore[call-overload]


def exporter_pod(qos: str, apps: list[dict[str, object]],
                 inits: list[dict[str, object]]) -> PodShape:
    return PodShape("p", tuple(ContainerShape(str(c["name"]), requests(c)) for c in apps),
                    tuple(ContainerShape(str(c["name"]), requests(c), bool(c["sidecar"]))
                          for c in inits), qos)


def simulator_pod(qos: str, apps: list[dict[str, object]],
                  inits: list[dict[str, object]]) -> sim.PodRequest:
    def one(c: dict[str, object]) -> sim.ContainerRequest:
        asked = requests(c)
        return sim.ContainerRequest(
            str(c["name"]), asked.get("cpu", 0),
            {"memory": asked["memory"]} if "memory" in asked else {},
            {r: asked[r] for r in (GPU, VF) if r in asked}, bool(c.get("sidecar")))
    return sim.PodRequest("ns", "p", [one(c) for c in apps], [one(c) for c in inits], qos)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(), pods(), st.sampled_from(sim.POLICIES), st.sampled_from(sim.SCOPES),
       st.booleans(), st.booleans())
def test_the_two_admissions_agree(node, pod, policy, scope, full_pcpus_only, closest):
    qos, apps, inits = pod
    ours = admit(exporter_pod(qos, apps, inits), exporter_state(node),
                 Rules(policy, scope, full_pcpus_only, closest, managers=Managers()))
    theirs = sim.admit(simulator_node(node), simulator_pod(qos, apps, inits),
                       sim.AdmissionConfig(policy, scope, full_pcpus_only, closest))
    assert (ours.admitted, ours.reason) == (theirs.admitted, theirs.reason), (
        ours.message, theirs.message)
    # and the same merged hint for aligned containers; not when a device spans NUMA nodes: the
    # device manager takes aligned devices in map order (random), and a reusable device's
    # NUMA set steers later containers
    spanning = any(len(ids) > 1 for _, ids, _ in node.devices)
    if ours.admitted and policy != "none" and not spanning:
        everything = frozenset(range(node.numa))
        theirs_by_name = dict(theirs.placements)
        for placement in ours.placements:
            if not placement.ask.is_empty() and theirs_by_name[placement.container]:
                assert (placement.hint or everything) == theirs_by_name[placement.container], \
                    placement.container
