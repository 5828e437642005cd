"""Cluster topology fit: where does a Guaranteed pod still fit on one NUMA node?

Reads the recording rules of dashboards/rules/podresources-exporter.rules.yaml (``node:...``,
``node_numa_node:...``, ``node_resource:...``), so Prometheus must load that file.
"""

from __future__ import annotations

from .panels import (
    CLUSTER,
    UTILIZATION_STEPS,
    bar_gauge,
    cluster_variable,
    custom_variable,
    dashboard,
    datasource_variable,
    matrix_table,
    merge,
    node_link,
    organize,
    query,
    query_variable,
    row,
    stat,
    table,
    timeseries,
)

UID = "podresources-cluster-topology-fit"
TITLE = "Podresources / Cluster topology fit"

NODES = f'{CLUSTER},node=~"$node"'
NODE_LINKS = {"node": [node_link()]}
FREE_PER_NUMA = f"node_numa_node:podresources_cpus_free:sum{{{NODES}}}"
FREE_ON_NODE = f"node:podresources_cpus_free:sum{{{NODES}}}"
FREE_ON_ONE_NUMA = f"node:podresources_cpus_free_on_one_numa_node:max{{{NODES}}}"
# Nodes with $cpus free exclusive CPUs in total but fewer on every single NUMA node.
FRAGMENTED = f"({FREE_ON_NODE} >= $cpus) unless ({FREE_ON_ONE_NUMA} >= $cpus)"
FREE_STEPS = ((None, "red"), (1, "orange"), (8, "green"))
YES_NO = {"0": ("no", "green"), "1": ("yes", "orange")}


def fleet() -> list:
    return [
        row("Fleet"),
        stat("Nodes reporting", "Nodes whose exporter Prometheus scrapes.",
             [query(f"count(max by (node) (podresources_node_info{{{NODES}}}))", instant=True)]),
        stat("Kubelet unreachable",
             "Nodes whose exporter cannot refresh from the kubelet (their figures are old).",
             [query(f"sum(max by (node) (podresources_up{{{NODES}}}) == bool 0)", instant=True)],
             steps=((None, "green"), (1, "red"))),
        stat("Free exclusive CPUs", "Exclusively assignable CPUs not assigned, all nodes.",
             [query(f"sum({FREE_ON_NODE})", instant=True)]),
        stat("Fit $cpus CPUs on one NUMA node",
             "Nodes where a single NUMA node has at least $cpus free exclusive CPUs: where a "
             "Guaranteed pod with $cpus CPUs can be admitted under the single-numa-node policy.",
             [query(f"count({FREE_ON_ONE_NUMA} >= $cpus) or vector(0)", instant=True)],
             steps=((None, "red"), (1, "green"))),
        stat("Fragmented for $cpus CPUs",
             "Nodes with $cpus free exclusive CPUs in total but fewer on every single NUMA node: "
             "a $cpus-CPU pod fits by count but not under single-numa-node.",
             [query(f"count({FRAGMENTED}) or vector(0)", instant=True)],
             steps=((None, "green"), (1, "orange"))),
        stat("Misaligned containers",
             "Containers, on all nodes, whose exclusive resources need more than one NUMA node.",
             [query("sum(max by (node) "
                    f"(podresources_misaligned_containers{{{NODES}}}))", instant=True)],
             steps=((None, "green"), (1, "orange"))),
    ]


def free_cpus() -> list:
    per_numa = matrix_table(
        "Free exclusive CPUs: nodes × NUMA nodes",
        "Exclusively assignable CPUs not yet assigned, one row per node, one column per NUMA "
        "node.", FREE_PER_NUMA, "node", "numa_node", unit="short", steps=FREE_STEPS,
        row_links=[node_link()])
    fragmentation = table(
        "Fragmentation for $cpus CPUs",
        "Free exclusive CPUs on the node against the largest number free on one NUMA node; "
        "'fragmented' nodes have $cpus free in total but not on any single NUMA node.",
        # max by (node): drops __name__, so that the three tables merge on `node` alone.
        [query(f"max by (node) ({FREE_ON_NODE})", table=True),
         query(f"max by (node) ({FREE_ON_ONE_NUMA})", table=True),
         query(f"({FREE_ON_NODE} >= bool $cpus) * ({FREE_ON_ONE_NUMA} < bool $cpus)",
               table=True)],
        transformations=[merge(), organize(
            {"Value #A": "free on node", "Value #B": "largest free on one NUMA node",
             "Value #C": "fragmented"},
            order=("node", "Value #A", "Value #B", "Value #C"))],
        colored={"fragmented": ((None, "green"), (1, "orange"))}, mapped={"fragmented": YES_NO},
        sort_by="fragmented", links=NODE_LINKS, width=12, height=9)
    largest = timeseries(
        "Largest free exclusive CPU block on one NUMA node",
        "Per node, the most exclusive CPUs a single NUMA node can still give, over time.",
        [query(FREE_ON_ONE_NUMA, "{{node}}")], unit="short", width=24,
        links=[node_link("${__field.labels.node}")])
    return [row("Where exclusive CPUs are free"), per_numa, fragmentation, largest]


def utilization() -> list:
    return [
        row("Utilization"),
        matrix_table("Node utilization by resource",
                     "Allocated ÷ allocatable per node (all NUMA nodes together), one column "
                     "per resource: CPUs, memory types and device resources.",
                     f"node_resource:podresources_utilization:ratio{{{NODES}}}", "node",
                     "resource", unit="percentunit", steps=UTILIZATION_STEPS,
                     row_links=[node_link()]),
        matrix_table("Fullest NUMA node by resource",
                     "Per node and resource, the utilization of its fullest NUMA node: a node "
                     "can be half empty and still have no room on any single NUMA node.",
                     f"node_resource:podresources_numa_utilization_ratio:max{{{NODES}}}", "node",
                     "resource", unit="percentunit", steps=UTILIZATION_STEPS,
                     row_links=[node_link()]),
        bar_gauge("Top nodes by $resource utilization",
                  "The 10 nodes with the highest share of $resource allocated (whole node).",
                  [query(f'topk(10, node_resource:podresources_utilization:ratio{{{NODES},'
                         f'resource="$resource"}})', "{{node}}", instant=True)],
                  width=12, height=9),
        bar_gauge("Top nodes by fullest NUMA node ($resource)",
                  "The 10 nodes whose fullest NUMA node has the highest share of $resource "
                  "allocated.",
                  [query(f'topk(10, node_resource:podresources_numa_utilization_ratio:max{{'
                         f'{NODES},resource="$resource"}})', "{{node}}", instant=True)],
                  width=12, height=9),
        timeseries("Utilization by resource, selected nodes",
                   "Allocated ÷ allocatable over the selected nodes together, per resource.",
                   [query("sum by (resource) (node_resource:podresources_allocated:sum"
                          f"{{{NODES}}}) / sum by (resource) "
                          f"(node_resource:podresources_allocatable:sum{{{NODES}}})",
                          "{{resource}}")],
                   unit="percentunit", width=24, steps=UTILIZATION_STEPS),
    ]


# DRA devices prepared per node, driver and pool: the sum over NUMA nodes (max strips the target
# labels of a node scraped twice).
DRA_ALLOCATED = ("sum by (node, driver, pool) (max by (node, driver, pool, numa_node) "
                 f"(podresources_dra_devices_allocated{{{NODES}}}))")


def dra_and_alignment() -> list:
    return [
        row("DRA devices and alignment"),
        table("DRA devices by node, driver and pool",
              "Distinct DRA devices prepared for containers (all NUMA nodes of the node).",
              [query(DRA_ALLOCATED, table=True)],
              transformations=[organize({"Value": "devices"})], sort_by="devices",
              links=NODE_LINKS, width=8),
        bar_gauge("DRA devices by driver",
                  "Distinct DRA devices prepared for containers, all selected nodes, per driver.",
                  [query(f"sum by (driver) ({DRA_ALLOCATED})", "{{driver}}", instant=True)],
                  unit="short", max_value=None, steps=((None, "blue"),), width=8),
        timeseries("Misaligned containers per node",
                   "Containers needing more than one NUMA node, per node, over time.",
                   [query(f"max by (node) (podresources_misaligned_containers{{{NODES}}})",
                          "{{node}}")],
                   unit="short", width=8, links=[node_link("${__field.labels.node}")]),
    ]


SHAPE_FITS_ON_NODE = f"max by (node, shape) (podresources_shape_fits{{{NODES}}})"
SHAPE_CAPACITY = f"node_shape:podresources_shape_capacity:max{{{NODES}}}"
SHAPE_ADMITTED = f"node_shape:podresources_shape_admitted:max{{{NODES}}}"
SHAPE_REJECTED = f"node_shape_reason:podresources_shape_rejection_info:max{{{NODES}}}"
# Per shape and verdict (a rejection's reason and blocking resource, or admitted): nodes.
SHAPE_VERDICTS = (f"count by (shape, reason, blocking_resource) ({SHAPE_REJECTED}) or "
                  "count by (shape, reason, blocking_resource) (label_replace(label_replace("
                  f'{SHAPE_ADMITTED} == 1, "reason", "admitted", "", ""), '
                  '"blocking_resource", "none", "", ""))')
# 1 where even the node's best NUMA node lacks the resource for one pod of the shape
SHAPE_BLOCKED = (f"min by (node, shape, resource) (podresources_shape_shortfall{{{NODES}}}) "
                 "> bool 0")


def fit_per_shape() -> list:
    """The shapes of --fit-shapes: where each fits, how many more, what blocks it."""
    return [
        row("Fit per shape"),
        table("Shapes: where they fit",
              "Per pod shape of the exporters' --fit-shapes: the nodes whose kubelet would admit "
              "one more pod of it now, with the Topology Manager policy and scope in use there "
              "(admitting); the nodes where one pod fits on a single NUMA node now; and how "
              "many more pods the selected nodes admit, each kubelet placing them one after "
              "another (capacity; at most 64 per node).",
              [query(f"sum by (shape) ({SHAPE_FITS_ON_NODE})", table=True),
               query(f"sum by (shape) ({SHAPE_CAPACITY})", table=True),
               query(f"count by (shape) ({SHAPE_CAPACITY})", table=True),
               query(f"sum by (shape) ({SHAPE_ADMITTED})", table=True)],
              transformations=[merge(), organize(
                  {"Value #A": "nodes where it fits", "Value #B": "capacity",
                   "Value #C": "nodes", "Value #D": "nodes admitting"},
                  order=("shape", "Value #D", "Value #A", "Value #B", "Value #C"))],
              colored={"capacity": ((None, "red"), (1, "orange"), (4, "green"))},
              sort_by="capacity", width=12, height=8),
        table("Blocking resources per shape",
              "Per shape and resource, the nodes where no NUMA node has enough of it for one "
              "pod: the why not. A resource blocking on every node is what to free or buy.",
              [query(f"sum by (shape, resource) ({SHAPE_BLOCKED})", table=True)],
              transformations=[organize({"Value": "nodes blocked"})],
              colored={"nodes blocked": ((None, "green"), (1, "orange"))},
              sort_by="nodes blocked", width=12, height=8),
        table("Shapes: why not admitted",
              "Per shape: on how many nodes the kubelet would say what (reason: "
              "TopologyAffinityError, SMTAlignmentError, UnexpectedAdmissionError, "
              "OutOf<resource>) for one more pod, and which resource no NUMA set the policy "
              "allows has enough of (blocking resource); admitted where it would be admitted.",
              [query(SHAPE_VERDICTS, table=True)],
              transformations=[organize({"Value": "nodes",
                                         "blocking_resource": "blocking resource"},
                                        order=("shape", "reason", "blocking_resource"))],
              sort_by="nodes", width=12, height=8),
        table("Kubelet configuration per node",
              "The Topology Manager policy and scope and the CPU and memory manager policies "
              "each node's fit answers use, and where they came from (flags, file, assumed).",
              [query("max by (node, topology_manager_policy, topology_manager_scope, "
                     "cpu_manager_policy, memory_manager_policy, source) "
                     f"(podresources_kubelet_config_info{{{NODES}}})", table=True)],
              unit="none", transformations=[organize(
                  {"topology_manager_policy": "topology policy",
                   "topology_manager_scope": "scope", "cpu_manager_policy": "CPU manager",
                   "memory_manager_policy": "memory manager"}, hide=("Time", "Value"),
                  order=("node", "topology_manager_policy", "topology_manager_scope",
                         "cpu_manager_policy", "memory_manager_policy", "source"))],
              links=NODE_LINKS, width=12, height=8),
        timeseries("Capacity per shape",
                   "More pods of each shape the selected nodes admit under single-numa-node, "
                   "over time; 0 for 30 minutes cluster-wide fires PodresourcesShapeNoCapacity.",
                   [query(f"sum by (shape) ({SHAPE_CAPACITY})", "{{shape}}")],
                   unit="short", width=12),
        table("Shape fit by node",
              "Per node and shape: the NUMA nodes where one pod fits now (0 = none), and how "
              "many more pods the node admits.",
              [query(f"sum by (node, shape) (max by (node, shape, numa_node) "
                     f"(podresources_shape_fits{{{NODES}}}))", table=True),
               query(f"max by (node, shape) ({SHAPE_CAPACITY})", table=True)],
              transformations=[merge(), organize(
                  {"Value #A": "NUMA nodes where it fits", "Value #B": "capacity"},
                  order=("node", "shape", "Value #A", "Value #B"))],
              colored={"capacity": ((None, "red"), (1, "green"))}, links=NODE_LINKS,
              sort_by="capacity", width=12, height=8),
    ]


def build() -> dict:
    variables = [
        datasource_variable(),
        cluster_variable(),
        query_variable("node", "Nodes", f"label_values(podresources_node_info{{{CLUSTER}}}, node)",
                       multi=True),
        query_variable("resource", "Resource",
                       f"label_values(podresources_numa_utilization_ratio{{{CLUSTER}}}, resource)",
                       description="Resource for the top-nodes panels: cpu, a memory type or a "
                                   "device resource."),
        custom_variable("cpus", "Pod CPUs", ["1", "2", "4", "8", "16", "32", "64"], "8",
                        "Exclusive CPUs a Guaranteed pod asks for, for the fit and "
                        "fragmentation panels."),
    ]
    panels = fleet() + fit_per_shape() + free_cpus() + utilization() + dra_and_alignment()
    return dashboard(TITLE, UID,
                     "Where exclusive CPUs, memory and devices are free across nodes, and where "
                     "they are free in total but fragmented over NUMA nodes.", variables, panels)
