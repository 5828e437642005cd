"""The text format and OpenMetrics writer of a default run against prometheus_client's own, on
the same families: escapes, values, counters, and the process_* figures."""

from __future__ import annotations

import math
import os

import pytest
from prometheus_client import CollectorRegistry, Counter, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.utils import floatToGoString

from exporter.exposition.process import ProcessFigures
from exporter.exposition.rendering import FamilyWriter, _Families
from exporter.exposition.textformat import Family, float_text, line_prefix, write

VALUES = (0, 1, -1, 0.5, 0.1, 1e-7, 123456.0, 1234567.0, 1e6, 999999.9, 2**53, 1.5e300, -1e6,
          math.inf, -math.inf, math.nan, 65536 * 1024 * 1024, 1_700_000_000.5)


@pytest.mark.parametrize("value", VALUES)
def test_values_are_written_as_prometheus_client_writes_them(value):
    assert float_text(value) == floatToGoString(value)


def test_values_by_hand():
    assert [float_text(v) for v in (1e6, 1234567.0, 0.25, 3, math.inf)] == [
        "1e+06", "1.234567e+06", "0.25", "3.0", "+Inf"]


def reference(families, openmetrics):
    registry = _Families(families)
    if openmetrics:
        return generate_openmetrics(registry)[:-len(b"# EOF\n")]
    return generate_latest(registry)


@pytest.mark.parametrize("openmetrics", [False, True])
def test_gauges_with_escapes_are_prometheus_clients_bytes(openmetrics):
    documentation = 'A "quoted" help\\text\nover two lines.'
    ours = Family("podresources_test_gauge", documentation)
    theirs = GaugeMetricFamily("podresources_test_gauge", documentation,
                               labels=["zone", "a_label"])
    for index, value in enumerate(('plain', 'a "quote"', "back\\slash", "new\nline", "ünïcode",
                                   "")):
        ours.add({"zone": value, "a_label": str(index)}, index * 0.5)
        theirs.add_metric([value, str(index)], index * 0.5)
    unlabelled = Family("podresources_test_unlabelled", "No labels.")
    unlabelled.add({}, 7)
    expected = reference([theirs, unlabelled], openmetrics)
    assert write([ours, unlabelled], openmetrics) == expected
    assert FamilyWriter(openmetrics).write([ours, unlabelled]) == expected
    # by hand: labels sorted by name, the value after one space
    assert b'podresources_test_gauge{a_label="3",zone="new\\nline"} 1.5\n' in expected


@pytest.mark.parametrize("openmetrics", [False, True])
def test_a_counter_family_is_named_as_each_format_names_it(openmetrics):
    registry = CollectorRegistry(auto_describe=False)
    theirs = Counter("podresources_test_events", "Events.", ["kind"], registry=registry)
    theirs.labels("a").inc(2)
    (collected,) = registry.collect()
    collected.samples = [s for s in collected.samples if not s.name.endswith("_created")]
    ours = Family("podresources_test_events", "Events.", "counter")
    ours.add({"kind": "a"}, 2)
    assert write([ours], openmetrics) == reference([collected], openmetrics)
    name = b"podresources_test_events" if openmetrics else b"podresources_test_events_total"
    assert write([ours], openmetrics).startswith(b"# HELP " + name + b" Events.\n")


def test_a_name_outside_the_legacy_set_is_refused():
    with pytest.raises(ValueError):
        line_prefix("podresources.test", [])
    with pytest.raises(ValueError):
        line_prefix("podresources_test", [("a-label", "x")])


def test_process_figures_are_prometheus_clients():
    ours = ProcessFigures().collect()
    theirs = list(ProcessCollector(registry=None).collect())
    assert [(f.name, f.type, f.documentation) for f in ours] == [
        (f.name, f.type, f.documentation) for f in theirs]
    values = {f.name: f.samples[0].value for f in ours}
    expected = {f.name: f.samples[0].value for f in theirs}
    assert values["process_start_time_seconds"] == expected["process_start_time_seconds"]
    assert values["process_max_fds"] == expected["process_max_fds"]
    assert abs(values["process_open_fds"] - len(os.listdir("/proc/self/fd"))) <= 2
    assert abs(values["process_resident_memory_bytes"]
               - expected["process_resident_memory_bytes"]) < 16 * 2**20
    for openmetrics in (False, True):  # the headers, as both formats write them
        text = write(ours, openmetrics)
        heads = [line for line in text.splitlines() if line.startswith(b"#")]
        assert heads == [line for line in reference(theirs, openmetrics).splitlines()
                         if line.startswith(b"#")]


def test_without_proc_there_are_no_process_figures(tmp_path):
    assert ProcessFigures(str(tmp_path)).collect() == []
