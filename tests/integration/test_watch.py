"""--watch-path: a change to the kubelet's state files refreshes early, within the rate ceiling."""

from __future__ import annotations

import asyncio
import json
import time

from ..support.harness import Exporter, Node, small_profile

PODS = [{"namespace": "ns", "name": f"p{i}", "containers": [{"name": "c", "cpus": 1}]}
        for i in range(3)]


async def test_state_file_change_refreshes_soon_within_the_rate_ceiling():
    async with Node(small_profile(pods=PODS)) as node:
        state_dir = node.dir / "kubelet"
        keeper = asyncio.create_task(node.simulator.keep_state_files(state_dir))
        await asyncio.sleep(0.2)
        cpu_state = json.loads((state_dir / "cpu_manager_state").read_text())
        uid = node.simulator.state.pods[("ns", "p0")].uid
        assert cpu_state["entries"][uid] == {"c": "1"}  # kubelet-shaped content, by pod UID
        settings = node.settings(interval=60.0, watch_path=str(state_dir), max_refresh_rate=1.0)
        async with Exporter(settings) as exporter:
            await exporter.ready()
            lists_before = node.simulator.stats.count("List")
            node.simulator.state.remove("ns", "p1")
            changed = time.monotonic()
            await exporter.wait_for(
                lambda s: not s.series("podresources_container_cpus", pod="p1"),
                timeout=5, what="the removal to show without waiting for --interval")
            delay = time.monotonic() - changed
            # a burst of changes: at most one refresh per second
            burst_start = time.monotonic()
            for index in range(15):
                node.simulator.state.mark_unhealthy("none", healthy=bool(index % 2))
                await asyncio.sleep(0.2)
            burst = time.monotonic() - burst_start
            lists = node.simulator.stats.count("List", since=burst_start)
        keeper.cancel()
    assert delay < 2.0
    assert node.simulator.stats.count("List") - lists_before >= 1
    assert 2 <= lists <= burst * 1.0 + 1, (lists, burst)


async def test_a_state_file_change_never_postpones_a_refresh_due_by_the_interval():
    """The rate ceiling holds back the early refreshes changes ask for, not those --interval
    makes due: with changes every 0.1 s, a refresh still comes every 0.2 s (before, each
    change held the next one back to the ceiling: one in 4 s)."""
    async with Node(small_profile(pods=PODS)) as node:
        state_dir = node.dir / "kubelet"
        keeper = asyncio.create_task(node.simulator.keep_state_files(state_dir))
        await asyncio.sleep(0.2)
        settings = node.settings(interval=0.2, watch_path=str(state_dir), max_refresh_rate=0.25)
        async with Exporter(settings) as exporter:
            await exporter.ready()
            started = time.monotonic()
            for index in range(20):
                node.simulator.state.mark_unhealthy("none", healthy=bool(index % 2))
                await asyncio.sleep(0.1)
            lists = node.simulator.stats.count("List", since=started)
        keeper.cancel()
    assert lists >= 5, lists  # 2 s at one refresh per 0.2 s (plus its own time): about 8
