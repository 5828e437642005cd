"""The kubelet's CPU assignment (``cpumanager/cpu_assignment.go``), checked with the kubelet's own
unit-test cases (``cpu_assignment_test.go`` at v1.37.2: ``commonTakeByTopologyTestCases``,
``TestTakeByTopologyNUMAPacked``, ``commonTakeByTopologyExtendedTestCases``,
``TestTakeByTopologyNUMADistributed``; the topologies of ``policy_test.go``) and by hand."""

from __future__ import annotations

import pytest

from exporter.fit.kubelet.cpumanager.cpu_assignment import (
    SPREAD,
    CpuAssignmentError,
    standard_deviation,
    take_distributed,
    take_packed,
)
from exporter.fit.kubelet.cpumanager.policy_options import CpuOptions
from exporter.fit.kubelet.cpumanager.policy_static import allocate_cpus
from exporter.fit.kubelet.cpumanager.topology import CpuTopology
from exporter.topology import parse_cpulist


def topology(cpus: int, core, socket, numa) -> CpuTopology:
    """A CPUTopology given per CPU its core id, socket and NUMA node (as policy_test.go)."""
    cores: dict[int, set[int]] = {}
    for cpu in range(cpus):
        cores.setdefault(core(cpu), set()).add(cpu)
    siblings = {cpu: frozenset(cores[core(cpu)]) for cpu in range(cpus)}
    return CpuTopology.build({c: numa(c) for c in range(cpus)}, siblings,
                             {c: socket(c) for c in range(cpus)})


SINGLE_SOCKET_HT = topology(8, lambda c: c % 4, lambda c: 0, lambda c: 0)
DUAL_SOCKET_HT = topology(12, lambda c: c % 6, lambda c: c % 2, lambda c: c % 2)
# 80 CPUs: 2 sockets of 2 NUMA nodes of 10 cores; CPU c and c+40 share a core
DUAL_SOCKET_MULTI_NUMA_HT = topology(80, lambda c: c % 40, lambda c: (c % 40) // 20,
                                     lambda c: (c % 40) // 10)
TOPOLOGIES = {"single-socket-ht": SINGLE_SOCKET_HT, "dual-socket-ht": DUAL_SOCKET_HT,
              "dual-socket-multi-numa-ht": DUAL_SOCKET_MULTI_NUMA_HT}

# (description, topology, available, count, expected) from commonTakeByTopologyTestCases
COMMON = [
    ("take zero cpus from single socket with HT", "single-socket-ht", "0-7", 0, ""),
    ("take one cpu from single socket with HT", "single-socket-ht", "0-7", 1, "0"),
    ("take one cpu from single socket with HT, some cpus are taken", "single-socket-ht",
     "1,3,5-7", 1, "6"),
    ("take two cpus from single socket with HT", "single-socket-ht", "0-7", 2, "0,4"),
    ("take all cpus from single socket with HT", "single-socket-ht", "0-7", 8, "0-7"),
    ("take two cpus from single socket with HT, only one core totally free",
     "single-socket-ht", "0-3,6", 2, "2,6"),
    ("take a socket of cpus from dual socket with HT", "dual-socket-ht", "0-11", 6,
     "0,2,4,6,8,10"),
    ("take a socket of cpus from dual socket with multi-numa-per-socket with HT",
     "dual-socket-multi-numa-ht", "0-79", 40, "0-19,40-59"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
     "dual-socket-multi-numa-ht", "0-79", 20, "0-9,40-49"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 "
     "NUMA node already taken", "dual-socket-multi-numa-ht", "10-39,50-79", 20,
     "10-19,50-59"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
     "dual-socket-multi-numa-ht", "0-79", 60, "0-29,40-69"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with "
     "HT, a core taken", "dual-socket-multi-numa-ht", "1-39,41-79", 60, "10-39,50-79"),
]
PACKED_ONLY = [
    ("take one cpu from dual socket with HT - core from Socket 0", "dual-socket-ht",
     "1-5,7-11", 1, "2"),
    ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 "
     "coming from the second NUMA node", "dual-socket-ht", "0-11", 8, "0,6,2,8,4,10,1,7"),
    ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and "
     "2 coming from the fourth NUMA node", "dual-socket-multi-numa-ht", "0-79", 64,
     "0-29,40-69,30,31,70,71"),
]
# (description, topology, available, count, cpuGroupSize, expected)
DISTRIBUTED = [
    *((d, t, a, n, 1, e) for d, t, a, n, e in COMMON),
    ("allocate 4 full cores with 2 distributed across each NUMA node", "dual-socket-ht",
     "0-11", 8, 1, "0,6,2,8,1,7,3,9"),
    ("allocate 32 full cores with 8 distributed across each NUMA node",
     "dual-socket-multi-numa-ht", "0-79", 64, 1,
     "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes",
     "dual-socket-multi-numa-ht", "0-79", 48, 1, "0-7,10-17,20-27,40-47,50-57,60-67"),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but "
     "2 from the first NUMA node)", "dual-socket-multi-numa-ht", "1-29,32-39,41-69,72-79", 48,
     1, "1-8,10-17,20-27,41-48,50-57,60-67"),
    ("allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all "
     "8 could be allocated from the first NUMA node)", "dual-socket-multi-numa-ht",
     "2-29,31-39,42-69,71-79", 48, 1, "10-17,20-27,31-38,50-57,60-67,71-78"),
    ("allocate 8 full cores with 2 distributed across each NUMA node",
     "dual-socket-multi-numa-ht", "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16, 1,
     "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
    ("take one cpu from dual socket with HT - core from Socket 0", "dual-socket-ht",
     "1-5,7-11", 1, 1, "1"),
    ("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2",
     "dual-socket-ht", "1-5,7-11", 1, 2, "2"),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes",
     "dual-socket-multi-numa-ht", "0-79", 26, 1, "0-6,10-16,40-45,50-55"),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)",
     "dual-socket-multi-numa-ht", "0-79", 26, 2, "0-6,10-15,40-46,50-55"),
    ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling "
     "over to each of NUMA 0, 1", "dual-socket-multi-numa-ht", "0-79", 62, 1,
     "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
    ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs "
     "spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)", "dual-socket-multi-numa-ht",
     "0-79", 62, 2, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
    ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling "
     "over to each of NUMA 2, 3 (to keep balance)", "dual-socket-multi-numa-ht",
     "0-8,10-18,20-39,40-48,50-58,60-79", 62, 1,
     "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
    ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs "
     "spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)",
     "dual-socket-multi-numa-ht", "0-8,10-18,20-39,40-48,50-58,60-79", 62, 2,
     "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
    ("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request",
     "dual-socket-multi-numa-ht", "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34, 1,
     "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
]


def cpus(text: str) -> frozenset[int]:
    return parse_cpulist(text) if text else frozenset()


@pytest.mark.parametrize(("description", "topo", "available", "count", "expected"),
                         COMMON + PACKED_ONLY, ids=[c[0] for c in COMMON + PACKED_ONLY])
def test_take_by_topology_numa_packed(description, topo, available, count, expected):
    assert take_packed(TOPOLOGIES[topo], cpus(available), count) == cpus(expected)


@pytest.mark.parametrize(("description", "topo", "available", "count", "group", "expected"),
                         DISTRIBUTED, ids=[c[0] + f" ({c[4]})" for c in DISTRIBUTED])
def test_take_by_topology_numa_distributed(description, topo, available, count, group,
                                           expected):
    assert take_distributed(TOPOLOGIES[topo], cpus(available), count, group) == cpus(expected)


def test_more_than_available_is_the_kubelets_error():
    with pytest.raises(CpuAssignmentError, match="requested=5, available=4"):
        take_packed(SINGLE_SOCKET_HT, cpus("0,2,4,6"), 5)


def test_spread_takes_threads_socket_by_socket_not_whole_cores():
    # TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption: "take a socket of cpus from
    # dual socket with HT" gives the same socket; two CPUs from a free single socket are two
    # cores' first threads, 0 and 1, where packed takes core 0's two threads
    assert take_packed(SINGLE_SOCKET_HT, cpus("0-7"), 2, SPREAD) == {0, 1}
    assert take_packed(SINGLE_SOCKET_HT, cpus("0-7"), 2) == {0, 4}


def test_a_whole_free_core_on_a_quiet_node_beats_a_lone_thread_on_a_busy_one():
    """Policy none, no hint: 2 CPUs. NUMA node 0 (even CPUs) has one lone free thread, CPU 2
    (its sibling 8 is taken); NUMA node 1 is free. takeByTopologyNUMAPacked visits node 0
    first (fewest free), but takes whole cores before threads: core {1,7} on node 1."""
    assert take_packed(DUAL_SOCKET_HT, cpus("2,1,3,5,7,9,11"), 2) == {1, 7}


def test_allocate_takes_the_hint_first_then_the_rest():
    # 4 CPUs with hint {0}: node 0 has only core {0,6} free; the other two come packed from
    # node 1 (its fewest-free... only node left): core {1,7}
    taken = allocate_cpus(DUAL_SOCKET_HT, cpus("0,6,1,3,5,7,9,11"), 4, frozenset({0}),
                          CpuOptions())
    assert taken == {0, 6, 1, 7}


def test_standard_deviation_rounds_as_go_does():
    # mean 2/3 -> 0.667; variance ((0-.667)^2*2 + (2-.667)^2)/3 = 0.888889 -> sqrt 0.942809
    assert standard_deviation([0, 0, 2]) == 0.943
