"""SPEC section 11, "exclusive CPUs from DRA", black box without the Kubernetes-API view: the
``dra-cpu`` node (CPU manager policy ``none``; dra-driver-cpu's grouped devices, one per NUMA
node) as the demo shows it, its pod context from the simulated kubelet's Pods API.

Without the view no ResourceSlice says where a device is or what it offers, so by hand:

* the CPUs each container holds are its CPU request: virt-launcher-db-0's compute 8,
  upf-0's dataplane 6, pipeline-0's worker 2500m - 500m = 2, all under ``numa_node="unknown"``:
  16 allocated, none allocatable (no series);
* without any pod context, none of them is counted: three containers, the data issue
  ``dra_cpus_uncounted`` each refresh;
* a container that holds a grouped device but states no CPU request (a Burstable VM) is not
  counted either, the others still are.
"""

from __future__ import annotations

import json
from importlib import resources

from exporter.commands.snapshot import snapshot

from ..support.harness import Exporter, Node, Scrape

CPU = "dra.cpu"


def profile() -> dict:
    text = resources.files("exporter.simulator").joinpath("profiles", "dra-cpu.json").read_text()
    return json.loads(text)


def counted(pods: int):
    def check(s: Scrape) -> bool:
        return len(s.series("podresources_container_cpus")) == pods
    return check


async def test_the_requests_count_the_cpus_under_numa_node_unknown():
    async with Node("dra-cpu", pods_api=True) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.wait_for(counted(3), what="the Pods API's pods counted")
        issues = exporter.refresher.accounting.data_issues
    assert s.by("podresources_cpus_allocated", "numa_node") == {"unknown": 16}
    assert not s.series("podresources_cpus_allocatable")
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("virt-launcher-db-0", "compute", "unknown"): 8, ("upf-0", "dataplane", "unknown"): 6,
        ("pipeline-0", "worker", "unknown"): 2}
    assert s.by("podresources_cpu_allocator_info", "allocator", "driver") == {("dra", CPU): 1}
    assert not s.series("podresources_numa_utilization_ratio", resource="cpu")
    assert issues == {}
    # the devices are DRA devices of unknown NUMA node too: two, cpudevnuma001 with two shares
    assert s.by("podresources_dra_devices_allocated", "numa_node") == {"unknown": 2}
    assert s.by("podresources_dra_device_shares", "numa_node") == {"unknown": 3}


async def test_without_pod_context_nothing_is_guessed():
    async with Node("dra-cpu") as node, \
            Exporter(node.settings(pods_api=False)) as exporter:
        s = await exporter.ready()
        issues = exporter.refresher.accounting.data_issues
        example = exporter.refresher.accounting.issue_examples["dra_cpus_uncounted"]
    assert not s.series("podresources_cpus_allocated")
    assert not s.series("podresources_container_cpus")
    assert issues == {"dra_cpus_uncounted": 3}
    assert "there is no pod context" in example
    assert s.by("podresources_cpu_allocator_info", "allocator", "driver") == {("dra", CPU): 1}


async def test_a_container_without_a_cpu_request_is_not_counted_the_others_are():
    data = profile()
    data["pods"].append({
        "namespace": "vm", "name": "virt-launcher-web-0", "qos": "Burstable",
        "claims": [{"name": "cpus", "driver": CPU, "shared": True, "devices": ["cpudevnuma000"]}],
        "containers": [{"name": "compute", "memory": "2Gi", "claims": ["cpus"]}]})
    async with Node(data, pods_api=True) as node, Exporter(node.settings()) as exporter:
        s = await exporter.wait_for(counted(3), what="the Pods API's pods counted")
        issues = exporter.refresher.accounting.data_issues
        example = exporter.refresher.accounting.issue_examples["dra_cpus_uncounted"]
    assert s.by("podresources_cpus_allocated", "numa_node") == {"unknown": 16}
    assert issues == {"dra_cpus_uncounted": 1}
    assert example.startswith("container vm/virt-launcher-web-0/compute holds CPUs of the DRA "
                              "device dra.cpu/cpu-node-01/cpudevnuma000")
    assert example.endswith("its spec states no CPU request for it")


async def test_snapshot_says_where_the_cpus_come_from_and_what_the_fit_assumes(capsys):
    async with Node("dra-cpu", pods_api=True) as node:
        assert await snapshot(node.settings(), "table", "info") == 0
        table = capsys.readouterr().out
        assert await snapshot(node.settings(), "json", "info") == 0
        document = json.loads(capsys.readouterr().out)
        assert await snapshot(node.settings(), "table", "info", shape="cpu=2,memory=1Gi") == 0
        answer = capsys.readouterr().out
    assert ("(exclusive CPUs from DRA, driver dra.cpu: in the figures above; those of devices "
            "grouping CPUs are counted from the containers' CPU requests, their ids unknown)"
            ) in table
    rows = [line.split() for line in table.splitlines()
            if line.split()[:1] in (["vm/virt-launcher-db-0"], ["telco/upf-0"],
                                    ["batch/pipeline-0"]) and line.split()[-1].isdigit()]
    assert rows == [["batch/pipeline-0", "worker", "unknown", "2"],
                    ["telco/upf-0", "dataplane", "unknown", "6"],
                    ["vm/virt-launcher-db-0", "compute", "unknown", "8"]]
    assert document["cpus_allocated"] == [{"numa_node": "unknown", "value": 16}]
    assert document["cpu_allocators"] == [{"allocator": "dra", "driver": CPU, "value": 1}]
    assert document["dra_cpus"] == [
        {"namespace": "batch", "pod": "pipeline-0", "container": "worker",
         "numa_node": "unknown", "value": 2},
        {"namespace": "telco", "pod": "upf-0", "container": "dataplane",
         "numa_node": "unknown", "value": 6},
        {"namespace": "vm", "pod": "virt-launcher-db-0", "container": "compute",
         "numa_node": "unknown", "value": 8}]
    assert ("the node's exclusive CPUs come from a DRA CPU driver (CPU manager policy none): "
            "the kubelet admits the shape's CPUs without placing them") in answer
