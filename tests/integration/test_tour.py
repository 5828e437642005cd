"""A new user's tour of routine kubelet events, through real processes and sockets.

``podresources-exporter demo`` runs the simulated kubelet (profile ``dual-socket-gpu``) and the
exporter; the simulator's control endpoint plays the kubelet's routine events; ``/metrics`` is
scraped over HTTP. None of these events is inconsistent data, so
``podresources_data_issues_total`` must not move; what changes is told by the metrics made for
it.

Figures worked out by hand from the profile, its pods placed as the kubelet places them
(tests/integration/test_integration.py): GPUs held on node 0 by llm-train-0 (4), on node 1 by
llm-infer-0 (2) and llm-infer-1 (1); one GPU on node 1 is unhealthy and free. Free CPUs: node 0
none (30 allocatable - 1 - 16 - 6 - 6 - 1), node 1 4 (32 - 8 - 8 - 4 - 2 - 4 - 2); free
memory: node 0 73.9375Gi, node 1 20Gi; free VFs: node 0 5, node 1 15. The pods request
60.3 of the Node's 62 allocatable CPUs (the resource-fit predicate counts every request;
dra-infer-0, rejected, holds nothing).
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp

from ..support.docs import assert_live_matches_docs
from ..support.harness import REPO, Scrape, free_port, scrape_port_until, terminate
from ..support.prometheus import check_metrics

GPU = "nvidia.com/gpu"
INTERVAL, ALLOCATABLE_INTERVAL = 1.0, 3.0


def issue_total(scrape: Scrape) -> float:
    return sum(scrape.by("podresources_data_issues_total", "kind").values())


def gpus_unavailable(scrape: Scrape) -> dict[str, float]:
    return scrape.by("podresources_devices_allocated_unavailable", "numa_node", resource=GPU)


def api_info(scrape: Scrape) -> tuple[str, ...] | None:
    (labels,) = scrape.series("podresources_kubelet_api_info") or (None,)
    if labels is None:
        return None
    d = dict(labels)
    return (d["api_version"], d["get_allocatable"], d["get"], d["pod_level"])


async def test_routine_kubelet_events_raise_no_false_alarm():
    port, control = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", f"127.0.0.1:{port}",
        "--control-address", f"127.0.0.1:{control}", "--interval", str(INTERVAL),
        "--allocatable-interval", str(ALLOCATABLE_INTERVAL), cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    scrapes: list[Scrape] = []
    timings: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{control}"

            async def until(predicate, what: str) -> Scrape:
                return await scrape_port_until(port, predicate, 30.0, what, seen=scrapes)

            async def post(path: str, body: dict) -> None:
                async with session.post(base + path, json=body) as response:
                    assert response.status == 200, await response.text()

            start = await until(lambda s: s.get("podresources_up") == 1
                                and gpus_unavailable(s), "the demo up")
            scrapes.clear()  # from here on, no data issue may appear
            assert gpus_unavailable(start) == {"0": 0, "1": 0}
            assert api_info(start) == ("v1", "true", "true", "true")

            # 1. the GPU device plugin disconnects: every assigned GPU becomes unavailable
            await post("/faults", {"plugin_disconnect": GPU})
            away = await until(lambda s: gpus_unavailable(s) == {"1": 3, "0": 4},
                               "GPUs unavailable")
            assert not away.series("podresources_devices_allocatable", resource=GPU)
            assert not away.series("podresources_numa_utilization_ratio", resource=GPU)
            await post("/faults", {"plugin_disconnect": ""})
            back = await until(lambda s: gpus_unavailable(s) == {"0": 0, "1": 0}
                               and s.series("podresources_devices_allocatable", resource=GPU),
                               "the GPU plugin back")
            # node 0: 4 of 4; node 1: 3 held of 3 healthy
            assert back.by("podresources_numa_utilization_ratio", "numa_node", resource=GPU) \
                == {"0": 1.0, "1": 1.0}

            # 2. an old kubelet (v1alpha1 only), upgraded in place: no exporter restart
            await post("/faults", {"v1": False, "get_allocatable": "unimplemented"})
            old = await until(lambda s: api_info(s) == ("v1alpha1", "false", "false", "unknown"),
                              "the fallback to v1alpha1")
            assert old.by("podresources_devices_allocated", "numa_node", resource=GPU) == {
                "unknown": 7}  # no topology in v1alpha1
            await post("/faults", {"v1": True, "get_allocatable": "ok"})
            upgraded_at = time.monotonic()
            upgraded = await until(lambda s: api_info(s) == ("v1", "true", "true", "true")
                                   and gpus_unavailable(s) == {"0": 0, "1": 0},
                                   "the upgraded kubelet used fully")
            timings["upgrade picked up (s)"] = time.monotonic() - upgraded_at
            assert upgraded.by("podresources_devices_allocated", "numa_node", resource=GPU) == {
                "0": 4, "1": 3}

            # 3. a restart shorter than --interval, coming back without Get: only the
            #    re-created socket tells; its device plugins register again 3 s later
            await post("/faults", {"get": "unimplemented"})
            await post("/restart", {"downtime": 0.1})
            restarted = await until(lambda s: api_info(s) == ("v1", "true", "false", "true"),
                                    "the restart noticed")
            await until(lambda s: gpus_unavailable(s) == {"0": 0, "1": 0}
                        and s.series("podresources_devices_allocatable", resource=GPU),
                        "plugins registered after the restart")

            # 4. would the kubelet admit one more pod of a shape? The demo ships four. By hand
            #    from the profile: dpdk-upf-small and inmem-cache fit NUMA node 1 (4 free CPUs,
            #    20Gi), but their 2 CPUs exceed the 1.7 CPUs the Node has left unrequested:
            #    OutOfcpu (the predicate runs after the Topology Manager); gpu-infer finds no
            #    free GPU; vf-pair (Burstable, 1 CPU requested) takes 12 of node 1's 15 VFs
            #    (node 0 has 5): admitted, on node 1 alone, and no second pod fits.
            shaped = await until(lambda s: s.series("podresources_shape_capacity"),
                                 "the demo's shapes")
            assert shaped.by("podresources_numa_free", "numa_node", resource="memory") == {
                "0": 73.9375 * (1 << 30), "1": 20 << 30}
            assert shaped.by("podresources_shape_admitted", "shape") == {
                "dpdk-upf-small": 0, "gpu-infer": 0, "inmem-cache": 0, "vf-pair": 1}
            assert shaped.by("podresources_shape_rejection_info", "shape", "reason",
                             "blocking_resource") == {
                ("dpdk-upf-small", "OutOfcpu", "cpu"): 1,
                ("gpu-infer", "TopologyAffinityError", GPU): 1,
                ("inmem-cache", "OutOfcpu", "cpu"): 1}
            assert shaped.by("podresources_shape_fits", "shape", "numa_node", shape="vf-pair") \
                == {("vf-pair", "0"): 0, ("vf-pair", "1"): 1}
            assert shaped.by("podresources_shape_capacity", "shape") == {
                "dpdk-upf-small": 0, "gpu-infer": 0, "inmem-cache": 0, "vf-pair": 1}
            assert shaped.by("podresources_shape_shortfall", "numa_node", shape="inmem-cache",
                             resource="memory") == {"0": 0, "1": 0}
            # 6 VFs more taken (on node 1, the only one with 6 free): 12 VFs no longer fit on
            # the two nodes container by container (5 and 3 left)
            await post("/pods", {"namespace": "demo", "name": "filler", "qos": "Burstable",
                                 "containers": [
                                     {"name": "c", "cpus": "500m",
                                      "devices": {"intel.com/sriov_netdevice": 6}}]})
            filled = await until(lambda s: s.get("podresources_shape_admitted",
                                                 shape="vf-pair") == 0, "VFs taken")
            assert filled.by("podresources_shape_rejection_info", "reason",
                             "blocking_resource", shape="vf-pair") == {
                ("TopologyAffinityError", "intel.com/sriov_netdevice"): 1}
            assert filled.value("podresources_shape_capacity", shape="vf-pair") == 0
            # a pod asking for a GPU is rejected at admission: no NUMA node has a free GPU
            async with session.post(base + "/pods", json={
                    "namespace": "demo", "name": "gpu-job", "containers": [
                        {"name": "c", "cpus": 1, "memory": "1Gi",
                         "devices": {GPU: 1}}]}) as response:
                assert response.status == 409
                assert (await response.json())["reason"] == "TopologyAffinityError"
            # counted with the profile's own: dra-infer-0 (its GPU served by DRA, yet the
            # device manager wants a free plugin GPU on one NUMA node)
            await until(lambda s: s.by("podresources_admission_failures_total", "reason",
                                       "blocking_resource") == {
                                           ("TopologyAffinityError", GPU): 2},
                        "the rejection counted")
            async with session.get(base + "/state") as response:
                state = await response.json()
        text = scrapes[-1].text
    finally:
        await terminate(proc)
    log = (await proc.stderr.read()).decode()
    print(timings)
    assert proc.returncode == 0
    assert state["restarts"] == 1
    assert restarted.value("podresources_up") == 1
    # a refresh that happens to land in the 0.1 s gap finds no socket and learns of the restart
    # from the failure ("unreachable", then "reachable again"); otherwise no call failed and
    # only the re-created socket told
    failed_lists = restarted.get("podresources_api_requests_total", method="List",
                                 code="UNAVAILABLE") or 0
    assert log.count("was re-created (kubelet restarted)") == (0 if failed_lists else 1), log
    # the whole tour: not one data issue but the one the old kubelet's List makes with the
    # demo's Kubernetes API watching: batch/etl-job-28391-x7k2p is Succeeded in the API and a
    # kubelet before 1.34 (the v1alpha1-only stage) still lists it (terminated_pod)
    kinds = {kind for s in scrapes
             for kind, count in s.by("podresources_data_issues_total", "kind").items() if count}
    assert kinds <= {"terminated_pod"}, kinds
    # the exposition stays valid and documented (the demo runs no Kubernetes-API view)
    assert_live_matches_docs(scrapes[-1], {"node", "workload", "health", "fit"})
    assert "pod demo/gpu-job was rejected at admission (TopologyAffinityError); blocking " \
           "resource nvidia.com/gpu: the kubelet would reject it with TopologyAffinityError " \
           "under Topology Manager policy single-numa-node, scope container: no NUMA set the " \
           "policy allows has enough nvidia.com/gpu" in log
    check_metrics(text)  # promtool of each Prometheus line
