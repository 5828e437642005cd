"""The Kubernetes-API view's list and watch against a fake API server, in the protocol's hard
cases: events while watching, a dropped watch resuming from its last version or a bookmark,
410 Gone listing again, a busy node listed in pages, and an unreachable or failing API server
(the last values kept, no tight retry loop).
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from ..support.fakeapiserver.objects import node, pod, resource_slice
from ..support.harness import Exporter, Node
from ..support.kubeapi import DONGLE, GPU_DRA, NODE, cluster, dongles, kubelet_profile, synced


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


async def test_a_dropped_watch_resumes_from_the_last_version(api):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, what="the view to sync")
        api.put("pods", pod("ml", "batch", NODE, [dongles(2)]))
        seen = api.resource_version
        await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_requested", resource=DONGLE) == 6,
            what="the new pod")
        assert api.drop_watches("pods") == 1
        api.put("pods", pod("ml", "late", NODE, [dongles(1)]))  # while the watch is down
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
