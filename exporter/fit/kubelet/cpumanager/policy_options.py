"""The CPU manager's policy options (``cpumanager/policy_options.go`` ``StaticPolicyOptions``,
v1.34-v1.37) that change which CPUs are taken or which hints are preferred:
``full-pcpus-only``, ``distribute-cpus-across-numa``, ``distribute-cpus-across-cores``,
``align-by-socket``, ``prefer-align-cpus-by-uncorecache``. ``strict-cpu-reservation`` only
keeps the reserved CPUs out of the shared pool: the exclusive picks stay the same (the
available CPUs are the default set less the reserved ones either way, ``GetAvailableCPUs``).
"""

from __future__ import annotations

from dataclasses import dataclass

# takeByTopologyNUMADistributed weighs align-by-socket since 1.37 (before, it ignores it)
DISTRIBUTE_BY_SOCKET_MINOR = 37


@dataclass(frozen=True)
class CpuOptions:
    """The CPU manager policy options that change which CPUs are taken
    (``cpumanager/policy_options.go``); ``kubelet_minor``: the kubelet's release (``None``:
    the newest modelled)."""

    distribute_across_numa: bool = False
    distribute_across_cores: bool = False
    align_by_socket: bool = False
    full_pcpus_only: bool = False
    prefer_align_by_uncore_cache: bool = False
    kubelet_minor: int | None = None

    def distribute_by_socket(self) -> bool:
        """``takeByTopologyNUMADistributed``'s ``alignBySocket`` (1.37 on)."""
        return self.align_by_socket and (self.kubelet_minor is None
                                         or self.kubelet_minor >= DISTRIBUTE_BY_SOCKET_MINOR)


def refused_options(options: CpuOptions, policy: str, sockets: int, numa_nodes: int
                    ) -> str | None:
    """Why a kubelet with ``options`` does not start (``NewStaticPolicyOptions``,
    ``ValidateStaticPolicyOptions``), ``None`` when it does; ``policy``: the Topology Manager's,
    ``sockets`` and ``numa_nodes`` (with CPUs) the CPU manager's counts."""
    pairs = (("full-pcpus-only", options.full_pcpus_only),
             ("distribute-cpus-across-numa", options.distribute_across_numa),
             ("prefer-align-cpus-by-uncorecache", options.prefer_align_by_uncore_cache))
    for name, on in pairs:
        if on and options.distribute_across_cores:
            return (f"static policy options {name} and distribute-cpus-across-cores can not "
                    "be used at the same time")
    if options.prefer_align_by_uncore_cache and options.distribute_across_numa:
        return ("static policy options prefer-align-cpus-by-uncorecache and "
                "distribute-cpus-across-numa can not be used at the same time")
    if options.align_by_socket and policy == "single-numa-node":
        return ("Topolgy manager single-numa-node policy is incompatible with CPUManager "
                "align-by-socket policy option")
    if options.align_by_socket and sockets > numa_nodes:
        return ("Align by socket is not compatible with hardware where number of sockets are "
                "more than number of NUMA")
    return None
