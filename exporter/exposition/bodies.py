"""The /metrics bodies, finished when their sections change, so that a scrape only picks one.

A body is four sections in a fixed order: the data section (node and workload series, rendered
by the refresh), the fit answers' section (``--fit-shapes``, SPEC section 7), the
Kubernetes-API view's section (``--kube-api``) and the health section (the exporter's own
metrics; for OpenMetrics it ends with ``# EOF``). The data, fit and view sections are gauges
only, the same bytes in both formats; the health section is rendered per format.

Every variant (text 0.0.4 or OpenMetrics, identity or gzip) is assembled from the sections as
soon as one of them changes, so a scrape costs a dictionary lookup and the socket writes,
whatever the node's size.

gzip without compressing the whole body again: each section is deflated on its own, as a raw
deflate segment ended by a sync flush (byte-aligned, no reference into another section), and a
body is the gzip header, the segments in order, an empty final block and the trailer (CRC-32 and
length of the whole). The large data section is deflated once per change and kept; the small
sections are deflated when they change. The result is one ordinary gzip member. Separate gzip
members (RFC 1952 allows a file of several) would be simpler, and Go's and Python's readers take
them whole, but curl and browsers stop after the first member without an error.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
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


@dataclass(frozen=True)
class HealthSections:
    """The health section in both formats; the OpenMetrics one ends with ``# EOF``."""

    text: Section
    openmetrics: Section

    @classmethod
    def of(cls, text: bytes, openmetrics: bytes) -> HealthSections:
        return cls(Section.of(text, HEALTH_GZIP_LEVEL),
                   Section.of(openmetrics + OPENMETRICS_EOF, HEALTH_GZIP_LEVEL))


class Exposition:
    """The current /metrics bodies. Sections are replaced as they change (the data section
    after a refresh that changed it, the view's when the view changed, the health section after
    every refresh attempt); the four variants are assembled then, never per scrape.

    Sections are built by the caller (the expensive part, deflating, runs wherever the caller
    likes); replacing them and picking a body happen on the event loop.
    """

    def __init__(self) -> None:
        self._data = EMPTY
        self._data_crc = 0
        self._fit = EMPTY
        self._view = EMPTY
        self._health = HealthSections(EMPTY, Section.of(OPENMETRICS_EOF))
        self._bodies: dict[tuple[bool, bool], Body] = {}
        self._assemble()

    def update(self, data: Section | None = None, fit: Section | None = None,
               view: Section | None = None, health: HealthSections | None = None) -> None:
        """Replace the sections given (None: unchanged) and assemble the bodies again."""
        if data is not None and data is not self._data:
            self._data = data
            self._data_crc = zlib.crc32(data.text)
        if fit is not None:
            self._fit = fit
        if view is not None:
            self._view = view
        if health is not None:
            self._health = health
        self._assemble()

    def body(self, openmetrics: bool, compressed: bool) -> Body:
        return self._bodies[openmetrics, compressed]

    def _assemble(self) -> None:
        crc = zlib.crc32(self._view.text, zlib.crc32(self._fit.text, self._data_crc))
        length = len(self._data.text) + len(self._fit.text) + len(self._view.text)
        bodies = {}
        for openmetrics in (False, True):
            health = self._health.openmetrics if openmetrics else self._health.text
            sections = (self._data, self._fit, self._view, health)
            bodies[openmetrics, False] = Body.of(tuple(s.text for s in sections))
            trailer = struct.pack("<II", zlib.crc32(health.text, crc),
                                  (length + len(health.text)) & 0xFFFFFFFF)
            bodies[openmetrics, True] = Body.of(
                (_GZIP_HEADER, *(s.deflated for s in sections), _FINAL_BLOCK + trailer))
        self._bodies = bodies  # one assignment: a scrape sees the old bodies or the new ones
