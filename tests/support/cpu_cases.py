"""CPU picks worked by hand from the kubelet's ``cpumanager`` code (v1.34-v1.37), one node
layout and CPU manager configuration each, for the real kubelet
(tests/integration/test_real_kubelet_cpu_picks.py) and the fit engine
(tests/unit/fit/test_cpu_picks.py) alike. Each step's comment says how the kubelet decides.

Layouts (x86 numbering: with SMT, core k's threads are k and k + N/2):

* ``nps4``: two sockets in NPS4 — 8 NUMA nodes of 4 cores x 2 threads (64 CPUs), socket s
  holding NUMA nodes 4s..4s+3, an L3 per 2 cores (core k under L3 k // 2); CPUs 0 and 32
  (core 0) reserved. 2 sockets < 8 NUMA nodes: ``socketsFirst``. ``CPUsPerUncore`` 4.
* ``nps2``: two sockets of 2 NUMA nodes of 4 CPUs, no SMT (16 CPUs), one CPU reserved per
  NUMA node (0, 4, 8, 12).
* ``two-sockets-per-numa``: 2 NUMA nodes of 8 CPUs, no SMT, each holding 2 sockets of 4
  (sockets 0-3); CPU 0 reserved. 4 sockets >= 2 NUMA nodes: ``numaFirst``.
* ``odd-threads``: 4 NUMA nodes of 4 cores x 2 threads (32 CPUs), three CPUs reserved on each
  (a whole core and one thread of the next: 4n, 4n+16, 4n+1), so 5 free per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exporter.simulator.profile import parse_profile

from .realkubelet import node_description


@dataclass(frozen=True)
class Step:
    cpus: int
    expected: frozenset[int] | None  # None: rejected
    reason: str = ""  # the rejection's reason


@dataclass(frozen=True)
class PickCase:
    name: str
    layout: str
    policy: str  # the Topology Manager's
    options: dict[str, str]
    steps: tuple[Step, ...]
    notes: str = ""
    gates: dict[str, bool] = field(default_factory=dict)


def _ids(*ranges: tuple[int, int] | int) -> frozenset[int]:
    out: set[int] = set()
    for r in ranges:
        out.update(range(r[0], r[1] + 1) if isinstance(r, tuple) else (r,))
    return frozenset(out)


ALPHA = {"CPUManagerPolicyAlphaOptions": True}

CASES = (
    PickCase(
        "packed", "nps4", "none", {},
        (
            # no full socket (30 free of 32) nor NUMA node needed; takeFullCores: sockets by
            # free CPUs (0 first), NUMA node 0 (6 free) first, its cores 1, 2
            Step(4, _ids(1, 2, 33, 34)),
            # NUMA node 0 has 2 free left: core 3
            Step(2, _ids(3, 35)),
            # NUMA node 0 full; NUMA node 1 first of socket 0's: core 4
            Step(2, _ids(4, 36)),
            # NUMA node 1 (6 free) before 2 and 3 (8): its cores 5, 6
            Step(4, _ids(5, 6, 37, 38)),
        )),
    PickCase(
        "uncore-cache", "nps4", "none", {"prefer-align-cpus-by-uncorecache": "true"},
        (
            # takeUncoreCache: NUMA node 0's L3 0 (2 free) is not free, L3 1 is: taken whole
            Step(4, _ids(2, 3, 34, 35)),
            # takePartialUncore(L3 0): one core needed, core 1's threads
            Step(2, _ids(1, 33)),
            # NUMA node 1's L3 2 first: its lowest core, 4
            Step(2, _ids(4, 36)),
            # L3 2 has 2 free, less than a whole L3: takeFullUncore takes L3 3 whole
            Step(4, _ids(6, 7, 38, 39)),
        )),
    PickCase(
        "strict-cpu-reservation", "nps4", "none", {"strict-cpu-reservation": "true"},
        (
            # the reserved CPUs leave the shared pool too; the picks are packed's
            Step(4, _ids(1, 2, 33, 34)),
            Step(2, _ids(3, 35)),
        )),
    PickCase(
        "spread", "nps4", "none", {"distribute-cpus-across-cores": "true"},
        (
            # no whole cores: takeRemainingCPUs, sortAvailableCPUsSpread: socket 0 (fewest
            # free), its CPUs by id
            Step(4, _ids(1, 2, 3, 4)),
            Step(2, _ids(5, 6)),
        ), gates=ALPHA),
    PickCase(
        "distribute-numa", "nps4", "none", {"distribute-cpus-across-numa": "true"},
        (
            # 12 CPUs over 2 NUMA nodes: (0,1) balance 3.072, (1,2) 2.537 (the lowest): 6
            # from each, packed: cores 4-6 and 8-10
            Step(12, _ids(4, 5, 6, 8, 9, 10, 36, 37, 38, 40, 41, 42)),
        )),
    PickCase(
        "packed-12", "nps4", "none", {},
        (
            # takeFullNUMANodes: NUMA node 1 (free, in socket 0 with fewer free CPUs); then
            # cores 1 and 2 of NUMA node 0 (6 free, first)
            Step(12, _ids((4, 7), (36, 39), 1, 2, 33, 34)),
        )),
    PickCase(
        "restricted-without-align-by-socket", "nps2", "restricted", {},
        (
            # a NUMA node's 4 CPUs could hold 4: minAffinitySize 1; no node has 4 free, so
            # {0,1} is the best hint, not preferred: TopologyAffinityError
            Step(4, None, "TopologyAffinityError"),
        )),
    PickCase(
        "restricted-align-by-socket", "nps2", "restricted", {"align-by-socket": "true"},
        (
            # isHintSocketAligned: {0,1} spans 1 socket = ceil(1 / 2 NUMA nodes per socket):
            # preferred, admitted; getAlignedCPUs: socket 0's free CPUs, NUMA node 0's first
            Step(4, _ids(1, 2, 3, 5)),
        ), gates=ALPHA),
    PickCase(
        "numa-first", "two-sockets-per-numa", "none", {},
        (
            # numaFirst: no free NUMA node needed; takeFullSockets (4 CPUs each): socket 1
            # (socket 0 holds the reserved CPU); then core 1 of socket 0 (fewest free)
            Step(5, _ids(1, 4, 5, 6, 7)),
        )),
)


# full-pcpus-only with distribute-cpus-across-numa on "odd-threads", 14 CPUs (7 groups of 2):
# 2 or 3 NUMA nodes hold too few whole groups (2 per node); 4 take 2 CPUs each, leaving 3 on
# every node and a remainder of 6 to stripe in groups of 2; the subset of two nodes passes the
# raw sum check (3 + 3 >= 6) but holds one group each, and the loop that stripes it
# (takeByTopologyNUMADistributed) never ends: the kubelet does not finish admitting the pod
# (kubernetes#140730, fixed after 1.37). 12 CPUs (6 groups) fit 3 nodes and are admitted.
STALL = PickCase(
    "distribute-numa-stall", "odd-threads", "none",
    {"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"},
    (Step(14, None, "AdmissionStalled"),))
STALL_THEN = Step(12, _ids(2, 3, 6, 7, 10, 11, 18, 19, 22, 23, 26, 27))


def layout_profile(layout: str) -> dict[str, Any]:
    """The simulator profile of a named layout (its ``cpu_layout`` included), with the static
    CPU manager."""
    cpu_layout: dict[str, Any]
    if layout == "nps4":
        numa = [f"{4 * n}-{4 * n + 3},{4 * n + 32}-{4 * n + 35}" for n in range(8)]
        cpu_layout = {"sockets": {"0": "0-15,32-47", "1": "16-31,48-63"},
                      "l3": {str(c): f"{2 * c},{2 * c + 1},{2 * c + 32},{2 * c + 33}"
                             for c in range(16)}}
        threads, reserved = 2, "0,32"
    elif layout == "nps2":
        numa = [f"{4 * n}-{4 * n + 3}" for n in range(4)]
        cpu_layout = {"sockets": {"0": "0-7", "1": "8-15"}}
        threads, reserved = 1, "0,4,8,12"
    elif layout == "odd-threads":
        numa = [f"{4 * n}-{4 * n + 3},{4 * n + 16}-{4 * n + 19}" for n in range(4)]
        cpu_layout = {}
        threads = 2
        reserved = ",".join(str(c) for n in range(4) for c in (4 * n, 4 * n + 16, 4 * n + 1))
    elif layout == "two-sockets-per-numa":
        numa = ["0-7", "8-15"]
        cpu_layout = {"sockets": {"0": "0-3", "1": "4-7", "2": "8-11", "3": "12-15"}}
        threads, reserved = 1, "0"
    else:
        raise ValueError(layout)
    profile = {"name": layout, "node_name": f"{layout}-node",
               "numa_nodes": [{"id": n, "cpus": cpus, "memory": "4Gi"}
                              for n, cpus in enumerate(numa)],
               "threads_per_core": threads, "reserved_cpus": reserved,
               "cpu_manager_policy": "static", "memory_manager_policy": "None",
               "topology_manager_policy": "none", "cpu_layout": cpu_layout}
    return profile


def description(case: PickCase) -> dict[str, Any]:
    profile = {**layout_profile(case.layout), "topology_manager_policy": case.policy,
               "cpu_manager_policy_options": case.options, "feature_gates": case.gates}
    return node_description(parse_profile(profile))


def pod(name: str, cpus: int) -> dict[str, Any]:
    resources = {"cpu": str(cpus), "memory": "100Mi"}
    return {"metadata": {"name": name, "namespace": "picks"},
            "spec": {"containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": resources,
                                                   "limits": resources}}]},
            "status": {"phase": "Pending"}}
