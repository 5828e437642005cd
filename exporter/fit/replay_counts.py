"""What :mod:`exporter.fit.replay` works on: the NUMA nodes' free amounts it reads and takes
(:class:`Free`, :func:`free_of`), and what each copy of a shape asks, one :class:`Step` per
placement decision (a container, the pod under scope ``pod``, or a regular init container
with the app container it pins; :func:`steps_of`, None for the shapes the replay does not
model).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .kubelet.config import Rules
from .kubelet.devicemanager.manager import DeviceState
from .kubelet.managers_state import ManagersState
from .kubelet.memorymanager.state import MemoryNode
from .kubelet.podshape import Ask, PodShape, asks, pod_effective_ask, pod_scope_hint_ask
from .kubelet.topologymanager.policy_none import NONE

POD_SCOPE = "pod"
ANY = -1  # policy none: CPUs are counted node-wide


@dataclass
class Free:
    """What the copies read and take, per NUMA node: free CPUs (under policy ``none`` one
    node-wide count, under key -1), CPUs in whole free cores outside reserved ones
    (``full-pcpus-only``), free memory per asked type, the asked device resources."""

    cpus: dict[int, int]
    cores: dict[int, int] | None
    reserved: dict[int, int]  # free CPUs of reserved cores, which full-pcpus-only leaves out
    memory: dict[int, MemoryNode]  # every node's, as the memory manager holds them
    devices: dict[str, DeviceState]

    def key(self) -> tuple[object, ...]:
        return (tuple(sorted(self.cpus.items())),
                tuple(sorted(self.cores.items())) if self.cores is not None else None,
                tuple((n, tuple(sorted(m.free.items())), m.group, m.assignments)
                      for n, m in sorted(self.memory.items())),
                tuple((r, tuple(sorted(d.free.items()))) for r, d in sorted(self.devices.items())))

    def alone(self, numa_id: int) -> Free:
        """Nothing free outside ``numa_id`` (:func:`~exporter.fit.capacity.restrict`)."""
        def only(counts: dict[int, int]) -> dict[int, int]:
            return {n: c for n, c in counts.items() if n == numa_id}
        devices = {r: d if not d.topology_aware() else replace(d, free={
            numa: count for numa, count in d.free.items() if not numa or numa_id in numa})
            for r, d in self.devices.items()}
        memory = {n: m if n == numa_id else replace(m, free={})
                  for n, m in self.memory.items()}
        return Free(only(self.cpus), only(self.cores) if self.cores is not None else None,
                    only(self.reserved), memory, devices)


def free_of(state: ManagersState, wanted: Ask, rules: Rules) -> Free:
    """The counts of ``state`` the replay reads, for the resources in ``wanted``."""
    cpus: dict[int, int] = {}
    cores: dict[int, int] | None = None
    reserved: dict[int, int] = {}
    cpu = state.cpu
    if cpu is not None and wanted.cpus:
        if rules.policy == NONE:
            cpus = {ANY: len(cpu.free)}
        else:
            cpus = {n: cpu.free_per_node().get(n, 0) for n in state.numa_ids}
        if rules.full_pcpus_only:
            cores, reserved = dict.fromkeys(cpus, 0), dict.fromkeys(cpus, 0)
            for c in cpu.free:
                node = ANY if rules.policy == NONE else cpu.cpu_numa.get(c)
                if node not in cores:
                    continue
                if c in cpu.reserved_cores:
                    reserved[node] += 1
                elif cpu.core_of(c) <= cpu.free:
                    cores[node] += 1
    memory: dict[int, MemoryNode] = {}
    if state.memory is not None and wanted.memory:
        memory = {n: replace(node, free={t: node.free.get(t, 0) for t in wanted.memory})
                  for n, node in state.memory.items()}
    devices = {r: state.devices[r] for r in wanted.devices if r in state.devices}
    return Free(cpus, cores, reserved, memory, devices)


@dataclass(frozen=True)
class Step:
    """One placement decision of a copy: it goes to the lowest node holding ``hint``, and is
    admitted there when the node holds ``need`` too, which it then takes. The two differ for a
    pod whose app container reuses an init container's CPUs or devices (pinned to its node:
    ``hint`` the init container's request, ``need`` the pod's effective one)."""

    hint: Ask
    need: Ask
    allocations: int = 1  # containers whose memory it allocates: each counts an assignment


def wanted_of(steps: list[Step]) -> Ask:
    """Every resource any step asks (the CPUs as the most one step takes)."""
    memory: dict[str, int] = {}
    devices: dict[str, int] = {}
    for step in steps:
        for ask in (step.hint, step.need):
            memory.update(dict.fromkeys(ask.memory, 1))
            devices.update(dict.fromkeys(ask.devices, 1))
    return Ask(max((s.need.cpus for s in steps), default=0), memory, devices)


def same_ask(a: Ask, b: Ask) -> bool:
    return (a.cpus, dict(a.memory), dict(a.devices)) == (b.cpus, dict(b.memory), dict(b.devices))


def steps_of(shape: PodShape, rules: Rules) -> list[Step] | None:
    """What each copy asks, one :class:`Step` per placement decision: each container with an
    exclusive request in admission order (scope ``container``, policy ``none``), or the pod
    (scope ``pod``); a regular init container and the one app container it pins to its node
    (they reuse its CPUs or devices) as one step. None when the replay does not model the
    shape: other init containers (what their reusable resources leave depends on which CPUs
    were picked, and the next app container may go elsewhere once they are used up), the CPU
    options that pick CPUs another way."""
    if (rules.distribute_cpus_across_numa or rules.distribute_cpus_across_cores
            or rules.align_by_socket or rules.prefer_align_by_uncore_cache):
        return None
    managers = rules.managers
    effective = pod_effective_ask(shape, managers)
    if rules.policy != NONE and rules.scope == POD_SCOPE:
        hint = pod_scope_hint_ask(shape, managers)
        if hint.hint_devices or not same_ask(hint, effective):
            return None
        if not shape.init_containers:
            taken = [asks(shape, c, managers) for c in shape.containers]
            total = Ask(sum(a.cpus for a in taken), _summed(a.memory for a in taken),
                        _summed(a.devices for a in taken))
            if not same_ask(hint, total):
                return None
        elif rules.full_pcpus_only or any(c.sidecar for c in shape.init_containers):
            return None  # each container's whole-core check sees only the CPUs still free
        with_memory = sum(1 for c, _ in shape.in_admission_order()
                          if asks(shape, c, managers).memory)
        return [] if hint.is_empty() else [Step(hint, hint, max(with_memory, 1))]
    ordered = [(asks(shape, c, managers), regular_init)
               for c, regular_init in shape.in_admission_order()]
    if any(ask.hint_devices for ask, _ in ordered):
        return None
    ordered = [(ask, regular_init) for ask, regular_init in ordered if not ask.is_empty()]
    inits = [ask for ask, regular_init in ordered if regular_init]
    if not inits:
        return [Step(ask, ask) for ask, _ in ordered]
    # one regular init container first, and every app container it pins: one step
    if (rules.policy == NONE or len(inits) > 1 or not ordered[0][1] or rules.full_pcpus_only
            or any(c.sidecar for c in shape.init_containers)):
        return None
    init = inits[0]
    # one app container, pinned: with more, the first may use up what the init container left
    # reusable and the next go to a node of its own
    if len(ordered) != 2 or not _pins(init, ordered[1][0]):
        return None
    return [Step(init, effective, max(sum(1 for ask, _ in ordered if ask.memory), 1))]


def _pins(init: Ask, app: Ask) -> bool:
    """The app container must contain the init container's reusable CPUs or devices
    (``scope_container``'s pinning): it shares CPUs, or a device resource, with it."""
    return bool((init.cpus and app.cpus) or any(init.devices.get(r) for r in app.devices))


def _summed(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total
