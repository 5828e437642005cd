"""SPEC section 2, devices: one device per (resource, id), NUMA groups, unknown and dropped ids.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    issue,
    mem,
    nodes_profile,
    put_pod,
    set_allocatable,
    small_allocatable_memory,
    util,
)


async def test_device_on_two_numa_nodes_is_one_device_in_the_group():
    """The kubelet sends one entry per device per NUMA node; aggregate by (resource, id)."""
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev("vendor.com/accel", "acc-0", [0, 1]), dev("vendor.com/accel", "acc-1", [1, 0]),
            dev("vendor.com/accel", "acc-2", [0])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(1,), devices=(
            dev("vendor.com/accel", "acc-0", [1, 0]), dev("vendor.com/accel", "acc-2", [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    acc = "vendor.com/accel"
    assert s.by("podresources_devices_allocatable", "numa_node", resource=acc) == {
        "0,1": 2, "0": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=acc) == {
        "0,1": 1, "0": 1}
    assert s.by("podresources_container_devices", "numa_node", pod="p", resource=acc) == {
        "0,1": 1, "0": 1}
    assert s.by("podresources_device_info", "device_id", "numa_node", pod="p") == {
        ("acc-0", "0,1"): 1, ("acc-2", "0"): 1}
    # the kubelet's normal shape is not a duplicate
    assert issue(s, "duplicate_entry") == 0
    # node 0: allocated acc-0 + acc-2 = 2 of 3 (acc-0, acc-1, acc-2); node 1: 1 of 2
    assert util(s, acc) == {"0": pytest.approx(2 / 3), "1": 0.5}


async def test_same_device_id_under_two_resources_is_two_devices():
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev("a.com/x", "dev-0", [0]), dev("b.com/y", "dev-0", [0])])
        put_pod(node, "ns", "p", C("c", devices=(dev("a.com/x", "dev-0", [0]),
                                                 dev("b.com/y", "dev-0", [0]))))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocated", "numa_node", "resource") == {
        ("0", "a.com/x"): 1, ("0", "b.com/y"): 1}
    assert issue(s, "device_multiple_owners") == 0
    assert issue(s, "duplicate_entry") == 0


async def test_three_node_group_label_and_utilization_on_each_member():
    async with Node(nodes_profile([0, 1, 2, 3])) as node:
        r = "vendor.com/fpga"
        set_allocatable(node, cpu_ids=range(8), devices=[
            dev(r, "f-013", [3, 0, 1]), dev(r, "f-2", [2]), dev(r, "f-0", [0])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(2,), devices=(dev(r, "f-013", [1, 3, 0]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0,1,3": 1, "2": 1, "0": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0,1,3": 1, "2": 0, "0": 0}
    # node 0: (0,1,3) + f-0 -> 1/2; nodes 1 and 3: 1/1; node 2: 0/1
    assert util(s, r) == {"0": 0.5, "1": 1.0, "2": 0, "3": 1.0}
    assert issue(s, "allocated_exceeds_allocatable") == 0
    # CPU 2 is on node 1, a member of the device's set -> aligned
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1


async def test_topologyless_device_is_unknown_and_has_no_utilization():
    async with Node(small_profile(devices=[
            {"resource": "example.com/dongle", "count": 3, "numa": None}])) as node:
        put_pod(node, "ns", "p", C("c", devices=(dev("example.com/dongle", "dongle-1", None),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node",
                resource="example.com/dongle") == {"unknown": 3}
    assert s.by("podresources_devices_allocated", "numa_node",
                resource="example.com/dongle") == {"unknown": 1}
    assert s.by("podresources_device_info", "device_id", "numa_node") == {
        ("dongle-1", "unknown"): 1}
    assert not util(s, "example.com/dongle")
    # the container's only exclusive resource has unknown locality -> no alignment series
    assert not s.series("podresources_container_numa_nodes", pod="p")


async def test_numa_id_absent_from_sysfs_is_dropped():
    """A device local to {0, 7} on a two-node machine is attributed to "0"."""
    r = "vendor.com/nic"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "n-07", [0, 7]), dev(r, "n-7", [7]), dev(r, "n-1", [1])])
        put_pod(node, "ns", "p", C("c", cpu_ids=(5,), devices=(dev(r, "n-07", [7, 0]),),
                                   memory=(mem(2 * GiB, [1, 7]),)))
        put_pod(node, "ns", "q", C("c", devices=(dev(r, "n-7", [7]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "0": 1, "1": 1, "unknown": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "0": 1, "1": 0, "unknown": 1}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 2 * GiB}
    assert issue(s, "unknown_numa_id") > 0
    assert util(s, r) == {"0": 1.0, "1": 0}
    # p: CPU on 1, memory on {1}, NIC local to {0} -> 2 nodes; q: nothing known -> no series
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 2
    assert not s.series("podresources_container_numa_nodes", pod="q")


async def test_negative_numa_ids_are_dropped():
    r = "vendor.com/nic"
    async with Node(small_profile()) as node:
        set_allocatable(node, cpu_ids=range(1, 8), memory=small_allocatable_memory(), devices=[
            dev(r, "n-a", [-1, 1]), dev(r, "n-b", [-1])])
        put_pod(node, "ns", "p", C("c", devices=(dev(r, "n-a", [1, -1]), dev(r, "n-b", [-1])),
                                   memory=(mem(GiB, [-2]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_devices_allocatable", "numa_node", resource=r) == {
        "1": 1, "unknown": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {
        "1": 1, "unknown": 1}
    assert s.value("podresources_memory_allocated_bytes", numa_node="unknown",
                   memory_type="memory") == GiB
    assert issue(s, "negative_numa_id") > 0
    for labels in s.series("podresources_device_info"):
        assert "-" not in dict(labels)["numa_node"]
    assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                   container="c") == 1
