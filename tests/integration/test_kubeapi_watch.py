"""The Kubernetes-API view's list and watch in the protocol's hard cases: on the real API server
(fixture ``api``), events while watching, an unreachable API server (the last values kept) and
one that refuses every request (no tight retry loop); on the fake (``fake_api``), what
kube-apiserver 1.37 does not do here: 410 Gone as a watch's HTTP status (it sends an ERROR
event), lists from resourceVersion 0 in pages and a continue token expiring (its watch cache
answers those lists whole, and continues from its snapshots even after a compaction), and
every watch answered 410. A dropped watch resuming, bookmarks and compaction on the real
server: test_controlplane_faults.py.
"""

from __future__ import annotations

import asyncio
import logging

from ..support.controlplane_api import Gate
from ..support.harness import Exporter, Node
from ..support.kubeapi import DONGLE, GPU_DRA, NODE, cluster, dongles, kubelet_profile, synced
from ..support.kubeobjects import node, pod, resource_slice
from ..support.pki import CA


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
        api.put("pods", pod("ml", "batch", NODE, [dongles(5)]))
        api.put("pods", pod("ml", "etl", NODE, [dongles(1, name="main")],
                            [dongles(1, "Always", "proxy"), dongles(2, name="fetch")],
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


async def test_410_gone_as_the_http_status_of_a_watch_lists_again(fake_api):
    api = fake_api
    api.gone_as_status = True
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


async def test_a_busy_node_is_listed_in_pages(fake_api):
    api = fake_api
    api.put("nodes", node(NODE, {DONGLE: "400"}))
    for index in range(250):
        api.put("pods", pod("batch", f"job-{index}", NODE, [dongles(1)]))
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


async def test_unreachable_api_keeps_the_last_values(api, control_plane, tmp_path, monkeypatch,
                                                     caplog, quick_backoff):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    gate = await Gate(control_plane.info["port"]).start()  # a load balancer's place
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(
        tmp_path / "through-gate", cluster={"server": f"https://127.0.0.1:{gate.address}"})))
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        # synced, and a refresh since (the view's figures come with the kubelet's refresh)
        before = await exporter.wait_for(
            lambda s: synced(s) and bool(s.series("podresources_dra_devices_allocatable")),
            what="the view to sync")
        gate.shut()  # every connection dropped, new ones refused
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
        gate.open()
        await exporter.wait_for(synced, timeout=15, what="the view to come back")
    await gate.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for r, m in zip(caplog.records, messages) if r.name.startswith("urllib3")]
    for resource in ("node", "pods", "resourceslices"):  # one line per state change
        assert sum(m.startswith(f"Kubernetes API: {resource} unreachable") for m in messages) == 1
        assert sum(m.startswith(f"Kubernetes API: {resource} reachable again")
                   for m in messages) == 1


async def test_refusals_never_loop_tightly(api, control_plane, tmp_path, monkeypatch,
                                           quick_backoff):
    # a user the API server knows (a client certificate of its CA) that no role binds:
    # every list is refused, 403
    cert, key = CA.load(tmp_path, control_plane.ca, control_plane.ca_key).issue(
        "unbound", client=True)
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(
        tmp_path / "unbound-kubeconfig", {"client-certificate": str(cert),
                                          "client-key": str(key)})))
    api.user = "unbound"
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.ready()
        await asyncio.sleep(3)
        s = await exporter.scrape()
    # attempts at least 1 s apart: at most 4 in 3 s
    for path in ("/api/v1/nodes", "/api/v1/pods"):
        assert 1 <= sum(p == path for p, _ in api.requests) <= 4, api.requests
    assert {e["responseStatus"]["code"] for e in api.events()} == {403}
    assert s.value("podresources_kube_api_errors_total", resource="node") == \
        sum(p == "/api/v1/nodes" for p, _ in api.requests)
    assert s.value("podresources_kube_api_up", resource="node") == 0
    assert not s.series("podresources_extended_resource_capacity")


async def test_a_watch_always_gone_never_loops_tightly(fake_api, quick_backoff):
    api = fake_api
    cluster(api)
    api.compacted = 10**9  # lists succeed, every watch answers 410
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(lambda s: s.get("podresources_kube_api_up", resource="node") == 1,
                                what="a list to succeed")
        started = len(api.requests)
        await asyncio.sleep(3)
    # list again once at once, then back off: at most 4 lists in 3 s
    assert sum(p == "/api/v1/nodes" and "watch" not in q
               for p, q in api.requests[started:]) <= 4
