"""What ``--kube-api`` costs: resident memory on ``large``, import cost, installed size.

* RSS of the exporter on the ``large`` profile after warm-up (``--interval 1
  --allocatable-interval 6``, 8 s to settle, then 30 scrapes 1 s apart), without the view, with
  it watching the simulator's fake API server serving the profile's node as a cluster shows it
  (``python -m exporter.simulator.apiserver``), and with the API holding nothing for the node;
  median of ``--runs`` runs each;
* the import cost of the view's modules (and, for comparison, of the official ``kubernetes``
  client when it is installed): RSS of a fresh interpreter that has imported the exporter,
  before and after;
* with ``--installed-size``: the installed size of the Python packages the image needs
  (``pip install --only-binary=:all:`` of the dependencies in ``pyproject.toml`` into a fresh
  venv, pip and setuptools left out, as the image removes pip), and what the ``kube`` extra
  (and, with ``--lightkube``, lightkube) would add.

    python benchmarks/kube_api.py                       # about 6 minutes
    python benchmarks/kube_api.py --runs 1 --installed-size --lightkube

``benchmarks/run.py`` runs the same measurements for its report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from common import free_port  # noqa: E402
from run import Simulator, rss_mib, scrape, stop, wait_up  # noqa: E402

PROFILE = "large"
SETTLE_SECONDS = 8
SCRAPES = 30
ELSEWHERE = "a-node-the-api-does-not-know"
# What the exporter imports without the view (its command line and serve path).
BASE_IMPORTS = (
    "import exporter.cli, exporter.commands.serve, exporter.refresh.loop, exporter.web.server"
)


# ---- resident memory on large ---------------------------------------------------------------

class FakeApiServer:
    """``python -m exporter.simulator.apiserver`` serving the profile's node, and its kubeconfig."""

    def __init__(self, profile: str, directory: Path):
        self.kubeconfig = directory / "kubeconfig"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exporter.simulator.apiserver", "--profile", profile, "--port",
             str(free_port()), "--kubeconfig", str(self.kubeconfig)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.banner = self.proc.stdout.readline().strip()  # printed once it serves
        if not self.banner:
            raise RuntimeError("the fake API server did not start")


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
    if api is not None:
        args.append("--kube-api")
        env["KUBECONFIG"] = str(api.kubeconfig)
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


async def measure_rss(runs: int) -> dict:
    sim = Simulator(PROFILE)
    with tempfile.TemporaryDirectory(prefix="bench-kube-") as directory:
        api = FakeApiServer(PROFILE, Path(directory))
        try:
            node_name = api.banner.split("for node ", 1)[1].split(" ", 1)[0]
            figures: dict[str, list[float]] = {"without": [], "with": [], "with_empty": []}
            async with aiohttp.ClientSession() as session:
                for _ in range(runs):  # interleaved, so drift hits all three alike
                    figures["without"].append(await exporter_rss(sim, session, None, node_name))
                    figures["with"].append(await exporter_rss(sim, session, api, node_name))
                    figures["with_empty"].append(await exporter_rss(sim, session, api,
                                                                    ELSEWHERE))
        finally:
            stop(api.proc)
            sim.stop()
    result: dict = {"api_server": api.banner}
    for name, values in figures.items():
        result[f"rss_{name}_mib"] = round(statistics.median(values), 1)
        result[f"rss_{name}_range_mib"] = [round(min(values), 1), round(max(values), 1)]
    result["rss_added_mib"] = round(result["rss_with_mib"] - result["rss_without_mib"], 1)
    return result


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

async def measure(runs: int, installed: bool, lightkube: bool = False) -> dict:
    print(f"[{PROFILE}] --kube-api: RSS, {runs} run(s) ...", file=sys.stderr)
    result = await measure_rss(runs)
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
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = await measure(args.runs, args.installed_size, args.lightkube)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
