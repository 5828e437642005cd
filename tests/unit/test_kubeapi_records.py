"""The Kubernetes-API view's rules, without a server: quantities, extended-resource names,
effective pod requests and DRA pool generations (exporter/podspec.py,
exporter/kubeapi/records.py)."""

from __future__ import annotations

import pytest

from exporter.kubeapi.resourceslices import SliceDevice, SliceRecord, newest_generation
from exporter.podspec import is_extended_resource, parse_quantity, pod_requests

from ..support.kubeobjects import container, pod

NODE = "test-node"
DONGLE = "example.com/dongle"
AKRI_A = "akri.sh/zeroconf-a1b2c3"
GPU_DRA = "gpu.example.com"


@pytest.mark.parametrize("name, extended", [
    (DONGLE, True), (AKRI_A, True), ("nvidia.com/gpu", True), ("intel.com/sriov_netdevice", True),
    ("cpu", False), ("memory", False), ("hugepages-2Mi", False), ("ephemeral-storage", False),
    ("pods", False), ("attachable-volumes-aws-ebs", False), ("kubernetes.io/batteries", False),
    ("storage.kubernetes.io/scratch", False), ("requests.example.com/dongle", False),
    ("Example.com/dongle", False), ("example.com/", False), ("example.com/a/b", False),
    ("example.com/-dongle", False),
])
def test_extended_resource_names_follow_kubernetes(name, extended):
    assert is_extended_resource(name) is extended


@pytest.mark.parametrize("text, value", [
    ("4", 4), ("0", 0), ("1k", 1000), ("2Ki", 2048), ("500m", 0.5), ("1.5", 1.5), ("1e3", 1000),
    ("1E", 1e18), ("3Gi", 3 * 2**30), ("+2", 2),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "four", "1KB", "1.2.3", "e3"])
def test_bad_quantities_are_refused(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def _spec(containers, init=(), overhead=None) -> dict:
    return pod("ns", "p", NODE, containers, init, overhead=overhead)["spec"]


def _dongles(n: int, restart_policy: str | None = None, name: str = "c") -> dict:
    return container(name, {DONGLE: str(n), "cpu": "1"}, restart_policy)


@pytest.mark.parametrize("spec, expected", [
    # app containers add up
    (_spec([_dongles(1), _dongles(2)]), 3),
    # a regular init container runs alone: the larger of it and the app containers
    (_spec([_dongles(1)], [_dongles(3)]), 3),
    (_spec([_dongles(4)], [_dongles(3)]), 4),
    # a sidecar runs beside the app containers and beside every init container after it
    (_spec([_dongles(1)], [_dongles(1, "Always"), _dongles(2)]), 3),
    # ... but not beside the init containers before it
    (_spec([_dongles(1)], [_dongles(2), _dongles(1, "Always")]), 2),
    # the pod overhead comes on top
    (_spec([_dongles(1)], overhead={DONGLE: "1"}), 2),
])
def test_effective_request_rule(spec, expected):
    assert pod_requests(spec) == {DONGLE: expected}


def test_requests_keep_only_extended_resources():
    spec = _spec([container("c", {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "4Mi",
                                  "nvidia.com/gpu": "1"})])
    assert pod_requests(spec) == {"nvidia.com/gpu": 1}


def devices(n: int) -> tuple[SliceDevice, ...]:
    return tuple(SliceDevice(f"d{i}") for i in range(n))


def test_only_the_newest_generation_of_a_pool_counts():
    slices = [SliceRecord(GPU_DRA, "p", 1, devices(8)), SliceRecord(GPU_DRA, "p", 2, devices(2)),
              SliceRecord(GPU_DRA, "p", 2, devices(1)),
              SliceRecord("nic.example.com", "p", 1, devices(4)),
              SliceRecord("nic.example.com", "empty", 3, ())]
    kept = newest_generation(slices)
    counts: dict[tuple[str, str], int] = {}
    for record in kept:
        counts[(record.driver, record.pool)] = counts.get((record.driver, record.pool), 0) + \
            len(record.devices)
    assert counts == {(GPU_DRA, "p"): 3, ("nic.example.com", "p"): 4,
                      ("nic.example.com", "empty"): 0}
