"""Content negotiation for /metrics: which format and which coding a client gets.

Proactive negotiation as RFC 9110 section 12 defines it, over exactly the variants the exporter
produces: the Prometheus text format 0.0.4 and OpenMetrics 1.0.0 (also offered under its
pre-release label 0.0.1, the same bytes, as Prometheus and client_golang do), identity or gzip.
Quality values count, ``q=0`` refuses, the most specific media range applies, and a version
the exporter does not produce (OpenMetrics 2.0.0, say) is never claimed. Pure functions over
header strings: no I/O, no exceptions for any input.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

OPENMETRICS_TYPE = "application/openmetrics-text"
TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"
# Escaping schemes (Prometheus' content negotiation): all produce the same bytes here, because
# every metric and label name the exporter writes is a legacy (underscore) name.
_ESCAPING = {"allow-utf-8", "allow-utf8", "underscores", "dots", "values"}
_MAX_ELEMENTS = 64  # a longer Accept is cut here; nothing legitimate comes close


@dataclass(frozen=True)
class Format:
    """One exposition variant: the bytes (OpenMetrics or not) and the Content-Type it needs."""

    openmetrics: bool
    content_type: str


@dataclass(frozen=True)
class _Variant:
    kind: str
    subtype: str
    version: str
    openmetrics: bool


# In order of preference when a client likes several equally (``*/*``: plain text, as curl
# users and client_python expect).
_VARIANTS = (
    _Variant("text", "plain", "0.0.4", False),
    _Variant("application", "openmetrics-text", "1.0.0", True),
    _Variant("application", "openmetrics-text", "0.0.1", True),
)
DEFAULT_FORMAT = Format(False, TEXT_0_0_4)


def _split(value: str, separator: str) -> list[str]:
    """Split at ``separator`` outside double-quoted strings (RFC 9110 quoted-string)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _quality(value: str) -> float | None:
    """An RFC 9110 qvalue (0 to 1, up to three decimals); None when malformed."""
    value = value.strip()
    if not value or len(value) > 5 or not all(c.isdigit() or c == "." for c in value):
        return None
    try:
        quality = float(value)
    except ValueError:
        return None
    return quality if 0.0 <= quality <= 1.0 and math.isfinite(quality) else None


def _elements(header: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(name, {parameter: value}, q)`` for each well-formed element of a list header."""
    for element in _split(header, ",")[:_MAX_ELEMENTS]:
        pieces = _split(element, ";")
        name = pieces[0].strip().lower()
        if not name:
            continue
        params: dict[str, str] = {}
        quality = 1.0
        malformed = False
        for piece in pieces[1:]:
            key, sep, value = piece.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not sep or not key:
                malformed = True
                break
            if key == "q":
                parsed = _quality(value)
                if parsed is None:
                    malformed = True
                quality = parsed if parsed is not None else 0.0
                break  # what follows q are accept-extensions, which mean nothing here
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace("\\", "")
            params[key] = value
        if not malformed:
            yield name, params, quality


def _matches(range_type: str, params: dict[str, str], variant: _Variant) -> int | None:
    """How specifically a media range names the variant (higher is more); None: not at all."""
    kind, sep, subtype = range_type.partition("/")
    if not sep:
        return None
    if kind == "*":
        return 0 if subtype == "*" and not params else None
    if kind != variant.kind:
        return None
    if subtype == "*":
        return 1 if not params else None
    if subtype != variant.subtype:
        return None
    for key, value in params.items():
        if key == "version" and value != variant.version:
            return None
        if key == "charset" and value.lower() != "utf-8":
            return None
        if key == "escaping" and value.lower() not in _ESCAPING:
            return None
        if key not in ("version", "charset", "escaping"):
            return None
    return 3 if "version" in params else 2


def choose_format(accept: str | None) -> Format:
    """The variant an ``Accept`` header prefers; Prometheus text 0.0.4 when it names none.

    Prometheus' negotiation rules make text 0.0.4 the last resort rather than answering 406,
    so a client that refuses everything (``*/*;q=0``) still gets it.
    """
    if not accept:
        return DEFAULT_FORMAT
    ranges = list(_elements(accept))
    best = None
    for preference, variant in enumerate(_VARIANTS):
        applied = None  # (specificity, -position, q, escaping) of the most specific range
        for position, (range_type, params, quality) in enumerate(ranges):
            specificity = _matches(range_type, params, variant)
            if specificity is None:
                continue
            if applied is None or specificity > applied[0]:
                applied = (specificity, -position, quality, params.get("escaping"))
        if applied is None or applied[2] <= 0:
            continue
        key = (applied[2], applied[0], applied[1], -preference)
        if best is None or key > best[0]:
            best = (key, variant, applied[3])
    if best is None:
        return DEFAULT_FORMAT
    _, variant, escaping = best
    if not variant.openmetrics:
        return DEFAULT_FORMAT
    content_type = f"{OPENMETRICS_TYPE}; version={variant.version}; charset=utf-8"
    if variant.version == "1.0.0":  # text formats 1.0.0 and later name their escaping
        content_type += f"; escaping={(escaping or 'underscores').lower()}"
    return Format(True, content_type)


def choose_coding(accept_encoding: str | None) -> str | None:
    """``"gzip"`` or ``"identity"`` for an ``Accept-Encoding`` header; None if neither will do.

    RFC 9110 section 12.5.3: no header means no preference (identity is sent); ``x-gzip`` is
    gzip; ``*`` stands for any coding not listed; identity is acceptable unless refused by
    ``identity;q=0`` or by ``*;q=0`` without an ``identity`` entry, but when the header does
    not rate it, any coding it does rate is preferred (``gzip;q=0.5`` gets gzip, as Go's
    content-encoding negotiation decides too); otherwise the higher q wins, gzip on a tie.
    """
    if accept_encoding is None:
        return "identity"
    gzip = identity = star = None
    for coding, _, quality in _elements(accept_encoding):
        if coding in ("gzip", "x-gzip"):
            gzip = quality if gzip is None else max(gzip, quality)
        elif coding == "identity":
            identity = quality if identity is None else max(identity, quality)
        elif coding == "*":
            star = quality if star is None else max(star, quality)
    if gzip is None:
        gzip = star if star is not None else 0.0
    if identity is None:
        identity = star  # still None: acceptable, below anything rated
    if gzip > 0 and (identity is None or gzip >= identity):
        return "gzip"
    if identity is None or identity > 0:
        return "identity"
    return None
