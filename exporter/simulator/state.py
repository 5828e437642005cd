"""The simulated kubelet's book of one node: the admitted pods, the pods refused at admission,
and the views the gRPC layer serves.

A profile's pods get their exclusive resources from :mod:`.allocator`; a pod that fits nowhere
is refused. Pods submitted at run time are admitted as the kubelet would admit them
(:mod:`.admitting`). New pods for churn come from
:mod:`.pods`.
"""

from __future__ import annotations

import random

from ..model import Allocatable, DeviceEntry, MemoryBlock, PodAssignment
from .admission import check_runs, config_from_spec, node_from_spec
from .allocator import Allocator, NoFit, SimPod
from .pods import PodMaker
from .profile import NodeSpec, PodSpec, ProfileError, SimDevice

PodKey = tuple[str, str]

__all__ = ["NodeState", "PodKey"]


class NodeState:
    """Admitted pods and free resources of one simulated node; ``version`` counts changes."""

    def __init__(self, spec: NodeSpec, seed: int | None = None):
        self.spec = spec
        # offset from the profile's own seed, which already named the devices
        self.rng = random.Random((spec.seed if seed is None else seed) + 7919)
        self.version = 0  # bumped on every change, so replies can be cached per version
        self.resources = Allocator(spec, self.rng)
        self.maker = PodMaker(spec.generate, self.rng)
        self.pods: dict[PodKey, SimPod] = {}
        self.rejected: list[str] = []
        # pods refused at admission, as the Kubernetes API shows them (phase Failed)
        self.rejected_pods: dict[PodKey, dict[str, object]] = {}
        # what POST /pods admits under (admitting.py): the profile's kubelet configuration
        try:
            self.admission_config = config_from_spec(spec)
            check_runs(node_from_spec(spec), self.admission_config)
        except ValueError as error:
            raise ProfileError(f"profile {spec.name}: {error}") from None
        for pod in spec.pods:
            if not self.admit(pod):
                raise ProfileError(f"profile {spec.name}: pod {pod.namespace}/{pod.name} "
                                   f"does not fit the node")
        if spec.generate:
            admitted = attempts = 0
            while admitted < spec.generate.count and attempts < 3 * spec.generate.count:
                attempts += 1
                admitted += self.admit(self.make_pod())

    # ---- the resource managers' state, as the server, wire and checkpoints read it --------

    @property
    def numa_ids(self) -> list[int]:
        return self.resources.numa_ids

    @property
    def cpu_numa(self) -> dict[int, int]:
        return self.resources.cpu_numa

    @property
    def free_cpus(self) -> dict[int, set[int]]:
        return self.resources.free_cpus

    @property
    def devices(self) -> list[SimDevice]:
        return self.resources.devices

    @property
    def unregistered(self) -> frozenset[str]:
        """Device resources whose plugin is not registered now (the server sets it)."""
        return self.resources.unregistered

    @unregistered.setter
    def unregistered(self, resources: frozenset[str]) -> None:
        self.resources.unregistered = resources

    # ---- views the gRPC layer serves -----------------------------------------------------

    @property
    def device_resources(self) -> list[str]:
        """The device-plugin resources of this node, in profile order."""
        return list(dict.fromkeys(d.resource for d in self.devices))

    def listed_pods(self, active_only: bool) -> list[SimPod]:
        """Pods as ``List`` sees them (SPEC section 2, fact 1): every active pod, Pending and
        terminating ones included; with ``active_only`` off (kubelets before 1.34, or
        ``KubeletPodResourcesListUseActivePods`` off) terminated pods too."""
        return [p for p in self.pods.values() if not active_only or p.spec.active]

    def allocatable(self) -> Allocatable:
        """``GetAllocatableResources`` (SPEC section 2, fact 5): healthy devices of registered
        plugins only, each with the topology it was registered with (an empty one yields no
        entry on the wire)."""
        memory: tuple[MemoryBlock, ...] = ()
        if self.spec.memory_manager_policy == "Static":
            memory = tuple(MemoryBlock(t, size, (n,))
                           for (n, t), size in sorted(self.resources.allocatable_memory.items()))
        return Allocatable(
            cpu_ids=tuple(sorted(self.resources.allocatable_cpus)),
            memory=memory,
            devices=tuple(DeviceEntry(d.resource, (d.device_id,), d.numa_ids)
                          for d in self.devices
                          if d.healthy and d.resource not in self.unregistered),
        )

    # ---- admission -----------------------------------------------------------------------

    def admit(self, pod: PodSpec) -> bool:
        """Assign exclusive resources to ``pod``; False (and nothing held) if it cannot fit."""
        key = (pod.namespace, pod.name)
        if key in self.pods:
            raise ProfileError(f"pod {pod.namespace}/{pod.name} defined twice")
        sim = SimPod(spec=pod, assignment=PodAssignment(pod.namespace, pod.name))
        try:
            self.resources.assign(pod, sim)
        except NoFit as reason:
            self.resources.release(sim)
            self.rejected.append(f"{pod.namespace}/{pod.name}: {reason}")
            return False
        self.pods[key] = sim
        if not pod.active:
            # The kubelet frees a terminated pod's resources; old kubelets still list it.
            self.resources.release(sim)
        self.version += 1
        return True

    def remove(self, namespace: str, name: str) -> bool:
        sim = self.pods.pop((namespace, name), None)
        if sim is None:
            return False
        self.resources.release(sim)
        self.version += 1
        return True

    def mark_unhealthy(self, device_id: str, healthy: bool = False) -> None:
        """Flip a device's health: unhealthy devices leave allocatable but stay assigned."""
        self.resources.set_health(
            device_id, healthy, lambda device: any(device in p.devices for p in self.pods.values()))
        self.version += 1

    def churn(self, count: int) -> tuple[list[str], list[str]]:
        """Delete ``count`` random pods and admit as many new ones; returns (gone, new)."""
        running = [k for k, p in self.pods.items() if p.spec.active]
        gone = self.rng.sample(running, min(count, len(running)))
        specs = []
        for namespace, name in gone:
            specs.append(self.pods[(namespace, name)].spec)
            self.remove(namespace, name)
        added = []
        for old in specs:
            new = self.make_pod() if self.maker.has_templates else self.maker.renamed(old)
            if self.admit(new):
                added.append(f"{new.namespace}/{new.name}")
        return [f"{ns}/{n}" for ns, n in gone], added

    def make_pod(self) -> PodSpec:
        """A new pod from the profile's weighted templates (``generate`` section)."""
        return self.maker.make_pod()
