"""SMT siblings: read from sysfs, written by the simulator's fake sysfs."""

from __future__ import annotations

import re
from pathlib import Path

from exporter.simulator import load_profile
from exporter.simulator.node.sysfs import write_sysfs
from exporter.topology import RereadTopology, read_topology


def _write(root: Path, nodes: dict[int, str], siblings: dict[int, str], online: str) -> None:
    (root / "devices/system/cpu").mkdir(parents=True)
    (root / "devices/system/cpu/online").write_text(online + "\n")
    for numa_id, cpulist in nodes.items():
        node = root / f"devices/system/node/node{numa_id}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpulist + "\n")
    for cpu, text in siblings.items():
        directory = root / f"devices/system/cpu/cpu{cpu}/topology"
        directory.mkdir(parents=True)
        (directory / "thread_siblings_list").write_text(text + "\n")


def test_siblings_read_from_thread_siblings_list(tmp_path: Path) -> None:
    _write(tmp_path, {0: "0-1,4-5", 1: "2-3,6-7"},
           {0: "0,4", 4: "0,4", 1: "1,5", 5: "1,5", 2: "2,6", 6: "2,6", 3: "3,7", 7: "3,7"},
           "0-7")
    topology = read_topology(tmp_path)
    assert topology.siblings(0) == {0, 4}
    assert topology.siblings(7) == {3, 7}


def test_offline_sibling_and_missing_file(tmp_path: Path) -> None:
    # CPU 5 is offline: the kernel would drop it from the list, a stale file must not add it;
    # CPU 3 has no topology directory: a core of its own
    _write(tmp_path, {0: "0-7"}, {0: "0,4", 1: "1,5", 4: "0,4"}, "0-4,6-7")
    topology = read_topology(tmp_path)
    assert topology.siblings(1) == {1}
    assert topology.siblings(3) == {3}
    assert topology.siblings(4) == {0, 4}


def test_simulator_writes_x86_sibling_numbering(tmp_path: Path) -> None:
    # dual-socket-gpu: 64 logical CPUs, 2 threads per core; Linux numbers the first thread of
    # every core first, so CPU k and CPU k+32 share a core
    write_sysfs(load_profile("dual-socket-gpu"), tmp_path)
    text = (tmp_path / "devices/system/cpu/cpu17/topology/thread_siblings_list").read_text()
    assert text == "17,49\n"
    topology = read_topology(tmp_path)
    assert topology.siblings(40) == {8, 40}
    assert all(len(topology.siblings(cpu)) == 2 for cpu in range(64))


def test_simulator_without_smt(tmp_path: Path) -> None:
    write_sysfs(load_profile("small"), tmp_path)
    assert read_topology(tmp_path).siblings(3) == {3}


def test_reread_keeps_the_topology_while_the_nodes_stay(tmp_path: Path) -> None:
    # while the nodes' CPUs stay, the same topology object (the accounting keeps its state);
    # the siblings are read again with a change of the nodes (a CPU going offline)
    _write(tmp_path, {0: "0-3"}, {0: "0,2", 2: "0,2", 1: "1,3", 3: "1,3"}, "0-3")
    first = read_topology(tmp_path)
    reread = RereadTopology(tmp_path, 0.0, first)
    (tmp_path / "devices/system/cpu/cpu0/topology/thread_siblings_list").write_text("0\n")
    assert reread.current() is first
    # CPU 3 goes offline: the kernel drops it from its sibling's list, and the node's CPUs change
    (tmp_path / "devices/system/cpu/online").write_text("0-2\n")
    (tmp_path / "devices/system/cpu/cpu1/topology/thread_siblings_list").write_text("1\n")
    changed = reread.current()
    assert changed is not first
    assert changed.numa_nodes[0].cpus == {0, 1, 2}
    assert changed.siblings(1) == {1}
    assert changed.siblings(0) == {0}
    assert reread.current() is changed


def test_reread_notices_hugepages_and_memory_but_not_free_memory(tmp_path: Path) -> None:
    write_sysfs(load_profile("small"), tmp_path)
    node = tmp_path / "devices/system/node/node0"
    first = read_topology(tmp_path)
    reread = RereadTopology(tmp_path, 0.0, first)
    assert reread.current() is first
    meminfo = (node / "meminfo").read_text()
    (node / "meminfo").write_text(re.sub(r"MemFree:\s+\d+", "MemFree: 12", meminfo))
    assert reread.current() is first
    (node / "hugepages/hugepages-2048kB/nr_hugepages").write_text("7\n")
    grown = reread.current()
    assert grown is not first
    assert grown.numa_nodes[0].hugepages == {2 * 1024 * 1024: 7}
    (node / "meminfo").write_text(re.sub(r"MemTotal:\s+\d+", "MemTotal: 1024", meminfo))
    assert reread.current().numa_nodes[0].memory_bytes == 1024 * 1024
