"""What the dashboards and rules cost on the Prometheus side, for fleets of nodes.

    python -m benchmarks.fleet                         # 250 and 1,000 nodes (~15 minutes)
    python -m benchmarks.fleet --sizes 100,200 --repeat 1 --no-series   # a quick look
    python -m benchmarks.fleet --series-only           # series per node, churn, flags (~2 min)

For each profile of the fleet (default: dual-socket-gpu, a two-NUMA GPU node) the simulator and
the exporter run once, as processes (``python -m exporter simulate`` / ``python -m exporter``),
and the exporter's own /metrics is scraped. A fleet of N nodes in several clusters is that
exposition copied N times with each node's target labels (cluster, node, instance, the exporter
pod) and its own GPU UUIDs, plus per node Prometheus' scrape series (``up``...) and a
dcgm-exporter target with dcgm-exporter's label set (gpu, UUID, device, modelName, Hostname,
pci_bus_id, DCGM_FI_DRIVER_VERSION). A window of samples at the scrape interval is written as
OpenMetrics and turned into a block by ``promtool tsdb create-blocks-from openmetrics``; the real
Prometheus is started on it, the recording rules are backfilled with ``promtool tsdb
create-blocks-from rules`` (one pass per level of rules reading other rules), and then:

Every fleet is built first, each with its own Prometheus; then each query goes to the fleets in
turn, round after round, so that whatever else the machine does weighs on every size alike:

* every target of every dashboard is sent as Grafana sends it (a range query over the last hour
  at a 30 s step, or an instant query), with the variables resolved through Prometheus the way
  Grafana resolves them: once with the dashboards' defaults (the first cluster; All where a
  variable is multi-value) and once with one node selected; median of ``--repeat`` runs;
* a whole refresh of each dashboard: every target, 6 at a time (Grafana's concurrency);
* every rule expression as an instant query; a group's time is the sum of its rules' (a group
  evaluates its rules one after the other).

Counters grow over the window, gauges keep the captured values; ``$__rate_interval`` is
Grafana's for the scrape interval and the step (max(4 x scrape, step + scrape)). Each figure
is extrapolated linearly to ``--extrapolate`` nodes from the two largest fleets. Prints tables;
writes JSON (``--json``, default benchmarks/results/fleet-<date>.json). Every process and network
listener is local (127.0.0.1) and stopped at the end. Needs ``prometheus`` and ``promtool``
(2.42 tested) on PATH.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import yaml

from .harness import free_port, stop

REPO = Path(__file__).resolve().parent.parent
DASHBOARD_DIR = REPO / "dashboards"
RULES = DASHBOARD_DIR / "rules" / "podresources-exporter.rules.yaml"
FIT_SHAPES = "shapes:\n  cpu4: {cpu: 4}\n  gpu1: {cpu: 1, nvidia.com/gpu: 1}\n"
STEP = 30  # Grafana's step for a 1-hour view on a typical panel width
VIEW = 3600
CONCURRENCY = 6  # Grafana's concurrent queries per dashboard refresh
DCGM_METRICS = (  # dcgm-exporter's default counters (a subset), value per GPU index
    ("DCGM_FI_DEV_GPU_UTIL", lambda k: 20 + 9 * k),
    ("DCGM_FI_DEV_FB_USED", lambda k: 1000.0 * (k + 1)),
    ("DCGM_FI_DEV_FB_FREE", lambda k: 81559 - 1000.0 * (k + 1)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", lambda k: 5 + k),
    ("DCGM_FI_DEV_SM_CLOCK", lambda k: 1980),
    ("DCGM_FI_DEV_MEM_CLOCK", lambda k: 2619),
    ("DCGM_FI_DEV_GPU_TEMP", lambda k: 40 + k),
    ("DCGM_FI_DEV_POWER_USAGE", lambda k: 300.5 + k),
    ("DCGM_FI_DEV_XID_ERRORS", lambda k: 0),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", lambda k: 0),
)
WORKLOAD_FAMILIES = ("podresources_container_", "podresources_pod_", "podresources_device_info",
                     "podresources_dra_device_info")
HEALTH_FAMILIES = ("podresources_api_", "podresources_refresh_", "podresources_data_issues",
                   "process_", "podresources_up", "podresources_backoff",
                   "podresources_last_refresh", "podresources_build_info",
                   "podresources_kubelet_", "podresources_node_info", "python_")
SCRAPE_SERIES = ("up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_series_added", "scrape_samples_post_metric_relabeling")
HAS_NODE = re.compile(r'(^|,)node="')
HAS_POD = re.compile(r'(^|,)pod="')
SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$")


def http(url: str, data: dict | None = None, timeout: float = 180) -> bytes:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}
                                     if body else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # 127.0.0.1 only
        return response.read()


# ---- one node's /metrics, from the simulator and the exporter ------------------------------

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


# ---- the fleet's TSDB -----------------------------------------------------------------------

def fmt(value: float) -> str:
    return format(value, ".12g") if value == value else "NaN"


def node_names(size: int, clusters: int) -> list[tuple[str, str]]:
    return [(f"cluster-{i % clusters + 1}", f"node-{i:05d}") for i in range(size)]


def fleet_series(templates: dict[str, list], size: int, clusters: int, profiles: list[str]):
    """(constant lines without timestamp, counter groups [(v0, [prefix...])], timestamp-valued
    prefixes, series count)."""
    constant: list[str] = []
    counters: dict[tuple[str, int], tuple[float, list[str]]] = {}
    clock: list[str] = []
    for index, (cluster, node) in enumerate(node_names(size, clusters)):
        profile = profiles[index % len(profiles)]
        samples = templates[profile]
        original = profile_node_name(profile)
        gpus = sorted({m for _, labels, _, _ in samples
                       for m in re.findall(r'device_id="(GPU-[^"]+)"', labels)})
        mapping = {gpu: f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, node + gpu)}" for gpu in gpus}
        instance = f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"
        target = (f'cluster="{cluster}",instance="{instance}:10075",'
                  f'job="podresources-exporter"')
        exporter_pod = f'namespace="monitoring",pod="podresources-exporter-{index:05d}"'
        text = "\x00".join(labels for _, labels, _, _ in samples).replace(original, node)
        for old, new in mapping.items():
            text = text.replace(old, new)
        for position, ((name, _, value, counter), labels) in enumerate(
                zip(samples, text.split("\x00"))):
            extra = [target]
            if not HAS_NODE.search(labels):
                extra.append(f'node="{node}"')
            if not HAS_POD.search(labels):
                extra.append(exporter_pod)
            prefix = f"{name}{{{','.join([labels, *extra] if labels else extra)}}}"
            if name == "podresources_last_refresh_timestamp_seconds":
                clock.append(prefix)
            elif counter:
                counters.setdefault((profile, position), (value, []))[1].append(prefix)
            else:
                constant.append(f"{prefix} {fmt(value)}")
        for name in SCRAPE_SERIES:
            value = {"up": 1, "scrape_duration_seconds": 0.012}.get(name, len(samples))
            constant.append(f'{name}{{{target},node="{node}",{exporter_pod}}} {value}')
        dcgm = (f'cluster="{cluster}",instance="{instance}:9400",job="dcgm-exporter",'
                f'namespace="gpu-operator",pod="nvidia-dcgm-exporter-{index:05d}",'
                'container="nvidia-dcgm-exporter"')
        if gpus:
            constant.append(f"up{{{dcgm}}} 1")
        for k, gpu in enumerate(sorted(mapping.values())):
            for metric, value in DCGM_METRICS:
                constant.append(
                    f'{metric}{{gpu="{k}",UUID="{gpu}",device="nvidia{k}",'
                    f'modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",'
                    f'pci_bus_id="00000000:{0x18 + 16 * k:02X}:00.0",'
                    f'DCGM_FI_DRIVER_VERSION="550.54.15",{dcgm}}} {fmt(value(k))}')
    groups = list(counters.values())
    total = len(constant) + len(clock) + sum(len(p) for _, p in groups)
    return constant, groups, clock, total


def write_openmetrics(path: Path, fleet, timestamps: list[int]) -> int:
    constant, groups, clock, total = fleet
    with open(path, "w", buffering=1 << 24) as out:
        for i, ts in enumerate(timestamps):
            sep = f" {ts}\n"
            out.write(sep.join(constant))
            out.write(sep)
            for v0, prefixes in groups:
                line = f" {fmt(v0 * (1 + 0.01 * i))} {ts}\n"
                out.write(line.join(prefixes))
                out.write(line)
            line = f" {ts - 3} {ts}\n"
            out.write(line.join(clock))
            out.write(line)
        out.write("# EOF\n")
    return total * len(timestamps)


def run(args: list[str], what: str, timeout: float = 900) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result.stdout


class Prometheus:
    """The real Prometheus on a data directory, no scraping, no rules, on 127.0.0.1."""

    def __init__(self, data: Path):
        self.data = data
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> None:
        config = self.data.parent / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 30s\n  evaluation_interval: 30s\n")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(self.data.parent / "prometheus.log", "a")  # noqa: SIM115  # while it runs
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d",
             "--query.timeout=2m", "--log.level=warn"], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                if http(self.url + "/-/ready", timeout=5):
                    return
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("prometheus did not start; see " + self.log.name)
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc:
            stop(self.proc)
            self.log.close()
            self.proc = None

    def query(self, path: str, **params) -> tuple[float, dict]:
        """(seconds, JSON answer); errors are answers too."""
        url = f"{self.url}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        started = time.perf_counter()
        try:
            body = http(url)
        except urllib.error.HTTPError as error:
            body = error.read()
        seconds = time.perf_counter() - started
        return seconds, json.loads(body)


def rule_levels(groups: list[dict]) -> list[list[dict]]:
    """Recording rules by level: level 0 reads only scraped series, level n reads level n-1."""
    records = {r["record"]: r for g in groups for r in g["rules"] if "record" in r}
    level: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in level:
            expr = re.sub(r'"[^"]*"', '""', records[name]["expr"])
            reads = set(re.findall(r"[a-zA-Z_:][\w:]*", expr)) & set(records)
            level[name] = 1 + max((of(dep) for dep in reads), default=-1)
        return level[name]

    levels: list[list[dict]] = []
    for name, rule in records.items():
        while len(levels) <= of(name):
            levels.append([])
        levels[of(name)].append({"record": name, "expr": rule["expr"]})
    return levels


def build_tsdb(workdir: Path, templates, size: int, clusters: int, profiles: list[str],
               end: int, window: int, interval: int, rules: list[dict]) -> tuple[Prometheus, dict]:
    """The fleet's raw block and the backfilled recording rules; returns a running Prometheus."""
    facts: dict = {}
    data = workdir / f"tsdb-{size}" / "data"
    shutil.rmtree(data.parent, ignore_errors=True)
    data.mkdir(parents=True)
    timestamps = list(range(end - window, end + 1, interval))
    started = time.monotonic()
    fleet = fleet_series(templates, size, clusters, profiles)
    facts["series"] = fleet[3]
    source = workdir / f"fleet-{size}.om"
    facts["samples"] = write_openmetrics(source, fleet, timestamps)
    facts["openmetrics_bytes"] = source.stat().st_size
    facts["write_seconds"] = time.monotonic() - started
    started = time.monotonic()
    run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
        "promtool create-blocks-from openmetrics")
    source.unlink()
    facts["promtool_seconds"] = time.monotonic() - started
    prometheus = Prometheus(data)
    prometheus.start()
    started = time.monotonic()
    for number, level in enumerate(rule_levels(rules)):
        path = workdir / f"level-{number}.rules.yaml"
        path.write_text(yaml.safe_dump({"groups": [{"name": f"level-{number}",
                                                    "rules": level}]}))
        out = workdir / f"rules-{size}-{number}"
        shutil.rmtree(out, ignore_errors=True)
        run(["promtool", "tsdb", "create-blocks-from", "rules", "-q", f"--url={prometheus.url}",
             f"--start={end - VIEW - 600}", f"--end={end}", f"--eval-interval={interval}s",
             f"--output-dir={out}", str(path)], f"backfilling rules of level {number}")
        prometheus.stop()
        for block in out.iterdir():
            shutil.move(str(block), data / block.name)
        shutil.rmtree(out, ignore_errors=True)
        prometheus.start()
    facts["rules_backfill_seconds"] = time.monotonic() - started
    return prometheus, facts


# ---- dashboards as Grafana sends them -------------------------------------------------------

LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")


def substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)",
                  lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def regex_escape(value: str) -> str:
    """As Grafana writes a multi-value variable's value into a PromQL string."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", value)


def natural(value: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", value)]


def variables(prometheus: Prometheus, model: dict, end: int, one_node: bool,
              rate_interval: str) -> dict[str, str]:
    """The dashboard's variables as Grafana resolves them: the defaults, or one node."""
    values = {"__rate_interval": rate_interval, "__range": "1h"}
    for variable in model["templating"]["list"]:
        name = variable["name"]
        if variable["type"] == "datasource":
            values[name] = "prometheus"
            continue
        if variable["type"] == "custom":
            values[name] = variable["current"]["value"]
            continue
        match = LABEL_VALUES.match(variable["query"])
        selector, label = match.groups()
        params = {"start": end - VIEW, "end": end}
        if selector:
            params["match[]"] = substitute(selector, values)
        _, answer = prometheus.query(f"/api/v1/label/{label}/values", **params)
        offered = sorted(answer.get("data") or [], key=natural)
        if variable.get("multi") and not (one_node and name == "node"):
            if variable.get("allValue"):
                values[name] = variable["allValue"]
            else:
                values[name] = "(" + "|".join(regex_escape(v) for v in offered) + ")"
        else:
            values[name] = offered[0] if offered else ""
    return values


def panels(model: dict) -> list[dict]:
    found = []
    for panel in model["panels"]:
        found += [panel, *panel.get("panels", [])]
    return [panel for panel in found if panel["type"] != "row"]


def send(prometheus: Prometheus, expr: str, instant: bool, end: int) -> tuple[float, dict]:
    if instant:
        return prometheus.query("/api/v1/query", query=expr, time=end, stats="1")
    return prometheus.query("/api/v1/query_range", query=expr, start=end - VIEW, end=end,
                            step=STEP, stats="1")


def measure(servers: dict[int, Prometheus], expr: str, instant: bool, end: int,
            repeat: int) -> dict[int, dict]:
    """The query on every fleet, ``repeat`` rounds, the fleets in turn within a round (so that
    whatever else the machine does weighs on every fleet alike); the median per fleet."""
    times: dict[int, list[float]] = {size: [] for size in servers}
    answers: dict[int, dict] = {}
    for _ in range(repeat):
        for size, prometheus in servers.items():
            seconds, answers[size] = send(prometheus, expr, instant, end)
            times[size].append(seconds)
        if max(t[-1] for t in times.values()) > 5:  # one run of a slow query is enough
            break
    results = {}
    for size, answer in answers.items():
        result = {"seconds": statistics.median(times[size])}
        if answer.get("status") == "success":
            result["series"] = len(answer["data"]["result"])
            stats = answer["data"].get("stats", {}).get("samples", {})
            result["samples"] = stats.get("totalQueryableSamples")
        else:
            result["error"] = answer.get("error", "")[:120]
        results[size] = result
    return results


def refresh(prometheus: Prometheus, jobs: list[tuple[str, bool]], end: int) -> float:
    """Every target of a dashboard, CONCURRENCY at a time, as Grafana refreshes it."""
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda job: send(prometheus, job[0], job[1], end), jobs))
    return time.perf_counter() - started


def time_dashboard(servers: dict[int, Prometheus], path: Path, end: int, repeat: int,
                   rate_interval: str) -> dict[int, dict]:
    model = json.loads(path.read_text())
    out: dict[int, dict] = {size: {"panels": {}, "refresh": {}} for size in servers}
    for variant in ("default", "one_node"):
        values = {size: variables(prometheus, model, end, variant == "one_node", rate_interval)
                  for size, prometheus in servers.items()}
        jobs: dict[int, list] = {size: [] for size in servers}
        for panel in panels(model):
            title = substitute(panel["title"], next(iter(values.values())))
            for target in panel["targets"]:
                key = f"{title} [{target['refId']}]" if len(panel["targets"]) > 1 else title
                instant = bool(target.get("instant"))
                exprs = {size: substitute(target["expr"], values[size]) for size in servers}
                for size in servers:
                    jobs[size].append((exprs[size], instant))
                for size, entry in measure_each(servers, exprs, instant, end, repeat).items():
                    out[size]["panels"].setdefault(key, {})[variant] = entry
        times: dict[int, list[float]] = {size: [] for size in servers}
        for _ in range(repeat):
            for size, prometheus in servers.items():
                times[size].append(refresh(prometheus, jobs[size], end))
            if max(t[-1] for t in times.values()) > 20:
                break
        for size in servers:
            out[size]["refresh"][variant] = statistics.median(times[size])
    return out


def measure_each(servers: dict[int, Prometheus], exprs: dict[int, str], instant: bool,
                 end: int, repeat: int) -> dict[int, dict]:
    """measure(), where the variables may have resolved differently per fleet."""
    if len(set(exprs.values())) == 1:
        return measure(servers, next(iter(exprs.values())), instant, end, repeat)
    return {size: measure({size: servers[size]}, expr, instant, end, repeat)[size]
            for size, expr in exprs.items()}


def time_rules(servers: dict[int, Prometheus], end: int, repeat: int) -> dict[int, dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    out: dict[int, dict] = {size: {} for size in servers}
    for group in groups:
        timed = {size: {} for size in servers}
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            for size, entry in measure(servers, rule["expr"], True, end, repeat).items():
                timed[size][name] = entry
        for size in servers:
            out[size][group["name"]] = {
                "rules": timed[size], "seconds": sum(r["seconds"] for r in timed[size].values())}
    return out


# ---- report -------------------------------------------------------------------------------

def extrapolate(points: list[tuple[int, float]], target: int) -> float:
    """Linear in the number of nodes from the two largest fleets (never below the largest)."""
    (n1, t1), (n2, t2) = sorted(points)[-2:]
    return t2 + max(0.0, (t2 - t1) / (n2 - n1)) * (target - n2)


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def cell(entry: dict) -> str:
    text = ms(entry["seconds"])
    if "error" in entry:
        return f"error after {text}"
    return f"{text} ({entry['series']})"


SUMMARY = (
    ("Kubelet call latency (p99)", "exporter-health", "Kubelet call latency (p99)", "default"),
    ("GPU memory used by pod", "numa-overview", "GPU memory used by pod", "default"),
    ("Data issues by kind", "exporter-health", "Data issues by kind", "default"),
)


def report(results: dict, target: int) -> str:
    sizes = sorted(results["fleets"], key=int)
    lines = []
    head = ("| nodes (series) | " + " | ".join(title for title, *_ in SUMMARY)
            + " | slowest panel, defaults | slowest panel, one node | slowest rule group | "
            "exporter-health refresh, defaults / one node |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    series_points: dict[str, list] = {}

    def row_for(size: str) -> list[float]:
        fleet = results["fleets"][size]
        values = []
        for _, dashboard, panel, variant in SUMMARY:
            values.append(fleet["dashboards"][dashboard]["panels"][panel][variant]["seconds"])
        for variant in ("default", "one_node"):
            values.append(max(p[variant]["seconds"] for d in fleet["dashboards"].values()
                              for p in d["panels"].values()))
        values.append(max(g["seconds"] for g in fleet["rules"].values()))
        health = fleet["dashboards"]["exporter-health"]["refresh"]
        values += [health["default"], health["one_node"]]
        return values

    for size in sizes:
        fleet = results["fleets"][size]
        values = row_for(size)
        for index, value in enumerate(values):
            series_points.setdefault(index, []).append((int(size), value))
        lines.append(f"| {int(size):,} ({fleet['facts']['series'] / 1000:.0f} k) | "
                     + " | ".join(ms(v) for v in values[:-2])
                     + f" | {ms(values[-2])} / {ms(values[-1])} |")
    if len(sizes) >= 2:
        extra = [extrapolate(series_points[i], target) for i in sorted(series_points)]
        lines.append(f"| {target:,}, extrapolated | " + " | ".join(ms(v) for v in extra[:-2])
                     + f" | {ms(extra[-2])} / {ms(extra[-1])} |")
    lines.append("")
    # per panel
    head = ("| dashboard / panel | " + " | ".join(f"{int(s):,}: defaults / one node"
                                                  for s in sizes)
            + f" | {target:,} extrapolated, defaults / one node |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    largest = results["fleets"][sizes[-1]]
    for dashboard, timing in largest["dashboards"].items():
        for panel in timing["panels"]:
            cells, points = [], {"default": [], "one_node": []}
            for size in sizes:
                entry = results["fleets"][size]["dashboards"][dashboard]["panels"][panel]
                cells.append(f"{cell(entry['default'])} / {cell(entry['one_node'])}")
                for variant in points:
                    points[variant].append((int(size), entry[variant]["seconds"]))
            extra = (" / ".join(ms(extrapolate(points[v], target)) for v in points)
                     if len(sizes) >= 2 else "")
            lines.append(f"| {dashboard} / {panel} | " + " | ".join(cells) + f" | {extra} |")
        cells, points = [], {"default": [], "one_node": []}
        for size in sizes:
            refresh = results["fleets"][size]["dashboards"][dashboard]["refresh"]
            cells.append(f"{ms(refresh['default'])} / {ms(refresh['one_node'])}")
            for variant in points:
                points[variant].append((int(size), refresh[variant]))
        extra = (" / ".join(ms(extrapolate(points[v], target)) for v in points)
                 if len(sizes) >= 2 else "")
        lines.append(f"| **{dashboard}: whole refresh** | " + " | ".join(cells) + f" | {extra} |")
    lines.append("")
    head = ("| rule group / rule | " + " | ".join(f"{int(s):,}" for s in sizes)
            + f" | {target:,} extrapolated |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for group, timing in largest["rules"].items():
        for name in [*timing["rules"], None]:
            points, cells = [], []
            for size in sizes:
                group_timing = results["fleets"][size]["rules"][group]
                entry = group_timing["rules"][name] if name else {
                    "seconds": group_timing["seconds"], "series": None}
                points.append((int(size), entry["seconds"]))
                cells.append(cell(entry) if name else f"**{ms(entry['seconds'])}**")
            extra = ms(extrapolate(points, target)) if len(sizes) >= 2 else ""
            label = f"{group} / {name}" if name else f"**{group}: whole group**"
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {extra} |")
    return "\n".join(lines)


def series_report(costs: dict) -> str:
    lines = ["| profile | pods | series per node: node / workload (device info) / health = total"
             " | --no-device-info | --no-workload-metrics | both | series ended + begun per pod "
             "replaced |", "|---|---:|---|---:|---:|---:|---|"]
    for profile, entry in costs.items():
        d = entry["default"]
        lines.append(
            f"| {profile} | {d['pods']} | {d.get('node', 0)} / {d.get('workload', 0)} "
            f"({d['device_info']}) / {d.get('health', 0)} = {d['total']} | "
            f"{entry['--no-device-info']['total']} | {entry['--no-workload-metrics']['total']} | "
            f"{entry['both']['total']} | {d['churn']['ended_per_pod']:.1f} + "
            f"{d['churn']['began_per_pod']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="250,1000", help="fleet sizes, in nodes")
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--profiles", default="dual-socket-gpu",
                        help="simulator profiles the fleet's nodes take, in turn")
    parser.add_argument("--scrape-interval", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (median)")
    parser.add_argument("--extrapolate", type=int, default=5000)
    parser.add_argument("--series-profiles", default="small,dual-socket-gpu,gb200-tray,large",
                        help="profiles for the series-per-node table")
    parser.add_argument("--series-only", action="store_true")
    parser.add_argument("--no-series", action="store_true", help="skip the series table")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            parser.error(f"{tool} not on PATH")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    profiles = args.profiles.split(",")
    interval = args.scrape_interval
    rate_interval = f"{max(4 * interval, STEP + interval)}s"
    results: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()},
                     "prometheus": subprocess.run(["prometheus", "--version"],
                                                  capture_output=True, text=True)
                     .stdout.splitlines()[0],
                     "settings": {"clusters": args.clusters, "profiles": profiles,
                                  "scrape_interval": interval, "step": STEP, "view": VIEW,
                                  "rate_interval": rate_interval, "repeat": args.repeat},
                     "fleets": {}}
    workdir = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        if not args.no_series:
            results["series_per_node"] = series_costs(args.series_profiles.split(","), workdir)
            print(series_report(results["series_per_node"]), flush=True)
        if args.series_only:
            return 0
        templates = {profile: capture(profile, workdir) for profile in profiles}
        groups = yaml.safe_load(RULES.read_text())["groups"]
        # The window ends just before a 2-hour block boundary: one block per promtool run.
        end = (int(time.time()) // 7200) * 7200 - 60
        window = VIEW + 900
        servers: dict[int, Prometheus] = {}
        try:
            for size in sizes:  # every fleet built first, each with its own Prometheus
                started = time.monotonic()
                servers[size], facts = build_tsdb(workdir, templates, size, args.clusters,
                                                  profiles, end, window, interval, groups)
                facts["build_seconds"] = time.monotonic() - started
                results["fleets"][str(size)] = {"facts": facts, "dashboards": {}}
                print(f"{size} nodes: {facts['series']:,} series, {facts['samples']:,} samples; "
                      f"built in {facts['write_seconds']:.0f} + {facts['promtool_seconds']:.0f} "
                      f"s, rules backfilled in {facts['rules_backfill_seconds']:.0f} s",
                      flush=True)
            started = time.monotonic()
            for path in sorted(DASHBOARD_DIR.glob("*.json")):
                for size, timing in time_dashboard(servers, path, end, args.repeat,
                                                   rate_interval).items():
                    results["fleets"][str(size)]["dashboards"][path.stem] = timing
            for size, timing in time_rules(servers, end, args.repeat).items():
                results["fleets"][str(size)]["rules"] = timing
            print(f"timed in {time.monotonic() - started:.0f} s", flush=True)
        finally:
            for prometheus in servers.values():
                prometheus.stop()
        print(report(results, args.extrapolate))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        path = args.json or (REPO / "benchmarks" / "results"
                             / f"fleet-{time.strftime('%Y%m%d-%H%M%S')}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1))
        print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
