"""Waking the refresh loop early when the kubelet assigns or frees exclusive resources.

The kubelet rewrites its resource managers' state files then; their modification times are
polled (cheap, and needs no inotify, which a hostPath mount does not always carry). A change is
debounced, and refreshes stay at most ``--max-refresh-rate`` per second however often the files
change.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from ..files import FileStamp

WATCH_POLL_SECONDS = 0.2
WATCH_DEBOUNCE_SECONDS = 0.1
# Files the kubelet rewrites when it assigns or frees exclusive resources.
WATCHED_FILES = ("cpu_manager_state", "memory_manager_state", "dra_manager_state",
                 "device-plugins/kubelet_internal_checkpoint")


class StateFileWatcher:
    """``changed`` is set when a watched file changes; :meth:`settle` is the pause before the
    refresh it asks for. ``path``: the kubelet's state directory or a single file."""

    def __init__(self, path: str | None, max_refresh_rate: float):
        self.path = Path(path) if path else None
        self.max_refresh_rate = max_refresh_rate
        self.changed = asyncio.Event()

    async def run(self) -> None:
        """Poll until cancelled (nothing to do without a path)."""
        if self.path is None:
            return
        targets = ([self.path] if self.path.is_file()
                   else [self.path / name for name in WATCHED_FILES])
        stamp = FileStamp(*targets)
        while True:
            await asyncio.sleep(WATCH_POLL_SECONDS)
            if stamp.changed():
                self.changed.set()

    async def settle(self, last_started: float, stop: asyncio.Event,
                     due: float = float("inf")) -> None:
        """Wait out the debounce and the rate cap (``last_started``: monotonic time of the last
        refresh), but never past ``due``, when the next refresh is due anyway (a change must
        not postpone it), or until ``stop``; changes meanwhile are covered by the next
        refresh."""
        self.changed.clear()
        earliest = last_started + 1.0 / self.max_refresh_rate
        now = time.monotonic()
        pause = min(max(WATCH_DEBOUNCE_SECONDS, earliest - now), max(0.0, due - now))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=pause)
        self.changed.clear()

