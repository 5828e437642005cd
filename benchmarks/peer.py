"""A peer on the same node: NFD's ``nfd-topology-updater`` beside the exporter, on the same
simulated kubelet.

The topology-updater (kubernetes-sigs/node-feature-discovery) reads the same podresources
socket, once per ``-sleep-interval`` and on kubelet state-file changes, and publishes a
NodeResourceTopology object per node: per NUMA node, capacity, allocatable and available of
every resource. It is the natural peer of this exporter, and the only common one in Go.

What is measured, against one ``large`` simulator (steady: no pod changes):

* **RSS** after warm-up, and **CPU per update**: the process's CPU time over a window divided
  by the ``List`` calls the simulator answered it in that window (one per update), both
  programs at the same interval, one after the other;
* **per-NUMA figures**: NFD's zones (from a ``-oneshot`` run at ``-v=1``, which logs them)
  beside this exporter's allocatable and allocated per NUMA node.

The updater is built here, not by the tests: ``NFD_VERSION`` of the module
``sigs.k8s.io/node-feature-discovery`` from the Go module proxy (``go mod download``), in a
build module of its own whose ``replace`` block is the release's own, into ``.tools/bin``
(some 170 MB of modules and several minutes of compiling the first time, 9 minutes on a busy
2-CPU machine; nothing of NFD is kept in this repository). It runs with ``-no-publish``, so it
creates no object, but it still needs an API server: it waits for the NodeResourceTopology CRD
and keeps a node-scoped pod informer to tell Guaranteed pods. It gets the simulator's fake API
server, in this process, showing every pod the simulator lists, plus that CRD (and refusing
client-go's streaming list, which the fake server does not speak). It reads the host's
``/sys`` (no flag moves it), so it runs in a private mount namespace with the simulator's sysfs
tree bound on ``/sys`` (``unshare``, as root or with user namespaces).

    python -m benchmarks.peer                 # build if needed, then measure (about 2 minutes)
    python -m benchmarks.peer --build-only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from exporter._proto.v1 import api_pb2 as v1
from exporter.kubelet.client import KubeletClient
from exporter.podspec import parse_quantity
from exporter.simulator import load_profile
from exporter.topology import read_topology
from tests.support.fakeapiserver.server import FakeApiServer
from tests.support.kubeobjects import container, pod, status

from .harness import (
    REPO,
    Simulator,
    cpu_seconds,
    free_port,
    print_and_save,
    rss_mib,
    scrape,
    start_exporter,
    stop,
    wait_up,
)

NFD_MODULE = "sigs.k8s.io/node-feature-discovery"
NFD_VERSION = "v0.19.0"
BINARY = REPO / ".tools" / "bin" / f"nfd-topology-updater-{NFD_VERSION}"
BUILD_DIR = REPO / ".tools" / f"nfd-build-{NFD_VERSION}"
CRD_NAME = "noderesourcetopologies.topology.node.k8s.io"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"


# ---- building the peer --------------------------------------------------------------------

def build(log=print) -> Path:
    """The updater binary, built from the module proxy when it is not there yet."""
    if BINARY.exists():
        return BINARY
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go not found: the peer is built with the Go toolchain")
    info = json.loads(subprocess.run([go, "mod", "download", "-json",
                                      f"{NFD_MODULE}@{NFD_VERSION}"],
                                     capture_output=True, text=True, check=True).stdout)
    released = Path(info["GoMod"]).read_text()
    replaces = re.search(r"^replace \((.*?)^\)", released, re.MULTILINE | re.DOTALL)
    if replaces is None:
        raise RuntimeError(f"{NFD_MODULE}@{NFD_VERSION}: no replace block in its go.mod")
    # the release's own replace block; its API submodule from the proxy at the same version
    # (the release points it at ./api/nfd, which the module's zip leaves out)
    block = replaces.group(1).replace("=> ./api/nfd", f"=> {NFD_MODULE}/api/nfd {NFD_VERSION}")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    (BUILD_DIR / "go.mod").write_text(f"module nfdbuild\n\ngo 1.26\n\nrequire {NFD_MODULE} "
                                      f"{NFD_VERSION}\n\nreplace ({block})\n")
    environment = {**os.environ, "GOFLAGS": "-mod=mod"}
    package = f"{NFD_MODULE}/cmd/nfd-topology-updater"
    log(f"building nfd-topology-updater {NFD_VERSION} (a few minutes the first time) ...")
    subprocess.run([go, "get", f"{NFD_MODULE}@{NFD_VERSION}"], cwd=BUILD_DIR, env=environment,
                   check=True, capture_output=True)
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "build", "-trimpath", "-ldflags",
                    f"-s -w -X {NFD_MODULE}/pkg/version.version={NFD_VERSION}",
                    "-o", str(BINARY), package], cwd=BUILD_DIR, env=environment, check=True,
                   capture_output=True)
    return BINARY


# ---- what the peer needs around it --------------------------------------------------------

class PeerApiServer(FakeApiServer):
    """The simulator's fake API server, also answering the GET of the NodeResourceTopology
    CRD, as a cluster with NFD's chart installed does, and refusing client-go's streaming list
    (a watch with ``sendInitialEvents``) as an API server without the WatchList feature does:
    the informer then lists and watches, which the fake server speaks."""

    async def _serve(self, request: web.Request, collection: str,
                     version: str | None) -> web.StreamResponse:
        if request.query.get("sendInitialEvents") == "true":
            return web.json_response(status(422, "Invalid", "sendInitialEvents is forbidden "
                                            "for watch unless the WatchList feature gate is "
                                            "enabled"), status=422)
        return await super()._serve(request, collection, version)

    async def _unknown(self, request: web.Request) -> web.Response:
        if request.method == "GET" and request.path == CRD_PATH:
            return web.json_response({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": CRD_NAME, "uid": "nrt-crd", "resourceVersion": "1"},
                "spec": {"group": "topology.node.k8s.io", "scope": "Cluster",
                         "names": {"plural": "noderesourcetopologies",
                                   "kind": "NodeResourceTopology"}, "versions": []}})
        return await super()._unknown(request)


def complete_sysfs(sysfs: Path) -> None:
    """What a real sysfs has beyond the simulator's tree, which NFD reads: the links
    ``bus/node/devices/node<N>`` (memory and hugepages per node) and ``node<N>/cpu<C>`` (the
    CPUs of a node, for ghw), and each CPU's ``topology/core_id`` (its core: the first thread
    of ``thread_siblings_list``)."""
    topology = read_topology(sysfs)
    system = sysfs / "devices" / "system"
    links = sysfs / "bus" / "node" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    for numa_id, node in topology.numa_nodes.items():
        _link(links / f"node{numa_id}", Path(f"../../../devices/system/node/node{numa_id}"))
        for cpu in node.cpus:
            _link(system / "node" / f"node{numa_id}" / f"cpu{cpu}", Path(f"../../cpu/cpu{cpu}"))
            core = system / "cpu" / f"cpu{cpu}" / "topology"
            core.mkdir(parents=True, exist_ok=True)
            (core / "core_id").write_text(f"{min(topology.siblings(cpu))}\n")


def _link(path: Path, target: Path) -> None:
    if not path.is_symlink():
        path.symlink_to(target)


async def show_listed_pods(server: FakeApiServer, sim: Simulator) -> str:
    """Put every pod the kubelet lists in the API, as the peer's informer must find it: each
    container asking for as many whole CPUs as it holds exclusively (at least one), its
    memory blocks and devices, limits equal to requests (Guaranteed, as the kubelet's static
    managers require). Returns the node name."""
    client = KubeletClient(str(sim.socket))
    try:
        reply = v1.ListPodResourcesResponse.FromString((await client.list_pods()).raw)
    finally:
        await client.close()
    node_name = load_profile(sim.profile).name
    for listed in reply.pod_resources:
        containers = []
        for listed_container in listed.containers:
            requests = {"cpu": str(max(1, len(listed_container.cpu_ids))), "memory": "512Mi"}
            for block in listed_container.memory:
                requests[block.memory_type] = str(block.size)
            for device in listed_container.devices:
                requests[device.resource_name] = str(
                    int(requests.get(device.resource_name, "0")) + len(device.device_ids))
            containers.append(container(listed_container.name, requests))
        server.put("pods", pod(listed.namespace, listed.name, node_name, containers))
    return node_name


def private_sys(sysfs: Path) -> list[str]:
    """A command prefix running the rest in a mount namespace of its own with ``sysfs`` on
    /sys (as root; otherwise in a user namespace, where the system allows them)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RuntimeError("unshare not found (util-linux)")
    namespaces = ["--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        namespaces = ["--user", "--map-root-user", *namespaces]
    return [unshare, *namespaces, "sh", "-c", 'mount --bind "$0" /sys && exec "$@"',
            str(sysfs)]


def start_peer(sim: Simulator, kubeconfig: Path, node_name: str, interval: float,
               *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    (sim.state_dir / "device-plugins").mkdir(exist_ok=True)  # watched beside the state files
    command = [*private_sys(sim.sysfs), str(BINARY), "-no-publish",
               "-kubeconfig", str(kubeconfig), "-podresources-socket", str(sim.socket),
               "-kubelet-state-dir", str(sim.state_dir),
               "-kubelet-config-uri", "file:///dev/null", "-config", "",
               "-sleep-interval", f"{interval}s", "-port", str(port), *extra]
    proc = subprocess.Popen(command, env={**os.environ, "NODE_NAME": node_name},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, port


async def list_calls(sim: Simulator, session: aiohttp.ClientSession) -> int:
    calls = (await sim.control(session, "/state"))["calls"]
    # keyed "<gRPC method> <code>", the method as the wire names it (/v1.PodResourcesLister/List)
    return sum(count for key, count in calls.items()
               if key.rsplit(" ", 1)[0].rsplit("/", 1)[-1] == "List")


# ---- per-NUMA figures -----------------------------------------------------------------------

def peer_zones(log: str) -> dict[str, dict[str, dict[str, int]]]:
    """NFD's zones from its ``aggregated resources identified`` log line (YAML, as
    ``utils.Dump`` writes it): zone -> resource -> capacity, allocatable, available."""
    import yaml

    match = re.search(r'"aggregated resources identified" resourceZones=<\n(.*?)\n >', log,
                      re.DOTALL)
    if match is None:
        raise RuntimeError("nfd-topology-updater logged no zones:\n" + log[-2000:])
    text = "\n".join(line[1:] if line.startswith(("\t", " ")) else line
                     for line in match.group(1).splitlines())
    zones = {}
    for zone in yaml.safe_load(text) or []:
        zones[zone["name"]] = {r["name"]: {k: _quantity(r[k]) for k in
                                           ("capacity", "allocatable", "available")}
                               for r in zone.get("resources") or []}
    return zones


def _quantity(value: object) -> int:
    return round(parse_quantity(value))


def our_zones(samples: dict) -> dict[str, dict[str, dict[str, int]]]:
    """This exporter's allocatable and allocated per single NUMA node, from /metrics."""
    zones: dict[str, dict[str, dict[str, int]]] = {}
    families = {  # family -> (figure, the resource's label, or the resource itself)
        "podresources_cpus_allocatable": ("allocatable", "cpu"),
        "podresources_cpus_allocated": ("allocated", "cpu"),
        "podresources_memory_allocatable_bytes": ("allocatable", "memory_type"),
        "podresources_memory_allocated_bytes": ("allocated", "memory_type"),
        "podresources_devices_allocatable": ("allocatable", "resource"),
        "podresources_devices_allocated": ("allocated", "resource")}
    for (name, labels), value in samples.items():
        if name not in families:
            continue
        labels = dict(labels)
        numa = labels.get("numa_node", "")
        if not numa.isdigit():  # a group of nodes or unknown: NFD's zones are single nodes
            continue
        figure, resource = families[name]
        resource = labels.get(resource, resource)
        zones.setdefault(f"node-{numa}", {}).setdefault(resource, {})[figure] = int(value)
    return zones


# ---- the measurement ------------------------------------------------------------------------

async def measure(profile: str = "large", seconds: float = 30, interval: float = 1.0,
                  log=print) -> dict:
    """The peer and this exporter, one after the other on one simulator and API server."""
    build(log)
    sim = Simulator(profile)
    complete_sysfs(sim.sysfs)
    server = PeerApiServer(tokens=None)  # client-go sends no bearer token over plain HTTP
    node_name = await show_listed_pods(server, sim)
    await server.start()
    result: dict = {"peer": f"nfd-topology-updater {NFD_VERSION}", "profile": profile,
                    "interval_s": interval}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-peer-") as directory:
            kubeconfig = server.write_kubeconfig(Path(directory) / "kubeconfig")
            async with aiohttp.ClientSession() as session:
                result["zones_peer"] = await _oneshot_zones(sim, kubeconfig, node_name)
                result.update(await _steady(
                    "peer", sim, session, seconds,
                    lambda: start_peer(sim, kubeconfig, node_name, interval)))
                result.update(await _steady(
                    "ours", sim, session, seconds,
                    lambda: start_exporter(sim, "--interval", str(interval),
                                           "--allocatable-interval", str(interval * 6))))
                proc, port = start_exporter(sim)
                try:
                    result["zones_ours"] = our_zones(await wait_up(session, port))
                finally:
                    stop(proc)
    finally:
        await server.stop()
        sim.stop()
    return result


async def _oneshot_zones(sim: Simulator, kubeconfig: Path, node_name: str) -> dict:
    proc, _ = start_peer(sim, kubeconfig, node_name, 1, "-oneshot", "-v=1")
    try:
        output, _ = await asyncio.to_thread(proc.communicate, timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"nfd-topology-updater -oneshot failed ({proc.returncode}):\n"
                           + output.decode(errors="replace")[-3000:])
    return peer_zones(output.decode(errors="replace"))


async def _steady(name: str, sim: Simulator, session: aiohttp.ClientSession, seconds: float,
                  start) -> dict:
    """RSS after warm-up and CPU per List call over ``seconds``."""
    proc, port = start()
    try:
        if name == "ours":
            await wait_up(session, port)
        await asyncio.sleep(10)  # warm-up: the first full read, a few updates
        if proc.poll() is not None:
            output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"{name} exited ({proc.returncode}):\n{output[-3000:]}")
        calls, cpu = await list_calls(sim, session), cpu_seconds(proc.pid)
        started = time.monotonic()
        await asyncio.sleep(seconds)
        used, updates = cpu_seconds(proc.pid) - cpu, await list_calls(sim, session) - calls
        elapsed = time.monotonic() - started
        if name == "ours":
            await scrape(session, port)  # the process a scrape found, as in the other phases
        return {f"{name}_rss_mib": round(rss_mib(proc.pid), 1),
                f"{name}_cpu_ms_per_update": round(used / max(1, updates) * 1000, 2),
                f"{name}_updates_per_second": round(updates / elapsed, 2)}
    finally:
        stop(proc)


def agreement(peer: dict, ours: dict) -> tuple[int, int]:
    """(zone, resource) pairs both report on which they agree, and how many both report."""
    agree = compared = 0
    for zone, resources in peer.items():
        for resource, figures in resources.items():
            mine = ours.get(zone, {}).get(resource)
            if mine is None or "allocatable" not in mine:
                continue
            compared += 1
            agree += (figures["allocatable"] == mine["allocatable"] and figures["available"]
                      == mine["allocatable"] - mine.get("allocated", 0))
    return agree, compared


def report(result: dict) -> str:
    lines = [f"peer on {result['profile']}, one update every {result['interval_s']} s: "
             f"{result['peer']} (-no-publish) beside this exporter",
             f"  RSS MiB            peer {result['peer_rss_mib']:>8}   "
             f"ours {result['ours_rss_mib']:>8}",
             f"  CPU ms per update  peer {result['peer_cpu_ms_per_update']:>8}   "
             f"ours {result['ours_cpu_ms_per_update']:>8}",
             "  per NUMA node: resource  peer capacity / allocatable / available | "
             "ours allocatable / allocated"]
    peer, ours = result["zones_peer"], result["zones_ours"]
    agree, compared = agreement(peer, ours)
    lines.insert(3, f"  per-NUMA figures that agree (allocatable; the peer's available = our "
                    f"allocatable - allocated): {agree} of {compared}")
    for zone in sorted(set(peer) | set(ours), key=lambda z: int(z.rsplit("-", 1)[-1])):
        for resource in sorted(set(peer.get(zone, {})) | set(ours.get(zone, {}))):
            p = peer.get(zone, {}).get(resource)
            o = ours.get(zone, {}).get(resource)
            left = (f"{p['capacity']} / {p['allocatable']} / {p['available']}" if p else "-")
            right = (f"{o.get('allocatable', '-')} / {o.get('allocated', '-')}" if o else "-")
            lines.append(f"    {zone:8} {resource:28} {left:>34} | {right}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="large")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.build_only:
        print(build())
        return 0
    result = await measure(args.profile, args.seconds, args.interval,
                           lambda text: print(text, file=sys.stderr))
    return print_and_save(report(result), result, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
