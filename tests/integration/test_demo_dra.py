"""The demo as a newcomer runs it: its own Kubernetes API shows the dual-socket-gpu profile's
ResourceSlices, so /metrics has DRA devices per NUMA node (profile: dual-socket-gpu.json).

By hand from the profile: fpga-0 (driver's own numaNode 0) is prepared for encoder-0; fpga-3
(numaNode 1) is tainted NoSchedule; mlx5_0 (dra.net/numaNode 0) is shared by rdma-bench-0 and
rdma-probe-0; gpu-8 (numaNode list [0, 1]) is prepared for llm-infer-1, whose CPUs and memory
the kubelet put on node 1; gpu-9 (PCI address, sysfs numa_node 1) would serve dra-infer-0's
nvidia.com/gpu through DRA, but the kubelet rejected that pod (its device manager still wants a
free plugin GPU on one NUMA node), so nothing prepared it.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from ..support.harness import REPO, free_port, scrape_port_until


async def test_the_demo_shows_dra_devices_per_numa_node():
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", f"127.0.0.1:{port}",
        cwd=REPO, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        s = await scrape_port_until(
            port, lambda s: bool(s.series("podresources_dra_devices_allocatable"))
            and s.get("podresources_up") == 1.0, 30, "the demo's view to sync")
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 10)
    fpga = ("fpga.example.com", "gpu-node-01")
    assert s.by("podresources_dra_devices_allocated", "numa_node", driver=fpga[0]) == {
        "0": 1, "1": 0, "unknown": 0}
    # the tainted fpga-3 is outside allocatable, counted under its effect
    assert s.by("podresources_dra_devices_allocatable", "numa_node", driver=fpga[0]) == {
        "0": 1, "1": 1, "unknown": 1}
    assert s.by("podresources_dra_devices_tainted", "numa_node", "effect", driver=fpga[0]) == {
        ("1", "NoSchedule"): 1}
    # mlx5_0: one device, two shares
    assert s.by("podresources_dra_devices_allocated", "numa_node",
                driver="rdma.example.com") == {"0": 1, "1": 0}
    assert s.by("podresources_dra_device_shares", "numa_node", driver="rdma.example.com") == {
        "0": 2}
    # llm-infer-1: CPUs on node 1, its DRA GPU on node 0
    assert s.value("podresources_container_numa_nodes", namespace="ml", pod="llm-infer-1",
                   container="server") == 2
    assert s.by("podresources_dra_devices_allocated", "numa_node", driver="gpu.nvidia.com") == {
        "0": 1, "1": 0}
