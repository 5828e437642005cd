"""The exporter against the simulated kubelet over a real unix socket, scraped over real HTTP.

Expected values come from the profiles' requests, worked out by hand (see the comments).
"""

from __future__ import annotations

import pytest

from exporter.simulator import Faults

from ..support.harness import Exporter, GiB, Node, small_profile


async def test_dual_socket_gpu_profile_per_numa_figures():
    async with Node("dual-socket-gpu") as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        # CPUs: node 0 holds 0-15,32-47 with 0 and 32 reserved; node 1 holds 16-31,48-63.
        assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 32, "1": 32}
        assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 30, "1": 32}
        # the kubelet's placements (single-numa-node, lowest NUMA node that fits): node 0:
        # log-shipper 1 + trainer 16 + upf-0 6 + upf-1 6 + bench 1; node 1: infer-0 8 + infer-1
        # 8 + mpi 4 (admitted under policy none) + encoder 2 + pipeline pod-level 4 + db 2 (the
        # Succeeded etl job is not listed by a 1.37 kubelet)
        assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 30, "1": 28}
        assert s.value("podresources_numa_utilization_ratio", numa_node="0",
                       resource="cpu") == 1.0
        assert s.value("podresources_numa_utilization_ratio", numa_node="1",
                       resource="cpu") == pytest.approx(28 / 32)
        # GPUs: 4 per node, one unhealthy on node 1 (gone from allocatable)
        assert s.by("podresources_devices_allocatable", "numa_node", resource="nvidia.com/gpu") \
            == {"0": 4, "1": 3}
        assert s.by("podresources_devices_allocated", "numa_node", resource="nvidia.com/gpu") \
            == {"0": 4, "1": 3}
        vf = "intel.com/sriov_netdevice"
        assert s.by("podresources_devices_allocatable", "numa_node", resource=vf) == \
            {"0": 16, "1": 16}
        # node 0: trainer 2 + upf-0 4 + upf-1 4 + mpi 1 (policy none: the lowest NUMA set
        # first); node 1: infer-0 1
        assert s.by("podresources_devices_allocated", "numa_node", resource=vf) == \
            {"0": 11, "1": 1}
        assert s.value("podresources_numa_utilization_ratio", numa_node="0",
                       resource=vf) == 11 / 16
        # hugepages: 32 x 1Gi and 2048 x 2Mi per node; trainer 16 + upf 8 + 8 on node 0
        assert s.by("podresources_memory_allocatable_bytes", "numa_node",
                    memory_type="hugepages-1Gi") == {"0": 32 * GiB, "1": 32 * GiB}
        assert s.by("podresources_memory_allocated_bytes", "numa_node",
                    memory_type="hugepages-1Gi") == {"0": 32 * GiB, "1": 0}
        assert s.value("podresources_numa_utilization_ratio", numa_node="0",
                       resource="hugepages-1Gi") == 1.0
        assert s.value("podresources_numa_utilization_ratio", numa_node="0",
                       resource="hugepages-2Mi") == 0.5
        # memory: 192Gi per node, 4Gi reserved on node 0. Node 0: log-shipper 0.5 + trainer 96
        # + istio 0.25 + two metrics agents 0.125 + two dataplanes 4 + mpi 8 + monitor 0.0625
        # + bench 1; node 1: infer 32 + 32 + encoder 2 + pipeline 6 (pod-level) + DB 100
        assert s.by("podresources_memory_allocatable_bytes", "numa_node", memory_type="memory") \
            == {"0": 188 * GiB, "1": 192 * GiB}
        assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
            "0": 114.0625 * GiB, "1": 172 * GiB}
        assert s.value("podresources_numa_utilization_ratio", numa_node="0",
                       resource="memory") == pytest.approx(114.0625 / 188)
        assert s.value("podresources_numa_utilization_ratio", numa_node="1",
                       resource="memory") == pytest.approx(172 / 192)
        # without the Kubernetes-API view DRA devices are of unknown NUMA node and align
        # nothing: llm-infer-1's DRA GPU does not count (dra-infer-0's was never prepared: the
        # kubelet rejected the pod)
        assert s.by("podresources_dra_devices_allocated", "driver", "pool", "numa_node") == {
            ("fpga.example.com", "gpu-node-01", "unknown"): 1,
            ("rdma.example.com", "gpu-node-01-mlx", "unknown"): 1,
            ("gpu.nvidia.com", "gpu-node-01-dra", "unknown"): 1}
        assert s.value("podresources_misaligned_containers") == 1  # mpi-rank-0/rank
        assert s.value("podresources_node_info", node="gpu-node-01", kubelet_api="v1") == 1
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="true") == 1


async def test_dual_socket_gpu_profile_workload_series():
    async with Node("dual-socket-gpu") as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.by("podresources_container_cpus", "container", "numa_node", pod="llm-train-0") \
            == {("log-shipper", "0"): 1, ("trainer", "0"): 16}  # the sidecar is listed too
        # admitted under policy none: CPUs from the node with the fewest free ones that holds
        # whole cores (takeByTopologyNUMAPacked), memory on the lowest node with room, its VF
        # from the lowest NUMA set
        assert s.by("podresources_container_numa_nodes", "pod", "container",
                    namespace="hpc") == {("mpi-rank-0", "rank"): 2}
        assert s.value("podresources_container_numa_nodes", namespace="analytics",
                       pod="inmem-db-0", container="db") == 1
        assert s.value("podresources_container_memory_bytes", namespace="analytics",
                       pod="inmem-db-0", container="db", numa_node="1",
                       memory_type="memory") == 100 * GiB
        # pod-level: 4 CPUs for the pod, 2 of them the container's own, counted once on node 1
        assert s.value("podresources_pod_cpus", namespace="batch", pod="pipeline-0",
                       numa_node="1") == 4
        assert s.value("podresources_container_cpus", namespace="batch", pod="pipeline-0",
                       container="stage-a", numa_node="1") == 2
        assert s.value("podresources_pod_memory_bytes", namespace="batch", pod="pipeline-0",
                       numa_node="1", memory_type="memory") == 6 * GiB
        gpus = s.series("podresources_device_info", resource="nvidia.com/gpu")
        assert len(gpus) == 7
        assert {dict(k)["pod"] for k in gpus} == {"llm-train-0", "llm-infer-0", "llm-infer-1"}
        # one fpga claim shared by two containers; one shared (consumable) NIC with a share_id
        # per pod; one DRA GPU (dra-infer-0, whose nvidia.com/gpu DRA serves, was rejected: the
        # device manager still wants a free plugin GPU on one NUMA node)
        dra = s.series("podresources_dra_device_info")
        assert sorted((dict(k)["pod"], dict(k)["container"], dict(k)["device"]) for k in dra) == [
            ("encoder-0", "encoder", "fpga-0"), ("encoder-0", "monitor", "fpga-0"),
            ("llm-infer-1", "server", "gpu-8"),
            ("rdma-bench-0", "bench", "mlx5-0"), ("rdma-probe-0", "probe", "mlx5-0")]
        assert all("share_id" in dict(k) for k in dra
                   if dict(k)["pod"] in ("rdma-bench-0", "rdma-probe-0"))
        assert not any("share_id" in dict(k) for k in dra if dict(k)["pod"] == "encoder-0")
        # pods without exclusive resources produce no workload series
        assert not s.series("podresources_container_cpus", pod="web-7d4b9c5f6-2lq8n")


async def test_multi_numa_and_topology_less_devices():
    profile = small_profile(
        devices=[{"resource": "example.com/accel", "count": 2, "numa": [0, 1]},
                 {"resource": "example.com/dongle", "count": 3, "numa": None}],
        pods=[{"namespace": "ns", "name": "p",
               "containers": [{"name": "c", "cpus": 2,
                               "devices": {"example.com/accel": 1, "example.com/dongle": 1}}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.by("podresources_devices_allocatable", "numa_node", "resource") == {
            ("0,1", "example.com/accel"): 2, ("unknown", "example.com/dongle"): 3}
        assert s.by("podresources_devices_allocated", "numa_node", "resource") == {
            ("0,1", "example.com/accel"): 1, ("unknown", "example.com/dongle"): 1}
        # the group device counts toward both member nodes, on both sides of the ratio
        assert s.by("podresources_numa_utilization_ratio", "numa_node",
                    resource="example.com/accel") == {"0": 0.5, "1": 0.5}
        assert not s.series("podresources_numa_utilization_ratio", resource="example.com/dongle")
        # CPUs on node 0 and a device local to 0,1: aligned; the dongle's locality is unknown
        assert s.value("podresources_container_numa_nodes", namespace="ns", pod="p",
                       container="c") == 1
        assert s.value("podresources_misaligned_containers") == 0
        info = s.by("podresources_device_info", "resource", "numa_node")
        assert info == {("example.com/accel", "0,1"): 1, ("example.com/dongle", "unknown"): 1}
        assert s.value("podresources_data_issues_total", kind="unknown_numa_id") == 0


async def test_pod_level_cpus_and_memory_overlap_is_counted_once():
    # a pod-level pool (PodLevelResourceManagers, scope pod) on node 0
    profile = small_profile(topology_manager_scope="pod",
                            feature_gates={"PodLevelResourceManagers": True}, pods=[{
                                "namespace": "ns", "name": "p",
                                "pod_level": {"cpus": 1, "memory": "1Gi"},
                                "containers": [{"name": "a", "cpus": 2, "memory": "2Gi"},
                                               {"name": "b"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        # pod-level CPUs 1-3 include container a's 1-2: three CPUs on node 0, not five
        assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
        assert s.value("podresources_pod_cpus", namespace="ns", pod="p", numa_node="0") == 3
        # pod-level 3Gi includes a's 2Gi: max(3, 2) = 3Gi
        assert s.value("podresources_memory_allocated_bytes", numa_node="0",
                       memory_type="memory") == 3 * GiB
        assert s.value("podresources_kubelet_api_info", api_version="v1",
                       get_allocatable="true", get="true", pod_level="true") == 1


async def test_without_memory_manager_no_memory_series_exist():
    profile = small_profile(memory_manager_policy="None", pods=[
        {"namespace": "ns", "name": "p",
         "containers": [{"name": "c", "cpus": 2, "memory": "1Gi"}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert not s.series("podresources_memory_allocatable_bytes")
        assert not s.series("podresources_memory_allocated_bytes")
        assert not s.series("podresources_container_memory_bytes")
        assert not s.series("podresources_numa_utilization_ratio", resource="memory")
        assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}


async def test_cpu_manager_none_reports_no_cpu_series():
    profile = small_profile(cpu_manager_policy="none", memory_manager_policy="None", pods=[
        {"namespace": "ns", "name": "p", "containers": [{"name": "c", "cpus": 2}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert not s.series("podresources_cpus_allocatable")
        assert not s.series("podresources_cpus_allocated")
        assert not s.series("podresources_container_cpus")
        assert s.by("podresources_numa_node_cpus", "numa_node") == {"0": 4, "1": 4}
        assert s.value("podresources_misaligned_containers") == 0


async def test_get_allocatable_disabled_lowers_the_capability_only():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2}}], pods=[
        {"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "cpus": 1, "devices": {"r/x": 1}}]}])
    async with Node(profile, faults=Faults(get_allocatable="disabled")) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.value("podresources_kubelet_api_info", api_version="v1",
                       get_allocatable="false", get="true", pod_level="unknown") == 1
        assert not s.series("podresources_cpus_allocatable")
        assert not s.series("podresources_devices_allocatable")
        assert not s.series("podresources_numa_utilization_ratio")
        assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 1}
        assert s.by("podresources_devices_allocated", "numa_node", "resource") == {("0", "r/x"): 1}


async def test_v1alpha1_only_kubelet_gives_devices_without_topology():
    profile = small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}}], pods=[
        {"namespace": "ns", "name": "p", "sidecars": [{"name": "side", "devices": {"r/x": 1}}],
         "containers": [{"name": "c", "cpus": 1, "devices": {"r/x": 2}}]}])
    async with Node(profile, faults=Faults(v1=False)) as node, \
            Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.value("podresources_kubelet_api_info", api_version="v1alpha1",
                       get_allocatable="false", get="false", pod_level="unknown") == 1
        assert s.value("podresources_node_info", node="test-node", kubelet_api="v1alpha1") == 1
        # v1alpha1 lists spec.containers only (no sidecars) and no topology
        assert s.by("podresources_devices_allocated", "numa_node", "resource") == \
            {("unknown", "r/x"): 2}
        assert not s.series("podresources_cpus_allocated")
        assert "podresources_misaligned_containers" not in s.families
        assert not s.series("podresources_container_numa_nodes")


async def test_kubelet_before_1_34_lists_terminated_pods():
    profile = small_profile(kubernetes_version="1.30", pods=[
        {"namespace": "ns", "name": "running", "containers": [{"name": "c", "cpus": 1}]},
        {"namespace": "ns", "name": "done", "phase": "Succeeded",
         "containers": [{"name": "c", "cpus": 1}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        # what the kubelet says is what is exported: both pods appear
        assert {dict(k)["pod"] for k in s.series("podresources_container_cpus")} == {
            "running", "done"}
        # 1.30: no pod-level fields and Get behind a disabled gate
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="false", pod_level="unknown") == 1


async def test_departed_pods_leave_metrics_with_the_next_refresh():
    profile = small_profile(pods=[
        {"namespace": "ns", "name": "stays", "containers": [{"name": "c", "cpus": 1}]},
        {"namespace": "ns", "name": "leaves", "containers": [{"name": "c", "cpus": 2}]}])
    async with Node(profile) as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
        assert s.series("podresources_container_cpus", pod="leaves")
        node.simulator.state.remove("ns", "leaves")
        s = await exporter.wait_for(
            lambda s: not s.series("podresources_container_cpus", pod="leaves"),
            what="departed pod to vanish")
        assert s.series("podresources_container_cpus", pod="stays")
        assert sum(s.by("podresources_cpus_allocated", "numa_node").values()) == 1


async def test_workload_and_device_info_switches():
    async with Node("dual-socket-gpu") as node:
        settings = node.settings()
        settings.render = type(settings.render)(workload_metrics=True, device_info=False)
        async with Exporter(settings) as exporter:
            s = await exporter.ready()
            assert not s.series("podresources_device_info")
            assert not s.series("podresources_dra_device_info")
            assert s.series("podresources_container_cpus")
        settings.render = type(settings.render)(workload_metrics=False, device_info=True)
        async with Exporter(settings) as exporter:
            s = await exporter.ready()
            for family in s.families:
                assert not family.startswith(("podresources_container_", "podresources_pod_",
                                              "podresources_device_info",
                                              "podresources_dra_device_info")), family
            assert s.value("podresources_misaligned_containers") == 1


async def test_gb200_tray_numa_nodes_without_cpus():
    """34 NUMA nodes, CPUs on 0 and 1 only; the GPUs' HBM on 2, 10, 18 and 26. Policy none:
    the CPU manager takes whole cores from the NUMA node with the fewest free CPUs first
    (takeByTopologyNUMAPacked), the memory manager the lowest node with room, the device
    manager any device (here the lowest NUMA set first). Admitted in order: the trainer's 64
    CPUs, 384Gi and 8Gi of 2Mi pages, 2 GPUs and 2 VFs on node 0; llm-serve-0 takes node 0's 6
    CPUs left (66-71) and 10 of node 1, 96Gi on node 1 (39Gi left on 0), a GPU of node 1, a VF
    of node 0; llm-serve-1 (Pending) 16 CPUs, 96Gi and a GPU on node 1, a VF on 0; the
    terminating tokenizer 8 CPUs on node 1 and 32Gi on node 0."""
    async with Node("gb200-tray") as node, Exporter(node.settings()) as exporter:
        s = await exporter.ready()
    hbm = ("2", "10", "18", "26")
    cpus = s.by("podresources_numa_node_cpus", "numa_node")
    assert len(cpus) == 34 and cpus["0"] == cpus["1"] == 72
    assert {numa: n for numa, n in cpus.items() if numa not in ("0", "1")} == dict.fromkeys(
        map(str, range(2, 34)), 0)
    # 72 CPUs per Grace, 0-1 and 72-73 reserved; CPU-less nodes get no CPU series at all
    assert s.by("podresources_cpus_allocatable", "numa_node") == {"0": 70, "1": 70}
    # node 0: trainer 64 + llm-serve-0 6; node 1: llm-serve-0 10 + llm-serve-1 16 + the
    # terminating tokenizer 8 = 34 (the Succeeded tokenizer is not listed by a 1.36 kubelet)
    assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 70, "1": 34}
    assert util(s, "cpu") == {"0": 1.0, "1": pytest.approx(34 / 70)}
    # memory: 431Gi per Grace minus 8Gi reserved = 423Gi; 173Gi of HBM per GPU node; the MIG
    # ids have no memory, hence no block and no series
    assert s.by("podresources_memory_allocatable_bytes", "numa_node", memory_type="memory") == {
        "0": 423 * GiB, "1": 423 * GiB, **dict.fromkeys(hbm, 173 * GiB)}
    # node 0: 384 + 32 = 416Gi; node 1: 96 + 96 = 192Gi; HBM: true zeros
    assert s.by("podresources_memory_allocated_bytes", "numa_node", memory_type="memory") == {
        "0": 416 * GiB, "1": 192 * GiB, **dict.fromkeys(hbm, 0)}
    assert util(s, "memory") == {"0": pytest.approx(416 / 423), "1": pytest.approx(192 / 423),
                                 **dict.fromkeys(hbm, 0)}
    # 8192 x 2Mi = 16Gi per Grace; the trainer holds 8Gi
    assert util(s, "hugepages-2Mi") == {"0": 0.5, "1": 0}
    # GPUs 0-1 on node 0, 2-3 on node 1, all assigned (one to the Pending pod)
    gpu, vf = "nvidia.com/gpu", "nvidia.com/ib_vf"
    assert s.by("podresources_devices_allocatable", "numa_node", resource=gpu) == {"0": 2, "1": 2}
    assert s.by("podresources_devices_allocated", "numa_node", resource=gpu) == {"0": 2, "1": 2}
    assert s.by("podresources_devices_allocated_unavailable", "numa_node", resource=gpu) == {
        "0": 0, "1": 0}
    assert util(s, gpu) == {"0": 1.0, "1": 1.0}
    # VFs: 8 per Grace; trainer 2 and one per inference pod, all on node 0
    assert util(s, vf) == {"0": 0.5, "1": 0}
    assert s.by("podresources_container_cpus", "pod", "numa_node", namespace="inference") == {
        ("llm-serve-0", "0"): 6, ("llm-serve-0", "1"): 10, ("llm-serve-1", "1"): 16}
    assert s.by("podresources_dra_device_info", "pod", "device") == {
        ("pretrain-worker-7", "channel-0"): 1}
    # both inference servers (a VF on node 0) and the tokenizer (memory on node 0)
    assert s.value("podresources_misaligned_containers") == 3
    assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                   get="true", pod_level="unknown") == 1
    assert sum(s.by("podresources_data_issues_total", "kind").values()) == 0


def util(scrape, resource: str) -> dict[str, float]:
    return scrape.by("podresources_numa_utilization_ratio", "numa_node", resource=resource)
