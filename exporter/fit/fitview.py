"""The fit answers on /metrics: one section rendered after every refresh.

:class:`FitView` holds what the fit answers need beyond one snapshot: the shapes (re-read when
their file changes), the kubelet's configuration (flags, file, assumptions), and the pods
already judged after an admission rejection. After each successful refresh,
:meth:`FitView.update` rebuilds the resource managers' state from that refresh's snapshot (no
extra kubelet call), answers every shape and every newly seen rejection with the kubelet's
admission model, and renders the gauges (written by :mod:`exporter.exposition.textformat`:
``prometheus_client`` is not imported); the admission counter lives in the health section (it
is a counter, rendered per exposition format there: :meth:`Health.count_admission_failure`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .. import catalog
from ..accounting import DRA, Accounting
from ..exposition.rendering import gauge_family, render_text
from ..exposition.textformat import Family
from ..model import KubeletSnapshot, Topology
from ..podcontext import NodeContext
from ..podspec import Rejection
from .answers import ShapeAnswer, answer, full_cores_series, numa_free_series, sentence
from .assumptions import assumptions
from .capacity import NodeCounts
from .from_pod_object import pod_shape
from .kubelet.config import Rules
from .kubelet.managers_state import ManagersState
from .kubelet.podshape import PodShape, single_container
from .kubeletconfig import (
    FileConfig,
    FlagConfig,
    KubeletConfig,
    KubeletConfigError,
    KubeletConfigFile,
    resolve,
)
from .shapes import ShapeError, ShapeFile
from .state.checkpoints import KubeletState, StateFiles
from .state.incremental import ManagersStateCache
from .state.init_cpus import with_inferred_init_cpus

log = logging.getLogger(__name__)


class FitSetupError(Exception):
    """A ``--fit-shapes`` or ``--kubelet-config`` file that cannot be used at start-up."""


def build_fit_view(fit_shapes: str | None, kubelet_config: str | None, full_pcpus_only: bool,
                   count_rejection: RejectionCounter | None = None,
                   rejections: Rejections | None = None,
                   topology_manager_policy: str | None = None,
                   topology_manager_scope: str | None = None,
                   state_dir: str | None = None,
                   pod_context: PodContextSource | None = None) -> FitView:
    """The fit view of the flags; :class:`FitSetupError` names the flag and the reason.
    ``state_dir``: the kubelet's root directory (``--watch-path``), for its state files;
    ``pod_context``: where pod context comes from (the Kubernetes-API view, the Pods API)."""
    try:
        shapes = ShapeFile(fit_shapes) if fit_shapes else None
    except ShapeError as error:
        raise FitSetupError(f"--fit-shapes: {error}") from None
    try:
        config = KubeletConfigFile(kubelet_config) if kubelet_config else None
    except KubeletConfigError as error:
        raise FitSetupError(f"--kubelet-config: {error}") from None
    flags = FlagConfig(topology_manager_policy, topology_manager_scope, full_pcpus_only)
    return FitView(shapes, config, flags, rejections, count_rejection,
                   state_files=StateFiles(state_dir) if state_dir else None,
                   pod_context=pod_context)


NONE = "none"
RejectionKey = tuple[str, str]
# where rejected pods come from: the Kubernetes-API view, or the demo's simulator
Rejections = Callable[[], Mapping[RejectionKey, Rejection]]
# counts one judged rejection by (reason, blocking resource): the health section's counter
RejectionCounter = Callable[[str, str], None]
# where pod context comes from; the same object while nothing changed
PodContextSource = Callable[[], NodeContext | None]


@dataclass
class Judged:
    uid: str
    reason: str
    blocking: str
    sentence: str


def rejected_pod_shape(key: RejectionKey, rejection: Rejection) -> PodShape:
    """The rejected pod as the model judges it: container by container from its spec when the
    record kept it, else its exclusive requests as one container."""
    if rejection.pod.get("spec"):
        return pod_shape(rejection.pod, f"{key[0]}/{key[1]}")
    requests = {r: (a * 1000 if r == "cpu" else a) for r, a in rejection.requests}
    return single_container(f"{key[0]}/{key[1]}", requests)


@dataclass
class FitView:
    """Shapes, kubelet configuration and admission verdicts, and their section of /metrics."""

    shapes: ShapeFile | None = None
    kubelet_config: KubeletConfigFile | None = None
    flags: FlagConfig = field(default_factory=FlagConfig)
    # where rejected pods come from (the Kubernetes-API view), None without --kube-api
    rejections: Rejections | None = None
    count_rejection: RejectionCounter | None = None  # the health section's counter
    state: ManagersState | None = None
    config: KubeletConfig | None = None
    answers: list[ShapeAnswer] = field(default_factory=list)
    judged: dict[RejectionKey, Judged] = field(default_factory=dict)
    state_files: StateFiles | None = None
    pod_context: PodContextSource | None = None
    context: NodeContext | None = None
    kubelet: KubeletState | None = None
    dra_cpus: bool = False  # a DRA CPU driver allocates exclusive CPUs on this node
    # the managers' state and each NUMA node's count of copies per shape, kept from one
    # snapshot to the next
    state_cache: ManagersStateCache = field(default_factory=ManagersStateCache)
    node_counts: NodeCounts = field(default_factory=NodeCounts)
    _config_problem: str | None = None
    _inputs: tuple[object, ...] = ()
    _rendered: bytes = b""
    _failed: bool = False

    def file_config(self) -> FileConfig | None:
        if self.kubelet_config is None:
            return None
        config = self.kubelet_config.current()
        problem = self.kubelet_config.problem
        if problem and problem != self._config_problem:
            log.warning("keeping the last kubelet configuration read: %s", problem)
        self._config_problem = problem
        return config

    def current_shapes(self) -> tuple[PodShape, ...]:
        return self.shapes.current() if self.shapes is not None else ()

    def resolve(self, snapshot: KubeletSnapshot, topology: Topology) -> KubeletConfig:
        allocatable = snapshot.allocatable
        lists_cpus = bool(allocatable is not None and allocatable.cpu_ids)
        lists_memory = bool(allocatable is not None and allocatable.memory)
        return resolve(self.flags, self.file_config(), lists_cpus, lists_memory,
                       len(topology.numa_nodes))

    def update(self, snapshot: KubeletSnapshot, topology: Topology,
               accounting: Accounting) -> bytes:
        """Recompute from one refresh's snapshot; returns the section's text. A failure here
        never costs the refresh its other figures: the previous section stays, logged once."""
        try:
            section = self._update(snapshot, topology, accounting)
        except Exception:
            if not self._failed:
                log.exception("fit answers not updated; keeping the previous ones")
            self._failed = True
            return self._rendered
        self._failed = False
        return section

    def _update(self, snapshot: KubeletSnapshot, topology: Topology,
                accounting: Accounting) -> bytes:
        config = self.resolve(snapshot, topology)
        shapes = self.current_shapes()
        context = self.pod_context() if self.pod_context is not None else None
        kubelet = self.state_files.current() if self.state_files is not None else None
        # the ledger hands back the same accounting object when nothing changed
        inputs = (accounting, snapshot.allocatable, snapshot.api_version, topology, shapes,
                  config, context, kubelet)
        changed = len(inputs) != len(self._inputs) or any(
            (a != b) if isinstance(a, KubeletConfig) else (a is not b)
            for a, b in zip(inputs, self._inputs))
        if changed:
            previous, self._inputs = self._inputs, inputs
            rules = config.rules()
            # without cpu_manager_state, what finished init containers hold, from pod context
            kubelet = with_inferred_init_cpus(kubelet, snapshot, topology, context, rules)
            state = self.state_cache.state(snapshot, topology, rules.managers.cpu_static,
                                           rules.managers.memory_static, context, kubelet,
                                           config.max_pods, config.reservation)
            # the same managers' state, shapes, configuration and pod context give the same
            # answers: a change no shape can see (a pod without exclusive resources) costs the
            # state only
            dra_cpus = any(allocator == DRA for allocator, _ in accounting.cpu_allocators)
            changed = not (previous and state == self.state and shapes is previous[4]
                           and config == self.config and context == self.context
                           and kubelet == self.kubelet and dra_cpus == self.dra_cpus)
            self.config, self.context, self.kubelet = config, context, kubelet
            self.dra_cpus = dra_cpus
            if changed:
                self.state = state
                self.answers = ([self.answer(shape, rules) for shape in shapes]
                                if state is not None else [])
                self.node_counts.forget_unused()
        if self._judge() or changed:
            self._rendered = render_text(self.families(config))
        return self._rendered

    def answer(self, shape: PodShape, rules: Rules) -> ShapeAnswer:
        """One shape's answers against the current state, with what they assume."""
        assert self.state is not None
        return replace(answer(shape, self.state, rules, self.node_counts),
                       assumptions=assumptions(shape, self.state, rules, self.context,
                                               self.kubelet, self.dra_cpus))

    def _judge(self) -> bool:
        """Judge rejections seen since the last refresh; whether the judged set changed."""
        if self.rejections is None:
            return False
        current = self.rejections()
        gone = [k for k, j in self.judged.items() if k not in current or current[k].uid != j.uid]
        for key in gone:
            del self.judged[key]
        if self.state is None or self.config is None:
            return bool(gone)  # new ones are judged at the first refresh that can tell
        fresh = sorted((k, r) for k, r in current.items() if k not in self.judged)
        rules = self.config.rules()
        for key, rejection in fresh:
            judged_by = rules
            if rejection.reason == "SMTAlignmentError":  # only full-pcpus-only says this
                judged_by = replace(rules, full_pcpus_only=True)
            result = answer(rejected_pod_shape(key, rejection), self.state, judged_by)
            blocking = result.verdict.blocking_resource
            judged = Judged(rejection.uid, rejection.reason, blocking, sentence(result))
            self.judged[key] = judged
            self._count(judged)
            log.warning("pod %s/%s was rejected at admission (%s); blocking resource %s: %s",
                        key[0], key[1], rejection.reason, judged.blocking, judged.sentence)
        return bool(gone or fresh)

    def _count(self, judged: Judged) -> None:
        if self.count_rejection is not None:
            self.count_rejection(judged.reason, judged.blocking)

    def families(self, config: KubeletConfig) -> list[Family]:
        families: list[Family] = [gauge_family(catalog.KUBELET_CONFIG_INFO, {config.labels(): 1})]
        if self.state is not None:
            families.append(gauge_family(catalog.NUMA_FREE, numa_free_series(self.state)))
            families.append(gauge_family(catalog.NUMA_FREE_FULL_CORES,
                                         full_cores_series(self.state)))
        families.extend(shape_families(self.answers))
        info: dict[tuple[str, ...], float] = {
            (key[0], key[1], j.reason, j.blocking): 1 for key, j in self.judged.items()}
        families.append(gauge_family(catalog.ADMISSION_FAILURE_INFO, info))
        return [f for f in families if f.samples]


def shape_families(answers: Iterable[ShapeAnswer]) -> list[Family]:
    admitted: dict[tuple[str, ...], float] = {}
    rejection: dict[tuple[str, ...], float] = {}
    fits_series: dict[tuple[str, ...], float] = {}
    shortfall: dict[tuple[str, ...], float] = {}
    capacity: dict[tuple[str, ...], float] = {}
    smallest: dict[tuple[str, ...], float] = {}
    assumed: dict[tuple[str, ...], float] = {}
    for result in answers:
        name = result.shape.name
        verdict = result.verdict
        admitted[(name,)] = int(verdict.admitted)
        if not verdict.admitted and verdict.reason:
            rejection[(name, verdict.reason, verdict.blocking_resource)] = 1
        for numa_id, ok in result.fits.items():
            fits_series[(name, str(numa_id))] = int(ok)
            for resource, amount in result.shortfall[numa_id].items():
                shortfall[(name, str(numa_id), resource)] = amount
        capacity[(name,)] = result.capacity if not math.isnan(result.capacity) else 0
        if result.min_numa_nodes is not None:
            smallest[(name,)] = result.min_numa_nodes
        for assumption in result.assumptions:
            assumed[(name, assumption)] = 1
    return [gauge_family(catalog.SHAPE_ADMITTED, admitted),
            gauge_family(catalog.SHAPE_REJECTION_INFO, rejection),
            gauge_family(catalog.SHAPE_FITS, fits_series),
            gauge_family(catalog.SHAPE_SHORTFALL, shortfall),
            gauge_family(catalog.SHAPE_CAPACITY, capacity),
            gauge_family(catalog.SHAPE_MIN_NUMA_NODES, smallest),
            gauge_family(catalog.SHAPE_ASSUMPTION_INFO, assumed)]

