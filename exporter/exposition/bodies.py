"""The /metrics bodies, finished when their sections change, so that a scrape only picks one.

A body is four sections in a fixed order: the data section (node and workload series, rendered
by the refresh), the fit answers' section (``--fit-shapes``, SPEC section 7), the
Kubernetes-API view's section (``--kube-api``) and the health section (the exporter's own
metrics; for OpenMetrics it ends with ``# EOF``). The data, fit and view sections are gauges
only, the same bytes in both formats; the health section is rendered per format.

Nothing is done for a variant nobody asks for: the first scrape of a variant (text 0.0.4 or
OpenMetrics, identity or gzip) after a section changed renders the health section in that
format (a few kilobytes), deflates it when the variant is gzip, and assembles the variant from
the sections; later scrapes of it cost a dictionary lookup and the socket writes, whatever the
node's size. A refresh nobody scrapes renders and deflates nothing but a changed data section.

gzip without compressing the whole body again: each section is deflated on its own, as a raw
deflate segment ended by a sync flush (byte-aligned, no reference into another section), and a
body is the gzip header, the segments in order, an empty final block and the trailer (CRC-32 and
length of the whole). The large data section is deflated once per change and kept (off the
event loop, by the refresh); the health section when a gzip body first needs it. The result is
one ordinary gzip member. Separate gzip members (RFC 1952 allows a file of several) would be
simpler, and Go's and Python's readers take them whole, but curl and browsers stop after the
first member without an error.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

GZIP_LEVEL = 6
# The health section is deflated after every refresh attempt: level 3 takes less than half the
# time of level 6 on its ~9 kB and gives about 7 % more bytes (some 100 per body)
HEALTH_GZIP_LEVEL = 3
# ID1 ID2, CM=deflate, no flags, MTIME=0 (no timestamp: equal bodies are equal bytes),
# XFL=0, OS=255 (unknown)
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# BFINAL=1, BTYPE=01 (fixed Huffman), end-of-block: the empty last block zlib writes too
_FINAL_BLOCK = b"\x03\x00"
OPENMETRICS_EOF = b"# EOF\n"


@dataclass(frozen=True)
class Section:
    """One section of a body, as text and as a raw deflate segment (not final, byte-aligned)."""

    text: bytes
    deflated: bytes

    @classmethod
    def of(cls, text: bytes, level: int = GZIP_LEVEL) -> Section:
        """Deflate ``text`` on its own. CPU-heavy for the data section: call it off the loop."""
        if not text:
            return EMPTY
        compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        return cls(text, compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH))


EMPTY = Section(b"", b"")


@dataclass(frozen=True)
class Body:
    """One /metrics variant, as the parts to write in order (not joined: no copy of a large
    data section per variant)."""

    parts: tuple[bytes, ...]
    length: int

    @classmethod
    def of(cls, parts: tuple[bytes, ...]) -> Body:
        kept = tuple(part for part in parts if part)
        return cls(kept, sum(map(len, kept)))

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    def slices(self, size: int) -> Iterator[memoryview]:
        """The body in consecutive slices of at most ``size`` bytes."""
        for part in self.parts:
            view = memoryview(part)
            for start in range(0, len(view), size):
                yield view[start:start + size]


class HealthSection:
    """The health section in one format, deflated when a gzip body first needs it (the
    event loop does: it is a few kilobytes)."""

    def __init__(self, text: bytes):
        self.text = text
        self._deflated: bytes | None = None

    @property
    def deflated(self) -> bytes:
        if self._deflated is None:
            self._deflated = Section.of(self.text, HEALTH_GZIP_LEVEL).deflated
        return self._deflated


def no_health(openmetrics: bool) -> bytes:
    return b""


class Exposition:
    """The current /metrics bodies. Sections are replaced as they change (the data section
    after a refresh that changed it, the fit answers' when they changed, the view's when the
    view changed); the health section is due again after every refresh attempt
    (:meth:`health_changed`) and rendered by ``health`` (one format, OpenMetrics without
    ``# EOF``) when a scrape asks. A variant is assembled when first asked for after a change.

    The data section is built by the caller (deflating it, the expensive part, runs wherever
    the caller likes); replacing sections and picking a body happen on the event loop.
    """

    def __init__(self, health: Callable[[bool], bytes] = no_health) -> None:
        self._data = EMPTY
        self._data_crc = 0
        self._fit = EMPTY
        self._view = EMPTY
        self._render_health = health
        self._health: dict[bool, HealthSection] = {}
        self._bodies: dict[tuple[bool, bool], Body] = {}

    def update(self, data: Section | None = None, fit: Section | None = None,
               view: Section | None = None) -> None:
        """Replace the sections given (None: unchanged)."""
        if data is not None and data is not self._data:
            self._data = data
            self._data_crc = zlib.crc32(data.text)
            self._bodies = {}
        if fit is not None and fit is not self._fit:
            self._fit = fit
            self._bodies = {}
        if view is not None and view is not self._view:
            self._view = view
            self._bodies = {}

    def health_changed(self) -> None:
        """The health section is due again (a refresh attempt, a change of its gauges)."""
        self._health = {}
        self._bodies = {}

    def body(self, openmetrics: bool, compressed: bool) -> Body:
        body = self._bodies.get((openmetrics, compressed))
        if body is None:
            body = self._bodies[openmetrics, compressed] = self._assemble(openmetrics,
                                                                          compressed)
        return body

    def _health_section(self, openmetrics: bool) -> HealthSection:
        found = self._health.get(openmetrics)
        if found is None:
            text = self._render_health(openmetrics)
            found = self._health[openmetrics] = HealthSection(
                text + OPENMETRICS_EOF if openmetrics else text)
        return found

    def _assemble(self, openmetrics: bool, compressed: bool) -> Body:
        health = self._health_section(openmetrics)
        sections = (self._data, self._fit, self._view, health)
        if not compressed:
            return Body.of(tuple(s.text for s in sections))
        crc = zlib.crc32(self._view.text, zlib.crc32(self._fit.text, self._data_crc))
        length = len(self._data.text) + len(self._fit.text) + len(self._view.text)
        trailer = struct.pack("<II", zlib.crc32(health.text, crc),
                              (length + len(health.text)) & 0xFFFFFFFF)
        return Body.of((_GZIP_HEADER, *(s.deflated for s in sections),
                        _FINAL_BLOCK + trailer))
