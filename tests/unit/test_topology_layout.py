"""The CPU layout read as cAdvisor reads it for the kubelet's CPU manager (``utils/sysinfo``
``getCoresInfo``, ``addCacheInfo``; the kubelet's ``topology.Discover`` and
``getUncoreCacheID``): cores, sockets and uncore caches. Expected values worked by hand from
cAdvisor's code."""

from __future__ import annotations

from pathlib import Path

from exporter.topology import read_topology


def _file(root: Path, path: str, text: str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")


def _cpu(root: Path, cpu: int, core: int, package: int, siblings: str, die: int = 0) -> None:
    base = f"devices/system/cpu/cpu{cpu}/topology"
    _file(root, f"{base}/core_id", str(core))
    _file(root, f"{base}/physical_package_id", str(package))
    _file(root, f"{base}/die_id", str(die))
    _file(root, f"{base}/thread_siblings_list", siblings)


def _l3(root: Path, cpu: int, cache_id: int, shared_map: str, level: int = 3,
        index: str = "index3") -> None:
    base = f"devices/system/cpu/cpu{cpu}/cache/{index}"
    _file(root, f"{base}/id", str(cache_id))
    _file(root, f"{base}/level", str(level))
    _file(root, f"{base}/type", "Unified")
    _file(root, f"{base}/size", "32768K")
    _file(root, f"{base}/shared_cpu_map", shared_map)


def _nodes(root: Path, nodes: dict[int, str], online: str) -> None:
    _file(root, "devices/system/cpu/online", online)
    for numa, cpus in nodes.items():
        _file(root, f"devices/system/node/node{numa}/cpulist", cpus)


def test_core_id_repeated_across_dies_is_one_core_for_the_kubelet(tmp_path: Path) -> None:
    # one NUMA node, one package, two dies of two cores each whose core_id restarts per die:
    # the kernel's thread_siblings_list says four cores of two threads; cAdvisor groups by
    # (core_id, physical_package_id), so the kubelet sees two "cores" of four threads each
    _nodes(tmp_path, {0: "0-7"}, "0-7")
    for cpu in range(8):
        physical = cpu % 4  # CPUs k and k+4 are one physical core
        _cpu(tmp_path, cpu, core=physical % 2, package=0, die=physical // 2,
             siblings=f"{physical},{physical + 4}")
    topology = read_topology(tmp_path)
    assert topology.siblings(0) == {0, 2, 4, 6}
    assert topology.siblings(3) == {1, 3, 5, 7}


def test_same_core_id_on_two_numa_nodes_is_two_cores(tmp_path: Path) -> None:
    # cAdvisor groups within a NUMA node's directory: core_id 0 of package 0 on node 0 and on
    # node 1 (sub-NUMA clustering numbering cores per cluster) stay two cores
    _nodes(tmp_path, {0: "0,2", 1: "1,3"}, "0-3")
    _cpu(tmp_path, 0, core=0, package=0, siblings="0,2")
    _cpu(tmp_path, 2, core=0, package=0, siblings="0,2")
    _cpu(tmp_path, 1, core=0, package=0, siblings="1,3")
    _cpu(tmp_path, 3, core=0, package=0, siblings="1,3")
    topology = read_topology(tmp_path)
    assert topology.siblings(0) == {0, 2}
    assert topology.siblings(3) == {1, 3}
    assert topology.cpu_packages == {0: 0, 1: 0, 2: 0, 3: 0}


def test_cpu_without_core_id_keeps_the_kernels_siblings(tmp_path: Path) -> None:
    _nodes(tmp_path, {0: "0-1"}, "0-1")
    _file(tmp_path, "devices/system/cpu/cpu0/topology/thread_siblings_list", "0-1")
    _file(tmp_path, "devices/system/cpu/cpu1/topology/thread_siblings_list", "0-1")
    assert read_topology(tmp_path).siblings(1) == {0, 1}


def test_l3_per_ccx_is_the_uncore_cache(tmp_path: Path) -> None:
    # one NUMA node of 8 cores without SMT, two L3 caches (ids 4 and 9) of 4 cores each:
    # each shared by 4 CPUs, not the node's 8, so each is a core's uncore cache
    _nodes(tmp_path, {0: "0-7"}, "0-7")
    for cpu in range(8):
        _cpu(tmp_path, cpu, core=cpu, package=0, siblings=str(cpu))
        _l3(tmp_path, cpu, 4 if cpu < 4 else 9, "0f" if cpu < 4 else "f0")
    topology = read_topology(tmp_path)
    assert topology.cpu_uncore == {0: 4, 1: 4, 2: 4, 3: 4, 4: 9, 5: 9, 6: 9, 7: 9}


def test_l3_holding_the_whole_numa_node_falls_back_to_the_socket(tmp_path: Path) -> None:
    # node 0 (CPUs 0-3) has one L3 of exactly its 4 CPUs: cAdvisor files it as a node cache,
    # and the kubelet's getUncoreCacheID takes the socket (7); node 1 has no cache directory:
    # the socket too (3)
    _nodes(tmp_path, {0: "0-3", 1: "4-5"}, "0-5")
    for cpu in range(4):
        _cpu(tmp_path, cpu, core=cpu, package=7, siblings=str(cpu))
        _l3(tmp_path, cpu, 0, "00000000,0000000f")
    for cpu in (4, 5):
        _cpu(tmp_path, cpu, core=cpu, package=3, siblings=str(cpu))
    topology = read_topology(tmp_path)
    assert topology.cpu_uncore == {}
    assert {cpu: topology.cpu_packages[cpu] for cpu in range(6)} == {
        0: 7, 1: 7, 2: 7, 3: 7, 4: 3, 5: 3}


def test_l3_spanning_two_numa_nodes_is_each_nodes_uncore_cache(tmp_path: Path) -> None:
    # sub-NUMA clustering: one L3 (id 0) for the whole socket, 2 NUMA nodes of 2 CPUs: 4 CPUs
    # share it, not a node's 2, so it is every core's uncore cache on both nodes
    _nodes(tmp_path, {0: "0-1", 1: "2-3"}, "0-3")
    for cpu in range(4):
        _cpu(tmp_path, cpu, core=cpu, package=0, siblings=str(cpu))
        _l3(tmp_path, cpu, 0, "f")
    assert read_topology(tmp_path).cpu_uncore == {0: 0, 1: 0, 2: 0, 3: 0}


def test_smt_node_counts_threads_when_telling_a_node_cache(tmp_path: Path) -> None:
    # 2 cores x 2 threads on a node; an L3 shared by 4 CPUs = the node's 2 cores x 2 threads:
    # a node cache, so the socket (0); an L4 shared by 2 (index4, level 4) would be the
    # uncore cache instead, the first above L2 that is not the node's
    _nodes(tmp_path, {0: "0-3"}, "0-3")
    for cpu in range(4):
        _cpu(tmp_path, cpu, core=cpu % 2, package=0, siblings=f"{cpu % 2},{cpu % 2 + 2}")
        _l3(tmp_path, cpu, 0, "f")
    assert read_topology(tmp_path).cpu_uncore == {}
    for cpu in range(4):
        _l3(tmp_path, cpu, 5, "5" if cpu % 2 == 0 else "a", level=4, index="index4")
    assert read_topology(tmp_path).cpu_uncore == {0: 5, 2: 5, 1: 5, 3: 5}


def test_an_unreadable_cache_ends_the_nodes_cache_reading(tmp_path: Path) -> None:
    # cAdvisor's addCacheInfo returns at the first core whose caches it cannot read (here
    # CPU 2's L3 has no id): CPUs 0 and 1 (read before) keep their L3, 2 and 3 get none
    _nodes(tmp_path, {0: "0-3"}, "0-3")
    for cpu in range(4):
        _cpu(tmp_path, cpu, core=cpu, package=1, siblings=str(cpu))
        _l3(tmp_path, cpu, 8, "3" if cpu < 2 else "c")
    (tmp_path / "devices/system/cpu/cpu2/cache/index3/id").unlink()
    assert read_topology(tmp_path).cpu_uncore == {0: 8, 1: 8}


def test_without_numa_directories_each_socket_is_a_node(tmp_path: Path) -> None:
    # cAdvisor's getCPUTopology: no node directories, so one node per physical package,
    # numbered by the package id
    _file(tmp_path, "devices/system/cpu/online", "0-3")
    for cpu in range(4):
        _cpu(tmp_path, cpu, core=cpu, package=2 * (cpu // 2), siblings=str(cpu))
    topology = read_topology(tmp_path)
    assert {n: node.cpus for n, node in topology.numa_nodes.items()} == {
        0: {0, 1}, 2: {2, 3}}
