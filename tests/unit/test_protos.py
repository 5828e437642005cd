"""The generated protobuf code matches protos/, and protos/ matches the kubelet's API."""

from __future__ import annotations

import filecmp
import importlib.util

import pytest
from google.protobuf.descriptor import FieldDescriptor

from exporter._proto.v1 import api_pb2 as v1
from exporter._proto.v1alpha1 import api_pb2 as v1alpha1
from exporter.protogen import PACKAGE_PATH, generate

from ..support.harness import REPO


def test_committed_generated_code_matches_the_proto_files(tmp_path):
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools is not installed (pip install '.[test]')")
    generate(tmp_path)
    fresh, committed = tmp_path / PACKAGE_PATH, REPO / PACKAGE_PATH
    fresh_files = sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    committed_files = sorted(p.relative_to(committed) for p in committed.rglob("*")
                             if p.is_file() and "__pycache__" not in p.parts)
    assert fresh_files == committed_files
    stale = [str(p) for p in fresh_files if not filecmp.cmp(fresh / p, committed / p, False)]
    assert not stale, f"regenerate with `python -m exporter.protogen`: {stale} differ"


def field(message, name) -> FieldDescriptor:
    return message.DESCRIPTOR.fields_by_name[name]


@pytest.mark.parametrize("message, name, number, kind, repeated", [
    (v1.PodResources, "name", 1, FieldDescriptor.TYPE_STRING, False),
    (v1.PodResources, "namespace", 2, FieldDescriptor.TYPE_STRING, False),
    (v1.PodResources, "containers", 3, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.PodResources, "cpu_ids", 4, FieldDescriptor.TYPE_INT64, True),
    (v1.PodResources, "memory", 5, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ContainerResources, "devices", 2, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ContainerResources, "cpu_ids", 3, FieldDescriptor.TYPE_INT64, True),
    (v1.ContainerResources, "memory", 4, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ContainerResources, "dynamic_resources", 5, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ContainerMemory, "memory_type", 1, FieldDescriptor.TYPE_STRING, False),
    (v1.ContainerMemory, "size", 2, FieldDescriptor.TYPE_UINT64, False),
    (v1.ContainerMemory, "topology", 3, FieldDescriptor.TYPE_MESSAGE, False),
    (v1.ContainerDevices, "resource_name", 1, FieldDescriptor.TYPE_STRING, False),
    (v1.ContainerDevices, "device_ids", 2, FieldDescriptor.TYPE_STRING, True),
    (v1.ContainerDevices, "topology", 3, FieldDescriptor.TYPE_MESSAGE, False),
    (v1.NUMANode, "ID", 1, FieldDescriptor.TYPE_INT64, False),
    (v1.AllocatableResourcesResponse, "devices", 1, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.AllocatableResourcesResponse, "cpu_ids", 2, FieldDescriptor.TYPE_INT64, True),
    (v1.AllocatableResourcesResponse, "memory", 3, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.DynamicResource, "claim_name", 2, FieldDescriptor.TYPE_STRING, False),
    (v1.DynamicResource, "claim_namespace", 3, FieldDescriptor.TYPE_STRING, False),
    (v1.DynamicResource, "claim_resources", 4, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ClaimResource, "cdi_devices", 1, FieldDescriptor.TYPE_MESSAGE, True),
    (v1.ClaimResource, "driver_name", 2, FieldDescriptor.TYPE_STRING, False),
    (v1.ClaimResource, "pool_name", 3, FieldDescriptor.TYPE_STRING, False),
    (v1.ClaimResource, "device_name", 4, FieldDescriptor.TYPE_STRING, False),
    (v1.ClaimResource, "share_id", 5, FieldDescriptor.TYPE_STRING, False),
    (v1.GetPodResourcesRequest, "pod_name", 1, FieldDescriptor.TYPE_STRING, False),
    (v1.GetPodResourcesRequest, "pod_namespace", 2, FieldDescriptor.TYPE_STRING, False),
    (v1alpha1.ContainerDevices, "device_ids", 2, FieldDescriptor.TYPE_STRING, True),
])
def test_field_numbers_and_types(message, name, number, kind, repeated):
    descriptor = field(message, name)
    assert descriptor.number == number
    assert descriptor.type == kind
    assert descriptor.is_repeated == repeated


def test_share_id_has_presence_and_class_name_is_gone():
    assert field(v1.ClaimResource, "share_id").has_presence
    assert "class_name" not in v1.DynamicResource.DESCRIPTOR.fields_by_name
    assert 1 not in v1.DynamicResource.DESCRIPTOR.fields_by_number
    packed = field(v1.ContainerResources, "cpu_ids")
    assert packed.is_packed


def test_wire_paths():
    service = v1.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert [m.name for m in service.methods] == ["List", "GetAllocatableResources", "Get"]
    assert v1alpha1.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name == \
        "v1alpha1.PodResourcesLister"
    grpc_module = (REPO / PACKAGE_PATH / "v1" / "api_pb2_grpc.py").read_text()
    for path in ("/v1.PodResourcesLister/List", "/v1.PodResourcesLister/GetAllocatableResources",
                 "/v1.PodResourcesLister/Get"):
        assert f"'{path}'" in grpc_module


def test_a_pre_1_31_class_name_field_is_ignored_as_unknown():
    # A <=1.30 kubelet still sends DynamicResource.class_name (field 1).
    old = b"\x0a\x05gpu-c" + v1.DynamicResource(claim_name="c").SerializeToString()
    parsed = v1.DynamicResource.FromString(old)
    assert parsed.claim_name == "c"
