"""The CPU manager's policy options that change which CPUs are taken
(``cpumanager/policy_options.go`` ``StaticPolicyOptions``, v1.37.2):
``distribute-cpus-across-numa``, ``distribute-cpus-across-cores``, ``align-by-socket`` and
``full-pcpus-only``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuOptions:
    """The CPU manager policy options that change which CPUs are taken
    (``cpumanager/policy_options.go``)."""

    distribute_across_numa: bool = False
    distribute_across_cores: bool = False
    align_by_socket: bool = False
    full_pcpus_only: bool = False
