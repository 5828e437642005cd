"""Many cases in a row, counted: cases run, disagreements by kind and by class, each one with
the command that replays it. The cases are shared out over worker processes, each with its own
real kubelet (case ``n`` goes to worker ``n % workers``); every count is the same whatever the
number of workers, since each case is drawn from its own seed and runs on a fresh node."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from ..realkubelet import RealKubelet
from .cases import draw_case
from .classify import CLASSES, classify
from .runner import ADMISSION_SECONDS, run_case, workdir

WORKERS = int(os.environ.get("PODRESOURCES_DIFFERENTIAL_WORKERS", "2"))


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

    @property
    def judged(self) -> int:
        return self.cases - self.skipped - self.slow

    @property
    def disagreeing(self) -> int:
        return len(self.disagreements)

    def add(self, result: CaseResult) -> None:
        self.cases += 1
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
        elif result.differences:
            self.kinds.update(result.differences)
            self.classes[result.kind_class] += 1
            self.disagreements.append(result)

    def lines(self, each: bool = True) -> list[str]:
        rate = self.cases / self.seconds if self.seconds else 0.0
        named = Counter(r.exception for r in self.exceptions)
        out = [f"differential fit, real kubelet {self.release}, seed {self.seed}: "
               f"{self.judged} cases judged of {self.cases} ({self.skipped} nodes the kubelet "
               f"refused, {self.slow} with an admission over {ADMISSION_SECONDS:g}s), "
               f"{self.disagreeing} disagreements, {len(self.exceptions)} named exceptions"
               + "".join(f" ({n} {c})" for n, c in sorted(named.items()))
               + f", {self.seconds:.1f}s ({rate:.1f} cases/s; "
               f"slowest: case {self.slowest[1]}, {self.slowest[0]:.1f}s)"]
        if self.exact:
            out.append(f"  exact, first copy: {self.exact['cpus']} containers' CPU ids, "
                       f"{self.exact['memory']} containers' memory blocks, "
                       f"{self.exact['nodes']} NUMA nodes' memory after it, "
                       f"{self.exact['devices']} device picks compared; "
                       f"{self.random_devices} device picks left to map order by the kubelet "
                       "(counted only)")
        if self.stalled:
            out.append(f"  {self.stalled} cases where the kubelet never answers a copy (its CPU "
                       "manager loops, kubernetes#140730) and the fit engine says "
                       "AdmissionStalled")
        if self.slow_cases:
            out.append(f"  not judged (an admission over {ADMISSION_SECONDS:g}s, the Topology "
                       "Manager merging every permutation of its hints): cases "
                       + ", ".join(map(str, self.slow_cases)))
        if self.kinds:
            out.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())))
        for name, count in self.classes.most_common():
            first = next(r for r in self.disagreements if r.kind_class == name)
            out.append(f"  class {name}: {count} — {CLASSES[name]}; e.g. "
                       + replay_command(self.seed, first.index, self.release))
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


def run_share(release: str, seed: int, indices: list[int]) -> list[CaseResult]:
    """One worker's cases, on its own real kubelet."""
    results = []
    directory = workdir()
    with RealKubelet.start(release) as kubelet:
        for index in indices:
            started = time.perf_counter()
            outcome = run_case(kubelet, draw_case(seed, index), directory)
            kind_class = classify(outcome) if outcome.differences else ""
            exact = outcome.exact
            results.append(CaseResult(index, time.perf_counter() - started, outcome.skipped,
                                      outcome.slow, tuple(outcome.differences),
                                      tuple(outcome.details or outcome.excepted), kind_class,
                                      outcome.exception,
                                      tuple(exact.compared.items()) if exact else (),
                                      exact.random_devices if exact else 0, outcome.stalled))
    return results


def run_many(release: str, seed: int, count: int, first: int = 0,
             progress: Callable[[Summary], None] | None = None,
             workers: int = WORKERS, judged: bool = False) -> Summary:
    """Cases ``first`` … ``first + count - 1``; with ``judged``, more cases after them until
    ``count`` were judged (neither refused by the kubelet nor over its admission time), so a
    slower machine judges as many cases as a faster one."""
    summary = Summary(release, seed)
    started = time.perf_counter()
    results = run_indices(release, seed, list(range(first, first + count)), workers)
    wanted, end = count, first + count
    while judged and (missing := wanted - sum(1 for r in results if r.judged)) > 0:
        results += run_indices(release, seed, list(range(end, end + missing)), workers)
        end += missing
    for result in sorted(results, key=lambda r: r.index):
        summary.add(result)
    summary.seconds = time.perf_counter() - started
    if progress is not None:
        progress(summary)
    return summary


def run_indices(release: str, seed: int, indices: list[int], workers: int) -> list[CaseResult]:
    workers = max(1, min(workers, len(indices)))
    shares = [indices[w::workers] for w in range(workers)]
    if workers == 1:
        return run_share(release, seed, indices)
    # spawned, not forked: the parent may have gRPC threads running
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [r for share in pool.map(run_share, [release] * workers, [seed] * workers, shares)
                for r in share]
