"""Shapes with containers, init containers (sidecars) and QoS (SPEC 7.1)."""

from __future__ import annotations

import pytest

from exporter.fit.shapes import ShapeError, parse_shape_argument, parse_shapes

GiB = 1 << 30


def test_flat_and_structured_shapes():
    shapes = parse_shapes({"shapes": {
        "gpu-train": {"cpu": 16, "memory": "64Gi", "nvidia.com/gpu": 2},
        "upf": {"initContainers": [{"cpu": 2, "memory": "1Gi"},
                                   {"cpu": 1, "memory": "256Mi", "sidecar": True}],
                "containers": [{"cpu": 8, "memory": "16Gi", "intel.com/sriov_vf": 2},
                               {"cpu": "500m", "memory": "1Gi"}]},
        "batch": {"qos": "Burstable", "containers": [{"cpu": 4, "nvidia.com/gpu": 1}]}}})
    train, upf, batch = shapes
    assert train.qos == "Guaranteed" and len(train.containers) == 1
    assert dict(train.containers[0].requests) == {"cpu": 16000, "memory": 64 * GiB,
                                                  "nvidia.com/gpu": 2}
    assert [c.sidecar for c in upf.init_containers] == [False, True]
    assert upf.containers[1].requests["cpu"] == 500
    assert batch.qos == "Burstable"


@pytest.mark.parametrize("spec, message", [
    ({"qos": "Gold", "cpu": 1}, "qos must be one of"),
    ({"containers": [{"cpu": 1, "sidecar": True}]}, "sidecar: true belongs to an init"),
    ({"cpu": 1, "containers": [{"cpu": 1}]}, "'cpu' beside containers"),
    ({"containers": []}, "at least one container"),
    ({"qos": "BestEffort", "cpu": 1}, "BestEffort pod requests no cpu"),
    ({"gpu": 1}, "unknown resource 'gpu'"),
])
def test_bad_shapes(spec, message):
    with pytest.raises(ShapeError, match=message):
        parse_shapes({"shapes": {"s": spec}})


def test_shape_argument_is_one_container():
    shape = parse_shape_argument("cpu=8,nvidia.com/gpu=2")
    assert dict(shape.containers[0].requests) == {"cpu": 8000, "nvidia.com/gpu": 2}
