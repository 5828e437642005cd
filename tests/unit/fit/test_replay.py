"""Copies replayed on the nodes' free amounts (exporter/fit/replay.py) give the answers of
placing copies one after another with the whole admission model: worked through by hand, then
over random nodes, shapes and rules, across a change."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from exporter.fit.answers import answer
from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.managers_state import ManagersState, NodeRequests
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape, single_container
from exporter.fit.replay import replayed_copies

from .nodes import GiB, assert_kept_counts_answer_as_placed, cpus, memory, state

SNN = Rules("single-numa-node", "container")


def copies(shape: PodShape, node: ManagersState, rules: Rules, bound: int = 64) -> int | None:
    return replayed_copies(shape, node, rules, admit(shape, node, rules), bound)


def test_a_sidecar_and_its_app_fill_the_nodes_each_on_their_own():
    """Node 0 has 3 free CPUs, node 1 eight. A 1-CPU sidecar goes to node 0 while it has a
    CPU, the 4-CPU app to node 1: copies 1 and 2 split (node 0 left with 1 CPU), copy 3 puts
    both on node 1 (1 + 4 of its 0 left after two apps: no): two copies."""
    pod = PodShape("s", (ContainerShape("app", {"cpu": 4000}),),
                   (ContainerShape("proxy", {"cpu": 1000}, sidecar=True),))
    node = state(cpus(8, {0: 3, 1: 8}))
    assert copies(pod, node, SNN) == 2
    assert answer(pod, node, SNN).capacity == 2


def test_restricted_goes_node_by_node_while_one_node_holds_a_copy():
    """Under restricted, 3-CPU copies on nodes of 4 CPUs: as under single-numa-node (one per
    node); 6-CPU copies need two nodes (the preferred width is 2): not replayed."""
    node = state(cpus(4, {0: 4, 1: 4}))
    restricted = Rules("restricted", "container")
    assert copies(single_container("three", {"cpu": 3000}), node, restricted) == 2
    assert copies(single_container("six", {"cpu": 6000}), node, restricted) is None


def test_best_effort_spreads_once_no_node_holds_a_copy():
    """3-CPU copies, nodes with 4 and 4 free: one per node, then a third over both nodes'
    last CPUs (2 left): best-effort admits it on a wider set."""
    node = state(cpus(4, {0: 4, 1: 4}))
    shape = single_container("three", {"cpu": 3000})
    assert copies(shape, node, Rules("best-effort", "container")) == 2
    assert answer(shape, node, Rules("best-effort", "container")).capacity == 2
    wider = state(cpus(4, {0: 4, 1: 4}), numa=2)
    two = single_container("two", {"cpu": 2000})
    assert copies(two, replace(wider, cpu=replace(wider.cpu, free=frozenset({0, 1, 2, 4, 5, 6}))),
                  Rules("best-effort", "container")) == 3


def test_best_effort_hands_the_copies_cpu_ids_decide_over_to_the_whole_model():
    """1 CPU and 3 GiB a copy; node 0 has 4 free CPUs and 8 GiB, node 1 no free CPU and
    8 GiB. Copies 1 and 2 go to node 0 (2 GiB left there). Copy 3: node 0 lacks the memory,
    node 1 the CPU; the memory manager offers node 1 alone (node 0 holds single-node
    allocations, so no set with it), the merge gives {1}, not preferred: the memory goes to
    node 1, the CPU comes from node 0, picked by id. Copy 4 the same (2 GiB left on node 1,
    node 0's last CPU); copy 5 finds no free CPU: four copies, the first two replayed on
    counts, the rest admitted by the whole model."""
    node = state(cpus(4, {0: 4, 1: 0}), memory({0: 8 * GiB, 1: 8 * GiB}))
    shape = single_container("m", {"cpu": 1000, "memory": 3 * GiB})
    best_effort = Rules("best-effort", "container")
    assert copies(shape, node, best_effort) == 4
    assert answer(shape, node, best_effort).capacity == 4


def test_an_init_container_that_pins_its_app_is_one_step():
    """A 1-CPU init container and a 2-CPU app reusing its CPU: each pod takes 2 CPUs on the
    init container's node, two pods per 4-CPU node. An init container asking memory only pins
    nothing (its app may go elsewhere): not replayed."""
    pod = PodShape("i", (ContainerShape("app", {"cpu": 2000}),),
                   (ContainerShape("init", {"cpu": 1000}),))
    node = state(cpus(4, {0: 4, 1: 4}))
    assert copies(pod, node, SNN) == 4
    assert answer(pod, node, SNN).capacity == 4
    loose = PodShape("m", (ContainerShape("app", {"cpu": 2000}),),
                     (ContainerShape("init", {"cpu": 500, "memory": GiB}),))
    mem = memory({0: 4 * GiB, 1: 4 * GiB})
    assert copies(loose, state(cpus(4, {0: 4, 1: 4}), mem), SNN) is None



def test_the_cpu_options_that_pick_cpus_another_way_are_not_replayed():
    """The same 3-CPU copy that replays to 2 under single-numa-node is placed by the whole
    model under each option that picks CPUs or prefers hints another way (distribute across
    NUMA nodes or cores, align by socket, align by uncore cache); the answer stays 2."""
    node = state(cpus(4, {0: 4, 1: 4}))
    shape = single_container("three", {"cpu": 3000})
    assert copies(shape, node, SNN) == 2
    for option in ("distribute_cpus_across_numa", "distribute_cpus_across_cores",
                   "align_by_socket", "prefer_align_by_uncore_cache"):
        rules = replace(SNN, **{option: True})
        assert copies(shape, node, rules) is None, option
        assert answer(shape, node, rules).capacity == 2, option


# ---- random nodes, shapes and rules -----------------------------------------------------------

RULES = [SNN, Rules("single-numa-node", "pod"), Rules("restricted", "container"),
         Rules("restricted", "pod"), Rules("best-effort", "container"),
         Rules("best-effort", "pod"), Rules("none", "container"),
         replace(SNN, full_pcpus_only=True), Rules("none", "container", full_pcpus_only=True),
         Rules("restricted", "container", prefer_closest_numa_nodes=True),
         Rules("best-effort", "container", full_pcpus_only=True)]


@st.composite
def nodes(draw: st.DrawFn) -> ManagersState:
    numa = draw(st.integers(1, 4))
    per_numa = draw(st.sampled_from([4, 8]))
    free = {n: draw(st.integers(0, per_numa)) for n in range(numa)}
    threads = draw(st.sampled_from([1, 2]))
    cpu = cpus(per_numa, free, numa, threads)
    if draw(st.booleans()):  # a reserved CPU: its core's threads are not physical CPUs
        reserved = cpu.online[0] - cpu.free
        if reserved:
            first = min(reserved)
            cpu = replace(cpu, reserved_cores=cpu.siblings.get(first, frozenset()) | {first})
    allocatable = {n: 8 * GiB for n in range(numa)}
    groups = {0: frozenset({0, 1}), 1: frozenset({0, 1})} if numa > 1 and draw(
        st.booleans()) else None
    mem = memory(allocatable, {n: draw(st.integers(0, 8)) * GiB for n in range(numa)}, groups)
    registered = {frozenset({n}): draw(st.integers(0, 3)) for n in range(numa)}
    if numa > 1 and draw(st.booleans()):  # devices on two nodes
        registered[frozenset({0, 1})] = draw(st.integers(1, 3))
    registered = {k: v for k, v in registered.items() if v}
    free_devices = {k: draw(st.integers(0, v)) for k, v in registered.items()}
    devices = {"gpu": DeviceState(registered, {k: v for k, v in free_devices.items() if v})}
    node = state(cpu, mem, devices if registered else {}, numa)
    if draw(st.booleans()):
        node = replace(node, distances={i: {j: 10 if i == j else 20 + 3 * abs(i - j) + (i == 2)
                                            for j in range(numa)} for i in range(numa)})
    if draw(st.booleans()):
        node = replace(node, requests=NodeRequests(
            {"cpu": draw(st.integers(0, 40)) * 1000, "pods": draw(st.integers(0, 30))},
            {"cpu": 0}, 0, False))
    return node


def container(draw: st.DrawFn, name: str, sidecar: bool = False) -> ContainerShape:
    requests = {"cpu": draw(st.sampled_from([500, 1000, 2000, 3000, 4000]))}
    if draw(st.booleans()):
        requests["memory"] = draw(st.integers(1, 4)) * GiB
    if draw(st.booleans()):
        requests["gpu"] = draw(st.integers(1, 2))
    return ContainerShape(name, requests, sidecar)


@st.composite
def shapes(draw: st.DrawFn) -> PodShape:
    apps = tuple(container(draw, f"c{i}") for i in range(draw(st.integers(1, 2))))
    inits = tuple(container(draw, f"i{i}", sidecar=draw(st.booleans()))
                  for i in range(draw(st.integers(0, 2))))
    qos = draw(st.sampled_from(["Guaranteed", "Guaranteed", BURSTABLE]))
    return PodShape("s", apps, inits, qos=qos)


@settings(max_examples=250, deadline=None)
@given(node=nodes(), shape=shapes(), rules=st.sampled_from(RULES),
       taken=st.lists(st.integers(0, 31), max_size=6))
def test_replayed_answers_equal_copy_by_copy(node, shape, rules, taken):  # type: ignore[no-untyped-def]
    """Capacity, fits and the verdict, before and after a change (some CPUs taken)."""
    assert_kept_counts_answer_as_placed(shape, node, rules, taken)


@st.composite
def memory_shapes(draw: st.DrawFn) -> PodShape:
    """Containers asking memory, some with CPUs and devices, some alike."""
    apps = []
    for i in range(draw(st.integers(1, 3))):
        requests = {"memory": draw(st.integers(1, 6)) * GiB}
        if draw(st.booleans()):
            requests["cpu"] = draw(st.sampled_from([1000, 2000, 3000, 5000]))
        if draw(st.booleans()):
            requests["gpu"] = draw(st.integers(1, 2))
        apps.append(ContainerShape(f"c{i}", requests))
    if draw(st.booleans()):
        apps = [replace(apps[0], name=f"c{i}") for i in range(len(apps))]
    return PodShape("m", tuple(apps), ())


@settings(max_examples=300, deadline=None)
@given(node=nodes(), shape=memory_shapes(),
       rules=st.sampled_from([Rules("best-effort", "container"), Rules("best-effort", "pod"),
                              Rules("best-effort", "container",
                                    prefer_closest_numa_nodes=True)]),
       taken=st.lists(st.integers(0, 31), max_size=6))
def test_best_effort_spreads_with_memory_answer_as_placed(node, shape, rules, taken):  # type: ignore[no-untyped-def]
    """Once no node holds a copy: the copies taken on counts on their merged hint, or handed
    over to the whole model where CPU ids decide."""
    assert_kept_counts_answer_as_placed(shape, node, rules, taken)
