"""Two simulated clusters scraped by a real Prometheus, for the proofs of the dashboards, rules
and alerts (tests/deploy/test_prometheus_proof.py, test_alerts_fire.py), on either Prometheus
line.

The clusters are told apart by the `cluster` target label, as a global view (Thanos, Mimir) or
a Prometheus' external labels give it:

- ``east``: ``gpu-node-01`` (profile ``dual-socket-gpu``: its pods placed as the kubelet places
  them, NUMA node 0's CPUs all held, three misaligned containers) and ``edge-node-01`` (profile
  ``small``);
- ``west``: a node also called ``gpu-node-01``, same profile, without pod ``ml/llm-infer-1``
  (8 exclusive CPUs and 1 GPU on NUMA node 1): same node name, different figures, so any query
  that adds up the two clusters shows.

A dcgm-exporter-shaped target per cluster serves ``DCGM_FI_DEV_*`` series for that cluster's GPU
node's GPUs (the same UUIDs in both clusters, different values), so the dashboards' GPU row has
data to join: east's with the names and labels of dcgm-exporter 4.10 (``hostname``, ratio and
bytes, pod attribution, the dra_* labels of a GPU NVIDIA's DRA driver prepared for a claim),
west's with those of 4.7 (``Hostname``, percent and MiB). A kubelet target per cluster serves the
kubelet's own CPU manager metric. Prometheus scrapes everything every
second with the chart's labelling (``node`` target label, ``honor_labels``) and loads a rules
file.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from exporter.simulator import load_profile

from .harness import Exporter, Node
from .kubeapi import ApiServer
from .kubeobjects import resource_slices
from .prometheus import Prometheus, scrape_job, tool
from .targets import DCGM_4_7, DCGM_4_10, DcgmTarget, Holder, KubeletTarget

GPU_NODE = "gpu-node-01"
EDGE_NODE = "edge-node-01"
EAST, WEST = "east", "west"
JOB = "podresources-exporter"
DCGM_JOB = "dcgm-exporter"
# Grafana's $__rate_interval for a 1 s scrape interval is 4 s; 10 s holds ~10 samples.
RATE_INTERVAL = "10s"
WEST_REMOVED = ("ml", "llm-infer-1")  # server: 8 CPUs, 32Gi and 1 GPU, all on NUMA node 1
# llm-infer-1's DRA GPU (pool gpu-node-01-dra, device gpu-8, claim "gpu", NUMA node 0: its
# ResourceSlice lists 0 and 1, its own node first): its UUID attribute in the profile.
# dcgm-exporter's DRA path attributes its series to the pod through the claim, with the DRA
# device's driver, pool and name, which the GPU row joins to the exporter's DRA device.
DRA_GPU = "GPU-5c1f0d3e-8a47-4b2e-9f61-0d2a7c3b9e15"
DRA_GPU_DEVICE = ("gpu-node-01-dra", "gpu-8")
# Every exporter's --fit-shapes. East: gpu-node-01 has 0 + 4 free CPUs and no free GPU,
# edge-node-01 3 free CPUs and no GPU at all: cpu4 fits once (gpu-node-01's node 1), gpu1
# nowhere. West's gpu-node-01 has 12 free CPUs and 1 free GPU on NUMA node 1: cpu4 three times,
# gpu1 once.
FIT_SHAPES = "shapes:\n  cpu4: {cpu: 4}\n  gpu1: {cpu: 1, nvidia.com/gpu: 1}\n"


def gpu_inventory() -> list[str]:
    """The GPUs of the dual-socket-gpu profile (its nvidia.com/gpu device ids, UUIDs)."""
    return [d.device_id for d in load_profile("dual-socket-gpu").devices
            if d.resource == "nvidia.com/gpu"]


def gpu_holders(node: Node) -> dict[str, Holder]:
    """Who holds each device-plugin GPU of a simulated node, as dcgm-exporter attributes it."""
    return {device_id: Holder(pod.spec.namespace, pod.spec.name, container.name)
            for pod in node.simulator.state.listed_pods(active_only=True)
            for container in pod.assignment.containers for entry in container.devices
            if entry.resource == "nvidia.com/gpu" for device_id in entry.device_ids}


@contextlib.asynccontextmanager
async def clusters(line: str, rules: Path, api: ApiServer | None = None):
    """Both simulated clusters, their exporters, the DCGM targets, and a Prometheus of ``line``
    with enough samples for rates. Yields (prometheus, nodes, exporters, dcgm), keyed by
    (cluster, node).

    With ``api`` (the real API server, ``$KUBECONFIG`` naming it: the fixture ``api``), the
    exporters also watch it, the GPU node's ResourceSlices published there (the same in both
    clusters): its DRA devices get their allocatable count, taints and NUMA nodes."""
    kube_api = api is not None
    binary = tool(line, "prometheus")
    gpus = gpu_inventory()
    async with contextlib.AsyncExitStack() as stack:
        if api is not None:
            for obj in resource_slices(load_profile("dual-socket-gpu")):
                api.put("resourceslices", obj)
        nodes = {
            (EAST, GPU_NODE): await stack.enter_async_context(Node("dual-socket-gpu")),
            (EAST, EDGE_NODE): await stack.enter_async_context(Node("small")),
            (WEST, GPU_NODE): await stack.enter_async_context(Node("dual-socket-gpu")),
        }
        assert nodes[WEST, GPU_NODE].simulator.state.remove(*WEST_REMOVED)
        shapes = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "shapes.yaml"
        shapes.write_text(FIT_SHAPES)
        exporters = {}
        for (cluster_name, name), node in nodes.items():
            assert node.spec.name == name
            exporters[cluster_name, name] = await stack.enter_async_context(
                Exporter(node.settings(interval=0.5, fit_shapes=str(shapes),
                                       kube_api=kube_api)))
            await exporters[cluster_name, name].ready()
        east_gpus = {**{uuid: 10 + i for i, uuid in enumerate(gpus)}, DRA_GPU: 99}
        dcgm = {
            EAST: await stack.enter_async_context(DcgmTarget(
                GPU_NODE, east_gpus, {uuid: 1000.0 * (i + 1) for i, uuid in enumerate(east_gpus)},
                DCGM_4_10, {**gpu_holders(nodes[EAST, GPU_NODE]), DRA_GPU: Holder(
                    *WEST_REMOVED, "server", "gpu", *DRA_GPU_DEVICE)})),
            WEST: await stack.enter_async_context(DcgmTarget(
                GPU_NODE, {uuid: 50 + i for i, uuid in enumerate(gpus)},
                {uuid: 20000.0 + 10 * i for i, uuid in enumerate(gpus)},
                DCGM_4_7, gpu_holders(nodes[WEST, GPU_NODE]))),
        }
        # gpu-node-01's kubelet: the exclusive CPUs List shows (east 30 + 28, west 30 + 20)
        # and 2 more on NUMA node 1 that a regular init container holds, which List never shows
        kubelets = {
            EAST: await stack.enter_async_context(KubeletTarget(GPU_NODE, {"0": 30, "1": 30})),
            WEST: await stack.enter_async_context(KubeletTarget(GPU_NODE, {"0": 30, "1": 22})),
        }
        prometheus = await stack.enter_async_context(Prometheus(binary, [
            # as the chart's monitors: keep namespace/pod/container, add node
            scrape_job(JOB, [(e.port, {"cluster": cluster_name, "node": name})
                             for (cluster_name, name), e in exporters.items()],
                       honor_labels=True),
            scrape_job(DCGM_JOB, [(t.port, {"cluster": name}) for name, t in dcgm.items()]),
            # as kube-prometheus-stack's kubelet ServiceMonitor
            scrape_job("kubelet", [(t.port, {"cluster": name}) for name, t in kubelets.items()],
                       honor_labels=True),
        ], [rules]))

        async def enough_samples():
            # >= 5 scrapes of each node inside the rate window, and the recording rules ran.
            scrapes = await prometheus.instant(
                f"count_over_time(podresources_up{{job=\"{JOB}\"}}[{RATE_INTERVAL}]) >= 5")
            recorded = await prometheus.instant("node:podresources_cpus_free:sum")
            gpu_series = await prometheus.instant(
                '{__name__=~"DCGM_FI_DEV_GPU_UTIL_RATIO|DCGM_FI_DEV_GPU_UTIL"}')
            # with the API view, both GPU nodes' ResourceSlices are seen (and recorded)
            dra = await prometheus.instant('node_resource:podresources_allocatable:sum'
                                           '{resource="gpu.nvidia.com"}') if kube_api else [1, 1]
            return (len(scrapes) == 3 and len(recorded) == 3 and len(dra) == 2
                    and len(gpu_series) == 2 * len(gpus) + 1)

        await prometheus.wait_until(enough_samples, "samples of every node")
        await prometheus.settled()  # and every other target, and the rules run on them all
        yield prometheus, nodes, exporters, dcgm
