"""The fleet's TSDB: every node's samples (its captured /metrics with its own target labels and
GPU UUIDs, Prometheus' scrape series and a dcgm-exporter target), written as OpenMetrics over
a window, made into a block by ``promtool tsdb create-blocks-from openmetrics``, the recording
rules backfilled by ``promtool tsdb create-blocks-from rules`` (one pass per level of rules that
read other rules), and the real Prometheus serving the result."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..harness import free_port, stop
from . import VIEW, http
from .node import profile_node_name

# dcgm-exporter 4.10's default counters (a subset), value per GPU index: DCGM 4.7's canonical
# names in base units where dcgm-exporter 4.9 renamed a field and DCGM's field reference names
# the new one (docs/dashboards.md cites which), the others as before; the dashboards read the
# first three
MIB = 1048576
DCGM_METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL_RATIO", lambda k: (20 + 9 * k) / 100),
    ("DCGM_FI_DEV_FB_USED_BYTES", lambda k: 1000.0 * (k + 1) * MIB),
    ("DCGM_FI_DEV_FB_FREE_BYTES", lambda k: (81559 - 1000.0 * (k + 1)) * MIB),
    ("DCGM_FI_DEV_FB_CAPACITY_BYTES", lambda k: 81559.0 * MIB),
    ("DCGM_FI_DEV_MEMORY_UTIL_RATIO", lambda k: (5 + k) / 100),
    ("DCGM_FI_DEV_SM_CLOCK_HERTZ", lambda k: 1980e6),
    ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", lambda k: 2619e6),
    ("DCGM_FI_DEV_GPU_TEMP", lambda k: 40 + k),
    ("DCGM_FI_DEV_POWER_USAGE", lambda k: 300.5 + k),
    ("DCGM_FI_DEV_XID_ERRORS", lambda k: 0),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", lambda k: 0),
)
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SCRAPE_SERIES = ("up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_series_added", "scrape_samples_post_metric_relabeling")
HAS_NODE = re.compile(r'(^|,)node="')
HAS_POD = re.compile(r'(^|,)pod="')


@dataclass(frozen=True)
class Tools:
    """The Prometheus line under test: its server and its promtool."""

    prometheus: str
    promtool: str

    def version(self) -> str:
        out = subprocess.run([self.prometheus, "--version"], capture_output=True, text=True)
        return (out.stdout + out.stderr).splitlines()[0]


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
        # GPUs of NVIDIA's DRA driver prepared for a claim: dcgm-exporter's DRA path labels
        # their series with the holder and the DRA device (dra_* labels)
        dra: dict[str, str] = {}
        for name, labels in zip((sample[0] for sample in samples), text.split("\x00")):
            held = dict(LABEL.findall(labels)) if name == "podresources_dra_device_info" else {}
            if held.get("driver") == "gpu.nvidia.com":
                gpu = f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, node + held['pool'] + held['device'])}"
                # the holder's labels clash with the scrape's target labels (dcgm-exporter's
                # own pod): Prometheus keeps them as exported_*
                dra[gpu] = (f'exported_container="{held["container"]}",'
                            f'exported_namespace="{held["namespace"]}",'
                            f'exported_pod="{held["pod"]}",dra_claim_name="{held["claim"]}",'
                            f'dra_claim_namespace="{held["namespace"]}",'
                            f'dra_driver_name="gpu.nvidia.com",dra_pool_name="{held["pool"]}",'
                            f'dra_device_name="{held["device"]}",')
        for k, gpu in enumerate(sorted(mapping.values()) + sorted(dra)):
            for metric, value in DCGM_METRICS:
                constant.append(
                    f'{metric}{{gpu="{k}",UUID="{gpu}",'
                    f'pci_bus_id="00000000:{0x18 + 16 * k:02X}:00.0",device="nvidia{k}",'
                    f'modelName="NVIDIA H100 80GB HBM3",hostname="{node}",'
                    f'DCGM_FI_SYSTEM_DRIVER_VERSION="580.95.05",{dra.get(gpu, "")}{dcgm}}} '
                    f'{fmt(value(k))}')
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

    def __init__(self, binary: str, data: Path):
        self.binary = binary
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
            [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.data}",
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
    """Recording rules by level: level 0 reads only scraped series, level n reads level n-1. A
    record several rules write (one per method, say) is all of them, at the highest level."""
    rules: dict[str, list[dict]] = {}
    for group in groups:
        for rule in group["rules"]:
            if "record" in rule:
                rules.setdefault(rule["record"], []).append(rule)
    level: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in level:
            exprs = " ".join(re.sub(r'"[^"]*"', '""', rule["expr"]) for rule in rules[name])
            reads = set(re.findall(r"[a-zA-Z_:][\w:]*", exprs)) & set(rules) - {name}
            level[name] = 1 + max((of(dep) for dep in reads), default=-1)
        return level[name]

    levels: list[list[dict]] = []
    for name, written in rules.items():
        while len(levels) <= of(name):
            levels.append([])
        levels[of(name)] += [{key: rule[key] for key in ("record", "expr", "labels")
                              if key in rule} for rule in written]
    return levels


def build_tsdb(tools: Tools, workdir: Path, templates, size: int, clusters: int,
               profiles: list[str], end: int, window: int, interval: int,
               rules: list[dict]) -> tuple[Prometheus, dict]:
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
    run([tools.promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
        "promtool create-blocks-from openmetrics")
    source.unlink()
    facts["promtool_seconds"] = time.monotonic() - started
    prometheus = Prometheus(tools.prometheus, data)
    prometheus.start()
    try:
        facts["rules_backfill_seconds"] = backfill(tools, prometheus, workdir, size, rules, end,
                                                   interval)
    except BaseException:
        prometheus.stop()
        raise
    return prometheus, facts


def backfill(tools: Tools, prometheus: Prometheus, workdir: Path, size: int, rules: list[dict],
             end: int, interval: int) -> float:
    """The recording rules over the view, level by level, into the data directory of a running
    Prometheus (restarted to load each level's blocks); returns the seconds it took."""
    data = prometheus.data
    started = time.monotonic()
    for number, level in enumerate(rule_levels(rules)):
        path = workdir / f"level-{number}.rules.yaml"
        path.write_text(yaml.safe_dump({"groups": [{"name": f"level-{number}",
                                                    "rules": level}]}))
        out = workdir / f"rules-{size}-{number}"
        shutil.rmtree(out, ignore_errors=True)
        run([tools.promtool, "tsdb", "create-blocks-from", "rules", "-q", f"--url={prometheus.url}",
             f"--start={end - VIEW - 600}", f"--end={end}", f"--eval-interval={interval}s",
             f"--output-dir={out}", str(path)], f"backfilling rules of level {number}")
        prometheus.stop()
        for block in out.iterdir():
            shutil.move(str(block), data / block.name)
        shutil.rmtree(out, ignore_errors=True)
        prometheus.start()
    return time.monotonic() - started
