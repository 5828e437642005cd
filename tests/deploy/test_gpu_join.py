"""Every form of GPU device id lands on its physical GPU, on both Prometheus 3 lines, with every
dcgm-exporter release's names and units: 4.7 (``Hostname``, legacy names), 4.8 (``hostname``,
legacy names: percent, MiB), 4.10 (DCGM 4.7's canonical names: ratio, bytes), and a node running
4.8 and 4.10 side by side (a DaemonSet upgrade surging), whose GPUs must count once. The panels
show the same figures, in the same units (ratio, bytes), whichever the node runs.

Two nodes of one cluster, each with a dcgm-exporter whose GPUs include an ``nvidia0`` and an
``nvidia1``: ``gpu-forms-01`` names its GPUs in the NVIDIA device plugin's forms (a whole GPU
``GPU-<uuid>``, time-slicing replicas ``GPU-<uuid>::<n>``) beside RDMA devices whose ids are
plain numbers, and ``gke-node-01`` shares ``nvidia0`` between two pods under GKE's ids
``nvidia0/vgpu<n>``. Only dcgm-exporter's node label tells the two ``nvidia0`` apart: read
under the wrong spelling, every node's series would meet under one empty node and the whole
recording rule would fail on the duplicate ``nvidia0``.
"""

from __future__ import annotations

import contextlib

import pytest

from ..support.grafana import LABEL_VALUES, all_of, by, dashboard, substitute
from ..support.harness import REPO, Exporter, Node
from ..support.prometheus import SERVER_LINES, Prometheus, scrape_job, tool
from ..support.targets import DCGM_4_7, DCGM_4_8, DCGM_4_10, DcgmTarget, Holder

pytestmark = pytest.mark.external

RULES = REPO / "dashboards" / "rules" / "podresources-exporter.rules.yaml"
RATE_INTERVAL = "10s"
MIB = 1048576
# dcgm-exporter's releases on the two nodes: each node one release, or the forms node both
# 4.8 and 4.10 at once
RELEASES = {"4.7": (DCGM_4_7,), "4.8": (DCGM_4_8,), "4.10": (DCGM_4_10,),
            "4.8-and-4.10": (DCGM_4_8, DCGM_4_10)}

FORMS = "forms"
FORMS_NODE, GKE_NODE = "gpu-forms-01", "gke-node-01"
WHOLE = "GPU-0a1b2c3d-0000-4000-8000-000000000000"  # nvidia.com/gpu, id_prefix + index 0
SLICED = "GPU-5e6f7a8b-1111-4111-8111-111111111111"  # its replicas ::0 and ::1
IDLE = "GPU-9c8d7e6f-2222-4222-8222-222222222222"  # held by no pod
GKE_HELD, GKE_IDLE = "GPU-7b6a5c4d-3333-4333-8333-333333333333", \
    "GPU-1f2e3d4c-4444-4444-8444-444444444444"


def forms_profile() -> dict:
    """A node whose device plugins name devices in every form the NVIDIA plugins use, and RDMA
    shared devices whose ids (0, 1) repeat under two resources."""
    return {
        "name": "gpu-forms", "node_name": FORMS_NODE, "kubernetes_version": "1.35", "seed": 1,
        "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "8Gi"},
                       {"id": 1, "cpus": "4-7", "memory": "8Gi"}],
        "cpu_manager_policy": "static", "memory_manager_policy": "None",
        "devices": [
            {"resource": "nvidia.com/gpu", "id_prefix": WHOLE[:-1], "per_numa": {"0": 1}},
            {"resource": "nvidia.com/gpu.shared", "id_prefix": SLICED + "::",
             "per_numa": {"1": 2}},
            {"resource": "rdma/hca_shared_devices_a", "id_prefix": "", "per_numa": {"0": 2}},
            {"resource": "rdma/hca_shared_devices_b", "id_prefix": "", "per_numa": {"1": 2}},
        ],
        "pods": [
            {"namespace": "ml", "name": "train-0", "containers": [{
                "name": "trainer", "cpus": 1,
                "devices": {"nvidia.com/gpu": 1, "rdma/hca_shared_devices_a": 1}}]},
            {"namespace": "ml", "name": "infer-0", "containers": [{
                "name": "server", "cpus": 1,
                "devices": {"nvidia.com/gpu.shared": 1, "rdma/hca_shared_devices_b": 1}}]},
            {"namespace": "ml", "name": "infer-1", "containers": [{
                "name": "server", "cpus": 1, "devices": {"nvidia.com/gpu.shared": 1}}]},
        ],
    }


def gke_profile() -> dict:
    """A GKE node sharing GPU nvidia0 between two pods (ids nvidia0/vgpu0 and nvidia0/vgpu1)."""
    return {
        "name": "gke-shared", "node_name": GKE_NODE, "kubernetes_version": "1.35", "seed": 2,
        "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "8Gi"}],
        "cpu_manager_policy": "static", "memory_manager_policy": "None",
        "devices": [{"resource": "nvidia.com/gpu", "id_prefix": "nvidia0/vgpu",
                     "per_numa": {"0": 2}}],
        "pods": [{"namespace": "lab", "name": f"notebook-{n}", "containers": [{
            "name": "jupyter", "cpus": 1, "devices": {"nvidia.com/gpu": 1}}]} for n in (0, 1)],
    }


async def overview_values(prometheus: Prometheus, node: str) -> dict[str, str]:
    """The NUMA overview's variables for one node, multi-value ones at All, as Grafana sets
    them (every value offered, as a regex alternation)."""
    values = {"__rate_interval": RATE_INTERVAL, "datasource": "prometheus", "cluster": FORMS,
              "node": node}
    for variable in dashboard("numa-overview")["templating"]["list"]:
        if variable["name"] in values:
            continue
        selector, label = LABEL_VALUES.match(variable["query"]).groups()
        offered = await prometheus.label_values(label, substitute(selector, values))
        values[variable["name"]] = all_of(offered)
    return values


@pytest.mark.parametrize("releases", RELEASES, ids=[f"dcgm-exporter-{r}" for r in RELEASES])
@pytest.mark.parametrize("line", SERVER_LINES)
async def test_every_form_of_gpu_device_id_lands_on_its_physical_gpu(line, releases):
    binary = tool(line, "prometheus")
    model = dashboard("numa-overview")
    gpu_row = next(p for p in model["panels"] if p["title"] == "GPUs (dcgm-exporter)")
    queries = {(panel["title"], target["refId"]): target["expr"]
               for panel in gpu_row["panels"] for target in panel["targets"]}
    async with contextlib.AsyncExitStack() as stack:
        nodes = {FORMS_NODE: await stack.enter_async_context(Node(forms_profile())),
                 GKE_NODE: await stack.enter_async_context(Node(gke_profile()))}
        exporters = {}
        for name, node in nodes.items():
            exporters[name] = await stack.enter_async_context(
                Exporter(node.settings(interval=0.5)))
            await exporters[name].ready()
        # dcgm-exporter on each node: device nvidiaN in the order given; both nodes have an
        # nvidia0 and an nvidia1, so only the node tells GKE's nvidia0 apart. It attributes a
        # shared GPU to one of its holders. Values in percent and MiB, served in the release's
        # own units.
        dcgm = [await stack.enter_async_context(DcgmTarget(
                    FORMS_NODE, {WHOLE: 11, SLICED: 22, IDLE: 33},
                    {WHOLE: 1000.0, SLICED: 2000.0, IDLE: 3000.0}, release,
                    {WHOLE: Holder("ml", "train-0", "trainer"),
                     SLICED: Holder("ml", "infer-1", "server")}))
                for release in RELEASES[releases]]
        dcgm.append(await stack.enter_async_context(DcgmTarget(
            GKE_NODE, {GKE_HELD: 44, GKE_IDLE: 55}, {GKE_HELD: 4000.0, GKE_IDLE: 5000.0},
            RELEASES[releases][-1], {GKE_HELD: Holder("lab", "notebook-1", "jupyter")})))
        prometheus = await stack.enter_async_context(Prometheus(binary, [
            scrape_job("podresources-exporter", [(e.port, {"cluster": FORMS, "node": name})
                                                 for name, e in exporters.items()],
                       honor_labels=True),
            scrape_job("dcgm-exporter", [(target.port, {"cluster": FORMS}) for target in dcgm])],
            [RULES]))
        # every target scraped and the rules evaluated since: the GPU table joins the record
        # with every node's DCGM series, which one record's series do not prove are there
        await prometheus.settled()
        held = await prometheus.instant_settled("gpu:podresources_device_info:relabel")
        rdma = await prometheus.instant_settled('podresources_device_info{resource=~"rdma/.+"}')
        assert sorted(s["metric"]["resource"] for s in rdma) == [
            "rdma/hca_shared_devices_a", "rdma/hca_shared_devices_b"]
        assert {s["metric"]["device_id"] for s in rdma} <= {"0", "1"}  # as DCGM's gpu labels
        # the RDMA devices 0 and 1 name no GPU and are not there
        assert {(s["metric"]["node"], s["metric"]["resource"], s["metric"]["device_id"],
                 s["metric"]["pod"]): s["metric"]["UUID"] for s in held} == {
            (FORMS_NODE, "nvidia.com/gpu", WHOLE, "train-0"): WHOLE,
            **{(FORMS_NODE, "nvidia.com/gpu.shared", f"{SLICED}::{replica}", pod): SLICED
               for replica, pod in zip(sorted_replicas(held), ("infer-0", "infer-1"))},
            **{(GKE_NODE, "nvidia.com/gpu", device_id, pod): GKE_HELD
               for device_id, pod in gke_holdings(held)}}

        results = {}
        for node in (FORMS_NODE, GKE_NODE):
            values = await overview_values(prometheus, node)
            # the gpu variable: the node's physical GPUs that pods hold, by UUID
            assert values["gpu"] == {FORMS_NODE: f"({WHOLE}|{SLICED})",
                                     GKE_NODE: f"({GKE_HELD})"}[node]
            for key, expr in queries.items():
                results[node, *key] = await prometheus.instant_settled(
                    substitute(expr, values))

    # Worked by hand from the values served (percent and MiB), in the panels' units: ratio and
    # bytes, whichever release serves them.
    table = "GPUs: utilization and memory by pod and NUMA node"
    rows = {(s["metric"]["pod"], s["metric"]["UUID"], s["metric"]["numa_node"]):
            float(s["value"][1]) for s in results[FORMS_NODE, table, "A"]}
    assert rows == {("train-0", WHOLE, "0"): 0.11, ("infer-0", SLICED, "1"): 0.22,
                    ("infer-1", SLICED, "1"): 0.22}
    assert by_pod(results[FORMS_NODE, table, "B"]) == \
        {"train-0": 1000 * MIB, "infer-0": 2000 * MIB, "infer-1": 2000 * MIB}
    assert by_pod(results[FORMS_NODE, table, "C"]) == pytest.approx(
        {"train-0": 1000 / 81559, "infer-0": 2000 / 81559, "infer-1": 2000 / 81559})
    assert by_pod(results[GKE_NODE, table, "B"]) == {"notebook-0": 4000 * MIB,
                                                     "notebook-1": 4000 * MIB}
    assert by_pod(results[GKE_NODE, table, "A"]) == {"notebook-0": 0.44, "notebook-1": 0.44}
    # pod -> GPU memory used: each pod's GPU, a shared GPU's whole figure on each holder
    memory = "GPU memory used by pod"
    assert by_pod(results[FORMS_NODE, memory, "A"]) == \
        {"train-0": 1000 * MIB, "infer-0": 2000 * MIB, "infer-1": 2000 * MIB}
    assert by_pod(results[GKE_NODE, memory, "A"]) == {"notebook-0": 4000 * MIB,
                                                      "notebook-1": 4000 * MIB}
    # utilization per NUMA node counts the shared GPU once
    assert by(results[FORMS_NODE, "GPU utilization by NUMA node", "A"], "numa_node") == \
        {"0": 0.11, "1": 0.22}


def by_pod(result: list[dict]) -> dict[str, float]:
    return by(result, "pod")


def sorted_replicas(held: list[dict]) -> list[str]:
    """The replica numbers of the time-sliced GPU, in the order of the pods holding them."""
    replicas = {s["metric"]["pod"]: s["metric"]["device_id"].rsplit("::", 1)[1] for s in held
                if s["metric"]["resource"] == "nvidia.com/gpu.shared"}
    assert sorted(replicas.values()) == ["0", "1"]  # one replica each
    return [replicas["infer-0"], replicas["infer-1"]]


def gke_holdings(held: list[dict]) -> list[tuple[str, str]]:
    holdings = sorted((s["metric"]["device_id"], s["metric"]["pod"]) for s in held
                      if s["metric"]["node"] == GKE_NODE)
    assert [device_id for device_id, _ in holdings] == ["nvidia0/vgpu0", "nvidia0/vgpu1"]
    return holdings
