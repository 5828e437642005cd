"""The merger collects distinct merged hints instead of walking every permutation; this checks
it against a literal walk in the kubelet's order (policy.go ``HintMerger.Merge``: each
permutation ANDed by ``mergePermutation`` and folded through ``compare``), on random hints."""

from __future__ import annotations

import itertools

from hypothesis import given, settings, strategies as st

from exporter.simulator.admission import AdmissionNode, Hint, merge_filtered

NUMA = (0, 1, 2, 3)


def node(distances: dict[int, dict[int, int]]) -> AdmissionNode:
    return AdmissionNode(numa_ids=NUMA, cpu_numa={}, siblings={}, reserved_cpus=frozenset(),
                         free_cpus=set(), distances=distances)


def value(mask: frozenset[int]) -> int:
    return sum(1 << n for n in mask)


def kubelet_merge(resources: list[list[Hint]], node: AdmissionNode, closest: bool) -> Hint:
    """HintMerger.Merge as written: every permutation, in order, through compare()."""
    everything = frozenset(NUMA)
    widths = [min(len(h.affinity) for h in hints if h.affinity is not None)
              for hints in resources if any(h.affinity is not None for h in hints)]
    bound = max(widths, default=0)

    def average(mask: frozenset[int]) -> float:
        pairs = [node.distance(a, b) for a in mask for b in mask]
        return sum(pairs) / len(pairs)

    def fitter(current: Hint, candidate: Hint) -> Hint:
        a, b = current.affinity, candidate.affinity
        assert a is not None and b is not None
        if a == b:
            return current
        if len(a) != len(b):
            return candidate if len(b) < len(a) else current
        if closest and average(a) != average(b):
            return candidate if average(b) < average(a) else current
        return candidate if value(b) < value(a) else current

    def compare(current: Hint | None, candidate: Hint) -> Hint | None:
        assert candidate.affinity is not None
        if not candidate.affinity:
            return current
        if current is None:
            return candidate
        if not current.preferred and candidate.preferred:
            return candidate
        if current.preferred and not candidate.preferred:
            return current
        if current.preferred:
            return fitter(current, candidate)
        assert current.affinity is not None
        have, new = len(current.affinity), len(candidate.affinity)
        if have > bound:
            return fitter(current, candidate)
        if have == bound:
            return current if new != bound else fitter(current, candidate)
        if new > bound:
            return current
        if new == bound:
            return candidate
        if new > have:
            return candidate
        if new < have:
            return current
        return fitter(current, candidate)

    best: Hint | None = None
    for permutation in itertools.product(*resources):
        preferred = True
        masks = []
        for hint in permutation:
            if hint.affinity is not None:
                masks.append(hint.affinity)
                if hint.affinity != masks[0]:
                    preferred = False
            if not hint.preferred:
                preferred = False
        merged = everything.intersection(*masks)
        best = compare(best, Hint(merged, preferred))
    return best if best is not None else Hint(everything, False)


masks = st.frozensets(st.sampled_from(NUMA), min_size=1)
hints = st.builds(Hint, st.one_of(st.none(), masks), st.booleans())
resources = st.lists(st.lists(hints, min_size=1, max_size=5), min_size=1, max_size=4)
distances = st.fixed_dictionaries({a: st.fixed_dictionaries(
    {b: (st.just(10) if a == b else st.integers(11, 40)) for b in NUMA}) for a in NUMA})


@settings(max_examples=200, deadline=None)
@given(resources, distances, st.booleans())
def test_merge_picks_what_the_kubelet_walk_picks(resources, distances, closest) -> None:
    where = node(distances)
    ours = merge_filtered(where, resources, "best-effort", closest)
    theirs = kubelet_merge(resources, where, closest)
    assert (ours.affinity, ours.preferred) == (theirs.affinity, theirs.preferred)
