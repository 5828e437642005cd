"""ResourceSlices and DeviceTaintRules into published devices: NUMA sources in the SPEC's order,
the newest generation of each pool, taints; and extended resources DRA serves (KEP-5004)."""

from __future__ import annotations

from pathlib import Path

from exporter.kubeapi.records import pod_record
from exporter.kubeapi.resourceslices import (
    inventory,
    numa_source,
    pci_reader,
    slice_record,
    taint_rule_record,
)
from exporter.model import CpuAttributes, PublishedDevice
from exporter.podspec import dra_served, without_dra_served


def no_pci(bus_id: str) -> tuple[int, ...] | None:
    raise AssertionError(f"sysfs asked for {bus_id}")


def test_the_standard_attribute_int_and_list_forms():
    assert numa_source({"resource.kubernetes.io/numaNode": {"int": 1}}, "gpu.nvidia.com") == \
        ((1,), None)
    # list form: the device's own node is the first element
    assert numa_source({"resource.kubernetes.io/numaNode": {"ints": [3, 2]}}, "x.io") == \
        ((3,), None)


def test_the_standard_attribute_comes_before_the_drivers_own_and_the_legacy_names():
    attributes = {"dra.net/numaNode": {"int": 0}, "numaNode": {"int": 1},
                  "resource.kubernetes.io/numaNode": {"int": 2}}
    assert numa_source(attributes, "gpu.amd.com") == ((2,), None)
    del attributes["resource.kubernetes.io/numaNode"]
    assert numa_source(attributes, "gpu.amd.com") == ((1,), None)  # bare name: driver's domain
    del attributes["numaNode"]
    assert numa_source(attributes, "gpu.amd.com") == ((0,), None)


def test_a_name_without_domain_is_in_the_drivers_domain_only():
    # numaNodeID of driver dra.cpu, bare; and gpu.amd.com/numaNode is not driver x.io's
    assert numa_source({"numaNodeID": {"int": 1}}, "dra.cpu") == ((1,), None)
    assert numa_source({"gpu.amd.com/numaNode": {"int": 1}}, "x.io") == (None, None)
    assert numa_source({"x.io/numaNodeID": {"int": 1}}, "x.io") == ((1,), None)


def test_each_legacy_name():
    for name in ("dra.net/numaNode", "dra.cpu/numaNodeID", "dra.memory/numaNode"):
        assert numa_source({name: {"int": 1}}, "other.example.com") == ((1,), None)


def test_pci_bus_id_is_the_last_source_and_non_int_values_are_skipped():
    attributes = {"resource.kubernetes.io/numaNode": {"string": "1"},
                  "resource.kubernetes.io/pciBusID": {"string": "0000:3B:00.0"}}
    assert numa_source(attributes, "x.io") == (None, "0000:3b:00.0")
    assert numa_source({"resource.kubernetes.io/pciBusID": {"string": "../../etc"}}, "x.io") == \
        (None, None)
    assert numa_source({"resource.kubernetes.io/numaNode": {"int": True}}, "x.io") == (None, None)


def test_pci_reader_reads_sysfs_and_minus_one_is_none(tmp_path: Path):
    for bdf, value in (("0000:3b:00.0", "1"), ("0000:af:00.0", "-1")):
        directory = tmp_path / "bus" / "pci" / "devices" / bdf
        directory.mkdir(parents=True)
        (directory / "numa_node").write_text(value + "\n")
    read = pci_reader(tmp_path)
    assert read("0000:3b:00.0") == (1,)
    assert read("0000:af:00.0") is None
    assert read("0000:00:01.0") is None  # not in sysfs


def slice_obj(name: str, driver: str, pool: str, generation: int, devices: list[dict],
              ) -> dict:
    return {"metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": "n", "pool": {"name": pool,
                                                                 "generation": generation,
                                                                 "resourceSliceCount": 1},
                     "devices": devices}}


def test_newest_generation_per_pool_taints_and_taint_rules():
    slices = dict([
        slice_record(slice_obj("old", "gpu.example.com", "p", 1, [
            {"name": "gpu-0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
            {"name": "gpu-9"}])),
        slice_record(slice_obj("new", "gpu.example.com", "p", 2, [
            {"name": "gpu-0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 1}},
             "taints": [{"key": "k", "effect": "NoExecute"}, {"key": "j", "effect": "None"}]},
            {"name": "gpu-1", "attributes": {
                "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"}}}])),
        # v1beta1 keeps attributes and taints under basic
        slice_record(slice_obj("beta", "nic.example.com", "q", 5, [
            {"name": "vf-0", "basic": {"attributes": {"dra.net/numaNode": {"int": 0}},
                                       "taints": [{"key": "k", "effect": "NoSchedule"}]}}])),
    ])
    rules = dict([
        taint_rule_record({"metadata": {"name": "r"}, "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "device": "gpu-1"},
            "taint": {"key": "maintenance", "effect": "NoSchedule"}}}),
        # selects by CEL, which is not evaluated: not applied
        taint_rule_record({"metadata": {"name": "cel"}, "spec": {
            "deviceSelector": {"selectors": [{"cel": {"expression": "true"}}]},
            "taint": {"key": "x", "effect": "NoExecute"}}}),
    ])
    got = inventory(slices.values(), rules.values(), {"0000:3b:00.0": (1,)}.get)
    assert got.devices == (
        PublishedDevice("gpu.example.com", "p", "gpu-0", (1,), frozenset({"NoExecute", "None"})),
        PublishedDevice("gpu.example.com", "p", "gpu-1", (1,), frozenset({"NoSchedule"})),
        PublishedDevice("nic.example.com", "q", "vf-0", (0,), frozenset({"NoSchedule"})),
    )
    assert [d.allocatable for d in got.devices] == [False, False, False]


def test_a_device_with_no_source_has_no_numa_ids_and_sysfs_is_not_asked():
    slices = [slice_record(slice_obj("s", "d.io", "p", 1, [{"name": "a", "attributes": {
        "d.io/model": {"string": "x"}}}]))[1]]
    assert inventory(slices, [], no_pci).devices == (PublishedDevice("d.io", "p", "a"),)


def test_extended_resources_dra_serves_are_not_device_plugin_requests():
    pod = {"metadata": {"namespace": "ns", "name": "p"},
           "spec": {"containers": [
               {"name": "a", "resources": {
                   "limits": {"nvidia.com/gpu": "2", "example.com/fpga": "1"},
                   "requests": {"nvidia.com/gpu": "2", "example.com/fpga": "1"}}},
               {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"},
                                           "requests": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Running", "extendedResourceClaimStatus": {
               "resourceClaimName": "p-extended-resources-abcde",
               "requestMappings": [{"containerName": "a", "resourceName": "nvidia.com/gpu",
                                    "requestName": "container-0-request-0"}]}}}
    assert dra_served(pod) == {("a", "nvidia.com/gpu")}
    _, record = pod_record(without_dra_served(pod))
    # container b's GPU comes from a device plugin; a's from DRA
    assert dict(record.requests) == {"nvidia.com/gpu": 1.0, "example.com/fpga": 1.0}
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_slices_of_the_wrong_shape_count_as_empty_not_as_a_crash():
    for obj in ({"spec": []}, {"spec": {"pool": "p", "devices": "abc"}}, {"metadata": None},
                {"spec": {"driver": "d", "pool": {"name": "p", "generation": "x"},
                          "devices": [None, {"name": 3}, {"name": "ok", "attributes": []}]}}):
        _, record = slice_record(obj)
        assert all(device.name == "ok" and device.numa_ids is None for device in record.devices)
    _, rule = taint_rule_record({"spec": {"deviceSelector": "all", "taint": None}})
    assert not rule.usable  # no effect: applies to nothing


def dra_cpu_slice(devices: list[dict]) -> dict:
    return {"metadata": {"name": "worker-1-dra.cpu-x"},
            "spec": {"driver": "dra.cpu", "nodeName": "worker-1",
                     "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def test_what_a_dra_cpu_device_says_of_its_cpus():
    # as dra-driver-cpu's docs/user/device-attributes.md shows them: grouped by NUMA node
    # (capacity dra.cpu/cpu, the standard NUMA attribute), by socket (dra.cpu/socketID, no
    # NUMA attribute) and individual (dra.cpu/cpuID)
    record = slice_record(dra_cpu_slice([
        {"name": "cpudevnuma001", "allowMultipleAllocations": True,
         "attributes": {"resource.kubernetes.io/numaNode": {"int": 1},
                        "dra.cpu/socketID": {"int": 0}, "dra.cpu/numCPUs": {"int": 64}},
         "capacity": {"dra.cpu/cpu": {"value": "64"}}},
        {"name": "cpudevsocket001", "attributes": {"dra.cpu/socketID": {"int": 1}},
         "capacity": {"cpu": {"value": "32000m"}}},  # a bare name is in the driver's domain
        {"name": "cpudev033", "attributes": {"dra.cpu/cpuID": {"int": 33},
                                             "dra.cpu/coreID": {"int": 1},
                                             "resource.kubernetes.io/numaNode": {"int": 0}}},
        {"name": "odd", "attributes": {"dra.cpu/cpuID": {"int": -1}},
         "capacity": {"dra.cpu/cpu": {"value": "1500m"}}},
        {"name": "plain", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
    ]))[1]
    devices = {d.name: (d.numa_ids, d.cpu) for d in record.devices}
    assert devices == {
        "cpudevnuma001": ((1,), CpuAttributes(cpus=64, socket=0)),
        "cpudevsocket001": (None, CpuAttributes(cpus=32, socket=1)),
        "cpudev033": ((0,), CpuAttributes(cpu_id=33)),
        "odd": (None, None),  # a negative id and a fraction of a CPU say nothing
        "plain": ((0,), None),
    }
    published = inventory([record], [], no_pci).devices
    assert published[0] == PublishedDevice("dra.cpu", "worker-1", "cpudevnuma001", (1,),
                                           cpu=CpuAttributes(cpus=64, socket=0))


def test_v1beta1_keeps_attributes_and_capacity_under_basic():
    record = slice_record(dra_cpu_slice([
        {"name": "cpudev001", "basic": {"attributes": {"dra.cpu/cpuID": {"int": 1}}}},
        {"name": "cpudevnuma000", "basic": {"capacity": {"dra.cpu/cpu": {"value": "8"}}}}]))[1]
    assert [d.cpu for d in record.devices] == [CpuAttributes(cpu_id=1), CpuAttributes(cpus=8)]


def test_odd_cpu_attributes_say_nothing_and_crash_nothing():
    # values of the wrong type, capacities that are no quantity, a list where a map belongs
    record = slice_record(dra_cpu_slice([
        {"name": "a", "attributes": {"dra.cpu/cpuID": {"string": "3"},
                                     "dra.cpu/socketID": {"bool": True}},
         "capacity": {"dra.cpu/cpu": {"value": "lots"}}},
        {"name": "b", "attributes": {"dra.cpu/cpuID": {"int": True}},
         "capacity": {"dra.cpu/cpu": ["8"]}},
        {"name": "c", "attributes": {"dra.cpu/cpuID": 7}, "capacity": "8"},
        {"name": "d", "attributes": {"other.io/cpuID": {"int": 4}},  # another domain's
         "capacity": {"dra.cpu/cpu": {"value": "-2"}}},
        {"name": "e", "attributes": {"cpuID": {"int": 5}, "resource.kubernetes.io/numaNode":
                                     {"ints": [1, 0]}}},  # list form: its own node first
    ]))[1]
    assert {d.name: (d.numa_ids, d.cpu) for d in record.devices} == {
        "a": (None, None), "b": (None, None), "c": (None, None), "d": (None, None),
        "e": ((1,), CpuAttributes(cpu_id=5))}
