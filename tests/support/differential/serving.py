"""A running exporter for the sequences: ``serve`` itself (:func:`exporter.commands.serve.serve`,
configured from the command line by the CLI's own parser), run in this process's event loop
against one node of the real kubelet, its refresh loop and kept state (the fit answers'
``NodeStateCache``, the ledger, the decoders' caches) living from the first step of a
sequence to the last, across the kubelet's restarts.

Nothing of it is replaced: the test wakes it and watches it. Each refresh attempt is noted
when it ends (the refresher's ``refresh_once`` wrapped), so a step's comparison waits for a
successful refresh that *started* after the step, and for pod context (the Pods API's watch,
or the Kubernetes-API view's) that has seen the step. The loop is woken after a step as the
state-file watcher wakes it; it refreshes on its own besides, every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from exporter.cli import parse_args, settings_from
from exporter.commands.serve import serve
from exporter.fit.answers import ShapeAnswer
from exporter.refresh.loop import Refresher

from ..harness import Scrape

# The refresh loop runs on its own every INTERVAL (a deployed exporter: every 10 s), and is
# woken after each step as the state-file watcher wakes it when a file changes
# (:meth:`RunningExporter.kick`), at most MAX_REFRESH_RATE times a second (--max-refresh-rate;
# a deployment's is 1): a refresh after every step, and none in between.
INTERVAL = 1.0
MAX_REFRESH_RATE = 50.0
CATCH_UP_SECONDS = 10.0
# the /metrics families a step compares
COMPARED = ("podresources_cpus_", "podresources_memory_", "podresources_devices_",
            "podresources_numa_free", "podresources_shape_")


@dataclass(frozen=True)
class Answers:
    """What the running exporter says after one step: its /metrics page, and the fit answers
    (with the managers' state and rules they were computed on) behind it."""

    scrape: Scrape
    answers: Mapping[str, ShapeAnswer]
    state: Any  # exporter.fit.nodestate.NodeState
    rules: Any  # exporter.fit.admission.Rules
    context: Any  # exporter.podcontext.NodeContext


class RunningExporter:
    """``serve`` with ``argv`` (the flags a deployment gives it), in this event loop."""

    def __init__(self, argv: list[str], kube_environ: Mapping[str, str] | None = None):
        args = parse_args([*argv, "--listen-address", "127.0.0.1:0"], environ={})
        self.settings = settings_from(args)
        self.address = args.listen_address
        self.kube_environ = dict(kube_environ or {})
        self.refresher: Refresher | None = None
        self.port = 0
        self.attempts = 0
        self.last_good_start = float("-inf")  # monotonic start of the last successful refresh
        self._refreshed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[int] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> RunningExporter:
        started = asyncio.get_running_loop().create_future()

        def on_start(port: int, refresher: Refresher) -> None:
            self.port, self.refresher = port, refresher
            original = refresher.refresh_once

            async def noted() -> float:
                began = time.monotonic()
                delay = await original()
                self.attempts += 1
                if refresher.status.up:
                    self.last_good_start = began
                self._refreshed.set()
                return delay

            refresher.refresh_once = noted  # type: ignore[method-assign]
            started.set_result(None)

        self._task = asyncio.create_task(serve(self.settings, self.address, stop=self._stop,
                                               started=on_start,
                                               kube_environ=self.kube_environ))
        done, _ = await asyncio.wait((self._task, started), return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            raise RuntimeError(f"serve stopped at start (status {self._task.result()})")
        self._session = aiohttp.ClientSession()
        return self

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, timeout=15)
        if self._session is not None:
            await self._session.close()

    def kick(self) -> None:
        """Wake the refresh loop as the state-file watcher does when a file changed (it
        refreshes after the watcher's debounce, 0.1 s)."""
        if self.refresher is not None:
            self.refresher.watcher.changed.set()

    async def refreshed_after(self, moment: float, timeout: float = CATCH_UP_SECONDS) -> bool:
        """Whether a refresh that started after ``moment`` (monotonic) succeeded within
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.last_good_start <= moment:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._refreshed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._refreshed.wait(), remaining)
        return True

    async def scrape(self) -> Scrape:
        """/metrics, parsed for the families a step compares (:data:`COMPARED`): parsing the
        whole page, with its per-container series, cost a step more than anything else."""
        assert self._session is not None
        async with self._session.get(f"http://127.0.0.1:{self.port}/metrics") as response:
            assert response.status == 200, response.status
            text = await response.text()
        return Scrape("".join(line for line in text.splitlines(keepends=True)
                              if line.removeprefix("# HELP ").removeprefix("# TYPE ")
                              .startswith(COMPARED)))

    async def answers(self) -> Answers:
        """The /metrics page and the fit answers of the last refresh, read together (the loop
        runs in this event loop: nothing refreshes between the two reads)."""
        assert self.refresher is not None
        fit = self.refresher.fit
        assert fit is not None
        answers = {a.shape.name: a for a in fit.answers}
        state, config, context = fit.state, fit.config, fit.context
        scrape = await self.scrape()
        if fit.state is not state or fit.context is not context:  # refreshed meanwhile
            return await self.answers()
        return Answers(scrape, answers, state, config.rules() if config is not None else None,
                       context)


def context_lag(context: Any, dump: Mapping[str, Any]) -> str:
    """Why the exporter's pod context has not seen the kubelet's pods as they are now ("" when
    it has): every pod of the pod manager known, ended or rejected ones as such; pods the
    kubelet no longer has absent or ended."""
    if context is None:
        return "no pod context"
    known = {p.uid: p for p in context.pods}
    present = set()
    for pod in dump["pods"] or ():
        if not pod["in_pod_manager"]:
            continue
        present.add(pod["uid"])
        mine = known.get(pod["uid"])
        if mine is None:
            return f"pod {pod['name']} not in the pod context yet"
        if mine.terminated != (pod["phase"] in ("Succeeded", "Failed")):
            return f"pod {pod['name']}: phase {mine.phase} in the pod context, {pod['phase']}"
    for uid, mine in known.items():
        if uid not in present and not mine.terminated:
            return f"pod {mine.name} removed, still in the pod context"
    return ""


async def wait_caught_up(exporter: RunningExporter, moment: float,
                         dump: Mapping[str, Any]) -> tuple[Answers | None, str]:
    """The exporter's answers after a step applied at ``moment``: from a successful refresh
    that started after it, with pod context (where it has a source) that has seen it. Else
    (None, why not)."""
    deadline = time.monotonic() + CATCH_UP_SECONDS
    lag = "no successful refresh"
    while time.monotonic() < deadline:
        exporter.kick()
        if not await exporter.refreshed_after(moment, deadline - time.monotonic()):
            break
        current = await exporter.answers()
        assert exporter.refresher is not None
        lag = context_lag(current.context, dump) if exporter.refresher.pod_sources else ""
        if not lag:
            return current, ""
        moment = time.monotonic()  # the context moved on: a refresh after that
        await asyncio.sleep(0.01)
    return None, lag
