"""Restricted and best-effort ask the single-node hints first
(exporter/fit/kubelet/topologymanager/scope.py ``merged_hint``): the same best hint and verdict
as the policy's merge over every provider's full hints, with the CPU manager's
``align-by-socket`` (wider preferred hints) too."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from exporter.fit.kubelet.podshape import Ask
from exporter.fit.kubelet.topologymanager.scope import (
    Reuse,
    merged_hint,
    policy_merge,
    provider_answers,
)

from .nodes import GiB, cpus, devices, state
from .test_replay import nodes

GPU = "example.com/gpu"


def full_merge(policy: str, node, ask: Ask, align_by_socket: bool):
    answers = provider_answers(node, ask, Reuse(), False, align_by_socket)
    return policy_merge(policy, answers, node.numa_ids, None)


@pytest.mark.parametrize("policy", ["restricted", "best-effort"])
def test_one_node_holding_everything_is_the_merge_answer(policy):
    """Node 0 has 1 free CPU, node 1 four; a GPU on each. 2 CPUs and a GPU: only node 1 holds
    both; the single-node hints give {1}, preferred, as the full merge does."""
    node = state(cpus(4, {0: 1, 1: 4}),
                 devs={GPU: devices({frozenset({0}): 1, frozenset({1}): 1})})
    ask = Ask(2, {}, {GPU: 1})
    _, hint, admitted = merged_hint(policy, node, ask, Reuse(), None)
    assert (hint.affinity, hint.preferred, admitted) == (frozenset({1}), True, True)
    best, full_admitted = full_merge(policy, node, ask, False)
    assert (best.affinity, best.preferred, full_admitted) == (frozenset({1}), True, True)


@pytest.mark.parametrize("policy", ["restricted", "best-effort"])
def test_align_by_socket_wider_hints_do_not_make_a_narrower_outcome(policy):
    """One socket over both nodes. With align-by-socket the CPU manager prefers {1} and the
    socket-wide {0, 1} (isHintSocketAligned); the device manager prefers {0} and {1}. {0, 1}
    with {0} merges to {0} but not preferred (mergePermutation: preferred only when every
    affinity is the same set), so the kubelet picks {1}, as the single-node hints do."""
    node = state(cpus(4, {0: 1, 1: 4}),
                 devs={GPU: devices({frozenset({0}): 1, frozenset({1}): 1})})
    ask = Ask(2, {}, {GPU: 1})
    best, full_admitted = full_merge(policy, node, ask, True)
    assert (best.affinity, best.preferred, full_admitted) == (frozenset({1}), True, True)
    _, hint, admitted = merged_hint(policy, node, ask, Reuse(), None, align_by_socket=True)
    assert (hint.affinity, hint.preferred, admitted) == (frozenset({1}), True, True)


def test_no_node_holding_everything_gives_the_full_answers():
    """4 CPUs and 2 GPUs, one GPU per node: no one-node outcome; restricted rejects with the
    full answers (the GPU's hints name the wider set), as its merge does."""
    node = state(cpus(4, {0: 4, 1: 4}),
                 devs={GPU: devices({frozenset({0}): 1, frozenset({1}): 1})})
    ask = Ask(4, {}, {GPU: 2})
    answers, hint, admitted = merged_hint("restricted", node, ask, Reuse(), None)
    best, full_admitted = full_merge("restricted", node, ask, False)
    assert (hint, admitted) == (best, full_admitted)
    assert admitted is False
    assert answers == provider_answers(node, ask, Reuse(), False, False)


@settings(max_examples=200, deadline=None)
@given(node=nodes(), policy=st.sampled_from(["restricted", "best-effort"]),
       align_by_socket=st.booleans(), closest=st.booleans(), cpu=st.integers(0, 10),
       memory=st.integers(0, 6), gpu=st.integers(0, 3))
def test_the_same_hint_and_verdict_as_the_full_merge(  # type: ignore[no-untyped-def]
        node, policy, align_by_socket, closest, cpu, memory, gpu):
    """Random nodes and asks: the best hint and the verdict are the full merge's."""
    ask = Ask(cpu, {"memory": memory * GiB} if memory else {}, {"gpu": gpu} if gpu else {})
    distances = node.distances if closest else None
    answers = provider_answers(node, ask, Reuse(), False, align_by_socket)
    best, full_admitted = policy_merge(policy, answers, node.numa_ids, distances)
    _, hint, admitted = merged_hint(policy, node, ask, Reuse(), distances, align_by_socket)
    assert (hint, admitted) == (best, full_admitted)
