"""A long refresh (a huge node's cold start, a hostile reply) runs in the worker thread: the
event loop keeps answering scrapes, probes and SIGTERM meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import aiohttp

from exporter.commands.serve import serve
from exporter.refresh.loop import Refresher

from ..support.harness import Exporter, Node, small_profile

HOLD_SECONDS = 60  # far longer than the tests need: the worker is released by the test


class Held:
    """The refresher's accounting made to wait until released, as a long refresh would.
    ``gave_up`` is set when it waited HOLD_SECONDS in vain: had it run on the event loop, the
    loop could not have served the test meanwhile, and the test's checks come too late."""

    def __init__(self) -> None:
        self.entered, self.release, self.gave_up = (threading.Event(), threading.Event(),
                                                     threading.Event())


def hold_accounting(refresher: Refresher) -> Held:
    hold = Held()
    account = refresher.core.account

    def held(*args):  # type: ignore[no-untyped-def]
        hold.entered.set()
        if not hold.release.wait(HOLD_SECONDS):
            hold.gave_up.set()
        return account(*args)

    refresher.core.account = held  # type: ignore[method-assign]
    return hold


async def test_scrapes_are_answered_and_stop_returns_during_a_long_refresh():
    async with Node(small_profile()) as node, \
            Exporter(node.settings(), run_loop=False) as exporter:
        refresher = exporter.refresher
        await refresher.refresh_once()
        before = refresher.body(False)
        hold = hold_accounting(refresher)
        task = asyncio.create_task(refresher.run())
        try:
            assert await asyncio.to_thread(hold.entered.wait, 30)
            assert (await exporter.get("/healthz")).status == 200
            async with exporter.session.get(exporter.url + "/metrics",
                                            headers={"Accept-Encoding": "identity"}) as response:
                assert response.status == 200
                assert await response.read() == before  # the last finished body
            refresher.stop()
            await asyncio.wait_for(task, timeout=30)  # without waiting for the worker
            assert task.exception() is None
            assert not hold.gave_up.is_set()  # all of that while the refresh was running
        finally:
            hold.release.set()


async def test_sigterm_during_a_long_refresh_shuts_down():
    async with Node(small_profile()) as node:
        held: list[Held] = []
        ports: list[int] = []

        def started(port: int, refresher: Refresher) -> None:
            ports.append(port)
            held.append(hold_accounting(refresher))

        serving = asyncio.create_task(serve(node.settings(), ("127.0.0.1", 0),
                                                started=started))
        try:
            while not held:
                await asyncio.sleep(0.05)
            hold = held[0]
            assert await asyncio.to_thread(hold.entered.wait, 30)
            async with aiohttp.ClientSession() as session, \
                    session.get(f"http://127.0.0.1:{ports[0]}/healthz") as response:
                assert response.status == 200
            os.kill(os.getpid(), signal.SIGTERM)
            assert await asyncio.wait_for(serving, timeout=30) == 0
            assert not hold.gave_up.is_set()  # the refresh was still running
        finally:
            for hold in held:
                hold.release.set()
            if not serving.done():
                serving.cancel()


async def test_no_collection_runs_during_a_job_and_a_large_one_is_frozen_after():
    """A collection holds the GIL from start to end: none may start in the middle of a job,
    and what a large job leaves behind (a cold start's caches) is frozen, so that no later
    collection scans it again; a small job leaves the collector as it was."""
    import gc

    from exporter.refresh.worker import Worker

    worker = Worker()
    kept: list[object] = []

    def build(count: int) -> bool:
        kept.extend([index] for index in range(count))  # lists: tracked by the collector
        return gc.isenabled()

    gc.collect()
    frozen = gc.get_freeze_count()
    try:
        assert await worker.run(build, 10) is False  # disabled while the job ran
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen  # 10 objects: nothing frozen
        assert await worker.run(build, 3 * Worker.FREEZE_AFTER) is False
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + 3 * Worker.FREEZE_AFTER
        gc.disable()  # a process that turned collection off keeps it off
        assert await worker.run(build, 10) is False
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_min_numa_nodes_leaves_no_reference_cycles():
    """The refresh makes no garbage only a collection could free (which the worker's freezing
    would keep alive): the branch and bound of the alignment rule included."""
    import gc

    from exporter.accounting.numa import min_numa_nodes

    gc.collect()
    gc.disable()
    try:
        sets = [frozenset({0, 1}), frozenset({2, 3}), frozenset({1, 2}), frozenset({4})]
        assert min_numa_nodes(set(), sets) == 3  # {1, 2} hits the first three, {4} the last
        assert min_numa_nodes({0}, sets) == 3  # 0, then 2 (hits {2, 3} and {1, 2}), then 4
        assert gc.collect() == 0
    finally:
        gc.enable()
