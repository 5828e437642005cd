"""The kubelet's configuration for the fit answers: flags, then the config file, then what the
exporter assumes (SPEC 7.1).

The kubelet's ``KubeletConfiguration`` (``kubelet.config.k8s.io/v1beta1``, usually
``/var/lib/kubelet/config.yaml``, ``--kubelet-config``) says which Topology Manager policy and
scope decide admission, its options (``prefer-closest-numa-nodes``,
``max-allowable-numa-nodes``), the CPU and memory manager policies, the CPU manager's
``full-pcpus-only`` and ``align-by-socket`` (which change admission: the latter makes a hint as
wide as its sockets preferred), the options that only change which CPUs are picked
(``distribute-cpus-across-numa``, ``distribute-cpus-across-cores``,
``prefer-align-cpus-by-uncorecache``; ``strict-cpu-reservation`` changes neither),
``maxPods``, what it reserves (``reservedSystemCPUs``, ``systemReserved``, ``kubeReserved``,
``evictionHard``: the Node's allocatable, :mod:`exporter.fit.state.allocatable`) and the
``PodLevelResourceManagers`` feature gate. Fields the file leaves
out take the kubelet's defaults (policy ``none``, scope ``container``, CPU manager ``none``,
memory manager ``None``). The flags ``--topology-manager-policy``,
``--topology-manager-scope`` and ``--full-pcpus-only`` override the file. Without a file the
exporter assumes policy ``single-numa-node`` (``none`` beyond 8 NUMA nodes, where a kubelet with
a policy does not start), scope ``container``, CPU manager ``static`` when
``GetAllocatableResources`` lists CPUs and memory manager ``Static`` when it lists memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import FileStamp
from .kubelet.config import CONTAINER, SCOPES, Managers, Rules
from .kubelet.topologymanager.policy_none import NONE
from .kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from .kubelet.topologymanager.scope import POLICIES
from .state.allocatable import DEFAULT_RESERVATION, Reservation, ReservationError, parse_reservation

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_ACROSS_NUMA = "distribute-cpus-across-numa"
DISTRIBUTE_ACROSS_CORES = "distribute-cpus-across-cores"
ALIGN_BY_SOCKET = "align-by-socket"
PREFER_ALIGN_BY_UNCORE_CACHE = "prefer-align-cpus-by-uncorecache"
PREFER_CLOSEST = "prefer-closest-numa-nodes"
MAX_NUMA = "max-allowable-numa-nodes"
POD_LEVEL_GATE = "PodLevelResourceManagers"
KIND = "KubeletConfiguration"
DEFAULT_MAX_NUMA_NODES = 8
DEFAULT_MAX_PODS = 110  # KubeletConfiguration's default maxPods
FLAGS, FILE, ASSUMED = "flags", "file", "assumed"


class KubeletConfigError(ValueError):
    """The file cannot be read as a KubeletConfiguration; the message is one line."""


@dataclass(frozen=True)
class FileConfig:
    """What the kubelet's config file says, with the kubelet's defaults for what it omits."""

    topology_manager_policy: str = NONE
    topology_manager_scope: str = CONTAINER
    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"
    full_pcpus_only: bool = False
    prefer_closest_numa_nodes: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_NUMA_NODES
    pod_level_resource_managers: bool = False
    # the CPU manager options that change which CPUs are picked, and maxPods (None: omitted)
    distribute_cpus_across_numa: bool = False
    distribute_cpus_across_cores: bool = False
    align_by_socket: bool = False
    prefer_align_by_uncore_cache: bool = False
    max_pods: int | None = None
    # reservedSystemCPUs, systemReserved, kubeReserved, evictionHard: the Node's allocatable
    reservation: Reservation = DEFAULT_RESERVATION


@dataclass(frozen=True)
class FlagConfig:
    """The exporter's own flags for the kubelet's settings; ``None``: not given."""

    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None
    full_pcpus_only: bool = False


@dataclass(frozen=True)
class KubeletConfig:
    """The configuration in use, and where each part came from."""

    topology_manager_policy: str
    topology_manager_scope: str
    cpu_manager_policy: str
    memory_manager_policy: str
    full_pcpus_only: bool
    prefer_closest_numa_nodes: bool
    pod_level_resource_managers: bool
    source: str
    # distribute over NUMA nodes, over cores, align by socket, by uncore cache
    cpu_placement: tuple[bool, bool, bool, bool] = (False, False, False, False)
    max_pods: int | None = None
    reservation: Reservation | None = None  # the file's (None: no file)

    def labels(self) -> tuple[str, str, str, str, str]:
        """Label values of ``podresources_kubelet_config_info``, in catalog order."""
        return (self.topology_manager_policy, self.topology_manager_scope,
                self.cpu_manager_policy, self.memory_manager_policy, self.source)

    def rules(self) -> Rules:
        return Rules(self.topology_manager_policy, self.topology_manager_scope,
                     self.full_pcpus_only, self.prefer_closest_numa_nodes,
                     Managers(self.cpu_manager_policy == "static",
                              self.memory_manager_policy == "Static",
                              self.pod_level_resource_managers), *self.cpu_placement)


def resolve(flags: FlagConfig, file: FileConfig | None, lists_cpus: bool, lists_memory: bool,
            numa_nodes: int) -> KubeletConfig:
    """Flags, then the file, then the assumptions; ``source`` names what was used."""
    used: list[str] = []

    def note(source: str) -> None:
        if source not in used:
            used.append(source)

    def first(flag: str | None, from_file: str | None, assumed: str) -> str:
        """The flag's value, else the file's, else the assumption, noting which was used."""
        if flag is not None:
            note(FLAGS)
            return flag
        if from_file is not None:
            note(FILE)
            return from_file
        note(ASSUMED)
        return assumed

    policy = first(flags.topology_manager_policy,
                   file.topology_manager_policy if file is not None else None,
                   SINGLE_NUMA_NODE if numa_nodes <= DEFAULT_MAX_NUMA_NODES else NONE)
    scope = first(flags.topology_manager_scope,
                  file.topology_manager_scope if file is not None else None, CONTAINER)
    if file is not None:
        cpu_policy, memory_policy = file.cpu_manager_policy, file.memory_manager_policy
        note(FILE)
    else:
        cpu_policy = "static" if lists_cpus else "none"
        memory_policy = "Static" if lists_memory else "None"
        note(ASSUMED)
    full = flags.full_pcpus_only or (file is not None and file.full_pcpus_only)
    if flags.full_pcpus_only:
        note(FLAGS)
    closest = file.prefer_closest_numa_nodes if file is not None else False
    gate = file.pod_level_resource_managers if file is not None else False
    placement = ((file.distribute_cpus_across_numa, file.distribute_cpus_across_cores,
                  file.align_by_socket, file.prefer_align_by_uncore_cache)
                 if file is not None else (False, False, False, False))
    # maxPods: the file's, the kubelet's default when the file omits it, unknown without one
    max_pods = None if file is None else (
        file.max_pods if file.max_pods is not None else DEFAULT_MAX_PODS)
    return KubeletConfig(policy, scope, cpu_policy, memory_policy, full, closest, gate,
                         "+".join(sorted(used, key=(FLAGS, FILE, ASSUMED).index)), placement,
                         max_pods, file.reservation if file is not None else None)


# ---- the file --------------------------------------------------------------------------------

def _text(config: Mapping[str, Any], key: str, default: str) -> str:
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise KubeletConfigError(f"{key} must be a string, got {value!r}")
    return value


def _options(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    options = document.get(key) or {}
    if not isinstance(options, Mapping):
        raise KubeletConfigError(f"{key} must be a map")
    return options


def _true(options: Mapping[str, Any], key: str, where: str) -> bool:
    value = str(options.get(key, "false")).strip().lower()
    if value not in ("true", "false"):
        raise KubeletConfigError(f"{where}.{key} must be true or false, got {options.get(key)!r}")
    return value == "true"


def parse_kubelet_config(document: object) -> FileConfig:
    """A loaded KubeletConfiguration document, with the kubelet's defaults for what it omits."""
    if not isinstance(document, dict):
        raise KubeletConfigError("not a KubeletConfiguration (expected a YAML map)")
    kind = document.get("kind")
    if kind is not None and kind != KIND:
        raise KubeletConfigError(f"kind is {kind!r}, expected {KIND}")
    policy = _text(document, "topologyManagerPolicy", NONE)
    if policy not in POLICIES:
        raise KubeletConfigError(f"topologyManagerPolicy {policy!r} is not one of "
                                 f"{', '.join(POLICIES)}")
    scope = _text(document, "topologyManagerScope", CONTAINER)
    if scope not in SCOPES:
        raise KubeletConfigError(f"topologyManagerScope {scope!r} is not one of "
                                 f"{', '.join(SCOPES)}")
    cpu_options = _options(document, "cpuManagerPolicyOptions")
    topology_options = _options(document, "topologyManagerPolicyOptions")
    gates = _options(document, "featureGates")
    gate = gates.get(POD_LEVEL_GATE, False)
    if not isinstance(gate, bool):
        raise KubeletConfigError(f"featureGates.{POD_LEVEL_GATE} must be true or false")
    try:
        reservation = parse_reservation(document)
    except ReservationError as error:
        raise KubeletConfigError(str(error)) from None
    try:
        max_numa = int(str(topology_options.get(MAX_NUMA, DEFAULT_MAX_NUMA_NODES)))
    except ValueError:
        raise KubeletConfigError(f"topologyManagerPolicyOptions.{MAX_NUMA} must be a number, got "
                                 f"{topology_options.get(MAX_NUMA)!r}") from None
    return FileConfig(
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        cpu_manager_policy=_text(document, "cpuManagerPolicy", "none"),
        memory_manager_policy=_text(document, "memoryManagerPolicy", "None"),
        full_pcpus_only=_true(cpu_options, FULL_PCPUS_ONLY, "cpuManagerPolicyOptions"),
        prefer_closest_numa_nodes=_true(topology_options, PREFER_CLOSEST,
                                        "topologyManagerPolicyOptions"),
        max_allowable_numa_nodes=max_numa,
        pod_level_resource_managers=gate,
        distribute_cpus_across_numa=_true(cpu_options, DISTRIBUTE_ACROSS_NUMA,
                                          "cpuManagerPolicyOptions"),
        distribute_cpus_across_cores=_true(cpu_options, DISTRIBUTE_ACROSS_CORES,
                                           "cpuManagerPolicyOptions"),
        align_by_socket=_true(cpu_options, ALIGN_BY_SOCKET, "cpuManagerPolicyOptions"),
        prefer_align_by_uncore_cache=_true(cpu_options, PREFER_ALIGN_BY_UNCORE_CACHE,
                                           "cpuManagerPolicyOptions"),
        max_pods=_max_pods(document),
        reservation=reservation,
    )


def _max_pods(document: Mapping[str, Any]) -> int | None:
    value = document.get("maxPods")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise KubeletConfigError(f"maxPods must be a whole number, got {value!r}")
    return int(value)


def load_kubelet_config(path: str | Path) -> FileConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise KubeletConfigError(
            f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    import yaml  # only with --kubelet-config

    try:
        # libyaml's loader where PyYAML has it: a config file is read at start and again
        # whenever it changes (20 ms of pure-Python parsing for a 1 KiB file)
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise KubeletConfigError(f"{path}: not valid YAML ({getattr(error, 'problem', '')})") \
            from None
    try:
        return parse_kubelet_config(document)
    except KubeletConfigError as error:
        raise KubeletConfigError(f"{path}: {error}") from None


class KubeletConfigFile:
    """The file, re-read when it changes (a kubelet reconfigured and restarted); a bad new
    version keeps the last good reading."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._stamp = FileStamp(self.path)
        self.config = load_kubelet_config(self.path)
        self.problem: str | None = None

    def current(self) -> FileConfig:
        if self._stamp.changed():
            try:
                self.config = load_kubelet_config(self.path)
                self.problem = None
            except KubeletConfigError as error:
                self.problem = str(error)
        return self.config
