"""Per-NUMA accounting of exclusive resources: plain data in, figures out, no I/O.

This package implements the data semantics of the product contract (SPEC section 2):

* every CPU, device and memory block is counted once, even where the kubelet reports it twice
  (pod-level ``cpu_ids``/``memory`` overlapping the containers', one device entry per NUMA node);
* an item local to several NUMA nodes is attributed once, to the group ``"0,1"``; an item of
  unknown locality to ``"unknown"``;
* utilization is per single NUMA node, capped at 1, with group memory apportioned in ascending
  node order (an estimate, documented as such); an assigned device counts only while
  ``GetAllocatableResources`` lists it (unhealthy or unregistered devices are counted apart, as
  unavailable, never as inconsistent data);
* alignment: how many NUMA nodes each container's exclusive resources need;
* inconsistent input is counted by kind and never stops the rest of the snapshot.

The work is split so that a refresh costs little when little changed:

* :mod:`.numa` — NUMA labels and groups, sysfs ids, the alignment search, memory apportioning;
* :mod:`.figures` — what one pod contributes (:func:`pod_figures`, computed once per distinct
  pod) and what ``GetAllocatableResources`` offers;
* :mod:`.ledger` — the node-wide aggregates (:class:`Ledger`) of CPUs, memory and devices,
  updated with the pods that changed, and :func:`account`, the same computation from scratch;
* :mod:`.dra` — DRA devices node-wide: what the ResourceSlices publish, and what the pods hold
  (:class:`~.dra.DraLedger`, kept by the ledger);
* :mod:`.dracpus` — exclusive CPUs a DRA CPU driver allocates (dra-driver-cpu), counted as
  CPUs: by id from the device's attribute, or by count from the pod's CPU request;
* :mod:`.utilization` — allocated over allocatable per single NUMA node, memory spanning
  nodes apportioned;
* :mod:`.listings` — a pod listed more than once, merged into one before the ledger counts it.
"""

from .dracpus import DEFAULT_CPU_DRIVERS
from .figures import AllocatableFigures, PodFigures, allocatable_figures, pod_figures
from .ledger import CPU_MANAGER, DRA, Accounting, CpuRequestSource, Ledger, account
from .numa import (
    CPU_RESOURCE,
    UNKNOWN,
    TopologyView,
    apportion_group_memory,
    group_label,
    label_ids,
    min_numa_nodes,
)

__all__ = [
    "CPU_MANAGER", "CPU_RESOURCE", "DEFAULT_CPU_DRIVERS", "DRA", "UNKNOWN", "Accounting",
    "AllocatableFigures", "CpuRequestSource", "Ledger", "PodFigures",
    "TopologyView", "account", "allocatable_figures", "apportion_group_memory", "group_label",
    "label_ids", "min_numa_nodes", "pod_figures",
]
