"""The shipped dashboards and rules against a real Prometheus scraping the exporter.

Two simulated nodes: ``gpu-node-01`` (profile ``dual-socket-gpu``: NUMA node 0 nearly full, two
misaligned containers) and ``edge-node-01`` (profile ``small``). Prometheus (Debian's package)
scrapes both exporters every second with the chart's labelling (``node`` target label,
``honor_labels``) and loads the rules file. Every panel query of every committed dashboard, with
its variables resolved through Prometheus the way Grafana does, must evaluate and return data; an
empty panel is a bug in the dashboard or the exporter. Every recording rule must produce series and
every alert must be shown to fire: on the demo data, with a lowered threshold, or after a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from .helpers import REPO, Exporter, Node, free_port, require_tool

pytestmark = pytest.mark.external

GPU_NODE = "gpu-node-01"
EDGE_NODE = "edge-node-01"
JOB = "podresources-exporter"
RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"
DASHBOARDS = sorted((REPO / "dashboards").glob("*.json"))
# Grafana's $__rate_interval for a 1 s scrape interval is 4 s; 10 s holds ~10 samples.
RATE_INTERVAL = "10s"
RANGE_SECONDS = 20
# The custom variable's value for the fit panels: gpu-node-01 has 1 + 3 exclusive CPUs free on
# its two NUMA nodes, edge-node-01 has 3 on its one: 4 fits on no NUMA node, and gpu-node-01 is
# fragmented for 4.
POD_CPUS = "4"

# With production thresholds (only `for` shortened), exactly these fire on the demo data:
# (alertname, node, numa_node, resource).
FIRING_ON_DEMO_DATA = {
    ("PodresourcesNumaCpuExhausted", GPU_NODE, "0", "cpu"),  # 29 of 30
    ("PodresourcesNumaMemoryExhausted", GPU_NODE, "0", "memory"),  # apportioned: full
    ("PodresourcesNumaDevicesExhausted", GPU_NODE, "0", "nvidia.com/gpu"),  # 4 of 4
    ("PodresourcesNumaDevicesExhausted", GPU_NODE, "1", "nvidia.com/gpu"),  # 3 of 3 healthy
    ("PodresourcesContainersMisaligned", GPU_NODE, "", ""),  # inmem-db-0/db, mpi-rank-0/rank
}


class Prometheus:
    """A Prometheus server scraping the given exporters, with one rules file."""

    def __init__(self, binary: str, targets: dict[str, int], rules: Path):
        self.binary = binary
        self.targets = targets
        self.rules = rules
        self.dir = Path(tempfile.mkdtemp(prefix="prom-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def config(self) -> dict:
        return {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "rule_files": [str(self.rules)],
            "scrape_configs": [{
                "job_name": JOB,
                "honor_labels": True,  # as the chart's monitors: keep namespace/pod/container
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"node": node}}
                                   for node, port in self.targets.items()],
            }],
        }

    async def __aenter__(self) -> "Prometheus":
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config()))
        self.log = open(self.dir / "prometheus.log", "w+")
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.session = aiohttp.ClientSession()
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"prometheus exited:\n{self.output()}"
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

    async def range(self, expr: str) -> list[dict]:
        end = time.time()
        return (await self.api("/api/v1/query_range", query=expr, start=str(end - RANGE_SECONDS),
                               end=str(end), step="1"))["result"]

    async def label_values(self, label: str, match: str | None) -> list[str]:
        params = {"match[]": match} if match else {}
        return await self.api(f"/api/v1/label/{label}/values", **params)

    async def firing(self) -> set[tuple[str, str, str, str]]:
        alerts = (await self.api("/api/v1/alerts"))["alerts"]
        return {(a["labels"]["alertname"], a["labels"].get("node", ""),
                 a["labels"].get("numa_node", ""), a["labels"].get("resource", ""))
                for a in alerts if a["state"] == "firing"}

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


@contextlib.asynccontextmanager
async def cluster(rules: Path):
    """Both simulated nodes, their exporters, and Prometheus with enough samples for rates."""
    binary = require_tool("prometheus", "apt-get install prometheus")
    async with contextlib.AsyncExitStack() as stack:
        gpu = await stack.enter_async_context(Node("dual-socket-gpu"))
        edge = await stack.enter_async_context(Node("small"))
        exporters = {}
        for name, node in ((GPU_NODE, gpu), (EDGE_NODE, edge)):
            assert node.spec.name == name
            exporters[name] = await stack.enter_async_context(
                Exporter(node.settings(interval=0.5)))
            await exporters[name].ready()
        prometheus = await stack.enter_async_context(
            Prometheus(binary, {name: e.port for name, e in exporters.items()}, rules))

        async def enough_samples():
            # >= 5 scrapes of each node inside the rate window, and the recording rules ran.
            scrapes = await prometheus.instant(
                f"count_over_time(podresources_up{{job=\"{JOB}\"}}[{RATE_INTERVAL}]) >= 5")
            recorded = await prometheus.instant("node:podresources_cpus_free:sum")
            return len(scrapes) == 2 and len(recorded) == 2

        await prometheus.wait_until(enough_samples, "samples of both nodes")
        yield prometheus, {GPU_NODE: gpu, EDGE_NODE: edge}, exporters


def panels(model: dict) -> list[dict]:
    found = []
    for panel in model["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return [panel for panel in found if panel["type"] != "row"]


def substitute(text: str, values: dict[str, str]) -> str:
    """Grafana's interpolation of ``$name`` / ``${name}``; an unknown variable is an error."""
    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"undefined variable ${name} in {text!r}"
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, text)


LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")


async def variable_choices(prometheus: Prometheus, model: dict) -> list[dict[str, str]]:
    """Variable values to test the dashboard with, resolved through Prometheus as Grafana does.

    ``node`` is gpu-node-01 where a single node is chosen (every panel must have data there);
    multi-value variables take their default, All (``.*``); other single-value query variables
    are tried with every value they offer; custom ones with POD_CPUS.
    """
    values = {"__rate_interval": RATE_INTERVAL}
    alternatives: list[tuple[str, list[str]]] = []
    for variable in model["templating"]["list"]:
        name = variable["name"]
        if variable["type"] == "datasource":
            values[name] = "prometheus"
            continue
        if variable["type"] == "custom":
            options = variable["query"].split(",")
            assert POD_CPUS in options
            values[name] = POD_CPUS
            continue
        assert variable["type"] == "query", variable
        match = LABEL_VALUES.match(variable["query"])
        assert match, f"not a label_values() query: {variable['query']}"
        selector, label = match.groups()
        offered = await prometheus.label_values(
            label, substitute(selector, values) if selector else None)
        assert offered, f"variable {name}: {variable['query']} offers no value"
        if variable.get("includeAll"):
            values[name] = variable["allValue"]
        elif name == "node":
            assert GPU_NODE in offered
            values[name] = GPU_NODE
        else:
            alternatives.append((name, offered))
    choices = [values]
    for name, offered in alternatives:
        choices = [{**choice, name: value} for choice in choices for value in offered]
    return choices


def has_finite_value(result: list[dict]) -> bool:
    samples = [s for series in result for s in series.get("values", [series.get("value")])]
    return any(math.isfinite(float(value)) for _, value in samples)


async def evaluate_dashboard(prometheus: Prometheus, path: Path) -> tuple[int, list[str],
                                                                          dict[str, dict]]:
    """Run every panel query; return (queries run, failures, results by panel title and refId).

    A panel whose title names a variable is keyed by its title with that variable substituted.
    """
    model = json.loads(path.read_text())
    failures: list[str] = []
    results: dict[str, dict[str, list]] = {}
    count = 0
    for values in await variable_choices(prometheus, model):
        for panel in panels(model):
            title = substitute(panel["title"], values)
            merged = any(t["id"] == "merge" for t in panel.get("transformations", []))
            for target in panel["targets"]:
                expr = substitute(target["expr"], values)
                count += 1
                where = f"{path.name} / {title} / {target['refId']}: {expr}"
                try:
                    if target.get("instant"):
                        result = await prometheus.instant(expr)
                    else:
                        result = await prometheus.range(expr)
                except AssertionError as error:
                    failures.append(f"{where}\n    error: {error}")
                    continue
                if not has_finite_value(result):
                    failures.append(f"{where}\n    no data")
                if merged and any("__name__" in series["metric"] for series in result):
                    failures.append(f"{where}\n    __name__ column breaks the merge")
                results.setdefault(title, {})[target["refId"]] = result
    return count, failures, results


def by(result: list[dict], label: str) -> dict[str, float]:
    return {series["metric"].get(label, ""): float(series["value"][1]) for series in result}


async def test_every_dashboard_panel_and_recording_rule_returns_data():
    async with cluster(RULES) as (prometheus, _, _):
        failures: list[str] = []
        queries = 0
        results: dict[str, dict[str, list]] = {}
        assert [p.name for p in DASHBOARDS] == ["cluster-topology-fit.json",
                                                 "exporter-health.json", "numa-overview.json"]
        for path in DASHBOARDS:
            count, failed, results[path.stem] = await evaluate_dashboard(prometheus, path)
            queries += count
            failures += failed

        rules = yaml.safe_load(RULES.read_text())["groups"]
        for rule in (r for group in rules for r in group["rules"]):
            name = rule.get("record") or rule["alert"]
            queries += 1
            try:
                result = await prometheus.instant(rule["expr"])
            except AssertionError as error:
                failures.append(f"rule {name}: {error}")
                continue
            if "record" in rule:
                queries += 1
                recorded = await prometheus.instant(rule["record"])
                if not has_finite_value(result) or not has_finite_value(recorded):
                    failures.append(f"recording rule {name}: no data")
                elif {s["metric"].get("node") for s in recorded} != {GPU_NODE, EDGE_NODE}:
                    failures.append(f"recording rule {name}: not both nodes: {recorded}")

        assert not failures, f"{len(failures)} of {queries} queries failed:\n" + "\n".join(failures)
        print(f"\n{queries} dashboard and rule queries evaluated with data")

        # Figures the operator reads off the panels, worked out from the profiles.
        overview, fit = results["numa-overview"], results["cluster-topology-fit"]
        assert by(overview["Free exclusive CPUs"]["A"], "numa_node") == {"0": 1, "1": 3}
        assert by(overview["Misaligned containers"]["A"], "") == {"": 2}
        assert by(overview["CPU utilization"]["A"], "numa_node") == pytest.approx(
            {"0": 29 / 30, "1": 29 / 32})
        assert by(fit[f"Fragmented for {POD_CPUS} CPUs"]["A"], "") == {"": 1}
        assert by(fit[f"Fit {POD_CPUS} CPUs on one NUMA node"]["A"], "") == {"": 0}
        assert by(fit["Free exclusive CPUs"]["A"], "") == {"": 4 + 3}
        fragmentation = fit[f"Fragmentation for {POD_CPUS} CPUs"]
        assert {ref: by(result, "node") for ref, result in fragmentation.items()} == {
            "A": {GPU_NODE: 4, EDGE_NODE: 3},  # free on the node
            "B": {GPU_NODE: 3, EDGE_NODE: 3},  # largest free on one NUMA node
            "C": {GPU_NODE: 1, EDGE_NODE: 0}}  # fragmented for 4
        cpu = await prometheus.instant('node_resource:podresources_utilization:ratio'
                                       '{resource="cpu"}')
        assert by(cpu, "node") == pytest.approx({GPU_NODE: 58 / 62, EDGE_NODE: 4 / 7})


def fast_rules(directory: Path) -> Path:
    """The rules file with every alert's ``for`` set to 0s, so that alerts fire within seconds."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = "0s"
    path = directory / "fast.rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def alert_exprs() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r["expr"] for group in rules for r in group["rules"] if "alert" in r}


def lowered(expr: str, threshold: str, value: str) -> str:
    """``expr`` with its threshold replaced, to show the alert's selectors match real series."""
    assert threshold in expr, (threshold, expr)
    return expr.replace(threshold, value)


async def test_every_alert_fires_on_demo_data_or_after_a_fault():
    exprs = alert_exprs()
    proven: set[str] = set()
    with tempfile.TemporaryDirectory() as directory:
        async with cluster(fast_rules(Path(directory))) as (prometheus, nodes, exporters):
            for name, expr in exprs.items():  # every expression evaluates on healthy data
                await prometheus.instant(expr)

            async def demo_alerts():
                firing = await prometheus.firing()
                return firing if firing >= FIRING_ON_DEMO_DATA else None

            await prometheus.wait_until(demo_alerts, "the alerts the demo data warrants")
            await asyncio.sleep(2)  # a few more evaluations: nothing else fires
            assert await prometheus.firing() == FIRING_ON_DEMO_DATA
            proven |= {alert for alert, *_ in FIRING_ON_DEMO_DATA}

            # Hugepages peak at 75 % (24 of 32 x 1Gi on NUMA node 0): below the threshold, so
            # the alert is silent above; lowered, its selector finds exactly that series.
            hugepages = await prometheus.instant(lowered(
                exprs["PodresourcesNumaHugepagesExhausted"], ">= 0.95", ">= 0.7"))
            assert {(s["metric"]["node"], s["metric"]["numa_node"], s["metric"]["resource"])
                    for s in hugepages} == {(GPU_NODE, "0", "hugepages-1Gi")}
            proven.add("PodresourcesNumaHugepagesExhausted")

            # Faults: a neighbour drains edge-node-01's kubelet quota; gpu-node-01's kubelet
            # sends inconsistent data.
            nodes[EDGE_NODE].simulator.faults.rate_limit_storm = True
            nodes[GPU_NODE].simulator.faults.garbage = "inconsistent"
            expected = {("PodresourcesKubeletRateLimited", EDGE_NODE),
                        ("PodresourcesDataIssues", GPU_NODE)}

            async def fault_alerts():
                firing = {(alert, node) for alert, node, *_ in await prometheus.firing()}
                return expected <= firing

            await prometheus.wait_until(fault_alerts, f"alerts {sorted(expected)}")
            firing = {(alert, node) for alert, node, *_ in await prometheus.firing()}
            assert ("PodresourcesKubeletUnreachable", EDGE_NODE) not in firing  # rate limited
            proven |= {alert for alert, _ in expected}

            # gpu-node-01's kubelet goes away (its socket is removed).
            await nodes[GPU_NODE].simulator.stop()
            expected = {("PodresourcesKubeletUnreachable", GPU_NODE)}
            await prometheus.wait_until(fault_alerts, "PodresourcesKubeletUnreachable")
            proven.add("PodresourcesKubeletUnreachable")

            # The snapshot of edge-node-01 ages while it is rate limited; 5 s instead of 300 s.
            stale_expr = lowered(exprs["PodresourcesSnapshotStale"], "> 300", "> 5")

            async def stale_nodes():
                return {s["metric"]["node"] for s in await prometheus.instant(stale_expr)}

            assert await prometheus.wait_until(stale_nodes, "a stale snapshot") == {EDGE_NODE}
            proven.add("PodresourcesSnapshotStale")

            # The exporter of edge-node-01 stops answering scrapes.
            await exporters[EDGE_NODE].runner.cleanup()

            async def exporter_down():
                return ("PodresourcesExporterDown", EDGE_NODE) in {
                    (alert, node) for alert, node, *_ in await prometheus.firing()}

            await prometheus.wait_until(exporter_down, "PodresourcesExporterDown")
            proven.add("PodresourcesExporterDown")

    assert proven == set(exprs), f"alerts without proof: {sorted(set(exprs) - proven)}"
