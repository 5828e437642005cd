"""Pods the simulator makes up: new ones from a profile's weighted templates, and renamed copies
for churn.
"""

from __future__ import annotations

import random
import string

from ..profile import GenerateSpec, PodSpec, ProfileError, parse_pod


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
}
