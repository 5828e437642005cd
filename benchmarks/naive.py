"""The naive design, as a baseline for the benchmark: global gauges, rendered on every scrape.

This is how a first exporter is usually written with ``prometheus_client``: module-level
``Gauge`` objects, cleared and set again from a full recomputation on every refresh, and
``generate_latest(REGISTRY)`` on every scrape. It uses the product's own kubelet client and
accounting, so the comparison isolates the design (incremental refresh, rendering once per
refresh) rather than the rules.

    python -m benchmarks.naive --socket S --sysfs-root D --listen-address 127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from aiohttp import web
from prometheus_client import REGISTRY, Gauge
from prometheus_client.exposition import choose_encoder

from exporter._proto.v1 import api_pb2 as v1
from exporter.accounting import account
from exporter.catalog import CATALOG
from exporter.kubelet.client import KubeletClient
from exporter.kubelet.convert import allocatable_from_v1, pod_from_v1
from exporter.model import KubeletSnapshot
from exporter.topology import read_topology

GAUGES = {m.name: Gauge(m.name, m.help, list(m.labels)) for m in CATALOG
          if m.type == "gauge" and m.group in ("node", "workload")
          and m.name not in ("podresources_node_info", "podresources_dra_device_info")}


def naive_refresh(list_raw: bytes, allocatable_raw: bytes, topology) -> None:
    """Decode everything, account from scratch, clear and set every gauge."""
    pods = tuple(pod_from_v1(p) for p in v1.ListPodResourcesResponse.FromString(list_raw)
                 .pod_resources)
    allocatable = allocatable_from_v1(v1.AllocatableResourcesResponse.FromString(allocatable_raw))
    result = account(KubeletSnapshot(pods, allocatable), topology)
    for gauge in GAUGES.values():
        gauge.clear()
    values = {
        "podresources_numa_node_cpus": {(str(n.numa_id),): len(n.cpus)
                                        for n in topology.numa_nodes.values()},
        "podresources_cpus_allocatable": result.cpus_allocatable or {},
        "podresources_cpus_allocated": result.cpus_allocated or {},
        "podresources_memory_allocatable_bytes": result.memory_allocatable,
        "podresources_memory_allocated_bytes": result.memory_allocated,
        "podresources_devices_allocatable": result.devices_allocatable,
        "podresources_devices_allocated": result.devices_allocated,
        "podresources_numa_utilization_ratio": result.utilization,
        "podresources_dra_devices_allocated": result.dra_devices_allocated,
        "podresources_container_cpus": result.container_cpus,
        "podresources_container_memory_bytes": result.container_memory,
        "podresources_container_devices": result.container_devices,
        "podresources_container_numa_nodes": result.container_numa_nodes,
        "podresources_pod_cpus": result.pod_cpus,
        "podresources_pod_memory_bytes": result.pod_memory,
        "podresources_device_info": {row: 1 for row in result.device_info},
    }
    for name, series in values.items():
        gauge = GAUGES[name]
        for key, value in series.items():
            gauge.labels(*(key if isinstance(key, tuple) else (key,))).set(value)
    GAUGES["podresources_misaligned_containers"].set(result.misaligned_containers or 0)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--sysfs-root", required=True)
    parser.add_argument("--listen-address", default="127.0.0.1:0")
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args()
    topology = read_topology(args.sysfs_root)
    client = KubeletClient(args.socket)

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(REGISTRY), headers={"Content-Type": content_type})

    async def loop() -> None:
        while True:
            try:
                list_raw = (await client.list_pods()).raw
                allocatable_raw = (await client.get_allocatable()).raw
                naive_refresh(list_raw, allocatable_raw, topology)
            except Exception as error:  # a baseline keeps going
                print(f"naive refresh failed: {error}", file=sys.stderr)
            await asyncio.sleep(args.interval)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    host, _, port = args.listen_address.rpartition(":")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or None, int(port)).start()
    task = asyncio.create_task(loop())
    try:
        await asyncio.Event().wait()
    finally:
        task.cancel()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
