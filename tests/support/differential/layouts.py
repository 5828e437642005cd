"""Node layouts and CPU manager options for the differential's cases, as users run them.

Drawn after the rest of a case's node, into its profile:

* sockets (``cpu_layout.sockets``): one per NUMA node; several NUMA nodes per socket (AMD EPYC
  NPS2/NPS4, Intel sub-NUMA clustering, one socket of four NUMA nodes); or two sockets in one
  NUMA node — so the CPU manager's socket-first and NUMA-first orders
  (``cpu_assignment.go`` ``numaOrSocketsFirstFuncs``) both run;
* L3 caches (``cpu_layout.l3``): none, one per NUMA node (cAdvisor files it as the node's, the
  kubelet falls back to the socket), one per socket (spanning a socket's NUMA nodes), or one
  per group of cores (an EPYC CCX) — what ``prefer-align-cpus-by-uncorecache`` aligns to;
* dies (``cpu_layout.dies``) and, rarely, ``core_id`` numbered per die (``core_id_per_die``),
  where cAdvisor's cores (one ``core_id`` per package and NUMA node) are not the kernel's;
* NUMA nodes without CPUs (CXL or HBM memory) beside those with CPUs, ids after them;
* NUMA distances from the sockets (10, 11-12 in a socket, 20-32 across, 14-17 to memory-only
  nodes) where the case drew none;
* CPU manager options: every option alone and in the combinations
  ``policy_options.go`` ``NewStaticPolicyOptions`` / ``ValidateStaticPolicyOptions`` accept
  (with ``CPUManagerPolicyAlphaOptions`` on for the alpha ones).

Nothing here knows what the answer should be.
"""

from __future__ import annotations

import random
from typing import Any

ALPHA_OPTIONS = ("align-by-socket", "distribute-cpus-across-cores")
# pairs NewStaticPolicyOptions refuses (policy_options.go, 1.34 to 1.37)
REFUSED_PAIRS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)


def draw_layout(rng: random.Random, profile: dict[str, Any], cores: int, threads: int) -> None:
    """Add the layout and the CPU manager options to ``profile`` (drawn by ``cases._node``:
    NUMA nodes 0..n-1 of ``cores`` cores of ``threads`` threads, CPU k's siblings k + N/T)."""
    numa_nodes = profile["numa_nodes"]
    cpu_numa = len(numa_nodes)
    cpus_of = {n["id"]: sorted(int(c) for c in n["cpus"].split(",")) for n in numa_nodes}
    sockets = _sockets(rng, cpus_of, cores, threads)
    layout: dict[str, Any] = {"sockets": _lists(sockets)}
    l3 = _l3(rng, cpus_of, sockets, cores, threads)
    if l3:
        layout["l3"] = _lists(l3)
    if rng.random() < 0.08:
        # two dies per socket, core_id restarting on each: cAdvisor's cores are not the kernel's
        stride = _stride(cpus_of, threads)
        dies: dict[int, list[int]] = {}
        for socket, cpus in sockets.items():
            firsts = sorted({_first_thread(c, stride, threads) for c in cpus})
            lower = set(firsts[: max(1, len(firsts) // 2)])
            for cpu in cpus:
                upper = _first_thread(cpu, stride, threads) not in lower
                dies.setdefault(2 * socket + upper, []).append(cpu)
        layout["dies"] = _lists(dies)
        layout["core_id_per_die"] = True
    profile["cpu_layout"] = layout
    memory_only = rng.choice((0, 0, 0, 0, 1, 2))
    memory_only = min(memory_only, 8 - cpu_numa)
    for extra in range(memory_only):
        numa_nodes.append({"id": cpu_numa + extra, "cpus": "",
                           "memory": f"{rng.choice((4, 8, 16))}Gi", "hugepages": {}})
    if "distances" not in numa_nodes[0] and (len(sockets) > 1 or memory_only) \
            and rng.random() < 0.7:
        _distances(rng, numa_nodes, sockets, cpus_of)
    elif "distances" in numa_nodes[0] and memory_only:
        _widen_distances(rng, numa_nodes, cpu_numa)
    if profile["cpu_manager_policy"] == "static":
        _options(rng, profile, len(sockets), cpu_numa)


def _first_thread(cpu: int, stride: int, threads: int) -> int:
    """The first thread of ``cpu``'s core (CPU k's siblings are k + N/T: ``thread_siblings``)."""
    return cpu % stride if threads > 1 else cpu


def _stride(cpus_of: dict[int, list[int]], threads: int) -> int:
    total = sum(len(c) for c in cpus_of.values())
    return total // threads


def _sockets(rng: random.Random, cpus_of: dict[int, list[int]], cores: int, threads: int
             ) -> dict[int, list[int]]:
    count = len(cpus_of)
    form = rng.choice(("per-numa", "per-numa", "multi-numa", "multi-numa", "multi-numa",
                       "split-numa"))
    sockets: dict[int, list[int]] = {}
    if form == "multi-numa" and count > 1:
        per_socket = rng.choice([d for d in (2, 3, 4, 6, 8) if d <= count and count % d == 0])
        for numa, cpus in cpus_of.items():
            sockets.setdefault(numa // per_socket, []).extend(cpus)
    elif form == "split-numa" and cores >= 2:
        stride = _stride(cpus_of, threads)
        for numa, cpus in cpus_of.items():
            first = sorted(cpus)[:cores]
            for cpu in cpus:
                core = first.index(_first_thread(cpu, stride, threads))
                sockets.setdefault(2 * numa + (core >= cores // 2), []).append(cpu)
    else:
        sockets = {numa: list(cpus) for numa, cpus in cpus_of.items()}
    return sockets


def _l3(rng: random.Random, cpus_of: dict[int, list[int]], sockets: dict[int, list[int]],
        cores: int, threads: int) -> dict[int, list[int]]:
    form = rng.choice(("none", "none", "numa", "socket", "ccx", "ccx", "ccx"))
    if form == "numa":
        return {numa: list(cpus) for numa, cpus in cpus_of.items()}
    if form == "socket":
        return {socket: list(cpus) for socket, cpus in sockets.items()}
    if form == "none":
        return {}
    size = rng.choice((1, 2, 3, 4))
    stride = _stride(cpus_of, threads)
    caches: dict[int, list[int]] = {}
    next_id = 0
    for numa in sorted(cpus_of):
        first = sorted(cpus_of[numa])[:cores]
        for start in range(0, cores, size):
            group = first[start:start + size]
            caches[next_id] = group + ([c + stride for c in group] if threads == 2 else [])
            next_id += 1
    return caches


def _distances(rng: random.Random, numa_nodes: list[dict[str, Any]],
               sockets: dict[int, list[int]], cpus_of: dict[int, list[int]]) -> None:
    socket_of = {}
    for socket, cpus in sockets.items():
        for cpu in cpus:
            socket_of.setdefault(cpu, socket)
    home = {numa: socket_of[cpus[0]] for numa, cpus in cpus_of.items()}
    near, far, memory = rng.choice((11, 12)), rng.choice((20, 21, 32)), rng.choice((14, 17))
    ids = [n["id"] for n in numa_nodes]
    for node in numa_nodes:
        row = []
        for other in ids:
            if other == node["id"]:
                row.append(10)
            elif node["id"] not in home or other not in home:
                row.append(memory if (node["id"] in home or other in home) else far)
            else:
                row.append(near if home[node["id"]] == home[other] else far)
        node["distances"] = row


def _widen_distances(rng: random.Random, numa_nodes: list[dict[str, Any]], cpu_numa: int
                     ) -> None:
    """The drawn table plus rows and columns for the memory-only nodes added after it."""
    ids = [n["id"] for n in numa_nodes]
    extra = {(a, b): rng.choice((14, 17, 32)) for a in ids for b in ids if a < b}
    for node in numa_nodes:
        row = list(node.get("distances", []))[:cpu_numa]
        while len(row) < len(ids):
            other = ids[len(row)]
            row.append(10 if other == node["id"] else
                       extra[(min(other, node["id"]), max(other, node["id"]))])
        node["distances"] = row


def _options(rng: random.Random, profile: dict[str, Any], sockets: int, cpu_numa: int) -> None:
    options = dict(profile.get("cpu_manager_policy_options", {}))
    candidates = ["distribute-cpus-across-numa", "distribute-cpus-across-cores",
                  "align-by-socket", "strict-cpu-reservation",
                  "prefer-align-cpus-by-uncorecache"]
    odds = {"distribute-cpus-across-numa": 0.2, "distribute-cpus-across-cores": 0.12,
            "align-by-socket": 0.2, "strict-cpu-reservation": 0.15,
            "prefer-align-cpus-by-uncorecache": 0.3}
    for option in candidates:
        if rng.random() >= odds[option]:
            continue
        chosen = {*options, option}
        if any(a in chosen and b in chosen for a, b in REFUSED_PAIRS):
            continue
        if option == "align-by-socket" and (
                profile["topology_manager_policy"] == "single-numa-node" or sockets > cpu_numa):
            continue  # ValidateStaticPolicyOptions refuses both
        options[option] = "true"
    if options:
        profile["cpu_manager_policy_options"] = options
    if any(option in options for option in ALPHA_OPTIONS):
        profile.setdefault("feature_gates", {})["CPUManagerPolicyAlphaOptions"] = True


def _lists(groups: dict[int, list[int]]) -> dict[str, str]:
    return {str(key): ",".join(map(str, sorted(cpus))) for key, cpus in sorted(groups.items())}
