"""The exporter's Topology Manager merge against the kubelet's own, at 8 NUMA nodes and beyond.

The exporter never enumerates the permutations of the providers' hints (``HintMerger.Merge``
folds ``compare`` over every one: 255^k on 8 NUMA nodes with k aligned resources); it builds the
reachable merged sets resource by resource (exporter/fit/kubelet/topologymanager/policy.py
``merge``). Here both answer the same hint lists, drawn at
random on 8, 12 and 16 NUMA nodes (a kubelet with ``max-allowable-numa-nodes`` raised admits
on such machines), under ``best-effort``, ``restricted`` (with and without
``prefer-closest-numa-nodes`` and non-default distances) and ``single-numa-node``: the real
policy's ``Merge`` from the component's ``merge`` op (tests/realkubelet/mergeop.go, the policy
built as ``NewManager`` builds it), and ``policy_merge`` from the exporter. The lists are
kept to about 20,000 permutations so that the kubelet's loop answers in milliseconds; the
component's reduction (mergepolicy.go, which judges the differential's larger merges) answers
too and must agree with the loop.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from exporter.fit.kubelet.topologymanager.policy_best_effort import BEST_EFFORT
from exporter.fit.kubelet.topologymanager.policy_restricted import RESTRICTED
from exporter.fit.kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from exporter.fit.kubelet.topologymanager.scope import policy_merge
from exporter.fit.kubelet.topologymanager.topology_manager import TopologyHint

from ..support.realkubelet import RELEASES, RealKubelet

SEED = 34
PER_LAYOUT = 120
MAX_PERMUTATIONS = 20_000


def _distances(rng: random.Random, count: int) -> list[list[int]]:
    table = [[10] * count for _ in range(count)]
    for a in range(count):
        for b in range(a + 1, count):
            table[a][b] = table[b][a] = rng.choice((11, 12, 16, 20, 21, 32))
    return table


def _hint_list(rng: random.Random, count: int, length: int) -> list[TopologyHint] | None:
    """A provider's answer for one resource: don't care (None), nothing ([]), or hints whose
    preferred ones are mostly, as a provider makes them, the narrowest."""
    roll = rng.random()
    if roll < 0.04:
        return None
    if roll < 0.08:
        return []
    masks: set[frozenset[int]] = set()
    while len(masks) < length:
        width = min(count, rng.choice((1, 1, 1, 2, 2, 3, 4, count)))
        masks.add(frozenset(rng.sample(range(count), width)))
    narrowest = min(len(m) for m in masks)
    hints = []
    for mask in sorted(masks, key=lambda m: (len(m), sorted(m))):
        preferred = len(mask) == narrowest if rng.random() < 0.8 else rng.random() < 0.5
        hints.append(TopologyHint(mask, preferred))
    if rng.random() < 0.1:
        hints.append(TopologyHint(None, rng.random() < 0.5))
    return hints


def _instances(count: int) -> list[dict[str, Any]]:
    rng = random.Random(f"{SEED}:{count}")
    out = []
    for i in range(PER_LAYOUT):
        policy = (BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)[i % 3]
        closest = policy != SINGLE_NUMA_NODE and rng.random() < 0.4
        lists: list[list[TopologyHint] | None] = []
        permutations = 1
        for _ in range(rng.choice((2, 3, 3, 4))):
            length = rng.randint(1, 40)
            if permutations * length > MAX_PERMUTATIONS:
                length = max(1, MAX_PERMUTATIONS // permutations)
            hints = _hint_list(rng, count, length)
            permutations *= max(1, len(hints or ()))
            lists.append(hints)
        out.append({"policy": policy, "closest": closest, "lists": lists,
                    "distances": _distances(rng, count) if closest else None})
    return out


def _wire(hints: list[TopologyHint] | None) -> list[dict[str, Any]] | None:
    if hints is None:
        return None
    return [{"numa": sorted(h.affinity) if h.affinity is not None else None,
             "preferred": h.preferred} for h in hints]


@pytest.fixture(scope="module", params=sorted(RELEASES))
def kubelet(request: pytest.FixtureRequest):
    with RealKubelet.start(request.param) as component:
        yield component


@pytest.mark.parametrize("count", [8, 12, 16])
def test_the_exporters_merge_is_the_kubelets(kubelet: RealKubelet, count: int) -> None:
    ids = list(range(count))
    differ, preferred_answers, largest = [], 0, 0.0
    for n, instance in enumerate(_instances(count)):
        options = {"prefer-closest-numa-nodes": "true"} if instance["closest"] else {}
        if count > 8:
            options["max-allowable-numa-nodes"] = str(count)
        real = kubelet.call("merge", merge={
            "numa_nodes": ids, "distances": instance["distances"], "policy": instance["policy"],
            "options": options, "lists": [_wire(h) for h in instance["lists"]]})["merge"]
        largest = max(largest, real["permutations"])
        # the component's reduction is the kubelet's loop
        assert (real["reduced_numa"], real["reduced_preferred"], real["reduced_admit"]) == (
            real["numa"], real["preferred"], real["admit"]), (n, instance)
        distances = ({a: dict(enumerate(row)) for a, row in enumerate(instance["distances"])}
                     if instance["distances"] else None)
        answers = [{f"r{i}": hints} for i, hints in enumerate(instance["lists"])]
        best, admit = policy_merge(instance["policy"], answers, ids, distances)
        mine = (sorted(best.affinity) if best.affinity is not None else None, best.preferred,
                admit)
        preferred_answers += real["preferred"]
        if mine != (real["numa"], real["preferred"], real["admit"]):
            differ.append((n, instance["policy"], mine, real))
    print(f"\nmerge, real kubelet {kubelet.release}, {count} NUMA nodes: {PER_LAYOUT} hint-list "
          f"sets (up to {largest:.0f} permutations), {preferred_answers} preferred answers, "
          f"{len(differ)} differences")
    assert differ == []
    # the draw reaches both kinds of answer
    assert 0 < preferred_answers < PER_LAYOUT
