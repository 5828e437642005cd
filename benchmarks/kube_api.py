"""What ``--kube-api`` costs: resident memory on ``large``, import cost, installed size.

* RSS of the exporter on the ``large`` profile after warm-up (``--interval 1
  --allocatable-interval 6``, 8 s to settle, then 30 scrapes 1 s apart), without the view, with
  it watching the simulator's fake API server serving the profile's node as a cluster shows it
  (``tests.support.fakeapiserver.server``, in this process) plus ``--dra-devices`` more DRA devices
  published in ResourceSlices (the standard ``numaNode`` attribute, every 16th device tainted;
  the profile's own DRA devices get a ``numaNode`` too), and with the API holding nothing for
  the node; median of ``--runs`` runs each;
* the time to turn those slices into the DRA inventory and its per-NUMA figures (what a
  change of a ResourceSlice costs the view and the next refresh);
* the import cost of the view's modules (and, for comparison, of the official ``kubernetes``
  client when it is installed): RSS of a fresh interpreter that has imported the exporter,
  before and after;
* with ``--installed-size``: the installed size of the Python packages the image needs
  (``pip install --only-binary=:all:`` of the dependencies in ``pyproject.toml`` into a fresh
  venv, pip and setuptools left out, as the image removes pip), and what the ``kube`` extra
  (and, with ``--lightkube``, lightkube) would add.

    python -m benchmarks.kube_api                       # about 6 minutes
    python -m benchmarks.kube_api --runs 1 --installed-size --lightkube
    python -m benchmarks.kube_api --runs 1 --dra-devices 4096

``python -m benchmarks.run`` runs the same measurements for its report.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import aiohttp

from exporter.accounting import Ledger
from exporter.accounting.dra import dra_figures
from exporter.accounting.numa import TopologyView
from exporter.kubeapi.resourceslices import inventory, slice_record
from exporter.simulator import SimulatedNode, load_profile
from exporter.simulator.node.sysfs import write_sysfs
from exporter.topology import read_topology
from tests.support.fakeapiserver.cluster import cluster_from_profile
from tests.support.fakeapiserver.server import FakeApiServer as SimulatedApiServer

from .harness import (
    IMAGE_ENVIRONMENT,
    REPO,
    Simulator,
    compile_bytecode,
    free_port,
    print_and_save,
    rss_mib,
    scrape,
    stop,
    wait_up,
)

PROFILE = "large"
SETTLE_SECONDS = 8
SCRAPES = 30
ELSEWHERE = "a-node-the-api-does-not-know"
# What the exporter imports without the view (its command line and serve path).
BASE_IMPORTS = (
    "import exporter.cli, exporter.commands.serve, exporter.refresh.loop, exporter.web.server"
)


# ---- resident memory on large ---------------------------------------------------------------

SLICE_DEVICES = 128  # devices per published ResourceSlice, as drivers split big pools
DRA_DEVICES = 1024


def published_slices(profile: str, extra: int) -> list[dict]:
    """The profile's DRA pools with a ``numaNode`` on every device, and ``extra`` devices of
    a driver of their own; every 16th device tainted NoSchedule."""
    spec = load_profile(profile)
    numa = [n.numa_id for n in spec.numa_nodes]
    pools = [(p.driver, p.pool, list(p.devices)) for p in spec.dra_pools]
    pools.append(("gpu.bench.example.com", f"{spec.name}-bench",
                  [f"dev-{i}" for i in range(extra)]))
    slices = []
    for driver, pool, names in pools:
        parts = [names[i:i + SLICE_DEVICES] for i in range(0, len(names), SLICE_DEVICES)]
        for index, part in enumerate(parts):
            devices = []
            for name in part:
                n = len(devices) + index * SLICE_DEVICES
                device: dict = {"name": name, "attributes": {
                    "resource.kubernetes.io/numaNode": {"int": numa[n % len(numa)]}}}
                if n % 16 == 15:
                    device["taints"] = [{"key": "bench", "effect": "NoSchedule"}]
                devices.append(device)
            slices.append({"metadata": {"name": f"{spec.name}-{driver}-{index}"},
                           "spec": {"driver": driver, "nodeName": spec.name,
                                    "pool": {"name": pool, "generation": 1,
                                             "resourceSliceCount": len(parts)},
                                    "devices": devices}})
    return slices


class FakeApiServer:
    """The simulator's fake API server in this process, serving the profile's node with its DRA
    devices published, and its kubeconfig."""

    def __init__(self, profile: str, directory: Path, dra_devices: int):
        self.kubeconfig = directory / "kubeconfig"
        self.profile = profile
        self.dra_devices = dra_devices
        self.server = SimulatedApiServer()
        self.banner = ""

    async def start(self) -> None:
        name = cluster_from_profile(self.server, self.profile)
        for obj in list(self.server.objects["resourceslices"].values()):
            self.server.delete("resourceslices", obj["metadata"]["name"])
        for obj in published_slices(self.profile, self.dra_devices):
            self.server.put("resourceslices", obj)
        await self.server.start()
        self.server.write_kubeconfig(self.kubeconfig)
        self.banner = (f"node {name}: {len(self.server.objects['pods'])} pods, "
                       f"{len(self.server.objects['resourceslices'])} ResourceSlices")

    async def stop(self) -> None:
        await self.server.stop()


async def exporter_rss(sim: Simulator, session: aiohttp.ClientSession,
                       api: FakeApiServer | None, node_name: str) -> float:
    """RSS (MiB) of one exporter process after warm-up and 30 scrapes."""
    port = free_port()
    args = [sys.executable, "-m", "exporter", "--log-level", "warning", "--socket",
            str(sim.socket), "--sysfs-root", str(sim.sysfs), "--listen-address",
            f"127.0.0.1:{port}", "--interval", "1", "--allocatable-interval", "6",
            "--node-name", node_name]
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(IMAGE_ENVIRONMENT)
    if api is not None:
        args.append("--kube-api")
        env["KUBECONFIG"] = str(api.kubeconfig)
    compile_bytecode(REPO)
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        await wait_up(session, port)
        if api is not None:  # the view has listed all three resources
            deadline = time.monotonic() + 60
            while (await scrape(session, port)).get(
                    ("podresources_kube_api_up", (("resource", "pods"),))) != 1.0:
                if time.monotonic() > deadline:
                    raise RuntimeError("the Kubernetes-API view did not sync")
                await asyncio.sleep(0.25)
        await asyncio.sleep(SETTLE_SECONDS)
        for _ in range(SCRAPES):
            await scrape(session, port)
            await asyncio.sleep(1)
        return rss_mib(proc.pid)
    finally:
        stop(proc)


async def measure_rss(runs: int, dra_devices: int) -> dict:
    sim = Simulator(PROFILE)
    with tempfile.TemporaryDirectory(prefix="bench-kube-") as directory:
        api = FakeApiServer(PROFILE, Path(directory), dra_devices)
        await api.start()
        try:
            node_name = load_profile(PROFILE).name
            figures: dict[str, list[float]] = {"without": [], "with": [], "with_empty": []}
            async with aiohttp.ClientSession() as session:
                for _ in range(runs):  # interleaved, so drift hits all three alike
                    figures["without"].append(await exporter_rss(sim, session, None, node_name))
                    figures["with"].append(await exporter_rss(sim, session, api, node_name))
                    figures["with_empty"].append(await exporter_rss(sim, session, api,
                                                                    ELSEWHERE))
        finally:
            await api.stop()
            sim.stop()
    result: dict = {"api_server": api.banner, "dra_devices_published": dra_devices}
    for name, values in figures.items():
        result[f"rss_{name}_mib"] = round(statistics.median(values), 1)
        result[f"rss_{name}_range_mib"] = [round(min(values), 1), round(max(values), 1)]
    result["rss_added_mib"] = round(result["rss_with_mib"] - result["rss_without_mib"], 1)
    return result


# ---- the DRA inventory -------------------------------------------------------------------------

def measure_inventory(dra_devices: int) -> dict:
    """Seconds to parse the slices, build the inventory and its per-NUMA figures; best of 5."""
    spec = load_profile(PROFILE)
    objects = published_slices(PROFILE, dra_devices)
    with tempfile.TemporaryDirectory(prefix="bench-sysfs-") as directory:
        view = TopologyView(read_topology(str(write_sysfs(spec, directory))))
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        records = dict(slice_record(obj) for obj in objects)
        figures = dra_figures(inventory(records.values(), [], lambda _: None), view)
        timings.append(time.perf_counter() - started)
    assert figures is not None
    # a changed slice hands the ledger a new inventory: every pod is counted again
    pods = tuple(sim.assignment for sim in SimulatedNode(spec).pods.values())
    ledger = Ledger()
    inventories = [inventory(records.values(), [], lambda _: None) for _ in range(6)]
    ledger.update(pods, None, view.topology, "v1", inventories[0])
    recounts = []
    for fresh in inventories[1:]:
        started = time.perf_counter()
        ledger.update(pods, None, view.topology, "v1", fresh)
        recounts.append(time.perf_counter() - started)
    return {"inventory_devices": sum(len(r.devices) for r in records.values()),
            "inventory_ms": round(min(timings) * 1000, 2),
            "ledger_recount_ms": round(min(recounts) * 1000, 2), "ledger_pods": len(pods)}


# ---- import cost ------------------------------------------------------------------------------

IMPORT_PROBE = """
import gc, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
{base}
gc.collect()
before = rss()
{more}
gc.collect()
print(round(rss() - before, 1))
"""


def import_cost(more: str, python: str = sys.executable, base: str = BASE_IMPORTS) -> float:
    """RSS (MiB) that ``more`` adds to a fresh interpreter that has run ``base``; median of 3."""
    values = []
    for _ in range(3):
        out = subprocess.run([python, "-c", IMPORT_PROBE.format(base=base, more=more)],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
        values.append(float(out))
    return statistics.median(values)


def measure_imports() -> dict:
    result = {"import_view_mib": import_cost(
        "import exporter.kubeapi.view, exporter.kubeapi.client, exporter.kubeapi.config")}
    try:
        result["import_kubernetes_mib"] = import_cost(
            "import kubernetes.client, kubernetes.config, exporter.kubeapi.plugins")
    except subprocess.CalledProcessError:
        result["import_kubernetes_mib"] = None  # the kube extra is not installed
    return result


# ---- installed size ---------------------------------------------------------------------------

LEFT_OUT = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence")


def site_packages_bytes(venv: Path) -> int:
    """Bytes of the files in the venv's site-packages (compiled bytecode included), without
    pip and setuptools."""
    (site,) = venv.glob("lib/python*/site-packages")
    total = 0
    for entry in site.iterdir():
        if entry.name.split("-")[0].split(".")[0] in LEFT_OUT or entry.name.startswith(LEFT_OUT):
            continue
        files = [entry] if entry.is_file() else (p for p in entry.rglob("*") if p.is_file())
        total += sum(p.lstat().st_size for p in files)
    return total


def pip_install(venv: Path, *requirements: str) -> None:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", "--only-binary=:all:", *requirements],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"pip install {' '.join(requirements)} failed:\n{done.stderr}")


def fresh_venv(directory: Path, *requirements: str) -> tuple[Path, int]:
    """A venv with the image's dependencies and ``requirements``; its size before those."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip_install(venv, *project["dependencies"])
    base = site_packages_bytes(venv)
    if requirements:
        pip_install(venv, *requirements)
    return venv, base


def measure_installed(lightkube: bool) -> dict:
    kube = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["kube"]
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-venv-") as directory:
        venv, base = fresh_venv(Path(directory), *kube)
        result["installed_default_mb"] = round(base / 1e6, 1)
        result["installed_kube_extra_added_mb"] = round(
            (site_packages_bytes(venv) - base) / 1e6, 1)
    if lightkube:
        with tempfile.TemporaryDirectory(prefix="bench-venv-") as directory:
            venv, base = fresh_venv(Path(directory), "lightkube")
            result["installed_lightkube_added_mb"] = round(
                (site_packages_bytes(venv) - base) / 1e6, 1)
            result["import_lightkube_mib"] = import_cost(
                "import lightkube, lightkube.resources.core_v1, "
                "lightkube.resources.resource_v1", python=str(venv / "bin" / "python"),
                base="import asyncio, json, ssl, aiohttp, yaml")
    return result


# ---- all of it --------------------------------------------------------------------------------

async def measure(runs: int, installed: bool, lightkube: bool = False,
                  dra_devices: int = DRA_DEVICES) -> dict:
    print(f"[{PROFILE}] --kube-api: RSS, {runs} run(s) ...", file=sys.stderr)
    result = await measure_rss(runs, dra_devices)
    result.update(measure_inventory(dra_devices))
    result.update(measure_imports())
    if installed:
        print("installed size: fresh venvs ...", file=sys.stderr)
        result.update(measure_installed(lightkube))
    return result


def report(result: dict) -> str:
    lines = [f"--kube-api on {PROFILE} (fake API server: {result['api_server']})",
             f"  RSS without the view          {result['rss_without_mib']} MiB "
             f"(range {result['rss_without_range_mib']})",
             f"  RSS with the view             {result['rss_with_mib']} MiB "
             f"(range {result['rss_with_range_mib']})",
             f"  RSS with the view, no objects {result['rss_with_empty_mib']} MiB "
             f"(range {result['rss_with_empty_range_mib']})",
             f"  the view adds                 {result['rss_added_mib']} MiB",
             f"  DRA inventory of {result['inventory_devices']} devices "
             f"{result['inventory_ms']} ms (parse, newest generation, NUMA, per-NUMA figures)",
             f"  a changed slice: the ledger counts {result['ledger_pods']} pods again in "
             f"{result['ledger_recount_ms']} ms",
             f"  import of the view's modules  {result['import_view_mib']} MiB",
             f"  import of kubernetes (extra)  {result['import_kubernetes_mib']} MiB"]
    for key, title in (("installed_default_mb", "installed, default image   "),
                       ("installed_kube_extra_added_mb", "the kube extra would add   "),
                       ("installed_lightkube_added_mb", "lightkube would add        "),
                       ("import_lightkube_mib", "import of lightkube (MiB)  ")):
        if key in result:
            lines.append(f"  {title}   {result[key]}{' MB' if 'installed' in key else ''}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--installed-size", action="store_true",
                        help="also install the image's packages into fresh venvs and size them")
    parser.add_argument("--lightkube", action="store_true",
                        help="with --installed-size: also size and import lightkube")
    parser.add_argument("--dra-devices", type=int, default=DRA_DEVICES,
                        help="DRA devices published beyond the profile's own")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = await measure(args.runs, args.installed_size, args.lightkube, args.dra_devices)
    return print_and_save(report(result), result, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
