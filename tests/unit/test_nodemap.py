"""The node map from one refresh: CPU states and holders by core, memory bars and groups,
device chips where their NUMA nodes put them, what no NUMA node claims, what the kubelet does
not say left undrawn, and hostile strings escaped in the SVG and the page."""

from __future__ import annotations

import base64
import hashlib
import re
import xml.dom.minidom

from exporter.accounting import account
from exporter.model import (
    Allocatable,
    ContainerAssignment as C,
    CpuAttributes,
    CpuRequests,
    DeviceEntry as D,
    DraDevice,
    DraInventory,
    KubeletSnapshot,
    MemoryBlock as M,
    NumaNode,
    PodAssignment as P,
    PublishedDevice,
    Topology,
)
from exporter.nodemap.build import MapInputs, build_map
from exporter.nodemap.page import CONTENT_SECURITY_POLICY, render_document, render_page
from exporter.nodemap.picture import ChipState, CpuMode, DraCpus, Holder

GiB = 1 << 30
# node 0: cores {0,2} {1,3}; node 1: cores {4,6} {5,7}; node 2: memory, no CPUs
TOPOLOGY = Topology.from_nodes(
    [NumaNode(0, frozenset(range(4)), 16 * GiB), NumaNode(1, frozenset(range(4, 8)), 16 * GiB),
     NumaNode(2, frozenset(), 64 * GiB)],
    {0: frozenset({0, 2}), 2: frozenset({0, 2}), 1: frozenset({1, 3}), 3: frozenset({1, 3}),
     4: frozenset({4, 6}), 6: frozenset({4, 6}), 5: frozenset({5, 7}), 7: frozenset({5, 7})})
HOSTILE_NS = "<script>alert(1)</script>"
HOSTILE_POD = 'x"y\'z'
HOSTILE_CTR = "c&\x01d"
HOSTILE_ID = '"><img src=x onerror=alert(1)>'

ALLOCATABLE = Allocatable(
    cpu_ids=tuple(range(1, 8)),  # CPU 0 reserved
    memory=(M("memory", 8 * GiB, (0,)), M("memory", 8 * GiB, (1,))),
    devices=(D("r/gpu", ("g0",), (0,)), D("r/gpu", ("g1",), (1,)), D("r/gpu", ("g2",), (1,)),
             D("r/nic", ("n0",), (0,)), D("r/nic", ("n0",), (1,)),  # local to 0 and 1
             D("r/acc", ("x0",), None)))  # no topology
PODS = (
    P("a", "p1", (C("c1", cpu_ids=(1, 3), memory=(M("memory", 2 * GiB, (0,)),),
                    devices=(D("r/gpu", ("g0",), (0,)),)),)),
    # CPUs on node 1, memory over nodes 0 and 1: needs 2 NUMA nodes
    P("b", "p2", (C("c2", cpu_ids=(5,), memory=(M("memory", 4 * GiB, (0, 1)),),
                    devices=(D("r/gpu", ("g1",), (1,)),)),)),
    # pod-level CPUs 6 and 7 overlap the container's 6: 7 is the pod's own
    P("c", "p3", (C("c3", cpu_ids=(6,)),), cpu_ids=(6, 7)),
    # a CPU and a NUMA id sysfs does not know, a device gone from allocatable, hostile names
    P(HOSTILE_NS, HOSTILE_POD, (C(HOSTILE_CTR, cpu_ids=(99,),
                                  devices=(D("r/gpu", (HOSTILE_ID,), (1,)),
                                           D("r/gpu", ("d9",), (7,)))),)),
)


def inputs(snapshot: KubeletSnapshot, dra: DraInventory | None = None) -> MapInputs:
    return MapInputs(snapshot, account(snapshot, TOPOLOGY, dra=dra), TOPOLOGY, "node-a",
                     1_700_000_000.0, True, dra)


def cpu_table(nodemap) -> dict[int, tuple[str, tuple[str, ...]]]:
    boxes = [*nodemap.numa, *([nodemap.apart] if nodemap.apart else [])]
    return {cpu.cpu: (str(cpu.state), tuple(h.name for h in cpu.holders))
            for box in boxes for cpu in box.cpus}


def test_each_cpu_has_its_state_and_holder_and_cores_keep_their_threads_together():
    nodemap = build_map(inputs(KubeletSnapshot(PODS, ALLOCATABLE)))
    hostile = f"{HOSTILE_NS}/{HOSTILE_POD}/{HOSTILE_CTR}"
    assert nodemap.cpu_mode == CpuMode.STATIC
    assert cpu_table(nodemap) == {
        0: ("reserved", ()), 1: ("held", ("a/p1/c1",)), 2: ("free", ()),
        3: ("held", ("a/p1/c1",)), 4: ("free", ()), 5: ("held", ("b/p2/c2",)),
        6: ("held", ("c/p3/c3",)), 7: ("held", ("c/p3",)), 99: ("held", (hostile,))}
    node0, node1, node2 = nodemap.numa
    assert [[c.cpu for c in core.cpus] for core in node0.cores] == [[0, 2], [1, 3]]
    assert [[c.cpu for c in core.cpus] for core in node1.cores] == [[4, 6], [5, 7]]
    assert node2.cores == () and node2.memory_sysfs == 64 * GiB
    assert nodemap.apart is not None and [c.cpu for c in nodemap.apart.cpus] == [99]
    # b/p2/c2 straddles; its CPU is outlined, the others are not
    assert [(s.holder.name, s.numa_nodes) for s in nodemap.straddlers] == [("b/p2/c2", 2)]
    assert {c.cpu for c in node1.cpus if c.straddles} == {5}
    # the pods' colour order: sorted by namespace and name ("<" before "a")
    assert nodemap.pods == ((HOSTILE_NS, HOSTILE_POD), ("a", "p1"), ("b", "p2"), ("c", "p3"))


def test_memory_bars_carry_the_metrics_estimate_of_memory_spanning_nodes():
    nodemap = build_map(inputs(KubeletSnapshot(PODS, ALLOCATABLE)))
    node0, node1, node2 = nodemap.numa
    # node 0: 8 GiB allocatable, 2 GiB its own; the 4 GiB block over 0,1 fills node 0 first
    bar = node0.memory[0]
    assert (bar.memory_type, bar.allocatable, bar.allocated, bar.group_share, bar.free) == (
        "memory", 8 * GiB, 2 * GiB, 4 * GiB, 2 * GiB)
    bar = node1.memory[0]
    assert (bar.allocatable, bar.allocated, bar.group_share, bar.free) == (8 * GiB, 0, 0, 8 * GiB)
    assert node2.memory == ()  # nothing allocatable nor assigned there: no bar
    assert (node0.in_memory_group, node1.in_memory_group, node2.in_memory_group) == (
        True, True, False)
    [spanning] = nodemap.spanning
    assert spanning.numa == "0,1"
    assert [(g.memory_type, g.size, [h.name for h in g.holders]) for g in spanning.groups] == [
        ("memory", 4 * GiB, ["b/p2/c2"])]


def test_devices_sit_in_their_nodes_box_spanning_ones_apart_and_unavailable_ones_marked():
    nodemap = build_map(inputs(KubeletSnapshot(PODS, ALLOCATABLE)))
    chips = {box.numa: [(c.resource, c.device, str(c.state), [h.name for h in c.holders])
                        for c in box.chips]
             for box in (*nodemap.numa, *nodemap.spanning, nodemap.apart)}
    hostile = f"{HOSTILE_NS}/{HOSTILE_POD}/{HOSTILE_CTR}"
    assert chips["0"] == [("r/gpu", "g0", "held", ["a/p1/c1"])]
    # the hostile id is assigned but not allocatable: unhealthy or unregistered
    assert chips["1"] == [("r/gpu", HOSTILE_ID, "unavailable", [hostile]),
                          ("r/gpu", "g1", "held", ["b/p2/c2"]), ("r/gpu", "g2", "free", [])]
    assert chips["2"] == []
    assert chips["0,1"] == [("r/nic", "n0", "free", [])]
    # no topology, and a NUMA id sysfs does not know (counted "unknown" as in the metrics)
    assert chips["unknown"] == [("r/acc", "x0", "free", []),
                                ("r/gpu", "d9", "unavailable", [hostile])]


def test_dra_devices_go_where_their_resource_slices_put_them():
    claim = DraDevice("gpu.example.com", "pool", "gpu-0", "claim", "a")
    pods = (P("a", "p1", (C("c1", cpu_ids=(1,), dra_devices=(claim,)),)),)
    dra = DraInventory((PublishedDevice("gpu.example.com", "pool", "gpu-0", (1,)),
                        PublishedDevice("gpu.example.com", "pool", "gpu-1", (0,)),
                        PublishedDevice("gpu.example.com", "pool", "gpu-2", (0,),
                                        frozenset({"NoSchedule"})),
                        PublishedDevice("gpu.example.com", "pool", "gpu-3", None)))
    nodemap = build_map(inputs(KubeletSnapshot(pods, ALLOCATABLE), dra))
    dra_chips = {box.numa: [(c.device, c.state) for c in box.chips if c.dra]
                 for box in (*nodemap.numa, nodemap.apart)}
    assert dra_chips == {"0": [("pool/gpu-1", ChipState.FREE), ("pool/gpu-2", ChipState.TAINTED)],
                         "1": [("pool/gpu-0", ChipState.HELD)], "2": [],
                         "unknown": [("pool/gpu-3", ChipState.FREE)]}
    # the container's CPU on node 0 and its DRA GPU on node 1: it straddles
    assert [s.holder for s in nodemap.straddlers] == [Holder("a", "p1", "c1")]


def test_what_the_kubelet_does_not_say_is_not_drawn():
    # CPU manager none: the allocatable list has no CPUs; everything not held is the shared pool
    shared = build_map(inputs(KubeletSnapshot(PODS[:1], Allocatable(memory=ALLOCATABLE.memory))))
    assert shared.cpu_mode == CpuMode.NONE
    assert {s for s, _ in cpu_table(shared).values()} == {"shared", "held"}
    # no GetAllocatableResources: neither reserved nor free is known; held CPUs still are
    unknown = build_map(inputs(KubeletSnapshot(PODS[:1], None)))
    assert unknown.cpu_mode == CpuMode.UNKNOWN
    assert cpu_table(unknown)[0] == ("unknown", ()) and cpu_table(unknown)[1][0] == "held"
    bar = unknown.numa[0].memory[0]
    assert (bar.allocatable, bar.allocated, bar.free) == (None, 2 * GiB, None)
    assert [(c.device, c.state) for c in unknown.numa[0].chips] == [("g0", ChipState.HELD)]
    # memory manager None: no bars at all
    none = build_map(inputs(KubeletSnapshot((P("a", "p", (C("c", cpu_ids=(1,)),)),),
                                            Allocatable(cpu_ids=(1, 2)))))
    assert all(box.memory == () for box in none.numa)
    assert none.memory_mode == "none"


def test_hostile_strings_are_escaped_in_the_svg_and_the_page():
    nodemap = build_map(inputs(KubeletSnapshot(PODS, ALLOCATABLE)))
    document = render_document(nodemap, now=1_700_000_003.0)
    parsed = xml.dom.minidom.parseString(document.encode())  # well-formed XML, control char gone
    holders = {rect.getAttribute("data-holder") for rect in parsed.getElementsByTagName("rect")}
    assert f"{HOSTILE_NS}/{HOSTILE_POD}/c&\ufffdd" in holders
    devices = {rect.getAttribute("data-device") for rect in parsed.getElementsByTagName("rect")}
    assert HOSTILE_ID in devices
    assert "<script>" not in document and "<img" not in document
    page = render_page(nodemap, reload_seconds=10, now=1_700_000_003.0)
    assert page.count("<script>") == 1  # the page's own, allowed by its hash
    assert "<img" not in page and "alert(1)</script>" not in page
    assert '<meta http-equiv="refresh" content="10">' in page
    assert "snapshot of 2023-11-14 22:13:20 UTC" in page and ">3 s ago<" in page
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    # a file for a ticket does not reload itself
    assert "http-equiv" not in render_page(nodemap)


# ---- exclusive CPUs from DRA (dra-driver-cpu, CPU manager policy none) ---------------------

def dra_cpu(device: str, claim: str, share_id: str | None = None) -> DraDevice:
    return DraDevice("dra.cpu", "node-a", device, claim, "vm", share_id=share_id)


def dra_inputs(pods: tuple[P, ...], dra: DraInventory, requests=None) -> MapInputs:
    snapshot = KubeletSnapshot(pods, Allocatable(memory=ALLOCATABLE.memory))  # policy none
    return MapInputs(snapshot, account(snapshot, TOPOLOGY, dra, requests), TOPOLOGY, "node-a",
                     1_700_000_000.0, True, dra)


def test_cpus_of_a_grouped_dra_device_are_a_count_per_holder_without_cells():
    dra = DraInventory(tuple(
        PublishedDevice("dra.cpu", "node-a", f"cpudevnuma00{n}", (n,), cpu=CpuAttributes(cpus=4))
        for n in (0, 1)))
    pods = (P("vm", "db", (C("compute", dra_devices=(dra_cpu("cpudevnuma001", "db", "s1"),)),)),)
    nodemap = build_map(dra_inputs(pods, dra, lambda ns, name: CpuRequests((("compute", 2000),))))
    assert nodemap.cpu_mode == CpuMode.DRA and nodemap.cpu_drivers == ("dra.cpu",)
    # which CPUs is not known: every cell is the shared pool, the count sits in node 1's box
    assert {state for state, _ in cpu_table(nodemap).values()} == {"shared"}
    assert nodemap.numa[1].dra_cpus == (DraCpus(Holder("vm", "db", "compute"), 2),)
    assert nodemap.numa[0].dra_cpus == () and nodemap.apart is None
    assert nodemap.pods == (("vm", "db"),)
    document = render_document(nodemap)
    group = xml.dom.minidom.parseString(document.encode()).getElementsByTagName("g")
    drawn = [(g.getAttribute("data-numa"), g.getAttribute("data-holder"),
              g.getAttribute("data-count")) for g in group if g.getAttribute("class") == "dra-cpus"]
    assert drawn == [("1", "vm/db/compute", "2")]
    assert "Held via DRA, CPU ids unknown" in document
    assert "CPU manager none; exclusive CPUs from DRA (DRA CPU driver dra.cpu)" in document
    assert "8 CPUs: 0 held, 0 free, 2 held via DRA" not in document  # a node of 4 CPUs
    assert "4 CPUs: 0 held, 0 free, 2 held via DRA" in document
    # without the ResourceSlices the count still shows, under no NUMA node
    blind = build_map(dra_inputs(pods, DraInventory(()), lambda ns, name: CpuRequests(
        (("compute", 2000),))))
    assert blind.apart is not None
    assert blind.apart.dra_cpus == (DraCpus(Holder("vm", "db", "compute"), 2),)


def test_cpus_of_dra_devices_per_cpu_are_cells_held_free_or_reserved():
    # the driver publishes CPUs 1-7 (0 is its reservedCPUs); CPU 7's device is tainted
    dra = DraInventory(tuple(
        PublishedDevice("dra.cpu", "node-a", f"cpudev00{cpu - 1}", (cpu // 4,),
                        frozenset({"NoSchedule"}) if cpu == 7 else frozenset(),
                        CpuAttributes(cpu_id=cpu)) for cpu in range(1, 8)))
    pods = (P("vm", "db", (C("compute", dra_devices=(dra_cpu("cpudev000", "db"),
                                                     dra_cpu("cpudev004", "db"))),)),)
    nodemap = build_map(dra_inputs(pods, dra))
    assert nodemap.cpu_mode == CpuMode.DRA
    assert cpu_table(nodemap) == {
        0: ("reserved", ()), 1: ("held", ("vm/db/compute",)), 2: ("free", ()),
        3: ("free", ()), 4: ("free", ()), 5: ("held", ("vm/db/compute",)), 6: ("free", ()),
        7: ("reserved", ())}
    assert {c.cpu: c.driver for box in nodemap.numa for c in box.cpus if c.driver} == {
        1: "dra.cpu", 5: "dra.cpu"}
    parsed = xml.dom.minidom.parseString(render_document(nodemap).encode())
    assert {r.getAttribute("data-cpu") for r in parsed.getElementsByTagName("rect")
            if r.getAttribute("data-driver") == "dra.cpu"} == {"1", "5"}
