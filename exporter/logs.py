"""Log setup: one line per event, as text or JSON (``--log-format``, ``--log-level``)."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import IO, Any

LEVELS = ("debug", "info", "warning", "error")

# C0 and C1 controls, DEL and the Unicode line and paragraph separators: anything a terminal or
# a log shipper may take for the end of a line or a command.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """Control characters as visible escapes (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return _CONTROL.sub(lambda match: _ESCAPES.get(match.group())
                        or (f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100
                            else f"\\u{ord(match.group()):04x}"), text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log pipelines that parse fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        # JSON escapes C0 controls itself; DEL, C1 and U+2028/U+2029 may stay raw, and some
        # line splitters (Python's splitlines, older JavaScript) break lines at them.
        return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}",
                            json.dumps(entry, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """One line per record: ``time level logger: message``.

    Messages carry names the kubelet, the Kubernetes API and HTTP clients chose (pod names,
    device ids, request lines); their control characters are escaped so that no name can end
    a line and forge a record after it. A traceback keeps its lines, each indented, so no line
    of it can pass for a record either.
    """

    converter = staticmethod(time.gmtime)

    def __init__(self) -> None:
        super().__init__("%(asctime)s.%(msecs)03dZ %(levelname)-7s %(name)s: %(message)s",
                         datefmt="%Y-%m-%dT%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        cached = record.exc_text  # another handler's rendering of the traceback: not ours
        record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def formatException(self, exc_info: Any) -> str:
        return "\n".join("    " + escape_controls(line)
                         for line in super().formatException(exc_info).split("\n"))

    def formatStack(self, stack_info: str) -> str:
        return "\n".join("    " + escape_controls(line) for line in stack_info.split("\n"))


def setup_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Libraries speak only when something is wrong.
    for noisy in ("aiohttp.access", "asyncio", "grpc"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
