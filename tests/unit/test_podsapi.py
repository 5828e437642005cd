"""The Pods API's pods as the exporter keeps them, and which source of pod context wins when.

Pods are built with the compiled ``v1.Pod`` subset, as the kubelet's ``pod.Marshal()`` would
send them; expected records are worked out by hand from the Kubernetes rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter._proto.k8s.api.core.v1 import generated_pb2 as core
from exporter.exposition.health import Health
from exporter.kubeapi.records import node_record
from exporter.kubeapi.view import KubeView
from exporter.podsapi.decode import PodDecodeError, decode_pod
from exporter.podsapi.source import PodsApi, State, pod_entry
from exporter.podsapi.sources import PodSources, Source
from exporter.podspec import Rejection

GiB = 1 << 30


def container(target, name: str, limits: dict[str, str], requests: dict[str, str] | None = None,
              restart_policy: str = "") -> None:
    added = target.add(name=name)
    if restart_policy:
        added.restartPolicy = restart_policy
    for resource, value in limits.items():
        added.resources.limits[resource].string = value
    for resource, value in (requests or {}).items():
        added.resources.requests[resource].string = value


def rejected_pod() -> bytes:
    """A Guaranteed pod rejected by the Topology Manager, as ``rejectPod`` leaves it: an app
    container with 4 CPUs, 8Gi and a GPU, a sidecar of 1 CPU and 1Gi, and a regular init
    container of 6 CPUs and 1Gi run after the sidecar started."""
    pod = core.Pod()
    pod.metadata.name, pod.metadata.namespace, pod.metadata.uid = "p", "ml", "uid-1"
    container(pod.spec.containers, "app",
              {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"})
    container(pod.spec.initContainers, "proxy", {"cpu": "1", "memory": "1Gi"},
              restart_policy="Always")
    container(pod.spec.initContainers, "setup", {"cpu": "6", "memory": "1Gi"})
    pod.status.phase, pod.status.reason = "Failed", "TopologyAffinityError"
    pod.status.message = ("Pod was rejected: Resources cannot be allocated with Topology "
                          "locality")
    pod.status.qosClass = "Guaranteed"
    return pod.SerializeToString()


def test_a_rejected_pod_becomes_an_explained_rejection():
    key, record = pod_entry(rejected_pod())
    assert key == ("ml", "p")
    assert record.terminated  # Failed is terminal: it holds nothing
    assert record.requests == ()
    rejection = record.rejection
    assert isinstance(rejection, Rejection)
    assert (rejection.uid, rejection.reason, rejection.message) == (
        "uid-1", "TopologyAffinityError",
        "Pod was rejected: Resources cannot be allocated with Topology locality")
    # held at once: app + sidecar = 5 CPUs, 9Gi; the init container with the sidecar
    # started before it = 7 CPUs (more), 2Gi (less)
    assert dict(rejection.requests) == {"cpu": 7, "memory": 9 * GiB, "nvidia.com/gpu": 1}
    assert [c["name"] for c in rejection.pod["spec"]["initContainers"]] == ["proxy", "setup"]


def test_a_running_pods_requests_and_what_dra_serves():
    pod = core.Pod()
    pod.metadata.name, pod.metadata.namespace = "infer", "ml"
    # extended resources: requests equal to the limits, as the API server defaults them
    a = {"nvidia.com/gpu": "2", "example.com/dongle": "1"}
    container(pod.spec.containers, "a", a, a)
    container(pod.spec.containers, "b", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})
    pod.spec.overhead["example.com/dongle"].string = "1"
    pod.status.phase = "Running"
    key, record = pod_entry(pod.SerializeToString())
    assert (key, record.terminated, record.rejection) == (("ml", "infer"), False, None)
    assert dict(record.requests) == {"nvidia.com/gpu": 3, "example.com/dongle": 2}
    # the kubelet's own status has no extendedResourceClaimStatus; when one does come (the
    # API server's status, before the kubelet has its own), what it names is left out
    mapping = pod.status.extendedResourceClaimStatus.requestMappings.add()
    mapping.containerName, mapping.resourceName = "a", "nvidia.com/gpu"
    _, record = pod_entry(pod.SerializeToString())
    assert dict(record.requests) == {"nvidia.com/gpu": 1, "example.com/dongle": 2}


def test_bytes_that_are_no_pod():
    with pytest.raises(PodDecodeError, match=r"not a v1\.Pod"):
        decode_pod(b"\x0a\xff\xff\xff\xff\x0f")
    # a DELETED event's pod: name, namespace and UID only
    gone = core.Pod()
    gone.metadata.name, gone.metadata.namespace, gone.metadata.uid = "p", "ml", "u"
    assert decode_pod(gone.SerializeToString()) == {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
        "spec": {"containers": []}, "status": {}}


# ---- which source wins ------------------------------------------------------------------------

@pytest.fixture
def view(tmp_path: Path) -> KubeView:
    """A view that is never started (it connects nothing until then)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                          "users: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    return KubeView("n", Health("n"), {"KUBECONFIG": str(kubeconfig)})


def pods_api(tmp_path: Path, present: bool) -> PodsApi:
    socket = tmp_path / "pods-api.sock"
    if present:
        socket.touch()
    return PodsApi(str(socket), 1 << 20, check_interval=10)


def test_a_kubelet_without_the_pods_api_leaves_it_to_the_view(tmp_path, view):
    context = PodSources(pods_api(tmp_path, present=False), view, fallback_seconds=60, now=0)
    assert context.source == Source.KUBE_API
    assert context.labels() == ("kube_api", "absent")
    assert view.pod_records() is view._records["pods"]  # the view watches pods
    assert PodSources(pods_api(tmp_path, present=False), None).labels() == ("none", "absent")
    assert PodSources(None, None).labels() == ("none", "off")


def test_the_pods_api_wins_and_hands_over_after_the_fallback_delay(tmp_path, view):
    api = pods_api(tmp_path, present=True)
    context = PodSources(api, view, fallback_seconds=60, now=0)
    assert context.source == Source.PODS_API  # starting: the view does not watch pods
    api.records[("ml", "p")] = pod_entry(rejected_pod())[1]
    assert set(view.pod_records()) == {("ml", "p")}
    assert set(context.rejections()) == {("ml", "p")}
    api.state = State.WATCHING
    assert context.choose(now=100) == Source.PODS_API
    api.state = State.FAILING
    assert context.choose(now=200) == Source.PODS_API  # the delay starts
    assert context.choose(now=259.9) == Source.PODS_API
    assert context.choose(now=260) == Source.KUBE_API
    assert view.pod_records() == {}  # the view's own, none listed yet
    assert context.rejections() == {}
    api.state = State.WATCHING
    assert context.choose(now=300) == Source.PODS_API
    assert set(context.rejections()) == {("ml", "p")}


def test_without_the_view_a_failing_pods_api_keeps_its_last_pods(tmp_path):
    api = pods_api(tmp_path, present=True)
    context = PodSources(api, None, fallback_seconds=60, now=0)
    api.records[("ml", "p")] = pod_entry(rejected_pod())[1]
    api.state, api.synced_once = State.FAILING, True
    assert context.choose(now=0) == Source.PODS_API
    assert context.choose(now=10_000) == Source.PODS_API
    assert set(context.rejections()) == {("ml", "p")}
    # its socket gone after it had failed that long: nothing
    api.state = State.ABSENT
    assert context.choose(now=10_001) == Source.NONE
    assert context.rejections() == {}
    # gone while it worked (a restart makes a new one): the delay first
    api.state = State.WATCHING
    assert context.choose(now=20_000) == Source.PODS_API
    api.state = State.ABSENT
    assert context.choose(now=20_001) == Source.PODS_API  # seen gone: the delay starts
    assert context.choose(now=20_060) == Source.PODS_API
    assert context.choose(now=20_061) == Source.NONE


def test_the_fit_answers_get_the_pods_api_pods_as_pod_context(tmp_path, view):
    api = pods_api(tmp_path, present=True)
    alone = PodSources(api, None)
    assert alone.node_context() is None  # nothing listed yet: no pod context, not an empty one
    api.records[("ml", "p")] = pod_entry(rejected_pod())[1]
    api.synced_once, api.state, api.version = True, State.WATCHING, 1
    context = alone.node_context()
    assert context is not None and context.source == "pods-api"
    assert context.allocatable is None  # no Node object without the view
    (pod,) = context.pods
    assert (pod.namespace, pod.name, pod.uid, pod.qos, pod.rejected) == (
        "ml", "p", "uid-1", "Guaranteed", True)
    assert alone.node_context() is context  # the same object until the pods change
    # with the view: the same pods, and the Node's allocatable once the view has the Node
    both = PodSources(api, view)
    view.replaced("node", dict([node_record({"metadata": {"name": "n"}, "status": {
        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})]), "")
    with_node = both.node_context()
    assert with_node is not None and with_node.source == "pods-api"
    assert [p.name for p in with_node.pods] == ["p"]
    assert with_node.allocatable == {"cpu": 64000, "memory": 256 * GiB, "pods": 110}
