"""What the simulator's kubelet admission costs: one ``admit()`` per policy and scope.

For each profile, on the simulator's own assignments: building the admission view of the node
(``node_from_spec`` with the listed pods) and admitting three pod shapes under each Topology
Manager policy, scope ``container`` and ``pod``; median milliseconds over ``--rounds``. This
is what one ``POST /pods`` spends deciding. Prints a table and writes JSON with ``--json PATH``.

    python benchmarks/admission.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from exporter.simulator import NodeState, load_profile
from exporter.simulator.admission import (
    POLICIES,
    AdmissionConfig,
    ContainerRequest,
    PodRequest,
    admit,
    node_from_spec,
)

GiB = 1 << 30
PODS = (
    PodRequest("b", "cpu4-8g", [ContainerRequest("c", 4000, {"memory": 8 * GiB})]),
    PodRequest("b", "vf", [ContainerRequest("c", 1000, {"memory": GiB},
                                            {"intel.com/sriov_netdevice": 1})]),
    PodRequest("b", "init-and-app", [ContainerRequest("app", 8000, {"memory": 4 * GiB},
                                                      {"nvidia.com/gpu": 1})],
               [ContainerRequest("setup", 2000, {"memory": GiB}),
                ContainerRequest("proxy", 1000, {"memory": GiB}, sidecar=True)]),
)


def median_ms(action, rounds: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def measure(profile: str, rounds: int) -> dict[str, float]:
    spec = load_profile(profile)
    state = NodeState(spec)
    listed = [p.assignment for p in state.listed_pods(True)]
    results = {"build_node_ms": median_ms(lambda: node_from_spec(spec, listed), rounds)}
    node = node_from_spec(spec, listed)
    policies = POLICIES if len(node.numa_ids) <= 8 else ("none",)
    for policy in policies:
        for scope in ("container", "pod"):
            config = AdmissionConfig(policy, scope)
            results[f"{policy}/{scope}_ms"] = median_ms(
                lambda config=config: [admit(node, pod, config) for pod in PODS], rounds)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
