"""The kubelet configuration admission depends on (``pkg/kubelet/apis/config/types.go``
``KubeletConfiguration``, v1.37.2), as :class:`Rules`: the Topology Manager's policy and scope
and its options, the CPU manager's options, and which managers assign exclusive resources
(:class:`Managers`: CPU manager ``static``, memory manager ``Static``, the
``PodLevelResourceManagers`` feature gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cpumanager.policy_options import CpuOptions
from .topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE

CONTAINER, POD = "container", "pod"
SCOPES = (CONTAINER, POD)


@dataclass(frozen=True)
class Managers:
    """Which resource managers assign exclusive resources on this kubelet."""

    cpu_static: bool = True
    memory_static: bool = True
    pod_level_resource_managers: bool = False


@dataclass(frozen=True)
class Rules:
    """The kubelet configuration admission depends on."""

    policy: str = SINGLE_NUMA_NODE
    scope: str = CONTAINER
    full_pcpus_only: bool = False
    prefer_closest_numa_nodes: bool = False
    managers: Managers = field(default_factory=Managers)
    # CPU manager options that change which CPUs are picked (cpumanager/policy_options.go)
    distribute_cpus_across_numa: bool = False
    distribute_cpus_across_cores: bool = False
    align_by_socket: bool = False
    prefer_align_by_uncore_cache: bool = False

    def cpu_options(self) -> CpuOptions:
        return CpuOptions(self.distribute_cpus_across_numa, self.distribute_cpus_across_cores,
                          self.align_by_socket, self.full_pcpus_only,
                          self.prefer_align_by_uncore_cache)
