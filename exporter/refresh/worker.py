"""A worker thread for the refresh's CPU-heavy work, so the event loop stays free."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import queue
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

_Result = TypeVar("_Result")


class Worker:
    """Runs the refresh's CPU-heavy work in a thread, one job at a time, so that the event
    loop keeps answering scrapes and signals while a large or hostile reply is processed.

    One daemon thread takes the jobs in order: a SIGTERM during a long refresh ends the process
    without waiting for it, and a job abandoned by a cancelled refresh finishes before the next
    one starts. The thread leaves after ``IDLE_SECONDS`` without work and is started again with
    the next job (starting a thread waits for it to run: not once per job). While a job runs,
    the interpreter hands the GIL over every half millisecond instead of every 5 ms, so the
    event loop never waits long to run.

    A garbage collection holds the GIL from start to end, and one of the oldest generation in
    the middle of a cold start (thousands of pods converted, every object scanned) stalled the
    loop for some 100 ms. So no automatic collection runs during a job, and after a job that
    left many new objects behind (the caches of a cold start or of a large change) they are
    frozen: moved where no collection scans them again. They are long-lived caches, freed by
    reference counting when a pod leaves; the refresh makes no reference cycles, so freezing
    keeps no garbage alive.
    """

    IDLE_SECONDS = 300.0
    SWITCH_INTERVAL = 0.0005
    FREEZE_AFTER = 10_000  # objects a job left to the collector's youngest generation

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running = False

    async def run(self, function: Callable[..., _Result], *args: object) -> _Result:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Result] = loop.create_future()

        def settle(result: _Result | None, error: BaseException | None) -> None:
            if future.cancelled():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def job() -> None:
            previous = sys.getswitchinterval()
            sys.setswitchinterval(min(previous, self.SWITCH_INTERVAL))
            collecting = gc.isenabled()
            gc.disable()
            try:
                result, error = function(*args), None
            except BaseException as caught:  # handed to the awaiting task
                result, error = None, caught
            finally:
                sys.setswitchinterval(previous)
                if collecting:
                    if gc.get_count()[0] > self.FREEZE_AFTER:
                        gc.freeze()
                    gc.enable()
            # a closed loop: nobody waits for the result any more
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result, error)

        with self._lock:
            self._jobs.put(job)
            if not self._running:
                self._running = True
                threading.Thread(target=self._serve, name="refresh-worker", daemon=True).start()
        return await future

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._running = False
                        return
                continue
            job()
