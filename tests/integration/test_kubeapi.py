"""The Kubernetes-API view (--kube-api): what the exporter reports from the real API server.

The session's control plane (tests/controlplane: kube-apiserver 1.37 on an embedded etcd,
fixture ``api``): the exporter reads it as user ``podresources-exporter`` (a client certificate,
the view's rules) through ``$KUBECONFIG``; the test writes as the admin. The kubelet side is the
simulator, as everywhere else. Here: the figures the view adds (use, staleness, DRA capacity)
as the docs list them, and the exporter process with the view on; on the fake API server
(``fake_api``), the fallbacks to older or absent ResourceSlice APIs, which kube-apiserver 1.37
cannot be made to serve. The protocol's hard cases are in test_kubeapi_watch.py, where the API
is and who the exporter is to it in test_kubeapi_access.py, the view off or set up wrong in
test_kubeapi_setup.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import pytest

from exporter.commands.snapshot import snapshot

from ..support.docs import assert_live_matches_docs
from ..support.harness import (
    REPO,
    Exporter,
    Node,
    free_port,
    scrape_port_until,
    small_profile,
    terminate,
)
from ..support.kubeapi import (
    AKRI_A,
    AKRI_B,
    DONGLE,
    GPU_DRA,
    NODE,
    cluster,
    kubelet_profile,
    synced,
    until,
)
from ..support.kubeobjects import container, node, pod, resource_slices
from ..support.prometheus import check_metrics


async def test_view_reports_use_staleness_and_dra_capacity(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(synced, what="the view to sync")
        resources = {DONGLE: 4, AKRI_A: 0, AKRI_B: 0, "nvidia.com/gpu": 2, "intel.com/qat": 8}
        assert s.by("podresources_extended_resource_capacity", "resource") == resources
        assert s.by("podresources_extended_resource_allocatable", "resource") == resources
        # trainer 1 + etl max(main 1 + proxy 1, fetch 2 + proxy 1) = 3; done and elsewhere: 0
        assert s.by("podresources_extended_resource_requested", "resource") == {
            DONGLE: 4, AKRI_A: 0, AKRI_B: 0, "nvidia.com/gpu": 1, "intel.com/qat": 0}
        # Akri: capacity 0; QAT: no healthy device and nothing requested; the dongle is used,
        # the GPUs have healthy devices
        assert s.by("podresources_extended_resource_stale", "resource") == {
            DONGLE: 0, AKRI_A: 1, AKRI_B: 1, "nvidia.com/gpu": 0, "intel.com/qat": 1}
        assert s.by("podresources_dra_devices_allocatable", "driver", "pool") == {
            (GPU_DRA, NODE): 3, ("nic.example.com", "nics"): 4}
        assert s.by("podresources_kube_api_errors_total", "resource") == {
            "node": 0, "pods": 0, "resourceslices": 0, "devicetaintrules": 0}
        # the kubelet side is untouched
        assert s.by("podresources_devices_allocated", "numa_node", resource="nvidia.com/gpu") \
            == {"0": 1}
    # node-scoped: every list and watch selected this node, resource.k8s.io/v1 was enough
    assert {(path, query.get("fieldSelector", "")) for path, query in api.requests} == {
        ("/api/v1/nodes", f"metadata.name={NODE}"), ("/api/v1/pods", f"spec.nodeName={NODE}"),
        ("/apis/resource.k8s.io/v1/resourceslices", f"spec.nodeName={NODE}"),
        ("/apis/resource.k8s.io/v1/devicetaintrules", "")}  # cluster-scoped


async def test_live_metrics_with_the_view_on_match_the_docs(api):
    async with Node("dual-socket-gpu") as kubelet:
        cluster(api, kubelet.spec.name)
        for obj in resource_slices(kubelet.spec):  # its drivers' devices, one of them tainted
            api.put("resourceslices", obj)
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view to sync")
    assert_live_matches_docs(s, {"node", "workload", "health", "kube-api"})


async def test_without_get_allocatable_only_zero_capacity_is_stale(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet:
        kubelet.simulator.faults.get_allocatable = "disabled"
        async with Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view to sync")
            assert s.by("podresources_extended_resource_stale", "resource") == {
                DONGLE: 0, AKRI_A: 1, AKRI_B: 1, "nvidia.com/gpu": 0, "intel.com/qat": 0}


async def test_promtool_finds_no_fault_with_the_view_on(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        text = exporter.refresher.body(openmetrics=False)
    assert b"podresources_extended_resource_stale{" in text
    check_metrics(text)  # promtool of each Prometheus line


@pytest.mark.parametrize("served, used", [(("v1beta2", "v1beta1"), "v1beta2"),
                                          (("v1beta1",), "v1beta1")])
async def test_resource_slices_fall_back_to_older_versions(fake_api, caplog, served, used):
    api = fake_api
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    api.served_slice_versions = set(served)
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(synced, what="the view to sync")
        assert s.by("podresources_dra_devices_allocatable", "driver", "pool") == {
            (GPU_DRA, NODE): 3, ("nic.example.com", "nics"): 4}
    paths = [path for path, _ in api.requests if path.endswith("/resourceslices")]
    tried = ["v1", "v1beta2", "v1beta1"][:["v1", "v1beta2", "v1beta1"].index(used) + 1]
    assert paths[:len(tried)] == [f"/apis/resource.k8s.io/{v}/resourceslices" for v in tried]
    assert paths[len(tried):] == [f"/apis/resource.k8s.io/{used}/resourceslices"] * \
        (len(paths) - len(tried))  # the watch stays on the version found
    assert [r.getMessage() for r in caplog.records if "not served" in r.getMessage()
            and "devicetaintrules" not in r.getMessage()] == [
        f"Kubernetes API: resourceslices: resource.k8s.io/v1 is not served; using {used}"]


async def test_no_resource_slice_api_means_no_dra_series(fake_api, caplog):
    api = fake_api
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    api.served_slice_versions = set()
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(synced, what="the view to sync")
        assert not s.series("podresources_dra_devices_allocatable")
        assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
        assert s.value("podresources_kube_api_errors_total", resource="resourceslices") == 0
    assert sum("resourceslices: the API server serves none of resource.k8s.io" in r.getMessage()
               for r in caplog.records) == 1


async def test_terminated_pods_are_left_out_of_the_numa_figures(api, caplog):
    caplog.set_level(logging.WARNING, logger="exporter.refresh.loop")
    # a 1.30 kubelet still lists the finished pod; "static" is a static pod the API lacks
    profile = small_profile(kubernetes_version="1.30", pods=[
        {"namespace": "ns", "name": "running", "containers": [{"name": "c", "cpus": 1}]},
        {"namespace": "ns", "name": "done", "phase": "Succeeded",
         "containers": [{"name": "c", "cpus": 2}]},
        {"namespace": "ns", "name": "static", "containers": [{"name": "c", "cpus": 1}]}])
    api.put("nodes", node(NODE, {}))
    api.put("pods", pod("ns", "running", NODE, [container("c", {"cpu": "1"})]))
    api.put("pods", pod("ns", "done", NODE, [container("c", {"cpu": "2"})], phase="Succeeded"))
    async with Node(profile) as kubelet, Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(
            lambda s: s.get("podresources_data_issues_total", kind="terminated_pod", ) >= 2,
            what="two refreshes without the finished pod")
        assert {dict(k)["pod"] for k in s.series("podresources_container_cpus")} == {
            "running", "static"}
        assert sum(s.by("podresources_cpus_allocated", "numa_node").values()) == 2
        assert not s.series("podresources_extended_resource_capacity")  # none advertised
    assert sum("kubelet data issue terminated_pod" in r.getMessage()
               for r in caplog.records) == 1


async def test_exporter_process_with_the_view_stops_within_5_seconds(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(kubelet.socket),
            "--sysfs-root", str(kubelet.sysfs), "--listen-address", f"127.0.0.1:{port}",
            "--interval", "1", "--log-format", "json", cwd=REPO,
            env={"KUBECONFIG": api.write_kubeconfig(kubelet.dir / "kubeconfig").as_posix(),
                 "NODE_NAME": NODE, "PODRESOURCES_EXPORTER_KUBE_API": "true",
                 "PATH": "/usr/bin:/bin"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            scrape = await scrape_port_until(port, synced)
            assert scrape.value("podresources_extended_resource_requested", resource=DONGLE) == 4
        finally:
            elapsed = await terminate(proc)
        err = (await proc.stderr.read()).decode()
    assert proc.returncode == 0, err
    assert elapsed < 5.0
    messages = [json.loads(line)["msg"] for line in err.splitlines()]
    assert any(m.startswith("Kubernetes-API view: watching node test-node") for m in messages)


async def test_a_hanging_exec_plugin_does_not_hold_up_the_exit(api, control_plane, tmp_path):
    started = tmp_path / "plugin-started"
    hang = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(15)"
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": ["-c", hang], "interactiveMode": "Never"}})
    async with Node(kubelet_profile()) as kubelet:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(kubelet.socket),
            "--sysfs-root", str(kubelet.sysfs), "--listen-address", f"127.0.0.1:{port}",
            "--kube-api", "--node-name", NODE, cwd=REPO,
            env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            await scrape_port_until(port, lambda s: s.get("podresources_up") == 1)
            await until(started.exists, what="the plugin to run")
        finally:
            elapsed = await terminate(proc)
        err = (await proc.stderr.read()).decode()
    assert proc.returncode == 0, err
    assert elapsed < 5.0
    # no credentials, no request: the API server heard from no one but the test's admin
    assert {e["user"]["username"] for e in control_plane.audit(api.mark)} <= {
        "kubernetes-admin"}


async def test_a_one_off_snapshot_lists_the_current_state(api, capsys):
    """``snapshot --kube-api --no-pods-api`` reads once and watches nothing: its lists ask for
    the current state (no ``resourceVersion``), not the watch cache's, which may lag the
    writes just made and has no later watch to catch up with them."""
    cluster(api)
    async with Node(kubelet_profile()) as kubelet:
        settings = kubelet.settings(kube_api=True, pods_api=False)
        assert await snapshot(settings, "json", "info") == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["node"] == NODE
    lists = {path: query for path, query in api.requests
             if path in ("/api/v1/pods", "/api/v1/nodes") and query.get("watch") != "true"}
    assert sorted(lists) == ["/api/v1/nodes", "/api/v1/pods"]
    assert [query.get("resourceVersion") for query in lists.values()] == [None, None]
