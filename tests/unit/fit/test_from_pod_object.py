"""A pod object from the Kubernetes API as the admission model sees it (SPEC 7.2.1)."""

from __future__ import annotations

from exporter.fit.from_pod_object import pod_shape
from exporter.fit.kubelet.config import Managers
from exporter.fit.kubelet.podshape import asks
from exporter.podcontext import pod_context

GiB = 1 << 30


def qos_class(spec):
    """Kubernetes' GetPodQOS of a spec, as the pod context computes it."""
    return pod_context({"spec": spec}).qos


def container(name: str, requests: dict | None = None, limits: dict | None = None,
              **extra: object) -> dict:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}},
            **extra}


def test_guaranteed_pod_with_a_sidecar_and_an_init_container():
    obj = {"spec": {
        "initContainers": [
            container("setup", limits={"cpu": "2", "memory": "1Gi"}),
            container("proxy", limits={"cpu": "500m", "memory": "256Mi"},
                      restartPolicy="Always")],
        "containers": [container("app", limits={"cpu": "8", "memory": "16Gi",
                                                "nvidia.com/gpu": "2"})]}}
    shape = pod_shape(obj, "ns/p")
    assert shape.qos == "Guaranteed"
    assert [(c.name, c.sidecar) for c in shape.init_containers] == [("setup", False),
                                                                    ("proxy", True)]
    assert dict(shape.containers[0].requests) == {"cpu": 8000, "memory": 16 * GiB,
                                                  "nvidia.com/gpu": 2}
    # the sidecar's fractional CPU is not exclusive, its memory is (Guaranteed pod)
    proxy = asks(shape, shape.init_containers[1], Managers())
    assert proxy.cpus == 0 and dict(proxy.memory) == {"memory": 256 << 20}


def test_qos_classes():
    assert qos_class({"containers": [container("a")]}) == "BestEffort"
    assert qos_class({"containers": [container("a", {"cpu": "1"}, {"cpu": "2",
                                                                    "memory": "1Gi"})]}) \
        == "Burstable"
    assert qos_class({"containers": [container("a"), container("b", limits={
        "cpu": "1", "memory": "1Gi"})]}) == "Burstable"
    assert qos_class({"resources": {"limits": {"cpu": "4", "memory": "4Gi"}},
                      "containers": [container("a")]}) == "Guaranteed"


def test_devices_from_limits_and_dra_served_names():
    obj = {"spec": {"resources": {"limits": {"cpu": "4", "memory": "4Gi"}},
                    "containers": [container("a", limits={"nvidia.com/gpu": "1"})]},
           "status": {"extendedResourceClaimStatus": {"requestMappings": [
               {"containerName": "a", "resourceName": "nvidia.com/gpu",
                "requestName": "r"}]}}}
    shape = pod_shape(obj, "ns/p")
    assert shape.pod_level_resources and shape.dra_resources == {"nvidia.com/gpu"}
    ask = asks(shape, shape.containers[0], Managers())
    assert ask.is_empty()  # pod-level resources without the gate; the GPU is DRA's
