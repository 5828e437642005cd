"""Fuzzing the kubelet replies: random and mutated protobuf bytes through decode and accounting.

Whatever bytes a broken or hostile kubelet sends, one refresh's pipeline either accounts them or
rejects the reply as invalid (``invalid_reply``); it never raises anything else, and what it
keeps between refreshes (decode caches, ledger) stays bounded by what the last reply listed.
The example counts keep the unit tier under 30 s; every run draws new ones.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from exporter._proto.v1 import api_pb2 as v1
from exporter._proto.v1alpha1 import api_pb2 as v1alpha1
from exporter.kubelet.client import ErrorKind, KubeletError
from exporter.kubelet.decode import MAX_VARIANTS_PER_POD, Replies
from exporter.model import NumaNode, Topology
from exporter.refresh.pipeline import Pipeline

TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(0, 4))),
                                NumaNode(1, frozenset(range(4, 8)))])

numa_ids = st.integers(min_value=-3, max_value=2000)
ids = st.lists(numa_ids, max_size=6)
cpu_ids = st.lists(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1), max_size=8)
text = st.sampled_from(["", "a", "b", "ns", "x" * 300, "hugepages-2Mi", "memory", "r/gpu",
                        "\n", "é"])


def topology_info(node_ids: list[int]) -> v1.TopologyInfo:
    return v1.TopologyInfo(nodes=[v1.NUMANode(ID=i) for i in node_ids])


devices = st.builds(lambda name, device_ids, nodes, has: v1.ContainerDevices(
    resource_name=name, device_ids=device_ids,
    **({"topology": topology_info(nodes)} if has else {})),
    text, st.lists(text, max_size=3), ids, st.booleans())
memory = st.builds(lambda kind, size, nodes: v1.ContainerMemory(
    memory_type=kind, size=size, topology=topology_info(nodes)),
    text, st.integers(min_value=0, max_value=(1 << 64) - 1), ids)
claims = st.builds(lambda name, drivers: v1.DynamicResource(
    claim_name=name, claim_namespace="ns", claim_resources=[
        v1.ClaimResource(driver_name=d, pool_name="p", device_name=d) for d in drivers]),
    text, st.lists(text, max_size=2))
containers = st.builds(lambda name, cpus, mem, devs, dra: v1.ContainerResources(
    name=name, cpu_ids=cpus, memory=mem, devices=devs, dynamic_resources=dra),
    text, cpu_ids, st.lists(memory, max_size=3), st.lists(devices, max_size=4),
    st.lists(claims, max_size=2))
pods = st.builds(lambda namespace, name, ctrs, cpus, mem: v1.PodResources(
    namespace=namespace, name=name, containers=ctrs, cpu_ids=cpus, memory=mem),
    text, text, st.lists(containers, max_size=3), cpu_ids, st.lists(memory, max_size=2))
list_replies = st.builds(lambda items: v1.ListPodResourcesResponse(
    pod_resources=items).SerializeToString(), st.lists(pods, max_size=5))
allocatable_replies = st.builds(lambda cpus, mem, devs: v1.AllocatableResourcesResponse(
    cpu_ids=cpus, memory=mem, devices=devs).SerializeToString(),
    cpu_ids, st.lists(memory, max_size=4), st.lists(devices, max_size=6))


@st.composite
def mutated(draw: st.DrawFn, replies: st.SearchStrategy[bytes]) -> bytes:
    """A valid reply with a few bytes flipped, inserted, deleted, or the end cut off."""
    raw = bytearray(draw(replies))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        position = draw(st.integers(min_value=0, max_value=len(raw)))
        if action == "flip" and position < len(raw):
            raw[position] ^= draw(st.integers(min_value=1, max_value=255))
        elif action == "insert":
            raw[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del raw[position:position + draw(st.integers(min_value=1, max_value=4))]
        else:
            del raw[position:]
    return bytes(raw)


any_list_reply = st.one_of(list_replies, mutated(list_replies), st.binary(max_size=200))
any_allocatable_reply = st.one_of(st.none(), allocatable_replies, mutated(allocatable_replies),
                                  st.binary(max_size=100))
# one pipeline across examples, as the refresh loop keeps one across refreshes
PIPELINE = Pipeline()


def run(replies: Replies) -> None:
    try:
        result = PIPELINE.run(replies, TOPOLOGY)
    except KubeletError as error:
        assert error.kind == ErrorKind.INVALID_REPLY
        return
    listed = len(result.snapshot.pods)
    size = len(replies.list_reply) + len(replies.allocatable_reply or b"")
    # the section grows with the reply, not beyond it
    assert len(result.section) <= 50_000 + 400 * size
    assert result.accounting.pods <= listed
    assert all(count > 0 for count in result.issues.values())
    decoder = PIPELINE._decoders[replies.api_version]
    assert len(decoder._by_bytes) <= MAX_VARIANTS_PER_POD * (listed + 16)
    assert len(decoder._by_key) <= len(decoder._by_bytes) + listed


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(any_list_reply, any_allocatable_reply)
def test_v1_replies_are_accounted_or_rejected(list_reply, allocatable_reply):
    run(Replies(list_reply, "v1", allocatable_reply))


alpha_pods = st.builds(lambda namespace, name, devs: v1alpha1.PodResources(
    namespace=namespace, name=name, containers=[v1alpha1.ContainerResources(
        name="c", devices=[v1alpha1.ContainerDevices(resource_name=d.resource_name,
                                                     device_ids=d.device_ids) for d in devs])]),
    text, text, st.lists(devices, max_size=4))
alpha_replies = st.builds(lambda items: v1alpha1.ListPodResourcesResponse(
    pod_resources=items).SerializeToString(), st.lists(alpha_pods, max_size=5))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(alpha_replies, mutated(alpha_replies), st.binary(max_size=200)))
def test_v1alpha1_replies_are_accounted_or_rejected(list_reply):
    run(Replies(list_reply, "v1alpha1"))
