"""Black-box checks of SPEC section 7 (fit), written from the SPEC alone: the exporter runs as a
real process with the SPEC's flags (``--fit-shapes``, ``--full-pcpus-only``,
``--kubelet-config``) against the simulated kubelet; the SMT layout is written into the sysfs
tree by hand here.

The machine (numbers worked out by hand from SPEC sections 2 and 7):

* NUMA 0: CPUs 0-3 and 8-11, NUMA 1: CPUs 4-7 and 12-15; SMT siblings are (i, i+8).
  Reserved: core 0 (CPUs 0 and 8). Allocatable: node 0 {1,2,3,9,10,11}, node 1 {4-7,12-15}.
* Pod a: CPUs {1,9,2,11} (node 0), 4Gi memory on node 0, GPU g0.
  Pod b: CPUs {4,5,12,13} (node 1), GPU g3 (unhealthy: not allocatable).
  Pod c: 20Gi memory on NUMA 0,1 (a block spanning both nodes).
* Free CPUs: node 0 {3,10} = 2, node 1 {6,7,14,15} = 4.
  Free full cores (CPUs whose siblings are all free and allocatable): node 0: 3's sibling 11 is
  taken, 10's sibling 2 is taken -> 0; node 1: cores 6 and 7 -> 4 CPUs.
* Memory: 16Gi allocatable per node. Single-node: node 0 4Gi. Group 20Gi over 0,1: node 0 takes
  its 12Gi left, node 1 the remaining 8Gi. Both nodes hold part of a block spanning NUMA nodes
  0 and 1, so the memory manager serves no single-node memory request on either (SPEC 7.2.2,
  the group rule): podresources_numa_free of every memory type is 0 on both, and every
  Guaranteed shape asking for memory or hugepages is rejected under single-numa-node.
* GPUs (nvidia.com/gpu): g0 [0], g1 [0], g2 [1], g3 [1] unhealthy, g4 [0,1]. Free allocatable:
  node 0 {g1, g4} = 2, node 1 {g2, g4} = 2; the two nodes together {g1, g2, g4} = 3.
  Registered (capacity): node 0 {g0, g1, g4} = 3, node 1 {g2, g3, g4} = 3.
* Without --kubelet-config the exporter assumes single-numa-node, scope container, CPU manager
  static and memory manager Static (the kubelet lists CPUs and memory).
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

from exporter.model import ContainerAssignment

from ..support.harness import REPO, GiB, Node, free_port, scrape_port_until, small_profile
from ..support.spec import dev, mem, put_pod, set_allocatable, small_allocatable_memory

MiB = 1 << 20
C = ContainerAssignment
GPU = "nvidia.com/gpu"

SHAPES = textwrap.dedent("""\
    shapes:
      s1: {cpu: 2, memory: 4Gi, nvidia.com/gpu: 1}
      s2: {cpu: 4, nvidia.com/gpu: 2}
      s3: {cpu: 6, nvidia.com/gpu: 3}
      s4: {nvidia.com/gpu: 4}
      s5: {cpu: 2, hugepages-2Mi: 512Mi}
      s6: {cpu: 3}
    """)


def machine() -> dict:
    return small_profile(numa_nodes=[
        {"id": 0, "cpus": "0-3,8-11", "memory": "16Gi", "hugepages": {"2Mi": 512}},
        {"id": 1, "cpus": "4-7,12-15", "memory": "16Gi", "hugepages": {"2Mi": 512}}],
        reserved_cpus="0,8")


def write_smt(node: Node) -> None:
    """Two threads a core, CPUs c and c+8, as the kernel says it: the same ``core_id`` (what
    cAdvisor groups by) and the same sibling lists."""
    for cpu in range(16):
        siblings = f"{cpu % 8},{cpu % 8 + 8}"
        directory = node.sysfs / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "core_id").write_text(f"{cpu % 8}\n")
        for name in ("thread_siblings_list", "core_cpus_list"):
            (directory / name).write_text(siblings + "\n")


def populate(node: Node) -> None:
    set_allocatable(node, cpu_ids=[1, 2, 3, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15],
                    memory=small_allocatable_memory(),
                    devices=[dev(GPU, "g0", [0]), dev(GPU, "g1", [0]), dev(GPU, "g2", [1]),
                             dev(GPU, "g4", [0, 1])])
    put_pod(node, "ns", "a", C("c", cpu_ids=(1, 9, 2, 11), memory=(mem(4 * GiB, [0]),),
                               devices=(dev(GPU, "g0", [0]),)))
    put_pod(node, "ns", "b", C("c", cpu_ids=(4, 5, 12, 13), devices=(dev(GPU, "g3", [1]),)))
    put_pod(node, "ns", "c", C("c", memory=(mem(20 * GiB, [0, 1]),)))


async def run_exporter(node: Node, *flags: str):
    port = free_port()
    shapes = node.dir / "shapes.yaml"
    shapes.write_text(SHAPES)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "--socket", str(node.socket),
        "--sysfs-root", str(node.sysfs), "--listen-address", f"127.0.0.1:{port}",
        "--interval", "0.2", "--fit-shapes", str(shapes), *flags, cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    return proc, port


async def fit_scrape(*flags: str, kubelet_config: str | None = None):
    async with Node(machine()) as node:
        write_smt(node)
        populate(node)
        if kubelet_config is not None:
            path = node.dir / "config.yaml"
            path.write_text(kubelet_config)
            flags = (*flags, "--kubelet-config", str(path))
        proc, port = await run_exporter(node, *flags)
        try:
            return await scrape_port_until(
                port, lambda s: s.get("podresources_up") == 1.0
                and bool(s.series("podresources_shape_fits")), what="fit series")
        finally:
            proc.terminate()
            await proc.wait()


def fits(s, shape):
    return s.by("podresources_shape_fits", "numa_node", shape=shape)


def short(s, shape, resource):
    return s.by("podresources_shape_shortfall", "numa_node", shape=shape, resource=resource)


async def test_free_capacity_per_numa_node():
    s = await fit_scrape()
    free = s.by("podresources_numa_free", "numa_node", "resource")
    assert free[("0", "cpu")] == 2 and free[("1", "cpu")] == 4
    assert free[("0", "memory")] == 0 and free[("1", "memory")] == 0
    assert free[("0", "hugepages-2Mi")] == 0 and free[("1", "hugepages-2Mi")] == 0
    assert free[("0", GPU)] == 2 and free[("1", GPU)] == 2
    assert s.by("podresources_numa_free_full_cores", "numa_node") == {"0": 0, "1": 4}
    assert s.by("podresources_kubelet_config_info", "topology_manager_policy",
                "topology_manager_scope", "cpu_manager_policy", "memory_manager_policy",
                "source") == {("single-numa-node", "container", "static", "Static",
                               "assumed"): 1}


def admitted(s, shape):
    return s.value("podresources_shape_admitted", shape=shape)


def rejection(s, shape):
    return s.by("podresources_shape_rejection_info", "reason", "blocking_resource",
                shape=shape)


async def test_shapes_without_full_pcpus_only():
    s = await fit_scrape()
    # s1: memory only in the group {0,1}: wider than one node's capacity needs, rejected;
    # the whole request is the shortfall on both grouped nodes
    assert admitted(s, "s1") == 0
    assert rejection(s, "s1") == {("TopologyAffinityError", "memory"): 1}
    assert fits(s, "s1") == {"0": 0, "1": 0}
    assert short(s, "s1", "memory") == {"0": 4 * GiB, "1": 4 * GiB}
    assert short(s, "s1", "cpu") == {"0": 0, "1": 0}
    assert short(s, "s1", GPU) == {"0": 0, "1": 0}
    assert s.value("podresources_shape_capacity", shape="s1") == 0
    assert s.value("podresources_shape_min_numa_nodes", shape="s1") == 2
    # s2 (no memory): node 0 lacks 2 CPUs; node 1 holds exactly one (CPUs 6,7,14,15, GPUs g2
    # and g4); then node 0 has 2 CPUs and g1: capacity 1
    assert admitted(s, "s2") == 1 and rejection(s, "s2") == {}
    assert fits(s, "s2") == {"0": 0, "1": 1}
    assert short(s, "s2", "cpu") == {"0": 2, "1": 0}
    assert s.value("podresources_shape_capacity", shape="s2") == 1
    assert s.value("podresources_shape_min_numa_nodes", shape="s2") == 1
    # s3: one node's capacity holds 6 CPUs and 3 GPUs, what is free does not: both block
    assert rejection(s, "s3") == {("TopologyAffinityError", "multiple"): 1}
    assert fits(s, "s3") == {"0": 0, "1": 0}
    assert short(s, "s3", "cpu") == {"0": 4, "1": 2}
    assert short(s, "s3", GPU) == {"0": 1, "1": 1}
    assert s.value("podresources_shape_capacity", shape="s3") == 0
    assert s.value("podresources_shape_min_numa_nodes", shape="s3") == 2
    # s4: 4 gpus exist nowhere (3 free in all): no min_numa_nodes series
    assert rejection(s, "s4") == {("TopologyAffinityError", GPU): 1}
    assert short(s, "s4", GPU) == {"0": 2, "1": 2}
    assert s.value("podresources_shape_capacity", shape="s4") == 0
    assert s.get("podresources_shape_min_numa_nodes", shape="s4") is None
    # s5: hugepages are memory too: the group rule rejects it as well
    assert rejection(s, "s5") == {("TopologyAffinityError", "hugepages-2Mi"): 1}
    assert fits(s, "s5") == {"0": 0, "1": 0}
    # s6: 3 CPUs on node 1
    assert admitted(s, "s6") == 1 and fits(s, "s6") == {"0": 0, "1": 1}


async def test_shapes_with_full_pcpus_only_flag():
    s = await fit_scrape("--full-pcpus-only")
    # 3 CPUs are not whole cores of 2 threads: SMTAlignmentError, whatever is free
    assert admitted(s, "s6") == 0
    assert rejection(s, "s6") == {("SMTAlignmentError", "cpu"): 1}
    assert s.value("podresources_shape_capacity", shape="s6") == 0
    # 4 CPUs: 2 cores; free physical CPUs node-wide 3,10,6,7,14,15 (6): still admitted
    assert admitted(s, "s2") == 1
    assert s.value("podresources_shape_capacity", shape="s2") == 1
    assert s.value("podresources_kubelet_config_info", topology_manager_policy="single-numa-node",
                   topology_manager_scope="container", cpu_manager_policy="static",
                   memory_manager_policy="Static", source="flags+assumed") == 1


async def test_kubelet_config_gives_policies_and_full_pcpus_only():
    config = textwrap.dedent("""\
        apiVersion: kubelet.config.k8s.io/v1beta1
        kind: KubeletConfiguration
        cpuManagerPolicy: static
        cpuManagerPolicyOptions:
          full-pcpus-only: "true"
        memoryManagerPolicy: Static
        topologyManagerPolicy: single-numa-node
        topologyManagerScope: pod
        """)
    s = await fit_scrape(kubelet_config=config)
    assert s.value("podresources_kubelet_config_info", topology_manager_policy="single-numa-node",
                   topology_manager_scope="pod", cpu_manager_policy="static",
                   memory_manager_policy="Static", source="file") == 1
    assert fits(s, "s2") == {"0": 0, "1": 1}
    assert rejection(s, "s6") == {("SMTAlignmentError", "cpu"): 1}


async def test_best_effort_from_the_flag_spreads_what_single_numa_node_rejects():
    """--topology-manager-policy best-effort: s1's memory goes to the group {0,1}; s2 is
    admitted. s3 (6 CPUs, 3 GPUs) passes the Topology Manager across both nodes and the device
    manager allocates g1, g2 and g4; the kubelet's resource-fit predicate then raises the GPU
    allocatable from 4 healthy to the 5 allocated (g0, g3 that went unhealthy, and these three:
    devicemanager sanitizeNodeAllocatable), so 3 requested <= 5 - 2 used: admitted."""
    s = await fit_scrape("--topology-manager-policy", "best-effort")
    assert admitted(s, "s1") == 1 and admitted(s, "s2") == 1
    assert admitted(s, "s3") == 1
    assert rejection(s, "s3") == {}
    assert s.value("podresources_kubelet_config_info", topology_manager_policy="best-effort",
                   topology_manager_scope="container", cpu_manager_policy="static",
                   memory_manager_policy="Static", source="flags+assumed") == 1


async def snapshot_shape(shape: str) -> str:
    async with Node(machine()) as node:
        write_smt(node)
        populate(node)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "snapshot", "--socket", str(node.socket),
            "--sysfs-root", str(node.sysfs), "--shape", shape,
            cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_snapshot_shape_verdict_in_words():
    # s2 again: node 0 has 2 of the 4 CPUs; node 1 holds exactly one pod
    text = await snapshot_shape("cpu=4,nvidia.com/gpu=2")
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in text.splitlines()
            if line.startswith("  ") and line.split()[0].isdigit()}
    assert rows[("0", "cpu")] == ["4", "2", "2"]  # request, free, shortfall
    assert rows[("1", "cpu")] == ["4", "4", "0"]
    assert rows[("0", GPU)] == ["2", "2", "0"]
    assert ("Verdict: the kubelet would admit it under Topology Manager policy "
            "single-numa-node, scope container: main on NUMA node 1; 1 more pod of this shape "
            "would be admitted.") in text
    # s3: CPUs and GPUs short on each node
    text = await snapshot_shape("cpu=6,nvidia.com/gpu=3")
    assert "with TopologyAffinityError under Topology Manager policy single-numa-node" in text
    assert "no NUMA set the policy allows has enough nvidia.com/gpu, nor enough CPUs" in text
    # memory: the group {0,1} is the reason
    text = await snapshot_shape("cpu=2,memory=1Gi")
    assert ("NUMA nodes 0 and 1 hold part of a memory block spanning several NUMA nodes, so "
            "the memory manager serves no single-NUMA memory request there") in text
