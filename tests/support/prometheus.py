"""The Prometheus lines the tests run on, and a real Prometheus server to run them with.

Users run Prometheus 3: 3.13 is the LTS line, 3.16 the current one; 2.x is out of support and
some still run it. ``3.13`` and ``3.16`` are the builds of ``tests/tools/prometheus3.sh`` in
``.tools/prometheus3/<line>/``, ``2.x`` is Debian's package (``tests/install-tools.sh``).
Every Prometheus-backed test runs on both 3.x lines (``SERVER_LINES``); the ones where 2.x costs
little (promtool's checks and rule tests, one scrape) run on it too (``LINES``). A line whose
binaries are missing, or are not the version they claim, makes its tests skip locally with the
reason, and fail under CI=true.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from .harness import IN_CI, REPO, free_port, require_tool

SERVER_LINES = ("3.13", "3.16")
LINES = ("2.x", *SERVER_LINES)
PROMETHEUS3 = REPO / ".tools" / "prometheus3"


def unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@functools.cache
def version(binary: str) -> str:
    """``3.13.5`` from ``prometheus, version 3.13.5 (branch: ...)``."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    words = (out.stdout + out.stderr).split()
    return words[words.index("version") + 1] if "version" in words else ""


def tool(line: str, name: str) -> str:
    """The ``prometheus`` or ``promtool`` binary of a line, checked to be of that line."""
    if line == "2.x":
        binary = require_tool(name, "Debian's prometheus package, tests/install-tools.sh")
    else:
        path = PROMETHEUS3 / line / name
        if not path.exists():
            log = PROMETHEUS3 / line / "build.log"
            last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() \
                else ["never built"]
            unavailable(f"Prometheus {line} is not built ({last[0] if last else 'no log'}); "
                        "bash tests/tools/prometheus3.sh builds it, tests/run.sh runs that")
        binary = str(path)
    found = version(binary)
    if not (found + ".").startswith(line.removesuffix("x").removesuffix(".") + "."):
        unavailable(f"{binary} is Prometheus {found or '(unknown)'}, not {line}")
    return binary


def check_metrics(text: str | bytes, quiet: bool = True) -> None:
    """``promtool check metrics`` of every line accepts an exposition (and, ``quiet``, has
    nothing to say about it). A line that is not installed fails under CI=true; locally it is
    left out (with none installed, the test skips), so a test that ends with this check still
    runs where only one line is."""
    body = text.encode() if isinstance(text, str) else text
    checked = []
    for line in LINES:
        try:
            promtool = tool(line, "promtool")
        except pytest.skip.Exception:
            continue
        result = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                                timeout=60)
        assert result.returncode == 0, (line, result.stdout + result.stderr)
        assert not quiet or not (result.stdout + result.stderr).strip(), \
            (line, result.stdout + result.stderr)
        checked.append(line)
    if not checked:
        unavailable("no promtool of any Prometheus line is installed (tests/install-tools.sh)")


RFC3339 = re.compile(r"(?P<base>[^.Z+]*?)(?P<fraction>\.\d+)?(?P<zone>Z|[+-]\d\d:\d\d)$")


def timestamp(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time as the API writes it, with nanoseconds
    (``2026-12-02T00:33:12.123456789Z``), which ``fromisoformat`` does not take whole."""
    match = RFC3339.match(text)
    assert match, text
    zone = "+00:00" if match["zone"] == "Z" else match["zone"]
    moment = datetime.datetime.fromisoformat(match["base"] + zone)
    return moment.timestamp() + float(match["fraction"] or 0)


def scrape_job(name: str, targets: list[tuple[int, dict[str, str]]], **options) -> dict:
    """A static scrape job: (port on 127.0.0.1, target labels) per target."""
    return {"job_name": name, **options,
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels}
                               for port, labels in targets]}


class Prometheus:
    """A Prometheus server of one line, scraping every second, with the given rule files."""

    def __init__(self, binary: str, scrape_configs: list[dict], rules: list[Path] | None = None,
                 global_options: dict | None = None):
        self.binary = binary
        self.scrape_configs = scrape_configs
        self.rules = rules or []
        self.global_options = global_options or {}
        self.dir = Path(tempfile.mkdtemp(prefix="prom-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def config(self) -> dict:
        return {"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                           "evaluation_interval": "1s", **self.global_options},
                "rule_files": [str(path) for path in self.rules],
                "scrape_configs": self.scrape_configs}

    async def __aenter__(self) -> Prometheus:
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config()))
        self.log = open(self.dir / "prometheus.log", "w+")  # noqa: SIM115  # the child's log, open while it runs
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.session = aiohttp.ClientSession()
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                await self.session.close()
                raise AssertionError(f"prometheus exited:\n{self.output()}")
            with contextlib.suppress(aiohttp.ClientError):
                async with self.session.get(self.url + "/-/ready") as response:
                    if response.status == 200:
                        return self
            assert time.monotonic() < deadline, f"prometheus not ready:\n{self.output()}"
            await asyncio.sleep(0.2)

    async def __aexit__(self, *exc) -> None:
        await self.session.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:]

    async def api(self, path: str, **params) -> object:
        """``data`` of a successful API answer; raises with Prometheus' error otherwise."""
        async with self.session.get(self.url + path, params=params) as response:
            body = await response.json()
        if body.get("status") != "success":
            raise AssertionError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def instant(self, expr: str) -> list[dict]:
        return (await self.api("/api/v1/query", query=expr))["result"]

    async def instant_settled(self, expr: str, tries: int = 3) -> list[dict]:
        """An instant query that should have data, asked again after every target is up and
        the rules have run again if it has none: on a loaded machine a scrape can time out
        (the tests scrape every second with a one-second timeout), and Prometheus then marks
        that target's series stale until its next scrape, so a query in between finds nothing.
        Still empty after that, it is empty."""
        result = await self.instant(expr)
        for _ in range(tries - 1):
            if result:
                break
            await self.settled()
            result = await self.instant(expr)
        return result

    async def range(self, expr: str, seconds: int) -> list[dict]:
        """The last ``seconds`` at a 1 s step."""
        end = time.time()
        return (await self.api("/api/v1/query_range", query=expr, start=str(end - seconds),
                               end=str(end), step="1"))["result"]

    async def label_values(self, label: str, match: str | None) -> list[str]:
        params = {"match[]": match} if match else {}
        return await self.api(f"/api/v1/label/{label}/values", **params)

    async def firing(self) -> set[tuple[str, str, str, str, str]]:
        """(alertname, cluster, node, numa_node, resource) of every firing alert."""
        alerts = (await self.api("/api/v1/alerts"))["alerts"]
        return {(a["labels"]["alertname"], a["labels"].get("cluster", ""),
                 a["labels"].get("node", ""), a["labels"].get("numa_node", ""),
                 a["labels"].get("resource", ""))
                for a in alerts if a["state"] == "firing"}

    async def settled(self, timeout: float = 60.0) -> None:
        """Return once every target has been scraped successfully since this call, and every
        rule group has been evaluated after that: instant queries then see every target's
        series and the records made from them. Checking a record's series alone is not
        enough: a record from one target's series can be there while another target, scraped
        on its own schedule, is not yet. Each target counts once it is seen up with a scrape
        started after the call, whenever that is: on a loaded machine some scrape may time out
        at any moment, and all of them up at one instant may be long in coming."""
        since = time.time()
        fresh: set[str] = set()

        async def scraped() -> float | None:
            targets = (await self.api("/api/v1/targets", state="active"))["activeTargets"]
            fresh.update(t["scrapeUrl"] for t in targets
                         if t["health"] == "up" and timestamp(t["lastScrape"]) >= since)
            if targets and {t["scrapeUrl"] for t in targets} <= fresh:
                return time.time()
            return None

        await self.evaluated_after(await self.wait_until(scraped, "every target scraped", timeout),
                                   timeout=timeout)

    async def evaluated_after(self, moment: float, evaluations: int = 1,
                              timeout: float = 60.0) -> None:
        """Return once every rule group has started ``evaluations`` evaluations after
        ``moment`` (seconds since the epoch, this machine's clock, which Prometheus shares)."""
        for _ in range(evaluations):
            async def evaluated(since: float = moment) -> float | None:
                groups = (await self.api("/api/v1/rules"))["groups"]
                if all(timestamp(g["lastEvaluation"]) > since for g in groups):
                    return max(timestamp(g["lastEvaluation"]) for g in groups) if groups \
                        else since
                return None

            moment = await self.wait_until(evaluated, "the rule groups' next evaluation",
                                           timeout)

    async def wait_until(self, check, what: str, timeout: float = 40.0):
        """Poll ``await check()`` until it returns something truthy."""
        deadline = time.monotonic() + timeout
        while True:
            result = await check()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; prometheus log:\n"
                                     + self.output())
            await asyncio.sleep(0.5)
