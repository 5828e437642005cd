"""Every metric the exporter can expose: its name, type, help text and labels, written only here.

The renderers (``rendering``, ``health``, the Kubernetes-API view) take names, labels and help
from these definitions; ``docs/metrics.md`` is checked against ``CATALOG`` and against a live
``/metrics``. To add a metric, define it here in the section it belongs to (the order here is the
order of ``CATALOG`` and of the workload families on ``/metrics``) and add its row to the docs.

Help texts avoid double quotes: then gauges render byte-for-byte the same in the Prometheus text
format and in OpenMetrics, so one rendering serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "histogram"]
Group = Literal["node", "workload", "health", "kube-api", "fit"]


@dataclass(frozen=True)
class MetricDef:
    """One metric. ``group`` says when it is exposed: node and NUMA figures, workload figures
    (``--no-workload-metrics`` drops them), the exporter's health, the Kubernetes-API view
    (``--kube-api``), or the fit answers (shapes from ``--fit-shapes``; admission failures once
    the pod context, the kubelet's Pods API or ``--kube-api``, has shown a rejected pod). A
    counter's name carries ``_total``, as exposed."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()
    group: Group = "node"


_DEFINED: list[MetricDef] = []


def _define(name: str, type: MetricType, help: str, labels: tuple[str, ...] = (),
            group: Group = "node") -> MetricDef:
    metric = MetricDef(name, type, help, labels, group)
    _DEFINED.append(metric)
    return metric


# ---- node and NUMA level ----
NODE_INFO = _define(
    "podresources_node_info", "gauge",
    "Always 1; node is the Kubernetes node name, kubelet_api the podresources API version in "
    "use (v1, v1alpha1, or none before first contact).", ("node", "kubelet_api"))
NUMA_NODE_CPUS = _define(
    "podresources_numa_node_cpus", "gauge",
    "Online logical CPUs on the NUMA node, from sysfs.", ("numa_node",))
CPUS_ALLOCATABLE = _define(
    "podresources_cpus_allocatable", "gauge",
    "CPUs that can be assigned exclusively: the kubelet's CPU manager's (GetAllocatableResources; "
    "none under policy none) and those DRA CPU drivers publish (with the Kubernetes-API view).",
    ("numa_node",))
CPUS_ALLOCATED = _define(
    "podresources_cpus_allocated", "gauge",
    "Exclusive CPUs assigned to pods and containers, each CPU counted once, by the CPU manager "
    "or through DRA claims (podresources_cpu_allocator_info says which).", ("numa_node",))
CPU_ALLOCATOR_INFO = _define(
    "podresources_cpu_allocator_info", "gauge",
    "1 per allocator of this node's exclusive CPUs: cpu_manager (the kubelet's CPU manager, "
    "policy static; driver empty), or dra (a DRA CPU driver, named by driver, whose devices the "
    "node publishes or its containers hold).", ("allocator", "driver"))
MEMORY_ALLOCATABLE = _define(
    "podresources_memory_allocatable_bytes", "gauge",
    "Memory and hugepages the memory manager can assign (absent under memory manager policy "
    "None).", ("numa_node", "memory_type"))
MEMORY_ALLOCATED = _define(
    "podresources_memory_allocated_bytes", "gauge",
    "Memory and hugepages assigned by the memory manager; a block spanning NUMA nodes is "
    "attributed once to the group (numa_node 0,1).", ("numa_node", "memory_type"))
DEVICES_ALLOCATABLE = _define(
    "podresources_devices_allocatable", "gauge",
    "Healthy device-plugin devices (distinct ids); a device local to several NUMA nodes is "
    "attributed once to the group.", ("numa_node", "resource"))
DEVICES_ALLOCATED = _define(
    "podresources_devices_allocated", "gauge",
    "Device-plugin devices assigned to containers (distinct ids).", ("numa_node", "resource"))
DEVICES_ALLOCATED_UNAVAILABLE = _define(
    "podresources_devices_allocated_unavailable", "gauge",
    "Of the assigned devices, those GetAllocatableResources does not list: unhealthy, their "
    "plugin not registered (as just after a kubelet restart), or registered without NUMA nodes; "
    "they count toward no utilization.", ("numa_node", "resource"))
NUMA_UTILIZATION = _define(
    "podresources_numa_utilization_ratio", "gauge",
    "Allocated over allocatable per single NUMA node, capped at 1; resource is cpu, a memory "
    "type, a device resource, or a DRA driver (with the Kubernetes-API view). Memory spanning "
    "nodes is apportioned (an estimate).",
    ("numa_node", "resource"))
DRA_DEVICES_ALLOCATED = _define(
    "podresources_dra_devices_allocated", "gauge",
    "Distinct DRA devices prepared for containers; numa_node from the device's ResourceSlice "
    "(unknown without the Kubernetes-API view).", ("driver", "pool", "numa_node"))
DRA_DEVICE_SHARES = _define(
    "podresources_dra_device_shares", "gauge",
    "Allocations of shared (consumable) DRA devices, one per device and share_id.",
    ("driver", "pool", "numa_node"))
MISALIGNED_CONTAINERS = _define(
    "podresources_misaligned_containers", "gauge",
    "Containers whose exclusive CPUs, memory and devices need more than one NUMA node.")

# ---- workload level ----
CONTAINER_CPUS = _define(
    "podresources_container_cpus", "gauge",
    "Exclusive CPUs of a container, from the CPU manager or from DRA CPU devices (by the "
    "device's CPU id, or for a grouped device by the container's CPU request).",
    ("namespace", "pod", "container", "numa_node"), "workload")
CONTAINER_MEMORY = _define(
    "podresources_container_memory_bytes", "gauge",
    "Memory and hugepages assigned to a container by the memory manager.",
    ("namespace", "pod", "container", "numa_node", "memory_type"), "workload")
CONTAINER_DEVICES = _define(
    "podresources_container_devices", "gauge", "Device-plugin devices assigned to a container.",
    ("namespace", "pod", "container", "resource", "numa_node"), "workload")
CONTAINER_NUMA_NODES = _define(
    "podresources_container_numa_nodes", "gauge",
    "NUMA nodes the container's exclusive CPUs, memory and devices need (1 means aligned).",
    ("namespace", "pod", "container"), "workload")
POD_CPUS = _define(
    "podresources_pod_cpus", "gauge",
    "Pod-level exclusive CPUs (pod-level resource managers, Kubernetes 1.37 and later); they "
    "include the containers' own.", ("namespace", "pod", "numa_node"), "workload")
POD_MEMORY = _define(
    "podresources_pod_memory_bytes", "gauge",
    "Pod-level memory and hugepages (Kubernetes 1.37 and later).",
    ("namespace", "pod", "numa_node", "memory_type"), "workload")
DEVICE_INFO = _define(
    "podresources_device_info", "gauge",
    "1 per device assigned to a container, to join device metrics to pods.",
    ("resource", "device_id", "numa_node", "namespace", "pod", "container"), "workload")
# share_id, the last label, is present only on the series of shared devices
DRA_DEVICE_INFO = _define(
    "podresources_dra_device_info", "gauge",
    "1 per DRA device prepared for a container; share_id is set for shared devices.",
    ("driver", "pool", "device", "numa_node", "claim", "namespace", "pod", "container",
     "share_id"),
    "workload")

# ---- exporter health ----
UP = _define(
    "podresources_up", "gauge", "1 if the last refresh from the kubelet succeeded, else 0.",
    (), "health")
LAST_REFRESH = _define(
    "podresources_last_refresh_timestamp_seconds", "gauge",
    "Unix time of the last successful refresh (0 before the first one).", (), "health")
REFRESH_DURATION = _define(
    "podresources_refresh_duration_seconds", "histogram",
    "Duration of one refresh: kubelet calls, decoding, accounting and rendering.", (), "health")
API_REQUESTS = _define(
    "podresources_api_requests_total", "counter",
    "Calls to the kubelet podresources API by method and gRPC status code.",
    ("method", "code"), "health")
API_REQUEST_DURATION = _define(
    "podresources_api_request_duration_seconds", "histogram",
    "Duration of calls to the kubelet podresources API.", ("method",), "health")
BACKOFF = _define(
    "podresources_backoff_seconds", "gauge",
    "Current delay imposed by back-off after failed calls; 0 when healthy.", (), "health")
KUBELET_API_INFO = _define(
    "podresources_kubelet_api_info", "gauge",
    "What the kubelet supports, as detected: API version, GetAllocatableResources, Get, and "
    "pod-level resources (true, false or unknown).",
    ("api_version", "get_allocatable", "get", "pod_level"), "health")
PODS_SOURCE_INFO = _define(
    "podresources_pods_source_info", "gauge",
    "Always 1; source is where pod context (QoS, requests, init containers, admission "
    "rejections) comes from now: pods_api (the kubelet's local Pods API), kube_api (the "
    "Kubernetes-API view) or none; pods_api is the state of the Pods API: watching, starting, "
    "failing, absent (no socket) or off (--no-pods-api).", ("source", "pods_api"), "health")
DATA_ISSUES = _define(
    "podresources_data_issues_total", "counter",
    "Inconsistent items seen in kubelet data, by kind; the rest of each snapshot is still "
    "exported.", ("kind",), "health")
BUILD_INFO = _define(
    "podresources_build_info", "gauge",
    "Always 1; the exporter version, the source revision it was built from (unknown outside a "
    "release image) and the Python version running it.",
    ("version", "revision", "python_version"), "health")

# ---- the Kubernetes-API view (--kube-api) ----
EXTENDED_RESOURCE_CAPACITY = _define(
    "podresources_extended_resource_capacity", "gauge",
    "Node status.capacity of an extended resource (a domain-qualified resource name outside "
    "kubernetes.io, from a device plugin or a Node status patch).", ("resource",), "kube-api")
EXTENDED_RESOURCE_ALLOCATABLE = _define(
    "podresources_extended_resource_allocatable", "gauge",
    "Node status.allocatable of an extended resource.", ("resource",), "kube-api")
EXTENDED_RESOURCE_REQUESTED = _define(
    "podresources_extended_resource_requested", "gauge",
    "Effective requests of an extended resource summed over the pods bound to this node that "
    "have not terminated (init containers and sidecars by the Kubernetes rule, plus pod "
    "overhead).", ("resource",), "kube-api")
EXTENDED_RESOURCE_STALE = _define(
    "podresources_extended_resource_stale", "gauge",
    "1 when the node advertises the extended resource but no device plugin serves it: capacity "
    "0, or no healthy device in GetAllocatableResources and nothing requested; else 0.",
    ("resource",), "kube-api")
DRA_DEVICES_ALLOCATABLE = _define(
    "podresources_dra_devices_allocatable", "gauge",
    "Untainted devices published in the ResourceSlices of this node (spec.nodeName); only the "
    "newest generation of a pool counts.", ("driver", "pool", "numa_node"), "kube-api")
DRA_DEVICES_TAINTED = _define(
    "podresources_dra_devices_tainted", "gauge",
    "Published DRA devices carrying a taint with this effect, from their ResourceSlice or a "
    "DeviceTaintRule; NoSchedule and NoExecute keep a device out of allocatable.",
    ("driver", "pool", "numa_node", "effect"), "kube-api")
KUBE_API_UP = _define(
    "podresources_kube_api_up", "gauge",
    "1 if the last list or watch of the resource (node, pods, resourceslices, devicetaintrules) "
    "in the Kubernetes "
    "API succeeded, else 0.", ("resource",), "kube-api")
KUBE_API_ERRORS = _define(
    "podresources_kube_api_errors_total", "counter",
    "Failed list and watch attempts against the Kubernetes API, by resource.", ("resource",),
    "kube-api")

# ---- fit and explain: where does a pod still fit, why was it rejected ----
NUMA_FREE = _define(
    "podresources_numa_free", "gauge",
    "What a new single-NUMA request could still get on this NUMA node: allocatable, "
    "unassigned CPUs and devices (a device local to several nodes counted on each); a memory "
    "type's allocatable left after the node's blocks, 0 on a node holding part of a block "
    "that spans several NUMA nodes (the memory manager serves no single-node request there). "
    "CPUs, bytes or devices.", ("numa_node", "resource"))
NUMA_FREE_FULL_CORES = _define(
    "podresources_numa_free_full_cores", "gauge",
    "Free allocatable CPUs whose SMT siblings are all free and allocatable (whole free "
    "physical cores), counted in CPUs.", ("numa_node",))
KUBELET_CONFIG_INFO = _define(
    "podresources_kubelet_config_info", "gauge",
    "Always 1; the Topology Manager policy and scope and the CPU and memory manager policies "
    "the fit answers use, and where they came from: flags, file (--kubelet-config), assumed, "
    "or a mix joined by +.",
    ("topology_manager_policy", "topology_manager_scope", "cpu_manager_policy",
     "memory_manager_policy", "source"))
SHAPE_ADMITTED = _define(
    "podresources_shape_admitted", "gauge",
    "1 when the kubelet, with the Topology Manager policy, scope and options in use, would "
    "admit one more pod of the shape now, else 0.", ("shape",), "fit")
SHAPE_REJECTION_INFO = _define(
    "podresources_shape_rejection_info", "gauge",
    "1 while one more pod of the shape would be rejected: reason is what the kubelet would "
    "say (TopologyAffinityError, SMTAlignmentError, UnexpectedAdmissionError, "
    "OutOf<resource>; AdmissionStalled where its CPU manager would never finish), "
    "blocking_resource the resource no allowed NUMA set has enough of (multiple when several "
    "or only together).", ("shape", "reason", "blocking_resource"),
    "fit")
SHAPE_FITS = _define(
    "podresources_shape_fits", "gauge",
    "1 when the whole pod of the shape, every container of it, would be admitted on this NUMA "
    "node alone under the single-numa-node policy, else 0.", ("shape", "numa_node"), "fit")
SHAPE_SHORTFALL = _define(
    "podresources_shape_shortfall", "gauge",
    "How much of the resource this NUMA node lacks for the pod's effective request (0 when "
    "enough; the whole request for memory on a node of a multi-NUMA memory group): the why "
    "not.", ("shape", "numa_node", "resource"), "fit")
SHAPE_CAPACITY = _define(
    "podresources_shape_capacity", "gauge",
    "How many more pods of the shape the kubelet would admit now, one after another, each "
    "placed as the kubelet places it under the policy and scope in use, its requests counted "
    "by the kubelet's resource-fit predicate (pods, CPU, memory); at most 64 (meaning 64 or "
    "more), +Inf only when nothing bounds it.",
    ("shape",), "fit")
SHAPE_MIN_NUMA_NODES = _define(
    "podresources_shape_min_numa_nodes", "gauge",
    "The fewest NUMA nodes that together hold one pod of the shape now (what the best-effort "
    "policy aligns to); absent when it does not fit at all.", ("shape",), "fit")
SHAPE_ASSUMPTION_INFO = _define(
    "podresources_shape_assumption_info", "gauge",
    "1 per assumption the shape's answers rest on, because the exporter cannot see what the "
    "kubelet knows: no_cpu_manager_state (CPUs finished init containers hold taken as free), "
    "no_device_checkpoint (likewise devices), no_memory_manager_state (memory the init "
    "containers of pods not yet started hold taken as free), no_pod_context (other pods' "
    "requests taken from List), node_allocatable_derived (the Node's allocatable derived from "
    "sysfs and the kubelet's config file, or from GetAllocatableResources), cpus_from_dra (a "
    "DRA CPU driver allocates the exclusive CPUs: which CPUs and NUMA node the shape gets is "
    "the scheduler's DRA allocation), unseen_unhealthy_devices (no unhealthy device no "
    "container holds, which neither API names, decides where a device resource aligns).",
    ("shape", "assumption"), "fit")
ADMISSION_FAILURES = _define(
    "podresources_admission_failures_total", "counter",
    "Pods of this node rejected at admission for exclusive resources (seen through the "
    "kubelet's Pods API, or with --kube-api); "
    "blocking_resource is the resource no NUMA set the policy allows had enough of at the "
    "next refresh (cpu for SMTAlignmentError), multiple when several or only together, none "
    "when the pod would be admitted now.",
    ("reason", "blocking_resource"), "fit")
ADMISSION_FAILURE_INFO = _define(
    "podresources_admission_failure_info", "gauge",
    "1 per pod rejected at admission that the kubelet (its Pods API) or the Kubernetes API "
    "still holds.",
    ("namespace", "pod", "reason", "blocking_resource"), "fit")

CATALOG: tuple[MetricDef, ...] = tuple(_DEFINED)
HELP: dict[str, str] = {metric.name: metric.help for metric in CATALOG}
