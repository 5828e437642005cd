"""Black-box checks of the SPEC rule "DRA devices per NUMA node" (section 2) and the DRA rows
of section 3, with ``--kube-api`` against the real API server holding the node's ResourceSlices.

Machine (``small_profile``): NUMA 0 = CPUs 0-3, NUMA 1 = CPUs 4-7. Its DRA driver
``gpu.example.com``, pool ``test-node``, publishes four GPUs:

* ``g0``: ``resource.kubernetes.io/numaNode`` 0;
* ``g1``: ``resource.kubernetes.io/numaNode`` as a list, ``[1, 0]`` (its own node first: 1);
* ``g2``: ``resource.kubernetes.io/pciBusID`` ``0000:3b:00.0``, whose sysfs ``numa_node`` is 1;
* ``g3``: ``numaNode`` 1 in the driver's domain, tainted ``NoSchedule``.

Assignments are replaced by hand, as the kubelet would report them in List:

* ``ml/shared-a`` and ``ml/shared-b`` each hold g1 under their own share_id;
* ``ml/split``'s container holds CPUs 1-2 (node 0) and g2 (node 1);
* ``ml/local``'s container holds CPU 5 (node 1) and g1 (node 1), shared with the two above.

Expected values, by hand from the SPEC:

* allocatable: g0 on 0; g1, g2 on 1; g3 is tainted NoSchedule, so not allocatable:
  ``{(pool, "0"): 1, (pool, "1"): 2}``; tainted ``{(pool, "1", "NoSchedule"): 1}``;
* allocated: distinct devices: g1 and g2 on node 1 = 2; on node 0 nothing, a true 0;
* shares: g1 under three share_ids = 3 on node 1 (a device without share_id has none);
* alignment: ``split`` needs nodes {0} for its CPUs and {1} for g2: 2, misaligned;
  ``local`` needs {1}: 1;
* utilization per driver: node 0: 0/1 = 0; node 1: 2/2 = 1.
"""

from __future__ import annotations

from exporter.model import ContainerAssignment as C, DraDevice

from ..support.harness import Exporter, Node, small_profile
from ..support.kubeobjects import resource_slices
from ..support.spec import put_pod

DRIVER, POOL = "gpu.example.com", "test-node"


def profile() -> dict:
    return small_profile(
        dra_pools=[{"driver": DRIVER, "pool": POOL, "devices": [
            {"name": "g0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
            {"name": "g1", "attributes": {"resource.kubernetes.io/numaNode": {"ints": [1, 0]}}},
            {"name": "g2", "attributes": {
                "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"}}},
            {"name": "g3", "attributes": {"numaNode": {"int": 1}},
             "taints": [{"key": "example.com/broken", "effect": "NoSchedule"}]}]}],
        pci_numa={"0000:3b:00.0": 1})


def gpu(device: str, claim: str, share_id: str | None = None) -> DraDevice:
    return DraDevice(DRIVER, POOL, device, claim, "ml", share_id=share_id)


def synced(s) -> bool:
    return bool(s.series("podresources_dra_devices_allocatable")) and bool(
        s.series("podresources_container_numa_nodes", pod="split"))


async def test_shared_tainted_and_misaligned_dra_devices(api):
    async with Node(profile()) as kubelet:
        for obj in resource_slices(kubelet.spec):
            api.put("resourceslices", obj)
        put_pod(kubelet, "ml", "shared-a", C("a", dra_devices=(gpu("g1", "ca", "s-a"),)))
        put_pod(kubelet, "ml", "shared-b", C("b", dra_devices=(gpu("g1", "cb", "s-b"),)))
        put_pod(kubelet, "ml", "split", C("c", cpu_ids=(1, 2), dra_devices=(gpu("g2", "cs"),)))
        put_pod(kubelet, "ml", "local", C("d", cpu_ids=(5,),
                                          dra_devices=(gpu("g1", "cl", "s-l"),)))
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view and the pods")
    by_numa = ("driver", "pool", "numa_node")
    assert s.by("podresources_dra_devices_allocatable", *by_numa) == {
        (DRIVER, POOL, "0"): 1, (DRIVER, POOL, "1"): 2}
    assert s.by("podresources_dra_devices_tainted", *by_numa, "effect") == {
        (DRIVER, POOL, "1", "NoSchedule"): 1}
    assert s.by("podresources_dra_devices_allocated", *by_numa) == {
        (DRIVER, POOL, "0"): 0, (DRIVER, POOL, "1"): 2}
    assert s.by("podresources_dra_device_shares", *by_numa) == {(DRIVER, POOL, "1"): 3}
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="split",
                   container="c") == 2
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="local",
                   container="d") == 1
    assert s.value("podresources_misaligned_containers") == 1
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource=DRIVER) == {
        "0": 0.0, "1": 1.0}
    assert s.value("podresources_dra_device_info", driver=DRIVER, pool=POOL, device="g1",
                   numa_node="1", claim="cb", namespace="ml", pod="shared-b", container="b",
                   share_id="s-b") == 1


async def test_without_the_view_every_dra_device_is_of_unknown_numa_node():
    async with Node(profile()) as kubelet:
        put_pod(kubelet, "ml", "split", C("c", cpu_ids=(1, 2), dra_devices=(gpu("g2", "cs"),)))
        async with Exporter(kubelet.settings()) as exporter:
            s = await exporter.wait_for(
                lambda s: bool(s.series("podresources_dra_devices_allocated")), what="a refresh")
    assert s.by("podresources_dra_devices_allocated", "numa_node") == {"unknown": 1}
    assert not s.series("podresources_dra_devices_allocatable")
    # CPUs on node 0 only, the GPU's locality unknown: aligned
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="split",
                   container="c") == 1
