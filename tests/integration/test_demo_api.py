"""The demo's rejections through the simulated kubelet's Pods API: a pod the simulated kubelet
rejects is failed there with the kubelet's reason, counted by the exporter, and explained by
the ``snapshot --why`` command the demo prints, with no cluster and no Kubernetes API for pods
(the demo's small API server shows only the node and its ResourceSlices)."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys

import aiohttp

from ..support.harness import REPO, free_port, scrape_port_until, terminate


async def test_demo_serves_its_rejections_through_the_kubelets_pods_api():
    port, control = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", f"127.0.0.1:{port}",
        "--control-address", f"127.0.0.1:{control}", "--interval", "0.5", cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        hint = ""
        while "--why" not in hint:
            hint = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert hint, "the demo ended before printing how to ask snapshot --why"
        command = shlex.split(hint.split("rejected with: ", 1)[1])
        assert command[0] == "podresources-exporter" and "--pods-api-socket" in command
        assert command[-2:] == ["--why", "NAMESPACE/POD"]

        # dual-socket-gpu as the kubelet placed its pods: node 0 has memory left (73.9Gi) but
        # no free CPU, node 1 has 4 free CPUs but 20Gi of memory
        async with aiohttp.ClientSession() as session, session.post(
                f"http://127.0.0.1:{control}/pods", json={
                    "namespace": "demo", "name": "db-client",
                    "containers": [{"name": "c", "cpus": 1, "memory": "32Gi"}]}) as response:
            assert response.status == 409
            assert (await response.json())["reason"] == "TopologyAffinityError"
        await scrape_port_until(port, lambda s: s.series(
            "podresources_admission_failure_info", namespace="demo", pod="db-client",
            reason="TopologyAffinityError"),
            30.0, "the rejection seen through the Pods API")
        scrape = await scrape_port_until(port, lambda s: True)
        assert scrape.series("podresources_pods_source_info") == {
            (("pods_api", "watching"), ("source", "pods_api")): 1}
        # no Kubernetes API server in the demo: the Node's allocatable is derived from sysfs and
        # the kubelet config file, and said so
        assert scrape.series("podresources_kube_api_up") == {}
        assert scrape.series("podresources_shape_assumption_info",
                             assumption="node_allocatable_derived")

        environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        why = subprocess.run(
            [sys.executable, "-m", "exporter", *command[1:-1], "demo/db-client"],
            env=environ, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert why.returncode == 0, why.stderr
        assert why.stdout.startswith(
            "Pod demo/db-client (Guaranteed): rejected at admission: TopologyAffinityError (Pod "
            "was rejected: Resources cannot be allocated with Topology locality)\n"), why.stdout
        assert "Container c: cpu=1, memory=32Gi -> not placed" in why.stdout
        # the exporter's model says why: each alone fits a node, but not on the same one
        assert ("Verdict: the kubelet would reject it with TopologyAffinityError under Topology "
                "Manager policy single-numa-node, scope container: no NUMA set the policy "
                "allows holds 1 CPU and 32Gi of memory together.") in why.stdout
    finally:
        await terminate(proc)
