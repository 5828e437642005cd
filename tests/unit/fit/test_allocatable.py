"""The Node's allocatable without the Node object (``exporter/fit/state/allocatable.py``): what the
kubelet's node status sets (``nodestatus.MachineInfo`` less ``GetNodeAllocatableReservation``),
from sysfs and the kubelet's config file, worked out by hand."""

from __future__ import annotations

import pytest

from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Managers, Rules
from exporter.fit.kubelet.podshape import BURSTABLE, ContainerShape, PodShape
from exporter.fit.kubeletconfig import KubeletConfigError, parse_kubelet_config
from exporter.fit.state.allocatable import Reservation, derived_allocatable, parse_reservation
from exporter.fit.state.from_snapshot import node_state
from exporter.model import Allocatable, KubeletSnapshot, NumaNode, Topology
from exporter.podcontext import ContainerContext, NodeContext, PodContext

MiB, GiB = 1 << 20, 1 << 30
# NUMA node 0: CPUs 0-3, MemTotal 16Gi with 512 2Mi pages (1Gi); node 1: CPUs 4-7, 16Gi with
# one 1Gi page
SYSFS = Topology.from_nodes([
    NumaNode(0, frozenset(range(4)), 16 * GiB, {2 * MiB: 512}),
    NumaNode(1, frozenset(range(4, 8)), 16 * GiB, {GiB: 1})])
# what GetAllocatableResources lists under CPU manager none and memory manager None: no CPUs,
# no memory
NOTHING_LISTED = KubeletSnapshot((), Allocatable())


def test_reserved_cpus_replace_the_cpu_part_and_eviction_defaults_to_100mi():
    """CPU: 8 online CPUs (8000m) less reservedSystemCPUs 0,4 (2000m; the systemReserved cpu 1
    it replaces does not count) = 6000. Memory: 32Gi of MemTotal less systemReserved 1Gi,
    kubeReserved 512Mi and the default hard eviction threshold 100Mi, less every hugepage
    (1Gi of 2Mi pages, one 1Gi page) = 28.5Gi - 100Mi. Hugepages: their capacity. Pods:
    maxPods."""
    reservation = parse_reservation({
        "reservedSystemCPUs": "0,4", "systemReserved": {"cpu": "1", "memory": "1Gi"},
        "kubeReserved": {"memory": "512Mi"}})
    assert reservation == Reservation(2000, GiB + 512 * MiB, 100 * MiB, 0.0)
    assert derived_allocatable(NOTHING_LISTED, SYSFS, 110, reservation) == {
        "pods": 110, "cpu": 6000, "memory": 32 * GiB - GiB - 512 * MiB - 100 * MiB - 2 * GiB,
        "hugepages-2Mi": GiB, "hugepages-1Gi": GiB}


def test_cpu_reserved_in_millicores_and_a_percentage_threshold():
    """No reservedSystemCPUs: systemReserved 500m + kubeReserved 250m, 8000 - 750 = 7250.
    evictionHard memory.available 5% of the 32Gi capacity: the kubelet parses the percentage
    as a float32 (parsePercentage), 0.0500000007, so 1717986944 bytes (not 1717986918.4),
    rounded down as its int64 conversion does; it replaces the default (no 100Mi)."""
    reservation = parse_reservation({
        "systemReserved": {"cpu": "500m"}, "kubeReserved": {"cpu": "250m"},
        "evictionHard": {"memory.available": "5%"}})
    allocatable = derived_allocatable(NOTHING_LISTED, SYSFS, None, reservation)
    assert allocatable["cpu"] == 7250
    assert allocatable["memory"] == 32 * GiB - 1717986944 - 2 * GiB
    assert "pods" not in allocatable  # no maxPods given: the pod count is not checked


def test_without_the_file_only_what_the_managers_list_counts():
    """No config file: the allocatable comes from GetAllocatableResources, which under the
    none/None policies lists no CPUs and no memory: neither is known (not checked)."""
    assert derived_allocatable(NOTHING_LISTED, SYSFS, None, None) == {}


@pytest.mark.parametrize("document, message", [
    ({"systemReserved": {"hugepages-2Mi": "64Mi"}},
     "systemReserved: cannot reserve 'hugepages-2Mi' resource"),
    ({"evictionHard": {"memory.available": "lots"}},
     "evictionHard.memory.available: not a quantity or percentage: 'lots'"),
    ({"reservedSystemCPUs": "zero"}, "reservedSystemCPUs: not a CPU list: 'zero'"),
])
def test_a_reservation_the_kubelet_refuses_is_a_bad_file(document, message):
    with pytest.raises(KubeletConfigError, match=message.replace(".", r"\.")):
        parse_kubelet_config(document)


def test_out_of_cpu_under_cpu_manager_none_without_a_node_object():
    """CPU manager none, pod context from the Pods API (no Node object): the Node's
    allocatable CPU is 8000 - 1000 (reservedSystemCPUs 0) = 7000; a Burstable pod requests
    5000; a Burstable 2.5-CPU pod: 2500 > 7000 - 5000: OutOfcpu, as the kubelet's predicate
    says it."""
    running = PodContext("ns", "web", "uid-web", BURSTABLE, "Running",
                         containers=(ContainerContext("c", {"cpu": 5000}),))
    reservation = parse_reservation({"reservedSystemCPUs": "0"})
    node = node_state(NOTHING_LISTED, SYSFS, False, False, NodeContext("pods-api", (running,)),
                      None, 110, reservation)
    assert node is not None
    shape = PodShape("b", (ContainerShape("c", {"cpu": 2500}),), qos=BURSTABLE)
    verdict = admit(shape, node, Rules("none", managers=Managers(False, False)))
    assert (verdict.admitted, verdict.reason, verdict.message) == (
        False, "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 2500, used: 5000, capacity: 7000")
