"""The exclusive CPUs finished regular init containers still hold, inferred from pod context
when ``cpu_manager_state`` is not read (the chart mounts no state file by default).

The static CPU manager allocates every container's CPUs when the pod is admitted
(``policy_static.go`` ``Allocate``): a regular init container's CPUs join the pod's reusable
set, every later container (a sidecar too) takes its CPUs from the free and the reusable ones
and leaves the reusable set (``updateCPUsToReuse``), and whatever stays reusable the init
container keeps for the pod's whole life (SPEC 7.5) — in no ``List`` reply, still listed
allocatable. Pod context says what each container asked for; ``List`` says where the later
containers' CPUs went. From them, per admitted pod:

- **how many**: the CPUs are taken by ``takeByTopology`` from the same free set, one container
  after another within one admission, and on a node without SMT it takes them in one fixed
  order whatever the count, so a smaller request takes a part of a larger one: the reusable set
  is as large as the largest regular init container's request (a later init container reuses
  the earlier ones'), and each later container with exclusive CPUs takes its own count out of
  it, while some is left;
- **where**: every hint of a container after the init containers must hold the reusable CPUs
  (``generateCPUTopologyHints`` skips a mask missing one), so the NUMA node of the first such
  container's CPUs is theirs — when those CPUs sit on one NUMA node;
- **which CPUs**: the init container's own pick, ``takeByTopology`` over that NUMA node's CPUs
  free then (what is free now there, as the exporter sees it, and the CPUs its pod's later
  containers took back), of which the later containers took the first ones.

Where the kubelet's rules do not decide it — a pod whose later containers asked for no
exclusive CPUs (nothing shows where), whose CPUs span NUMA nodes, a node with SMT (a whole
core for a larger request, single threads for a smaller one: the counts no longer nest), a
Topology Manager policy that admits a hint wider than needed or none (``none``,
``best-effort``), the CPU manager options whose pick depends on the count
(``prefer-align-cpus-by-uncorecache`` takes a whole free cache for a request as large, a partly
used one for a smaller request; ``distribute-cpus-across-numa`` spreads a larger request over
NUMA nodes) — the answer keeps the ``no_cpu_manager_state`` assumption
(:attr:`InitCpus.decided`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...model import KubeletSnapshot, PodAssignment, Topology
from ...podcontext import ContainerContext, NodeContext, PodContext
from ..kubelet.config import Rules
from ..kubelet.cpumanager.policy_static import allocate_cpus
from ..kubelet.cpumanager.state import CpuManagerState
from ..kubelet.podshape import CPU, ContainerShape, PodShape, asks
from ..kubelet.topologymanager.policy_restricted import RESTRICTED
from ..kubelet.topologymanager.policy_single_numa_node import SINGLE_NUMA_NODE
from .checkpoints import CpuEntries, KubeletState
from .from_snapshot import cpu_base

# the Topology Manager policies under which the init container's CPUs lie on one NUMA node
# when the later containers' do: every admitted hint is preferred, the narrowest that fits.
# Under none the CPUs are taken with no hint (an init container's may span NUMA nodes, a
# smaller later container's need not), under best-effort a wider, not preferred hint may win.
ALIGNED_POLICIES = frozenset({SINGLE_NUMA_NODE, RESTRICTED})


@dataclass(frozen=True)
class InitCpus:
    """``cpu_manager_state``'s entries for the finished init containers' CPUs, as the kubelet's
    rules give them; ``decided``: every such pod's count and NUMA node follows from them."""

    cpus: CpuEntries
    decided: bool


def infer_init_cpus(snapshot: KubeletSnapshot, context: NodeContext, cpu: CpuManagerState,
                    rules: Rules) -> InitCpus:
    """``cpu``: the CPU manager's state as ``List`` shows it (hidden CPUs counted free)."""
    listed = {(p.namespace, p.name): p for p in snapshot.pods}
    free = set(cpu.free)
    entries: dict[str, dict[str, frozenset[int]]] = {}
    decided = True
    for pod in context.active():
        assignment = listed.get((pod.namespace, pod.name))
        if assignment is None or pod.rejected:
            continue  # not admitted yet: nothing allocated
        held = _pod_init_cpus(pod, assignment, cpu, free, rules)
        if held is None:
            decided = False
        elif held[1]:
            name, cpus = held
            entries[pod.uid] = {name: cpus}
            free -= cpus
    return InitCpus(entries, decided)


def with_inferred_init_cpus(kubelet: KubeletState | None, snapshot: KubeletSnapshot,
                            topology: Topology, context: NodeContext | None,
                            rules: Rules) -> KubeletState | None:
    """``kubelet`` (the state files read) with the CPU manager's init-container entries
    inferred, when its file was not read and pod context is there under CPU manager
    ``static``."""
    if (context is None or not rules.managers.cpu_static or snapshot.allocatable is None
            or (kubelet is not None and kubelet.cpus is not None)):
        return kubelet
    inferred = infer_init_cpus(snapshot, context, listed_cpu_state(snapshot, topology), rules)
    return replace(kubelet or KubeletState(), cpus=inferred.cpus, cpus_inferred=True,
                   cpus_decided=inferred.decided)


def _cpu_shape(pod: PodContext) -> PodShape:
    """The pod as the CPU manager's asks read it: each container's CPU request."""
    def container(c: ContainerContext) -> ContainerShape:
        cpu = c.requests.get(CPU, 0)
        return ContainerShape(c.name, {CPU: cpu} if cpu > 0 else {}, c.sidecar)
    return PodShape(f"{pod.namespace}/{pod.name}", tuple(container(c) for c in pod.containers),
                    tuple(container(c) for c in pod.init_containers), pod.qos,
                    pod.pod_level_resources)


def listed_cpu_state(snapshot: KubeletSnapshot, topology: Topology) -> CpuManagerState:
    """The CPU manager's state as ``List`` alone shows it: hidden CPUs counted free."""
    assert snapshot.allocatable is not None
    base = cpu_base(topology, snapshot.allocatable.cpu_ids)
    listed = {c for p in snapshot.pods for c in p.cpu_ids}
    listed.update(c for p in snapshot.pods for k in p.containers for c in k.cpu_ids)
    return replace(base, free=base.free - listed)


def _pod_init_cpus(pod: PodContext, assignment: PodAssignment, cpu: CpuManagerState,
                   free: set[int], rules: Rules) -> tuple[str, frozenset[int]] | None:
    """(the largest regular init container, the CPUs it still holds, empty when none); None
    when the kubelet's rules do not decide them."""
    shape = _cpu_shape(pod)
    listed: Mapping[str, tuple[int, ...]] = {c.name: c.cpu_ids for c in assignment.containers}
    reusable, holder = 0, ""
    taken_back: set[int] = set()
    where: frozenset[int] | None = None
    for container, regular_init in shape.in_admission_order():
        count = asks(shape, container, rules.managers).cpus
        if count == 0:
            continue
        if regular_init:
            if count > reusable:
                reusable, holder = count, container.name
            continue
        if reusable == 0:
            continue
        cpus = listed.get(container.name, ())
        if where is None:
            where = frozenset(cpu.cpu_numa[c] for c in cpus if c in cpu.cpu_numa)
        reused = min(count, reusable)
        taken_back.update(sorted(cpus)[:reused])
        reusable -= reused
    if reusable == 0:
        return holder, frozenset()
    options = rules.cpu_options()
    if (where is None or len(where) != 1 or cpu.threads_per_core != 1
            or rules.policy not in ALIGNED_POLICIES
            or options.prefer_align_by_uncore_cache or options.distribute_across_numa):
        return None
    node = next(iter(where))
    pool = frozenset(c for c in free if cpu.cpu_numa.get(c) == node)
    if len(pool) < reusable:
        return None
    # the init container's pick over what was free on the node then: what is free there now
    # (hidden CPUs look free) and what its pod's later containers took back
    chosen = allocate_cpus(cpu.cpu_topology(), pool | taken_back, reusable + len(taken_back),
                           frozenset({node}), options) - taken_back
    if len(chosen) != reusable or not chosen <= pool:
        chosen = allocate_cpus(cpu.cpu_topology(), pool, reusable, frozenset({node}), options)
    return holder, frozenset(chosen)
