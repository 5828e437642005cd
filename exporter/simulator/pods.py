"""Pods the simulator makes up: new ones from a profile's weighted templates, renamed copies for
churn, and a rejected pod as the API server shows it."""

from __future__ import annotations

import random
import string
import uuid

from .profile import ContainerSpec, GenerateSpec, PodSpec, ProfileError, parse_pod


class PodMaker:
    """New pods from the profile's ``generate`` section, numbered in order of making."""

    def __init__(self, generate: GenerateSpec | None, rng: random.Random):
        self.generate = generate
        self.rng = rng  # the node's: the pods follow the profile's seed
        self.count = 0

    @property
    def has_templates(self) -> bool:
        return bool(self.generate and self.generate.templates)

    def make_pod(self) -> PodSpec:
        """A new pod from the profile's weighted templates (``generate`` section)."""
        gen = self.generate
        if gen is None:
            raise ProfileError("profile has no templates to generate pods from")
        weights = [w for w, _ in gen.templates]
        template = self.rng.choices([t for _, t in gen.templates], weights=weights)[0]
        self.count += 1
        data = {k: v for k, v in template.items() if k != "weight"}
        data["namespace"] = template.get("namespace") or self.rng.choice(gen.namespaces)
        data["name"] = f"{template['name']}-{self.count}-{_suffix(self.rng)}"
        return parse_pod(data)

    def renamed(self, spec: PodSpec) -> PodSpec:
        """``spec`` again under a new random suffix (churn without templates)."""
        base = spec.name.rsplit("-", 1)[0] if spec.name.count("-") >= 2 else spec.name
        clone = PodSpec(**{k: getattr(spec, k) for k in spec.__dataclass_fields__})
        clone.name = f"{base}-{_suffix(self.rng)}"
        return clone


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase + string.digits, k=5))


_ADMISSION_MESSAGES = {
    "TopologyAffinityError": "Pod was rejected: Resources cannot be allocated with Topology "
                             "locality",
    "UnexpectedAdmissionError": "Pod was rejected: Allocate failed due to not enough free "
                                "resources",
}


def rejected_pod_object(pod: PodSpec, reason: str, node_name: str) -> dict[str, object]:
    """The pod as the API server shows it after the kubelet rejected it at admission:
    ``status.phase`` Failed, ``status.reason`` the admission reason, requests equal to limits
    for a Guaranteed pod."""

    def container(spec: ContainerSpec) -> dict[str, object]:
        amounts: dict[str, str] = {}
        if spec.cpus:
            amounts["cpu"] = str(spec.cpus) if spec.exclusive_cpus else f"{spec.cpus * 1000}m"
        amounts["memory"] = str(spec.memory.get("memory", 128 << 20))
        for memory_type, size in spec.memory.items():
            if memory_type != "memory":
                amounts[memory_type] = str(size)
        for resource, count in spec.devices.items():
            amounts[resource] = str(count)
        resources = {"limits": dict(amounts)}
        if pod.guaranteed:
            resources["requests"] = dict(amounts)
        return {"name": spec.name, "resources": resources}

    return {
        "metadata": {"namespace": pod.namespace, "name": pod.name,
                     "uid": str(uuid.uuid4())},
        "spec": {"nodeName": node_name,
                 "containers": [container(c) for c in pod.containers],
                 "initContainers": [{**container(c), "restartPolicy": "Always"}
                                    for c in pod.sidecars]},
        "status": {"phase": "Failed", "reason": reason,
                   "message": _ADMISSION_MESSAGES.get(reason, "Pod was rejected")},
    }
