"""How long one refresh takes on absurd kubelet replies, and how much memory it needs.

Each case is a ``List`` reply a broken or hostile kubelet (or device plugin) could send. Every
case runs in a child process (so its peak RSS is its own) with a time limit, through the
refresh's own pipeline (decode, ledger, render) on a two-NUMA-node topology. Prints one line per
case; no budget is checked.

    python benchmarks/hostile_replies.py               # every case, 120 s limit each
    python benchmarks/hostile_replies.py --limit 30 numa_ids_one_entry
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from exporter._proto.v1 import api_pb2 as v1  # noqa: E402
from exporter.model import NumaNode, Topology  # noqa: E402


def _pod(name: str, containers: list[v1.ContainerResources], **fields: object) -> v1.PodResources:
    return v1.PodResources(namespace="ns", name=name, containers=containers, **fields)


def _devices(ids: list[str], numa: list[list[int]]) -> list[v1.ContainerDevices]:
    return [v1.ContainerDevices(resource_name="example.com/gpu", device_ids=ids,
                                topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=n) for n in nodes]))
            for nodes in numa]


def _normal_pod() -> v1.PodResources:
    return _pod("normal", [v1.ContainerResources(name="c", cpu_ids=[0, 1], devices=_devices(
        ["gpu-0"], [[0]]))])


def case(name: str) -> bytes:
    """The encoded reply of one case (always with one ordinary pod beside the hostile one)."""
    if name == "numa_ids_one_entry":  # one device, one entry naming 20,000 NUMA ids
        hostile = [_pod("hostile", [v1.ContainerResources(
            name="c", devices=_devices(["d"], [list(range(20_000))]))])]
    elif name == "numa_ids_entries":  # one device, one entry per NUMA id (the kubelet's form)
        hostile = [_pod("hostile", [v1.ContainerResources(
            name="c", devices=_devices(["d"], [[n] for n in range(20_000)]))])]
    elif name == "pod_listed_100_times":  # the pod listed 100 times, 200 devices each time
        hostile = [_pod("hostile", [v1.ContainerResources(name="c", devices=[
            device for i in range(200) for device in _devices([f"d{listing}-{i}"], [[0]])])])
            for listing in range(100)]
    elif name == "memory_types":  # 50,000 memory types
        hostile = [_pod("hostile", [v1.ContainerResources(name="c", memory=[
            v1.ContainerMemory(memory_type=f"type-{i}", size=1 << 20,
                               topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=0)]))
            for i in range(50_000)])])]
    elif name == "cpu_ids":  # 4 M CPU ids
        hostile = [_pod("hostile", [v1.ContainerResources(name="c",
                                                          cpu_ids=range(4_000_000))])]
    elif name == "memory_types_spread":  # 50,000 memory types, 50 per pod: within the limits
        hostile = [_pod(f"hostile-{k}", [v1.ContainerResources(name="c", memory=[
            v1.ContainerMemory(memory_type=f"type-{k}-{i}", size=1 << 20,
                               topology=v1.TopologyInfo(nodes=[v1.NUMANode(ID=0)]))
            for i in range(50)])]) for k in range(1000)]
    elif name == "cpu_ids_spread":  # 4 M CPU ids, 16,000 per pod: within every limit
        hostile = [_pod(f"hostile-{k}", [v1.ContainerResources(
            name="c", cpu_ids=range(16_000 * k, 16_000 * (k + 1)))]) for k in range(250)]
    else:
        raise SystemExit(f"unknown case {name!r}")
    return v1.ListPodResourcesResponse(
        pod_resources=[_normal_pod(), *hostile]).SerializeToString()


CASES = ("numa_ids_one_entry", "numa_ids_entries", "pod_listed_100_times", "memory_types",
         "memory_types_spread", "cpu_ids", "cpu_ids_spread")


def run_case(name: str) -> dict[str, object]:
    """In the child: build the reply, then time one refresh over it."""
    raw = case(name)
    topology = Topology.from_nodes([NumaNode(0, frozenset(range(0, 4))),
                                    NumaNode(1, frozenset(range(4, 8)))])
    from exporter.kubelet.decode import Replies
    from exporter.refresh.pipeline import Pipeline
    pipeline = Pipeline()
    started, cpu = time.perf_counter(), time.process_time()
    result = pipeline.run(Replies(raw), topology)
    issues = dict(result.issues)
    return {"case": name, "reply_bytes": len(raw),
            "refresh_seconds": round(time.perf_counter() - started, 3),
            "refresh_cpu_seconds": round(time.process_time() - cpu, 3),
            "section_bytes": len(result.section),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "issues": {str(k): v for k, v in sorted(issues.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--limit", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child)))
        return 0
    for name in args.cases:
        try:
            output = subprocess.run([sys.executable, __file__, "--child", name],
                                    capture_output=True, text=True, timeout=args.limit)
        except subprocess.TimeoutExpired:
            print(f"{name:22} did not finish within {args.limit:.0f} s")
            continue
        if output.returncode != 0:
            print(f"{name:22} failed: {output.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(output.stdout)
        print(f"{name:22} reply {row['reply_bytes'] / 1e6:6.2f} MB  refresh "
              f"{row['refresh_seconds']:8.3f} s (CPU {row['refresh_cpu_seconds']:.3f} s)  "
              f"peak RSS {row['peak_rss_mib']:7.1f} MiB  issues {row['issues']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
