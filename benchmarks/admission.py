"""What the simulated kubelet's admission costs: the fit engine on the simulator's books.

For each profile, on the simulator's own pods: building the fit engine's state of the node from
the simulator's books (what the first admission after any other change pays), then three pod
shapes admitted under each Topology Manager policy, scope ``container`` and ``pod`` (the fit
engine's decision alone), and one ``POST /pods`` end to end (decision, the pod's CPUs, memory
and devices booked, then removed again); median milliseconds over ``--rounds``. Prints a table
and writes JSON with ``--json PATH``.

    python -m benchmarks.admission
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.simulator import SimulatedNode, load_profile
from exporter.simulator.node.admissionconfig import POLICIES, AdmissionConfig
from exporter.simulator.profile import parse_pod

PODS = (
    {"namespace": "b", "name": "cpu4-8g", "containers": [{"name": "c", "cpus": 4,
                                                         "memory": "8Gi"}]},
    {"namespace": "b", "name": "vf", "containers": [
        {"name": "c", "cpus": 1, "memory": "1Gi", "devices": {"intel.com/sriov_netdevice": 1}}]},
    {"namespace": "b", "name": "init-and-app",
     "sidecars": [{"name": "proxy", "cpus": 1, "memory": "1Gi"}],
     "init_containers": [{"name": "setup", "cpus": 2, "memory": "1Gi"}],
     "containers": [{"name": "app", "cpus": 8, "memory": "4Gi",
                     "devices": {"nvidia.com/gpu": 1}}]},
)


def median_ms(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def measure(profile: str, rounds: int) -> dict[str, float]:
    state = SimulatedNode(load_profile(profile))
    held = [p for p in state.pods.values() if not p.released]
    results = {"build_state_ms": median_ms(lambda: state.kubelet.node_state(held), rounds)}
    before = state.managers()
    pods = [parse_pod(p) for p in PODS]
    shapes = [state.kubelet.shape(p) for p in pods]
    policies = POLICIES if len(state.spec.numa_nodes) <= 8 else ("none",)
    for policy in policies:
        for scope in ("container", "pod"):
            rules = AdmissionConfig(policy, scope).rules(state.spec)
            results[f"{policy}/{scope}_ms"] = median_ms(
                lambda rules=rules: [admit(shape, before, rules) for shape in shapes], rounds)

    def post() -> None:
        result = state.admit(pods[0])
        if result:
            state.remove(pods[0].namespace, pods[0].name)

    results["post_pods_ms"] = median_ms(post, rounds)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profiles", nargs="+",
                        default=["small", "dual-socket-gpu", "large", "gb200-tray"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results = {profile: measure(profile, args.rounds) for profile in args.profiles}
    for profile, figures in results.items():
        print(profile)
        for name, value in figures.items():
            print(f"  {name:32} {value:10.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
