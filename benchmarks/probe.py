"""The exporter, run with the parts of its refresh timed (``benchmarks.nodecost``'s breakdown).

    python -m benchmarks.probe STATS.json [exporter flags ...]

Runs ``exporter.cli.main`` with the flags given, after wrapping the functions in
:data:`PARTS`: each call is counted with the CPU time it took — the calling thread's
(``thread_time``) for the synchronous ones, the whole process's (``process_time``, every
thread: gRPC's included) for the coroutines, which are awaited while the rest of the process
mostly waits. On SIGUSR1 the counts so far are written to STATS.json with the CPU time of every
thread of the process, so a window is the difference of two writes; on SIGUSR2, run with
``-X tracemalloc``, the memory Python traced, by file, to STATS.memory.json. Benchmarks only:
nothing of this is in the exporter.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, attribute path, what it is): the parts of a refresh, in the order they run
PARTS = (
    ("exporter.refresh.loop", "Refresher.refresh_once", "the refresh, whole (all threads)"),
    ("exporter.kubelet.reader", "KubeletReader.read",
     "the kubelet's replies: calls and decoding (all threads)"),
    ("exporter.kubelet.client", "KubeletClient._call", "a kubelet call over gRPC (all threads)"),
    ("exporter.refresh.worker", "Worker.run", "a worker job and its hand-offs (all threads)"),
    ("exporter.topology", "RereadTopology.current", "the sysfs re-read check (loop)"),
    ("exporter.refresh.loop", "RefreshCore.decode_list", "decoding List (worker)"),
    ("exporter.refresh.loop", "RefreshCore.decode_allocatable",
     "decoding GetAllocatableResources (worker)"),
    ("exporter.refresh.loop", "RefreshCore.account",
     "decoding, accounting, rendering, the data section (worker)"),
    ("exporter.exposition.sections", "Sections.fit_section", "the fit answers (loop)"),
    ("exporter.exposition.sections", "Sections.health_sections", "the health section"),
    ("exporter.exposition.sections", "Sections._render_health",
     "the health section, when scraped (loop)"),
    ("exporter.exposition.sections", "Sections.update", "the sections replaced (loop)"),
)

_SPENT: dict[str, list[float]] = {}


def _wrapped(function: Callable[..., Any], label: str) -> Callable[..., Any]:
    spent = _SPENT.setdefault(label, [0, 0.0])
    if inspect.iscoroutinefunction(function):
        @functools.wraps(function)
        async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await function(*args, **kwargs)
            finally:
                spent[0] += 1
                spent[1] += time.process_time() - started
        return timed_coroutine

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[0] += 1
            spent[1] += time.thread_time() - started
    return timed


def install() -> list[str]:
    """Wrap every part that exists in this tree; returns the labels wrapped."""
    wrapped = []
    for module_name, path, label in PARTS:
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        *outer, name = path.split(".")
        try:
            for part in outer:
                owner = getattr(owner, part)
            function = getattr(owner, name)
        except AttributeError:
            continue  # not in this tree
        setattr(owner, name, _wrapped(function, label))
        wrapped.append(label)
    return wrapped


def threads() -> dict[str, float]:
    """CPU seconds of each thread of this process, by ``tid name``."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            found[f"{task.name} {name}"] = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return found


def main() -> int:
    target = Path(sys.argv[1])
    install()
    main_thread = str(os.getpid())

    def write(*_: object) -> None:
        figures = {"process_cpu": time.process_time(), "main_thread": main_thread,
                   "threads": threads(), "parts": {k: list(v) for k, v in _SPENT.items()}}
        target.write_text(json.dumps(figures))

    def memory(*_: object) -> None:
        """With ``-X tracemalloc``: the traced memory by file, largest first."""
        import tracemalloc
        if not tracemalloc.is_tracing():
            return
        stats = tracemalloc.take_snapshot().statistics("filename")
        target.with_suffix(".memory.json").write_text(json.dumps(
            [(str(stat.traceback[0].filename), stat.size, stat.count) for stat in stats]))

    signal.signal(signal.SIGUSR1, write)
    signal.signal(signal.SIGUSR2, memory)
    from exporter.cli import main as exporter_main
    return exporter_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
