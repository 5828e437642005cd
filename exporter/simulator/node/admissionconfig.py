"""The simulated kubelet's configuration for admission, in the kubelet config file's terms.

A profile names it (``topology_manager_policy``, ``..._scope``, ``..._policy_options``,
``cpu_manager_policy_options``, ``feature_gates``); ``POST /config`` changes it at run time with
the ``KubeletConfiguration`` keys (:func:`updated_config`); a profile pod may name the
configuration the kubelet had when it admitted that pod (``admitted_under``). Admission itself
is the fit engine's (:mod:`exporter.fit`): :meth:`AdmissionConfig.rules` is what it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...fit.kubelet.config import Managers, Rules
from ...fit.kubelet.cpumanager.policy_options import refused_options
from ..cpulayout import kubelet_topology
from ..profile import TOPOLOGY_MANAGER_POLICIES, TOPOLOGY_MANAGER_SCOPES, NodeSpec

POLICIES = TOPOLOGY_MANAGER_POLICIES
SCOPES = TOPOLOGY_MANAGER_SCOPES
# cpumanager/policy_options.go and topologymanager/policy_options.go: the options the simulated
# kubelet knows; strict-cpu-reservation changes no exclusive pick (it keeps the reserved CPUs
# out of the shared pool)
CPU_MANAGER_OPTIONS = ("full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket",
                       "distribute-cpus-across-cores", "strict-cpu-reservation",
                       "prefer-align-cpus-by-uncorecache")
TOPOLOGY_MANAGER_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
KNOWN_SETTINGS = ("topologyManagerPolicy", "topologyManagerScope", "cpuManagerPolicyOptions",
                  "topologyManagerPolicyOptions", "featureGates")
# the fit engine walks every subset of the NUMA nodes under a policy: beyond this many it is
# not run (a kubelet needs max-allowable-numa-nodes raised past 8 for it anyway)
MODELLED_NUMA_NODES = 16
_BOOL_OPTIONS = {"full-pcpus-only": "full_pcpus_only",
                 "distribute-cpus-across-numa": "distribute_cpus_across_numa",
                 "distribute-cpus-across-cores": "distribute_cpus_across_cores",
                 "align-by-socket": "align_by_socket",
                 "prefer-align-cpus-by-uncorecache": "prefer_align_by_uncore_cache",
                 "prefer-closest-numa-nodes": "prefer_closest_numa_nodes"}


@dataclass(frozen=True)
class AdmissionConfig:
    """The kubelet configuration admission depends on (kubelet defaults: policy ``none``,
    scope ``container``)."""

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    full_pcpus_only: bool = False
    prefer_closest_numa_nodes: bool = False
    pod_level_resource_managers: bool = False  # feature gate PodLevelResourceManagers
    max_allowable_numa_nodes: int = 8
    # the CPU manager options that change only which CPUs are picked
    distribute_cpus_across_numa: bool = False
    distribute_cpus_across_cores: bool = False
    align_by_socket: bool = False
    prefer_align_by_uncore_cache: bool = False

    def __post_init__(self) -> None:
        if self.topology_manager_policy not in POLICIES:
            raise ValueError(f"topologyManagerPolicy must be one of {', '.join(POLICIES)}, "
                             f"got {self.topology_manager_policy!r}")
        if self.topology_manager_scope not in SCOPES:
            raise ValueError(f"topologyManagerScope must be one of {', '.join(SCOPES)}, "
                             f"got {self.topology_manager_scope!r}")

    def rules(self, spec: NodeSpec) -> Rules:
        """The fit engine's rules for this configuration on the node ``spec`` describes."""
        return Rules(self.topology_manager_policy, self.topology_manager_scope,
                     self.full_pcpus_only, self.prefer_closest_numa_nodes,
                     Managers(spec.cpu_manager_policy == "static",
                              spec.memory_manager_policy == "Static",
                              self.pod_level_resource_managers),
                     self.distribute_cpus_across_numa, self.distribute_cpus_across_cores,
                     self.align_by_socket, self.prefer_align_by_uncore_cache)

    def document(self) -> dict[str, object]:
        """The configuration in the kubelet config file's terms (``GET /config``)."""
        cpu_options = {"full-pcpus-only": self.full_pcpus_only}
        cpu_options.update({name: True for name in ("distribute-cpus-across-numa",
                                                    "distribute-cpus-across-cores",
                                                    "align-by-socket",
                                                    "prefer-align-cpus-by-uncorecache")
                            if getattr(self, _BOOL_OPTIONS[name])})
        return {
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            "cpuManagerPolicyOptions": {k: str(v).lower() for k, v in cpu_options.items()},
            "topologyManagerPolicyOptions": {
                "prefer-closest-numa-nodes": str(self.prefer_closest_numa_nodes).lower()},
            "featureGates": {"PodLevelResourceManagers": self.pod_level_resource_managers},
        }


_TRUE_FALSE = {"true": True, "false": False}


def _option(value: object, name: str) -> bool:
    """A policy option's value: the kubelet config file writes ``"true"``/``"false"``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_FALSE:
        return _TRUE_FALSE[value.strip().lower()]
    raise ValueError(f"{name} must be \"true\" or \"false\", got {value!r}")


def updated_config(config: AdmissionConfig, changes: Mapping[str, object]) -> AdmissionConfig:
    """``config`` with the kubelet-config-style ``changes`` applied: ``topologyManagerPolicy``,
    ``topologyManagerScope``, ``cpuManagerPolicyOptions``, ``topologyManagerPolicyOptions``
    (maps of option name to ``"true"``/``"false"``) and ``featureGates``
    (``PodLevelResourceManagers``). Unknown keys, options or values raise ValueError."""
    unknown = sorted(set(changes) - set(KNOWN_SETTINGS))
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; known: "
                         f"{', '.join(sorted(KNOWN_SETTINGS))}")
    values: dict[str, object] = {}
    for key, field_name in (("topologyManagerPolicy", "topology_manager_policy"),
                            ("topologyManagerScope", "topology_manager_scope")):
        if key in changes:
            if not isinstance(changes[key], str):
                raise ValueError(f"{key} must be a string, got {changes[key]!r}")
            values[field_name] = changes[key]
    for key, allowed in (("cpuManagerPolicyOptions", CPU_MANAGER_OPTIONS),
                         ("topologyManagerPolicyOptions", TOPOLOGY_MANAGER_OPTIONS)):
        options = changes.get(key, {})
        if not isinstance(options, Mapping):
            raise ValueError(f"{key} must be an object of option names to \"true\"/\"false\"")
        for name, value in options.items():
            if name not in allowed:
                raise ValueError(f"unknown {key} option {name!r}; known: {', '.join(allowed)}")
            if name == "max-allowable-numa-nodes":
                if not str(value).isdigit() or int(str(value)) < 1:
                    raise ValueError(f"max-allowable-numa-nodes must be a whole number, "
                                     f"got {value!r}")
                values["max_allowable_numa_nodes"] = int(str(value))
                continue
            enabled = _option(value, name)
            if name in _BOOL_OPTIONS:
                values[_BOOL_OPTIONS[name]] = enabled
    gates = changes.get("featureGates", {})
    if not isinstance(gates, Mapping):
        raise ValueError("featureGates must be an object of gate names to true/false")
    if "PodLevelResourceManagers" in gates:
        values["pod_level_resource_managers"] = _option(gates["PodLevelResourceManagers"],
                                                        "PodLevelResourceManagers")
    return replace(config, **values)  # type: ignore[arg-type]


def config_from_spec(spec: NodeSpec) -> AdmissionConfig:
    """The admission configuration a simulator profile describes (the kubelet config file the
    simulator writes says the same)."""
    return updated_config(AdmissionConfig(), {
        "topologyManagerPolicy": spec.topology_manager_policy,
        "topologyManagerScope": spec.topology_manager_scope,
        "cpuManagerPolicyOptions": spec.cpu_manager_policy_options,
        "topologyManagerPolicyOptions": spec.topology_manager_policy_options,
        "featureGates": {"PodLevelResourceManagers":
                         spec.feature_gates.get("PodLevelResourceManagers", False)},
    })


def check_runs(spec: NodeSpec, config: AdmissionConfig) -> None:
    """ValueError when a kubelet with ``config`` does not start on the node ``spec``
    describes: CPU manager options it refuses together or on this machine
    (``policy_options.go``), or a Topology Manager policy other than ``none`` beyond
    ``max-allowable-numa-nodes`` NUMA nodes, CPU-less ones included (topologymanager
    ``NewManager``), or beyond what the fit engine walks."""
    numa_nodes = len(spec.numa_nodes)
    if spec.cpu_manager_policy == "static":
        machine = kubelet_topology(spec)
        refused = refused_options(config.rules(spec).cpu_options(), config.topology_manager_policy,
                                  len(set(machine.cpu_packages.values())),
                                  sum(1 for n in spec.numa_nodes if n.cpus))
        if refused is not None:
            raise ValueError(f"the kubelet does not start: {refused}")
    if config.topology_manager_policy == "none":
        return
    if numa_nodes > config.max_allowable_numa_nodes:
        raise ValueError(f"the kubelet does not start with topologyManagerPolicy "
                         f"{config.topology_manager_policy} on a machine with {numa_nodes} NUMA "
                         f"nodes (max-allowable-numa-nodes is "
                         f"{config.max_allowable_numa_nodes})")
    if numa_nodes > MODELLED_NUMA_NODES:
        raise ValueError(f"admission under a Topology Manager policy is modelled for at most "
                         f"{MODELLED_NUMA_NODES} NUMA nodes, not {numa_nodes}")
