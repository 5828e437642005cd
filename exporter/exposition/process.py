"""The ``process_*`` figures every exporter has (memory, CPU, open files, start time), read
from ``/proc`` as ``prometheus_client``'s process collector reads them, with its names, help
texts and order, without importing that package on the default path."""

from __future__ import annotations

import os
import resource

from .textformat import Family, gauge

_PAGE_SIZE = resource.getpagesize()
_TICKS = os.sysconf("SC_CLK_TCK")


def boot_time(proc: str = "/proc") -> float:
    """Seconds since the epoch at boot (``btime``); 0 when ``/proc`` cannot be read."""
    try:
        with open(os.path.join(proc, "stat"), "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


class ProcessFigures:
    """Collects the ``process_*`` families of this process (none without ``/proc``)."""

    def __init__(self, proc: str = "/proc"):
        self._proc = proc
        self._boot_time = boot_time(proc)

    def collect(self) -> list[Family]:
        if not self._boot_time:
            return []
        own = os.path.join(self._proc, "self")
        families: list[Family] = []
        try:
            with open(os.path.join(own, "stat"), "rb") as stat:
                parts = stat.read().split(b")")[-1].split()
            cpu = Family("process_cpu_seconds", "Total user and system CPU time spent in seconds.",
                         "counter")
            cpu.add({}, (float(parts[11]) + float(parts[12])) / _TICKS)
            families += [
                gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                      float(parts[20])),
                gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                      float(parts[21]) * _PAGE_SIZE),
                gauge("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds.",
                      float(parts[19]) / _TICKS + self._boot_time),
                cpu]
        except OSError:
            pass
        try:
            with open(os.path.join(own, "limits"), "rb") as limits:
                max_fds = next(float(line.split()[3]) for line in limits
                               if line.startswith(b"Max open file"))
            open_fds = len(os.listdir(os.path.join(own, "fd")))
            families += [gauge("process_open_fds", "Number of open file descriptors.", open_fds),
                         gauge("process_max_fds", "Maximum number of open file descriptors.",
                               max_fds)]
        except (OSError, StopIteration):
            pass
        return families
