"""SPEC section 2, data issues: counted by kind, the rest of the snapshot still exported.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import dataclasses

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    issue,
    issues,
    mem,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)


async def test_data_issues_are_counted_by_kind_and_the_rest_exported():
    r = "r/x"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "x0", [0]), dev(r, "x1", [1]), dev(r, "x2", [1])])
        put_pod(node, "ns", "p1", C("a", cpu_ids=(1, 2)))
        put_pod(node, "ns", "p2", C("b", cpu_ids=(2, 3)))  # CPU 2 held twice
        put_pod(node, "ns", "p3", C("c", cpu_ids=(0,)))  # CPU 0 is reserved: not allocatable
        put_pod(node, "ns", "p4", C("d", cpu_ids=(5, 5),  # duplicated CPU
                                    devices=(dev(r, "x1", [1]), dev(r, "x1", [1]))))  # dup entry
        put_pod(node, "ns", "p5", C("e", devices=(dev(r, "x2", [1]),)),
                C("f", devices=(dev(r, "x2", [1]),)))  # one device, two containers
        # the kubelet sends one block per memory type per container: this one twice
        put_pod(node, "ns", "p6", C("g", memory=(mem(GiB, [0]), mem(GiB, [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    for kind in ("cpu_multiple_owners", "cpu_not_allocatable", "duplicate_entry",
                 "device_multiple_owners"):
        assert issue(s, kind) > 0, (kind, issues(s))
    # node 0: {0,1,2,3} = 4 (CPU 2 once); node 1: {5} = 1
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 4, "1": 1}
    # node 1 devices: x1 and x2, each once
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"0": 0, "1": 2}
    assert s.value("podresources_container_cpus", namespace="ns", pod="p4", container="d",
                   numa_node="1") == 1
    assert s.value("podresources_container_devices", namespace="ns", pod="p4", container="d",
                   resource=r, numa_node="1") == 1
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": GiB, "1": 0}
    # node 0: 4 CPUs held against 3 allocatable -> capped at 1
    assert util(s, "cpu") == {"0": 1.0, "1": 0.25}
    assert issue(s, "allocated_exceeds_allocatable") > 0
    assert s.value("podresources_up") == 1


async def test_pod_and_container_listed_twice_are_counted_once():
    async with Node(small_profile()) as node:
        put_pod(node, "ns", "p", C("c", cpu_ids=(1, 2)), C("c", cpu_ids=(1, 2)))
        state = node.simulator.state
        # the same pod (ns/p) listed a second time by the kubelet
        state.pods[("ns", "p-again")] = dataclasses.replace(state.pods[("ns", "p")])
        state.version += 1
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
            text = s.text
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("p", "c", "0"): 2}
    assert issue(s, "duplicate_entry") > 0
    assert issue(s, "cpu_multiple_owners") == 0
    # a valid exposition: no sample line twice
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == len(set(lines))
