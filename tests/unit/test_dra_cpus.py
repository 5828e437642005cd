"""Exclusive CPUs from DRA (SPEC section 11; dra-driver-cpu's ``dra.cpu``), by hand.

Machine: four NUMA nodes of four CPUs, two per socket (sub-NUMA clustering): NUMA 0 holds
CPUs 0-3 and NUMA 1 CPUs 4-7 on socket 0, NUMA 2 CPUs 8-11 and NUMA 3 CPUs 12-15 on socket
1. The inventory stands for the driver's ResourceSlices as its docs show them
(docs/user/device-attributes.md): grouped by NUMA node, one device per NUMA node with the
standard ``resource.kubernetes.io/numaNode`` and the capacity ``dra.cpu/cpu``; grouped by
socket, one device per socket with ``dra.cpu/socketID`` and no NUMA attribute; individual, one
device per CPU with ``dra.cpu/cpuID``. The kubelet's CPU manager runs policy ``none`` there:
``GetAllocatableResources`` lists no CPU and ``List`` no ``cpu_ids``.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.accounting import CPU_MANAGER, DRA, Ledger, account
from exporter.issues import IssueKind
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    CpuAttributes,
    CpuRequests,
    DraDevice,
    DraInventory,
    KubeletSnapshot,
    NumaNode,
    PodAssignment as P,
    PublishedDevice as Pub,
    Topology,
)

CPU = "dra.cpu"
POOL = "worker-1"
PACKAGES = {cpu: cpu // 8 for cpu in range(16)}
SNC = Topology.from_nodes([NumaNode(n, frozenset(range(4 * n, 4 * n + 4))) for n in range(4)],
                          cpu_packages=PACKAGES)
NONE_POLICY = Allocatable()  # policy none: no CPU listed


def snap(*pods: P, allocatable: Allocatable | None = NONE_POLICY) -> KubeletSnapshot:
    return KubeletSnapshot(pods=pods, allocatable=allocatable)


def cpu(device: str, claim: str, share: str | None = None, driver: str = CPU) -> DraDevice:
    return DraDevice(driver, POOL, device, claim, "ns", share_id=share)


def grouped(numa: int, cpus: int) -> Pub:
    return Pub(CPU, POOL, f"cpudevnuma{numa:03d}", (numa,), cpu=CpuAttributes(cpus=cpus))


def requests(table: Mapping[str, CpuRequests]):
    return lambda namespace, name: table.get(name)


# grouped by NUMA node; 1 CPU of NUMA 0 is the driver's reservedCPUs, so that group offers 3
BY_NUMA = DraInventory((grouped(0, 3), grouped(1, 4), grouped(2, 4), grouped(3, 4)))
PODS = (
    # two claims share the NUMA 1 group: 2 and 1 CPUs, as their requests say
    P("ns", "p1", (C("c1", dra_devices=(cpu("cpudevnuma001", "p1-cpus", "s1"),)),)),
    P("ns", "p2", (C("stats"), C("c2", dra_devices=(cpu("cpudevnuma001", "p2-cpus", "s2"),)))),
    # pod-level resources: 4500m for the pod, 500m of them the sidecar's: main holds 4
    P("ns", "p3", (C("log"), C("main", dra_devices=(cpu("cpudevnuma002", "p3-cpus", "s3"),)))),
    # no CPU request at all: how many it holds is not known
    P("ns", "p4", (C("c4", dra_devices=(cpu("cpudevnuma003", "p4-cpus", "s4"),)),)),
    # one claim on NUMA 0, one on NUMA 3: 4 CPUs over both, the split not known
    P("ns", "p5", (C("c5", dra_devices=(cpu("cpudevnuma000", "p5-a", "s5"),
                                        cpu("cpudevnuma003", "p5-b", "s6"))),)),
)
REQUESTS = requests({
    "p1": CpuRequests((("c1", 2000),)),
    "p2": CpuRequests((("stats", 100), ("c2", 1000))),
    "p3": CpuRequests((("log", 500), ("main", None)), pod=4500),
    "p4": CpuRequests((("c4", None),)),
    "p5": CpuRequests((("c5", 4000),)),
})


def test_grouped_devices_count_the_containers_requests_per_numa_node():
    result = account(snap(*PODS), SNC, BY_NUMA, REQUESTS)
    # allocatable: each group's capacity dra.cpu/cpu
    assert result.cpus_allocatable == {"0": 3, "1": 4, "2": 4, "3": 4}
    # NUMA 1: 2 + 1; NUMA 2: 4500m - 500m = 4; p4 uncounted; p5's 4 over NUMA 0 and 3
    assert result.cpus_allocated == {"0": 0, "1": 3, "2": 4, "3": 0, "0,3": 4}
    assert result.container_cpus == {
        ("ns", "p1", "c1", "1"): 2, ("ns", "p2", "c2", "1"): 1,
        ("ns", "p3", "main", "2"): 4, ("ns", "p5", "c5", "0,3"): 4}
    assert result.dra_cpus == result.container_cpus  # all of them from grouped devices
    # per single NUMA node only: the 4 CPUs over 0 and 3 count toward neither
    # and per CPU only: not per device, where each held group would read as all used (a
    # false PodresourcesNumaDevicesExhausted)
    assert result.utilization == {
        ("0", "cpu"): 0.0, ("1", "cpu"): 0.75, ("2", "cpu"): 1.0, ("3", "cpu"): 0.0}
    assert result.data_issues == {IssueKind.DRA_CPUS_UNCOUNTED: 1}
    assert "ns/p4/c4" in result.issue_examples[IssueKind.DRA_CPUS_UNCOUNTED]
    assert result.cpu_allocators == {(DRA, CPU): 1}
    # the devices themselves, as for any DRA device: one each, shared
    assert result.dra_devices_allocated == {(CPU, POOL, str(n)): 1 for n in range(4)}
    assert result.dra_device_shares == {(CPU, POOL, "0"): 1, (CPU, POOL, "1"): 2,
                                        (CPU, POOL, "2"): 1, (CPU, POOL, "3"): 2}
    # alignment: p5's devices are on two NUMA nodes that share nothing
    assert result.container_numa_nodes[("ns", "p5", "c5")] == 2
    assert result.container_numa_nodes[("ns", "p1", "c1")] == 1


def test_without_pod_context_no_grouped_cpu_is_counted_and_each_container_says_so():
    result = account(snap(*PODS), SNC, BY_NUMA, requests=None)
    assert result.cpus_allocated == {"0": 0, "1": 0, "2": 0, "3": 0}
    assert result.container_cpus == {}
    assert result.data_issues == {IssueKind.DRA_CPUS_UNCOUNTED: 5}
    assert "no pod context" in result.issue_examples[IssueKind.DRA_CPUS_UNCOUNTED]


def test_without_the_view_counts_from_requests_under_numa_node_unknown():
    result = account(snap(*PODS[:2]), SNC, None, REQUESTS)
    assert result.cpus_allocatable is None  # nothing offers CPUs the exporter can see
    assert result.cpus_allocated == {"unknown": 3}
    assert result.container_cpus == {("ns", "p1", "c1", "unknown"): 2,
                                      ("ns", "p2", "c2", "unknown"): 1}
    assert result.data_issues == {}  # not unknown_cpu: these CPUs have no ids at all
    assert result.cpu_allocators == {(DRA, CPU): 1}


def individual(device: int, cpu_id: int, effects: frozenset[str] = frozenset()) -> Pub:
    numa = cpu_id // 4
    return Pub(CPU, POOL, f"cpudev{device:03d}", (numa,), effects, CpuAttributes(cpu_id=cpu_id))


# individual: CPUs 1-7 (CPU 0 reserved), cpudev006 (CPU 7) tainted NoSchedule
BY_CPU = DraInventory(tuple(individual(i, i + 1, frozenset({"NoSchedule"}) if i == 6
                                       else frozenset()) for i in range(7)))


def test_individual_devices_are_their_cpus_without_any_request():
    pods = (P("ns", "a", (C("x", dra_devices=(cpu("cpudev000", "a-cpus"),
                                               cpu("cpudev001", "a-cpus"))),)),
            P("ns", "b", (C("y", dra_devices=(cpu("cpudev004", "b-cpus"),)),)))
    result = account(snap(*pods), SNC, BY_CPU, requests=None)
    # NUMA 0: CPUs 1, 2, 3; NUMA 1: CPUs 4, 5, 6 (7 is tainted)
    assert result.cpus_allocatable == {"0": 3, "1": 3}
    # a holds CPUs 1 and 2 (NUMA 0), b CPU 5 (NUMA 1)
    assert result.cpus_allocated == {"0": 2, "1": 1}
    assert result.container_cpus == {("ns", "a", "x", "0"): 2, ("ns", "b", "y", "1"): 1}
    assert result.dra_cpus == {}  # by id, not counted without ids
    assert result.utilization[("0", "cpu")] == 2 / 3
    assert result.utilization[("1", "cpu")] == 1 / 3
    assert result.data_issues == {}  # no request needed, none missed
    assert result.cpu_allocators == {(DRA, CPU): 1}


def test_a_device_per_socket_is_on_its_sockets_numa_nodes():
    by_socket = DraInventory(tuple(
        Pub(CPU, POOL, f"cpudevsocket{s:03d}", None, cpu=CpuAttributes(cpus=8, socket=s))
        for s in (0, 1)))
    pod = P("ns", "s", (C("x", dra_devices=(cpu("cpudevsocket001", "s-cpus", "s1"),)),))
    result = account(snap(pod), SNC, by_socket,
                     requests({"s": CpuRequests((("x", 3000),))}))
    assert result.dra_devices_allocatable == {(CPU, POOL, "0,1"): 1, (CPU, POOL, "2,3"): 1}
    assert result.cpus_allocatable == {"0,1": 8, "2,3": 8}
    assert result.cpus_allocated == {"0,1": 0, "2,3": 3}
    assert result.container_cpus == {("ns", "s", "x", "2,3"): 3}
    # no ratio: per single NUMA node, and how the socket's CPUs split is not known
    assert not any(resource == "cpu" for _, resource in result.utilization)


STATIC = Topology.from_nodes([NumaNode(0, frozenset(range(4))),
                              NumaNode(1, frozenset(range(4, 8)))])


def test_a_static_policy_node_is_the_cpu_managers_alone():
    pods = (P("ns", "g", (C("x", cpu_ids=(1, 2)),)),)
    result = account(snap(*pods, allocatable=Allocatable(cpu_ids=tuple(range(1, 8)))), STATIC)
    assert result.cpus_allocatable == {"0": 3, "1": 4}
    assert result.cpus_allocated == {"0": 2, "1": 0}
    assert result.cpu_allocators == {(CPU_MANAGER, ""): 1}


def test_both_allocators_on_one_node_count_each_cpu_once_and_keep_apart():
    # a node the driver's docs forbid (policy static beside dra.cpu): the CPU manager lists
    # CPUs 4-7 and gave CPU 4 to g; the driver published CPUs 1-3 and gave CPU 1 to d
    inventory = DraInventory(tuple(individual(i, i + 1) for i in range(3)))
    pods = (P("ns", "g", (C("x", cpu_ids=(4,)),)),
            P("ns", "d", (C("y", dra_devices=(cpu("cpudev000", "d-cpus"),)),)))
    result = account(snap(*pods, allocatable=Allocatable(cpu_ids=(4, 5, 6, 7))), STATIC,
                     inventory)
    assert result.cpus_allocatable == {"0": 3, "1": 4}
    assert result.cpus_allocated == {"0": 1, "1": 1}
    # CPU 1 is not in the CPU manager's list, and that is no issue: DRA allocated it
    assert result.data_issues == {}
    assert result.cpu_allocators == {(CPU_MANAGER, ""): 1, (DRA, CPU): 1}


def test_a_cpu_both_allocators_offer_or_one_container_holds_counts_once():
    # a misconfigured node: the CPU manager lists CPUs 0-7 and the driver, per CPU, CPUs 1-3
    # and 5 (the same CPUs); container x holds CPU 1 by cpu_ids and through cpudev000 too
    inventory = DraInventory((*(individual(i, i + 1) for i in range(3)), individual(3, 5),
                              individual(4, 5)))  # CPU 5 published twice: once
    pods = (P("ns", "g", (C("x", cpu_ids=(1, 2), dra_devices=(cpu("cpudev000", "g-cpus"),)),)),)
    result = account(snap(*pods, allocatable=Allocatable(cpu_ids=tuple(range(8)))), STATIC,
                     inventory)
    assert result.cpus_allocatable == {"0": 4, "1": 4}
    assert result.cpus_allocated == {"0": 2, "1": 0}
    assert result.container_cpus == {("ns", "g", "x", "0"): 2}


def test_a_request_of_a_fraction_of_a_cpu_is_rounded_up_as_the_driver_counts_it():
    # dra-driver-cpu's admission webhook: 1500m stands for a claim of 2 CPUs; 0 states nothing
    pods = (P("ns", "f", (C("x", dra_devices=(cpu("cpudevnuma001", "f-cpus", "s1"),)),)),
            P("ns", "z", (C("y", dra_devices=(cpu("cpudevnuma002", "z-cpus", "s2"),)),)))
    result = account(snap(*pods), SNC, BY_NUMA, requests({
        "f": CpuRequests((("x", 1500),)), "z": CpuRequests((("y", 0),))}))
    assert result.container_cpus == {("ns", "f", "x", "1"): 2}
    assert result.data_issues == {IssueKind.DRA_CPUS_UNCOUNTED: 1}
    assert result.issue_examples[IssueKind.DRA_CPUS_UNCOUNTED].endswith(
        "its spec states no CPU request for it")


def test_devices_naming_no_numa_node_or_unknown_cpus_count_under_unknown():
    # grouped over the whole machine (cpudevmachine: no NUMA attribute, no socket), a device
    # per CPU naming CPU 40 that sysfs does not have, and a device saying nothing of CPUs
    odd = DraInventory((Pub(CPU, POOL, "cpudevmachine", None, cpu=CpuAttributes(cpus=12)),
                        Pub(CPU, POOL, "cpudev040", None, cpu=CpuAttributes(cpu_id=40)),
                        Pub(CPU, POOL, "mystery", None)))
    pods = (P("ns", "m", (C("x", dra_devices=(cpu("cpudevmachine", "m-cpus", "s1"),)),)),
            P("ns", "i", (C("y", dra_devices=(cpu("cpudev040", "i-cpus"),)),)),
            P("ns", "q", (C("z", dra_devices=(cpu("mystery", "q-cpus"),)),)))
    result = account(snap(*pods), SNC, odd, requests({
        "m": CpuRequests((("x", 5000),)), "i": CpuRequests((("y", 1000),)),
        "q": CpuRequests((("z", 2000),))}))
    assert result.cpus_allocatable == {"unknown": 13}
    # 5 from the machine's group, CPU 40 by id, 2 of the mystery device by request
    assert result.cpus_allocated == {"unknown": 8}
    assert result.container_cpus == {("ns", "m", "x", "unknown"): 5,
                                     ("ns", "i", "y", "unknown"): 1,
                                     ("ns", "q", "z", "unknown"): 2}
    assert not any(resource == "cpu" for _, resource in result.utilization)
    assert result.data_issues == {IssueKind.UNKNOWN_CPU: 1}  # CPU 40: not in sysfs


def test_only_the_configured_drivers_are_cpus():
    other = "cpu.example.com"
    pod = P("ns", "p1", (C("c1", dra_devices=(cpu("cpudevnuma001", "p1-cpus", "s1"),
                                              cpu("g-0", "p1-g", driver=other))),))
    lookup = requests({"p1": CpuRequests((("c1", 2000),))})
    result = Ledger(frozenset({other})).update((pod,), NONE_POLICY, SNC, dra=BY_NUMA,
                                               requests=lookup)
    # dra.cpu is just a DRA device now; the other driver's device, unknown to the view, is a
    # group whose count the request gives, under NUMA node unknown
    assert result.cpus_allocated == {"unknown": 2}
    assert result.cpus_allocatable is None
    assert result.cpu_allocators == {(DRA, other): 1}
    nothing = Ledger(frozenset()).update((pod,), NONE_POLICY, SNC, dra=BY_NUMA, requests=lookup)
    assert nothing.cpus_allocated == {}
    assert nothing.cpu_allocators == {}


def test_the_ledger_counts_again_when_the_requests_change_with_the_same_pods():
    ledger = Ledger()
    pods = PODS[:1]
    first = ledger.update(pods, NONE_POLICY, SNC, dra=BY_NUMA, requests=None)
    assert first.cpus_allocated["1"] == 0
    assert first.data_issues == {IssueKind.DRA_CPUS_UNCOUNTED: 1}
    # the pod context arrives: the same pod objects are counted again
    second = ledger.update(pods, NONE_POLICY, SNC, dra=BY_NUMA, requests=REQUESTS)
    assert second is not first
    assert second.cpus_allocated["1"] == 2
    assert second.data_issues == {}
    # nothing changed: the same accounting object
    assert ledger.update(pods, NONE_POLICY, SNC, dra=BY_NUMA, requests=REQUESTS) is second
    # the request changes (an in-place resize): counted again
    resized = requests({"p1": CpuRequests((("c1", 3000),))})
    assert ledger.update(pods, NONE_POLICY, SNC, dra=BY_NUMA,
                         requests=resized).cpus_allocated["1"] == 3
    # the pod goes: its CPUs with it
    assert ledger.update((), NONE_POLICY, SNC, dra=BY_NUMA,
                         requests=resized).cpus_allocated["1"] == 0
