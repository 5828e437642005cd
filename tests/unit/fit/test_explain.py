"""snapshot --why and --shape in words: per container, the placement and the verdict."""

from __future__ import annotations

import json

from exporter.fit.explain import PodQuestion, shape_report, why_report
from exporter.fit.kubelet.podshape import ContainerShape, PodShape
from exporter.fit.kubeletconfig import FlagConfig, resolve
from exporter.podspec import Rejection

from .nodes import cpus, state

CONFIG = resolve(FlagConfig(), None, lists_cpus=True, lists_memory=False, numa_nodes=2)


def test_smt_alignment_error_is_judged_with_full_pcpus_only_on():
    """3 CPUs on 2-thread cores: only full-pcpus-only rejects that, so the pod is judged with
    it on, and the report says so."""
    node = state(cpus(4, {0: 4, 1: 4}, threads=2))
    pod = PodQuestion("ns", "p", "Failed", "SMTAlignmentError", "", Rejection(
        "uid", "SMTAlignmentError", "", ()), PodShape("ns/p", (ContainerShape("c", {
            "cpu": 3000}),)))
    text = why_report(pod, node, CONFIG, "table")
    assert "the kubelet would reject it with SMTAlignmentError under Topology Manager policy " \
           "single-numa-node, scope container, full-pcpus-only: 3 CPUs is not a multiple of " \
           "the 2 threads per core" in text
    assert "judged with it on" in text


def test_shape_report_in_json_names_each_container_placement():
    node = state(cpus(4, {0: 4, 1: 4}))
    shape = PodShape("pair", (ContainerShape("a", {"cpu": 3000}),
                              ContainerShape("b", {"cpu": 3000})))
    document = json.loads(shape_report(shape, node, CONFIG, "json"))
    assert document["admitted"] is True
    assert [(c["container"], c["numa_nodes_used"]) for c in document["containers"]] == [
        ("a", [0]), ("b", [1])]
    # b is judged after a took 3 of node 0's CPUs
    assert document["containers"][1]["numa"][0]["free"] == {"cpu": 1}
    assert document["fits"] == {"0": False, "1": False}
    assert document["kubelet_config"]["source"] == "assumed"
