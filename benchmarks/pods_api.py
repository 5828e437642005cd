"""What pod context from the kubelet's Pods API saves against the Kubernetes-API view's pod watch.

On the ``large`` and ``huge`` profiles, with pods churning on both sides (the simulator replaces
``--churn-pods`` pods a second and serves them through its Pods API; the API server sees the same
number of pods replaced, each as a real pod's life shows on a node's pod watch: ADDED, three
status updates, a deletion timestamp, DELETED), four exporters one after another:

* ``view``: ``--kube-api --no-pods-api`` (the view lists and watches the node's pods);
* ``view+pods``: ``--kube-api`` with the Pods API (the view watches the node, ResourceSlices
  and DeviceTaintRules only);
* ``pods``: the Pods API alone (no API server at all);
* ``neither``: ``--no-pods-api``, no view (the floor).

For each: the exporter's RSS after warm-up, and what it asked of the API server over a fixed
window from its start (requests and response bytes per resource, through a counting proxy in
front of the simulator's fake API server, ``tests.support.fakeapiserver.server``). Then the decode
figures: the import cost of the ``v1.Pod`` subset against the whole of core/v1 (compiled from
``protos/k8s.io/`` into a scratch directory), and the bytes and decode time of a realistic pod
(managed fields, env, volumes, statuses) as the kubelet's ``pod.Marshal()`` sends it.

    python -m benchmarks.pods_api                 # about 8 minutes
    python -m benchmarks.pods_api --profiles large --window 30
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
from collections import Counter
from pathlib import Path

import aiohttp
from aiohttp import web

from exporter.protogen import compile_whole_k8s
from exporter.simulator import SimulatedNode, load_profile
from tests.support.fakeapiserver.cluster import cluster_from_profile
from tests.support.fakeapiserver.server import FakeApiServer

from . import harness
from .harness import REPO, Simulator, free_port
from .kube_api import import_cost

WINDOW_SECONDS = 60  # from the exporter's start: its initial lists, then the churn
CHURN_PODS = 2  # replaced every second on both sides
VARIANTS = {
    "view": ("--kube-api", "--no-pods-api"),
    "view+pods": ("--kube-api",),
    "pods": (),
    "neither": ("--no-pods-api",),
}


# ---- the API server's side --------------------------------------------------------------------

class CountingProxy:
    """A reverse proxy in front of the fake API server counting requests and response bytes
    by resource (watches streamed through as they come)."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.requests: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.port = free_port()
        self.generation = 0  # what a request counts toward: the variant running when it came
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @staticmethod
    def resource(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._forward)
        # a handler ends with its client (the exporter it served stops), upstream stream too
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._session is not None:  # ends the streams still open upstream first
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def reset(self) -> None:
        """Count from now on; streams opened before count no more."""
        self.generation += 1
        self.requests.clear()
        self.bytes.clear()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        resource = self.resource(request.path)
        generation = self.generation
        self.requests[resource] += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() in (
            "authorization", "accept")}
        async with self._session.get(self.upstream + request.path_qs,
                                     headers=headers) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                "Content-Type": upstream.headers.get("Content-Type", "application/json")})
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    if generation == self.generation:
                        self.bytes[resource] += len(chunk)
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass
            return response


async def churn_api(server: FakeApiServer, pods_per_second: int) -> None:
    """Replace pods on the API side as a node's pod watch sees pods come and go."""
    names = sorted(server.objects["pods"])
    serial = 0
    while True:
        for _ in range(pods_per_second):
            key = names.pop(0)
            old = server.objects["pods"][key]
            gone = json.loads(json.dumps(old))
            gone["metadata"]["deletionTimestamp"] = "2026-11-27T12:00:00Z"
            server.put("pods", gone)
            server.delete("pods", key[1], key[0])
            serial += 1
            fresh = json.loads(json.dumps(old))
            fresh["metadata"]["name"] = f"{key[1].rsplit('-', 1)[0]}-c{serial}"
            fresh["status"] = {"phase": "Pending"}
            server.put("pods", fresh)
            for phase in ("Pending", "Running", "Running"):
                fresh = json.loads(json.dumps(old))
                fresh["metadata"]["name"] = f"{key[1].rsplit('-', 1)[0]}-c{serial}"
                fresh["status"]["phase"] = phase
                server.put("pods", fresh)
            names.append((key[0], fresh["metadata"]["name"]))
        await asyncio.sleep(1)


# ---- one exporter -----------------------------------------------------------------------------

async def run_variant(sim: Simulator, proxy: CountingProxy, kubeconfig: Path, node_name: str,
                      extra: tuple[str, ...], window: float) -> dict:
    port = free_port()
    args = [sys.executable, "-m", "exporter", "--log-level", "warning", "--socket",
            str(sim.socket), "--sysfs-root", str(sim.sysfs), "--listen-address",
            f"127.0.0.1:{port}", "--interval", "2", "--node-name", node_name,
            "--pods-api-socket", str(sim.pods_api_socket), *extra]
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(harness.IMAGE_ENVIRONMENT, KUBECONFIG=str(kubeconfig))
    proxy.reset()
    started = time.monotonic()
    harness.compile_bytecode(REPO)
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session:
            await harness.wait_up(session, port)
            samples = await harness.scrape(session, port)
            while time.monotonic() - started < window:
                samples = await harness.scrape(session, port)
                await asyncio.sleep(1)
            source = next((dict(labels) for (name, labels) in samples
                           if name == "podresources_pods_source_info"), {})
            return {"rss_mib": round(harness.rss_mib(proc.pid), 1), "source": source.get("source"),
                    "api_requests": dict(proxy.requests), "api_bytes": dict(proxy.bytes),
                    "window_s": window}
    finally:
        harness.stop(proc)


async def measure_profile(profile: str, window: float, churn: int, runs: int) -> dict:
    node_name = load_profile(profile).name
    sim = Simulator(profile, churn_interval=1, churn_pods=churn, pods_api=True)
    server = FakeApiServer()
    cluster_from_profile(server, profile)
    await server.start()
    proxy = CountingProxy(server.url)
    await proxy.start()
    churner = asyncio.create_task(churn_api(server, churn))
    results: dict = {"pod_count": len(SimulatedNode(load_profile(profile)).pods), "runs": runs}
    runs_of: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-pods-api-") as directory:
            kubeconfig = Path(directory) / "kubeconfig"
            server.write_kubeconfig(kubeconfig)
            text = kubeconfig.read_text().replace(server.url, f"http://127.0.0.1:{proxy.port}")
            kubeconfig.write_text(text)
            for run in range(runs):  # interleaved, so drift hits every variant alike
                for name, extra in VARIANTS.items():
                    print(f"[{profile}] {name}, run {run + 1} of {runs} ...", file=sys.stderr)
                    runs_of[name].append(await run_variant(sim, proxy, kubeconfig, node_name,
                                                           extra, window))
    finally:
        churner.cancel()
        await proxy.stop()
        await server.stop()
        sim.stop()
    for name, measured in runs_of.items():
        rss = [m["rss_mib"] for m in measured]
        results[name] = {**measured[-1], "rss_mib": statistics.median(rss),
                         "rss_range_mib": [min(rss), max(rss)]}
    return results


# ---- decoding -----------------------------------------------------------------------------------

REALISTIC_POD = '''
import sys
from full.api.core.v1 import generated_pb2 as core
pod = core.Pod()
m = pod.metadata
m.name, m.namespace = "llm-train-7d9f8c6b5-x2x7q", "ml"
m.uid = "6a7c1f0e-2c8b-4d6e-9f1a-3b5c7d9e1f20"
m.labels.update({"app.kubernetes.io/name": "llm-train", "pod-template-hash": "7d9f8c6b5"})
m.annotations["kubernetes.io/config.seen"] = "2026-11-21T12:00:00.000000000Z"
m.ownerReferences.add(apiVersion="apps/v1", kind="ReplicaSet", name="llm-train-7d9f8c6b5",
                      uid="owner", controller=True)
for manager in ("kube-controller-manager", "kubelet"):
    f = m.managedFields.add(manager=manager, operation="Update", apiVersion="v1",
                            fieldsType="FieldsV1")
    one = b'"k:{\\\\"name\\\\":\\\\"c\\\\"}":{"f:image":{},"f:resources":{}}'
    f.fieldsV1.Raw = b'{"f:metadata":{"f:labels":{}},"f:spec":{"f:containers":{' + one * 4 + b'}}}'
s = pod.spec
s.nodeName, s.serviceAccountName, s.schedulerName = "gpu-node-01", "default", "default-scheduler"
s.volumes.add(name="kube-api-access").volumeSource.projected.sources.add(
    ).serviceAccountToken.path = "token"
s.tolerations.add(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute",
                  tolerationSeconds=300)
def add(target, name, cpu, sidecar=False):
    c = target.add(name=name, image="registry.example.com/ml/" + name + ":2.4.1",
                   imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
    if sidecar:
        c.restartPolicy = "Always"
    for key, value in (("cpu", cpu), ("memory", "16Gi"), ("nvidia.com/gpu", "1")):
        c.resources.limits[key].string = value
        c.resources.requests[key].string = value
    for i in range(6):
        c.env.add(name="VAR_%d" % i, value="x" * 24)
    c.volumeMounts.add(name="kube-api-access", readOnly=True,
                       mountPath="/var/run/secrets/kubernetes.io/serviceaccount")
add(s.initContainers, "proxy", "1", sidecar=True)
for name in ("trainer", "loader", "metrics"):
    add(s.containers, name, "8")
st = pod.status
st.phase, st.qosClass, st.hostIP, st.podIP = "Running", "Guaranteed", "192.0.2.10", "10.244.1.7"
for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled"):
    st.conditions.add(type=t, status="True")
for name in ("trainer", "loader", "metrics"):
    cs = st.containerStatuses.add(name=name, ready=True, image="img", imageID="sha256:" + "ab" * 32,
                                  containerID="containerd://" + "cd" * 32)
    cs.state.running.SetInParent()
sys.stdout.write(pod.SerializeToString().hex())
'''


def measure_decoding() -> dict:
    from exporter.podsapi.decode import decode_pod
    from exporter.podsapi.source import pod_entry

    with tempfile.TemporaryDirectory(prefix="bench-core-v1-") as scratch:
        directory = Path(scratch)
        compile_whole_k8s(directory, "full")
        raw = bytes.fromhex(subprocess.run([sys.executable, "-c", REALISTIC_POD], cwd=directory,
                                           check=True, capture_output=True, text=True).stdout)
        protobuf = "import grpc, exporter._proto.v1.api_pb2"  # what the exporter has loaded
        result = {
            "import_subset_mib": import_cost(
                "import exporter._proto.k8s.api.core.v1.generated_pb2", base=protobuf),
            "import_full_mib": import_cost(
                f"import sys; sys.path.insert(0, {str(directory)!r}); "
                "import full.api.core.v1.generated_pb2", base=protobuf),
            "import_podsapi_mib": import_cost(
                "import exporter.podsapi.decode, exporter.podsapi.client, "
                "exporter.podsapi.source, exporter.podsapi.sources",
                base="import exporter.cli, exporter.commands.serve, exporter.refresh.loop"),
        }
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(1000):
            pod_entry(raw)
        timings.append((time.perf_counter() - started) / 1000)
    assert decode_pod(raw)["metadata"]["name"] == "llm-train-7d9f8c6b5-x2x7q"
    result.update(pod_bytes=len(raw), pod_entry_us=round(min(timings) * 1e6, 1))
    return result


# ---- report -------------------------------------------------------------------------------------

def report(results: dict) -> str:
    lines = []
    decoding = results.get("decoding")
    if decoding:
        lines += [f"decoding: import of the v1.Pod subset {decoding['import_subset_mib']} MiB, "
                  f"of the whole core/v1 {decoding['import_full_mib']} MiB; the Pods API "
                  f"client with it {decoding['import_podsapi_mib']} MiB; a realistic pod is "
                  f"{decoding['pod_bytes']} bytes, {decoding['pod_entry_us']} us to its record"]
    for profile, by_variant in results.get("profiles", {}).items():
        window = by_variant["view"]["window_s"]
        lines.append(f"{profile} ({by_variant['pod_count']} pods; {window:g} s from each start; "
                     f"RSS median of {by_variant['runs']} runs):")
        for name in VARIANTS:
            row = by_variant[name]
            pods_requests = row["api_requests"].get("pods", 0)
            pods_bytes = row["api_bytes"].get("pods", 0)
            total = sum(row["api_bytes"].values())
            requests = sum(row["api_requests"].values())
            lines.append(f"  {name:10} RSS {row['rss_mib']:6.1f} MiB {row['rss_range_mib']}  "
                         f"source {row['source']:8}  API requests {requests:3} "
                         f"(pods {pods_requests})  API bytes {total / 1024:8.1f} KiB (pods "
                         f"{pods_bytes / 1024:.1f} KiB)")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["large", "huge"])
    parser.add_argument("--window", type=float, default=WINDOW_SECONDS)
    parser.add_argument("--churn-pods", type=int, default=CHURN_PODS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict = {"decoding": measure_decoding(), "profiles": {}}
    for profile in args.profiles:
        results["profiles"][profile] = await measure_profile(profile, args.window,
                                                            args.churn_pods, args.runs)
    return harness.print_and_save(report(results), results, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
