"""Helpers shared by the benchmark and the soak script."""

from __future__ import annotations

import asyncio
import socket
import statistics
from collections.abc import Iterable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int | None:
    """Resident memory of a process, from /proc; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points; 0 with fewer than three."""
    if len(points) < 3:
        return 0.0
    xs, ys = zip(*points)
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    denominator = sum((x - mean_x) ** 2 for x in xs)
    if denominator == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / denominator


async def terminate(processes: Iterable[asyncio.subprocess.Process | None]) -> None:
    """SIGTERM each process still running, SIGKILL after 10 s without an exit."""
    for proc in processes:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
