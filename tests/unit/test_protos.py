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


# ---- the Pods API and the v1.Pod subset ------------------------------------------------------

def test_pods_api_service_and_events():
    from exporter._proto.pods.v1alpha1 import api_pb2 as pods

    service = pods.DESCRIPTOR.services_by_name["Pods"]
    assert service.full_name == "v1alpha1.Pods"
    assert [(m.name, m.server_streaming) for m in service.methods] == [
        ("WatchPods", True), ("ListPods", False), ("GetPod", False)]
    assert [(v.name, v.number) for v in pods.EventType.DESCRIPTOR.values] == [
        ("UNSPECIFIED", 0), ("ADDED", 1), ("MODIFIED", 2), ("DELETED", 3),
        ("INITIAL_SYNC_COMPLETE", 4)]
    assert field(pods.WatchPodsEvent, "pod").number == 2
    assert field(pods.ListPodsResponse, "pods").is_repeated
    assert field(pods.GetPodRequest, "podUID").type == FieldDescriptor.TYPE_STRING
    grpc_module = (REPO / PACKAGE_PATH / "pods" / "v1alpha1" / "api_pb2_grpc.py").read_text()
    for path in ("/v1alpha1.Pods/WatchPods", "/v1alpha1.Pods/ListPods", "/v1alpha1.Pods/GetPod"):
        assert f"'{path}'" in grpc_module
    # beside podresources' v1alpha1 in one descriptor pool: no name is defined twice
    assert v1alpha1.DESCRIPTOR.pool is pods.DESCRIPTOR.pool


def test_the_subset_keeps_the_real_numbers_and_labels():
    from exporter._proto.k8s.api.core.v1 import generated_pb2 as core
    from exporter.protogen import K8S_PROTOS, PROTO_DIR
    from exporter.protosubset import KEEP, parse

    real = {}
    for name in K8S_PROTOS:
        proto = parse((PROTO_DIR / name).read_text())
        for message, parsed in proto.messages.items():
            real[f"{proto.package}.{message}"] = parsed
    pool = core.DESCRIPTOR.pool
    for message, names in KEEP.items():
        descriptor = pool.FindMessageTypeByName(message)
        assert sorted(f.name for f in descriptor.fields) == sorted(names)
        for name in names:
            line = real[message].fields[name][1]
            compiled = descriptor.fields_by_name[name]
            assert line.strip().endswith(f" = {compiled.number};"), (message, name)
            assert compiled.is_repeated == (line.strip().startswith(("repeated", "map<")))


# A pod as the API server hands it to the kubelet, encoded with the whole of core/v1 (compiled
# here from protos/k8s.io/), in a process of its own (its message names are the subset's).
FULL_POD_SCRIPT = '''
import sys
from fullk8s.api.core.v1 import generated_pb2 as core
pod = core.Pod()
m = pod.metadata
m.name, m.namespace, m.uid = "trainer-0", "ml", "6a7c1f0e-uid"
m.labels["app"] = "trainer"
m.annotations["kubernetes.io/config.source"] = "api"
m.ownerReferences.add(kind="StatefulSet", name="trainer", uid="owner-uid", controller=True)
mf = m.managedFields.add(manager="kubectl", operation="Apply", apiVersion="v1")
mf.fieldsV1.Raw = b'{"f:spec":{"f:containers":{}}}' * 20
s = pod.spec
s.nodeName = "gpu-node-01"
s.volumes.add(name="data").volumeSource.emptyDir.medium = "Memory"
proxy = s.initContainers.add(name="proxy", image="envoy:1", restartPolicy="Always")
proxy.resources.limits["cpu"].string = "1"
proxy.resources.limits["memory"].string = "256Mi"
setup = s.initContainers.add(name="setup", image="busybox")
setup.resources.requests["cpu"].string = "6"
app = s.containers.add(name="app", image="trainer:2", command=["python", "-m", "train"])
app.env.add(name="EPOCHS", value="10")
app.ports.add(containerPort=8080, protocol="TCP")
app.resources.limits["cpu"].string = "16"
app.resources.limits["memory"].string = "64Gi"
app.resources.limits["nvidia.com/gpu"].string = "2"
app.resources.requests["cpu"].string = "16"
app.resources.claims.add(name="gpus")
app.securityContext.privileged = False
s.containers.add(name="sidecar-log", image="fluent-bit")
s.overhead["cpu"].string = "250m"
s.resources.limits["memory"].string = "80Gi"
s.tolerations.add(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.add()
st = pod.status
st.phase, st.reason = "Failed", "TopologyAffinityError"
st.message = "Pod was rejected: Resources cannot be allocated with Topology locality"
st.qosClass = "Guaranteed"
st.conditions.add(type="PodScheduled", status="True")
st.podIPs.add(ip="10.0.0.7")
st.containerStatuses.add(name="app", ready=False, restartCount=3).state.waiting.reason = "x"
claim = st.extendedResourceClaimStatus
claim.resourceClaimName = "trainer-0-extended-resources-abcde"
claim.requestMappings.add(containerName="app", resourceName="nvidia.com/gpu",
                          requestName="container-0-request-0")
sys.stdout.write(pod.SerializeToString().hex())
'''


def test_the_subset_reads_a_pod_encoded_with_the_whole_schema(tmp_path):
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools is not installed (pip install '.[test]')")
    import subprocess
    import sys

    from exporter.podsapi.decode import decode_pod
    from exporter.protogen import compile_whole_k8s

    compile_whole_k8s(tmp_path, "fullk8s")
    encoded = subprocess.run([sys.executable, "-c", FULL_POD_SCRIPT], cwd=tmp_path,
                             check=True, capture_output=True, text=True).stdout
    assert decode_pod(bytes.fromhex(encoded)) == {
        "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "6a7c1f0e-uid"},
        "spec": {
            "nodeName": "gpu-node-01",
            "containers": [
                {"name": "app", "resources": {
                    "limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"},
                    "requests": {"cpu": "16"}}},
                {"name": "sidecar-log"}],
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always",
                 "resources": {"limits": {"cpu": "1", "memory": "256Mi"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "6"}}}],
            "overhead": {"cpu": "250m"},
            "resources": {"limits": {"memory": "80Gi"}}},
        "status": {
            "phase": "Failed", "reason": "TopologyAffinityError",
            "message": "Pod was rejected: Resources cannot be allocated with Topology locality",
            "qosClass": "Guaranteed",
            "extendedResourceClaimStatus": {
                "resourceClaimName": "trainer-0-extended-resources-abcde",
                "requestMappings": [{"containerName": "app", "resourceName": "nvidia.com/gpu",
                                     "requestName": "container-0-request-0"}]}}}
