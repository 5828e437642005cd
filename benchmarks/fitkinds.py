"""A change's fit recompute for every kind of shape, against the accounting of the same change.

On real ``List`` replies of the simulator (profile ``large``; for multi-NUMA devices the same
node with 64 FPGAs each on two NUMA nodes), one pod replaced before every reply, each refresh
runs the refresh's pipeline and the fit view as the loop runs them
(:func:`benchmarks.refreshcost.refresh_cost`); the fit section's CPU time is taken apart from
the rest of the same refresh (decode, accounting, rendering, the /metrics variants). One row
per kind of shape, each under the Topology Manager policy, scope and options named:

* the four shapes of ``benchmarks/fit.py`` (single containers and a Burstable pair) under
  each policy: ``single-numa-node``, ``restricted``, ``best-effort`` and ``none``, and with
  ``full-pcpus-only``;
* a shape with a regular init container, one with a restartable init container (a sidecar),
  and one asking a device that sits on two NUMA nodes.

    python -m benchmarks.fitkinds              # about 3 minutes
    python -m benchmarks.fitkinds --replies 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from .fit import SHAPES_FILE
from .harness import Simulator, print_and_save
from .refreshcost import fit_view, refresh_cost, replies

INIT_SHAPES = """\
shapes:
  with-init:
    initContainers: [{cpu: 4, memory: 8Gi}]
    containers: [{cpu: 4, memory: 8Gi, intel.com/sriov_netdevice: 1}]
"""
SIDECAR_SHAPES = """\
shapes:
  with-sidecar:
    initContainers: [{name: proxy, cpu: 1, memory: 256Mi, sidecar: true}]
    containers: [{cpu: 4, memory: 8Gi, intel.com/sriov_netdevice: 1}]
"""
MULTI_NUMA_SHAPES = """\
shapes:
  fpga: {cpu: 2, memory: 4Gi, example.com/fpga: 1}
"""
MULTI_NUMA_DEVICES = [{"resource": "example.com/fpga", "numa": [2 * i, 2 * i + 1], "count": 16}
                      for i in range(4)]


@dataclass(frozen=True)
class Kind:
    """One row: shapes, the kubelet's Topology Manager settings, and the node."""

    name: str
    shapes: str
    policy: str = "single-numa-node"
    scope: str = "container"
    full_pcpus_only: bool = False
    multi_numa: bool = False  # the node with FPGAs on two NUMA nodes each


KINDS = (
    Kind("four shapes, single-numa-node", SHAPES_FILE),
    Kind("four shapes, restricted (scope pod)", SHAPES_FILE, "restricted", "pod"),
    Kind("four shapes, best-effort", SHAPES_FILE, "best-effort"),
    Kind("four shapes, none", SHAPES_FILE, "none"),
    Kind("four shapes, full-pcpus-only", SHAPES_FILE, full_pcpus_only=True),
    Kind("an init container", INIT_SHAPES),
    Kind("a sidecar", SIDECAR_SHAPES),
    Kind("a device on two NUMA nodes", MULTI_NUMA_SHAPES, multi_numa=True),
)


def multi_numa_profile(directory: Path) -> str:
    """``large`` with 64 FPGAs, each on two NUMA nodes (16 per pair), as a profile file."""
    from importlib import resources
    data = json.loads(resources.files("exporter.simulator").joinpath(
        "profiles", "large.json").read_text())
    data["devices"] = [*data["devices"], *MULTI_NUMA_DEVICES]
    path = directory / "large-multi-numa.json"
    path.write_text(json.dumps(data))
    return str(path)


async def measure(count: int, kinds: tuple[Kind, ...] = KINDS) -> dict:
    """Per kind: the fit answers' and the rest's CPU ms per refresh with a pod replaced."""
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-fitkinds-") as directory:
        for multi in (False, True):
            wanted = [k for k in kinds if k.multi_numa == multi]
            if not wanted:
                continue
            profile = multi_numa_profile(Path(directory)) if multi else "large"
            sim = Simulator(profile)
            try:
                async with aiohttp.ClientSession() as session:
                    got = await replies(sim, session, count, count)
            finally:
                sim.stop()
            for kind in wanted:
                print(f"fit recompute: {kind.name} ...", file=sys.stderr)
                view = fit_view(Path(directory), kind.shapes, kind.policy, kind.scope,
                                kind.full_pcpus_only)
                figures = refresh_cost(*got, view, None)
                result[kind.name] = {
                    "fit_ms": figures["churn_fit_ms"],
                    "accounting_ms": figures["churn_accounting_ms"],
                    "ratio": figures["churn_fit_over_accounting_x"],
                    "capacities": {a.shape.name: a.capacity for a in view.answers}}
    return result


def report(result: dict) -> str:
    lines = ["A change's fit recompute per kind of shape (large, a pod replaced before every "
             "refresh; CPU ms per refresh):",
             f"  {'kind':44} {'fit':>8} {'the rest':>9} {'ratio':>7}  capacities"]
    for name, row in result.items():
        lines.append(f"  {name:44} {row['fit_ms']:8.3f} {row['accounting_ms']:9.3f} "
                     f"{row['ratio']:7.3f}  {row['capacities']}")
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=10,
                        help="refreshes measured per kind, each with a pod replaced")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()
    result = await measure(args.replies)
    return print_and_save(report(result), result, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
