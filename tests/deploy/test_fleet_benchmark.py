"""The fleet benchmark (``python -m benchmarks.fleet``, docs/performance.md) at its smallest, on
both Prometheus 3 lines: promtool builds the fleets' blocks and backfills every recording rule,
and every panel of every dashboard and every rule answers, without error, with the series the
profile has. (The benchmark's timings are its own business: printed, never asserted.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..support.harness import REPO
from ..support.prometheus import SERVER_LINES, tool

pytestmark = pytest.mark.external

SIZES = (4, 8)
CLUSTERS = 2
METHODS = 3  # List, GetAllocatableResources, Get: a call latency series per node and method
# dual-socket-gpu: llm-train-0 holds 4 nvidia.com/gpu, llm-infer-0 2, llm-infer-1 1 and a GPU of
# NVIDIA's DRA driver (the profile); the first node's GPU row shows those three pods
HELD_GPUS_PER_NODE = 8
GPU_PODS = 3


def answers(fleet: dict) -> dict[str, dict]:
    """Every timed query of a fleet: panels (both variants) and rules, by a readable name."""
    found = {}
    for dashboard, timing in fleet["dashboards"].items():
        for panel, variants in timing["panels"].items():
            for variant, entry in variants.items():
                found[f"{dashboard} / {panel} [{variant}]"] = entry
    for group, timing in fleet["rules"].items():
        for rule, entry in timing["rules"].items():
            found[f"{group} / {rule}"] = entry
    return found


@pytest.mark.parametrize("line", SERVER_LINES)
def test_every_panel_and_rule_answers_on_a_small_fleet(line, tmp_path):
    out = tmp_path / "fleet.json"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.fleet", "--sizes", ",".join(map(str, SIZES)),
         "--clusters", str(CLUSTERS), "--repeat", "1", "--no-series", "--json", str(out),
         "--prometheus", tool(line, "prometheus"), "--promtool", tool(line, "promtool")],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["prometheus"].startswith(f"prometheus, version {line.removesuffix('x')}")
    assert f"{SIZES[-1]:,} (" in result.stdout and "5,000, extrapolated" in result.stdout
    for size in SIZES:
        found = answers(results["fleets"][str(size)])
        failed = {name: entry["error"] for name, entry in found.items() if "error" in entry}
        assert failed == {}, failed
        assert len(found) > 100, sorted(found)
        gpu = found["podresources-exporter.gpu.rules / gpu:podresources_device_info:relabel"]
        assert gpu["series"] == HELD_GPUS_PER_NODE * size
        assert found["podresources-exporter.rules / node:podresources_cpus_free:sum"][
            "series"] == size
        assert found["numa-overview / GPU memory used by pod [default]"]["series"] == GPU_PODS
        # every method's latency recorded (three rules write that record), for the nodes of
        # the dashboard's cluster
        assert found["exporter-health / Kubelet call latency (p99) [default]"]["series"] == \
            METHODS * size // CLUSTERS
