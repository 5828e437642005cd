"""A profile's quantities read as Kubernetes reads them (exporter.podspec.parse_quantity): bytes
for memory, millicores for CPUs, and a clear error for what is neither."""

from __future__ import annotations

import pytest

from exporter.simulator.profile import ProfileError, parse_bytes, parse_cpus, parse_pod


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
