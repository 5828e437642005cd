"""Absurd kubelet replies over real gRPC: the oversized part is counted and left out, the rest
of the snapshot is still exported, and the refresh stays quick (no timing is asserted; the
figures are measured by ``benchmarks/hostile_replies.py``).

The simulated kubelet serves the reply bytes given here for ``List`` (or
``GetAllocatableResources``), through its real gRPC server on a real unix socket.
"""

from __future__ import annotations

import pytest

from exporter._proto.v1 import api_pb2 as v1
from exporter.issues import MAX_NUMA_IDS, IssueKind
from exporter.kubelet.limits import (
    MAX_CPU_IDS,
    MAX_CPU_IDS_PER_REPLY,
    MAX_ENTRIES_PER_POD,
    MAX_MEMORY_TYPES,
)
from exporter.simulator import SimulatedNode, Simulator

from ..support.harness import Exporter, Node, small_profile

GPU = "example.com/gpu"


class RawSimulator(Simulator):
    """The simulated kubelet, answering ``List``/``GetAllocatableResources`` with given bytes."""

    list_reply: bytes | None = None
    allocatable_reply: bytes | None = None

    def _list_v1(self, request):
        return self.list_reply if self.list_reply is not None else super()._list_v1(request)

    def _allocatable(self, request):
        if self.allocatable_reply is not None:
            return self.allocatable_reply
        return super()._allocatable(request)


def raw_node(list_reply: bytes, allocatable_reply: bytes | None = None) -> Node:
    node = Node(small_profile())
    node.simulator = RawSimulator(SimulatedNode(node.spec), node.socket)
    node.simulator.list_reply = list_reply
    node.simulator.allocatable_reply = allocatable_reply
    return node


def topology(*ids: int) -> v1.TopologyInfo:
    return v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in ids])


def ordinary_pod() -> v1.PodResources:
    """A pod within every limit: CPUs 2-3 on NUMA node 0, gpu-0 on node 1, 1 GiB on node 0."""
    return v1.PodResources(namespace="ns", name="ordinary", containers=[v1.ContainerResources(
        name="c", cpu_ids=[2, 3],
        devices=[v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-0"],
                                     topology=topology(1))],
        memory=[v1.ContainerMemory(memory_type="memory", size=1 << 30, topology=topology(0))])])


def reply(*hostile: v1.PodResources) -> bytes:
    return v1.ListPodResourcesResponse(pod_resources=[ordinary_pod(), *hostile]).SerializeToString()


def hostile_pod(**container: object) -> v1.PodResources:
    return v1.PodResources(namespace="ns", name="hostile",
                           containers=[v1.ContainerResources(name="c", **container)])


async def scrape_of(list_reply: bytes, allocatable_reply: bytes | None = None):
    async with raw_node(list_reply, allocatable_reply) as node, \
            Exporter(node.settings(interval=0.5, max_message_bytes=32 << 20)) as exporter:
        return await exporter.ready(timeout=60)


def assert_ordinary_pod_exported(scrape) -> None:
    assert total(scrape, "podresources_container_cpus", namespace="ns", pod="ordinary",
                        container="c", numa_node="0") == 2
    assert total(scrape, "podresources_container_devices", namespace="ns", pod="ordinary",
                        container="c", resource=GPU, numa_node="1") == 1
    assert total(scrape, "podresources_container_memory_bytes", namespace="ns", pod="ordinary",
                        container="c", numa_node="0", memory_type="memory") == 1 << 30


def total(scrape, name: str, **match: str) -> float | None:
    """The sum of the series of ``name`` matching ``match``; None when there is none."""
    values = scrape.series(name, **match)
    return sum(values.values()) if values else None


def issues(scrape) -> dict[str, float]:
    return {kind: value for kind, value in
            scrape.by("podresources_data_issues_total", "kind").items() if value}


@pytest.mark.parametrize("entries", [False, True], ids=["one entry", "one entry per NUMA id"])
async def test_a_device_on_20000_numa_ids_is_of_unknown_locality(entries):
    ids = range(20_000)
    devices = ([v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-x"], topology=topology(i))
                for i in ids] if entries else
               [v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-x"],
                                    topology=topology(*ids))])
    scrape = await scrape_of(reply(hostile_pod(devices=devices, cpu_ids=[5])))
    if entries:  # 20,000 entries: past the entries a pod may list, the pod is left out
        assert issues(scrape) == {IssueKind.TOO_MANY_ENTRIES: 1}
        assert total(scrape, "podresources_container_cpus", pod="hostile") is None
    else:  # one entry naming more than MAX_NUMA_IDS ids: its locality is unknown
        assert issues(scrape) == {IssueKind.TOO_MANY_NUMA_IDS: 1}
        assert total(scrape, "podresources_container_devices", namespace="ns", pod="hostile",
                            container="c", resource=GPU, numa_node="unknown") == 1
        assert total(scrape, "podresources_container_cpus", pod="hostile", numa_node="1") == 1
    assert_ordinary_pod_exported(scrape)


async def test_a_device_whose_entries_name_too_many_numa_ids_in_all():
    # within the entries limit, but the device's entries together name more than the limit
    devices = [v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-x"], topology=topology(i))
               for i in range(MAX_NUMA_IDS + 1)]
    scrape = await scrape_of(reply(hostile_pod(devices=devices)))
    assert issues(scrape) == {IssueKind.TOO_MANY_NUMA_IDS: 1}
    assert total(scrape, "podresources_devices_allocated", numa_node="unknown", resource=GPU) == 1
    assert_ordinary_pod_exported(scrape)


async def test_a_pod_listed_100_times_with_200_devices_each_time():
    listings = [v1.PodResources(namespace="ns", name="hostile", containers=[
        v1.ContainerResources(name="c", devices=[
            v1.ContainerDevices(resource_name=GPU, device_ids=[f"d{listing}-{i}"],
                                topology=topology(0)) for i in range(200)])])
        for listing in range(100)]
    scrape = await scrape_of(reply(*listings))
    assert issues(scrape) == {IssueKind.DUPLICATE_ENTRY: 99}  # the pod, listed 99 times more
    # every listing's devices are the pod's: 100 x 200 distinct devices on NUMA node 0
    assert total(scrape, "podresources_container_devices", pod="hostile", resource=GPU,
                        numa_node="0") == 20_000
    assert total(scrape, "podresources_devices_allocated", numa_node="0", resource=GPU) == 20_000
    assert_ordinary_pod_exported(scrape)


async def test_50000_memory_types_leave_that_memory_list_out():
    memory = [v1.ContainerMemory(memory_type=f"type-{i}", size=1 << 20, topology=topology(0))
              for i in range(50_000)]
    scrape = await scrape_of(reply(hostile_pod(memory=memory, cpu_ids=[6, 7])))
    assert issues(scrape) == {IssueKind.TOO_MANY_MEMORY_TYPES: 1}
    assert total(scrape, "podresources_container_memory_bytes", pod="hostile") is None
    # the rest of the hostile pod counts: its CPUs
    assert total(scrape, "podresources_container_cpus", pod="hostile", numa_node="1") == 2
    assert total(scrape, "podresources_cpus_allocated", numa_node="1") == 2
    assert_ordinary_pod_exported(scrape)


async def test_memory_types_at_the_limit_are_read():
    memory = [v1.ContainerMemory(memory_type=f"type-{i}", size=1 << 20, topology=topology(1))
              for i in range(MAX_MEMORY_TYPES)]
    scrape = await scrape_of(reply(hostile_pod(memory=memory)))
    # read, so each made-up type is assigned where nothing of it is allocatable: an excess
    assert issues(scrape) == {IssueKind.ALLOCATED_EXCEEDS_ALLOCATABLE: MAX_MEMORY_TYPES}
    assert total(scrape, "podresources_container_memory_bytes", pod="hostile", numa_node="1",
                        memory_type=f"type-{MAX_MEMORY_TYPES - 1}") == 1 << 20


async def test_4m_cpu_ids_leave_that_cpu_list_out():
    scrape = await scrape_of(reply(hostile_pod(
        cpu_ids=range(4_000_000),
        devices=[v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-1"],
                                     topology=topology(0))])))
    assert issues(scrape) == {IssueKind.TOO_MANY_CPU_IDS: 1}
    assert total(scrape, "podresources_container_cpus", pod="hostile") is None
    assert total(scrape, "podresources_container_devices", pod="hostile", resource=GPU,
                        numa_node="0") == 1
    assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}
    assert_ordinary_pod_exported(scrape)


async def test_cpu_ids_at_the_limit_are_read():
    scrape = await scrape_of(reply(hostile_pod(cpu_ids=range(MAX_CPU_IDS))))
    # 8 of them are on the node (0-7); the rest are CPUs sysfs does not know
    assert issues(scrape)[IssueKind.UNKNOWN_CPU] == MAX_CPU_IDS - 8
    assert IssueKind.TOO_MANY_CPU_IDS not in issues(scrape)
    assert total(scrape, "podresources_container_cpus", pod="hostile", numa_node="1") == 4


async def test_a_pod_past_the_entries_limit_is_left_out():
    devices = [v1.ContainerDevices(resource_name=GPU, device_ids=[f"d{i}"], topology=topology(0))
               for i in range(MAX_ENTRIES_PER_POD // 2)]  # an entry and an id each
    scrape = await scrape_of(reply(hostile_pod(devices=devices, cpu_ids=[7])))
    assert issues(scrape) == {IssueKind.TOO_MANY_ENTRIES: 1}
    assert total(scrape, "podresources_container_cpus", pod="hostile") is None
    assert total(scrape, "podresources_devices_allocated", numa_node="1", resource=GPU) == 1
    assert_ordinary_pod_exported(scrape)


async def test_an_absurd_allocatable_reply_leaves_out_its_oversized_lists():
    allocatable = v1.AllocatableResourcesResponse(
        cpu_ids=range(MAX_CPU_IDS + 1),
        devices=[v1.ContainerDevices(resource_name=GPU, device_ids=["gpu-9"],
                                     topology=topology(*range(MAX_NUMA_IDS + 1)))],
        memory=[v1.ContainerMemory(memory_type="memory", size=16 << 30, topology=topology(0))])
    scrape = await scrape_of(reply(), allocatable.SerializeToString())
    # without the allocatable CPU list, the ordinary pod's CPUs 2 and 3 are not allocatable
    assert issues(scrape) == {IssueKind.TOO_MANY_CPU_IDS: 1, IssueKind.TOO_MANY_NUMA_IDS: 1,
                              IssueKind.CPU_NOT_ALLOCATABLE: 2}
    assert total(scrape, "podresources_cpus_allocatable", numa_node="0") is None
    assert total(scrape, "podresources_devices_allocatable", numa_node="unknown",
                        resource=GPU) == 1
    assert total(scrape, "podresources_memory_allocatable_bytes", numa_node="0",
                        memory_type="memory") == 16 << 30
    assert total(scrape, "podresources_numa_utilization_ratio", numa_node="0",
                        resource="memory") == 1 / 16
    assert_ordinary_pod_exported(scrape)


async def test_a_reply_past_the_cpu_ids_limit_in_all_leaves_the_last_pods_out():
    # 5 pods of 16,000 CPU ids each: within the limit per list, past the limit in
    # all; pods are read in name order while their CPU ids fit (2 + 4 x 16,000 <= 65,536)
    pods = [v1.PodResources(namespace="ns", name=f"hostile-{k}", containers=[
        v1.ContainerResources(name="c", cpu_ids=range(16_000 * k + 8, 16_000 * (k + 1) + 8))])
        for k in range(5)]
    scrape = await scrape_of(reply(*pods))
    assert 2 + 4 * 16_000 <= MAX_CPU_IDS_PER_REPLY < 2 + 5 * 16_000
    assert issues(scrape)[IssueKind.TOO_MANY_CPU_IDS] == 1
    assert total(scrape, "podresources_container_cpus", pod="hostile-4") is None
    assert total(scrape, "podresources_container_cpus", pod="hostile-3",
                 numa_node="unknown") == 16_000
    assert issues(scrape)[IssueKind.UNKNOWN_CPU] == 4 * 16_000
    assert_ordinary_pod_exported(scrape)
