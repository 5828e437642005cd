"""merge() against HintMerger.Merge's own permutation fold, over random provider answers."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from exporter.fit.kubelet.topologymanager.policy import merge, merge_by_permutation
from exporter.fit.kubelet.topologymanager.topology_manager import TopologyHint

NUMA = (0, 1, 2, 3)
DISTANCES = {i: {j: 10 if i == j else 11 if i // 2 == j // 2 else 30 for j in NUMA}
             for i in NUMA}

hint = st.builds(TopologyHint,
                 st.one_of(st.none(), st.frozensets(st.sampled_from(NUMA), min_size=1)),
                 st.booleans())
lists = st.lists(st.lists(hint, min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(lists, st.booleans())
def test_merge_equals_the_permutation_fold(provider_lists, closest):
    distances = DISTANCES if closest else None
    assert merge(provider_lists, NUMA, distances) == merge_by_permutation(provider_lists, NUMA,
                                                                          distances)


numa_sets = st.frozensets(st.sampled_from(NUMA), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(numa_sets, st.integers(0, 5), max_size=6),
       st.dictionaries(st.sampled_from(NUMA), st.integers(0, 9)))
def test_mask_sums_equal_direct_counting(counts, values):
    """The subset sums behind the hint providers count what a loop over the sets counts."""
    from exporter.fit.kubelet.topologymanager.bitmask import mask_table, meeting_sums, node_sums
    table = mask_table(NUMA)
    meeting = meeting_sums(table, counts)
    sums = node_sums(table, values)
    for numa, bits in zip(table.sets, table.bits):
        assert meeting[bits] == sum(c for s, c in counts.items() if s & numa)
        assert sums[bits] == sum(v for n, v in values.items() if n in numa)


def test_sparse_numa_ids_are_summed_set_by_set():
    """NUMA ids 0 and 40 (sysfs may skip ids): no list of 2^41 entries, the same sums."""
    from exporter.fit.kubelet.topologymanager.bitmask import mask_table, meeting_sums, node_sums
    table = mask_table((0, 40))
    assert not table.dense
    sums = node_sums(table, {0: 3, 40: 5})
    assert [sums[b] for b in table.bits] == [3, 5, 8]
    meeting = meeting_sums(table, {frozenset({40}): 2, frozenset({0, 40}): 1, frozenset(): 4})
    assert [meeting[b] for b in table.bits] == [1, 3, 3]


@st.composite
def mask_families(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    """Up to 9 NUMA ids, some skipped (sysfs may), and two families of masks within them,
    large enough to be taken as bitsets."""
    ids = draw(st.sets(st.integers(0, 9), min_size=1, max_size=9))
    full = sum(1 << n for n in ids)
    within = st.integers(0, full).map(lambda m: m & full)
    return (full, draw(st.lists(within, min_size=1, max_size=300)),
            draw(st.lists(within, min_size=1, max_size=300)))


@settings(max_examples=300, deadline=None)
@given(mask_families())
def test_intersections_as_bitsets_equal_pair_by_pair(families):
    from exporter.fit.kubelet.topologymanager.bitmask import intersections
    full, reachable, masks = families
    assert intersections(reachable, masks, full) == {r & m for r in reachable for m in masks}


def test_intersections_of_eight_nodes_masks_hold_every_narrower_set():
    """Every non-empty set of 8 nodes (255) against every set of two or more nodes (247):
    the bitset way, each set's intersections are every set, the empty one included (256)."""
    from exporter.fit.kubelet.topologymanager.bitmask import (
        PAIRWISE_INTERSECTIONS,
        intersections,
    )
    every = list(range(1, 256))
    wide = [m for m in every if bin(m).count("1") >= 2]
    assert len(every) * len(wide) >= PAIRWISE_INTERSECTIONS
    assert intersections(every, wide, 255) == set(range(256))
    assert intersections([0b11], wide, 255) == {0, 1, 2, 3}
