"""The steps of a differential sequence: what happens to a node between two questions, drawn
at random and applied to the real kubelet.

A sequence's node and shapes are drawn as a case's are (:mod:`.cases`), from
``random.Random(f"seq:{seed}:{index}")``; its steps are drawn one at a time from the same
generator, among those that can happen to the node as it is then (a pod the kubelet rejected
is never started), so the kubelet's own answers steer the draw and a sequence is rebuilt from
its two numbers on the same release. Each step is one of:

- ``admit``: a new pod, then left Pending, started whole, or started up to its first regular
  init container (which keeps running until a ``finish``);
- ``start``: a Pending pod started whole (init containers in order, each regular one
  finishing, then the app containers);
- ``finish``: the running regular init container finishes (``PostStopContainer``);
- ``resume``: after that, the pod's other containers start;
- ``end``: a running pod ends (``Succeeded`` or ``Failed``, as the pod workers report);
- ``remove``: a pod is deleted;
- ``health``: a device turns unhealthy or healthy again (its plugin's ``ListAndWatch``);
- ``restart``: the kubelet restarts on its root directory (tests/realkubelet/restart.go), its
  device plugins registering again at once or, one time in four, only at a later ``plugins``
  step.

Every sequence restarts the kubelet at least once, unless its node never allows it: with
``strict-cpu-reservation`` and every unreserved CPU assigned exclusively, the CPU manager's
default set is empty, and a restarted kubelet refuses to start (:func:`restart_refused`); a
restart drawn then is not taken, and counted.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..realkubelet import RealKubelet
from .cases import PodDraw, _node as draw_node, _pod as draw_pod

STEPS = 20
NAMESPACE = "default"
# relative weights of the steps, among those possible at the time
WEIGHTS = {"admit": 4.0, "start": 2.0, "finish": 2.0, "resume": 2.0, "end": 1.0,
           "remove": 1.5, "health": 1.0, "restart": 0.3, "plugins": 6.0}
PLUGINS_LATE = 0.25
# an admission the real kubelet takes longer than this for stops the sequence (sequences.py)
SLOW_ADMISSION_SECONDS = 10.0


@dataclass
class PodLife:
    """One pod of the sequence and where it is in its life."""

    draw: PodDraw
    state: str  # pending, init (its first regular init container runs), init-done, running,
    #             rejected, ended
    started: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.draw.name

    def containers(self, kind: str | None = None) -> list[str]:
        return [c.name for c in self.draw.containers if kind is None or c.kind == kind]


@dataclass(frozen=True)
class Step:
    op: str
    pod: str = ""
    detail: str = ""  # what happened: the kubelet's verdict, the device, the container

    def describe(self) -> str:
        return " ".join(part for part in (self.op, self.pod, self.detail) if part)


@dataclass
class Sequence:
    """A node, its shapes, and the steps taken so far."""

    seed: int
    index: int
    profile: dict[str, Any]
    shapes: tuple[PodDraw, ...]
    rng: random.Random
    pods: dict[str, PodLife] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    devices: dict[tuple[str, str], bool] = field(default_factory=dict)  # health now
    plugins_late: bool = False  # a restart left the plugins unregistered
    restarts: int = 0
    refused_restarts: int = 0  # restarts drawn while the kubelet would refuse to start
    # where the release serves no Pods API: a new pod as the API server stores it (its UID
    # the server's), created there before the kubelet admits it, as on a cluster
    create: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    _next_pod: int = 0

    @property
    def resources(self) -> list[str]:
        return sorted({d["resource"] for d in self.profile.get("devices", [])})

    @property
    def hugepage_types(self) -> list[str]:
        return sorted({f"hugepages-{size}" for n in self.profile["numa_nodes"]
                       for size in n.get("hugepages", {})})


def draw_sequence(seed: int, index: int) -> Sequence:
    """The node and the shapes; the steps come with :func:`take_step`."""
    rng = random.Random(f"seq:{seed}:{index}")
    profile = draw_node(rng)
    profile["name"] = "sequence"
    shapes = tuple(draw_pod(rng, f"shape-{i}", [d["resource"] for d in
                                                 profile.get("devices", [])],
                            sorted({f"hugepages-{size}" for n in profile["numa_nodes"]
                                    for size in n.get("hugepages", {})}),
                            profile, start=False)
                   for i in range(rng.choice((1, 1, 2))))
    return Sequence(seed, index, profile, shapes, rng)


def set_devices(sequence: Sequence, description: dict[str, Any]) -> None:
    """The node's devices and their health as the component was reset with them."""
    sequence.devices = {(d["resource"], d["id"]): d["healthy"] for d in description["devices"]}


def possible(sequence: Sequence) -> dict[str, list[Any]]:
    """Each step that can happen now, with what it can happen to."""
    lives = list(sequence.pods.values())
    options: dict[str, list[Any]] = {
        "admit": [None],
        "start": [p for p in lives if p.state == "pending"],
        "finish": [p for p in lives if p.state == "init"],
        "resume": [p for p in lives if p.state == "init-done"],
        "end": [p for p in lives if p.state == "running"],
        "remove": lives,
        "health": [] if sequence.plugins_late else sorted(sequence.devices),
        "restart": [] if sequence.plugins_late else [None],
        "plugins": [None] if sequence.plugins_late else [],
    }
    return {op: targets for op, targets in options.items() if targets}


def take_step(kubelet: RealKubelet, sequence: Sequence, remaining: int) -> Step:
    """Draw the next step, apply it to the kubelet, and note it (``remaining``: steps left
    after this one, so that every sequence restarts the kubelet at least once)."""
    rng = sequence.rng
    options = possible(sequence)
    if sequence.restarts == 0 and remaining < 3 and "restart" in options:
        op = "restart"
    else:
        ops = sorted(options)
        op = rng.choices(ops, [WEIGHTS[o] for o in ops])[0]
    if op == "restart" and restart_refused(kubelet):
        sequence.refused_restarts += 1
        del options["restart"]
        ops = sorted(options)
        op = rng.choices(ops, [WEIGHTS[o] for o in ops])[0]
    target = rng.choice(options[op])
    step = APPLY[op](kubelet, sequence, target)
    sequence.steps.append(step)
    return step


def _admit(kubelet: RealKubelet, sequence: Sequence, _: None) -> Step:
    rng = sequence.rng
    name = f"pod-{sequence._next_pod}"
    sequence._next_pod += 1
    draw = draw_pod(rng, name, sequence.resources, sequence.hugepage_types, sequence.profile)
    manifest = draw.manifest()
    if sequence.create is not None:
        manifest = sequence.create(manifest)
    verdict = kubelet.admit(manifest, timeout=SLOW_ADMISSION_SECONDS)
    life = PodLife(draw, "pending" if verdict.admitted else "rejected")
    sequence.pods[name] = life
    if not verdict.admitted:
        return Step("admit", name, f"rejected {verdict.reason}")
    how = rng.random()
    if not draw.start or how < 0.2:
        return Step("admit", name, "admitted, left Pending")
    if how < 0.45 and _first_regular_init(life) is not None:
        _start_init(kubelet, life)
        return Step("admit", name, f"admitted, init container {life.started[-1]} running")
    _start_rest(kubelet, life)
    return Step("admit", name, "admitted, started")


def _first_regular_init(life: PodLife) -> str | None:
    return next((c.name for c in life.draw.containers if c.kind == "init"), None)


def _start_init(kubelet: RealKubelet, life: PodLife) -> None:
    """The init containers up to the first regular one, which keeps running."""
    names = []
    for container in life.draw.containers:
        names.append(container.name)
        if container.kind == "init":
            break
    kubelet.start_containers(NAMESPACE, life.name, names)
    life.started.extend(names)
    life.state = "init"


def _start_rest(kubelet: RealKubelet, life: PodLife) -> None:
    """Every container not started yet, in the kubelet's order: each regular init container
    finishing before the next one starts, then the app containers."""
    batch: list[str] = []
    for container in life.draw.containers:
        if container.name in life.started:
            continue
        batch.append(container.name)
        if container.kind == "init":
            kubelet.start_containers(NAMESPACE, life.name, batch)
            kubelet.finish(NAMESPACE, life.name, container.name)
            life.started.extend(batch)
            batch = []
    if batch:
        kubelet.start_containers(NAMESPACE, life.name, batch)
        life.started.extend(batch)
    life.state = "running"


def _start(kubelet: RealKubelet, sequence: Sequence, life: PodLife) -> Step:
    if _first_regular_init(life) is not None and sequence.rng.random() < 0.4:
        _start_init(kubelet, life)
        return Step("start", life.name, f"init container {life.started[-1]} running")
    _start_rest(kubelet, life)
    return Step("start", life.name, "started")


def _finish(kubelet: RealKubelet, sequence: Sequence, life: PodLife) -> Step:
    container = life.started[-1]
    kubelet.finish(NAMESPACE, life.name, container)
    life.state = "init-done"
    return Step("finish", life.name, container)


def _resume(kubelet: RealKubelet, sequence: Sequence, life: PodLife) -> Step:
    _start_rest(kubelet, life)
    return Step("resume", life.name, "the other containers started")


def _end(kubelet: RealKubelet, sequence: Sequence, life: PodLife) -> Step:
    phase = sequence.rng.choice(("Succeeded", "Failed"))
    kubelet.set_phase(NAMESPACE, life.name, phase)
    life.state = "ended"
    return Step("end", life.name, phase)


def _remove(kubelet: RealKubelet, sequence: Sequence, life: PodLife) -> Step:
    kubelet.remove(NAMESPACE, life.name)
    del sequence.pods[life.name]
    return Step("remove", life.name, f"(was {life.state})")


def _health(kubelet: RealKubelet, sequence: Sequence, device: tuple[str, str]) -> Step:
    healthy = not sequence.devices[device]
    kubelet.set_health(device[0], device[1], healthy)
    sequence.devices[device] = healthy
    return Step("health", "", f"{device[0]} {device[1]} {'healthy' if healthy else 'unhealthy'}")


def _restart(kubelet: RealKubelet, sequence: Sequence, _: None) -> Step:
    late = bool(sequence.devices) and sequence.rng.random() < PLUGINS_LATE
    kubelet.restart(plugins_late=late)
    sequence.restarts += 1
    sequence.plugins_late = late
    rejected = _rejected_at_restart(kubelet, sequence)
    return Step("restart", "", ("device plugins not registered yet" if late else "")
                + (f"; rejected again: {', '.join(rejected)}" if rejected else ""))


def restart_refused(kubelet: RealKubelet) -> bool:
    """Whether the kubelet, restarted now, would refuse to start: the static CPU manager's
    state holds exclusive assignments and an empty default set (``strict-cpu-reservation``,
    which keeps the reserved CPUs out of it, with every other CPU assigned), and
    ``validateState`` refuses it ("default cpuset cannot be empty", policy_static.go: the
    kubelet logs "invalid state, please drain node and remove policy state file" and exits).
    Checked against the real kubelet by test_real_kubelet_restart."""
    cpus = kubelet.dump()["cpu_manager"]
    return cpus["policy"] == "static" and not cpus["default_cpu_set"] \
        and any(cpus["assignments"].values())


def _rejected_at_restart(kubelet: RealKubelet, sequence: Sequence) -> list[str]:
    """Pods the restarted kubelet refused when its sources delivered them again."""
    refused = []
    for pod in kubelet.dump()["pods"] or ():
        life = sequence.pods.get(pod["name"])
        if life is not None and pod["in_pod_manager"] and pod["phase"] == "Failed" \
                and pod["reason"] and life.state not in ("rejected", "ended"):
            life.state = "rejected"
            refused.append(f"{pod['name']} ({pod['reason']})")
    return refused


def _plugins(kubelet: RealKubelet, sequence: Sequence, _: None) -> Step:
    kubelet.register_plugins()
    sequence.plugins_late = False
    return Step("plugins", "", "the device plugins registered again")


APPLY = {"admit": _admit, "start": _start, "finish": _finish, "resume": _resume, "end": _end,
         "remove": _remove, "health": _health, "restart": _restart, "plugins": _plugins}
