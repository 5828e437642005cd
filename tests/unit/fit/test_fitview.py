"""The fit section after a refresh: answered again only when the resource managers' state, the
shapes or the kubelet configuration changed, not for every new accounting.

The node: one NUMA node, CPUs 0-3, all allocatable; the CPU manager is static (allocatable CPUs
are listed). The shape asks for one exclusive CPU, so its capacity is the free CPUs: 4 minus
what pods hold.
"""

from __future__ import annotations

from pathlib import Path

from exporter.accounting import account
from exporter.fit.fitview import FitView
from exporter.fit.shapes import ShapeFile
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    KubeletSnapshot,
    NumaNode,
    PodAssignment,
    Topology,
)

TOPOLOGY = Topology.from_nodes([NumaNode(0, frozenset({0, 1, 2, 3}))])
ALLOCATABLE = Allocatable(cpu_ids=(0, 1, 2, 3))


def pod(name: str, *cpus: int) -> PodAssignment:
    return PodAssignment("default", name, (ContainerAssignment("c", cpu_ids=cpus),))


def refresh(view: FitView, *pods: PodAssignment) -> bytes:
    snapshot = KubeletSnapshot(tuple(pods), ALLOCATABLE)
    return view.update(snapshot, TOPOLOGY, account(snapshot, TOPOLOGY))


def capacity(text: bytes) -> str:
    return next(line for line in text.decode().splitlines()
                if line.startswith("podresources_shape_capacity{"))


def test_a_change_no_shape_sees_keeps_the_answers(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("shapes:\n  one: {cpu: 1, memory: 1Gi}\n")
    view = FitView(shapes=ShapeFile(shapes))
    first = refresh(view, pod("pinned", 0, 1), pod("web"))
    answers = view.answers
    assert capacity(first) == 'podresources_shape_capacity{shape="one"} 2.0'
    # a pod holding nothing exclusive replaced by another: a new accounting, the same state
    assert refresh(view, pod("pinned", 0, 1), pod("web-2")) is first
    assert view.answers is answers
    # a pod taking CPU 2: answered again
    third = refresh(view, pod("pinned", 0, 1), pod("web-2"), pod("batch", 2))
    assert view.answers is not answers
    assert capacity(third) == 'podresources_shape_capacity{shape="one"} 1.0'
