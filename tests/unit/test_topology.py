"""Reading the NUMA layout from sysfs."""

from __future__ import annotations

import pytest

from exporter.topology import (
    TopologyError,
    format_cpulist,
    hugepage_resource_name,
    parse_cpulist,
    read_topology,
)


@pytest.mark.parametrize("text, cpus", [
    ("0-3", {0, 1, 2, 3}),
    ("0-1,32-33\n", {0, 1, 32, 33}),
    ("5", {5}),
    ("", set()),
    ("\n", set()),
    ("0-7:2/4", {0, 1, 4, 5}),  # the kernel's stride syntax: 2 of every 4
])
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a", "3-1", "1-", "0,,1", "0-7:5/4", "-1"])
def test_parse_cpulist_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_cpulist(text)


def test_format_cpulist_round_trips():
    assert format_cpulist({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert parse_cpulist(format_cpulist({3, 4, 9})) == {3, 4, 9}


def write(root, path, text):
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_read_topology(tmp_path):
    write(tmp_path, "devices/system/cpu/online", "0-5\n")
    write(tmp_path, "devices/system/node/node0/cpulist", "0-2\n")
    write(tmp_path, "devices/system/node/node0/meminfo",
          "Node 0 MemTotal:       16384 kB\nNode 0 MemFree: 1 kB\n")
    write(tmp_path, "devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "8\n")
    write(tmp_path, "devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages", "1\n")
    write(tmp_path, "devices/system/node/node1/cpulist", "3-7\n")  # 6-7 offline
    write(tmp_path, "devices/system/node/has_cpu", "0-1\n")  # not a node directory
    topology = read_topology(tmp_path)
    assert sorted(topology.numa_nodes) == [0, 1]
    assert topology.numa_nodes[0].cpus == {0, 1, 2}
    assert topology.numa_nodes[1].cpus == {3, 4, 5}
    assert topology.numa_nodes[0].memory_bytes == 16384 * 1024
    assert topology.numa_nodes[0].hugepages == {2 << 20: 8, 1 << 30: 1}
    assert topology.numa_nodes[1].memory_bytes is None
    assert topology.cpu_to_numa[4] == 1


def test_machine_without_numa_directory_is_one_node(tmp_path):
    write(tmp_path, "devices/system/cpu/online", "0-3\n")
    topology = read_topology(tmp_path)
    assert list(topology.numa_nodes) == [0]
    assert topology.numa_nodes[0].cpus == {0, 1, 2, 3}


def test_not_a_sysfs_tree_is_a_clear_error(tmp_path):
    with pytest.raises(TopologyError, match="--sysfs-root"):
        read_topology(tmp_path / "nowhere")


def test_corrupt_cpulist_names_the_file(tmp_path):
    write(tmp_path, "devices/system/node/node0/cpulist", "zero\n")
    with pytest.raises(TopologyError, match="node0/cpulist"):
        read_topology(tmp_path)


def test_hugepage_resource_names():
    assert hugepage_resource_name(2 << 20) == "hugepages-2Mi"
    assert hugepage_resource_name(1 << 30) == "hugepages-1Gi"
    assert hugepage_resource_name(64 << 10) == "hugepages-64Ki"


def test_numa_distances_are_read_from_sysfs(tmp_path):
    """node<N>/distance: the k-th value is the distance to the k-th node by id."""
    for numa_id, cpus, row in ((0, "0-1", "10 21"), (1, "2-3", "21 10")):
        node = tmp_path / "devices" / "system" / "node" / f"node{numa_id}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
        (node / "distance").write_text(row + "\n")
    topology = read_topology(tmp_path)
    assert topology.distances() == {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}


def test_numa_distances_missing_or_short_are_unknown(tmp_path):
    for numa_id, cpus, row in ((0, "0-1", "10"), (1, "2-3", None)):
        node = tmp_path / "devices" / "system" / "node" / f"node{numa_id}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
        if row is not None:
            (node / "distance").write_text(row + "\n")
    assert read_topology(tmp_path).distances() is None
