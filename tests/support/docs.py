"""docs/metrics.md read as the contract it is: the documented metrics, and a live scrape
checked against them (the metrics contract, the Kubernetes-API view, the tour, the dashboards and
the rules all hold their figures to it)."""

from __future__ import annotations

import re

from exporter.catalog import CATALOG

from .harness import REPO

ROW = re.compile(r"^\| `(podresources_\w+)` \| (\w+) \| ([^|]*) \|")
PROCESS_FAMILIES = {"process_resident_memory_bytes", "process_virtual_memory_bytes",
                    "process_cpu_seconds", "process_open_fds", "process_max_fds",
                    "process_start_time_seconds"}


def documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for line in (REPO / "docs" / "metrics.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            labels = tuple(re.findall(r"`(\w+)`", match.group(3)))
            rows[match.group(1)] = (match.group(2), labels)
    return rows


def assert_live_matches_docs(scrape, groups: set[str]) -> None:
    """The scrape has exactly the documented families of ``groups``, with their labels."""
    group = {m.name: m.group for m in CATALOG}
    docs = {name: row for name, row in documented().items() if group[name] in groups}
    # prometheus_client's parser names counter families without _total
    expected = {name.removesuffix("_total") if kind == "counter" else name
                for name, (kind, _) in docs.items()}
    if "health" in groups:  # prometheus_client's process collector (docs: Process metrics)
        expected |= PROCESS_FAMILIES
    assert set(scrape.families) == expected
    for (sample, labels), _ in scrape.samples.items():
        if sample.startswith("process_"):
            continue
        base = re.sub(r"_(bucket|count|sum)$", "", sample)
        _kind, allowed = docs.get(sample) or docs[base]
        names = {name for name, _ in labels} - {"le"}
        if sample == "podresources_dra_device_info":
            assert names <= set(allowed)
        else:
            assert names == set(allowed), (sample, names)


def documented_metrics() -> set[str]:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(podresources_\w+)` \|", text, re.MULTILINE))


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: exporter series and recording rules."""
    without_strings = re.sub(r'"[^"]*"|\[[^\]]*\]', '""', expr)  # strings, [1h:1m] ranges
    return {name for name in re.findall(r"[a-zA-Z_:][\w:]*", without_strings)
            if name.startswith("podresources_") or ":" in name}
