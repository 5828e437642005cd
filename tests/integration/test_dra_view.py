"""DRA devices per NUMA node: the simulator's dual-socket-gpu kubelet, its drivers' ResourceSlices
in the real API server (fixture ``api``), and the exporter between them (SPEC section 2, rule
"DRA devices per NUMA node").

The profile's drivers publish every locality form (dual-socket-gpu.json, ``dra_pools``):

* fpga.example.com, pool gpu-node-01: fpga-0 the driver's own bare ``numaNode`` 0; fpga-1 the
  standard int 1; fpga-2 only a PCI address whose sysfs ``numa_node`` is -1; fpga-3 the
  standard int 1 with a NoSchedule taint;
* rdma.example.com, pool gpu-node-01-mlx: mlx5-0 the legacy ``dra.net/numaNode`` 0; mlx5-1 the
  driver's bare ``numaNodeID`` 1;
* gpu.nvidia.com, pool gpu-node-01-dra: gpu-8 the standard list form [0, 1]; gpu-9 only a PCI
  address whose sysfs ``numa_node`` is 1.

The kubelet prepared fpga-0 for encoder-0, mlx5-0 for rdma-bench-0 and rdma-probe-0 (a shared
claim each: two share_ids) and gpu-8 for llm-infer-1 (its CPUs 24-31 are on node 1). gpu-9 was
allocated by the scheduler for dra-infer-0's nvidia.com/gpu, which DRA serves, but the kubelet
rejected that pod (its device manager still wants a free plugin GPU on one NUMA node, and none
is free): nothing prepared it.
"""

from __future__ import annotations

from ..support.controlplane_api import RealApi
from ..support.harness import Exporter, Node, Scrape
from ..support.kubeobjects import container, device_taint_rule, node, pod, resource_slices

FPGA, RDMA, GPU = "fpga.example.com", "rdma.example.com", "gpu.nvidia.com"
FPGA_POOL, RDMA_POOL, GPU_POOL = "gpu-node-01", "gpu-node-01-mlx", "gpu-node-01-dra"


def synced(scrape: Scrape) -> bool:
    return (scrape.get("podresources_kube_api_up", resource="resourceslices") == 1
            and scrape.get("podresources_kube_api_up", resource="pods") == 1
            and bool(scrape.series("podresources_dra_devices_allocatable"))
            and scrape.get("podresources_up") == 1)


def publish(server: RealApi, kubelet: Node) -> None:
    name = kubelet.spec.name
    for obj in resource_slices(kubelet.spec, parts=2):
        server.put("resourceslices", obj)
    server.put("nodes", node(name, {"nvidia.com/gpu": "8"}))
    served = pod("ml", "dra-infer-0", name, [container("server", {"nvidia.com/gpu": "1"})],
                 phase="Failed")
    served["status"].update(reason="TopologyAffinityError",
                            message="Pod was rejected: Resources cannot be allocated with "
                                    "Topology locality")
    served["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "dra-infer-0-extended-resources-7c2qd",
        "requestMappings": [{"containerName": "server", "resourceName": "nvidia.com/gpu",
                             "requestName": "container-0-request-0"}]}
    server.put("pods", served)
    server.put("pods", pod("ml", "llm-infer-1", name,
                           [container("server", {"nvidia.com/gpu": "1"})]))


async def test_dra_devices_per_numa_node_with_shares_taints_and_alignment(api):
    async with Node("dual-socket-gpu") as kubelet:
        publish(api, kubelet)
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view to sync")
    assert s.by("podresources_dra_devices_allocatable", "driver", "pool", "numa_node") == {
        (FPGA, FPGA_POOL, "0"): 1, (FPGA, FPGA_POOL, "1"): 1, (FPGA, FPGA_POOL, "unknown"): 1,
        (RDMA, RDMA_POOL, "0"): 1, (RDMA, RDMA_POOL, "1"): 1,
        (GPU, GPU_POOL, "0"): 1, (GPU, GPU_POOL, "1"): 1}
    assert s.by("podresources_dra_devices_tainted", "driver", "pool", "numa_node", "effect") == {
        (FPGA, FPGA_POOL, "1", "NoSchedule"): 1}
    # true zeros where devices are allocatable and none is prepared
    assert s.by("podresources_dra_devices_allocated", "driver", "pool", "numa_node") == {
        (FPGA, FPGA_POOL, "0"): 1, (FPGA, FPGA_POOL, "1"): 0, (FPGA, FPGA_POOL, "unknown"): 0,
        (RDMA, RDMA_POOL, "0"): 1, (RDMA, RDMA_POOL, "1"): 0,
        (GPU, GPU_POOL, "0"): 1, (GPU, GPU_POOL, "1"): 0}
    # mlx5-0 is one device with two shares
    assert s.by("podresources_dra_device_shares", "driver", "pool", "numa_node") == {
        (RDMA, RDMA_POOL, "0"): 2}
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource=GPU) == \
        {"0": 1.0, "1": 0.0}
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource=FPGA) == \
        {"0": 1.0, "1": 0.0}
    # llm-infer-1: CPUs and memory on node 1, its DRA GPU on node 0
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="llm-infer-1",
                   container="server") == 2
    assert s.value("podresources_container_numa_nodes", namespace="net", pod="rdma-bench-0",
                   container="bench") == 1
    assert s.value("podresources_dra_device_info", driver=GPU, pool=GPU_POOL, device="gpu-8",
                   numa_node="0", claim="llm-infer-1-gpu", namespace="ml", pod="llm-infer-1",
                   container="server") == 1
    # dra-infer-0 was rejected (and its GPU is served by DRA): only llm-infer-1's counts as a
    # device-plugin request
    assert s.value("podresources_extended_resource_requested", resource="nvidia.com/gpu") == 1


async def test_a_new_pool_generation_moves_devices_and_taints_apply_at_once(api):
    async with Node("dual-socket-gpu") as kubelet:
        publish(api, kubelet)
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync")
            # the GPU driver publishes generation 2: gpu-8 now says node 1, gpu-9 is tainted
            api.put("resourceslices", {
                "metadata": {"name": "gpu-gen-2"},
                "spec": {"driver": GPU, "nodeName": kubelet.spec.name,
                         "pool": {"name": GPU_POOL, "generation": 2, "resourceSliceCount": 1},
                         "devices": [
                             {"name": "gpu-8", "attributes": {
                                 "resource.kubernetes.io/numaNode": {"int": 1}}},
                             {"name": "gpu-9", "attributes": {
                                 "resource.kubernetes.io/numaNode": {"int": 1}},
                              "taints": [{"key": "k", "effect": "NoExecute"}]}]}})
            s = await exporter.wait_for(
                lambda s: s.get("podresources_dra_devices_allocated", driver=GPU,
                                pool=GPU_POOL, numa_node="1") == 1, what="generation 2")
    assert s.by("podresources_dra_devices_allocatable", "numa_node", driver=GPU) == {"1": 1}
    assert s.by("podresources_dra_devices_tainted", "numa_node", "effect", driver=GPU) == {
        ("1", "NoExecute"): 1}
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="llm-infer-1",
                   container="server") == 1
    # node 1: gpu-8 prepared and allocatable, gpu-9 tainted: 1 of 1
    assert s.by("podresources_numa_utilization_ratio", "numa_node", resource=GPU) == {"1": 1.0}


async def test_a_device_taint_rule_takes_the_devices_it_selects_out_of_allocatable(api):
    async with Node("dual-socket-gpu") as kubelet:
        publish(api, kubelet)
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync")
            # every RDMA device drained (NoExecute), fpga-1 marked (None: informational only)
            api.put("devicetaintrules", device_taint_rule("drain", "NoExecute", driver=RDMA))
            api.put("devicetaintrules", device_taint_rule("note", "None", driver=FPGA,
                                                          pool=FPGA_POOL, device="fpga-1"))
            s = await exporter.wait_for(
                lambda s: bool(s.series("podresources_dra_devices_tainted", effect="None")),
                what="the rules")
            assert s.by("podresources_dra_devices_tainted", "driver", "numa_node", "effect") == {
                (FPGA, "1", "NoSchedule"): 1, (FPGA, "1", "None"): 1,
                (RDMA, "0", "NoExecute"): 1, (RDMA, "1", "NoExecute"): 1}
            assert not s.series("podresources_dra_devices_allocatable", driver=RDMA)
            assert s.by("podresources_dra_devices_allocatable", "numa_node", driver=FPGA) == {
                "0": 1, "1": 1, "unknown": 1}
            # mlx5-0 is still prepared for its two pods: allocated, but no utilization series
            assert s.by("podresources_dra_devices_allocated", "numa_node", driver=RDMA) == {
                "0": 1}
            assert not s.series("podresources_numa_utilization_ratio", resource=RDMA)
            api.delete("devicetaintrules", "drain")
            s = await exporter.wait_for(
                lambda s: bool(s.series("podresources_dra_devices_allocatable", driver=RDMA)),
                what="the rule's removal")
    assert s.by("podresources_dra_devices_allocatable", "numa_node", driver=RDMA) == {
        "0": 1, "1": 1}
