"""The snapshot command's report: unavailable devices and NUMA nodes without CPUs."""

from __future__ import annotations

import json

from exporter.accounting import account
from exporter.health import Capabilities
from exporter.model import (
    Allocatable,
    KubeletSnapshot,
    NumaNode,
    Topology,
)
from exporter.model import (
    ContainerAssignment as C,
)
from exporter.model import (
    DeviceEntry as D,
)
from exporter.model import (
    PodAssignment as P,
)
from exporter.report import format_json, format_table

# node 0: CPUs 0-3; node 1: no CPUs (HBM or CXL memory)
TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset(range(4)), 16 << 30),
                                NumaNode(1, frozenset(), 64 << 30)])
CAPS = Capabilities("v1", "true", "true", "unknown")


def snapshot() -> KubeletSnapshot:
    # the pod holds g0 and g1 on node 0; g1 turned unhealthy: allocatable lists g0 and g2
    return KubeletSnapshot(
        pods=(P("ns", "p", (C("c", cpu_ids=(1,), devices=(D("r/gpu", ("g0",), (0,)),
                                                          D("r/gpu", ("g1",), (0,)))),)),),
        allocatable=Allocatable(cpu_ids=(1, 2, 3), devices=(D("r/gpu", ("g0",), (0,)),
                                                            D("r/gpu", ("g2",), (0,)))))


def test_table_shows_unavailable_devices_and_cpu_less_nodes():
    text = format_table(account(snapshot(), TOPOLOGY), TOPOLOGY, CAPS, "n1")
    rows = [line.split() for line in text.splitlines()]
    # CPUs: node 0 1 of {1,2,3}; node 1 has none
    assert ["0", "0-3", "3", "1", "33.3%", "16.0", "GiB"] in rows
    assert rows[[r[:1] for r in rows].index(["1"])][:5] == ["1", "none", "-", "-", "-"]
    # devices: 2 allocated, 1 of them unavailable; used = listed assigned {g0} / {g0, g2}
    assert ["NUMA", "resource", "allocatable", "allocated", "unavailable", "used"] in rows
    assert ["0", "r/gpu", "2", "2", "1", "50.0%"] in rows
    assert "not listed as allocatable" in text
    assert "Data issues: none" in text


def test_json_carries_unavailable_devices():
    document = json.loads(format_json(account(snapshot(), TOPOLOGY), TOPOLOGY, CAPS, "n1"))
    assert document["devices_allocated_unavailable"] == [
        {"numa_node": "0", "resource": "r/gpu", "value": 1}]
    assert [n["cpus"] for n in document["numa_nodes"]] == ["0-3", ""]
    without = KubeletSnapshot(snapshot().pods, None)
    assert json.loads(format_json(account(without, TOPOLOGY), TOPOLOGY, CAPS))[
        "devices_allocated_unavailable"] is None
