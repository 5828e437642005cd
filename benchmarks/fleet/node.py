"""One node's /metrics, from the real simulator and exporter processes: the samples a fleet is
made of, and the series per node (by kind and flag) and per pod replaced."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..harness import free_port, stop
from . import REPO, http

FIT_SHAPES = "shapes:\n  cpu4: {cpu: 4}\n  gpu1: {cpu: 1, nvidia.com/gpu: 1}\n"
WORKLOAD_FAMILIES = ("podresources_container_", "podresources_pod_", "podresources_device_info",
                     "podresources_dra_device_info")
HEALTH_FAMILIES = ("podresources_api_", "podresources_refresh_", "podresources_data_issues",
                   "process_", "podresources_up", "podresources_backoff",
                   "podresources_last_refresh", "podresources_build_info",
                   "podresources_kubelet_", "podresources_node_info", "python_")
SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$")


def parse_exposition(text: str) -> list[tuple[str, str, float, bool]]:
    """(name, labels inside the braces, value, counter-like) of each sample."""
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            raise ValueError(f"cannot parse {line!r}")
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count|total)$", "", name)
        kind = types.get(name) or types.get(family) or types.get(family + "_total") or "gauge"
        samples.append((name, labels or "", float(value), kind in ("counter", "histogram",
                                                                   "summary")))
    return samples


@contextlib.contextmanager
def simulated_node(profile: str, workdir: Path):
    """The simulator of ``profile``: yields (socket, sysfs, control URL)."""
    directory = Path(tempfile.mkdtemp(prefix=f"fleet-{profile}-", dir=workdir))
    sock, sysfs = directory / "kubelet.sock", directory / "sys"
    control = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--profile", profile, "--socket",
         str(sock), "--sysfs-root", str(sysfs), "--control-address", f"127.0.0.1:{control}",
         "--seed", "1", "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"simulator of {profile} did not start")
            time.sleep(0.1)
        yield sock, sysfs, f"http://127.0.0.1:{control}"
    finally:
        stop(proc)
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def exporter(sock: Path, sysfs: Path, node_name: str, shapes: Path, *flags: str):
    """An exporter process on the simulator; yields a function returning its /metrics."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "--socket", str(sock), "--sysfs-root", str(sysfs),
         "--listen-address", f"127.0.0.1:{port}", "--node-name", node_name, "--fit-shapes",
         str(shapes), "--interval", "0.5", "--log-level", "warning", *flags],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def metrics() -> str:
        return http(f"http://127.0.0.1:{port}/metrics", timeout=30).decode()

    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                text = metrics()
                refreshes = re.search(r"^podresources_refresh_duration_seconds_count\S* (\S+)$",
                                      text, re.MULTILINE)
                if "\npodresources_up 1.0" in text and refreshes and float(refreshes[1]) >= 3:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("exporter did not come up")
            time.sleep(0.25)
        yield metrics
    finally:
        stop(proc)


def profile_node_name(profile: str) -> str:
    return json.loads((REPO / "exporter" / "simulator" / "profiles" / f"{profile}.json")
                      .read_text())["node_name"]


def capture(profile: str, workdir: Path) -> list[tuple[str, str, float, bool]]:
    shapes = workdir / "shapes.yaml"
    shapes.write_text(FIT_SHAPES)
    with simulated_node(profile, workdir) as (sock, sysfs, _), \
            exporter(sock, sysfs, profile_node_name(profile), shapes) as metrics:
        return parse_exposition(metrics())


def family_kind(name: str) -> str:
    if name.startswith(WORKLOAD_FAMILIES):
        return "workload"
    if name.startswith(HEALTH_FAMILIES):
        return "health"
    return "node"


def series_costs(profiles: list[str], workdir: Path, churn_rounds: int = 5) -> dict:
    """Series per node and per kind, for each profile and flag, and the churn of replacing
    one pod."""
    shapes = workdir / "shapes.yaml"
    shapes.write_text(FIT_SHAPES)
    costs = {}
    for profile in profiles:
        entry: dict = {}
        with simulated_node(profile, workdir) as (sock, sysfs, control):
            for label, flags in (("default", ()), ("--no-device-info", ("--no-device-info",)),
                                 ("--no-workload-metrics", ("--no-workload-metrics",)),
                                 ("both", ("--no-workload-metrics", "--no-device-info"))):
                with exporter(sock, sysfs, profile_node_name(profile), shapes,
                              *flags) as metrics:
                    samples = parse_exposition(metrics())
                    kinds: dict[str, int] = {}
                    for name, *_ in samples:
                        kinds[family_kind(name)] = kinds.get(family_kind(name), 0) + 1
                    kinds["device_info"] = sum(1 for s in samples if s[0].startswith(
                        ("podresources_device_info", "podresources_dra_device_info")))
                    kinds["total"] = len(samples)
                    if label == "default":
                        kinds["pods"] = len({re.search(r'pod="([^"]*)"', s[1])[1]
                                             for s in samples if 'pod="' in s[1]})
                        kinds["churn"] = churn(metrics, control, churn_rounds)
                    entry[label] = kinds
        costs[profile] = entry
    return costs


def churn(metrics, control: str, rounds: int) -> dict:
    """Series that end and begin when one pod is replaced (mean over ``rounds``)."""
    def series() -> set[tuple[str, str]]:
        return {(name, labels) for name, labels, _, _ in parse_exposition(metrics())
                if family_kind(name) != "health"}

    ended, began = [], []
    for _ in range(rounds):
        before = series()
        http(control + "/churn", {"pods": 1})
        deadline = time.monotonic() + 20
        while (after := series()) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.2)  # the refresh after the one that saw the change: everything settled
        after = series()
        ended.append(len(before - after))
        began.append(len(after - before))
    return {"ended_per_pod": statistics.fmean(ended), "began_per_pod": statistics.fmean(began)}
