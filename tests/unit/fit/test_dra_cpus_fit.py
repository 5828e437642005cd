"""The fit answers on a node whose exclusive CPUs come from DRA (SPEC section 11): the CPU
manager runs policy ``none`` and gives no exclusive CPUs, so the answers count a shape's CPUs
in the resource-fit predicate only and say, through ``cpus_from_dra``, that which CPUs and NUMA
node a pod gets is the scheduler's DRA allocation.

The node: NUMA 0 holds CPUs 0-3, NUMA 1 CPUs 4-7; ``GetAllocatableResources`` lists no CPU
(policy none). dra-driver-cpu publishes one device per NUMA node (4 CPUs each). Pod a's
container holds 3 CPUs of the NUMA 0 device (its request, 3, says so). The Node's allocatable:
8 CPUs, 16Gi, 110 pods. By hand: the predicate leaves 8 - 3 = 5 CPUs; a shape of 4 whole CPUs
fits once (5 // 4), one of 1500m three times (5000 // 1500).
"""

from __future__ import annotations

from pathlib import Path

from exporter.accounting import account
from exporter.fit.fitview import FitView
from exporter.fit.shapes import ShapeFile
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    CpuAttributes,
    DraDevice,
    DraInventory,
    KubeletSnapshot,
    NumaNode,
    PodAssignment,
    PublishedDevice,
    Topology,
)
from exporter.podcontext import NodeContext, pod_context

TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                                NumaNode(1, frozenset(range(4, 8)))])
INVENTORY = DraInventory(tuple(
    PublishedDevice("dra.cpu", "worker", f"cpudevnuma00{n}", (n,), cpu=CpuAttributes(cpus=4))
    for n in (0, 1)))
HELD = PodAssignment("ns", "a", (ContainerAssignment("c", dra_devices=(
    DraDevice("dra.cpu", "worker", "cpudevnuma000", "a-cpus", "ns", share_id="s-1"),)),))
PLAIN = PodAssignment("ns", "a", (ContainerAssignment("c"),))
CONTEXT = NodeContext("kube-api", (pod_context({
    "metadata": {"namespace": "ns", "name": "a", "uid": "u-a"},
    "spec": {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "3", "memory": "1Gi"}, "limits": {"cpu": "3", "memory": "1Gi"}}}]},
    "status": {"phase": "Running"}}),), {"cpu": 8000, "memory": 16 << 30, "pods": 110})


def answers(tmp_path: Path, pod: PodAssignment, inventory: DraInventory | None):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("shapes:\n  whole: {cpu: 4, memory: 1Gi}\n"
                      "  shared: {cpu: 1500m, memory: 1Gi}\n")
    view = FitView(shapes=ShapeFile(shapes), pod_context=lambda: CONTEXT)
    snapshot = KubeletSnapshot((pod,), Allocatable())
    accounting = account(snapshot, TOPOLOGY, inventory, lambda ns, name: (
        CONTEXT.find(ns, name).cpu_requests()))  # type: ignore[union-attr]
    view.update(snapshot, TOPOLOGY, accounting)
    return accounting, {a.shape.name: a for a in view.answers}


def test_a_shape_of_whole_cpus_rests_on_the_schedulers_dra_allocation(tmp_path: Path):
    accounting, found = answers(tmp_path, HELD, INVENTORY)
    assert accounting.cpus_allocated == {"0": 3, "1": 0}
    whole, shared = found["whole"], found["shared"]
    assert whole.assumptions == ("cpus_from_dra",)
    assert shared.assumptions == ()  # no whole CPUs: nothing a CPU manager would place
    # the CPU manager places nothing: the predicate alone bounds the CPUs
    assert whole.verdict.admitted and shared.verdict.admitted
    assert whole.capacity == 1
    assert shared.capacity == 3
    # no static CPUs invented: no per-NUMA CPU shortfall under policy none
    assert all("cpu" not in short for short in whole.shortfall.values())


def test_the_same_node_without_dra_cpus_assumes_nothing_of_them(tmp_path: Path):
    _, found = answers(tmp_path, PLAIN, None)
    assert found["whole"].assumptions == ()
