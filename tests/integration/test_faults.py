"""Fault injection: the simulated kubelet misbehaves, /metrics and the health metrics stay true.

Each test drives a simulator fault switch and asserts on scraped metrics, on the simulator's own
call log (what the kubelet would have seen) and on the exporter's logs.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

import pytest

from exporter.simulator import Faults

from ..support.harness import Exporter, Node, small_profile
from ..support.prometheus import check_metrics

PODS = [{"namespace": "ns", "name": "a", "containers": [{"name": "c", "cpus": 2}]},
        {"namespace": "ns", "name": "b", "containers": [{"name": "c", "cpus": 1}]}]


def profile(**overrides):
    return small_profile(pods=PODS, **overrides)


class Watch:
    """Scrape every ``period`` seconds in the background, keeping every result."""

    def __init__(self, exporter: Exporter, period: float = 0.25):
        self.exporter = exporter
        self.period = period
        self.results: list[tuple[float, int, object]] = []  # (time, HTTP status, Scrape)
        self._task = None

    async def __aenter__(self):
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc):
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self):
        while True:
            async with self.exporter.session.get(self.exporter.url + "/metrics") as response:
                text = await response.text()
            from ..support.harness import Scrape
            self.results.append((time.monotonic(), response.status, Scrape(text)))
            await asyncio.sleep(self.period)

    @property
    def statuses(self) -> set[int]:
        return {status for _, status, _ in self.results}

    def values(self, name: str, **labels) -> list[float | None]:
        return [scrape.get(name, **labels) for _, _, scrape in self.results]


async def test_rate_limit_storm_backs_off_serves_the_last_snapshot_and_recovers(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.5)) as exporter:
        exporter.refresher.rng = random.Random(7)
        await exporter.ready()
        async with Watch(exporter) as watch:
            storm_start = time.monotonic()
            node.simulator.faults.rate_limit_storm = True
            await asyncio.sleep(20)
            node.simulator.faults.rate_limit_storm = False
            storm_end = time.monotonic()
            during = [r for r in watch.results if storm_start + 2 < r[0] < storm_end]
            scrape = await exporter.wait_for(lambda s: s.get("podresources_up") == 1.0,
                                             timeout=40, what="recovery after the storm")
            recovered = time.monotonic()
            await asyncio.sleep(2.2)  # normal cadence again
        calls_in_storm = node.simulator.stats.count(since=storm_start, until=storm_end)
        rejected = node.simulator.stats.count("List", "RESOURCE_EXHAUSTED")
        calls_after = node.simulator.stats.count("List", "OK", since=recovered)
    # the kubelet saw a handful of calls in 20 s, not a retry loop (seeded jitter: 5)
    assert 3 <= calls_in_storm <= 8, calls_in_storm
    assert watch.statuses == {200}
    for _, _, s in during:
        assert s.value("podresources_up") == 0
        assert s.value("podresources_backoff_seconds") >= 1.0
        # the last good snapshot keeps being served
        assert s.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
    assert max(watch.values("podresources_backoff_seconds")) > 2
    assert scrape.value("podresources_api_requests_total", method="List",
                        code="RESOURCE_EXHAUSTED") == rejected
    assert scrape.value("podresources_backoff_seconds") == 0
    assert 3 <= calls_after <= 6  # back to one List every 0.5 s
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.refresh.loop"]
    assert sum("rate limit hit" in m for m in messages) == 1
    assert sum("back-off ended" in m for m in messages) == 1


async def test_kubelet_restart_keeps_metrics_up_and_picks_up_new_data(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.3)) as exporter:
        await exporter.ready()
        async with Watch(exporter, period=0.1) as watch:
            restart = asyncio.create_task(node.simulator.restart(downtime=2.0))
            await asyncio.sleep(0.5)
            node.simulator.state.remove("ns", "b")  # changes while the kubelet is away
            await restart
            scrape = await exporter.wait_for(
                lambda s: s.get("podresources_up") == 1.0
                and not s.series("podresources_container_cpus", pod="b"),
                timeout=15, what="new data after the restart")
        ups = watch.values("podresources_up")
    assert watch.statuses == {200}
    assert 0.0 in ups and ups[0] == 1.0
    assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 2, "1": 0}
    assert scrape.value("podresources_api_requests_total", method="List", code="UNAVAILABLE") >= 1
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.refresh.loop"]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1


async def test_socket_missing_at_start_then_appearing():
    node = Node(profile())
    async with Exporter(node.settings(interval=0.3)) as exporter:
        await exporter.wait_for(lambda s: exporter.refresher.attempted, what="first refresh")
        assert (await exporter.get("/readyz")).status == 200
        scrape = await exporter.scrape()
        assert scrape.value("podresources_node_info", node="test-node", kubelet_api="none") == 1
        assert scrape.value("podresources_last_refresh_timestamp_seconds") == 0
        assert not scrape.series("podresources_cpus_allocated")
        await asyncio.sleep(1.5)
        async with node:
            scrape = await exporter.ready(timeout=15)
        assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
        assert scrape.value("podresources_node_info", node="test-node", kubelet_api="v1") == 1


@pytest.mark.parametrize("faults, labels", [
    (Faults(get="unimplemented"), dict(get_allocatable="true", get="false")),
    (Faults(get="disabled"), dict(get_allocatable="true", get="false")),
    (Faults(get_allocatable="unimplemented"), dict(get_allocatable="false", get="true")),
    (Faults(get_allocatable="disabled"), dict(get_allocatable="false", get="true")),
])
async def test_version_skew_lowers_capabilities_only(faults, labels):
    async with Node(profile(), faults=faults) as node, \
            Exporter(node.settings(interval=0.3)) as exporter:
        scrape = await exporter.ready()
        await asyncio.sleep(1.0)
        scrape = await exporter.scrape()
    assert scrape.value("podresources_kubelet_api_info", api_version="v1", pod_level="unknown",
                        **labels) == 1
    assert scrape.value("podresources_up") == 1
    assert scrape.by("podresources_cpus_allocated", "numa_node")["0"] == 3
    # a missing method is asked about once, not on every refresh
    method = "Get" if faults.get != "ok" else "GetAllocatableResources"
    assert node.simulator.stats.count(method) == 1


async def test_kubelet_downgrade_and_upgrade_across_restarts(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.3)) as exporter:
        await exporter.ready()
        node.simulator.faults.v1 = False  # a kubelet without podresources v1 comes back
        await node.simulator.restart(downtime=0.5)
        scrape = await exporter.wait_for(
            lambda s: s.get("podresources_node_info", node="test-node",
                            kubelet_api="v1alpha1") == 1.0 and s.get("podresources_up") == 1.0,
            timeout=15, what="fallback to v1alpha1")
        assert scrape.value("podresources_kubelet_api_info", api_version="v1alpha1",
                            get_allocatable="false", get="false", pod_level="unknown") == 1
        assert not scrape.series("podresources_cpus_allocated")
        node.simulator.faults.v1 = True
        await node.simulator.restart(downtime=0.5)
        scrape = await exporter.wait_for(
            lambda s: s.get("podresources_kubelet_api_info", api_version="v1",
                            get_allocatable="true", get="true", pod_level="unknown") == 1.0,
            timeout=15, what="v1 again")
        assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "api_version changed: v1 -> v1alpha1" in messages
    assert "api_version changed: v1alpha1 -> v1" in messages


async def test_slow_kubelet_deadlines_are_counted_and_calls_never_overlap():
    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.2, timeout=0.5)) as exporter:
        await exporter.ready()
        node.simulator.faults.slow_seconds = 2.0
        started = time.monotonic()
        scrape = await exporter.wait_for(
            lambda s: (s.get("podresources_api_requests_total", method="List",
                             code="DEADLINE_EXCEEDED") or 0) >= 2, timeout=15,
            what="two deadlines")
        elapsed = time.monotonic() - started
        node.simulator.faults.slow_seconds = 0.0
        await exporter.ready(timeout=15)
    assert scrape.value("podresources_up") == 0
    assert node.simulator.stats.max_in_flight == 1
    # each attempt waits for its deadline and then at least the 1 s back-off floor
    assert elapsed >= 2 * 0.5 + 1.0


async def test_oversized_reply_is_reported_as_such_not_as_a_rate_limit(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(profile(), faults=Faults(oversize_bytes=256 * 1024)) as node, \
            Exporter(node.settings(interval=0.3, max_message_bytes=64 * 1024)) as exporter:
        scrape = await exporter.wait_for(
            lambda s: (s.get("podresources_data_issues_total", kind="message_too_large")
                       or 0) >= 1, what="message_too_large")
    assert scrape.value("podresources_up") == 0
    assert scrape.value("podresources_api_requests_total", method="List",
                        code="RESOURCE_EXHAUSTED") >= 1
    # ordinary back-off (capped at --interval, floored at 1 s), not the rate-limit one
    assert 1.0 <= scrape.value("podresources_backoff_seconds") <= 1.0
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("--max-message-bytes" in m for m in messages)
    assert not any("rate limit" in m for m in messages)


async def test_undecodable_replies_keep_the_last_snapshot():
    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.3)) as exporter:
        await exporter.ready()
        node.simulator.faults.garbage = "bytes"
        scrape = await exporter.wait_for(
            lambda s: (s.get("podresources_data_issues_total", kind="invalid_reply") or 0) >= 1,
            what="invalid_reply")
        assert scrape.value("podresources_up") == 0
        assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}
        node.simulator.faults.garbage = ""
        await exporter.ready(timeout=10)


async def test_hostile_data_is_counted_and_exported_without_breaking_the_exposition():
    async with Node(profile(), faults=Faults(garbage="inconsistent")) as node, \
            Exporter(node.settings(interval=0.2)) as exporter:
        await exporter.ready()
        await asyncio.sleep(2)  # many different hostile replies
        scrape = await exporter.ready()
        text = exporter.refresher.body(openmetrics=False)
    issues = scrape.by("podresources_data_issues_total", "kind")
    assert sum(issues.values()) > 10
    assert {k for k, v in issues.items() if v} >= {"duplicate_entry", "invalid_entry",
                                                    "unknown_numa_id"}
    for (name, _labels), value in scrape.samples.items():
        if name == "podresources_numa_utilization_ratio":
            assert 0 <= value <= 1
    check_metrics(text, quiet=False)  # promtool of each Prometheus line accepts it


@pytest.mark.parametrize("faults", [
    Faults(rate_limit_storm=True), Faults(garbage="bytes"), Faults(oversize_bytes=256 * 1024),
    Faults(slow_seconds=1.0),
])
async def test_no_tight_retry_loop_for_any_error(faults):
    async with Node(profile(), faults=faults) as node, \
            Exporter(node.settings(interval=0.05, timeout=0.2,
                                   max_message_bytes=64 * 1024)) as exporter:
        await asyncio.sleep(4.0)
        scrape = await exporter.scrape()
    # with a 50 ms interval, only the 1 s back-off floor stands between attempts
    assert node.simulator.stats.count("List") <= 5
    assert scrape.value("podresources_up") == 0


async def test_no_tight_retry_loop_without_a_kubelet():
    node = Node(profile())  # never started
    async with Exporter(node.settings(interval=0.05)) as exporter:
        await asyncio.sleep(4.0)
        scrape = await exporter.scrape()
    assert scrape.value("podresources_api_requests_total", method="List",
                        code="UNAVAILABLE") <= 5


async def test_a_neighbour_draining_the_shared_quota():
    """A second client calls List in a tight loop: the kubelet's one token bucket is shared."""
    import grpc.aio

    from exporter._proto.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc

    async with Node(profile()) as node, \
            Exporter(node.settings(interval=0.5)) as exporter:
        exporter.refresher.rng = random.Random(3)
        await exporter.ready()
        channel = grpc.aio.insecure_channel(f"unix://{node.socket}")
        neighbour = v1_grpc.PodResourcesListerStub(channel)
        rejected = 0

        async def drain(seconds: float) -> None:
            nonlocal rejected
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    await neighbour.List(v1.ListPodResourcesRequest())
                except grpc.aio.AioRpcError:
                    rejected += 1

        async with Watch(exporter) as watch:
            await drain(8.0)
            scrape = await exporter.wait_for(lambda s: s.get("podresources_up") == 1.0,
                                             timeout=40, what="recovery after the neighbour")
        await channel.close()
    assert rejected > 100  # the neighbour really emptied the bucket
    assert watch.statuses == {200}
    assert 0.0 in watch.values("podresources_up")
    exporter_rejected = scrape.value("podresources_api_requests_total", method="List",
                                     code="RESOURCE_EXHAUSTED")
    assert 1 <= exporter_rejected <= 6  # backed off instead of joining the fight
    assert scrape.by("podresources_cpus_allocated", "numa_node") == {"0": 3, "1": 0}


async def test_a_real_process_logs_each_state_change_once_as_json():
    import json
    import sys

    from ..support.harness import REPO, free_port, terminate

    async with Node(profile()) as node:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(node.socket),
            "--sysfs-root", str(node.sysfs), "--listen-address", f"127.0.0.1:{port}",
            "--interval", "0.3", "--log-format", "json", cwd=REPO,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            await asyncio.sleep(2.0)
            await node.simulator.restart(downtime=2.0)  # gRPC sees a GOAWAY, then no socket
            await asyncio.sleep(4.0)
        finally:
            await terminate(proc)
        lines = (await proc.stderr.read()).decode().splitlines()
    records = [json.loads(line) for line in lines]  # nothing but our JSON records
    messages = [r["msg"] for r in records]
    assert sum("unreachable" in m for m in messages) == 1, messages
    assert sum("reachable again" in m for m in messages) == 1, messages
    assert proc.returncode == 0


# ---- device plugins away, restarts no call reveals, capabilities that come back ---------------

DEVICE_PODS = [{"namespace": "ns", "name": "p", "containers": [
    {"name": "c", "cpus": 1, "devices": {"r/x": 1, "r/y": 1}}]}]


def device_profile(**overrides):
    # r/x: x-0, x-1 on node 0 and x-2, x-3 on node 1; r/y: y-0 on node 1.
    # The pod lands on node 1, the only one with an r/y device: CPU 4, x-2 and y-0.
    return small_profile(devices=[{"resource": "r/x", "per_numa": {"0": 2, "1": 2}},
                                  {"resource": "r/y", "per_numa": {"1": 1}}],
                         pods=DEVICE_PODS, **overrides)


def device_ratios(scrape) -> dict[str, float]:
    """Node 1's device utilization by resource."""
    return {resource: value for resource, value in scrape.by(
        "podresources_numa_utilization_ratio", "resource", numa_node="1").items()
        if resource.startswith("r/")}


def issue_total(scrape) -> float:
    return sum(scrape.by("podresources_data_issues_total", "kind").values())


def settled(scrape) -> bool:
    """All plugins registered: the pod's devices count, none unavailable."""
    return (scrape.get("podresources_devices_allocated_unavailable", numa_node="1",
                       resource="r/x") == 0
            and scrape.get("podresources_numa_utilization_ratio", numa_node="1",
                           resource="r/x") == 0.5)


async def test_plugin_disconnect_makes_devices_unavailable_not_inconsistent():
    async with Node(device_profile()) as node, \
            Exporter(node.settings(interval=0.2, allocatable_interval=0.5)) as exporter:
        before = await exporter.wait_for(settled, what="the first allocatable view")
        # r/x on node 1: x-2 of {x-2, x-3} -> 0.5; r/y: y-0 of {y-0} -> 1
        assert device_ratios(before) == {"r/x": 0.5, "r/y": 1.0}
        async with Watch(exporter, period=0.1) as watch:
            node.simulator.set_faults({"plugin_disconnect": "r/x"})
            during = await exporter.wait_for(
                lambda s: s.get("podresources_devices_allocated_unavailable", numa_node="1",
                                resource="r/x") == 1, what="r/x unavailable")
            node.simulator.set_faults({"plugin_disconnect": ""})
            after = await exporter.wait_for(settled, what="r/x registered again")
    # nothing of r/x is allocatable: its allocatable and ratio series go, the assignment stays
    assert not during.series("podresources_devices_allocatable", resource="r/x")
    assert during.by("podresources_devices_allocated", "numa_node", resource="r/x") == {"1": 1}
    assert not during.series("podresources_numa_utilization_ratio", resource="r/x")
    # the other plugin is untouched
    assert during.value("podresources_devices_allocated_unavailable", numa_node="1",
                        resource="r/y") == 0
    assert during.value("podresources_numa_utilization_ratio", numa_node="1",
                        resource="r/y") == 1.0
    assert after.by("podresources_devices_allocated_unavailable", "numa_node",
                    resource="r/x") == {"0": 0, "1": 0}
    # a routine kubelet event, not inconsistent data: no data issue at any time
    assert {issue_total(s) for _, _, s in watch.results} == {0}
    assert {s.value("podresources_up") for _, _, s in watch.results} == {1}


async def test_devices_unavailable_after_a_restart_until_plugins_register_again(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    # --allocatable-interval 60: what brings the devices back is the exporter re-reading
    # allocatable while a listed resource is missing from it, not its periodic re-read
    async with Node(device_profile(), reregister_seconds=3.0) as node, \
            Exporter(node.settings(interval=0.3)) as exporter:
        await exporter.wait_for(settled, what="the first allocatable view")
        async with Watch(exporter, period=0.1) as watch:
            await node.simulator.restart(downtime=0.5)
            during = await exporter.wait_for(
                lambda s: s.get("podresources_up") == 1
                and s.get("podresources_devices_allocated_unavailable", numa_node="1",
                          resource="r/y") == 1, timeout=15, what="devices unavailable")
            await exporter.wait_for(settled, timeout=15, what="plugins registered again")
    # both plugins away: each assigned device unavailable, no device ratio at all
    assert during.by("podresources_devices_allocated_unavailable", "numa_node", "resource") == {
        ("1", "r/x"): 1, ("1", "r/y"): 1}
    assert not during.series("podresources_devices_allocatable")
    assert device_ratios(during) == {}
    assert during.value("podresources_numa_utilization_ratio", numa_node="1",
                        resource="cpu") == 0.25
    assert {issue_total(s) for _, _, s in watch.results} == {0}
    # well within the 60 s allocatable interval: a handful of re-reads, not one per refresh
    assert node.simulator.stats.count("GetAllocatableResources") <= 10


async def test_a_restart_shorter_than_the_interval_is_noticed(caplog):
    """No call fails across a quick restart; the re-created socket tells."""
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(device_profile(), reregister_seconds=30.0) as node:
        refresher = Exporter(node.settings(interval=10.0)).refresher
        try:
            await refresher.refresh_once()
            assert refresher.status.capabilities.labels() == ("v1", "true", "true", "unknown")
            # the kubelet comes back without Get (say, a downgrade), 50 ms later
            node.simulator.faults.get = "unimplemented"
            await node.simulator.restart(downtime=0.05)
            await refresher.refresh_once()
        finally:
            await refresher.client.close()
        failed = {code: n for (method, code), n in _request_counts(refresher).items()
                  if code != "OK"}
        caps = refresher.status.capabilities.labels()
        accounting = refresher.accounting
    # every call succeeded, the restart was noticed anyway: Get probed again (now false) and
    # allocatable re-read (the plugins have not registered yet: both devices unavailable)
    assert failed == {"UNIMPLEMENTED": 1}
    assert caps == ("v1", "true", "false", "unknown")
    assert node.simulator.stats.count("Get") == 2
    assert node.simulator.stats.count("GetAllocatableResources") == 2
    assert accounting.devices_allocated_unavailable == {("1", "r/x"): 1, ("1", "r/y"): 1}
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.refresh.loop"]
    assert sum("re-created" in m for m in messages) == 1
    assert sum("capability get changed: true -> false" in m for m in messages) == 1


def _request_counts(refresher) -> dict[tuple[str, str], float]:
    return {(method, code): value
            for (method, code), (value,) in refresher.health.requests.items()}


@pytest.mark.parametrize("lowered, restored, expected_low", [
    (dict(v1=False), dict(v1=True), ("v1alpha1", "false", "false")),
    (dict(v1=False, get_allocatable="unimplemented", get="unimplemented"),
     dict(v1=True, get_allocatable="ok", get="ok"), ("v1alpha1", "false", "false")),
    (dict(get="unimplemented"), dict(get="ok"), ("v1", "true", "false")),
    (dict(get_allocatable="disabled"), dict(get_allocatable="ok"), ("v1", "false", "true")),
])
async def test_an_upgraded_kubelet_is_used_fully_without_an_exporter_restart(
        caplog, lowered, restored, expected_low):
    """A lowered capability is probed again every --allocatable-interval (here 1 s), with no
    restart of the kubelet's socket and none of the exporter."""
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    async with Node(device_profile(), faults=Faults(**lowered)) as node, \
            Exporter(node.settings(interval=0.2, allocatable_interval=1.0)) as exporter:
        low = await exporter.ready()
        api, get_allocatable, get = expected_low
        assert low.value("podresources_kubelet_api_info", api_version=api,
                         get_allocatable=get_allocatable, get=get, pod_level="unknown") == 1
        await asyncio.sleep(2.5)  # probing goes on, at the allocatable interval only
        node.simulator.faults.update(restored)
        full = await exporter.wait_for(
            lambda s: s.get("podresources_kubelet_api_info", api_version="v1",
                            get_allocatable="true", get="true", pod_level="unknown") == 1
            and s.series("podresources_devices_allocated_unavailable"),
            timeout=10, what="the full API")
    # the upgraded kubelet's data: CPUs and allocatable devices
    assert full.by("podresources_cpus_allocated", "numa_node") == {"0": 0, "1": 1}
    assert full.value("podresources_numa_utilization_ratio", numa_node="1", resource="r/x") == 0.5
    stats = node.simulator.stats
    if not lowered.get("v1", True):
        # v1 asked again a few times in ~2.5 s, not on each of the ~12 refreshes
        assert 2 <= stats.count("/v1.PodResourcesLister/List", "UNIMPLEMENTED") <= 5
    messages = [r.getMessage() for r in caplog.records if "changed" in r.getMessage()]
    assert len(messages) == len(set(messages)), messages  # one line per change


async def test_pod_level_goes_back_to_unknown_when_the_api_cannot_carry_it(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    # a pod-level pool: PodLevelResourceManagers under scope pod
    profile = small_profile(topology_manager_scope="pod",
                            feature_gates={"PodLevelResourceManagers": True},
                            pods=[{"namespace": "ns", "name": "p", "pod_level": {"cpus": 1},
                                   "containers": [{"name": "c", "cpus": 1}]}])
    async with Node(profile) as node, \
            Exporter(node.settings(interval=0.2, allocatable_interval=60.0)) as exporter:
        s = await exporter.ready()
        assert s.value("podresources_kubelet_api_info", api_version="v1", get_allocatable="true",
                       get="true", pod_level="true") == 1
        node.simulator.faults.v1 = False
        s = await exporter.wait_for(
            lambda s: s.get("podresources_kubelet_api_info", api_version="v1alpha1",
                            get_allocatable="false", get="false", pod_level="unknown") == 1,
            what="v1alpha1 without pod-level data")
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.refresh.loop"]
    assert sum("pod_level changed: true -> unknown" in m for m in messages) == 1
