"""The refresh's pipeline: replies in, accounting and the rendered section out, caches kept."""

from __future__ import annotations

from exporter._proto.v1 import api_pb2 as v1
from exporter.issues import IssueKind
from exporter.kubelet.decode import Replies
from exporter.model import NumaNode, Topology
from exporter.refresh.pipeline import Pipeline

TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(0, 4))),
                                NumaNode(1, frozenset(range(4, 8)))])


def pod(name: str, *cpus: int) -> v1.PodResources:
    return v1.PodResources(namespace="ns", name=name,
                           containers=[v1.ContainerResources(name="c", cpu_ids=cpus)])


def list_reply(*pods: v1.PodResources) -> bytes:
    return v1.ListPodResourcesResponse(pod_resources=pods).SerializeToString()


ALLOCATABLE = v1.AllocatableResourcesResponse(cpu_ids=range(1, 8)).SerializeToString()


def test_a_refresh_accounts_and_renders_the_replies():
    result = Pipeline().run(Replies(list_reply(pod("a", 1, 2), pod("b", 5)), "v1", ALLOCATABLE),
                            TOPOLOGY)
    assert result.accounting.cpus_allocated == {"0": 2, "1": 1}
    assert result.accounting.cpus_allocatable == {"0": 3, "1": 4}
    assert b'podresources_cpus_allocated{numa_node="0"} 2.0' in result.section
    assert b'podresources_container_cpus{container="c",namespace="ns",numa_node="1",pod="b"} 1.0' \
        in result.section
    assert [p.name for p in result.snapshot.pods] == ["a", "b"]
    assert result.issues == {}


def test_an_unchanged_refresh_reuses_the_accounting_and_the_section():
    pipeline = Pipeline()
    first = pipeline.run(Replies(list_reply(pod("a", 1)), "v1", ALLOCATABLE), TOPOLOGY)
    # the same content in new bytes objects, as every kubelet call returns
    again = pipeline.run(Replies(list_reply(pod("a", 1)), "v1", bytes(ALLOCATABLE)), TOPOLOGY)
    assert again.accounting is first.accounting
    assert again.section is first.section
    changed = pipeline.run(Replies(list_reply(pod("a", 1), pod("b", 6)), "v1", ALLOCATABLE),
                           TOPOLOGY)
    assert changed.accounting is not first.accounting
    assert changed.accounting.cpus_allocated == {"0": 1, "1": 1}


def test_pods_the_filter_leaves_out_are_counted_as_terminated():
    def keep(pods):
        return tuple(p for p in pods if p.name != "done")

    result = Pipeline().run(Replies(list_reply(pod("a", 1), pod("done", 2)), "v1", ALLOCATABLE),
                            TOPOLOGY, keep)
    assert result.left_out == 1
    assert result.issues == {IssueKind.TERMINATED_POD: 1}
    assert result.accounting.cpus_allocated == {"0": 1, "1": 0}
    assert len(result.snapshot.pods) == 2  # the snapshot is what the kubelet listed


def test_v1alpha1_ignores_allocatable():
    reply = v1.ListPodResourcesResponse(pod_resources=[pod("a", 1)]).SerializeToString()
    result = Pipeline().run(Replies(reply, "v1alpha1", ALLOCATABLE), TOPOLOGY)
    assert result.snapshot.allocatable is None
    assert result.accounting.cpus_allocated is None
