"""SPEC section 2, pods coming and going, sidecars, label formats and the capability flags.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

import pytest

from exporter.simulator import Faults
from exporter.simulator.node.admissionconfig import AdmissionConfig
from exporter.simulator.profile import parse_pod

from ..support.harness import Exporter, GiB, Node, small_profile
from ..support.spec import (
    C,
    dev,
    mem,
    nodes_profile,
    put_pod,
    set_allocatable,
    util,
)


async def test_departed_pod_disappears_and_node_figures_return_to_zero():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"1": 2}}], pods=[
        {"namespace": "ns", "name": "p", "containers": [  # r/x: on node 1 only
            {"name": "c", "cpus": 2, "memory": "2Gi", "devices": {"r/x": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"1": 1}
        node.simulator.state.remove("ns", "p")
        s = await exporter.wait_for(lambda s: not s.series("podresources_device_info"),
                                    what="departed pod to vanish")
    for name in ("podresources_container_cpus", "podresources_container_memory_bytes",
                 "podresources_container_devices", "podresources_container_numa_nodes"):
        assert not s.series(name, pod="p"), name
    assert s.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"1": 0}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 0}
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 0, "1": 0}


async def test_sidecars_are_counted_regular_init_containers_are_not():
    # the sidecar starts first: CPU 1 on node 0; the init container's CPU 2 is reused by the
    # app container (2 and 3): node 0's three allocatable CPUs, init's not counted twice
    profile = small_profile(pods=[{
        "namespace": "ns", "name": "p",
        "init_containers": [{"name": "init", "cpus": 1}],
        "sidecars": [{"name": "side", "cpus": 1}],
        "containers": [{"name": "app", "cpus": 2}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    assert s.by("podresources_container_cpus", "container", "numa_node", pod="p") == {
        ("side", "0"): 1, ("app", "0"): 2}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
    assert s.by("podresources_container_numa_nodes", "container", pod="p") == {
        "side": 1, "app": 1}


async def test_label_formats_decimal_ids_and_workload_labels():
    r = "vendor.com/nic"
    async with Node(nodes_profile([2, 3, 10])) as node:  # CPUs: n2 0-1, n3 2-3, n10 4-5
        set_allocatable(node, cpu_ids=range(6), memory=[mem(10 * GiB, [n]) for n in (2, 3, 10)],
                        devices=[dev(r, "nic-0", [10, 2])])
        put_pod(node, "team-a", "web-0", C("server", cpu_ids=(4,),
                                           devices=(dev(r, "nic-0", [2, 10]),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    assert s.by("podresources_numa_node_cpus", "numa_node") == {"2": 2, "3": 2, "10": 2}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"2": 0, "3": 0, "10": 1}
    assert s.by("podresources_devices_allocated", "numa_node", resource=r) == {"2,10": 1}
    assert util(s, r) == {"2": 1.0, "10": 1.0}
    ((labels, value),) = s.series("podresources_container_cpus").items()
    assert dict(labels) == {"namespace": "team-a", "pod": "web-0", "container": "server",
                            "numa_node": "10"} and value == 1
    ((labels, value),) = s.series("podresources_device_info").items()
    assert dict(labels) == {"resource": r, "device_id": "nic-0", "numa_node": "2,10",
                            "namespace": "team-a", "pod": "web-0", "container": "server"}
    ((labels, value),) = s.series("podresources_container_numa_nodes").items()
    assert dict(labels) == {"namespace": "team-a", "pod": "web-0", "container": "server"}
    assert value == 1
    # no node label on the exporter's own series
    assert not any("node" in dict(k) for k in s.series("podresources_cpus_allocated"))


@pytest.mark.parametrize("faults, flags", [
    (Faults(get_allocatable="disabled"), ("false", "true")),
    (Faults(get_allocatable="unimplemented"), ("false", "true")),
    (Faults(get="unimplemented"), ("true", "false")),
    (Faults(get="disabled"), ("true", "false")),
])
async def test_kubelet_api_info_capability_flags(faults, flags):
    async with Node(small_profile(), faults=faults) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    get_allocatable, get = flags
    assert s.series("podresources_kubelet_api_info") == {
        (("api_version", "v1"), ("get", get), ("get_allocatable", get_allocatable),
         ("pod_level", "unknown")): 1}


async def test_pod_level_flag_becomes_true_once_seen_and_stays():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="unknown") == 1
        # a pod-level pool: PodLevelResourceManagers under scope pod
        node.simulator.state.admit(parse_pod({
            "namespace": "ns", "name": "p", "pod_level": {"cpus": 1},
            "containers": [{"name": "c", "cpus": 1}]}),
            AdmissionConfig("single-numa-node", "pod", pod_level_resource_managers=True))
        s = await exporter.wait_for(lambda s: s.series("podresources_pod_cpus"),
                                    what="pod-level pod")
        assert s.series("podresources_kubelet_api_info") == {
            (("api_version", "v1"), ("get", "true"), ("get_allocatable", "true"),
             ("pod_level", "true")): 1}
        node.simulator.state.remove("ns", "p")
        s = await exporter.wait_for(lambda s: not s.series("podresources_pod_cpus"),
                                    what="pod-level pod gone")
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="true") == 1
