"""Node layouts as the real kubelet reads them and as the exporter reads them, on every built
release: the component writes a sysfs tree from the layout, cAdvisor's own reader builds the
machine info from it, and the CPU manager's ``topology.Discover`` gives each CPU's core, socket,
NUMA node and uncore cache; the exporter reads the same tree (``exporter.topology``).

Per layout, a few values are worked by hand from cAdvisor's and the kubelet's code (the
docstring of each says how), then every CPU of the exporter's reading is compared with the
kubelet's.
"""

from __future__ import annotations

from typing import Any

import pytest

from exporter.simulator.profile import parse_profile
from exporter.topology import read_topology

from ..support.realkubelet import RELEASES, RealKubelet, node_description


def machine(numa_cpus: list[str], threads: int, layout: dict[str, Any],
            memory_only: int = 0) -> dict[str, Any]:
    nodes = [{"id": n, "cpus": cpus, "memory": "4Gi"} for n, cpus in enumerate(numa_cpus)]
    nodes += [{"id": len(numa_cpus) + n, "cpus": "", "memory": "8Gi"} for n in range(memory_only)]
    profile = {"name": "layout", "node_name": "layout-node", "numa_nodes": nodes,
               "threads_per_core": threads, "topology_manager_policy": "none",
               "cpu_manager_policy": "none", "memory_manager_policy": "None",
               "cpu_layout": layout}
    return node_description(parse_profile(profile))


def epyc_nps4() -> dict[str, Any]:
    """Two sockets in NPS4: 8 NUMA nodes of 4 cores x 2 threads (64 CPUs; core k's threads
    are k and k + 32), socket s holding NUMA nodes 4s..4s+3, one L3 per 2 cores (a CCX),
    numbered by core: core k under L3 k // 2."""
    numa = [f"{4 * n}-{4 * n + 3},{4 * n + 32}-{4 * n + 35}" for n in range(8)]
    layout = {"sockets": {"0": "0-15,32-47", "1": "16-31,48-63"},
              "l3": {str(c): f"{2 * c},{2 * c + 1},{2 * c + 32},{2 * c + 33}"
                     for c in range(16)}}
    return machine(numa, 2, layout)


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


def exporter_view(sysfs_root: str) -> dict[str, Any]:
    """The exporter's reading, in the kubelet's terms (a core is its lowest thread; the uncore
    cache, where sysfs gives none apart from the node's, the socket)."""
    topology = read_topology(sysfs_root)
    cpus = {}
    for cpu, numa in topology.cpu_to_numa.items():
        socket = topology.cpu_packages[cpu]
        cpus[cpu] = {"core": min(topology.siblings(cpu)), "socket": socket, "numa": numa,
                     "uncore": topology.cpu_uncore.get(cpu, socket)}
    return {"cpus": cpus, "numa_nodes": sorted(topology.numa_nodes),
            "num_sockets": len(set(topology.cpu_packages.values()))}


def assert_same_reading(kubelet: RealKubelet, description: dict[str, Any]) -> dict[str, Any]:
    node = kubelet.reset(description)
    theirs = kubelet.cpu_topology()
    mine = exporter_view(node.sysfs_root)
    assert mine["cpus"] == theirs["cpus"]
    assert mine["numa_nodes"] == sorted(theirs["numa_nodes"])
    assert mine["num_sockets"] == theirs["num_sockets"]
    return theirs


def test_epyc_nps4_sockets_first_with_l3_per_ccx(kubelet: RealKubelet) -> None:
    """2 sockets < 8 NUMA nodes: the CPU manager takes sockets first. Each L3 holds 4 CPUs
    and its NUMA node 8, so cAdvisor files it as the cores' uncore cache: CPU 33 (core 1,
    NUMA node 0) under L3 0, CPU 54 (core 22, NUMA node 5, socket 1) under L3 11."""
    theirs = assert_same_reading(kubelet, epyc_nps4())
    assert (theirs["num_cpus"], theirs["num_cores"], theirs["num_sockets"],
            theirs["num_numa_nodes"], theirs["num_uncore_caches"]) == (64, 32, 2, 8, 16)
    assert theirs["cpus"][33] == {"core": 1, "socket": 0, "numa": 0, "uncore": 0}
    assert theirs["cpus"][54] == {"core": 22, "socket": 1, "numa": 5, "uncore": 11}


def test_sub_numa_clustering_l3_spans_the_socket(kubelet: RealKubelet) -> None:
    """One socket, 2 NUMA nodes (SNC-2) of 2 cores x 2 threads, one L3 (id 7) for the socket:
    8 CPUs share it, a node has 4, so it is every core's uncore cache."""
    description = machine(["0-1,4-5", "2-3,6-7"], 2, {"sockets": {"0": "0-7"},
                                                      "l3": {"7": "0-7"}})
    theirs = assert_same_reading(kubelet, description)
    assert {info["uncore"] for info in theirs["cpus"].values()} == {7}
    assert (theirs["num_sockets"], theirs["num_numa_nodes"]) == (1, 2)


def test_l3_of_the_whole_numa_node_is_the_socket(kubelet: RealKubelet) -> None:
    """An L3 (ids 5, 6) holding exactly its NUMA node's CPUs is a node cache to cAdvisor; the
    kubelet's getUncoreCacheID then answers the socket (here 0 and 1)."""
    description = machine(["0-3", "4-7"], 1, {"sockets": {"0": "0-3", "1": "4-7"},
                                              "l3": {"5": "0-3", "6": "4-7"}})
    theirs = assert_same_reading(kubelet, description)
    assert {cpu: info["uncore"] for cpu, info in theirs["cpus"].items()} == {
        0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    assert theirs["num_uncore_caches"] == 2


def test_two_sockets_in_one_numa_node_and_no_cache(kubelet: RealKubelet) -> None:
    """One NUMA node holding sockets 0 and 1 (NUMA nodes first: 2 sockets >= 1 node); no cache
    directory, so each CPU's uncore cache is its socket."""
    description = machine(["0-7"], 1, {"sockets": {"0": "0-3", "1": "4-7"}})
    theirs = assert_same_reading(kubelet, description)
    assert (theirs["num_sockets"], theirs["num_numa_nodes"]) == (2, 1)
    assert theirs["cpus"][6] == {"core": 6, "socket": 1, "numa": 0, "uncore": 1}


def test_core_id_repeated_across_dies(kubelet: RealKubelet) -> None:
    """One socket, one NUMA node, two dies of 2 cores x 2 threads, core_id 0 and 1 on each die:
    the kernel's thread siblings are 4 cores; cAdvisor groups by (core_id, package), so the
    kubelet sees 2 cores of 4 threads, core 0 = {0,2,4,6} (CPUs 0 and 2 are core_id 0 of dies 0
    and 1, with their siblings 4 and 6)."""
    layout = {"sockets": {"0": "0-7"}, "dies": {"0": "0-1,4-5", "1": "2-3,6-7"},
              "core_id_per_die": True}
    theirs = assert_same_reading(kubelet, machine(["0-7"], 2, layout))
    assert theirs["num_cores"] == 2
    assert {cpu: info["core"] for cpu, info in theirs["cpus"].items()} == {
        0: 0, 2: 0, 4: 0, 6: 0, 1: 1, 3: 1, 5: 1, 7: 1}


def test_numa_nodes_without_cpus(kubelet: RealKubelet) -> None:
    """Two NUMA nodes with CPUs and two memory-only ones (CXL or HBM): the Topology Manager
    and the memory manager know all four, the CPU manager counts two."""
    theirs = assert_same_reading(kubelet, machine(["0-3", "4-7"], 1, {}, memory_only=2))
    assert sorted(theirs["numa_nodes"]) == [0, 1, 2, 3]
    assert theirs["num_numa_nodes"] == 2
