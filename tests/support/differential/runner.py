"""One differential case: the real kubelet against the exporter's fit engine.

The real side: the case's node reset in the real kubelet, its pods admitted (and started, as
drawn), then copies of the candidate admitted one after another until the kubelet refuses one
(``shape_capacity``). The exporter's side, asked exactly as a deployed exporter answers
``snapshot --shape ... --format json`` (:func:`exporter.commands.snapshot.read_once`, the
functions it calls): the kubelet over the real podresources socket and the node's sysfs tree;
the kubelet's state files under its root directory (``--watch-path``: ``cpu_manager_state``,
``device-plugins/kubelet_internal_checkpoint``); the kubelet's config file as the component is
configured (``--kubelet-config``); pod context from the kubelet's real Pods API socket (1.37),
or, where the release has none (1.34), from the Kubernetes-API view (``--kube-api``) of the real
API server (tests/controlplane, one per worker): each pod created there first and the object it
stored admitted by the kubelet (its UID is the server's, as on a cluster), then the Node and the
pods' statuses as the kubelet keeps them there (``controlplane_publish``). The candidate is
then answered as a ``--fit-shapes`` shape on that read.

Compared: the verdict, the reason, each container's NUMA set (the Topology Manager's affinity;
where it has none, the NUMA nodes of the container's CPUs, memory and devices), what the first
copy's containers got exactly (CPU ids, memory blocks, each NUMA node's memory after it,
devices where the kubelet's pick is determined: exact.py), and the capacity (up to the fit
engine's cap).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exporter.commands.snapshot import read_once
from exporter.fit.answers import CAPACITY_CAP, ShapeAnswer, answer, where
from exporter.fit.assumptions import UNSEEN_UNHEALTHY_DEVICES
from exporter.fit.kubelet.admission.errors import ADMISSION_STALLED
from exporter.fit.kubelet.allocation.allocation_manager import admit
from exporter.fit.kubelet.config import Rules
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.kubelet.topologymanager.scope import Placement
from exporter.fit.shapes import build_shape
from exporter.kubelet.client import ErrorKind
from exporter.refresh.settings import Settings

from ..controlplane_publish import Publisher, publisher
from ..realkubelet import (
    Admission,
    Container,
    NodeHandle,
    RealKubelet,
    RealKubeletError,
    RealKubeletTimeout,
    node_description,
    write_kubelet_config,
)
from .cases import Case
from .exact import Exact, compare_exact
from .exceptions import UNSEEN_UNHEALTHY_DEVICE, told, unseen_unhealthy_devices
from .timing import HANG_SECONDS, MERGE_LIMIT, CaseTiming

# a copy the fit engine says never finishes (AdmissionStalled) is waited for this long: every
# other admission in the component ends within seconds (its merges are reduced: timing.py)
STALL_SECONDS = 10.0

# the release a drawn feature gate first appears in: an older kubelet refuses a configuration
# naming it ("unrecognized feature gate"), so the case runs there without it
GATES_SINCE = {"PodLevelResourceManagers": 36}

# reads of the exporter that failed for a reason other than the kubelet's rate limit, tried
# again before the case fails (a failure here is the machine's, not a judgement)
FAILED_READS = 8


def _minor(release: str) -> int:
    return int(release.split(".")[1])


@dataclass
class Outcome:
    """What each side said about one case, and where they differ."""

    case: Case
    real: Admission | None = None
    real_capacity: int = 0
    stop_reason: str = ""  # why the kubelet refused the copy that ended the capacity count
    fit: ShapeAnswer | None = None
    differences: list[str] = field(default_factory=list)  # kinds: verdict, reason, ...
    details: list[str] = field(default_factory=list)
    held: dict[str, Any] = field(default_factory=dict)  # what the managers hold unlisted
    skipped: str = ""  # the node cannot be built as drawn (the kubelet refuses the config)
    slow: str = ""  # an admission still ran after HANG_SECONDS: not judged
    timing: CaseTiming = field(default_factory=CaseTiming)
    seconds: float = 0.0
    exception: str = ""  # the named exception the differences were excluded by (exceptions.py)
    excepted: list[str] = field(default_factory=list)  # their details
    # the component's dumps before the candidate and after its first copy (exact.py)
    dumps: tuple[dict[str, Any], dict[str, Any] | None] | None = None
    exact: Exact | None = None  # the first copy compared container by container
    stalled: bool = False  # a copy the kubelet never answers, as the fit engine says
    # the NUMA nodes' memory after the first copy is compared: not where the exporter read no
    # memory_manager_state and the memory manager holds memory List does not show (a node
    # figure the hidden-state mode knows blind, not the shape's answer)
    nodes_compared: bool = True


def real_numa(container: Container, cpu_numa: dict[int, int],
              device_numa: dict[tuple[str, str], tuple[int, ...]] | None) -> frozenset[int] | None:
    """The Topology Manager's affinity; without one, where the container's CPUs, memory and
    (given ``device_numa``) devices went."""
    if container.numa is not None:
        return frozenset(container.numa)
    used: set[int] = {cpu_numa[c] for c in container.cpus}
    for _, _, numa in container.memory:
        used.update(numa)
    for resource, ids in container.devices.items():
        for device_id in ids:
            used.update((device_numa or {}).get((resource, device_id)) or ())
    return frozenset(used) or None


def fit_numa(placement: Placement, with_devices: bool) -> frozenset[int] | None:
    if not with_devices and placement.hint is None:
        return frozenset(placement.cpus | placement.memory) or None
    found = where(placement)
    return frozenset(found) if found else None


@dataclass(frozen=True)
class FitRead:
    """The fit engine's answer, and what it answered on (for a named exception's check)."""

    answer: ShapeAnswer
    state: ManagersState
    rules: Rules


async def fit_answer(case: Case, node: NodeHandle, node_name: str, config_file: str,
                     kube_environ: dict[str, str] | None, timing: CaseTiming | None = None,
                     state_files: bool = True) -> FitRead:
    """The candidate answered as a deployed exporter answers it: one read of everything it
    reads, then the shape. ``kube_environ``: the environment of the Kubernetes-API view (its
    ``KUBECONFIG``), where the release serves no Pods API."""
    kube_api = kube_environ is not None
    settings = Settings(socket=node.socket, sysfs_root=node.sysfs_root, node_name=node_name,
                        kubelet_config=config_file,
                        watch_path=node.root_dir if state_files else "",
                        pods_api=node.pods_api_socket is not None,
                        pods_api_socket=node.pods_api_socket or "", kube_api=kube_api)
    environ = kube_environ or {}
    started = time.perf_counter()
    # The kubelet's rate limit is shared: wait for a token. A read that failed otherwise (the
    # kubelet's or the Pods API's socket timing a connection out on a machine loaded many times
    # over) is tried again, up to FAILED_READS times, waiting longer each time.
    failed = 0
    for _ in range(50):
        refresher, _pods = await read_once(settings, kube_environ=environ)
        error = refresher.last_error
        context = refresher.fit.context if refresher.fit is not None else None
        if error is not None and error.kind == ErrorKind.RATE_LIMITED:
            await asyncio.sleep(0.05)
        elif (error is not None or refresher.fit is None or (
                not kube_api and (context is None or context.source != "pods-api"))
              ) and failed < FAILED_READS:
            failed += 1
            await asyncio.sleep(0.5 * failed)
        else:
            break
    fit = refresher.fit
    if fit is None or fit.state is None or fit.config is None:
        raise RuntimeError(f"no fit state from the real kubelet: {refresher.last_error}")
    if kube_api and (fit.context is None or fit.context.source != "kube-api"):
        raise RuntimeError("no pod context from the Kubernetes-API view")
    if not kube_api and (fit.context is None or fit.context.source != "pods-api"):
        raise RuntimeError("no pod context from the kubelet's Pods API")
    shape = build_shape(case.candidate.name, case.candidate.shape())
    rules = fit.config.rules()
    answered = time.perf_counter()
    shape_answer = fit.answer(shape, rules)
    if timing is not None:
        timing.exporter_read = answered - started
        timing.exporter_answer = time.perf_counter() - answered
    return FitRead(shape_answer, fit.state, rules)


def unlisted_holdings(dump: dict[str, Any]) -> dict[str, Any]:
    """What the managers hold that ``List`` does not show: CPUs, memory and devices of regular
    init containers of active pods, and anything of pods that are not active (rejected ones)."""
    held: dict[str, Any] = {"init_cpus": 0, "init_memory": 0, "init_devices": 0,
                            "inactive_cpus": 0, "inactive_memory": 0, "inactive_devices": 0}
    for pod in dump["pods"] or ():
        for container in pod["containers"] or ():
            memory = sum(b["size"] for b in container["memory"])
            if not pod["active"]:
                held["inactive_cpus"] += len(container["cpus"])
                held["inactive_memory"] += memory
                held["inactive_devices"] += sum(len(ids) for ids in container["devices"].values())
            elif container["kind"] == "init":
                held["init_cpus"] += len(container["cpus"])
                held["init_memory"] += memory
                held["init_devices"] += sum(len(ids) for ids in container["devices"].values())
    return held


def run_case(kubelet: RealKubelet, case: Case, workdir: Path,
             state_files: bool = True) -> Outcome:
    """One case; ``state_files`` False: the exporter reads no state file (the default chart
    mounts none), as the hidden-state mode asks it."""
    outcome = Outcome(case)
    try:
        _run(kubelet, case, workdir, outcome, state_files)
    except RealKubeletTimeout as error:
        outcome.slow = str(error)
    return outcome


def _run(kubelet: RealKubelet, case: Case, workdir: Path, outcome: Outcome,
         state_files: bool = True) -> None:
    spec = case.spec
    description = node_description(spec, max_pods=case.kubelet.max_pods)
    description["kubelet"].update(case.kubelet.description())
    description["kubelet"]["feature_gates"].update(
        (gate, on) for gate, on in case.kubelet.feature_gates.items()
        if _minor(kubelet.release) >= GATES_SINCE.get(gate, 0))
    # merges above MERGE_LIMIT permutations by their reduction, every one below checked
    # against it (tests/realkubelet/mergepolicy.go, timing.py)
    description["kubelet"].update(merge_limit=MERGE_LIMIT, merge_check=MERGE_LIMIT)
    timing = outcome.timing
    started = time.perf_counter()
    try:
        node = kubelet.reset(description)
    except RealKubeletTimeout:
        raise
    except RealKubeletError as error:
        outcome.skipped = str(error)
        return
    timing.reset = time.perf_counter() - started
    # no Pods API (1.34 to 1.36 here): the pods come from the API server, as on a cluster
    api: Publisher | None = publisher() if node.pods_api_socket is None else None
    manifests = [pod.manifest() for pod in case.pods]
    if api is not None:
        manifests = api.create_pods(manifests, description["name"])
    for pod, manifest in zip(case.pods, manifests, strict=True):
        verdict = kubelet.admit(manifest, timeout=HANG_SECONDS)
        timing.add(verdict)
        if verdict.admitted and pod.start:
            kubelet.start_containers("default", pod.name)
    dump = kubelet.dump()
    outcome.held = unlisted_holdings(dump)
    outcome.nodes_compared = state_files or not (outcome.held["init_memory"]
                                                 or outcome.held["inactive_memory"])
    config_file = str(write_kubelet_config(description, workdir / "kubelet-config.yaml"))
    node_name, kube_environ = description["name"], None
    if api is not None:
        node_name = api.publish(*kubelet.api_objects())
        kube_environ = {"KUBECONFIG": api.kubeconfig}
    timing.pods = time.perf_counter() - started - timing.reset
    read = asyncio.run(fit_answer(case, node, node_name, config_file, kube_environ, timing,
                                  state_files))
    outcome.fit = read.answer

    started = time.perf_counter()
    stall = engine_stall(read)
    first = admit_copy(kubelet, case, 0, stall, outcome)
    timing.add(first, first=True)
    outcome.real = first
    outcome.dumps = (dump, kubelet.dump() if first.admitted else None)
    admitted = 0
    last = first
    while last.admitted and admitted < CAPACITY_CAP:
        admitted += 1
        if admitted == CAPACITY_CAP:
            break
        last = admit_copy(kubelet, case, admitted, stall, outcome)
        timing.add(last)
    timing.candidate = time.perf_counter() - started
    outcome.real_capacity = admitted
    outcome.stop_reason = "" if last.admitted else last.reason
    compare(outcome, description)
    if outcome.differences:
        except_unseen(outcome, description, dump, read)
    if timing.mismatched:  # never excused: the reduction must be the kubelet's loop
        outcome.differences.append("merge")
        outcome.details.append(f"merge: the reduction differed from the kubelet's loop on "
                               f"{timing.mismatched} of {timing.checked} merges")


def engine_stall(read: FitRead) -> int | None:
    """The copy of the candidate the fit engine says the kubelet's CPU manager never finishes
    admitting (``AdmissionStalled``, kubernetes#140730), placing the copies before it; None
    when it says every copy is answered."""
    state = read.state
    for index in range(CAPACITY_CAP):
        verdict = admit(read.answer.shape, state, read.rules)
        if verdict.state is None:
            return index if verdict.reason == ADMISSION_STALLED else None
        state = verdict.state
    return None


def admit_copy(kubelet: RealKubelet, case: Case, index: int, stall: int | None,
               outcome: Outcome) -> Admission:
    """Copy ``index`` of the candidate admitted by the real kubelet. The copy the fit engine
    says stalls (``stall``) is given STALL_SECONDS: unanswered, both sides agree that the
    kubelet admits no more. Any other copy is given HANG_SECONDS (the component reduces the
    merges that would keep it longer); unanswered, the case is not judged."""
    timeout = STALL_SECONDS if index == stall else HANG_SECONDS
    try:
        return kubelet.admit(case.candidate.manifest(f"copy-{index}"), timeout=timeout)
    except RealKubeletTimeout:
        if index != stall:
            raise
        outcome.stalled = True
        return Admission(False, ADMISSION_STALLED, "the kubelet did not answer", "")


def except_unseen(outcome: Outcome, description: dict[str, Any], dump: dict[str, Any],
                  read: FitRead) -> None:
    """The named exception ``unseen-unhealthy-device``: the candidate asks for a resource with
    unhealthy devices no container holds, the exporter's answer says it assumes there are none
    (``unseen_unhealthy_devices``: an operator is told), and the fit engine told of them
    agrees."""
    asked = {r for c in outcome.case.candidate.containers for r in c.devices}
    unseen = unseen_unhealthy_devices(dump, asked)
    if not unseen or UNSEEN_UNHEALTHY_DEVICES not in read.answer.assumptions:
        return
    except_if_told(outcome, description, read, told(read.state, unseen),
                   UNSEEN_UNHEALTHY_DEVICE)


def except_if_told(outcome: Outcome, description: dict[str, Any], read: FitRead,
                   state: ManagersState, exception: str) -> None:
    """``outcome``'s differences excluded as the named ``exception`` when the fit engine,
    answering on ``state`` (``read``'s state told what it could not see), agrees."""
    trial = replace(outcome, fit=answer(read.answer.shape, state, read.rules), differences=[],
                    details=[])
    compare(trial, description)
    if not trial.differences:
        outcome.exception = exception
        outcome.excepted, outcome.differences, outcome.details = outcome.details, [], []


def compare(outcome: Outcome, description: dict[str, Any]) -> None:
    real, fit = outcome.real, outcome.fit
    assert real is not None and fit is not None
    verdict = fit.verdict
    if real.admitted != verdict.admitted:
        outcome.differences.append("verdict")
        outcome.details.append(
            f"verdict: kubelet {'admits' if real.admitted else 'rejects'}"
            f"{'' if real.admitted else f' ({real.reason}: {real.message})'}, fit engine "
            f"{'admits' if verdict.admitted else 'rejects'}"
            f"{'' if verdict.admitted else f' ({verdict.reason})'}")
    elif not real.admitted and real.reason != verdict.reason:
        outcome.differences.append("reason")
        outcome.details.append(f"reason: kubelet {real.reason} ({real.message}), fit engine "
                               f"{verdict.reason}")
    if real.admitted and verdict.admitted:
        cpu_numa = {cpu["id"]: cpu["numa"] for cpu in description["cpus"]}
        # Under policy none nothing is aligned and the device manager takes any free devices
        # (a set's order): which NUMA nodes they sit on is chance, so only CPUs and memory count
        profile = outcome.case.profile
        aligned = profile["topology_manager_policy"] != "none"
        if outcome.dumps is not None:
            outcome.exact = compare_exact(
                real, verdict, description, *outcome.dumps, nodes=outcome.nodes_compared,
                hints_per_container=aligned and profile["topology_manager_scope"] == "container")
        # a container whose hints came from what a device draw of the kubelet left (exact.py)
        drawn = set(outcome.exact.after_draw) if outcome.exact is not None else set()
        device_numa = {(d["resource"], d["id"]): tuple(d["numa"] or ())
                       for d in description["devices"]} if aligned else None
        placed = {p.container: fit_numa(p, aligned) for p in verdict.placements}
        for name, container in real.containers.items():
            if name in drawn:
                continue
            mine = real_numa(container, cpu_numa, device_numa)
            theirs = placed.get(name)
            if mine != theirs:
                outcome.differences.append("placement")
                outcome.details.append(f"placement of {name}: kubelet {_nodes(mine)}, fit "
                                       f"engine {_nodes(theirs)}")
                break
        if outcome.exact is not None and outcome.exact.details:
            outcome.differences.append("exact")
            outcome.details.extend(outcome.exact.details)
    capacity = min(fit.capacity, CAPACITY_CAP)
    if outcome.real_capacity != capacity:
        outcome.differences.append("capacity")
        outcome.details.append(f"capacity: kubelet {outcome.real_capacity}, fit engine "
                               f"{fit.capacity}")


def _nodes(numa: frozenset[int] | None) -> str:
    return "{" + ",".join(map(str, sorted(numa))) + "}" if numa else "none"


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="diff-", dir="/tmp"))
