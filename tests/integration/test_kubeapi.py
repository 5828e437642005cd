"""The Kubernetes-API view (--kube-api): the exporter's API client against a fake API server.

The fake (exporter/simulator/apiserver.py) speaks the list/watch protocol over HTTP, or HTTPS with
client certificates; the client finds it through ``$KUBECONFIG`` or, as in a pod, through
``KUBERNETES_SERVICE_HOST``/``PORT`` and a service-account directory. The kubelet side is the
simulator, as everywhere else.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from exporter.cli import main, parse_args
from exporter.kubeapi import config, reflector
from exporter.simulator import load_profile, write_sysfs
from exporter.simulator.apiserver import (
    FakeApiServer,
    container,
    node,
    pod,
    resource_slice,
    tls_context,
)
from exporter.simulator.slices import resource_slices

from ..support.docs import assert_live_matches_docs
from ..support.harness import (
    REPO,
    Exporter,
    Node,
    Scrape,
    free_port,
    scrape_port_until,
    small_profile,
    terminate,
)
from ..support.kubeconfig import PLUGIN, without_kubernetes
from ..support.pki import CA, server_pki
from ..support.prometheus import check_metrics

NODE = "test-node"
DONGLE = "example.com/dongle"
AKRI_A, AKRI_B = "akri.sh/zeroconf-a1b2c3", "akri.sh/zeroconf-d4e5f6"
GPU_DRA = "gpu.example.com"
VIEW_FAMILIES = {"podresources_extended_resource_capacity",
                 "podresources_extended_resource_allocatable",
                 "podresources_extended_resource_requested",
                 "podresources_extended_resource_stale", "podresources_dra_devices_allocatable",
                 "podresources_kube_api_up", "podresources_kube_api_errors"}


def _dongles(n: int, restart_policy: str | None = None, name: str = "c") -> dict:
    return container(name, {DONGLE: str(n), "cpu": "1"}, restart_policy)


# ---- against the fake API server ----------------------------------------------------------

@pytest.fixture
def quick_backoff(monkeypatch):
    """Back-off delays of 1 to 2 s, so recovery tests do not wait a minute."""
    monkeypatch.setattr(reflector, "BACKOFF_CAP_SECONDS", 2.0)


def kubelet_profile(**overrides) -> dict:
    """The simulated kubelet: two GPUs served by a device plugin, one pod holding one."""
    profile = small_profile(
        devices=[{"resource": "nvidia.com/gpu", "count": 2, "numa": [0]}],
        pods=[{"namespace": "ml", "name": "trainer",
               "containers": [{"name": "c", "cpus": 1, "devices": {"nvidia.com/gpu": 1}}]}])
    profile.update(overrides)
    return profile


def cluster(server: FakeApiServer, name: str = NODE) -> None:
    """The node as an operator knows it: a patched dongle resource, a dead Akri plugin's
    entries, a device plugin's GPUs, a QAT resource whose plugin is gone; pods using dongles
    (one through an init container and a sidecar; a finished one not counting); a DRA driver
    that published two generations of its pool, and a slice of another node."""
    server.put("nodes", node(name, {DONGLE: "4", AKRI_A: "0", AKRI_B: "0", "nvidia.com/gpu": "2",
                                    "intel.com/qat": "8"}))
    server.put("pods", pod("ml", "trainer", name, [container("c", {"nvidia.com/gpu": "1",
                                                                   DONGLE: "1"})]))
    server.put("pods", pod("ml", "etl", name, [_dongles(1, name="main")],
                           [_dongles(1, "Always", "proxy"), _dongles(2, name="fetch")]))
    server.put("pods", pod("ml", "done", name, [_dongles(2)], phase="Succeeded"))
    server.put("pods", pod("ml", "elsewhere", "other-node", [_dongles(3)]))
    server.put("resourceslices", resource_slice("old", name, GPU_DRA, name, ["g0"] * 8, 1))
    server.put("resourceslices", resource_slice("new-0", name, GPU_DRA, name, ["g0", "g1"], 2, 2))
    server.put("resourceslices", resource_slice("new-1", name, GPU_DRA, name, ["g2"], 2, 2))
    server.put("resourceslices", resource_slice("nics", name, "nic.example.com", "nics",
                                                ["n0", "n1", "n2", "n3"]))
    server.put("resourceslices", resource_slice("far", "other-node", GPU_DRA, "other-node",
                                                ["g0", "g1"]))


def synced(scrape: Scrape) -> bool:
    return scrape.by("podresources_kube_api_up", "resource") == {
        "node": 1, "pods": 1, "resourceslices": 1, "devicetaintrules": 1} \
        and scrape.get("podresources_up") == 1


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
    assert {(path, query["fieldSelector"]) for path, query in api.requests} == {
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
async def test_resource_slices_fall_back_to_older_versions(api, caplog, served, used):
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


async def test_no_resource_slice_api_means_no_dra_series(api, caplog):
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


async def test_watch_events_update_the_metrics(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        lists = len(api.requests)
        # an operator removes the dead Akri entries and patches a second dongle board in
        api.put("nodes", node(NODE, {DONGLE: "8", "nvidia.com/gpu": "2", "intel.com/qat": "8"}))
        s = await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_capacity", resource=DONGLE) == 8,
            what="the node change")
        assert set(s.by("podresources_extended_resource_stale", "resource")) == {
            DONGLE, "nvidia.com/gpu", "intel.com/qat"}
        # a pod arrives, one finishes, one is deleted: 4 + 5 - 3 (etl) - 1 (trainer) = 5
        api.put("pods", pod("ml", "batch", NODE, [_dongles(5)]))
        api.put("pods", pod("ml", "etl", NODE, [_dongles(1, name="main")],
                            [_dongles(1, "Always", "proxy"), _dongles(2, name="fetch")],
                            phase="Failed"))
        api.delete("pods", "trainer", "ml")
        await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_requested", resource=DONGLE) == 5,
            what="the pod changes")
        # the DRA driver publishes generation 3 and retires the nic pool
        api.put("resourceslices", resource_slice("new-0", NODE, GPU_DRA, NODE,
                                                 ["g0", "g1", "g2", "g3"], 3))
        api.delete("resourceslices", "nics")
        s = await exporter.wait_for(
            lambda s: s.by("podresources_dra_devices_allocatable", "driver", "pool") == {
                (GPU_DRA, NODE): 4}, what="the slice changes")
        assert s.value("podresources_extended_resource_requested", resource=DONGLE) == 5
    assert len(api.requests) == lists  # events only: no list, no new watch


async def test_a_dropped_watch_resumes_from_the_last_version(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        api.put("pods", pod("ml", "batch", NODE, [_dongles(2)]))
        seen = api.resource_version
        await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_requested", resource=DONGLE) == 6,
            what="the new pod")
        assert api.drop_watches("pods") == 1
        api.put("pods", pod("ml", "late", NODE, [_dongles(1)]))  # while the watch is down
        s = await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_requested", resource=DONGLE) == 7,
            what="the pod added while the watch was down")
        assert api.watches("pods")[-1]["resourceVersion"] == str(seen)
        assert len(api.watches("pods")) == 2
        assert [p for p, q in api.requests if p == "/api/v1/pods" and "watch" not in q] == [
            "/api/v1/pods"]  # resumed, not listed again
        assert s.value("podresources_kube_api_errors_total", resource="pods") == 1
        assert s.value("podresources_kube_api_up", resource="pods") == 1


async def test_a_watch_resumes_from_a_bookmark(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        api.bookmark("nodes")
        mark = api.resource_version
        assert api.end_watches("nodes") == 1  # as if its timeout had come
        deadline = time.monotonic() + 10
        while len(api.watches("nodes")) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert api.watches("nodes")[-1]["resourceVersion"] == str(mark)
        s = await exporter.scrape()
        assert s.value("podresources_kube_api_errors_total", resource="node") == 0


@pytest.mark.parametrize("gone_as_status", [False, True], ids=["error-event", "http-status"])
async def test_410_gone_lists_again(api, gone_as_status):
    api.gone_as_status = gone_as_status
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        # the watch breaks; meanwhile a pod goes and the server forgets the history
        api.delete("pods", "etl", "ml")
        api.compact()
        api.drop_watches("pods")
        s = await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_requested", resource=DONGLE) == 1,
            what="the re-list")
        pod_lists = [q for p, q in api.requests if p == "/api/v1/pods" and "watch" not in q]
        # first from the watch cache, then (the cache may lag) the current state
        assert [q.get("resourceVersion") for q in pod_lists] == ["0", None]
        assert api.watches("pods")[-1]["resourceVersion"] == str(api.resource_version)
        # the broken connection is an error; the expiry is not
        assert s.value("podresources_kube_api_errors_total", resource="pods") == 1


async def test_a_busy_node_is_listed_in_pages(api):
    api.put("nodes", node(NODE, {DONGLE: "400"}))
    for index in range(250):
        api.put("pods", pod("batch", f"job-{index}", NODE, [_dongles(1)]))
    api.expire_next_continue = True  # the first list's second page comes too late
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(synced, what="the view to sync")
        assert s.value("podresources_extended_resource_requested", resource=DONGLE) == 250
    pages = [(q.get("resourceVersion"), "continue" in q, q["limit"])
             for p, q in api.requests if p == "/api/v1/pods" and "watch" not in q]
    # 410 on the continued page: the list starts over, reading the current state
    assert pages == [("0", False, "100"), (None, True, "100"),
                     (None, False, "100"), (None, True, "100"), (None, True, "100")]
    assert s.value("podresources_kube_api_errors_total", resource="pods") == 0


async def test_unreachable_api_keeps_the_last_values(api, caplog, quick_backoff):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        before = await exporter.wait_for(synced, what="the view to sync")
        await api.stop()
        s = await exporter.wait_for(
            lambda s: s.by("podresources_kube_api_up", "resource") == {
                "node": 0, "pods": 0, "resourceslices": 0, "devicetaintrules": 0}
            and s.get("podresources_kube_api_errors_total", resource="node") >= 3,
            what="the view to notice, and retry")
        for name in ("podresources_extended_resource_capacity",
                     "podresources_extended_resource_requested",
                     "podresources_extended_resource_stale",
                     "podresources_dra_devices_allocatable"):
            assert s.series(name) == before.series(name), name
        # the kubelet refresh goes on regardless
        assert s.value("podresources_up") == 1
        refreshed = s.value("podresources_last_refresh_timestamp_seconds")
        assert refreshed > before.value("podresources_last_refresh_timestamp_seconds")
        await api.start()
        await exporter.wait_for(synced, timeout=15, what="the view to come back")
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for r, m in zip(caplog.records, messages) if r.name.startswith("urllib3")]
    for resource in ("node", "pods", "resourceslices"):  # one line per state change
        assert sum(m.startswith(f"Kubernetes API: {resource} unreachable") for m in messages) == 1
        assert sum(m.startswith(f"Kubernetes API: {resource} reachable again")
                   for m in messages) == 1


async def test_failures_never_loop_tightly(api, quick_backoff):
    cluster(api)
    api.fail_status = 500
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.ready()
        await asyncio.sleep(3)
        s = await exporter.scrape()
        # attempts at least 1 s apart: at most 4 in 3 s
        for path in ("/api/v1/nodes", "/api/v1/pods"):
            assert 1 <= sum(p == path for p, _ in api.requests) <= 4, api.requests
        assert s.value("podresources_kube_api_errors_total", resource="node") == \
            sum(p == "/api/v1/nodes" for p, _ in api.requests)
        assert s.value("podresources_kube_api_up", resource="node") == 0
        assert not s.series("podresources_extended_resource_capacity")
        # lists succeed, every watch answers 410: list again once at once, then back off
        api.fail_status = None
        api.compacted = 10**9
        await exporter.wait_for(lambda s: s.get("podresources_kube_api_up", resource="node") == 1,
                                what="a list to succeed")
        started = len(api.requests)
        await asyncio.sleep(3)
        assert sum(p == "/api/v1/nodes" and "watch" not in q
                   for p, q in api.requests[started:]) <= 4


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


async def test_a_hanging_exec_plugin_does_not_hold_up_the_exit(api, tmp_path):
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
    assert api.requests == []  # no credentials, no request

# ---- where the API is and who the exporter is to it --------------------------------------

RESOURCES = ("node", "pods", "resourceslices", "devicetaintrules")
COLLECTIONS = ("nodes", "pods", "resourceslices", "devicetaintrules")


def all_up(value: int):
    return lambda s: s.by("podresources_kube_api_up", "resource") == dict.fromkeys(RESOURCES,
                                                                                   value)


async def until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def project(directory: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` as the kubelet writes a projected service-account volume: into a new
    directory, then the ``..data`` link swapped to it at once; each name links through
    ``..data``, so a reader sees the old files or the new ones, never a mix."""
    directory.mkdir(exist_ok=True)
    stamp = directory / f"..{time.time_ns()}"
    stamp.mkdir()
    for name, data in files.items():
        (stamp / name).write_bytes(data)
    (directory / "..data_tmp").symlink_to(stamp.name)
    os.replace(directory / "..data_tmp", directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@pytest.fixture
def pki(tmp_path):
    """A cluster CA and the API server's certificate (for localhost and 127.0.0.1)."""
    return server_pki(tmp_path, "cluster-ca", "apiserver")


async def status_without_credentials(server: FakeApiServer, ca: CA, **headers: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(
            server.url + "/api/v1/nodes", headers=headers,
            ssl=ssl.create_default_context(cafile=ca.path)) as response:
        return response.status


async def test_in_cluster_a_renewed_token_is_used_from_the_next_request(
        tmp_path, monkeypatch, pki, quick_backoff, caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    ca, cert, key = pki
    account = tmp_path / "serviceaccount"
    project(account, {"token": b"token-1", "ca.crt": ca.path.read_bytes()})
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", account)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    server = FakeApiServer(tokens={"token-1"}, ssl_context=tls_context(cert, key))
    await server.start()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync over TLS")
            # the kubelet renews the token; the API server takes only the new one from now on
            project(account, {"token": b"token-2", "ca.crt": ca.path.read_bytes()})
            server.tokens = {"token-2"}
            renewed = len(server.identities)
            assert server.end_watches() == 4
            await until(lambda: all(len(server.watches(c)) == 2 for c in COLLECTIONS),
                        what="the watches to resume")
            assert server.identities[renewed:] == ["token:token-2"] * 4
            assert server.rejected == []
            assert await status_without_credentials(
                server, ca, Authorization="Bearer token-1") == 401
            s = await exporter.scrape()
            assert s.by("podresources_kube_api_errors_total", "resource") == dict.fromkeys(
                RESOURCES, 0)
            # a token that expired before the file was renewed: 401s until it is
            server.tokens = {"token-3"}
            server.end_watches()
            s = await exporter.wait_for(all_up(0), what="the view to notice the 401s")
            assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
            project(account, {"token": b"token-3", "ca.crt": ca.path.read_bytes()})
            await exporter.wait_for(synced, timeout=15, what="the view back with the new token")
    finally:
        await server.stop()
    assert {authorization for _, authorization in server.rejected} == {
        "Bearer token-1", "Bearer token-2"}
    assert server.identities[-1] == "token:token-3"
    messages = [r.getMessage() for r in caplog.records]
    for resource in RESOURCES:
        assert messages.count(f"Kubernetes API: {resource} unreachable (HTTP 401 Unauthorized: "
                              "Unauthorized); retrying with back-off, keeping the last "
                              "values") == 1
        assert messages.count(f"Kubernetes API: {resource} reachable again; watching") == 1


@pytest.mark.parametrize("as_data", [True, False], ids=["data", "files"])
async def test_a_client_certificate_over_tls(tmp_path, monkeypatch, pki, as_data):
    ca, cert, key = pki
    client_cert, client_key = ca.issue("podresources-exporter", client=True)
    server = FakeApiServer(tokens=(), client_names={"podresources-exporter"},
                           ssl_context=tls_context(cert, key, client_ca=ca.path))
    await server.start()
    if as_data:
        user = {"client-certificate-data": b64(client_cert),
                "client-key-data": b64(client_key)}
        cluster_fields = {"certificate-authority-data": b64(ca.path)}
    else:  # paths relative to the kubeconfig's directory
        user = {"client-certificate": client_cert.name, "client-key": client_key.name}
        cluster_fields = {"certificate-authority": ca.path.name}
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(
        tmp_path / "kubeconfig", user, cluster_fields)))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(synced, what="the view to sync")
            assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
        assert await status_without_credentials(server, ca) == 401  # the certificate counts
    finally:
        await server.stop()
    assert set(server.identities) == {"cert:podresources-exporter"}
    assert server.rejected == [("/api/v1/nodes", "")]


async def test_an_untrusted_server_certificate_is_reported_clearly(tmp_path, monkeypatch, pki,
                                                                   caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    _, cert, key = pki
    other = CA(tmp_path, "other-ca")
    server = FakeApiServer(ssl_context=tls_context(cert, key))
    await server.start()
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(
        tmp_path / "kubeconfig", cluster={"certificate-authority": str(other.path)})))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            s = await exporter.wait_for(
                lambda s: s.get("podresources_kube_api_errors_total", resource="node") >= 1
                and s.get("podresources_up") == 1, what="the failed handshake")
            assert s.value("podresources_kube_api_up", resource="node") == 0
            assert not s.series("podresources_extended_resource_capacity")
    finally:
        await server.stop()
    assert server.identities == []
    assert (f"Kubernetes API: node unreachable (TLS: the API server's certificate at "
            f"{server.url} cannot be verified (unable to get local issuer certificate); check "
            "the certificate authority the configuration names); retrying with back-off, "
            "keeping the last values") in [r.getMessage() for r in caplog.records]


async def test_an_exec_plugin_kubeconfig_with_the_kube_extra(tmp_path, monkeypatch,
                                                             quick_backoff):
    runs = tmp_path / "runs"
    server = FakeApiServer(tokens={"exec-token"})
    await server.start()
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(tmp_path / "kubeconfig", {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                 "args": ["-c", PLUGIN, str(runs), json.dumps({"token": "exec-token"})],
                 "interactiveMode": "Never"}})))
    cluster(server)
    try:
        async with Node(kubelet_profile()) as kubelet, \
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(synced, what="the view to sync")
            assert runs.read_text() == "1"  # one run serves all three watches
            # the server refuses the token: the plugin runs again for the next request
            server.tokens = set()
            server.end_watches()
            await exporter.wait_for(all_up(0), what="the 401s")
            server.tokens = {"exec-token"}
            await exporter.wait_for(synced, timeout=15, what="the view back")
    finally:
        await server.stop()
    assert int(runs.read_text()) >= 2
    assert set(server.identities) == {"token:exec-token"}


# ---- switched off, and set up wrong -------------------------------------------------------

VIEW_OFF = """
import asyncio, sys
from tests.support.harness import Exporter, Node, small_profile

async def main():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        scrape = await exporter.ready()
    print(sorted(scrape.families))
    print("kubernetes" in sys.modules)

asyncio.run(main())
"""


def test_view_off_exports_none_of_it_and_never_imports_kubernetes():
    result = subprocess.run([sys.executable, "-c", VIEW_OFF], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    families, imported = result.stdout.splitlines()
    assert "podresources_up" in families
    assert not any(name in families for name in VIEW_FAMILIES)
    assert imported == "False"


def test_the_flag_and_its_environment_twin():
    assert parse_args([], environ={}).kube_api is False
    assert parse_args(["--kube-api"], environ={}).kube_api is True
    assert parse_args([], environ={"PODRESOURCES_EXPORTER_KUBE_API": "true"}).kube_api is True


@pytest.fixture
def sysfs(tmp_path) -> str:
    return str(write_sysfs(load_profile("small"), tmp_path / "sys"))


def _exit_line(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_view_needs_a_node_name(capsys, monkeypatch, sysfs):
    monkeypatch.delenv("NODE_NAME", raising=False)
    err = _exit_line(["--kube-api", "--sysfs-root", sysfs, "--listen-address", ":0"], capsys)
    assert "--kube-api needs the node name: set --node-name or NODE_NAME" in err


def test_the_view_needs_an_api_configuration(capsys, monkeypatch, sysfs):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    err = _exit_line(["--kube-api", "--node-name", NODE, "--sysfs-root", sysfs,
                      "--listen-address", ":0"], capsys)
    assert "--kube-api: no Kubernetes API configuration" in err


def test_an_exec_plugin_kubeconfig_without_the_kube_extra(capsys, monkeypatch, sysfs, tmp_path):
    without_kubernetes(monkeypatch)
    path = FakeApiServer().write_kubeconfig(tmp_path / "kubeconfig", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
        "args": ["eks", "get-token", "--cluster-name", "prod"]}})
    monkeypatch.setenv("KUBECONFIG", str(path))
    err = _exit_line(["--kube-api", "--node-name", NODE, "--sysfs-root", sysfs,
                      "--listen-address", ":0"], capsys)
    assert err.startswith(f"podresources-exporter: error: --kube-api: kubeconfig {path}: user "
                          "'exporter' gets its credentials from an exec credential plugin "
                          "(aws), which needs the kubernetes package (")
    assert err.endswith("); install podresources-exporter[kube]\n")


VIEW_ON = """
import asyncio, os, sys, tempfile
from pathlib import Path
from exporter.simulator.apiserver import FakeApiServer, node
from tests.support.harness import Exporter, Node, small_profile

async def main():
    async with FakeApiServer() as api:
        api.put("nodes", node("test-node", {"example.com/dongle": "4"}))
        os.environ["KUBECONFIG"] = str(api.write_kubeconfig(Path(tempfile.mkdtemp()) / "config"))
        async with Node(small_profile()) as kubelet, \\
                Exporter(kubelet.settings(kube_api=True)) as exporter:
            await exporter.wait_for(lambda s: s.get("podresources_extended_resource_capacity",
                                                    resource="example.com/dongle") == 4)
    print(sorted({m.split(".")[0] for m in sys.modules} & {"kubernetes", "urllib3", "requests"}))

asyncio.run(main())
"""


def test_the_view_on_a_plain_kubeconfig_never_imports_kubernetes():
    result = subprocess.run([sys.executable, "-c", VIEW_ON], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
