"""How long each tier of the suite took, printed at the end of a run (a pytest plugin).

Per tier (``tests/unit``, ``tests/integration``, ``tests/spec``, ``tests/deploy``): the tests
run, their wall time (setup, call and teardown, fixtures included) and the CPU time this
process spent in them (a test's subprocesses — simulators, exporters, Prometheus, the real
kubelet — are not in it: a tier whose wall time is far above its CPU time waits on them or on
a loaded machine); then the slowest test files. ``tests/run.sh`` passes the time it spent
installing and building in ``PODRESOURCES_SETUP_TIMES`` (``name=seconds`` pairs), printed
first, so that one table at the end says where a run's time went.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest

SETUP_TIMES = "PODRESOURCES_SETUP_TIMES"
SLOWEST_FILES = 8
_TESTS = Path(__file__).resolve().parent.parent


@dataclass
class Spent:
    tests: int = 0
    wall: float = 0.0
    cpu: float = 0.0


class SuiteTimes:
    """Wall and CPU time per tier and per file, collected test by test."""

    def __init__(self) -> None:
        self.tiers: dict[str, Spent] = {}
        self.files: dict[str, Spent] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        wall, cpu = time.monotonic(), time.process_time()
        yield
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        path = Path(str(item.fspath)).resolve()
        try:
            relative = path.relative_to(_TESTS)
        except ValueError:
            relative = Path(path.name)
        tier = relative.parts[0] if len(relative.parts) > 1 else "."
        for table, key in ((self.tiers, tier), (self.files, str(relative))):
            spent = table.setdefault(key, Spent())
            spent.tests += 1
            spent.wall += wall
            spent.cpu += cpu

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.tiers:
            return
        write = terminalreporter.write_line
        terminalreporter.section("time per tier")
        for name, seconds in setup_times(os.environ.get(SETUP_TIMES, "")):
            write(f"  {name:<34} {seconds:>8.1f} s")
        for tier, spent in sorted(self.tiers.items()):
            write(f"  tests/{tier:<28} {spent.wall:>8.1f} s wall  {spent.cpu:>7.1f} s CPU  "
                  f"{spent.tests:>5} tests")
        slowest = sorted(self.files.items(), key=lambda kv: -kv[1].wall)[:SLOWEST_FILES]
        if len(self.files) > 1:
            write("  slowest files:")
            for name, spent in slowest:
                write(f"    {name:<56} {spent.wall:>7.1f} s wall  {spent.cpu:>6.1f} s CPU")


def setup_times(text: str) -> list[tuple[str, float]]:
    """``installs=41 go-builds=96`` -> [("installs", 41.0), ...]; malformed pairs are
    left out."""
    found = []
    for pair in text.split():
        name, _, value = pair.partition("=")
        try:
            found.append((name.replace("-", " "), float(value)))
        except ValueError:
            continue
    return found


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SuiteTimes(), "suite-times")
