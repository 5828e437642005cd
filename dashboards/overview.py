"""Node NUMA overview: which NUMA node of node X is full, with what, and by whom."""

from __future__ import annotations

from grafana_foundation_sdk.models.common import BigValueTextMode

from .panels import (
    CLUSTER,
    UP_MAPPING,
    bar_gauge,
    cluster_variable,
    dashboard,
    datasource_variable,
    matrix_table,
    merge,
    numa_matcher,
    organize,
    pod_link,
    query,
    query_variable,
    row,
    stat,
    table,
    timeseries,
)

UID = "podresources-numa-overview"
TITLE = "Podresources / Node NUMA overview"

NODE = f'{CLUSTER},node="$node"'
NUMA = 'numa_node=~"$numa_node"'  # single NUMA nodes (CPUs, utilization)
NUMA_OR_GROUP = numa_matcher()  # also items attributed to a group such as "0,1"
NAMESPACE = 'namespace=~"$namespace"'
HUGEPAGES = 'hugepages-.+'
WORKLOAD = f"{NODE},{NAMESPACE},{NUMA_OR_GROUP}"
CONTAINER_KEY = "namespace, pod, container, numa_node"
POD_LINKS = {"pod": [pod_link()]}
# dcgm-exporter's GPU metrics carry the GPU's UUID in label UUID. The recording rule
# gpu:podresources_device_info:relabel gives every GPU a container holds the UUID of its
# physical GPU, whatever the device id's form (GPU-<uuid>, a time-slicing replica
# GPU-<uuid>::<n>, GKE's nvidia<n>/vgpu<m>, a DRA device of gpu.nvidia.com); several containers
# may hold one GPU. The gpu variable lists this node's GPUs (their UUIDs); dcgm-exporter's series
# are selected by UUID, so the join reads this node's GPUs instead of every GPU of the cluster.
GPU_RECORD = "gpu:podresources_device_info:relabel"
THIS_NODES_GPUS = f'{CLUSTER},UUID=~"$gpu"'
HOLDING = "UUID, resource, device_id, numa_node, namespace, pod, container"
GPU_HOLDINGS = f'max by ({HOLDING}) ({GPU_RECORD}{{{NODE},UUID=~"$gpu"}})'


def dcgm(current: str, legacy: str, convert: str) -> str:
    """One of dcgm-exporter's GPU metrics per GPU (label UUID), in base units whichever release
    a node runs: since 4.9 under DCGM 4.7's canonical name (bytes, ratio 0 to 1), before under
    the legacy name (MiB, percent), converted. Where a GPU has both (two releases side by side
    during an upgrade) the canonical one is taken, so no GPU counts twice."""
    return (f"(max by (UUID) ({current}{{{THIS_NODES_GPUS}}}) or "
            f"max by (UUID) ({legacy}{{{THIS_NODES_GPUS}}}) {convert})")


MIB = "* 1048576"
GPU_UTILIZATION = dcgm("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_GPU_UTIL", "/ 100")
GPU_MEMORY_USED = dcgm("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_USED", MIB)
GPU_MEMORY_FREE = dcgm("DCGM_FI_DEV_FB_FREE_BYTES", "DCGM_FI_DEV_FB_FREE", MIB)


def on_this_nodes_gpus(per_gpu: str) -> str:
    """A per-GPU expression (label UUID) per GPU held on this node (one series per holder of
    a shared GPU), labelled with the device, its NUMA node and its holder."""
    return f"{GPU_HOLDINGS} * on (UUID) group_left() {per_gpu}"


DRA_DRIVERS = 'resource=~".+\\\\..+",resource!~".*/.*"'  # driver names: dots, no slash
PLUGIN_DEVICES = 'resource=~".+/.+"'  # device-plugin resources: vendor/name


def utilization(resource_matcher: str) -> str:
    return (f"max by (numa_node, resource) (podresources_numa_utilization_ratio"
            f"{{{NODE},{NUMA},{resource_matcher}}})")


def at_a_glance() -> list:
    return [
        row("At a glance"),
        stat("Kubelet reachable",
             "Did the exporter's last refresh from the kubelet podresources API succeed? While it "
             "is down the exporter keeps serving its last good snapshot.",
             [query(f"max(podresources_up{{{NODE}}})", instant=True)],
             unit="none", mapping=UP_MAPPING, steps=((None, "red"), (1, "green"))),
        stat("Snapshot age",
             "How old the figures on this dashboard are: time since the last successful refresh.",
             [query(f"max(time() - podresources_last_refresh_timestamp_seconds{{{NODE}}})",
                    instant=True)],
             unit="s", steps=((None, "green"), (60, "orange"), (300, "red"))),
        stat("Misaligned containers",
             "Containers whose exclusive CPUs, memory and devices need more than one NUMA node. "
             "The alignment table below names them.",
             [query(f"max(podresources_misaligned_containers{{{NODE}}})", instant=True)],
             steps=((None, "green"), (1, "orange"))),
        stat("Free exclusive CPUs",
             "Exclusively assignable CPUs not yet assigned, per NUMA node: what a Guaranteed pod "
             "under the single-numa-node policy can still get on one NUMA node.",
             [query(f"max by (numa_node) (podresources_cpus_allocatable{{{NODE},{NUMA}}}) - "
                    f"max by (numa_node) (podresources_cpus_allocated{{{NODE},{NUMA}}})",
                    "NUMA {{numa_node}}", instant=True)],
             steps=((None, "red"), (1, "orange"), (4, "green")),
             text_mode=BigValueTextMode.VALUE_AND_NAME, width=6),
        stat("Kubelet podresources API",
             "What the kubelet offers, as detected: API version, GetAllocatableResources, Get, "
             "pod-level resources. Missing CPU or memory series mean the CPU or memory manager "
             "runs without a static policy.",
             [query(f"max by (api_version, get_allocatable, get, pod_level) "
                    f"(podresources_kubelet_api_info{{{NODE}}})",
                    "{{api_version}} · allocatable {{get_allocatable}} · Get {{get}} · "
                    "pod-level {{pod_level}}", instant=True)],
             unit="none", text_mode=BigValueTextMode.NAME, width=6),
    ]


def utilization_bars() -> list:
    about = ("Allocated ÷ allocatable per NUMA node (orange from 80 %, red from 95 %, the "
             "exhaustion alerts' threshold).")
    return [
        row("Utilization per NUMA node"),
        bar_gauge("CPU utilization", about,
                  [query(utilization('resource="cpu"'), "NUMA {{numa_node}}", instant=True)]),
        bar_gauge("Memory utilization",
                  about + " Memory spanning NUMA nodes is apportioned over them: an estimate.",
                  [query(utilization('resource="memory"'), "NUMA {{numa_node}}", instant=True)]),
        bar_gauge("Hugepages utilization", about + " One bar per NUMA node and page size.",
                  [query(utilization(f'resource=~"{HUGEPAGES}"'),
                         "NUMA {{numa_node}} {{resource}}", instant=True)]),
        bar_gauge("Device utilization", about + " One bar per NUMA node and device resource "
                  "(device plugins) or DRA driver (marked DRA); a device local to several NUMA "
                  "nodes counts on each.",
                  [query(utilization(PLUGIN_DEVICES), "NUMA {{numa_node}} {{resource}}",
                         instant=True),
                   query(utilization(DRA_DRIVERS), "NUMA {{numa_node}} {{resource}} (DRA)",
                         instant=True)]),
    ]


def over_time() -> list:
    def pair(allocatable: str, allocated: str, by: str, extra: str, legend: str) -> list:
        selector = f"{{{NODE},{NUMA_OR_GROUP}{extra}}}"
        return [query(f"max by ({by}) ({allocatable}{selector})", legend + " allocatable"),
                query(f"max by ({by}) ({allocated}{selector})", legend + " allocated")]

    about = ("Allocated (solid) against allocatable (dashed) per NUMA node; an item spanning "
             "NUMA nodes shows under its group, e.g. 0,1.")
    dashed = ".* allocatable$"
    memory = ("podresources_memory_allocatable_bytes", "podresources_memory_allocated_bytes")
    return [
        row("Allocatable vs allocated over time"),
        timeseries("Exclusive CPUs over time", about,
                   pair("podresources_cpus_allocatable", "podresources_cpus_allocated",
                        "numa_node", "", "NUMA {{numa_node}}"),
                   unit="short", dashed_regex=dashed),
        timeseries("Memory over time", about,
                   pair(*memory, "numa_node", ',memory_type="memory"', "NUMA {{numa_node}}"),
                   unit="bytes", dashed_regex=dashed),
        timeseries("Hugepages over time", about,
                   pair(*memory, "numa_node, memory_type", f',memory_type=~"{HUGEPAGES}"',
                        "NUMA {{numa_node}} {{memory_type}}"),
                   unit="bytes", dashed_regex=dashed),
        timeseries("Devices over time", about,
                   pair("podresources_devices_allocatable", "podresources_devices_allocated",
                        "numa_node, resource", "", "NUMA {{numa_node}} {{resource}}"),
                   unit="short", dashed_regex=dashed),
    ]


def holders() -> list:
    containers = table(
        "Exclusive resources per container and NUMA node",
        "Who holds what on each NUMA node: exclusive CPUs, memory, hugepages (all sizes) and "
        "device-plugin devices (all resources) per container. Memory spanning NUMA nodes shows "
        "under its group, e.g. 0,1.",
        [query(f"max by ({CONTAINER_KEY}) (podresources_container_cpus{{{WORKLOAD}}})",
               table=True),
         query(f"max by ({CONTAINER_KEY}) "
               f'(podresources_container_memory_bytes{{{WORKLOAD},memory_type="memory"}})',
               table=True),
         query(f"sum by ({CONTAINER_KEY}) "
               f'(podresources_container_memory_bytes{{{WORKLOAD},memory_type=~"{HUGEPAGES}"}})',
               table=True),
         query(f"sum by ({CONTAINER_KEY}) (podresources_container_devices{{{WORKLOAD}}})",
               table=True)],
        transformations=[merge(), organize(
            {"numa_node": "NUMA node", "Value #A": "CPUs", "Value #B": "Memory",
             "Value #C": "Hugepages", "Value #D": "Devices"},
            order=("namespace", "pod", "container", "numa_node", "Value #A", "Value #B",
                   "Value #C", "Value #D"))],
        units={"Memory": "bytes", "Hugepages": "bytes"}, sort_by="CPUs", links=POD_LINKS,
        height=10)
    pod_level = table(
        "Pod-level exclusive resources",
        "Pod-level CPUs and memory (Kubernetes 1.37 and later); they include the containers' own "
        "and may hold more, which then belongs to no container. Empty on older kubelets.",
        [query(f"max by (namespace, pod, numa_node) (podresources_pod_cpus{{{WORKLOAD}}})",
               table=True),
         query(f"sum by (namespace, pod, numa_node) (podresources_pod_memory_bytes{{{WORKLOAD}}})",
               table=True)],
        transformations=[merge(), organize(
            {"numa_node": "NUMA node", "Value #A": "CPUs", "Value #B": "Memory"},
            order=("namespace", "pod", "numa_node", "Value #A", "Value #B"))],
        units={"Memory": "bytes"}, links=POD_LINKS, width=12, height=6)
    alignment = table(
        "NUMA nodes needed per container",
        "How many NUMA nodes each container's exclusive CPUs, memory and devices need; more "
        "than 1 (red) means the container is misaligned.",
        [query("max by (namespace, pod, container) "
               f"(podresources_container_numa_nodes{{{NODE},{NAMESPACE}}})", table=True)],
        transformations=[organize({"Value": "NUMA nodes"})],
        colored={"NUMA nodes": ((None, "green"), (2, "red"))}, sort_by="NUMA nodes",
        links=POD_LINKS, width=12, height=6)
    devices = table(
        "Devices → pods",
        "Which container holds each device-plugin device (GPU, VF, ...), and the NUMA node(s) "
        "the device is local to.",
        [query("max by (resource, device_id, numa_node, namespace, pod, container) "
               f"(podresources_device_info{{{WORKLOAD}}})", table=True)],
        unit="none", transformations=[organize(
            {"numa_node": "NUMA node", "device_id": "device"}, hide=("Time", "Value"),
            order=("resource", "device_id", "numa_node", "namespace", "pod", "container"))],
        links=POD_LINKS, width=12, height=10)
    dra_devices = table(
        "DRA devices → pods",
        "Which container each prepared DRA device is prepared for, by driver, pool and claim, "
        "and the NUMA node(s) the device is local to (from its ResourceSlice; unknown without "
        "the Kubernetes-API view).",
        [query("max by (driver, pool, device, numa_node, claim, share_id, namespace, pod, "
               f"container) (podresources_dra_device_info{{{NODE},{NAMESPACE}}})", table=True)],
        unit="none", transformations=[organize(
            {"share_id": "share id", "numa_node": "NUMA node"}, hide=("Time", "Value"),
            order=("driver", "pool", "device", "numa_node", "claim", "share_id", "namespace",
                   "pod", "container"))],
        links=POD_LINKS, width=12, height=10)
    misaligned = timeseries(
        "Misaligned containers over time",
        "Containers needing more than one NUMA node, over time.",
        [query(f"max(podresources_misaligned_containers{{{NODE}}})", "misaligned containers")],
        unit="short", width=12, height=6)
    return [row("Who holds it"), containers, alignment, misaligned, devices, dra_devices,
            *dra_per_numa_node(), pod_level]


def dra_per_numa_node() -> list:
    """DRA devices of this node per driver, pool and NUMA node: published, prepared, shared,
    tainted (from the ResourceSlices, with the Kubernetes-API view)."""
    by = "driver, pool, numa_node"
    return [
        table("DRA devices per NUMA node",
              "Per DRA driver, pool and NUMA node: untainted devices published in the node's "
              "ResourceSlices (allocatable), distinct devices prepared for containers "
              "(allocated), and allocations of shared devices (shares). Allocatable needs the "
              "Kubernetes-API view.",
              [query(f"max by ({by}) (podresources_dra_devices_allocatable{{{NODE}}})",
                     table=True),
               query(f"max by ({by}) (podresources_dra_devices_allocated{{{NODE}}})",
                     table=True),
               query(f"max by ({by}) (podresources_dra_device_shares{{{NODE}}})", table=True)],
              transformations=[merge(), organize(
                  {"numa_node": "NUMA node", "Value #A": "allocatable", "Value #B": "allocated",
                   "Value #C": "shares"},
                  order=("driver", "pool", "numa_node", "Value #A", "Value #B", "Value #C"))],
              width=12, height=8),
        table("Tainted DRA devices",
              "Published DRA devices carrying a taint, per driver, pool, NUMA node and effect; "
              "NoSchedule and NoExecute keep them out of allocatable.",
              [query(f"max by ({by}, effect) (podresources_dra_devices_tainted{{{NODE}}}) > 0",
                     table=True)],
              transformations=[organize({"numa_node": "NUMA node", "Value": "devices"},
                                        order=("driver", "pool", "numa_node", "effect"))],
              colored={"devices": ((None, "green"), (1, "orange"))}, width=12, height=8),
    ]


def gpus() -> list:
    """DCGM's GPU metrics joined to the pods holding the GPUs and their NUMA nodes; the row is
    folded, and empty without dcgm-exporter."""
    about = (" From dcgm-exporter (label UUID; DCGM_FI_DEV_GPU_UTIL_RATIO and "
             "DCGM_FI_DEV_FB_*_BYTES since 4.9, DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_* before, "
             "shown in the same units), joined on the GPU's UUID to the GPUs held on this node "
             "(recording rule gpu:podresources_device_info:relabel: whole GPUs, time-slicing "
             "replicas, GKE shared GPUs, GPUs of NVIDIA's DRA driver; not MIG). A GPU shared by "
             "several pods shows its whole figures on each. Empty without dcgm-exporter.")
    table_panel = table(
        "GPUs: utilization and memory by pod and NUMA node",
        "Each GPU held on this node: the physical GPU, the container holding it, the NUMA node "
        "it is local to, the GPU's utilization and framebuffer memory used (and its share of "
        "used + free)." + about,
        [query(on_this_nodes_gpus(GPU_UTILIZATION), table=True),
         query(on_this_nodes_gpus(GPU_MEMORY_USED), table=True),
         query(f"{on_this_nodes_gpus(GPU_MEMORY_USED)} / on (UUID) group_left() "
               f"({GPU_MEMORY_USED} + {GPU_MEMORY_FREE})", table=True)],
        transformations=[merge(), organize(
            {"UUID": "GPU", "device_id": "device", "numa_node": "NUMA node",
             "Value #A": "utilization", "Value #B": "memory used",
             "Value #C": "memory used share"},
            order=("UUID", "resource", "device_id", "numa_node", "namespace", "pod", "container",
                   "Value #A", "Value #B", "Value #C"))],
        units={"utilization": "percentunit", "memory used": "bytes",
               "memory used share": "percentunit"},
        colored={"utilization": ((None, "blue"), (0.5, "green"), (0.9, "orange"))},
        sort_by="utilization", links=POD_LINKS, height=8)
    by_numa = timeseries(
        "GPU utilization by NUMA node",
        "Mean utilization of the assigned GPUs local to each NUMA node." + about,
        [query("avg by (numa_node) (max by (numa_node, UUID) "
               f"({on_this_nodes_gpus(GPU_UTILIZATION)}))",
               "NUMA {{numa_node}}")],
        unit="percentunit")
    by_pod = timeseries(
        "GPU memory used by pod",
        "Framebuffer memory used on the GPUs each pod holds (each GPU once)." + about,
        [query("sum by (namespace, pod) (max by (namespace, pod, UUID) "
               f"({on_this_nodes_gpus(GPU_MEMORY_USED)}))",
               "{{namespace}}/{{pod}}")],
        unit="bytes")
    return [row("GPUs (dcgm-exporter)", collapsed_panels=[table_panel, by_numa, by_pod])]


def free_capacity() -> list:
    """What a new exclusive request could still get on each NUMA node, and the shapes' fit."""
    return [
        row("Free for new pods"),
        matrix_table("Free CPUs and devices per NUMA node",
                     "What a new exclusive request can still get on each NUMA node alone: CPUs, "
                     "whole-core CPUs (free CPUs whose SMT siblings are free too, what the "
                     "full-pcpus-only option needs) and devices (a device local to several NUMA "
                     "nodes counts on each; devices without locality under unknown).",
                     f"max by (numa_node, resource) (podresources_numa_free{{{NODE},"
                     f'resource!~"memory|{HUGEPAGES}"}}) or label_replace(max by (numa_node) '
                     f"(podresources_numa_free_full_cores{{{NODE}}}), "
                     '"resource", "whole-core CPUs", "", "")', "numa_node", "resource",
                     unit="short", steps=((None, "red"), (1, "green")), width=6),
        matrix_table("Free memory per NUMA node",
                     "Memory and hugepages a new Guaranteed pod can still get on each NUMA node "
                     "alone (memory spanning NUMA nodes apportioned over them: an estimate).",
                     f"max by (numa_node, resource) (podresources_numa_free{{{NODE},"
                     f'resource=~"memory|{HUGEPAGES}"}})', "numa_node", "resource",
                     unit="bytes", steps=((None, "red"), (1, "green")), width=6),
        matrix_table("Pod shapes: fit per NUMA node",
                     "Per shape of --fit-shapes: 1 where one pod of it fits on that NUMA node "
                     "alone now, 0 where not (the shortfall table says why).",
                     f"max by (shape, numa_node) (podresources_shape_fits{{{NODE}}})", "shape",
                     "numa_node", unit="none", steps=((None, "red"), (1, "green")), width=6),
        table("Pod shapes: shortfall",
              "Per shape, NUMA node and resource: how much the NUMA node lacks for one pod of "
              "the shape (0 when enough; memory in bytes).",
              [query(f"max by (shape, numa_node, resource) "
                     f"(podresources_shape_shortfall{{{NODE}}}) > 0", table=True)],
              transformations=[organize({"Value": "lacks"},
                                        order=("shape", "numa_node", "resource"))],
              sort_by="lacks", width=6, height=8),
        table("Pod shapes: admitted",
              "Per shape of --fit-shapes: would the kubelet, with the Topology Manager policy and "
              "scope in use (see Kubelet configuration), admit one more pod of it now; if not, "
              "what it would say (reason) and the resource no allowed NUMA set has enough of "
              "(blocking resource; multiple when several or only together). Capacity: how many "
              "more it would admit, one after another (at most 64); NUMA nodes needed: the "
              "fewest that together hold one pod now.",
              [query(f"max by (shape) (podresources_shape_admitted{{{NODE}}})", table=True),
               query(shape_verdicts(NODE, "shape"), table=True),
               query(f"max by (shape) (podresources_shape_capacity{{{NODE}}})", table=True),
               query(f"max by (shape) (podresources_shape_min_numa_nodes{{{NODE}}})",
                     table=True)],
              transformations=[merge(), organize(
                  {"Value #A": "admitted", "blocking_resource": "blocking resource",
                   "Value #C": "capacity", "Value #D": "NUMA nodes needed"},
                  hide=("Time", "Value #B"),
                  order=("shape", "Value #A", "reason", "blocking_resource", "Value #C",
                         "Value #D"))],
              colored={"admitted": ((None, "red"), (1, "green"))},
              mapped={"admitted": {"0": ("no", "red"), "1": ("yes", "green")}},
              width=12, height=8),
        stat("Kubelet configuration",
             "The Topology Manager policy and scope and the CPU and memory manager policies the "
             "fit answers use, and where they came from: flags, file (--kubelet-config), "
             "assumed, or a mix.",
             [query("max by (topology_manager_policy, topology_manager_scope, "
                    "cpu_manager_policy, memory_manager_policy, source) "
                    f"(podresources_kubelet_config_info{{{NODE}}})",
                    "topology {{topology_manager_policy}} / {{topology_manager_scope}} · CPU "
                    "{{cpu_manager_policy}} · memory {{memory_manager_policy}} · from "
                    "{{source}}", instant=True)],
             unit="none", text_mode=BigValueTextMode.NAME, width=6, height=8),
        stat("Exclusive CPUs the kubelet holds that List cannot show",
             "Per NUMA node: exclusive CPUs the kubelet's CPU manager has assigned "
             "(kubelet_cpu_manager_allocation_per_numa, from the kubelet's own /metrics, "
             "scraped by kubernetes-mixin's kubelet job and picked with the Kubelet variable) "
             "minus those the podresources List reports. Above 0: CPUs held by regular init "
             "containers (running or finished, not reused by the app containers), which List "
             "never shows, so free CPUs are overstated by that much. Empty without the "
             "kubelet's metrics.",
             [query("max by (numa_node) (kubelet_cpu_manager_allocation_per_numa"
                    f'{{{CLUSTER},instance="$kubelet"}}) - max by (numa_node) '
                    f"(podresources_cpus_allocated{{{NODE}}})", "NUMA {{numa_node}}",
                    instant=True)],
             steps=((None, "green"), (1, "orange")),
             text_mode=BigValueTextMode.VALUE_AND_NAME, width=6, height=8),
    ]


def shape_verdicts(selector: str, by: str) -> str:
    """Per shape (and ``by``): the reason and blocking resource of a rejection, or
    reason="admitted", blocking_resource="none" where the kubelet would admit it."""
    return (f"max by ({by}, reason, blocking_resource) "
            f"(podresources_shape_rejection_info{{{selector}}}) or "
            'label_replace(label_replace('
            f"max by ({by}) (podresources_shape_admitted{{{selector}}}) == 1, "
            '"reason", "admitted", "", ""), "blocking_resource", "none", "", "")')


def build() -> dict:
    variables = [
        datasource_variable(),
        cluster_variable(),
        query_variable("node", "Node", f"label_values(podresources_node_info{{{CLUSTER}}}, node)"),
        query_variable("numa_node", "NUMA node",
                       f"label_values(podresources_numa_node_cpus{{{NODE}}}, numa_node)",
                       multi=True),
        query_variable("namespace", "Namespace",
                       'label_values({__name__=~"podresources_(container_numa_nodes|device_info'
                       f'|dra_device_info|pod_cpus|pod_memory_bytes)",{NODE}}}, namespace)',
                       multi=True),
        query_variable("gpu", "GPUs", f"label_values({GPU_RECORD}{{{NODE}}}, UUID)",
                       multi=True, all_value=None,
                       description="The node's GPUs (their UUIDs), for the GPU row: "
                                   "dcgm-exporter's series are selected by UUID, so the row "
                                   "reads this node's GPUs only, however large the cluster."),
    ]
    variables.append(query_variable(
        "kubelet", "Kubelet target",
        f"label_values(kubelet_node_name{{{NODE}}}, instance)",
        description="The kubelet's own /metrics target of this node (kubernetes-mixin's kubelet "
                    "job), for the CPUs List cannot show; kubelet_node_name names the node."))
    panels = (at_a_glance() + utilization_bars() + free_capacity() + over_time() + holders()
              + gpus())
    return dashboard(TITLE, UID,
                     "Per-NUMA use of exclusive CPUs, memory, hugepages and devices on one node, "
                     "and the containers holding them.", variables, panels)
