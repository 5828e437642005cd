"""Who asks the resource managers for what (SPEC 7.2.1)."""

from __future__ import annotations

from exporter.fit.kubelet.config import Managers
from exporter.fit.kubelet.podshape import (
    BEST_EFFORT,
    BURSTABLE,
    Ask,
    ContainerShape,
    PodShape,
    asks,
    pod_effective_ask,
)

GiB = 1 << 30


def one(requests: dict[str, int], qos: str = "Guaranteed", **pod: object) -> Ask:
    shape = PodShape("p", (ContainerShape("c", requests),), qos=qos, **pod)  # type: ignore[arg-type]
    return asks(shape, shape.containers[0], Managers())


def test_guaranteed_whole_cpus_are_exclusive():
    ask = one({"cpu": 4000, "memory": GiB, "hugepages-1Gi": 2 * GiB, "nvidia.com/gpu": 1})
    assert (ask.cpus, dict(ask.memory), dict(ask.devices)) == (
        4, {"memory": GiB, "hugepages-1Gi": 2 * GiB}, {"nvidia.com/gpu": 1})


def test_fractional_cpu_still_asks_for_memory():
    ask = one({"cpu": 500, "memory": GiB})
    assert (ask.cpus, dict(ask.memory)) == (0, {"memory": GiB})


def test_burstable_and_best_effort_ask_only_devices():
    assert one({"cpu": 4000, "memory": GiB, "nvidia.com/gpu": 1}, BURSTABLE) == Ask(
        0, {}, {"nvidia.com/gpu": 1})
    assert one({"nvidia.com/gpu": 2}, BEST_EFFORT) == Ask(0, {}, {"nvidia.com/gpu": 2})


def test_pod_level_resources_without_the_gate_get_nothing_exclusive():
    assert one({"cpu": 4000, "memory": GiB}, pod_level_resources=True) == Ask()
    shape = PodShape("p", (ContainerShape("c", {"cpu": 4000}),), pod_level_resources=True)
    gated = asks(shape, shape.containers[0], Managers(pod_level_resource_managers=True))
    assert gated.cpus == 4


def test_dra_served_extended_resources_are_never_allocated_but_still_ask_for_hints():
    """The device manager's Allocate skips them; its GetTopologyHints does not."""
    ask = one({"nvidia.com/gpu": 1, "deviceclass.resource.kubernetes.io/gpu": 1},
              dra_resources=frozenset({"nvidia.com/gpu"}))
    assert dict(ask.devices) == {}
    assert dict(ask.hint_devices) == {"nvidia.com/gpu": 1,
                                      "deviceclass.resource.kubernetes.io/gpu": 1}


def test_pod_effective_request_counts_sidecars_and_the_largest_init():
    """app 2 + sidecar 1 = 3 long-running; init 4 after the sidecar = 5: effective 5."""
    shape = PodShape("p", (ContainerShape("app", {"cpu": 2000}),),
                     (ContainerShape("side", {"cpu": 1000}, sidecar=True),
                      ContainerShape("init", {"cpu": 4000})))
    assert pod_effective_ask(shape, Managers()).cpus == 5
