"""Log formats: one record, one line, whatever the names in it contain."""

from __future__ import annotations

import io
import json
import logging

import pytest

from exporter.logs import setup_logging

# A pod name as a hostile kubelet (or device plugin, or HTTP client) could send it: a newline
# followed by a fake record, a terminal escape, a carriage return, NEL and U+2028.
FORGED = ("web-0\n2026-01-01T00:00:00.000Z ERROR   exporter.refresh: kubelet lost\r"
          "\x1b[2J\x85\u2028\x00\x7fend")


@pytest.fixture
def capture():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def test_text_format_escapes_control_characters(capture):
    setup_logging("info", "text", stream=capture)
    logging.getLogger("exporter.refresh").warning("pod %s: cpu held twice", FORGED)
    output = capture.getvalue()
    assert output.count("\n") == 1 and output.endswith("\n")
    line = output[:-1]
    assert "\r" not in line and "\x1b" not in line and "\x85" not in line
    assert line.endswith(" WARNING exporter.refresh: pod web-0\\n2026-01-01T00:00:00.000Z ERROR"
                         "   exporter.refresh: kubelet lost\\r\\x1b[2J\\x85\\u2028\\x00\\x7fend: "
                         "cpu held twice")


def test_text_format_indents_every_traceback_line(capture):
    setup_logging("info", "text", stream=capture)
    try:
        raise ValueError(f"bad name {FORGED}")
    except ValueError:
        logging.getLogger("exporter").exception("refresh failed for %s", "a\nb")
    first, *rest = capture.getvalue().rstrip("\n").split("\n")
    assert first.endswith("ERROR   exporter: refresh failed for a\\nb")
    assert rest and all(line.startswith("    ") for line in rest)
    assert any("ValueError: bad name web-0" in line for line in rest)


def test_json_format_is_one_parseable_line_per_record(capture):
    setup_logging("info", "json", stream=capture)
    logging.getLogger("exporter.refresh").warning("pod %s", FORGED)
    output = capture.getvalue()
    assert len(output.splitlines()) == 1  # splitlines also breaks at NEL and U+2028
    assert json.loads(output)["msg"] == f"pod {FORGED}"
