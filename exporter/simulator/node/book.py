"""The simulated kubelet's book of one node: the admitted pods, the pods refused at admission,
and the views the gRPC layer serves.

Every pod (a profile's, a generated one, one submitted at run time) is admitted as the kubelet
admits it, by the fit engine's rules (:mod:`.admitting`), under the node's kubelet
configuration (:mod:`.admissionconfig`); its resources are then booked in :mod:`.allocator`.
New pods for churn come from :mod:`.podmaker`.
"""

from __future__ import annotations

import random
import uuid

from ...fit.kubelet.managers_state import ManagersState
from ...model import Allocatable, DeviceEntry, MemoryBlock
from ..podobjects import rejected_pod_object
from ..profile import NodeSpec, PodSpec, ProfileError, SimDevice
from .admissionconfig import AdmissionConfig, check_runs, config_from_spec, updated_config
from .admitting import Admission, Admitter
from .allocator import Allocator, NoFit, SimPod
from .podmaker import PodMaker

PodKey = tuple[str, str]

__all__ = ["PodKey", "SimulatedNode"]


class SimulatedNode:
    """Admitted pods and free resources of one simulated node; ``version`` counts changes."""

    def __init__(self, spec: NodeSpec, seed: int | None = None):
        self.spec = spec
        # offset from the profile's own seed, which already named the devices
        self.rng = random.Random((spec.seed if seed is None else seed) + 7919)
        self.version = 0  # bumped on every change, so replies can be cached per version
        self.resources = Allocator(spec, self.rng)
        self.kubelet = Admitter(spec, self.resources)
        self._managers: tuple[tuple[int, frozenset[str]], ManagersState] | None = None
        self.maker = PodMaker(spec.generate, self.rng)
        self.pods: dict[PodKey, SimPod] = {}
        self.rejected: list[str] = []
        # pods refused at admission, as the Kubernetes API shows them (phase Failed)
        self.rejected_pods: dict[PodKey, dict[str, object]] = {}
        # what the kubelet admits under (POST /config changes it): the profile's configuration
        try:
            self.admission_config = config_from_spec(spec)
            check_runs(spec, self.admission_config)
        except ValueError as error:
            raise ProfileError(f"profile {spec.name}: {error}") from None
        for pod in spec.pods:
            result = self.admit(pod, self._config_of(pod))
            said = f"{result.reason}: {result.message}" if not result else "admits it"
            if pod.rejected_with and result.reason != pod.rejected_with:
                raise ProfileError(f"profile {spec.name}: pod {pod.namespace}/{pod.name} "
                                   f"says rejected_with {pod.rejected_with}; the kubelet {said}")
            if not result and not pod.rejected_with:
                raise ProfileError(f"profile {spec.name}: the kubelet rejects pod "
                                   f"{pod.namespace}/{pod.name}: {said}")
        if spec.generate:
            admitted = attempts = 0
            while admitted < spec.generate.count and attempts < 3 * spec.generate.count:
                attempts += 1
                admitted += bool(self.admit(self.make_pod(), remember=False))

    def _config_of(self, pod: PodSpec) -> AdmissionConfig:
        """The configuration ``pod`` was admitted under (``admitted_under``)."""
        try:
            config = updated_config(self.admission_config, pod.admitted_under)
            check_runs(self.spec, config)
        except ValueError as error:
            raise ProfileError(f"pod {pod.namespace}/{pod.name}: admitted_under: {error}") \
                from None
        return config

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

    def managers(self) -> ManagersState:
        """The kubelet's resource managers' state now, as the fit engine reads it."""
        token = (self.version, self.unregistered)
        if self._managers is None or self._managers[0] != token:
            held = [p for p in self.pods.values() if not p.released]
            self._managers = (token, self.kubelet.node_state(held))
        return self._managers[1]

    def admit(self, pod: PodSpec, config: AdmissionConfig | None = None,
              remember: bool = True) -> Admission:
        """Admit ``pod`` as the kubelet would under ``config`` (default: the node's own). An
        admitted pod is listed with what it got (a terminated one is freed at once, as the
        kubelet frees it; old kubelets still list it). A rejected one holds nothing and, with
        ``remember``, is kept as the API shows it (``rejected_pods``): phase ``Failed``,
        ``status.reason`` the kubelet's reason, ``status.message`` ``"Pod was rejected: "``
        and its message (``kubelet.go`` ``rejectPod``). A pod of the same name replaces a
        rejected one; one already admitted is a ProfileError."""
        key = (pod.namespace, pod.name)
        if key in self.pods:
            raise ProfileError(f"pod {pod.namespace}/{pod.name} already exists")
        self.rejected_pods.pop(key, None)
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.spec.name}/{pod.namespace}/{pod.name}/"
                                                 f"{self.version}"))
        result = self.kubelet.admit(pod, self.managers(), config or self.admission_config, uid)
        if not result or result.pod is None:
            self.rejected.append(f"{pod.namespace}/{pod.name}: {result.reason}")
            if remember:
                self.rejected_pods[key] = rejected_pod_object(
                    pod, result.reason or "", self.spec.name,
                    f"Pod was rejected: {result.message}")
                self.version += 1
            return result
        sim = result.pod
        self._prepare_claims(pod, sim)
        self.pods[key] = sim
        self.version += 1
        if result.after is not None:
            self._managers = ((self.version, self.unregistered), result.after)
        if not pod.active:
            # The kubelet frees a terminated pod's resources; old kubelets still list it.
            self.resources.release(sim)
            self.version += 1
        return result

    def _prepare_claims(self, pod: PodSpec, sim: SimPod) -> None:
        """DRA claims, prepared after admission and never aligned (SPEC section 7.2.1); a claim
        that cannot be served leaves the pod admitted holding none of it."""
        try:
            claims = self.resources.allocate_claims(pod, sim)
        except NoFit:
            return
        if not claims:
            return
        containers = tuple(
            type(c)(c.name, c.cpu_ids, c.memory, c.devices,
                    tuple(d for name in spec.claims for d in claims.get(name, ())))
            for c, spec in zip(sim.assignment.containers, [*pod.sidecars, *pod.containers],
                               strict=True))
        sim.assignment = type(sim.assignment)(pod.namespace, pod.name, containers,
                                              sim.assignment.cpu_ids, sim.assignment.memory)

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
            if self.admit(new, remember=False):
                added.append(f"{new.namespace}/{new.name}")
        return [f"{ns}/{n}" for ns, n in gone], added

    def make_pod(self) -> PodSpec:
        """A new pod from the profile's weighted templates (``generate`` section)."""
        return self.maker.make_pod()
