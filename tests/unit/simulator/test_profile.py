"""A profile's quantities read as Kubernetes reads them (exporter.podspec.parse_quantity): bytes
for memory, millicores for CPUs, and a clear error for what is neither."""

from __future__ import annotations

import pytest

from exporter.simulator.profile import ProfileError, parse_pod
from exporter.simulator.quantities import parse_bytes, parse_cpus


@pytest.mark.parametrize("text, expected", [
    ("96Gi", 96 * 2**30), ("1.5Ki", 1536), ("2k", 2000), ("1M", 10**6), ("1e3", 1000),
    ("0", 0), (4096, 4096)])
def test_memory_quantities_are_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["500m", "1.0001Ki", "-1Gi", "lots", True])
def test_a_fraction_of_a_byte_or_no_quantity_is_refused(text):
    with pytest.raises(ProfileError, match="bad memory quantity"):
        parse_bytes(text)


@pytest.mark.parametrize("text, expected", [
    (2, (2, True)), ("1.5", (1, False)), ("500m", (0, False)), ("4000m", (4, True)),
    (None, (0, False))])
def test_cpu_quantities_are_whole_cpus_and_whether_exclusive(text, expected):
    assert parse_cpus(text) == expected


@pytest.mark.parametrize("text", ["1.2345", "-1", "two", True])
def test_finer_than_a_millicore_or_no_quantity_is_refused(text):
    with pytest.raises(ProfileError, match="bad CPU quantity"):
        parse_cpus(text)


def test_a_pod_keeps_its_request_in_millicores():
    pod = parse_pod({"namespace": "ns", "name": "p",
                     "containers": [{"name": "c", "cpus": "1500m", "memory": "1Gi"}]})
    assert pod.containers[0].cpu_millis == 1500


def test_a_claim_gets_the_devices_the_scheduler_chose_by_name():
    from exporter.simulator import SimulatedNode, load_profile
    node = SimulatedNode(load_profile("dra-cpu"))
    assert node.rejected == []
    held = {(key[1], c.name): [d.device for d in c.dra_devices]
            for key, sim in node.pods.items() for c in sim.assignment.containers
            if c.dra_devices}
    # each claim shares the CPU group its profile names (consumable capacity: a share each)
    assert held == {("virt-launcher-db-0", "compute"): ["cpudevnuma000"],
                    ("upf-0", "dataplane"): ["cpudevnuma001"],
                    ("pipeline-0", "worker"): ["cpudevnuma001"]}
    # CPU manager policy none: no CPU is allocatable, none is listed in any container
    assert node.allocatable().cpu_ids == ()
    assert all(not c.cpu_ids for sim in node.pods.values() for c in sim.assignment.containers)


def test_a_claim_naming_a_device_no_pool_has_is_refused():
    from exporter.simulator import parse_profile
    with pytest.raises(ProfileError, match="names devices \\['cpudevnuma009'\\]"):
        parse_profile({"numa_nodes": [{"id": 0, "cpus": "0-3"}],
                       "dra_pools": [{"driver": "dra.cpu", "pool": "p",
                                      "devices": ["cpudevnuma000"]}],
                       "pods": [{"name": "vm", "claims": [
                           {"name": "cpus", "driver": "dra.cpu", "devices": ["cpudevnuma009"]}],
                           "containers": [{"name": "c", "cpus": 1, "claims": ["cpus"]}]}]})
