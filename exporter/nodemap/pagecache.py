"""The ``/numa`` page as served: drawn from the last refresh when asked, and kept.

At most one page is drawn per refresh and reload period, however many ask, and never with a
kubelet call: :class:`PageCache` asks its source for the last refresh's :class:`MapInputs`
and draws the page in the refresh loop's worker thread (``run``) when they changed. The page
reloads itself every ``--interval`` (10 s at least, 5 minutes at most). A page that cannot be
drawn costs the map, not the exporter: logged once per snapshot, answered ``None``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import MapInputs

log = logging.getLogger(__name__)
PAGE_RELOAD_MIN, PAGE_RELOAD_MAX = 10.0, 300.0  # seconds between reloads of the node map
# how the page is drawn off the event loop: the refresh loop's worker (Worker.run)
Run = Callable[..., Awaitable[Any]]


class PageCache:
    """The node map page of the last successful refresh, gzipped or not (``None`` before one).
    ``inputs`` gives what the last refresh has for the map, ``run`` runs the drawing in the
    worker thread, ``interval`` is ``--interval``."""

    def __init__(self, inputs: Callable[[], MapInputs | None], run: Run, interval: float):
        self._inputs = inputs
        self._run = run
        self.reload_seconds = min(max(interval, PAGE_RELOAD_MIN), PAGE_RELOAD_MAX)
        # the last page: (reload period, inputs, (page, gzipped page))
        self._page: tuple[int, MapInputs, tuple[bytes, bytes]] | None = None
        self._lock = asyncio.Lock()
        self._failed: object = None  # the snapshot whose failure was logged

    async def page(self, compressed: bool = False) -> bytes | None:
        inputs = self._inputs()
        if inputs is None:
            return None
        from .page import build_page
        async with self._lock:
            now = time.time()
            bucket = int(now // self.reload_seconds)
            if self._page is not None and self._page[0] == bucket \
                    and same_inputs(self._page[1], inputs):
                return self._page[2][compressed]
            try:
                pages: tuple[bytes, bytes] = await self._run(build_page, inputs,
                                                             self.reload_seconds, now)
            except Exception:  # a bug must cost the map, not the exporter or the log
                if self._failed is not inputs.snapshot:
                    log.exception("the node map could not be drawn from this snapshot")
                self._failed = inputs.snapshot
                return None
            self._page = (bucket, inputs, pages)
            return pages[compressed]


def same_inputs(old: MapInputs, new: MapInputs) -> bool:
    """The same refresh: the same objects (compared by identity: the ledger hands back the same
    accounting when nothing changed, and a snapshot compared by value would cost a walk of
    every pod)."""
    return all(a is b or (isinstance(a, (bool, int, float, str)) and a == b)
               for a, b in zip(_compared(old), _compared(new)))


def _compared(inputs: MapInputs) -> tuple[object, ...]:
    return (inputs.snapshot, inputs.accounting, inputs.topology, inputs.node_name,
            inputs.refreshed_at, inputs.kubelet_up, inputs.dra, inputs.shapes)
