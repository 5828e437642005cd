"""Many cases in a row, counted: cases run, disagreements by kind and by class, each one with
the command that replays it. The cases are shared out over worker processes, each with its own
real kubelet, a few cases at a time to whichever worker is free; every count is the same
whatever the number of workers, since each case is drawn from its own seed and runs on a fresh
node."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from ..realkubelet import RealKubelet
from .cases import draw_case
from .classify import CLASSES, classify
from .runner import run_case, workdir
from .timing import (
    HANG_SECONDS,
    HARD_SECONDS,
    MERGE_LIMIT,
    CaseTiming,
    seconds_per_permutation,
)

# the assumptions that stand for a state file the exporter did not read
HIDDEN_STATE = frozenset({"no_cpu_manager_state", "no_device_checkpoint",
                          "no_memory_manager_state"})
# one worker per core: each runs its own real kubelet, cases are independent
WORKERS = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_WORKERS", str(os.cpu_count() or 2)))


def replay_command(seed: int, index: int, release: str) -> str:
    return (f"python -m tests.support.differential --seed {seed} --case {index} "
            f"--version {release} -v")


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome, small enough to come back from a worker."""

    index: int
    seconds: float
    skipped: str = ""
    slow: str = ""
    differences: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    kind_class: str = ""  # the class of a disagreement
    exception: str = ""  # the named exception its differences were excluded by
    exact: tuple[tuple[str, int], ...] = ()  # what the exact comparison compared, by kind
    random_devices: int = 0  # device picks the kubelet made by map order (not compared)
    stalled: bool = False  # a copy the kubelet never answered, as the fit engine said
    timing: CaseTiming | None = None
    numa_nodes: int = 0
    policy: str = ""
    assumptions: tuple[str, ...] = ()  # what the exporter's answer said it assumed
    init_cpus: int = 0  # CPUs finished init containers held, hidden from List (the dump)

    @property
    def judged(self) -> bool:
        return not (self.skipped or self.slow)


@dataclass
class Summary:
    release: str
    seed: int
    cases: int = 0
    skipped: int = 0
    slow: int = 0
    seconds: float = 0.0
    slowest: tuple[float, int] = (0.0, -1)  # (seconds, case)
    kinds: Counter[str] = field(default_factory=Counter)
    classes: Counter[str] = field(default_factory=Counter)
    disagreements: list[CaseResult] = field(default_factory=list)
    exceptions: list[CaseResult] = field(default_factory=list)
    slow_cases: list[int] = field(default_factory=list)
    exact: Counter[str] = field(default_factory=Counter)
    random_devices: int = 0
    stalled: int = 0
    results: list[CaseResult] = field(default_factory=list)
    workers: int = 1
    # the hidden-state mode: the exporter read no state file; a difference on an answer that
    # says it assumed what a state file would have told (HIDDEN_STATE) is counted, not failed
    state_files: bool = True
    assumed: list[CaseResult] = field(default_factory=list)
    labelled: int = 0  # judged answers carrying a HIDDEN_STATE assumption

    @property
    def judged(self) -> int:
        return self.cases - self.skipped - self.slow

    @property
    def disagreeing(self) -> int:
        return len(self.disagreements)

    def add(self, result: CaseResult) -> None:
        self.results.append(result)
        self.cases += 1
        self.labelled += result.judged and bool(set(result.assumptions) & HIDDEN_STATE)
        self.slowest = max(self.slowest, (result.seconds, result.index))
        self.exact.update(dict(result.exact))
        self.random_devices += result.random_devices
        self.stalled += result.stalled
        if result.skipped:
            self.skipped += 1
        elif result.slow:
            self.slow += 1
            self.slow_cases.append(result.index)
        elif result.exception:
            self.exceptions.append(result)
        elif result.differences and not self.state_files and \
                set(result.assumptions) & HIDDEN_STATE:
            self.assumed.append(result)
        elif result.differences:
            self.kinds.update(result.differences)
            self.classes[result.kind_class] += 1
            self.disagreements.append(result)

    @property
    def per_permutation(self) -> float:
        """The kubelet's loop's seconds per permutation, measured over this run's large
        merges (timing.py)."""
        return seconds_per_permutation(r.timing for r in self.results if r.timing is not None)

    def hard_cases(self) -> list[tuple[CaseResult, float, float]]:
        """(case, the kubelet's own time for the candidate's first admission, its longest
        admission) of every case with an admission over HARD_SECONDS."""
        rate, hard = self.per_permutation, []
        for result in self.results:
            if result.timing is None or not result.timing.admissions:
                continue
            seconds = result.timing.kubelet_seconds(rate)
            if max(seconds) > HARD_SECONDS:
                first = seconds[result.timing.first] if result.timing.first >= 0 else 0.0
                hard.append((result, first, max(seconds)))
        return hard

    def init_cpu_cases(self) -> tuple[list[CaseResult], list[CaseResult]]:
        """The judged cases whose pods' init containers held CPUs, and those of them answered
        without ``no_cpu_manager_state`` (the hidden-state mode: inferred from pod context)."""
        hidden = [r for r in self.results if r.judged and r.init_cpus]
        return hidden, [r for r in hidden if "no_cpu_manager_state" not in r.assumptions]

    @property
    def merge_mismatches(self) -> int:
        return sum(r.timing.mismatched for r in self.results if r.timing is not None)

    @property
    def merges_checked(self) -> int:
        return sum(r.timing.checked for r in self.results if r.timing is not None)

    def breakdown(self) -> dict[str, float]:
        """Where the workers' time went, summed over cases (seconds)."""
        parts = dict.fromkeys(("reset", "pods", "exporter_read", "exporter_answer",
                               "candidate", "merges"), 0.0)
        for result in self.results:
            t = result.timing
            if t is None:
                continue
            parts["reset"] += t.reset
            parts["pods"] += t.pods
            parts["exporter_read"] += t.exporter_read
            parts["exporter_answer"] += t.exporter_answer
            parts["candidate"] += t.candidate
            parts["merges"] += t.merge_seconds
        parts["cases"] = sum(r.seconds for r in self.results)
        return parts

    def lines(self, each: bool = True) -> list[str]:
        rate = self.cases / self.seconds if self.seconds else 0.0
        named = Counter(r.exception for r in self.exceptions)
        hard = self.hard_cases()
        mode = "" if self.state_files else " (state files hidden)"
        out = [f"differential fit{mode}, real kubelet {self.release}, seed {self.seed}: "
               f"{self.judged} cases judged of {self.cases} ({self.skipped} nodes the kubelet "
               f"refused, {self.slow} not judged: an admission over {HANG_SECONDS:g}s), "
               f"{self.disagreeing} disagreements, {len(self.exceptions)} named exceptions"
               + "".join(f" ({n} {c})" for n, c in sorted(named.items()))
               + f", {self.seconds:.1f}s ({rate:.1f} cases/s over {self.workers} workers; "
               f"slowest: case {self.slowest[1]}, {self.slowest[0]:.1f}s)"]
        if self.exact:
            out.append(f"  exact, first copy: {self.exact['cpus']} containers' CPU ids, "
                       f"{self.exact['memory']} containers' memory blocks, "
                       f"{self.exact['nodes']} NUMA nodes' memory after it, "
                       f"{self.exact['devices']} device picks compared; "
                       f"{self.random_devices} device picks left to map order by the kubelet "
                       f"and {self.exact['after_draw']} containers whose hints followed one "
                       "(counted only)")
        if self.stalled:
            out.append(f"  {self.stalled} cases where the kubelet never answers a copy (its CPU "
                       "manager loops, kubernetes#140730) and the fit engine says "
                       "AdmissionStalled")
        if not self.state_files:
            by_label = Counter(label for r in self.results if r.judged
                               for label in set(r.assumptions) & HIDDEN_STATE)
            differing = Counter(label for r in self.assumed
                                for label in set(r.assumptions) & HIDDEN_STATE)
            out.append(f"  answers assuming what a state file would tell: {self.labelled} ("
                       + ", ".join(f"{label} {n}, {differing[label]} differing"
                                   for label, n in sorted(by_label.items()))
                       + f"); differences among the others: {self.disagreeing}")
            hidden, inferred = self.init_cpu_cases()
            out.append(f"  cases where init containers hold CPUs List does not show: "
                       f"{len(hidden)}; answered from pod context without assuming them free: "
                       f"{len(inferred)}")
        out.append(f"  merges: {self.merges_checked} run as the kubelet runs them and by the "
                   f"reduction, {self.merge_mismatches} differing; "
                   f"{sum(r.timing.reduced for r in self.results if r.timing)} over "
                   f"{MERGE_LIMIT:.0e} permutations by the reduction alone; the kubelet's loop: "
                   f"{self.per_permutation * 1e9:.0f} ns per permutation")
        parts = self.breakdown()
        out.append("  time (summed over cases): " + ", ".join(
            f"{name} {seconds:.1f}s" for name, seconds in parts.items()))
        if hard:
            out.append(f"  hard cases (an admission over {HARD_SECONDS:g}s in the unmodified "
                       f"kubelet; ~ estimated from the permutations): {len(hard)}")
            for result, first, longest in hard:
                t = result.timing
                assert t is not None
                mark = "~" if t.estimated() else ""
                out.append(
                    f"    case {result.index}: {result.numa_nodes} NUMA nodes, "
                    f"{result.policy}, hint lists {list(t.largest_lists)} "
                    f"({t.largest:.3g} permutations): kubelet {mark}{first:.2f}s for the "
                    f"first admission ({mark}{longest:.2f}s the longest), exporter "
                    f"{t.exporter_answer:.3f}s for its answer")
        if self.slow_cases:
            out.append(f"  not judged (an admission over {HANG_SECONDS:g}s): cases "
                       + ", ".join(map(str, self.slow_cases)))
        if self.kinds:
            out.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())))
        for name, count in self.classes.most_common():
            first_result = next(r for r in self.disagreements if r.kind_class == name)
            out.append(f"  class {name}: {count} — {CLASSES[name]}; e.g. "
                       + replay_command(self.seed, first_result.index, self.release))
        if each:
            for result in self.exceptions:
                out.append(f"  case {result.index} named exception [{result.exception}]: "
                           f"{'; '.join(result.details)} — "
                           f"{replay_command(self.seed, result.index, self.release)}")
            for result in sorted(self.disagreements, key=lambda r: r.index):
                out.append(f"  case {result.index} [{result.kind_class}] "
                           f"{'; '.join(result.details)} — "
                           f"{replay_command(self.seed, result.index, self.release)}")
        return out


# the real kubelet of this worker process, kept from one chunk of cases to the next
_KUBELETS: dict[str, RealKubelet] = {}
# cases handed to a worker at a time: small, so that a worker that drew the hard cases does
# not hold up the others at the end of a run
CHUNK = 4


def _kubelet(release: str) -> RealKubelet:
    kubelet = _KUBELETS.get(release)
    if kubelet is None:
        kubelet = _KUBELETS[release] = RealKubelet.start(release)
        atexit.register(kubelet.close)
    return kubelet


def run_share(release: str, seed: int, indices: list[int],
              state_files: bool = True) -> list[CaseResult]:
    """Cases of one worker, on its own real kubelet (started on the worker's first chunk)."""
    results = []
    directory = workdir()
    kubelet = _kubelet(release)
    for index in indices:
        started = time.perf_counter()
        case = draw_case(seed, index)
        outcome = run_case(kubelet, case, directory, state_files)
        kind_class = classify(outcome) if outcome.differences else ""
        exact = outcome.exact
        results.append(CaseResult(
            index, time.perf_counter() - started, outcome.skipped, outcome.slow,
            tuple(outcome.differences), tuple(outcome.details or outcome.excepted), kind_class,
            outcome.exception,
            exact=tuple(exact.compared.items()) if exact else (),
            random_devices=exact.random_devices if exact else 0, stalled=outcome.stalled,
            timing=outcome.timing, numa_nodes=len(case.profile["numa_nodes"]),
            policy=case.profile["topology_manager_policy"],
            assumptions=outcome.fit.assumptions if outcome.fit else (),
            init_cpus=outcome.held.get("init_cpus", 0)))
    shutil.rmtree(directory, ignore_errors=True)
    return results


def run_many(release: str, seed: int, count: int, first: int = 0,
             progress: Callable[[Summary], None] | None = None,
             workers: int = WORKERS, judged: bool = False,
             state_files: bool = True) -> Summary:
    """Cases ``first`` … ``first + count - 1``; with ``judged``, more cases after them until
    ``count`` nodes were built (a drawn configuration the kubelet refuses to start with, e.g.
    reserved hugepages, is replaced; a case not judged in time is not: it counts against the
    run)."""
    summary = Summary(release, seed, workers=max(1, workers), state_files=state_files)
    started = time.perf_counter()
    results = run_indices(release, seed, list(range(first, first + count)), workers,
                          state_files)
    wanted, end = count, first + count
    while judged and (missing := wanted - sum(1 for r in results if not r.skipped)) > 0:
        results += run_indices(release, seed, list(range(end, end + missing)), workers,
                               state_files)
        end += missing
    for result in sorted(results, key=lambda r: r.index):
        summary.add(result)
    summary.seconds = time.perf_counter() - started
    if progress is not None:
        progress(summary)
    return summary


def run_indices(release: str, seed: int, indices: list[int], workers: int,
                state_files: bool = True) -> list[CaseResult]:
    """The cases over ``workers`` processes, CHUNK at a time to whichever is free."""
    workers = max(1, min(workers, len(indices)))
    if workers == 1:
        try:
            return run_share(release, seed, indices, state_files)
        finally:
            kubelet = _KUBELETS.pop(release, None)
            if kubelet is not None:
                kubelet.close()
    chunks = [indices[i:i + CHUNK] for i in range(0, len(indices), CHUNK)]
    # spawned, not forked: the parent may have gRPC threads running
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [r for share in pool.map(run_share, [release] * len(chunks), [seed] * len(chunks),
                                        chunks, [state_files] * len(chunks))
                for r in share]
