"""The shipped dashboards and rules against a real Prometheus scraping the exporter.

Two simulated clusters, told apart by the `cluster` target label, as a global view (Thanos,
Mimir) or a Prometheus' external labels give it:

- ``east``: ``gpu-node-01`` (profile ``dual-socket-gpu``: its pods placed as the kubelet places
  them, NUMA node 0's CPUs all held, three misaligned containers) and ``edge-node-01`` (profile
  ``small``);
- ``west``: a node also called ``gpu-node-01``, same profile, without pod ``ml/llm-infer-1``
  (8 exclusive CPUs and 1 GPU on NUMA node 1): same node name, different figures, so any query
  that adds up the two clusters shows.

A small DCGM-shaped target per cluster serves ``DCGM_FI_DEV_*`` series for that cluster's GPU
node's GPUs (the same UUIDs in both clusters, different values), so the dashboards' GPU row has
data to join. Prometheus (Debian's package) scrapes everything every second with the chart's
labelling (``node`` target label, ``honor_labels``) and loads the rules file. Every panel query of
every committed dashboard, for each cluster, with its variables resolved through Prometheus the
way Grafana does, must evaluate and return data (an empty panel is a bug in the dashboard or the
exporter), and only that cluster's series. Every recording rule must produce series per cluster
and node, and every alert must be shown to fire: on the demo data, with a lowered threshold, or
after a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web

from exporter.simulator import load_profile
from exporter.simulator.apiserver import FakeApiServer
from exporter.simulator.slices import resource_slices

from ..support.harness import REPO, Exporter, Node, free_port, require_tool

pytestmark = pytest.mark.external

GPU_NODE = "gpu-node-01"
EDGE_NODE = "edge-node-01"
EAST, WEST = "east", "west"
JOB = "podresources-exporter"
DCGM_JOB = "dcgm-exporter"
RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"
DASHBOARDS = sorted((REPO / "dashboards").glob("*.json"))
# Grafana's $__rate_interval for a 1 s scrape interval is 4 s; 10 s holds ~10 samples.
RATE_INTERVAL = "10s"
RANGE_SECONDS = 20
# The custom variable's value for the fit panels: east's gpu-node-01 has 0 + 4 exclusive CPUs
# free on its two NUMA nodes, edge-node-01 has 3 on its one: 4 fit on gpu-node-01's NUMA node 1
# only; no node is fragmented for 4 (the kubelet fills the lowest NUMA node first). West's
# gpu-node-01 has 0 + (4 + 8) free: 4 fit, three times.
POD_CPUS = "4"
WEST_REMOVED = ("ml", "llm-infer-1")  # server: 8 CPUs, 32Gi and 1 GPU, all on NUMA node 1
# Every exporter's --fit-shapes. East: gpu-node-01 has 0 + 4 free CPUs and no free GPU,
# edge-node-01 3 free CPUs and no GPU at all: cpu4 fits once (gpu-node-01's node 1), gpu1
# nowhere. West's gpu-node-01 has 12 free CPUs and 1 free GPU on NUMA node 1: cpu4 three times,
# gpu1 once.
FIT_SHAPES = "shapes:\n  cpu4: {cpu: 4}\n  gpu1: {cpu: 1, nvidia.com/gpu: 1}\n"

# With production thresholds (only `for` shortened), exactly these fire on the demo data:
# (alertname, cluster, node, numa_node, resource).
FIRING_ON_DEMO_DATA = {
    ("PodresourcesNumaCpuExhausted", EAST, GPU_NODE, "0", "cpu"),  # 30 of 30
    ("PodresourcesNumaHugepagesExhausted", EAST, GPU_NODE, "0", "hugepages-1Gi"),  # 32 of 32
    ("PodresourcesNumaDevicesExhausted", EAST, GPU_NODE, "0", "nvidia.com/gpu"),  # 4 of 4
    ("PodresourcesNumaDevicesExhausted", EAST, GPU_NODE, "1", "nvidia.com/gpu"),  # 3 of 3 healthy
    ("PodresourcesContainersMisaligned", EAST, GPU_NODE, "", ""),  # mpi-rank-0/rank and more
    # west: the same, except NUMA node 1's GPUs (2 of 3 after llm-infer-1 left)
    ("PodresourcesNumaCpuExhausted", WEST, GPU_NODE, "0", "cpu"),
    ("PodresourcesNumaHugepagesExhausted", WEST, GPU_NODE, "0", "hugepages-1Gi"),
    ("PodresourcesNumaDevicesExhausted", WEST, GPU_NODE, "0", "nvidia.com/gpu"),
    ("PodresourcesContainersMisaligned", WEST, GPU_NODE, "", ""),
    # cluster-wide, per shape: in east gpu1 has room on no node
    ("PodresourcesShapeNoCapacity", EAST, "", "", ""),
}


# Recording rules that keep only non-zero series: empty while every exporter is healthy, shown
# to record after a fault in test_every_alert_fires_on_demo_data_or_after_a_fault.
ONLY_WHEN_NONZERO = {"node_kind:podresources_data_issues:rate5m"}
# Recording rules about GPUs: series of the GPU nodes only. Rejections: series of the nodes
# that reject a shape (every node of east; west's gpu-node-01 admits both).
GPU_NODES_ONLY = {"gpu:podresources_device_info:relabel"}
ONLY_WHERE_REJECTED = {"node_shape_reason:podresources_shape_rejection_info:max"}


def gpu_inventory() -> list[str]:
    """The GPUs of the dual-socket-gpu profile (its nvidia.com/gpu device ids, UUIDs)."""
    return [d.device_id for d in load_profile("dual-socket-gpu").devices
            if d.resource == "nvidia.com/gpu"]


class DcgmTarget:
    """dcgm-exporter's shape: DCGM_FI_DEV_* per GPU with labels gpu, UUID, device, modelName,
    Hostname; utilization in %, framebuffer in MiB."""

    FRAMEBUFFER_MIB = 81559  # an 80 GB H100

    def __init__(self, hostname: str, utilization: dict[str, float], used: dict[str, float]):
        self.hostname = hostname
        self.utilization = utilization
        self.used = used

    def body(self) -> str:
        lines = []
        for metric, help_text, values in (
                ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", self.utilization),
                ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", self.used),
                ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
                 {uuid: self.FRAMEBUFFER_MIB - used for uuid, used in self.used.items()})):
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
            for index, (uuid, value) in enumerate(values.items()):
                lines.append(f'{metric}{{gpu="{index}",UUID="{uuid}",device="nvidia{index}",'
                             f'modelName="NVIDIA H100 80GB HBM3",Hostname="{self.hostname}"}} '
                             f"{value}")
        return "\n".join(lines) + "\n"

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.body(), content_type="text/plain")

    async def __aenter__(self) -> DcgmTarget:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


class KubeletTarget(DcgmTarget):
    """The kubelet's own /metrics as kubernetes-mixin's kubelet job scrapes it: the node's name
    and the CPU manager's exclusive CPUs per NUMA node (kubelet_cpu_manager_allocation_per_numa,
    a gauge labelled numa_node)."""

    def __init__(self, node: str, allocated: dict[str, int]):
        self.node = node
        self.allocated = allocated

    def body(self) -> str:
        lines = ["# HELP kubelet_node_name The node's name. The count is always 1.",
                 "# TYPE kubelet_node_name gauge", f'kubelet_node_name{{node="{self.node}"}} 1',
                 "# HELP kubelet_cpu_manager_allocation_per_numa Number of CPUs allocated per "
                 "NUMA node", "# TYPE kubelet_cpu_manager_allocation_per_numa gauge"]
        lines += [f'kubelet_cpu_manager_allocation_per_numa{{numa_node="{numa}"}} {count}'
                  for numa, count in self.allocated.items()]
        return "\n".join(lines) + "\n"


class Prometheus:
    """A Prometheus server scraping the given exporters, with one rules file."""

    def __init__(self, binary: str, targets: dict[tuple[str, str], int],
                 dcgm: dict[str, int] | list[tuple[str, int]], rules: Path,
                 kubelets: dict[str, int] | None = None):
        self.binary = binary
        self.targets = targets  # (cluster, node) -> exporter port
        # cluster -> DCGM target port, or (cluster, port) pairs for several per cluster
        self.dcgm = list(dcgm.items()) if isinstance(dcgm, dict) else list(dcgm)
        self.rules = rules
        self.kubelets = kubelets or {}  # cluster -> kubelet /metrics target port
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
                "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                    "labels": {"cluster": cluster, "node": node}}
                                   for (cluster, node), port in self.targets.items()],
            }, {
                "job_name": DCGM_JOB,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                    "labels": {"cluster": cluster}}
                                   for cluster, port in self.dcgm],
            }, {
                "job_name": "kubelet",
                "honor_labels": True,  # as kube-prometheus-stack's kubelet ServiceMonitor
                "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                    "labels": {"cluster": cluster}}
                                   for cluster, port in self.kubelets.items()],
            }],
        }

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

    async def firing(self) -> set[tuple[str, str, str, str, str]]:
        alerts = (await self.api("/api/v1/alerts"))["alerts"]
        return {(a["labels"]["alertname"], a["labels"].get("cluster", ""),
                 a["labels"].get("node", ""), a["labels"].get("numa_node", ""),
                 a["labels"].get("resource", ""))
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


@contextlib.contextmanager
def environment(name: str, value: str):
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


@contextlib.asynccontextmanager
async def clusters(rules: Path, kube_api: bool = False):
    """Both simulated clusters, their exporters, the DCGM targets, and Prometheus with enough
    samples for rates. Yields (prometheus, nodes, exporters, dcgm), keyed by (cluster, node).

    With ``kube_api``, the exporters also watch a Kubernetes API server publishing the GPU
    node's ResourceSlices (the same in both clusters): its DRA devices get their allocatable
    count, taints and NUMA nodes."""
    binary = require_tool("prometheus", "apt-get install prometheus")
    gpus = gpu_inventory()
    async with contextlib.AsyncExitStack() as stack:
        if kube_api:
            api = await stack.enter_async_context(FakeApiServer())
            for obj in resource_slices(load_profile("dual-socket-gpu")):
                api.put("resourceslices", obj)
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            stack.enter_context(environment(
                "KUBECONFIG", str(api.write_kubeconfig(directory / "kubeconfig"))))
        nodes = {
            (EAST, GPU_NODE): await stack.enter_async_context(Node("dual-socket-gpu")),
            (EAST, EDGE_NODE): await stack.enter_async_context(Node("small")),
            (WEST, GPU_NODE): await stack.enter_async_context(Node("dual-socket-gpu")),
        }
        assert nodes[WEST, GPU_NODE].simulator.state.remove(*WEST_REMOVED)
        shapes = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "shapes.yaml"
        shapes.write_text(FIT_SHAPES)
        exporters = {}
        for (cluster_name, name), node in nodes.items():
            assert node.spec.name == name
            exporters[cluster_name, name] = await stack.enter_async_context(
                Exporter(node.settings(interval=0.5, fit_shapes=str(shapes),
                                       kube_api=kube_api)))
            await exporters[cluster_name, name].ready()
        dcgm = {
            EAST: await stack.enter_async_context(DcgmTarget(
                GPU_NODE, {uuid: 10 + i for i, uuid in enumerate(gpus)},
                {uuid: 1000.0 * (i + 1) for i, uuid in enumerate(gpus)})),
            WEST: await stack.enter_async_context(DcgmTarget(
                GPU_NODE, {uuid: 50 + i for i, uuid in enumerate(gpus)},
                {uuid: 20000.0 + 10 * i for i, uuid in enumerate(gpus)})),
        }
        # gpu-node-01's kubelet: the exclusive CPUs List shows (east 30 + 28, west 30 + 20)
        # and 2 more on NUMA node 1 that a regular init container holds, which List never shows
        kubelets = {
            EAST: await stack.enter_async_context(KubeletTarget(GPU_NODE, {"0": 30, "1": 30})),
            WEST: await stack.enter_async_context(KubeletTarget(GPU_NODE, {"0": 30, "1": 22})),
        }
        prometheus = await stack.enter_async_context(Prometheus(
            binary, {key: e.port for key, e in exporters.items()},
            {name: target.port for name, target in dcgm.items()}, rules,
            {name: target.port for name, target in kubelets.items()}))

        async def enough_samples():
            # >= 5 scrapes of each node inside the rate window, and the recording rules ran.
            scrapes = await prometheus.instant(
                f"count_over_time(podresources_up{{job=\"{JOB}\"}}[{RATE_INTERVAL}]) >= 5")
            recorded = await prometheus.instant("node:podresources_cpus_free:sum")
            gpu_series = await prometheus.instant("DCGM_FI_DEV_GPU_UTIL")
            # with the API view, both GPU nodes' ResourceSlices are seen (and recorded)
            dra = await prometheus.instant('node_resource:podresources_allocatable:sum'
                                           '{resource="gpu.nvidia.com"}') if kube_api else [1, 1]
            return (len(scrapes) == 3 and len(recorded) == 3 and len(dra) == 2
                    and len(gpu_series) == 2 * len(gpus))

        await prometheus.wait_until(enough_samples, "samples of every node")
        yield prometheus, nodes, exporters, dcgm


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
    """Variable values to test the dashboard with, resolved through Prometheus as Grafana does,
    in order (a variable's query may use the ones before it).

    ``node`` is gpu-node-01 where a single node is chosen (every panel must have data there);
    multi-value variables take their default, All (``.*``); other single-value query variables
    (``cluster``, ``resource``) are tried with every value they offer; custom ones with POD_CPUS.
    """
    choices = [{"__rate_interval": RATE_INTERVAL}]
    for variable in model["templating"]["list"]:
        name = variable["name"]
        expanded = []
        for values in choices:
            if variable["type"] == "datasource":
                expanded.append({**values, name: "prometheus"})
                continue
            if variable["type"] == "custom":
                assert POD_CPUS in variable["query"].split(",")
                expanded.append({**values, name: POD_CPUS})
                continue
            assert variable["type"] == "query", variable
            match = LABEL_VALUES.match(variable["query"])
            assert match, f"not a label_values() query: {variable['query']}"
            selector, label = match.groups()
            offered = await prometheus.label_values(
                label, substitute(selector, values) if selector else None)
            assert offered, f"variable {name}: {variable['query']} offers no value ({values})"
            if variable.get("includeAll"):
                # All: the custom all value, or else every value offered (Grafana's regex form)
                everything = "(" + "|".join(grafana_regex_escape(v) for v in offered) + ")"
                expanded.append({**values, name: variable.get("allValue") or everything})
            elif name == "node":
                assert GPU_NODE in offered
                expanded.append({**values, name: GPU_NODE})
            else:
                expanded += [{**values, name: value} for value in offered]
        choices = expanded
    return choices


def grafana_regex_escape(value: str) -> str:
    """A value in a multi-value variable's regex, as Grafana writes it into a PromQL string:
    regex metacharacters escaped with a backslash, itself escaped for the string."""
    return re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", value)


def has_finite_value(result: list[dict]) -> bool:
    samples = [s for series in result for s in series.get("values", [series.get("value")])]
    return any(math.isfinite(float(value)) for _, value in samples)


async def evaluate_dashboard(prometheus: Prometheus, path: Path) -> tuple[int, list[str],
                                                                          dict[tuple, dict]]:
    """Run every panel query for every cluster; return (queries run, failures, results by
    (cluster, panel title) and refId).

    A panel whose title names a variable is keyed by its title with that variable substituted.
    A result series that carries a cluster label must carry the selected one.
    """
    model = json.loads(path.read_text())
    failures: list[str] = []
    results: dict[tuple, dict[str, list]] = {}
    count = 0
    clusters_seen = set()
    for values in await variable_choices(prometheus, model):
        clusters_seen.add(values["cluster"])
        for panel in panels(model):
            title = substitute(panel["title"], values)
            merged = any(t["id"] == "merge" for t in panel.get("transformations", []))
            for target in panel["targets"]:
                expr = substitute(target["expr"], values)
                count += 1
                where = f"{path.name} [{values['cluster']}] / {title} / {target['refId']}: {expr}"
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
                leaked = {series["metric"]["cluster"] for series in result
                          if "cluster" in series["metric"]} - {values["cluster"]}
                if leaked:
                    failures.append(f"{where}\n    series of cluster {sorted(leaked)}")
                results.setdefault((values["cluster"], title), {})[target["refId"]] = result
    assert clusters_seen == {EAST, WEST}, clusters_seen
    return count, failures, results


def by(result: list[dict], label: str) -> dict[str, float]:
    return {series["metric"].get(label, ""): float(series["value"][1]) for series in result}


async def test_every_dashboard_panel_and_recording_rule_returns_data_per_cluster():
    async with clusters(RULES, kube_api=True) as (prometheus, _, _, dcgm):
        failures: list[str] = []
        queries = 0
        results: dict[str, dict[tuple, dict]] = {}
        assert [p.name for p in DASHBOARDS] == ["cluster-topology-fit.json",
                                                 "exporter-health.json", "numa-overview.json"]
        for path in DASHBOARDS:
            count, failed, results[path.stem] = await evaluate_dashboard(prometheus, path)
            queries += count
            failures += failed

        rules = yaml.safe_load(RULES.read_text())["groups"]
        expected_nodes = {(EAST, GPU_NODE), (EAST, EDGE_NODE), (WEST, GPU_NODE)}
        for rule in (r for group in rules for r in group["rules"]):
            name = rule.get("record") or rule["alert"]
            queries += 1
            try:
                result = await prometheus.instant(rule["expr"])
            except AssertionError as error:
                failures.append(f"rule {name}: {error}")
                continue
            if rule.get("record") in ONLY_WHEN_NONZERO:  # empty on healthy data; see below
                continue
            if "record" in rule:
                queries += 1
                recorded = await prometheus.instant(rule["record"])
                seen = {(s["metric"].get("cluster"), s["metric"].get("node")) for s in recorded}
                expected = ({(EAST, GPU_NODE), (WEST, GPU_NODE)} if name in GPU_NODES_ONLY
                            else {(EAST, GPU_NODE), (EAST, EDGE_NODE)}
                            if name in ONLY_WHERE_REJECTED else expected_nodes)
                if not has_finite_value(result) or not has_finite_value(recorded):
                    failures.append(f"recording rule {name}: no data")
                elif seen != expected:  # gpu-node-01 of each cluster kept apart
                    failures.append(f"recording rule {name}: {sorted(seen)}")

        assert not failures, f"{len(failures)} of {queries} queries failed:\n" + "\n".join(failures)
        print(f"\n{queries} dashboard and rule queries evaluated with data, per cluster")

        # Figures the operator reads off the panels, worked out from the profiles: had any query
        # added up the two clusters' gpu-node-01, these would be off.
        overview, fit = results["numa-overview"], results["cluster-topology-fit"]
        assert by(overview[EAST, "Free exclusive CPUs"]["A"], "numa_node") == {"0": 0, "1": 4}
        assert by(overview[WEST, "Free exclusive CPUs"]["A"], "numa_node") == {"0": 0, "1": 12}
        # mpi-rank-0/rank (admitted under policy none) and media/encoder-0/encoder (CPUs on
        # NUMA node 1, its DRA FPGA fpga-0 on node 0 by its ResourceSlice); in east also
        # ml/llm-infer-1/server, whose CPUs are on NUMA node 1 and whose DRA GPU (gpu-8) on
        # NUMA nodes 0 and 1
        assert by(overview[EAST, "Misaligned containers"]["A"], "") == {"": 3}
        assert by(overview[WEST, "Misaligned containers"]["A"], "") == {"": 2}
        for cluster_name in (EAST, WEST):
            assert by(overview[cluster_name, "CPU utilization"]["A"], "numa_node")["0"] == 1.0
        assert by(overview[EAST, "CPU utilization"]["A"], "numa_node")["1"] == \
            pytest.approx(28 / 32)
        assert by(overview[WEST, "CPU utilization"]["A"], "numa_node")["1"] == \
            pytest.approx(20 / 32)
        assert by(fit[EAST, f"Fragmented for {POD_CPUS} CPUs"]["A"], "") == {"": 0}
        assert by(fit[EAST, f"Fit {POD_CPUS} CPUs on one NUMA node"]["A"], "") == {"": 1}
        assert by(fit[EAST, "Free exclusive CPUs"]["A"], "") == {"": 4 + 3}
        assert by(fit[EAST, "Nodes reporting"]["A"], "") == {"": 2}
        assert by(fit[WEST, f"Fragmented for {POD_CPUS} CPUs"]["A"], "") == {"": 0}
        assert by(fit[WEST, f"Fit {POD_CPUS} CPUs on one NUMA node"]["A"], "") == {"": 1}
        assert by(fit[WEST, "Free exclusive CPUs"]["A"], "") == {"": 0 + 12}
        assert by(fit[WEST, "Nodes reporting"]["A"], "") == {"": 1}
        fragmentation = fit[EAST, f"Fragmentation for {POD_CPUS} CPUs"]
        assert {ref: by(result, "node") for ref, result in fragmentation.items()} == {
            "A": {GPU_NODE: 4, EDGE_NODE: 3},  # free on the node
            "B": {GPU_NODE: 4, EDGE_NODE: 3},  # largest free on one NUMA node
            "C": {GPU_NODE: 0, EDGE_NODE: 0}}  # fragmented for 4
        # The fit per shape, from FIT_SHAPES: nodes where it fits, capacity, nodes reporting,
        # nodes admitting
        for cluster_name, expected in (
                (EAST, {"A": {"cpu4": 1, "gpu1": 0}, "B": {"cpu4": 1, "gpu1": 0},
                        "C": {"cpu4": 2, "gpu1": 2}, "D": {"cpu4": 1, "gpu1": 0}}),
                (WEST, {"A": {"cpu4": 1, "gpu1": 1}, "B": {"cpu4": 3, "gpu1": 1},
                        "C": {"cpu4": 1, "gpu1": 1}, "D": {"cpu4": 1, "gpu1": 1}})):
            shapes_table = fit[cluster_name, "Shapes: where they fit"]
            assert {ref: by(result, "shape") for ref, result in shapes_table.items()} == expected
        # cpu4: edge-node-01 lacks a fourth CPU; gpu1: no node of east has a free GPU
        blocked = fit[EAST, "Blocking resources per shape"]["A"]
        assert {(s["metric"]["shape"], s["metric"]["resource"]): float(s["value"][1])
                for s in blocked} == {("cpu4", "cpu"): 1, ("gpu1", "cpu"): 0,
                                      ("gpu1", "nvidia.com/gpu"): 2}
        assert {(s["metric"]["shape"], s["metric"]["resource"]): float(s["value"][1])
                for s in fit[WEST, "Blocking resources per shape"]["A"]} == {
            ("cpu4", "cpu"): 0, ("gpu1", "cpu"): 0, ("gpu1", "nvidia.com/gpu"): 0}
        free = overview[WEST, "Free CPUs and devices per NUMA node"]["A"]
        assert {(s["metric"]["numa_node"], s["metric"]["resource"]): float(s["value"][1])
                for s in free if s["metric"]["resource"] in ("cpu", "nvidia.com/gpu")} == {
            ("0", "cpu"): 0, ("1", "cpu"): 12, ("0", "nvidia.com/gpu"): 0,
            ("1", "nvidia.com/gpu"): 1}
        cpu = await prometheus.instant('node_resource:podresources_utilization:ratio'
                                       '{resource="cpu"}')
        assert {(s["metric"]["cluster"], s["metric"]["node"]): float(s["value"][1])
                for s in cpu} == pytest.approx({(EAST, GPU_NODE): 58 / 62,
                                                (EAST, EDGE_NODE): 4 / 7,
                                                (WEST, GPU_NODE): 50 / 62})

        # Admission per shape, from FIT_SHAPES, under single-numa-node (assumed: no kubelet
        # config given). East's gpu-node-01: 4 CPUs free on NUMA node 1 (cpu4 admitted), no
        # GPU free on either (gpu1: TopologyAffinityError, nvidia.com/gpu); edge-node-01: 3
        # CPUs free (cpu4: TopologyAffinityError, cpu) and no nvidia.com/gpu at all (gpu1:
        # OutOfnvidia.com/gpu). West's gpu-node-01 admits both.
        for cluster_name, admitted in ((EAST, {"cpu4": 1, "gpu1": 0}),
                                       (WEST, {"cpu4": 1, "gpu1": 1})):
            shapes_admitted = overview[cluster_name, "Pod shapes: admitted"]
            assert by(shapes_admitted["A"], "shape") == admitted
            assert {(v["metric"]["shape"], v["metric"]["reason"], v["metric"]["blocking_resource"])
                    for v in shapes_admitted["B"]} == ({
                        ("cpu4", "admitted", "none"),
                        ("gpu1", "TopologyAffinityError", "nvidia.com/gpu")}
                if cluster_name == EAST else {("cpu4", "admitted", "none"),
                                              ("gpu1", "admitted", "none")})
            assert by(fit[cluster_name, "Shapes: where they fit"]["D"], "shape") == admitted
            # the kubelet holds 2 exclusive CPUs on NUMA node 1 that List does not show
            assert by(overview[cluster_name,
                               "Exclusive CPUs the kubelet holds that List cannot show"]["A"],
                      "numa_node") == {"0": 0, "1": 2}
            config = overview[cluster_name, "Kubelet configuration"]["A"]
            assert [s["metric"] for s in config] == [{
                "topology_manager_policy": "single-numa-node",
                "topology_manager_scope": "container", "cpu_manager_policy": "static",
                "memory_manager_policy": "Static", "source": "assumed"}]
        verdicts = {(s["metric"]["shape"], s["metric"]["reason"],
                     s["metric"]["blocking_resource"]): float(s["value"][1])
                    for s in fit[WEST, "Shapes: why not admitted"]["A"]}
        assert verdicts == {("cpu4", "admitted", "none"): 1, ("gpu1", "admitted", "none"): 1}
        east = {(s["metric"]["shape"], s["metric"]["reason"],
                 s["metric"]["blocking_resource"]): float(s["value"][1])
                for s in fit[EAST, "Shapes: why not admitted"]["A"]}
        assert east == {("cpu4", "admitted", "none"): 1,
                        ("cpu4", "TopologyAffinityError", "cpu"): 1,
                        ("gpu1", "TopologyAffinityError", "nvidia.com/gpu"): 1,
                        ("gpu1", "OutOfnvidia.com/gpu", "nvidia.com/gpu"): 1}

        # DRA devices per NUMA node (the profile's ResourceSlices): fpga-2's PCI address has no
        # NUMA node, fpga-3 is tainted NoSchedule; mlx5_0 is shared by two pods; west lacks
        # llm-infer-1 and so its DRA GPU gpu-8.
        fpga, rdma, gpu = (("fpga.example.com", "gpu-node-01"),
                           ("rdma.example.com", "gpu-node-01-mlx"),
                           ("gpu.nvidia.com", "gpu-node-01-dra"))

        def dra(result: list[dict], *labels: str) -> dict[tuple, float]:
            return {tuple(s["metric"][label] for label in labels): float(s["value"][1])
                    for s in result}

        for cluster_name, gpu_on_0 in ((EAST, 1), (WEST, 0)):
            per_numa = overview[cluster_name, "DRA devices per NUMA node"]
            key = ("driver", "pool", "numa_node")
            assert dra(per_numa["A"], *key) == {
                (*fpga, "0"): 1, (*fpga, "1"): 1, (*fpga, "unknown"): 1,
                (*rdma, "0"): 1, (*rdma, "1"): 1, (*gpu, "0"): 1, (*gpu, "1"): 1}
            assert dra(per_numa["B"], *key) == {
                (*fpga, "0"): 1, (*fpga, "1"): 0, (*fpga, "unknown"): 0,
                (*rdma, "0"): 1, (*rdma, "1"): 0, (*gpu, "0"): gpu_on_0, (*gpu, "1"): 1}
            assert dra(per_numa["C"], *key) == {(*rdma, "0"): 2}
            assert dra(overview[cluster_name, "Tainted DRA devices"]["A"], *key, "effect") == {
                (*fpga, "1", "NoSchedule"): 1}
            assert dra(fit[cluster_name, "DRA devices by node, driver and pool"]["A"],
                       "node", "driver", "pool") == {
                (GPU_NODE, *fpga): 1, (GPU_NODE, *rdma): 1, (GPU_NODE, *gpu): 1 + gpu_on_0}
            assert dra(overview[cluster_name, "Device utilization"]["B"],
                       "numa_node", "resource") == {
                ("0", fpga[0]): 1, ("1", fpga[0]): 0, ("0", rdma[0]): 1, ("1", rdma[0]): 0,
                ("0", gpu[0]): gpu_on_0, ("1", gpu[0]): 1}

        # The GPU row: DCGM's series joined to the pods holding each GPU and its NUMA node.
        inventory = load_profile("dual-socket-gpu").devices
        local = {d.device_id: str(d.numa_ids[0]) for d in inventory
                 if d.resource == "nvidia.com/gpu"}
        holders = {EAST: {"llm-train-0": 4, "llm-infer-0": 2, "llm-infer-1": 1},
                   WEST: {"llm-train-0": 4, "llm-infer-0": 2}}
        for cluster_name in (EAST, WEST):
            table = overview[cluster_name, "GPUs: utilization and memory by pod and NUMA node"]
            rows = {s["metric"]["UUID"]: s["metric"] for s in table["A"]}
            pods: dict[str, int] = {}
            for uuid, labels in rows.items():
                pods[labels["pod"]] = pods.get(labels["pod"], 0) + 1
                assert labels["numa_node"] == local[uuid]
            assert pods == holders[cluster_name]
            served = dcgm[cluster_name]
            assert {s["metric"]["UUID"]: float(s["value"][1]) for s in table["A"]} == \
                {uuid: served.utilization[uuid] for uuid in rows}  # this cluster's DCGM only
            assert {s["metric"]["UUID"]: float(s["value"][1]) for s in table["B"]} == \
                {uuid: served.used[uuid] for uuid in rows}
            for series in table["C"]:
                uuid = series["metric"]["UUID"]
                assert float(series["value"][1]) == \
                    pytest.approx(served.used[uuid] / DcgmTarget.FRAMEBUFFER_MIB)
            memory = overview[cluster_name, "GPU memory used by pod"]["A"]
            assert {s["metric"]["pod"]: float(s["values"][-1][1]) for s in memory} == {
                pod: sum(served.used[u] for u, labels in rows.items() if labels["pod"] == pod)
                for pod in holders[cluster_name]}


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
        async with clusters(fast_rules(Path(directory))) as (prometheus, nodes, exporters, _):
            for _name, expr in exprs.items():  # every expression evaluates on healthy data
                await prometheus.instant(expr)

            async def demo_alerts():
                firing = await prometheus.firing()
                return firing if firing >= FIRING_ON_DEMO_DATA else None

            await prometheus.wait_until(demo_alerts, "the alerts the demo data warrants")
            await asyncio.sleep(2)  # a few more evaluations: nothing else fires
            assert await prometheus.firing() == FIRING_ON_DEMO_DATA
            proven |= {alert for alert, *_ in FIRING_ON_DEMO_DATA}

            # Memory peaks at 89.6 % (172 of 192Gi on east's NUMA node 1): below the threshold,
            # so the alert is silent above; lowered, its selector finds exactly that series
            # (west's node 1 is at 140 of 192Gi, node 0 at 114.0625 of 188Gi in both).
            memory = await prometheus.instant(lowered(
                exprs["PodresourcesNumaMemoryExhausted"], ">= 0.95", ">= 0.85"))
            assert {(s["metric"]["cluster"], s["metric"]["node"], s["metric"]["numa_node"],
                     s["metric"]["resource"]) for s in memory} == {
                (EAST, GPU_NODE, "1", "memory")}
            proven.add("PodresourcesNumaMemoryExhausted")

            # Faults in east: a neighbour drains edge-node-01's kubelet quota; gpu-node-01's
            # kubelet sends inconsistent data.
            nodes[EAST, EDGE_NODE].simulator.faults.rate_limit_storm = True
            nodes[EAST, GPU_NODE].simulator.faults.garbage = "inconsistent"
            expected = {("PodresourcesKubeletRateLimited", EAST, EDGE_NODE),
                        ("PodresourcesDataIssues", EAST, GPU_NODE)}

            async def fault_alerts():
                firing = {(alert, cluster_name, node)
                          for alert, cluster_name, node, *_ in await prometheus.firing()}
                return expected <= firing

            await prometheus.wait_until(fault_alerts, f"alerts {sorted(expected)}")
            # the data issues are recorded for that node only, in that cluster only
            issues = await prometheus.instant("node_kind:podresources_data_issues:rate5m")
            assert {(s["metric"]["cluster"], s["metric"]["node"]) for s in issues} == \
                {(EAST, GPU_NODE)}
            assert all(float(s["value"][1]) > 0 for s in issues)
            firing = {(alert, cluster_name, node)
                      for alert, cluster_name, node, *_ in await prometheus.firing()}
            assert ("PodresourcesKubeletUnreachable", EAST, EDGE_NODE) not in firing  # limited
            assert not {alert for alert in firing if alert[1] == WEST} - {
                (alert, WEST, GPU_NODE) for alert, *_ in FIRING_ON_DEMO_DATA}  # west is calm
            proven |= {alert for alert, *_ in expected}

            # east's gpu-node-01 kubelet goes away (its socket is removed); west's same-named
            # node keeps answering, and does not alert.
            await nodes[EAST, GPU_NODE].simulator.stop()
            expected = {("PodresourcesKubeletUnreachable", EAST, GPU_NODE)}
            await prometheus.wait_until(fault_alerts, "PodresourcesKubeletUnreachable")
            firing = {(alert, cluster_name, node)
                      for alert, cluster_name, node, *_ in await prometheus.firing()}
            assert ("PodresourcesKubeletUnreachable", WEST, GPU_NODE) not in firing
            proven.add("PodresourcesKubeletUnreachable")

            # The snapshot of edge-node-01 ages while it is rate limited; 5 s instead of 300 s.
            stale_expr = lowered(exprs["PodresourcesSnapshotStale"], "> 300", "> 5")

            async def stale_nodes():
                return {(s["metric"]["cluster"], s["metric"]["node"])
                        for s in await prometheus.instant(stale_expr)}

            stale = await prometheus.wait_until(stale_nodes, "a stale snapshot")
            assert (EAST, EDGE_NODE) in stale and (WEST, GPU_NODE) not in stale
            proven.add("PodresourcesSnapshotStale")

            # The exporter of edge-node-01 stops answering scrapes.
            await exporters[EAST, EDGE_NODE].runner.cleanup()

            async def exporter_down():
                return ("PodresourcesExporterDown", EAST, EDGE_NODE) in {
                    (alert, cluster_name, node)
                    for alert, cluster_name, node, *_ in await prometheus.firing()}

            await prometheus.wait_until(exporter_down, "PodresourcesExporterDown")
            proven.add("PodresourcesExporterDown")

    assert proven == set(exprs), f"alerts without proof: {sorted(set(exprs) - proven)}"


# ---- every form of GPU device id lands on its physical GPU --------------------------------------

FORMS = "forms"
FORMS_NODE, GKE_NODE = "gpu-forms-01", "gke-node-01"
WHOLE = "GPU-0a1b2c3d-0000-4000-8000-000000000000"  # nvidia.com/gpu, id_prefix + index 0
SLICED = "GPU-5e6f7a8b-1111-4111-8111-111111111111"  # its replicas ::0 and ::1
IDLE = "GPU-9c8d7e6f-2222-4222-8222-222222222222"  # held by no pod
GKE_HELD, GKE_IDLE = "GPU-7b6a5c4d-3333-4333-8333-333333333333", \
    "GPU-1f2e3d4c-4444-4444-8444-444444444444"


def forms_profile() -> dict:
    """A node whose device plugins name devices in every form the NVIDIA plugins use, and RDMA
    shared devices whose ids (0, 1) repeat under two resources."""
    return {
        "name": "gpu-forms", "node_name": FORMS_NODE, "kubernetes_version": "1.35", "seed": 1,
        "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "8Gi"},
                       {"id": 1, "cpus": "4-7", "memory": "8Gi"}],
        "cpu_manager_policy": "static", "memory_manager_policy": "None",
        "devices": [
            {"resource": "nvidia.com/gpu", "id_prefix": WHOLE[:-1], "per_numa": {"0": 1}},
            {"resource": "nvidia.com/gpu.shared", "id_prefix": SLICED + "::",
             "per_numa": {"1": 2}},
            {"resource": "rdma/hca_shared_devices_a", "id_prefix": "", "per_numa": {"0": 2}},
            {"resource": "rdma/hca_shared_devices_b", "id_prefix": "", "per_numa": {"1": 2}},
        ],
        "pods": [
            {"namespace": "ml", "name": "train-0", "containers": [{
                "name": "trainer", "cpus": 1,
                "devices": {"nvidia.com/gpu": 1, "rdma/hca_shared_devices_a": 1}}]},
            {"namespace": "ml", "name": "infer-0", "containers": [{
                "name": "server", "cpus": 1,
                "devices": {"nvidia.com/gpu.shared": 1, "rdma/hca_shared_devices_b": 1}}]},
            {"namespace": "ml", "name": "infer-1", "containers": [{
                "name": "server", "cpus": 1, "devices": {"nvidia.com/gpu.shared": 1}}]},
        ],
    }


def gke_profile() -> dict:
    """A GKE node sharing GPU nvidia0 between two pods (ids nvidia0/vgpu0 and nvidia0/vgpu1)."""
    return {
        "name": "gke-shared", "node_name": GKE_NODE, "kubernetes_version": "1.35", "seed": 2,
        "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "8Gi"}],
        "cpu_manager_policy": "static", "memory_manager_policy": "None",
        "devices": [{"resource": "nvidia.com/gpu", "id_prefix": "nvidia0/vgpu",
                     "per_numa": {"0": 2}}],
        "pods": [{"namespace": "lab", "name": f"notebook-{n}", "containers": [{
            "name": "jupyter", "cpus": 1, "devices": {"nvidia.com/gpu": 1}}]} for n in (0, 1)],
    }


async def overview_values(prometheus: Prometheus, node: str) -> dict[str, str]:
    """The NUMA overview's variables for one node, multi-value ones at All, as Grafana sets
    them (every value offered, as a regex alternation)."""
    model = json.loads((REPO / "dashboards" / "numa-overview.json").read_text())
    values = {"__rate_interval": RATE_INTERVAL, "datasource": "prometheus", "cluster": FORMS,
              "node": node}
    for variable in model["templating"]["list"]:
        if variable["name"] in values:
            continue
        selector, label = LABEL_VALUES.match(variable["query"]).groups()
        offered = await prometheus.label_values(label, substitute(selector, values))
        values[variable["name"]] = "(" + "|".join(grafana_regex_escape(v) for v in offered) + ")"
    return values


async def test_every_form_of_gpu_device_id_lands_on_its_physical_gpu():
    binary = require_tool("prometheus", "apt-get install prometheus")
    model = json.loads((REPO / "dashboards" / "numa-overview.json").read_text())
    gpu_row = next(p for p in model["panels"] if p["title"] == "GPUs (dcgm-exporter)")
    queries = {(panel["title"], target["refId"]): target["expr"]
               for panel in gpu_row["panels"] for target in panel["targets"]}
    async with contextlib.AsyncExitStack() as stack:
        nodes = {FORMS_NODE: await stack.enter_async_context(Node(forms_profile())),
                 GKE_NODE: await stack.enter_async_context(Node(gke_profile()))}
        exporters = {}
        for name, node in nodes.items():
            exporters[name] = await stack.enter_async_context(
                Exporter(node.settings(interval=0.5)))
            await exporters[name].ready()
        # dcgm-exporter on each node: device nvidiaN in the order given; both nodes have an
        # nvidia0 and an nvidia1, so only the node tells GKE's nvidia0 apart
        dcgm = [await stack.enter_async_context(DcgmTarget(
                    FORMS_NODE, {WHOLE: 11, SLICED: 22, IDLE: 33},
                    {WHOLE: 1000.0, SLICED: 2000.0, IDLE: 3000.0})),
                await stack.enter_async_context(DcgmTarget(
                    GKE_NODE, {GKE_HELD: 44, GKE_IDLE: 55}, {GKE_HELD: 4000.0, GKE_IDLE: 5000.0}))]
        prometheus = await stack.enter_async_context(Prometheus(
            binary, {(FORMS, name): e.port for name, e in exporters.items()},
            [(FORMS, target.port) for target in dcgm], RULES))

        async def recorded():
            held = await prometheus.instant("gpu:podresources_device_info:relabel")
            return held if len(held) == 5 else None

        held = await prometheus.wait_until(recorded, "the GPU devices recorded with their UUID")
        rdma = await prometheus.instant('podresources_device_info{resource=~"rdma/.+"}')
        assert sorted(s["metric"]["resource"] for s in rdma) == [
            "rdma/hca_shared_devices_a", "rdma/hca_shared_devices_b"]
        assert {s["metric"]["device_id"] for s in rdma} <= {"0", "1"}  # as DCGM's gpu labels
        # the RDMA devices 0 and 1 name no GPU and are not there
        assert {(s["metric"]["node"], s["metric"]["resource"], s["metric"]["device_id"],
                 s["metric"]["pod"]): s["metric"]["UUID"] for s in held} == {
            (FORMS_NODE, "nvidia.com/gpu", WHOLE, "train-0"): WHOLE,
            **{(FORMS_NODE, "nvidia.com/gpu.shared", f"{SLICED}::{replica}", pod): SLICED
               for replica, pod in zip(sorted_replicas(held), ("infer-0", "infer-1"))},
            **{(GKE_NODE, "nvidia.com/gpu", device_id, pod): GKE_HELD
               for device_id, pod in gke_holdings(held)}}

        results = {}
        for node in (FORMS_NODE, GKE_NODE):
            values = await overview_values(prometheus, node)
            # the gpu variable: the node's physical GPUs that pods hold, by UUID
            assert values["gpu"] == {FORMS_NODE: f"({WHOLE}|{SLICED})",
                                     GKE_NODE: f"({GKE_HELD})"}[node]
            for key, expr in queries.items():
                results[node, *key] = await prometheus.instant(substitute(expr, values))

    table = "GPUs: utilization and memory by pod and NUMA node"
    rows = {(s["metric"]["pod"], s["metric"]["UUID"], s["metric"]["numa_node"]):
            float(s["value"][1]) for s in results[FORMS_NODE, table, "A"]}
    assert rows == {("train-0", WHOLE, "0"): 11, ("infer-0", SLICED, "1"): 22,
                    ("infer-1", SLICED, "1"): 22}
    assert by_pod(results[FORMS_NODE, table, "B"]) == \
        {"train-0": 1000, "infer-0": 2000, "infer-1": 2000}
    assert by_pod(results[GKE_NODE, table, "B"]) == {"notebook-0": 4000, "notebook-1": 4000}
    assert by_pod(results[GKE_NODE, table, "A"]) == {"notebook-0": 44, "notebook-1": 44}
    # pod -> GPU memory used: each pod's GPU, a shared GPU's whole figure on each holder
    memory = "GPU memory used by pod"
    assert by_pod(results[FORMS_NODE, memory, "A"]) == \
        {"train-0": 1000, "infer-0": 2000, "infer-1": 2000}
    assert by_pod(results[GKE_NODE, memory, "A"]) == {"notebook-0": 4000, "notebook-1": 4000}
    # utilization per NUMA node counts the shared GPU once
    assert by(results[FORMS_NODE, "GPU utilization by NUMA node", "A"], "numa_node") == \
        {"0": 11, "1": 22}


def by_pod(result: list[dict]) -> dict[str, float]:
    return by(result, "pod")


def sorted_replicas(held: list[dict]) -> list[str]:
    """The replica numbers of the time-sliced GPU, in the order of the pods holding them."""
    replicas = {s["metric"]["pod"]: s["metric"]["device_id"].rsplit("::", 1)[1] for s in held
                if s["metric"]["resource"] == "nvidia.com/gpu.shared"}
    assert sorted(replicas.values()) == ["0", "1"]  # one replica each
    return [replicas["infer-0"], replicas["infer-1"]]


def gke_holdings(held: list[dict]) -> list[tuple[str, str]]:
    holdings = sorted((s["metric"]["device_id"], s["metric"]["pod"]) for s in held
                      if s["metric"]["node"] == GKE_NODE)
    assert [device_id for device_id, _ in holdings] == ["nvidia0/vgpu0", "nvidia0/vgpu1"]
    return holdings
