"""Exclusive CPUs from DRA (SPEC section 11) on the ``dra-cpu`` node: the simulated kubelet (CPU
manager policy ``none``, its Pods API the pod context), dra-driver-cpu's ResourceSlices on the
real API server (tests/controlplane, kube-apiserver 1.37 validating them as ``resource.k8s.io/v1``
objects), and the exporter between them with ``--kube-api``.

The profile (exporter/simulator/profiles/dra-cpu.json): NUMA 0 = CPUs 0-7,16-23, NUMA 1 =
CPUs 8-15,24-31 (SMT siblings k and k+16); the driver leaves out its reservedCPUs 0 and 16.

Grouped mode (the driver's default), one slice per NUMA node's device, by hand:

* allocatable: cpudevnuma000 offers 14 CPUs (16 less 0 and 16), cpudevnuma001 16;
* vm/virt-launcher-db-0's compute holds 8 of NUMA 0 (its request, 8); telco/upf-0's dataplane
  6 of NUMA 1 (request 6; its sidecar's 250m is no claim); batch/pipeline-0's worker, which
  states no request, 2500m (the pod-level request) - 500m (helper) = 2 of NUMA 1;
* allocated: NUMA 0: 8; NUMA 1: 6 + 2 = 8; utilization 8/14 and 8/16 = 0.5;
* cpudevnuma001 is one device with two shares (upf-0's claim and pipeline-0's).

Individual mode (the same node, the driver publishing a device per CPU, numbered as the
driver's builder numbers them: a core's threads one after the other, cpudev000 = CPU 1,
cpudev001 = CPU 17, cpudev002 = CPU 2, ...): virt-launcher-db-0 gets the first four free
devices (CPUs 1, 17, 2, 18: NUMA 0), upf-0 the devices its claim names, cpudev014-017 (CPUs 8,
24, 9, 25: NUMA 1); allocatable: 14 on NUMA 0, 16 on NUMA 1.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import pytest

from ..support.controlplane import ControlPlane
from ..support.controlplane_api import RealApi
from ..support.harness import Exporter, Node, Scrape
from ..support.kubeobjects import resource_slices

pytestmark = pytest.mark.external

CPU, POOL = "dra.cpu", "cpu-node-01"
SHAPES = "shapes:\n  whole: {cpu: 4, memory: 1Gi}\n  shared: {cpu: 1500m, memory: 1Gi}\n"


@pytest.fixture
def real_api(control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig(tmp_path / "kubeconfig")))
    api = RealApi(control_plane)
    yield api
    api.clear()


def profile() -> dict:
    text = resources.files("exporter.simulator").joinpath("profiles", "dra-cpu.json").read_text()
    return json.loads(text)


def individual_profile() -> dict:
    data = profile()
    devices = []
    for index in range(15):  # cores 1-15: CPUs i+1 and i+17, the driver's order
        for cpu in (index + 1, index + 17):
            devices.append({"name": f"cpudev{len(devices):03d}", "attributes": {
                "resource.kubernetes.io/numaNode": {"int": 0 if cpu % 16 < 8 else 1},
                "dra.cpu/cpuID": {"int": cpu}, "dra.cpu/coreID": {"int": index + 1},
                "dra.cpu/socketID": {"int": 0}}})
    data["dra_pools"][0]["devices"] = devices
    db, upf = (copy.deepcopy(p) for p in data["pods"][:2])
    db["claims"] = [{"name": "cpus", "driver": CPU, "count": 4}]
    upf["claims"] = [{"name": "cpus", "driver": CPU,
                      "devices": ["cpudev014", "cpudev015", "cpudev016", "cpudev017"]}]
    upf["containers"][0]["cpus"] = 4
    data["pods"] = [db, upf]
    return data


def publish(api: RealApi, kubelet: Node) -> None:
    # one slice per device, as a driver splits a pool: in grouped mode one per NUMA node
    parts = len(kubelet.spec.dra_pools[0].devices)
    for obj in resource_slices(kubelet.spec, parts=parts):
        api.put("resourceslices", obj)


def synced(pods: int):
    def check(s: Scrape) -> bool:
        return (s.get("podresources_kube_api_up", resource="resourceslices") == 1
                and bool(s.series("podresources_cpus_allocatable"))
                and len(s.series("podresources_container_cpus")) == pods)
    return check


async def test_cpus_of_grouped_devices_per_numa_node_from_the_requests(real_api, tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    async with Node("dra-cpu", pods_api=True) as kubelet:
        publish(real_api, kubelet)
        async with Exporter(kubelet.settings(kube_api=True, fit_shapes=str(shapes))) as exporter:
            s = await exporter.wait_for(synced(3), timeout=20, what="the view and the Pods API")
            page = await (await exporter.get("/numa")).text()
            issues = exporter.refresher.accounting.data_issues
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 14, "1": 16}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 8, "1": 8}
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("virt-launcher-db-0", "compute", "0"): 8, ("upf-0", "dataplane", "1"): 6,
        ("pipeline-0", "worker", "1"): 2}
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource="cpu") == {
        "0": 8 / 14, "1": 0.5}
    # not per device too: each group, held, would read 1 (PodresourcesNumaDevicesExhausted)
    assert not s.series("podresources_numa_utilization_ratio", resource=CPU)
    assert s.by("podresources_cpu_allocator_info", "allocator", "driver") == {("dra", CPU): 1}
    assert s.by("podresources_dra_devices_allocatable", "driver", "pool", "numa_node") == {
        (CPU, POOL, "0"): 1, (CPU, POOL, "1"): 1}
    assert s.by("podresources_dra_device_shares", "numa_node") == {"0": 1, "1": 2}
    assert issues == {}  # every count the pod context gives (the first refreshes may not)
    # the fit answers: whole CPUs rest on the scheduler's DRA allocation; no static CPUs
    assert set(s.by("podresources_shape_assumption_info", "assumption", shape="whole")) == {
        "cpus_from_dra", "node_allocatable_derived"}
    assert set(s.by("podresources_shape_assumption_info", "assumption", shape="shared")) == {
        "node_allocatable_derived"}
    assert not s.series("podresources_numa_free", resource="cpu")
    # the node map: counts per holder, no cells
    assert ('class="dra-cpus" data-numa="0" data-holder="vm/virt-launcher-db-0/compute" '
            'data-count="8"') in page
    assert ('class="dra-cpus" data-numa="1" data-holder="batch/pipeline-0/worker" '
            'data-count="2"') in page
    assert "exclusive CPUs from DRA (DRA CPU driver dra.cpu)" in page


async def test_cpus_of_devices_per_cpu_are_those_cpus(real_api):
    async with Node(individual_profile(), pods_api=True) as kubelet:
        publish(real_api, kubelet)
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced(2), timeout=20, what="the view and the Pods API")
            page = await (await exporter.get("/numa")).text()
            issues = exporter.refresher.accounting.data_issues
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 14, "1": 16}
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 4, "1": 4}
    assert s.by("podresources_container_cpus", "pod", "container", "numa_node") == {
        ("virt-launcher-db-0", "compute", "0"): 4, ("upf-0", "dataplane", "1"): 4}
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource="cpu") == {
        "0": 4 / 14, "1": 4 / 16}
    assert issues == {}  # no request needed
    # the node map draws those very CPUs held, with the driver
    for cpu, holder in ((1, "vm/virt-launcher-db-0/compute"), (17, "vm/virt-launcher-db-0/compute"),
                        (2, "vm/virt-launcher-db-0/compute"), (18, "vm/virt-launcher-db-0/compute"),
                        (8, "telco/upf-0/dataplane"), (24, "telco/upf-0/dataplane"),
                        (9, "telco/upf-0/dataplane"), (25, "telco/upf-0/dataplane")):
        numa = "0" if cpu % 16 < 8 else "1"
        assert (f'data-cpu="{cpu}" data-state="held" data-numa="{numa}" '
                f'data-holder="{holder}" data-driver="dra.cpu"') in page
    assert 'data-cpu="3" data-state="free"' in page
    assert 'data-cpu="0" data-state="reserved"' in page and 'data-cpu="16" data-state="reserved"' \
        in page
