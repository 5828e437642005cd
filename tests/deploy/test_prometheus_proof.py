"""The shipped dashboards and recording rules against a real Prometheus scraping the exporter,
on both Prometheus 3 lines (3.13 LTS and 3.16, tests/support/prometheus.py), in the two
simulated clusters of tests/support/clusters.py.

Every panel query of every committed dashboard, for each cluster, with its variables resolved
through Prometheus the way Grafana does, must evaluate and return data (an empty panel is a bug
in the dashboard or the exporter), and only that cluster's series; the figures an operator
reads off them are the ones worked out from the profiles. Every recording rule must produce
series per cluster and node. (Every alert firing: test_alerts_fire.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from exporter.simulator import load_profile

from ..support.clusters import (
    DRA_GPU,
    DRA_GPU_DEVICE,
    EAST,
    EDGE_NODE,
    GPU_NODE,
    RATE_INTERVAL,
    WEST,
    clusters,
)
from ..support.grafana import (
    LABEL_VALUES,
    all_of,
    by,
    has_finite_value,
    panels,
    substitute,
)
from ..support.harness import REPO
from ..support.prometheus import SERVER_LINES, Prometheus
from ..support.targets import DcgmTarget

pytestmark = pytest.mark.external

RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"
DASHBOARDS = sorted((REPO / "dashboards").glob("*.json"))
RANGE_SECONDS = 20
# The custom variable's value for the fit panels: east's gpu-node-01 has 0 + 4 exclusive CPUs
# free on its two NUMA nodes, edge-node-01 has 3 on its one: 4 fit on gpu-node-01's NUMA node 1
# only; no node is fragmented for 4 (the kubelet fills the lowest NUMA node first). West's
# gpu-node-01 has 0 + (4 + 8) free: 4 fit, three times.
POD_CPUS = "4"

# Recording rules that keep only non-zero series: empty while every exporter is healthy, shown
# to record after a fault in test_alerts_fire.py.
ONLY_WHEN_NONZERO = {"node_kind:podresources_data_issues:rate5m"}
# Recording rules about GPUs: series of the GPU nodes only. Rejections: series of the nodes
# that reject a shape (every node of east; west's gpu-node-01 admits both).
GPU_NODES_ONLY = {"gpu:podresources_device_info:relabel"}
ONLY_WHERE_REJECTED = {"node_shape_reason:podresources_shape_rejection_info:max"}
# The call latency has a group per method. List is called every refresh; GetAllocatableResources
# once every --allocatable-interval and Get once per kubelet, so the quantile of those two may be
# NaN (no call in its 5-minute window): their rules must give each node a series.
RARELY_CALLED = {"podresources-exporter.latency.allocatable.rules",
                 "podresources-exporter.latency.get.rules"}


async def variable_choices(prometheus: Prometheus, model: dict) -> list[dict[str, str]]:
    """Variable values to test the dashboard with, resolved through Prometheus as Grafana does,
    in order (a variable's query may use the ones before it).

    ``node`` is gpu-node-01 where a single node is chosen (every panel must have data there);
    multi-value variables take their default, All (``.*``); other single-value query variables
    (``cluster``, ``resource``) are tried with every value they offer; custom ones with POD_CPUS.
    """
    choices = [{"__rate_interval": RATE_INTERVAL}]
    for variable in model["templating"]["list"]:
        name = variable["name"]
        expanded = []
        for values in choices:
            if variable["type"] == "datasource":
                expanded.append({**values, name: "prometheus"})
                continue
            if variable["type"] == "custom":
                assert POD_CPUS in variable["query"].split(",")
                expanded.append({**values, name: POD_CPUS})
                continue
            assert variable["type"] == "query", variable
            match = LABEL_VALUES.match(variable["query"])
            assert match, f"not a label_values() query: {variable['query']}"
            selector, label = match.groups()
            offered = await prometheus.label_values(
                label, substitute(selector, values) if selector else None)
            assert offered, f"variable {name}: {variable['query']} offers no value ({values})"
            if variable.get("includeAll"):
                # All: the custom all value, or else every value offered (Grafana's regex form)
                expanded.append({**values, name: variable.get("allValue") or all_of(offered)})
            elif name == "node":
                assert GPU_NODE in offered
                expanded.append({**values, name: GPU_NODE})
            else:
                expanded += [{**values, name: value} for value in offered]
        choices = expanded
    return choices


async def evaluate_dashboard(prometheus: Prometheus, path: Path) -> tuple[int, list[str],
                                                                          dict[tuple, dict]]:
    """Run every panel query for every cluster; return (queries run, failures, results by
    (cluster, panel title) and refId).

    A panel whose title names a variable is keyed by its title with that variable substituted.
    A result series that carries a cluster label must carry the selected one.
    """
    model = json.loads(path.read_text())
    failures: list[str] = []
    results: dict[tuple, dict[str, list]] = {}
    count = 0
    clusters_seen = set()
    for values in await variable_choices(prometheus, model):
        clusters_seen.add(values["cluster"])
        for panel in panels(model):
            title = substitute(panel["title"], values)
            merged = any(t["id"] == "merge" for t in panel.get("transformations", []))
            for target in panel["targets"]:
                expr = substitute(target["expr"], values)
                count += 1
                where = f"{path.name} [{values['cluster']}] / {title} / {target['refId']}: {expr}"
                try:
                    if target.get("instant"):
                        result = await prometheus.instant_settled(expr)
                    else:
                        result = await prometheus.range(expr, RANGE_SECONDS)
                        if not has_finite_value(result):  # a scrape missed under load
                            await prometheus.settled()
                            result = await prometheus.range(expr, RANGE_SECONDS)
                except AssertionError as error:
                    failures.append(f"{where}\n    error: {error}")
                    continue
                if not has_finite_value(result):
                    failures.append(f"{where}\n    no data")
                if merged and any("__name__" in series["metric"] for series in result):
                    failures.append(f"{where}\n    __name__ column breaks the merge")
                leaked = {series["metric"]["cluster"] for series in result
                          if "cluster" in series["metric"]} - {values["cluster"]}
                if leaked:
                    failures.append(f"{where}\n    series of cluster {sorted(leaked)}")
                results.setdefault((values["cluster"], title), {})[target["refId"]] = result
    assert clusters_seen == {EAST, WEST}, clusters_seen
    return count, failures, results


@pytest.mark.parametrize("line", SERVER_LINES)
async def test_every_dashboard_panel_and_recording_rule_returns_data_per_cluster(line, api):
    async with clusters(line, RULES, api) as (prometheus, _, _, dcgm):
        failures: list[str] = []
        queries = 0
        results: dict[str, dict[tuple, dict]] = {}
        assert [p.name for p in DASHBOARDS] == ["cluster-topology-fit.json",
                                                 "exporter-health.json", "numa-overview.json"]
        for path in DASHBOARDS:
            count, failed, results[path.stem] = await evaluate_dashboard(prometheus, path)
            queries += count
            failures += failed

        rules = yaml.safe_load(RULES.read_text())["groups"]
        expected_nodes = {(EAST, GPU_NODE), (EAST, EDGE_NODE), (WEST, GPU_NODE)}
        for group, rule in ((g["name"], r) for g in rules for r in g["rules"]):
            name = rule.get("record") or rule["alert"]
            queries += 1
            try:
                result = (await prometheus.instant(rule["expr"])
                          if rule.get("record") in ONLY_WHEN_NONZERO
                          else await prometheus.instant_settled(rule["expr"]))
            except AssertionError as error:
                failures.append(f"rule {name}: {error}")
                continue
            if rule.get("record") in ONLY_WHEN_NONZERO:  # empty on healthy data; see below
                continue
            if "record" in rule:
                queries += 1
                recorded = await prometheus.instant_settled(rule["record"])
                # a rarely called method: its own series, one per node, NaN between calls
                with_data = group in RARELY_CALLED or (
                    has_finite_value(result) and has_finite_value(recorded))
                if group in RARELY_CALLED:
                    recorded = result
                seen = {(s["metric"].get("cluster"), s["metric"].get("node")) for s in recorded}
                expected = ({(EAST, GPU_NODE), (WEST, GPU_NODE)} if name in GPU_NODES_ONLY
                            else {(EAST, GPU_NODE), (EAST, EDGE_NODE)}
                            if name in ONLY_WHERE_REJECTED else expected_nodes)
                if not with_data:
                    failures.append(f"recording rule {name}: no data")
                elif seen != expected:  # gpu-node-01 of each cluster kept apart
                    failures.append(f"recording rule {name}: {sorted(seen)}")

        assert not failures, f"{len(failures)} of {queries} queries failed:\n" + "\n".join(failures)
        print(f"\n{queries} dashboard and rule queries evaluated with data, per cluster")

        # Figures the operator reads off the panels, worked out from the profiles: had any query
        # added up the two clusters' gpu-node-01, these would be off.
        overview, fit = results["numa-overview"], results["cluster-topology-fit"]
        assert by(overview[EAST, "Free exclusive CPUs"]["A"], "numa_node") == {"0": 0, "1": 4}
        assert by(overview[WEST, "Free exclusive CPUs"]["A"], "numa_node") == {"0": 0, "1": 12}
        # mpi-rank-0/rank (admitted under policy none) and media/encoder-0/encoder (CPUs on
        # NUMA node 1, its DRA FPGA fpga-0 on node 0 by its ResourceSlice); in east also
        # ml/llm-infer-1/server, whose CPUs are on NUMA node 1 and whose DRA GPU (gpu-8) on
        # NUMA nodes 0 and 1
        assert by(overview[EAST, "Misaligned containers"]["A"], "") == {"": 3}
        assert by(overview[WEST, "Misaligned containers"]["A"], "") == {"": 2}
        for cluster_name in (EAST, WEST):
            assert by(overview[cluster_name, "CPU utilization"]["A"], "numa_node")["0"] == 1.0
        assert by(overview[EAST, "CPU utilization"]["A"], "numa_node")["1"] == \
            pytest.approx(28 / 32)
        assert by(overview[WEST, "CPU utilization"]["A"], "numa_node")["1"] == \
            pytest.approx(20 / 32)
        assert by(fit[EAST, f"Fragmented for {POD_CPUS} CPUs"]["A"], "") == {"": 0}
        assert by(fit[EAST, f"Fit {POD_CPUS} CPUs on one NUMA node"]["A"], "") == {"": 1}
        assert by(fit[EAST, "Free exclusive CPUs"]["A"], "") == {"": 4 + 3}
        assert by(fit[EAST, "Nodes reporting"]["A"], "") == {"": 2}
        assert by(fit[WEST, f"Fragmented for {POD_CPUS} CPUs"]["A"], "") == {"": 0}
        assert by(fit[WEST, f"Fit {POD_CPUS} CPUs on one NUMA node"]["A"], "") == {"": 1}
        assert by(fit[WEST, "Free exclusive CPUs"]["A"], "") == {"": 0 + 12}
        assert by(fit[WEST, "Nodes reporting"]["A"], "") == {"": 1}
        fragmentation = fit[EAST, f"Fragmentation for {POD_CPUS} CPUs"]
        assert {ref: by(result, "node") for ref, result in fragmentation.items()} == {
            "A": {GPU_NODE: 4, EDGE_NODE: 3},  # free on the node
            "B": {GPU_NODE: 4, EDGE_NODE: 3},  # largest free on one NUMA node
            "C": {GPU_NODE: 0, EDGE_NODE: 0}}  # fragmented for 4
        # The fit per shape, from FIT_SHAPES: nodes where it fits, capacity, nodes reporting,
        # nodes admitting
        for cluster_name, expected in (
                (EAST, {"A": {"cpu4": 1, "gpu1": 0}, "B": {"cpu4": 1, "gpu1": 0},
                        "C": {"cpu4": 2, "gpu1": 2}, "D": {"cpu4": 1, "gpu1": 0}}),
                (WEST, {"A": {"cpu4": 1, "gpu1": 1}, "B": {"cpu4": 3, "gpu1": 1},
                        "C": {"cpu4": 1, "gpu1": 1}, "D": {"cpu4": 1, "gpu1": 1}})):
            shapes_table = fit[cluster_name, "Shapes: where they fit"]
            assert {ref: by(result, "shape") for ref, result in shapes_table.items()} == expected
        # cpu4: edge-node-01 lacks a fourth CPU; gpu1: no node of east has a free GPU
        blocked = fit[EAST, "Blocking resources per shape"]["A"]
        assert {(s["metric"]["shape"], s["metric"]["resource"]): float(s["value"][1])
                for s in blocked} == {("cpu4", "cpu"): 1, ("gpu1", "cpu"): 0,
                                      ("gpu1", "nvidia.com/gpu"): 2}
        assert {(s["metric"]["shape"], s["metric"]["resource"]): float(s["value"][1])
                for s in fit[WEST, "Blocking resources per shape"]["A"]} == {
            ("cpu4", "cpu"): 0, ("gpu1", "cpu"): 0, ("gpu1", "nvidia.com/gpu"): 0}
        free = overview[WEST, "Free CPUs and devices per NUMA node"]["A"]
        assert {(s["metric"]["numa_node"], s["metric"]["resource"]): float(s["value"][1])
                for s in free if s["metric"]["resource"] in ("cpu", "nvidia.com/gpu")} == {
            ("0", "cpu"): 0, ("1", "cpu"): 12, ("0", "nvidia.com/gpu"): 0,
            ("1", "nvidia.com/gpu"): 1}
        cpu = await prometheus.instant('node_resource:podresources_utilization:ratio'
                                       '{resource="cpu"}')
        assert {(s["metric"]["cluster"], s["metric"]["node"]): float(s["value"][1])
                for s in cpu} == pytest.approx({(EAST, GPU_NODE): 58 / 62,
                                                (EAST, EDGE_NODE): 4 / 7,
                                                (WEST, GPU_NODE): 50 / 62})

        # Admission per shape, from FIT_SHAPES, under single-numa-node (assumed: no kubelet
        # config given). East's gpu-node-01: 4 CPUs free on NUMA node 1 (cpu4 admitted), no
        # GPU free on either (gpu1: TopologyAffinityError, nvidia.com/gpu); edge-node-01: 3
        # CPUs free (cpu4: TopologyAffinityError, cpu) and no nvidia.com/gpu at all (gpu1:
        # OutOfnvidia.com/gpu). West's gpu-node-01 admits both.
        for cluster_name, admitted in ((EAST, {"cpu4": 1, "gpu1": 0}),
                                       (WEST, {"cpu4": 1, "gpu1": 1})):
            shapes_admitted = overview[cluster_name, "Pod shapes: admitted"]
            assert by(shapes_admitted["A"], "shape") == admitted
            assert {(v["metric"]["shape"], v["metric"]["reason"], v["metric"]["blocking_resource"])
                    for v in shapes_admitted["B"]} == ({
                        ("cpu4", "admitted", "none"),
                        ("gpu1", "TopologyAffinityError", "nvidia.com/gpu")}
                if cluster_name == EAST else {("cpu4", "admitted", "none"),
                                              ("gpu1", "admitted", "none")})
            assert by(fit[cluster_name, "Shapes: where they fit"]["D"], "shape") == admitted
            # the kubelet holds 2 exclusive CPUs on NUMA node 1 that List does not show
            assert by(overview[cluster_name,
                               "Exclusive CPUs the kubelet holds that List cannot show"]["A"],
                      "numa_node") == {"0": 0, "1": 2}
            config = overview[cluster_name, "Kubelet configuration"]["A"]
            assert [s["metric"] for s in config] == [{
                "topology_manager_policy": "single-numa-node",
                "topology_manager_scope": "container", "cpu_manager_policy": "static",
                "memory_manager_policy": "Static", "source": "assumed"}]
        verdicts = {(s["metric"]["shape"], s["metric"]["reason"],
                     s["metric"]["blocking_resource"]): float(s["value"][1])
                    for s in fit[WEST, "Shapes: why not admitted"]["A"]}
        assert verdicts == {("cpu4", "admitted", "none"): 1, ("gpu1", "admitted", "none"): 1}
        east = {(s["metric"]["shape"], s["metric"]["reason"],
                 s["metric"]["blocking_resource"]): float(s["value"][1])
                for s in fit[EAST, "Shapes: why not admitted"]["A"]}
        assert east == {("cpu4", "admitted", "none"): 1,
                        ("cpu4", "TopologyAffinityError", "cpu"): 1,
                        ("gpu1", "TopologyAffinityError", "nvidia.com/gpu"): 1,
                        ("gpu1", "OutOfnvidia.com/gpu", "nvidia.com/gpu"): 1}

        # DRA devices per NUMA node (the profile's ResourceSlices): fpga-2's PCI address has no
        # NUMA node, fpga-3 is tainted NoSchedule; mlx5-0 is shared by two pods; west lacks
        # llm-infer-1 and so its DRA GPU gpu-8.
        fpga, rdma, gpu = (("fpga.example.com", "gpu-node-01"),
                           ("rdma.example.com", "gpu-node-01-mlx"),
                           ("gpu.nvidia.com", "gpu-node-01-dra"))

        def dra(result: list[dict], *labels: str) -> dict[tuple, float]:
            return {tuple(s["metric"][label] for label in labels): float(s["value"][1])
                    for s in result}

        for cluster_name, gpu_on_0 in ((EAST, 1), (WEST, 0)):
            per_numa = overview[cluster_name, "DRA devices per NUMA node"]
            key = ("driver", "pool", "numa_node")
            assert dra(per_numa["A"], *key) == {
                (*fpga, "0"): 1, (*fpga, "1"): 1, (*fpga, "unknown"): 1,
                (*rdma, "0"): 1, (*rdma, "1"): 1, (*gpu, "0"): 1, (*gpu, "1"): 1}
            # allocated: ml/dra-infer-0's DRA GPU on NUMA node 1 is not, the kubelet rejects the
            # pod (TopologyAffinityError: its nvidia.com/gpu still asks the device manager for
            # hints) and so never prepares its claim
            assert dra(per_numa["B"], *key) == {
                (*fpga, "0"): 1, (*fpga, "1"): 0, (*fpga, "unknown"): 0,
                (*rdma, "0"): 1, (*rdma, "1"): 0, (*gpu, "0"): gpu_on_0, (*gpu, "1"): 0}
            assert dra(per_numa["C"], *key) == {(*rdma, "0"): 2}
            assert dra(overview[cluster_name, "Tainted DRA devices"]["A"], *key, "effect") == {
                (*fpga, "1", "NoSchedule"): 1}
            assert dra(fit[cluster_name, "DRA devices by node, driver and pool"]["A"],
                       "node", "driver", "pool") == {
                (GPU_NODE, *fpga): 1, (GPU_NODE, *rdma): 1, (GPU_NODE, *gpu): gpu_on_0}
            assert dra(overview[cluster_name, "Device utilization"]["B"],
                       "numa_node", "resource") == {
                ("0", fpga[0]): 1, ("1", fpga[0]): 0, ("0", rdma[0]): 1, ("1", rdma[0]): 0,
                ("0", gpu[0]): gpu_on_0, ("1", gpu[0]): 0}

        # The GPU row: DCGM's series joined to the pods holding each GPU and its NUMA node, in
        # ratio and bytes whichever release serves them (east 4.10, west 4.7): device-plugin
        # GPUs and, in east, llm-infer-1's GPU of NVIDIA's DRA driver (gpu-8, NUMA node 0)
        inventory = load_profile("dual-socket-gpu").devices
        local = {d.device_id: str(d.numa_ids[0]) for d in inventory
                 if d.resource == "nvidia.com/gpu"}
        local[DRA_GPU] = "0"  # its ResourceSlice lists 0 and 1: its own node comes first
        holders = {EAST: {"llm-train-0": 4, "llm-infer-0": 2, "llm-infer-1": 2},
                   WEST: {"llm-train-0": 4, "llm-infer-0": 2}}
        mib = 1048576
        for cluster_name in (EAST, WEST):
            table = overview[cluster_name, "GPUs: utilization and memory by pod and NUMA node"]
            rows = {s["metric"]["UUID"]: s["metric"] for s in table["A"]}
            pods: dict[str, int] = {}
            for uuid, labels in rows.items():
                pods[labels["pod"]] = pods.get(labels["pod"], 0) + 1
                assert labels["numa_node"] == local[uuid]
            assert pods == holders[cluster_name]
            assert (rows.get(DRA_GPU, {}).get("resource"), rows.get(DRA_GPU, {}).get(
                "device_id")) == (("gpu.nvidia.com", "/".join(DRA_GPU_DEVICE))
                                  if cluster_name == EAST else (None, None))
            served = dcgm[cluster_name]
            assert {s["metric"]["UUID"]: float(s["value"][1]) for s in table["A"]} == \
                {uuid: served.utilization[uuid] / 100 for uuid in rows}  # this cluster's DCGM
            assert {s["metric"]["UUID"]: float(s["value"][1]) for s in table["B"]} == \
                {uuid: served.used[uuid] * mib for uuid in rows}
            for series in table["C"]:
                uuid = series["metric"]["UUID"]
                assert float(series["value"][1]) == \
                    pytest.approx(served.used[uuid] / DcgmTarget.FRAMEBUFFER_MIB)
            memory = overview[cluster_name, "GPU memory used by pod"]["A"]
            assert {s["metric"]["pod"]: float(s["values"][-1][1]) for s in memory} == {
                pod: sum(served.used[u] for u, labels in rows.items() if labels["pod"] == pod)
                * mib for pod in holders[cluster_name]}
