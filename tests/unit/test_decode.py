"""Decoding kubelet replies: unchanged pods come back as the same objects."""

from __future__ import annotations

import random

import pytest

from exporter._proto.v1 import api_pb2 as v1
from exporter.kubelet.client import ErrorKind, KubeletError
from exporter.kubelet.decode import AllocatableDecoder, ListDecoder


def entry(resource, device, numa):
    return v1.ContainerDevices(resource_name=resource, device_ids=[device],
                               topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=numa)]))


def reply(devices, cpus=(1, 2), name="p"):
    pod = v1.PodResources(namespace="ns", name=name, containers=[
        v1.ContainerResources(name="c", cpu_ids=list(cpus), devices=devices)])
    return v1.ListPodResourcesResponse(pod_resources=[pod]).SerializeToString()


def test_same_pod_in_another_device_order_is_the_same_object():
    entries = [entry("r/x", f"d{i}", i % 2) for i in range(6)]
    decoder = ListDecoder.v1()
    first = decoder.decode(reply(entries))[0]
    rng = random.Random(1)
    for _ in range(10):
        shuffled = entries[:]
        rng.shuffle(shuffled)
        assert decoder.decode(reply(shuffled))[0] is first
    assert {d.device_ids[0] for d in first.containers[0].devices} == {f"d{i}" for i in range(6)}


def test_a_changed_pod_is_a_new_object():
    decoder = ListDecoder.v1()
    first = decoder.decode(reply([entry("r/x", "d0", 0)]))[0]
    changed = decoder.decode(reply([entry("r/x", "d0", 1)]))[0]
    assert changed is not first
    assert changed.containers[0].devices[0].numa_ids == (1,)
    assert decoder.decode(reply([entry("r/x", "d0", 0)], cpus=(1, 3)))[0].containers[0].cpu_ids \
        == (1, 3)


def test_invalid_bytes_are_an_invalid_reply():
    with pytest.raises(KubeletError) as caught:
        ListDecoder.v1().decode(b"\xff\xff\xff\xff")
    assert caught.value.kind == ErrorKind.INVALID_REPLY
    with pytest.raises(KubeletError):
        AllocatableDecoder().decode(b"\x0a\xff\xff\xff\xff\x0f")


def test_allocatable_in_another_order_is_the_same_object():
    devices = [entry("r/x", f"d{i}", 0) for i in range(5)]
    decoder = AllocatableDecoder()
    first = decoder.decode(v1.AllocatableResourcesResponse(devices=devices,
                                                           cpu_ids=[1, 2]).SerializeToString())
    again = decoder.decode(v1.AllocatableResourcesResponse(devices=devices[::-1],
                                                           cpu_ids=[1, 2]).SerializeToString())
    assert again is first
    # the kubelet lists its allocatable CPUs in a set's order, another at every call
    # (GetAllocatableCPUs().UnsortedList())
    shuffled = decoder.decode(v1.AllocatableResourcesResponse(devices=devices,
                                                              cpu_ids=[2, 1]).SerializeToString())
    assert shuffled is first
    other = decoder.decode(v1.AllocatableResourcesResponse(devices=devices[:4],
                                                           cpu_ids=[1, 2]).SerializeToString())
    assert other is not first and len(other.devices) == 4


def test_allocatable_with_other_cpus_or_memory_is_decoded_again():
    devices = [entry("r/x", f"d{i}", 0) for i in range(3)]
    memory = [v1.ContainerMemory(memory_type="memory", size=1 << 30,
                                 topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=0)]))]
    decoder = AllocatableDecoder()
    first = decoder.decode(v1.AllocatableResourcesResponse(
        devices=devices, cpu_ids=[1, 2], memory=memory).SerializeToString())
    fewer_cpus = decoder.decode(v1.AllocatableResourcesResponse(
        devices=devices[::-1], cpu_ids=[1], memory=memory).SerializeToString())
    assert fewer_cpus is not first and fewer_cpus.cpu_ids == (1,)
    memory[0].size = 2 << 30
    more_memory = decoder.decode(v1.AllocatableResourcesResponse(
        devices=devices, cpu_ids=[1], memory=memory).SerializeToString())
    assert more_memory is not fewer_cpus
    assert [block.size for block in more_memory.memory] == [2 << 30]
    # a device moved to another NUMA node is another entry
    moved = decoder.decode(v1.AllocatableResourcesResponse(
        devices=[*devices[:2], entry("r/x", "d2", 1)], cpu_ids=[1],
        memory=memory).SerializeToString())
    assert moved is not more_memory
    assert sorted(d.numa_ids for d in moved.devices) == [(0,), (0,), (1,)]


def test_split_matches_protobuf_and_skips_other_fields():
    from exporter.kubelet.decode import split_repeated_field
    pods = [v1.PodResources(namespace="ns", name=f"p{i}", cpu_ids=[i, 300 + i]) for i in range(3)]
    raw = v1.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    assert split_repeated_field(raw) == [p.SerializeToString() for p in pods]
    # a field this client does not know (number 7: varint, length-delimited, fixed64, fixed32)
    unknown = b"\x38\x96\x01" + b"\x3a\x02hi" + b"\x39" + b"\x00" * 8 + b"\x3d" + b"\x00" * 4
    assert split_repeated_field(unknown + raw) == [p.SerializeToString() for p in pods]
    assert [p.name for p in ListDecoder.v1().decode(unknown + raw)] == ["p0", "p1", "p2"]
    too_long = b"\x0a" + b"\xff" * 10  # a length varint past 64 bits
    for broken in (raw[:-1], b"\x0a\x05abc", b"\x0b", too_long):
        with pytest.raises(ValueError):
            split_repeated_field(broken)


def test_the_chunks_descriptor_is_the_one_protobuf_encodes():
    from google.protobuf import descriptor_pb2

    from exporter.kubelet.decode import chunks_file_descriptor
    for number in (1, 15, 16, 2047, 70000):  # one-, two- and three-byte varints
        file = descriptor_pb2.FileDescriptorProto(
            name=f"podresources_exporter_chunks_{number}.proto",
            package="podresources_exporter", syntax="proto3")
        file.message_type.add(name=f"Chunks{number}").field.add(
            name="chunks", number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
        assert chunks_file_descriptor(number) == file.SerializeToString()


def test_a_reply_that_does_not_split_is_left_to_protobuf():
    pods = [v1.PodResources(namespace="ns", name="p")]
    raw = v1.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    group = b"\x3b\x3c"  # an (empty) group, wire types 3 and 4: protobuf accepts it
    assert [p.name for p in ListDecoder.v1().decode(group + raw)] == ["p"]
