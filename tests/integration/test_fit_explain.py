"""The fit answers end to end: shapes and kubelet config files, /metrics, rejected pods from the
Kubernetes API, ``snapshot --shape`` and ``--why``. Expected figures are computed by hand.

The node (``PROFILE``): NUMA node 0 holds CPUs 0,1,4,5 and node 1 CPUs 2,3,6,7, two threads
per core (core k = CPUs k and k+4); CPU 0 is reserved. 16Gi of memory and 1Gi of 2Mi hugepages
per node, one GPU local to node 0, three to node 1. The pod ml/trainer asks for two GPUs, so
the kubelet admits it on node 1, the only one with two: there it takes the whole core 2+6
(takeByTopologyNUMAPacked), 4Gi of node 1's memory and two of its GPUs. So, free:

    node 0: CPUs 1,4,5 (3; whole cores: 1+5 -> 2), memory 16Gi, hugepages-2Mi 1Gi, GPUs 1
    node 1: CPUs 3,7   (2; whole cores: 3+7 -> 2), memory 12Gi, hugepages-2Mi 1Gi, GPUs 1
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from exporter import cli
from exporter.commands.snapshot import snapshot
from exporter.fit.fitview import FitView
from exporter.fit.shapes import ShapeError, ShapeFile, load_shapes

from ..support.controlplane import ControlPlane
from ..support.controlplane_api import RealApi
from ..support.harness import Exporter, Node, small_profile
from ..support.kubeobjects import pod

GiB = 1 << 30
GPU = "nvidia.com/gpu"
PROFILE = small_profile(
    numa_nodes=[{"id": 0, "cpus": "0-1,4-5", "memory": "16Gi", "hugepages": {"2Mi": 512}},
                {"id": 1, "cpus": "2-3,6-7", "memory": "16Gi", "hugepages": {"2Mi": 512}}],
    threads_per_core=2,
    devices=[{"resource": GPU, "per_numa": {"0": 1, "1": 3}}],
    pods=[{"namespace": "ml", "name": "trainer",
           "containers": [{"name": "c", "cpus": 2, "memory": "4Gi", "devices": {GPU: 2}}]}])
SHAPES = """\
shapes:
  infer: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 1}
  big: {cpu: 4, nvidia.com/gpu: 2}
"""


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


async def test_shapes_on_metrics(tmp_path: Path) -> None:
    shapes = write(tmp_path / "shapes.yaml", SHAPES)
    async with Node(PROFILE) as node, \
            Exporter(node.settings(fit_shapes=shapes)) as exporter:
        s = await exporter.wait_for(lambda s: s.get("podresources_shape_capacity",
                                                    shape="infer") is not None)
    assert s.by("podresources_numa_free", "numa_node", "resource") == {
        ("0", "cpu"): 3, ("1", "cpu"): 2, ("0", "memory"): 16 * GiB, ("1", "memory"): 12 * GiB,
        ("0", "hugepages-2Mi"): GiB, ("1", "hugepages-2Mi"): GiB, ("0", GPU): 1, ("1", GPU): 1}
    assert s.by("podresources_numa_free_full_cores", "numa_node") == {"0": 2, "1": 2}
    assert s.by("podresources_shape_fits", "shape", "numa_node") == {
        ("infer", "0"): 1, ("infer", "1"): 1, ("big", "0"): 0, ("big", "1"): 0}
    assert s.by("podresources_shape_shortfall", "numa_node", "resource", shape="big") == {
        ("0", "cpu"): 1, ("0", GPU): 1, ("1", "cpu"): 2, ("1", GPU): 1}
    assert s.by("podresources_shape_shortfall", "numa_node", "resource", shape="infer") == {
        ("0", "cpu"): 0, ("0", "memory"): 0, ("0", GPU): 0,
        ("1", "cpu"): 0, ("1", "memory"): 0, ("1", GPU): 0}
    assert s.by("podresources_shape_capacity", "shape") == {"infer": 2, "big": 0}
    # big: nodes 0 and 1 together have 5 CPUs and 2 GPUs
    assert s.by("podresources_shape_min_numa_nodes", "shape") == {"infer": 1, "big": 2}
    # no --kubelet-config: the exporter assumes (SPEC 7.1); the simulator lists CPUs and memory
    assert s.by("podresources_kubelet_config_info", "topology_manager_policy",
                "topology_manager_scope", "cpu_manager_policy", "memory_manager_policy",
                "source") == {("single-numa-node", "container", "static", "Static",
                               "assumed"): 1}
    assert s.by("podresources_shape_admitted", "shape") == {"infer": 1, "big": 0}
    assert s.by("podresources_shape_rejection_info", "shape", "reason",
                "blocking_resource") == {("big", "TopologyAffinityError", "multiple"): 1}


async def test_full_pcpus_only_from_the_kubelet_config(tmp_path: Path) -> None:
    """full-pcpus-only rejects a CPU count that is not whole cores (SMTAlignmentError); the
    hints per NUMA node count logical CPUs. Free physical CPUs node-wide: 1, 5, 3, 7 (4 shares
    CPU 0's core, which is reserved). infer twice: node 0 (CPUs 1, 5, its GPU), then node 1
    (3, 7, its free GPU); then no GPU is left: capacity 2."""
    shapes = write(tmp_path / "shapes.yaml", SHAPES + "  odd: {cpu: 3}\n")
    config = write(tmp_path / "config.yaml", """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
cpuManagerPolicyOptions:
  full-pcpus-only: "true"
memoryManagerPolicy: Static
topologyManagerPolicy: single-numa-node
""")
    async with Node(PROFILE) as node, \
            Exporter(node.settings(fit_shapes=shapes, kubelet_config=config)) as exporter:
        s = await exporter.wait_for(lambda s: s.get("podresources_shape_capacity",
                                                    shape="infer") is not None)
    assert s.by("podresources_shape_fits", "numa_node", shape="infer") == {"0": 1, "1": 1}
    assert s.value("podresources_shape_shortfall", shape="infer", numa_node="1",
                   resource="cpu") == 0
    assert s.value("podresources_shape_capacity", shape="infer") == 2
    assert s.by("podresources_shape_rejection_info", "reason", "blocking_resource",
                shape="odd") == {("SMTAlignmentError", "cpu"): 1}
    assert s.by("podresources_kubelet_config_info", "topology_manager_policy",
                "topology_manager_scope", "cpu_manager_policy", "memory_manager_policy",
                "source") == {("single-numa-node", "container", "static", "Static", "file"): 1}


# ---- the shape file ------------------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ("shapes: {a: {cpu: 8, gpu: 1}}", "shape a: unknown resource 'gpu'"),
    ("shapes: {a: {memory: 64GB}}", "shape a: memory: not a Kubernetes quantity: '64GB'"),
    ("shapes: {a: {cpu: 1.0005}}", "shape a: cpu must be whole millicores"),
    ("shapes: {a: {nvidia.com/gpu: 0}}", "shape a: nvidia.com/gpu must be more than 0"),
    ("shapes: {a: {hugepages-1G: 1Gi}}", "shape a: unknown resource 'hugepages-1G'"),
    ("shapes: {'bad name': {cpu: 1}}", "bad shape name 'bad name'"),
    ("shapes: {}", "'shapes' must map at least one shape"),
    ("gpu: {cpu: 1}", "expected a map with the single key 'shapes'"),
    ("shapes: {a: {cpu: 1}, a: {cpu: 2}}", "'a' given twice"),
    ("shapes: [", "at line"),
])
def test_bad_shape_files_say_why(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "shapes.yaml", text)
    with pytest.raises(ShapeError) as caught:
        load_shapes(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_quantities_in_kubernetes_notation(tmp_path: Path) -> None:
    (shape,) = load_shapes(write(tmp_path / "s.yaml", "shapes:\n  x: {cpu: 8000m, memory: "
                                 "64Gi, hugepages-1Gi: 8Gi, example.com/vf: '4'}\n"))
    assert dict(shape.containers[0].requests) == {
        "cpu": 8000, "memory": 64 * GiB, "hugepages-1Gi": 8 * GiB, "example.com/vf": 4}


def test_bad_files_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    from exporter.simulator import load_profile
    from exporter.simulator.node.sysfs import write_sysfs
    sysfs = str(write_sysfs(load_profile("small"), tmp_path / "sys"))
    shapes = write(tmp_path / "shapes.yaml", "shapes: {a: {cpu: 8, gpus: 2}}")
    assert cli.main(["snapshot", "--sysfs-root", sysfs, "--socket", str(tmp_path / "no.sock"),
                     "--fit-shapes", shapes]) == 2
    err = capsys.readouterr().err
    assert err.startswith("podresources-exporter: error: --fit-shapes: ")
    assert "unknown resource 'gpus'" in err and err.count("\n") == 1
    config = write(tmp_path / "config.yaml", "kind: Pod\n")
    assert cli.main(["snapshot", "--sysfs-root", sysfs, "--socket", str(tmp_path / "no.sock"),
                     "--kubelet-config", config]) == 2
    assert "--kubelet-config: " in capsys.readouterr().err
    assert cli.main(["snapshot", "--sysfs-root", sysfs, "--shape", "cpu=8,gpu=1"]) == 2
    assert "unknown resource 'gpu'" in capsys.readouterr().err
    assert cli.main(["snapshot", "--sysfs-root", sysfs, "--why", "just-a-name"]) == 2
    assert "expected NAMESPACE/POD" in capsys.readouterr().err


def test_a_changed_file_is_reread_and_a_bad_one_keeps_the_shapes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "shapes.yaml"
    path.write_text(SHAPES)
    shapes = ShapeFile(path)
    assert [s.name for s in shapes.current()] == ["infer", "big"]
    path.write_text("shapes: {dpdk: {cpu: 6, hugepages-1Gi: 8Gi}}\n")
    assert [s.name for s in shapes.current()] == ["dpdk"]
    caplog.set_level(logging.WARNING)
    path.write_text("shapes: {dpdk: {cpu: six}}\n")
    assert [s.name for s in shapes.current()] == ["dpdk"]
    assert [s.name for s in shapes.current()] == ["dpdk"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "keeping the 1 fit shapes in use" in warnings[0]


# ---- rejected pods, from the Kubernetes API ------------------------------------------------

def guaranteed(name: str, cpu: str, memory: str, gpus: int) -> dict:
    amounts = {"cpu": cpu, "memory": memory, GPU: str(gpus)}
    return {"name": name, "image": "registry.example.com/train:1.0",
            "resources": {"requests": dict(amounts), "limits": dict(amounts)}}


def rejected(name: str, containers: list[dict], reason: str = "TopologyAffinityError") -> dict:
    obj = pod("ml", name, "test-node", containers, phase="Failed")
    obj["status"].update(reason=reason, message="Pod was rejected: Resources cannot be "
                                                "allocated with Topology locality")
    return obj


@pytest.fixture
def api(control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The real API server (tests/controlplane) holding test-node's pods as the kubelet
    reported them: rejected at admission (phase Failed, the reason and message it sets)."""
    server = RealApi(control_plane)
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig(tmp_path / "kubeconfig")))
    # every node 0 GPU is free, node 1 has one: 2 GPUs fit on no single node
    server.put("pods", rejected("two-gpus", [guaranteed("c", "2", "1Gi", 2)]))
    # 4 CPUs and 2 GPUs: each node lacks both
    server.put("pods", rejected("gpu-hog", [guaranteed("c", "4", "8Gi", 2)]))
    # 1 CPU and 1 GPU fit now (the GPU was freed since, say)
    server.put("pods", rejected("late", [guaranteed("c", "1", "1Gi", 1)]))
    # not admission rejections: evicted, and running
    server.put("pods", rejected("evicted", [guaranteed("c", "1", "1Gi", 1)], "Evicted"))
    server.put("pods", pod("ml", "trainer", "test-node", [guaranteed("c", "2", "4Gi", 2)]))
    yield server
    server.clear()


async def test_rejected_pods_are_counted_with_the_blocking_resource(
        api: RealApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="exporter.fit.fitview")
    async with Node(PROFILE) as node, \
            Exporter(node.settings(kube_api=True, node_name="test-node")) as exporter:
        s = await exporter.wait_for(
            lambda s: len(s.series("podresources_admission_failure_info")) == 3,
            what="three rejected pods judged")
        assert s.by("podresources_admission_failure_info", "pod", "blocking_resource") == {
            ("two-gpus", GPU): 1, ("gpu-hog", "multiple"): 1, ("late", "none"): 1}
        assert s.by("podresources_admission_failures_total", "reason", "blocking_resource") == {
            ("TopologyAffinityError", GPU): 1, ("TopologyAffinityError", "multiple"): 1,
            ("TopologyAffinityError", "none"): 1}
        api.delete("pods", "gpu-hog", "ml")
        s = await exporter.wait_for(
            lambda s: len(s.series("podresources_admission_failure_info")) == 2)
        # the counter keeps what was seen
        assert s.value("podresources_admission_failures_total", reason="TopologyAffinityError",
                       blocking_resource="multiple") == 1
    lines = [r.getMessage() for r in caplog.records if "rejected at admission" in r.getMessage()]
    assert len(lines) == 3
    assert any(line.startswith("pod ml/two-gpus was rejected at admission "
                               "(TopologyAffinityError); blocking resource nvidia.com/gpu: ")
               for line in lines)


def table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()
            if line.startswith("  ") and line.split()[0] in ("0", "1")]


async def test_snapshot_why_explains_a_rejected_pod(
        api: RealApi, capsys: pytest.CaptureFixture[str]) -> None:
    """2 GPUs: node 1's capacity holds both (minimum width 1), but two of its three are taken;
    node 0 has one: only {0,1} is a hint, not preferred: single-numa-node rejects, blocking the
    GPU."""
    async with Node(PROFILE) as node:
        assert await snapshot(node.settings(), "table", "info", why="ml/two-gpus") == 0
        out = capsys.readouterr().out
        assert out.startswith("Pod ml/two-gpus (Guaranteed): rejected at admission: "
                              "TopologyAffinityError")
        assert "Container c: cpu=2, nvidia.com/gpu=2, memory=1Gi -> not placed" in out
        assert ("Verdict: the kubelet would reject it with TopologyAffinityError under "
                "Topology Manager policy single-numa-node, scope container: no NUMA set the "
                "policy allows has enough nvidia.com/gpu (node 0 has 1, node 1 has 1 free).") \
            in out
        assert table_rows(out) == [
            ["0", "cpu", "2", "3", "0"], ["0", GPU, "2", "1", "1"],
            ["0", "memory", "1Gi", "16Gi", "0"], ["1", "cpu", "2", "2", "0"],
            ["1", GPU, "2", "1", "1"], ["1", "memory", "1Gi", "12Gi", "0"]]
        assert await snapshot(node.settings(), "table", "info", why="ml/missing") == 1
        assert "pod ml/missing not found" in capsys.readouterr().err


async def test_snapshot_shape_prints_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """8 CPUs need both 4-CPU nodes by capacity and 5 are free: no CPU hint at all; 2 GPUs fit
    node 1 by capacity but not by what is free: both block."""
    async with Node(PROFILE) as node:
        assert await snapshot(node.settings(), "table", "info",
                                  shape="cpu=8,nvidia.com/gpu=2") == 0
        out = capsys.readouterr().out
        assert ("Verdict: the kubelet would reject it with TopologyAffinityError under "
                "Topology Manager policy single-numa-node, scope container: no NUMA set the "
                "policy allows has enough nvidia.com/gpu, nor enough CPUs.") in out
        assert await snapshot(node.settings(), "json", "info", shape="cpu=2") == 0
        import json
        document = json.loads(capsys.readouterr().out)
        # 2 CPUs on node 0 (3 free), then node 1 (2 free), then 1 is left on node 0
        assert document["capacity"] == 2 and document["blocking_resource"] == "none"
        assert document["fits"] == {"0": True, "1": True}
        assert document["containers"][0]["numa_nodes_used"] == [0]


async def test_snapshot_shape_by_name(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    shapes = write(tmp_path / "shapes.yaml", SHAPES)
    async with Node(PROFILE) as node:
        assert await snapshot(node.settings(fit_shapes=shapes), "table", "info",
                                  shape="infer") == 0
        assert "Verdict: the kubelet would admit it under Topology Manager policy " \
               "single-numa-node, scope container: main on NUMA node 0; 2 more pods" \
               in capsys.readouterr().out
        with pytest.raises(cli.UsageError, match="no shape named 'nope'"):
            await snapshot(node.settings(fit_shapes=shapes), "table", "info", shape="nope")


async def test_plain_snapshot_ends_with_free_table_and_shapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shapes = write(tmp_path / "shapes.yaml", SHAPES)
    async with Node(PROFILE) as node:
        assert await snapshot(node.settings(fit_shapes=shapes), "table", "info") == 0
    out = capsys.readouterr().out
    free = out[out.index("Free for new single-NUMA requests, per NUMA node:"):].splitlines()
    assert free[1].split() == ["NUMA", "cpu", GPU, "hugepages-2Mi", "memory", "FULL-CORE",
                               "CPUS"]
    assert free[2].split() == ["0", "3", "1", "1Gi", "16Gi", "2"]
    assert free[3].split() == ["1", "2", "1", "1Gi", "12Gi", "2"]
    assert "  infer: the kubelet would admit it under Topology Manager policy " \
           "single-numa-node, scope container: main on NUMA node 0; 2 more pods of this " \
           "shape would be admitted" in out
    assert "  big: the kubelet would reject it with TopologyAffinityError" in out


def test_fit_view_without_shapes_or_api_has_only_node_figures() -> None:
    view = FitView()
    assert view.rejections is None and view.current_shapes() == ()


def test_fit_view_without_a_kubelet_config_keeps_its_answers_between_refreshes() -> None:
    """The answers are recomputed only when one of their inputs changed; the configuration
    assumed without a file must therefore compare equal at every refresh, or a large node
    would recompute its answers on the event loop every --interval."""
    from exporter.model import Allocatable, KubeletSnapshot, NumaNode, Topology
    view = FitView()
    topology = Topology.from_nodes([NumaNode(0, frozenset({0, 1}))])
    snapshot = KubeletSnapshot((), Allocatable(cpu_ids=(0, 1)))
    assert view.file_config() is None
    assert view.resolve(snapshot, topology) == view.resolve(snapshot, topology)
    assert view.resolve(snapshot, topology).topology_manager_policy == "single-numa-node"
