"""The Topology Manager's own merge tests (policy_*_test.go), run through the merger and the
policies: the merged NUMA set and whether it is preferred, as each upstream case asserts."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.fit.kubelet.topologymanager.policy import merge, merge_by_permutation, provider_lists
from exporter.fit.kubelet.topologymanager.policy_single_numa_node import filter_single_numa_hints
from exporter.fit.kubelet.topologymanager.scope import can_admit, policy_merge

from .cases import as_yaml, hint, hints, ids, section

MERGE = [c for c in section("merge") if not c.get("kind")]
FILTER = [c for c in section("merge") if c.get("kind") == "filter_single_numa_hints"]
CAN_ADMIT = [c for c in section("merge") if c.get("kind") == "can_admit_only"]


def answers(case: dict[str, Any]) -> list[Any]:
    return [None if p is None else {r: hints(h) for r, h in p.items()}
            for p in case["providers"]]


def distances(case: dict[str, Any]) -> dict[int, dict[int, int]] | None:
    options = case.get("options") or {}
    if not options.get("prefer-closest-numa-nodes"):
        return None
    rows = options["distances"]
    return {i: dict(enumerate(row)) for i, row in enumerate(rows)}


@pytest.mark.parametrize("case", MERGE, ids=ids(MERGE))
def test_merge_case(case: dict[str, Any]) -> None:
    best, admit = policy_merge(case["policy"], answers(case), case["numa_nodes"],
                               distances(case))
    expected = case["expect"]
    numa = sorted(best.affinity) if best.affinity is not None else None
    assert numa == expected["numa_upstream"]
    assert best.preferred == expected["preferred"]
    assert admit == expected["admit"]


@pytest.mark.parametrize("case", [c for c in MERGE if c["policy"] != "single-numa-node"],
                         ids=ids([c for c in MERGE if c["policy"] != "single-numa-node"]))
def test_fast_merge_is_the_permutation_merge(case: dict[str, Any]) -> None:
    """merge() computes what HintMerger.Merge's permutations give."""
    lists = provider_lists(answers(case))
    fast = merge(lists, case["numa_nodes"], distances(case))
    slow = merge_by_permutation(lists, case["numa_nodes"], distances(case))
    assert as_yaml(fast) == as_yaml(slow)


@pytest.mark.parametrize("case", FILTER, ids=ids(FILTER))
def test_filter_single_numa_hints(case: dict[str, Any]) -> None:
    lists = [[hint(h) for h in resource] for resource in case["resources_hints"]]
    got = [[as_yaml(h) for h in resource] for resource in filter_single_numa_hints(lists)]
    expected = [resource or [] for resource in case["expect"]["filtered"]]
    assert got == expected


@pytest.mark.parametrize("case", CAN_ADMIT, ids=ids(CAN_ADMIT))
def test_can_admit(case: dict[str, Any]) -> None:
    assert can_admit(case["policy"], hint(case["merged_hint"])) == case["expect"]["admit"]
