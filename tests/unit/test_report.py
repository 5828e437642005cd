"""The snapshot command's report: unavailable devices, NUMA nodes without CPUs, who holds
what, and the JSON shape docs/snapshot.md documents."""

from __future__ import annotations

import json

from exporter.accounting import account
from exporter.commands.report import format_json, format_table
from exporter.kubelet.status import Capabilities
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    DeviceEntry as D,
    KubeletSnapshot,
    NumaNode,
    PodAssignment as P,
    Topology,
)

# node 0: CPUs 0-3; node 1: no CPUs (HBM or CXL memory)
TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(4)), 16 << 30),
                                NumaNode(1, frozenset(), 64 << 30)])
CAPS = Capabilities("v1", "true", "true", "unknown")


def snapshot() -> KubeletSnapshot:
    # the pod holds g0 and g1 on node 0; g1 turned unhealthy: allocatable lists g0 and g2
    return KubeletSnapshot(
        pods=(P("ns", "p", (C("c", cpu_ids=(1,), devices=(D("r/gpu", ("g0",), (0,)),
                                                          D("r/gpu", ("g1",), (0,)))),)),),
        allocatable=Allocatable(cpu_ids=(1, 2, 3), devices=(D("r/gpu", ("g0",), (0,)),
                                                            D("r/gpu", ("g2",), (0,)))))


def test_table_shows_unavailable_devices_and_cpu_less_nodes():
    text = format_table(account(snapshot(), TOPOLOGY), TOPOLOGY, CAPS, "n1")
    rows = [line.split() for line in text.splitlines()]
    # CPUs: node 0 1 of {1,2,3}; node 1 has none
    assert ["0", "0-3", "3", "1", "33.3%", "16.0", "GiB"] in rows
    assert rows[[r[:1] for r in rows].index(["1"])][:5] == ["1", "none", "-", "-", "-"]
    # devices: 2 allocated, 1 of them unavailable; used = listed assigned {g0} / {g0, g2}
    assert ["NUMA", "resource", "allocatable", "allocated", "unavailable", "used"] in rows
    assert ["0", "r/gpu", "2", "2", "1", "50.0%"] in rows
    assert "not listed as allocatable" in text
    assert "Data issues: none" in text


def test_json_carries_unavailable_devices():
    document = json.loads(format_json(account(snapshot(), TOPOLOGY), TOPOLOGY, CAPS, "n1"))
    assert document["devices_allocated_unavailable"] == [
        {"numa_node": "0", "resource": "r/gpu", "value": 1}]
    assert [n["cpus"] for n in document["numa_nodes"]] == ["0-3", ""]
    without = KubeletSnapshot(snapshot().pods, None)
    assert json.loads(format_json(account(without, TOPOLOGY), TOPOLOGY, CAPS))[
        "devices_allocated_unavailable"] is None


# ---- who holds what --------------------------------------------------------------------------

# Node 0: CPUs 0-3; node 1: CPUs 4-7.
TWO = Topology.from_nodes([NumaNode(0, frozenset(range(4)), 16 << 30),
                           NumaNode(1, frozenset(range(4, 8)), 16 << 30)])
GIB = 1 << 30


def held_snapshot() -> KubeletSnapshot:
    from exporter.model import DraDevice, MemoryBlock as M

    return KubeletSnapshot(pods=(
        P("ns", "web", (C("shared"),)),  # shared pool only: not listed
        P("ns", "train", (
            C("sidecar", memory=(M("memory", GIB // 4, (0,)),)),
            C("main", cpu_ids=(5, 1, 2, 4), memory=(M("memory", 8 * GIB, (0, 1)),
                                                      M("hugepages-1Gi", 2 * GIB, (1,))),
              devices=(D("nvidia.com/gpu", ("GPU-b",), (1,)), D("nvidia.com/gpu", ("GPU-a",), (1,)),
                       D("example.com/nic", ("nic0",), (0,)), D("example.com/nic", ("nic0",), (1,)),
                       D("example.com/fpga", ("f0",), None)),
              dra_devices=(DraDevice("gpu.example.com", "pool-a", "dev-3", "claim", "ns"),)),
        ), cpu_ids=(1, 2, 4, 5, 6)),
    ), allocatable=Allocatable(cpu_ids=tuple(range(1, 8)), memory=(
        M("memory", 12 * GIB, (0,)), M("memory", 12 * GIB, (1,)),
        M("hugepages-1Gi", 4 * GIB, (1,)))))


def test_json_says_who_holds_which_cpus_memory_and_devices():
    held = held_snapshot()
    document = json.loads(format_json(account(held, TWO), TWO, CAPS, "n1", pods=held.pods))
    assert document["format_version"] == 1
    assert document["pods"] == [{
        "namespace": "ns", "pod": "train",
        "pod_level": {"cpus": "1-2,4-6",
                      "cpus_by_numa_node": [{"numa_node": "0", "cpus": "1-2"},
                                            {"numa_node": "1", "cpus": "4-6"}],
                      "memory": []},
        "containers": [
            {"container": "sidecar", "numa_nodes": ["0"], "cpus": "", "cpus_by_numa_node": [],
             "memory": [{"memory_type": "memory", "numa_node": "0", "bytes": GIB // 4}],
             "devices": [], "dra_devices": []},
            {"container": "main", "numa_nodes": ["0", "1"], "cpus": "1-2,4-5",
             "cpus_by_numa_node": [{"numa_node": "0", "cpus": "1-2"},
                                   {"numa_node": "1", "cpus": "4-5"}],
             "memory": [{"memory_type": "hugepages-1Gi", "numa_node": "1", "bytes": 2 * GIB},
                        {"memory_type": "memory", "numa_node": "0,1", "bytes": 8 * GIB}],
             # one device per id, its NUMA entries joined; no topology: unknown
             "devices": [{"resource": "example.com/fpga", "device_id": "f0",
                          "numa_node": "unknown"},
                         {"resource": "example.com/nic", "device_id": "nic0",
                          "numa_node": "0,1"},
                         {"resource": "nvidia.com/gpu", "device_id": "GPU-a", "numa_node": "1"},
                         {"resource": "nvidia.com/gpu", "device_id": "GPU-b", "numa_node": "1"}],
             "dra_devices": [{"driver": "gpu.example.com", "pool": "pool-a", "device": "dev-3",
                              "claim": "ns/claim"}]},
        ]}]
    # every labelled figure is a list of rows; NUMA nodes are labels, strings
    assert document["cpus_allocated"] == [{"numa_node": "0", "value": 2},
                                          {"numa_node": "1", "value": 3}]
    assert [n["numa_node"] for n in document["numa_nodes"]] == ["0", "1"]
    assert document["container_numa_nodes"] == [
        {"namespace": "ns", "pod": "train", "container": "main", "value": 2},
        {"namespace": "ns", "pod": "train", "container": "sidecar", "value": 1}]
    assert document["data_issues"] == []


def test_table_says_who_holds_what_one_row_per_container():
    held = held_snapshot()
    text = format_table(account(held, TWO), TWO, CAPS, "n1", pods=held.pods)
    section = text[text.index("Who holds what"):].splitlines()
    assert section[1].split() == ["pod", "container", "NUMA", "CPUs", "memory", "devices"]
    assert section[2].split() == ["ns/train", "(pod", "level)", "-", "1-2@0", "4-6@1", "-", "-"]
    assert section[3].split() == ["ns/train", "sidecar", "0", "-", "memory", "256.0", "MiB",
                                  "@0", "-"]
    assert section[4].split()[:5] == ["ns/train", "main", "0,1", "1-2@0", "4-5@1"]
    assert section[4].endswith("hugepages-1Gi 2.0 GiB @1; memory 8.0 GiB @0,1  "
                               "example.com/fpga f0 @unknown; example.com/nic nic0 @0,1; "
                               "nvidia.com/gpu GPU-a,GPU-b @1; gpu.example.com pool-a/dev-3 "
                               "(DRA)")
    assert len(section) == 5  # ns/web holds nothing exclusive
    empty = format_table(account(KubeletSnapshot((), None), TWO), TWO, CAPS, pods=())
    assert "(no pod holds exclusive resources)" in empty
