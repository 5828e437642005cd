"""The exporter's own counters and histograms as plain values, written by their own writer.

The health section is rendered after every refresh attempt, in both formats. Collecting
``prometheus_client`` instruments for that (locks, one ``Sample`` per line, every value
formatted again) cost about as much as the rest of a steady refresh on a large node. Here a
counter or histogram keeps plain numbers per label set and a version that moves with them;
a label set's lines are written again only after its values changed, so a steady refresh
rewrites the few label sets its own calls touched.

The bytes are ``prometheus_client``'s (a test feeds both the same events and compares): the
first time a label set appears, its lines' ``name{labels} `` prefixes are written by
:mod:`exporter.exposition.textformat` and kept; only values are formatted again. Label sets are
written in the order they first appeared, as ``prometheus_client`` does.

Unlike ``prometheus_client``'s, these instruments take no lock: they are changed on the event
loop only (the kubelet client's hook, the refresh loop, the Kubernetes-API view), and the
worker thread only writes them out. A change landing while a label set is written is written
with the next rendering, as its version is read before its values.
"""

from __future__ import annotations

from ..catalog import MetricDef
from .textformat import float_text, header, line_prefix

LabelValues = tuple[str, ...]


class _Child:
    """One label set's values; ``version`` moves with every change (read it first)."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0

    def values(self) -> list[float]:
        """The values of the label set's lines, in ``prometheus_client``'s line order."""
        raise NotImplementedError


class CounterChild(_Child):
    __slots__ = ("value",)

    def __init__(self) -> None:
        super().__init__()
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount
        self.version += 1

    def values(self) -> list[float]:
        return [self.value]


class HistogramChild(_Child):
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        super().__init__()
        self.bounds = bounds  # ends with +Inf
        self.counts = [0.0] * len(bounds)  # per bucket, not cumulative
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.sum += amount
        for index, bound in enumerate(self.bounds):
            if amount <= bound:
                self.counts[index] += 1
                break
        self.version += 1

    def values(self) -> list[float]:
        """Cumulative buckets, then ``_count`` and ``_sum``."""
        cumulative: list[float] = []
        total = 0.0
        for count in self.counts:
            total += count
            cumulative.append(total)
        return [*cumulative, total, self.sum]


class _Instrument:
    """A family of label sets, each with its own values, and its rendering in both formats."""

    def __init__(self, metric: MetricDef):
        self.metric = metric
        self._children: dict[LabelValues, _Child] = {}
        self._headers: dict[bool, bytes] = {}
        # per format: label values -> (line prefixes, version written, lines written)
        self._written: dict[bool, dict[LabelValues, tuple[list[bytes], int, bytes]]] = {
            False: {}, True: {}}

    def labels(self, *values: object) -> _Child:
        if len(values) != len(self.metric.labels):
            raise ValueError(f"{self.metric.name}: expected labels {self.metric.labels}")
        key = tuple(str(value) for value in values)
        child = self._children.get(key)
        if child is None:
            child = self._children.setdefault(key, self._new_child())
        return child

    def items(self) -> list[tuple[LabelValues, list[float]]]:
        """Each label set's values, in order (for tests and reports)."""
        return [(key, child.values()) for key, child in list(self._children.items())]

    def write(self, openmetrics: bool) -> bytes:
        """The family as ``prometheus_client`` writes it (OpenMetrics without ``# EOF``)."""
        family_header = self._headers.get(openmetrics)
        if family_header is None:
            family_header = self._headers[openmetrics] = header(
                self.family_name, self.metric.help, self.kind, openmetrics)
        written = self._written[openmetrics]
        parts = [family_header]
        # a copy: the event loop may add a label set while a worker thread writes
        for key, child in list(self._children.items()):
            version = child.version  # before the values: a change in between is written later
            entry = written.get(key)
            if entry is None:
                prefixes = self._prefixes(dict(zip(self.metric.labels, key)))
            elif entry[1] == version:
                parts.append(entry[2])
                continue
            else:
                prefixes = entry[0]
            lines = b"".join(prefix + float_text(value).encode() + b"\n"
                             for prefix, value in zip(prefixes, child.values()))
            written[key] = (prefixes, version, lines)
            parts.append(lines)
        return b"".join(parts)

    @property
    def family_name(self) -> str:
        """The name ``prometheus_client`` gives the family (a counter's without ``_total``)."""
        return self.metric.name

    kind = "untyped"

    def _prefixes(self, labels: dict[str, str]) -> list[bytes]:
        """The ``name{labels} `` prefix of each of a label set's lines, in line order."""
        raise NotImplementedError

    def _new_child(self) -> _Child:
        raise NotImplementedError


class Counter(_Instrument):
    kind = "counter"

    def labels(self, *values: object) -> CounterChild:
        child = super().labels(*values)
        assert isinstance(child, CounterChild)
        return child

    @property
    def family_name(self) -> str:
        return self.metric.name.removesuffix("_total")  # catalogued with _total

    def _prefixes(self, labels: dict[str, str]) -> list[bytes]:
        return [line_prefix(self.family_name + "_total", labels.items())]

    def _new_child(self) -> CounterChild:
        return CounterChild()


class Histogram(_Instrument):
    kind = "histogram"

    def __init__(self, metric: MetricDef, buckets: tuple[float, ...]):
        super().__init__(metric)
        self.bounds = (*buckets, float("inf"))
        if not metric.labels:
            self.labels()  # an unlabelled histogram has its one label set from the start

    def labels(self, *values: object) -> HistogramChild:
        child = super().labels(*values)
        assert isinstance(child, HistogramChild)
        return child

    def observe(self, amount: float) -> None:
        """Observe an unlabelled histogram."""
        self.labels().observe(amount)

    def _prefixes(self, labels: dict[str, str]) -> list[bytes]:
        """Each bucket's line (``le`` among the labels), then ``_count`` and ``_sum``."""
        name, pairs = self.metric.name, list(labels.items())
        buckets = [line_prefix(f"{name}_bucket", [*pairs, ("le", float_text(bound))])
                   for bound in self.bounds]
        return [*buckets, line_prefix(f"{name}_count", pairs), line_prefix(f"{name}_sum", pairs)]

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.bounds)
