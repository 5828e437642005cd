"""SPEC section 2, alignment: the smallest set of NUMA nodes a container's resources hit.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    mem,
    nodes_profile,
    put_pod,
)


async def test_alignment_examples_of_the_spec():
    vf, gpu = "intel.com/vf", "vendor.com/gpu"
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                # CPUs on 0 + a device local to 0,1 -> 1 (aligned)
                C("a", cpu_ids=(1,), devices=(dev(gpu, "g0", [0, 1]),)),
                # CPUs on 1 + a VF on 0 -> 2 (misaligned)
                C("b", cpu_ids=(4,), devices=(dev(vf, "vf0", [0]),)),
                # CPUs on 0 + a memory block spanning 0,1 -> 2 (misaligned)
                C("c", cpu_ids=(2,), memory=(mem(GiB, [0, 1]),)),
                # CPUs on 0 + topology-less device + block without topology -> 1
                C("d", cpu_ids=(3,), devices=(dev("x/y", "xy0", None),),
                  memory=(mem(GiB, None, "hugepages-2Mi"),)),
                # memory only, on node 1 -> 1
                C("e", memory=(mem(GiB, [1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "a": 1, "b": 2, "c": 2, "d": 1, "e": 1}
    assert s.value("podresources_misaligned_containers") == 2


async def test_alignment_is_the_smallest_hitting_set():
    r = "vendor.com/dev"
    async with Node(nodes_profile([0, 1, 2])) as node:  # CPUs: n0 0-1, n1 2-3, n2 4-5
        put_pod(node, "ns", "p",
                # devices on {0,1} and {1,2}: node 1 hits both -> 1
                C("h1", devices=(dev(r, "a1", [0, 1]), dev(r, "b1", [1, 2]))),
                # {0,1} and {2}: no single node -> 2
                C("h2", devices=(dev(r, "a2", [0, 1]), dev(r, "c2", [2]))),
                # CPU on 0 and a device on {1,2} -> 2
                C("h3", cpu_ids=(0,), devices=(dev(r, "b3", [1, 2]),)),
                # {0,1}, {1,2}, {0,2}: pairwise only -> 2
                C("h4", devices=(dev(r, "a4", [0, 1]), dev(r, "b4", [1, 2]),
                                 dev(r, "c4", [0, 2]))),
                # CPU on 1 and devices on {0,1}, {1,2} -> 1
                C("h5", cpu_ids=(2,), devices=(dev(r, "a5", [0, 1]), dev(r, "b5", [1, 2]))),
                # block spanning 0,1 (uses both) + device {1,2} -> {0,1} -> 2
                C("h6", memory=(mem(GiB, [0, 1]),), devices=(dev(r, "b6", [1, 2]),)),
                # block spanning 0,1,2 -> 3
                C("h7", memory=(mem(GiB, [2, 0, 1]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "h1": 1, "h2": 2, "h3": 2, "h4": 2, "h5": 1, "h6": 2, "h7": 3}
    assert s.value("podresources_misaligned_containers") == 5


async def test_alignment_series_only_for_containers_with_known_locality():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p",
                C("cpus-on-0", cpu_ids=(1,)),
                C("unknown-dev", devices=(dev("x/y", "xy0", None),)),
                C("unknown-cpu", cpu_ids=(42,)),
                C("dropped-id", devices=(dev("x/y", "xy1", [9]),)),
                C("nothing"),
                cpu_ids=(1, 5))  # pod-level CPU 5 on node 1 counts toward no container
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {"cpus-on-0": 1}
    assert s.value("podresources_misaligned_containers") == 0


async def test_misaligned_containers_is_zero_with_v1_and_no_pods():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.value("podresources_misaligned_containers") == 0
    assert s.value("podresources_node_info", node="test-node", kubelet_api="v1") == 1
