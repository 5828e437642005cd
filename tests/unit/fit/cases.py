"""The ported upstream cases (``tests/support/kubelet_cases.yaml``; format in
``tests/support/kubelet_cases.md``):
loading, and hints in the YAML form turned into the engine's."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from exporter.fit.kubelet.topologymanager.topology_manager import TopologyHint

DATA = Path(__file__).parents[2] / "support" / "kubelet_cases.yaml"


@functools.cache
def cases() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def section(name: str) -> list[dict[str, Any]]:
    return list(cases()[name])


def hint(item: dict[str, Any]) -> TopologyHint:
    numa = item["numa"]
    return TopologyHint(None if numa is None else frozenset(numa), bool(item["preferred"]))


def hints(items: list[dict[str, Any]] | None) -> list[TopologyHint] | None:
    return None if items is None else [hint(i) for i in items]


def as_yaml(found: TopologyHint) -> dict[str, Any]:
    return {"numa": None if found.affinity is None else sorted(found.affinity),
            "preferred": found.preferred}


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]
