"""Shared test machinery: a simulated kubelet on a temp socket, the exporter on a real port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.commands.serve import build_refresher, numa_page_of
from exporter.refresh.settings import Settings
from exporter.simulator import (
    Faults,
    SimulatedNode,
    Simulator,
    load_profile,
    parse_profile,
    write_sysfs,
)
from exporter.simulator.profile import NodeSpec
from exporter.web.server import make_app, start_http

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
GiB = 1 << 30


def short_tmpdir() -> Path:
    """Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer."""
    return Path(tempfile.mkdtemp(prefix="pre-", dir="/tmp"))


def require_tool(name: str, hint: str) -> str:
    """Path of an external tool; skip locally when missing, fail under CI=true."""
    for candidate in (REPO / ".tools" / "bin" / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return str(candidate)
    message = f"{name} not found ({hint}); the README's test command installs it"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


class Scrape:
    """A parsed /metrics page."""

    def __init__(self, text: str):
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.families: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.families[family.name] = family.type
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels) -> float:
        key = (name, frozenset(labels.items()))
        if key not in self.samples:
            raise KeyError(f"no sample {name}{labels}; have {sorted(self.series(name).items())}")
        return self.samples[key]

    def get(self, name: str, **labels) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def series(self, name: str, **match) -> dict[tuple, float]:
        """Samples of ``name`` whose labels include ``match``, keyed by sorted label items."""
        found = {}
        for (sample, labels), value in self.samples.items():
            if sample == name and all(dict(labels).get(k) == v for k, v in match.items()):
                found[tuple(sorted(labels))] = value
        return found

    def by(self, name: str, *keys: str, **match) -> dict:
        """``{label values: value}`` for one metric, e.g.
        ``by("...cpus_allocated", "numa_node")``."""
        result = {}
        for labels, value in self.series(name, **match).items():
            d = dict(labels)
            key = tuple(d.get(k, "") for k in keys)
            result[key[0] if len(keys) == 1 else key] = value
        return result


class Node:
    """A simulated node: fake sysfs plus a kubelet simulator on a unix socket; with
    ``pods_api``, its Pods API too. The exporter's settings name the Pods API socket either
    way (absent without ``pods_api``), never the host's."""

    def __init__(self, spec: NodeSpec | dict | str, faults: Faults | None = None,
                 pods_api: bool = False, **sim_options):
        if isinstance(spec, dict):
            spec = parse_profile(spec)
        elif isinstance(spec, str):
            spec = load_profile(spec)
        self.spec = spec
        self.dir = short_tmpdir()
        self.sysfs = write_sysfs(spec, self.dir / "sys")
        self.socket = self.dir / "pod-resources" / "kubelet.sock"
        self.pods_api_socket = self.dir / "pods-api" / "pods-api.sock"
        if pods_api:
            sim_options["pods_api_socket"] = self.pods_api_socket
        self.simulator = Simulator(SimulatedNode(spec), self.socket, faults=faults, **sim_options)

    async def __aenter__(self) -> Node:
        await self.simulator.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.simulator.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def settings(self, **overrides) -> Settings:
        values = dict(socket=str(self.socket), sysfs_root=str(self.sysfs), interval=0.2,
                      allocatable_interval=60.0, node_name=self.spec.name,
                      pods_api_socket=str(self.pods_api_socket))
        values.update(overrides)
        return Settings(**values)


class Exporter:
    """The exporter app (refresh loop + HTTP server) on 127.0.0.1 with a free port."""

    def __init__(self, settings: Settings, run_loop: bool = True):
        self.settings = settings
        self.refresher = build_refresher(settings)  # with the Kubernetes-API view if asked
        self.run_loop = run_loop
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Exporter:
        app = make_app(self.refresher, numa_page=numa_page_of(self.refresher))
        self.runner, self.port = await start_http(app, "127.0.0.1", 0)
        self.session = aiohttp.ClientSession()
        if self.run_loop:
            self._task = asyncio.create_task(self.refresher.run())
        return self

    async def __aexit__(self, *exc) -> None:
        self.refresher.stop()
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout=15)
        await self.refresher.client.close()
        await self.session.close()
        await self.runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def get(self, path: str = "/metrics", **kwargs) -> aiohttp.ClientResponse:
        async with self.session.get(self.url + path, **kwargs) as response:
            await response.read()
            return response

    async def scrape(self) -> Scrape:
        async with self.session.get(self.url + "/metrics") as response:
            assert response.status == 200
            return Scrape(await response.text())

    async def wait_for(self, predicate, timeout: float = 10.0, what: str = "condition") -> Scrape:
        """Scrape until ``predicate(scrape)`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            scrape = await self.scrape()
            if predicate(scrape):
                return scrape
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; last scrape:\n"
                                     + "\n".join(line for line in scrape.text.splitlines()
                                                 if not line.startswith("#"))[:4000])
            await asyncio.sleep(0.05)

    async def ready(self, timeout: float = 10.0) -> Scrape:
        return await self.wait_for(lambda s: s.get("podresources_up") == 1.0, timeout, "up == 1")


async def scrape_port_until(port: int, predicate, timeout: float = 20.0,
                            what: str = "the exporter to get there",
                            seen: list[Scrape] | None = None) -> Scrape:
    """Scrape an exporter process on ``port`` until ``predicate(scrape)`` holds; every scrape
    is appended to ``seen`` when given."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                    scrape = Scrape(await response.text())
                    if seen is not None:
                        seen.append(scrape)
                    if predicate(scrape):
                        return scrape
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.1)


async def terminate(proc: asyncio.subprocess.Process, timeout: float = 10.0) -> float:
    """SIGTERM an exporter process and wait for it; returns how long it took to exit."""
    started = time.monotonic()
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def process(*args: str, env: dict | None = None):
    """Run ``python -m exporter ...`` as a real process; terminate it afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "exporter", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        stop_popen(proc)


def stop_popen(proc: subprocess.Popen) -> None:
    """SIGTERM a child process still running; SIGKILL after 10 s without an exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def small_profile(**overrides) -> dict:
    """Two NUMA nodes x 4 CPUs; tests add devices and pods."""
    profile = {
        "name": "test", "node_name": "test-node", "kubernetes_version": "1.37", "seed": 3,
        "numa_nodes": [
            {"id": 0, "cpus": "0-3", "memory": "16Gi", "hugepages": {"2Mi": 512}},
            {"id": 1, "cpus": "4-7", "memory": "16Gi", "hugepages": {"2Mi": 512}},
        ],
        "reserved_cpus": "0",
        "devices": [], "pods": [],
    }
    profile.update(overrides)
    return profile
