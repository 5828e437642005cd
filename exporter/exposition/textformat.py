"""The Prometheus text format 0.0.4 and OpenMetrics 1.0, as ``prometheus_client`` writes them,
for the families a default run renders itself: gauges, counters and histograms.

A default run writes its data and health sections without importing ``prometheus_client``:
the package's import pulls in its HTTP server, WSGI and URL modules, about 1 MiB of a process
that serves ``/metrics`` with aiohttp. The bytes are the same: tests compare this writer with
``prometheus_client``'s on the same families, escapes and values. The parts that need the
package (the fit answers' counter and the Kubernetes-API view's families) import it when a
flag turns them on.

Only what the exporter writes is covered: names and label names are the catalog's (valid in
the legacy character set, written as they are); no timestamps, exemplars, units or
``_created`` samples.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")


class Sample(NamedTuple):
    """One line of a family; the fields ``prometheus_client``'s own ``Sample`` has, so either
    writer takes either family."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp: Any = None
    exemplar: Any = None
    native_histogram: Any = None


class Family:
    """A family of samples (gauge or counter) with the attributes ``prometheus_client``'s
    ``Metric`` has."""

    __slots__ = ("documentation", "name", "samples", "type", "unit")

    def __init__(self, name: str, documentation: str, kind: str = "gauge"):
        self.name = name
        self.documentation = documentation
        self.type = kind
        self.unit = ""
        self.samples: list[Sample] = []

    def add(self, labels: Mapping[str, str], value: float) -> None:
        """One sample; a counter's is named ``<name>_total``."""
        name = self.name + "_total" if self.type == "counter" else self.name
        self.samples.append(Sample(name, dict(labels), value))


def gauge(name: str, documentation: str, value: float) -> Family:
    """An unlabelled gauge with its one value."""
    family = Family(name, documentation)
    family.add({}, value)
    return family


def float_text(value: float) -> str:
    """A sample value as Go (and ``prometheus_client``) writes it: ``+Inf``, ``NaN``, Python's
    shortest repr, and an exponent from 1e+06 on for positive values."""
    value = float(value)
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _checked(name: str) -> str:
    if not _LEGACY_NAME.match(name):
        raise ValueError(f"not a metric or label name this writer handles: {name!r}")
    return name


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def header(name: str, documentation: str, kind: str, openmetrics: bool) -> bytes:
    """A family's ``# HELP`` and ``# TYPE`` lines. The text format names a counter's family
    ``<name>_total`` and leaves double quotes in help texts unescaped; OpenMetrics does
    neither."""
    _checked(name)
    if openmetrics:
        return (f"# HELP {name} {_label_value(documentation)}\n"
                f"# TYPE {name} {kind}\n").encode()
    if kind == "counter":
        name += "_total"
    help_text = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n".encode()


def line_prefix(name: str, labels: Iterable[tuple[str, str]]) -> bytes:
    """A sample line up to its value, ``name{labels} ``, the labels sorted by name (the same
    in both formats)."""
    pairs = ",".join(f'{_checked(key)}="{_label_value(value)}"'
                     for key, value in sorted(labels))
    return f"{_checked(name)}{{{pairs}}} ".encode() if pairs else f"{_checked(name)} ".encode()


def write(families: Iterable[Any], openmetrics: bool = False) -> bytes:
    """Families (ours, or ``prometheus_client``'s with the same attributes) as one format
    writes them (OpenMetrics without ``# EOF``)."""
    parts: list[bytes] = []
    for family in families:
        parts.append(header(family.name, family.documentation, family.type, openmetrics))
        for sample in family.samples:
            parts.append(line_prefix(sample.name, sample.labels.items()))
            parts.append(float_text(sample.value).encode())
            parts.append(b"\n")
    return b"".join(parts)
