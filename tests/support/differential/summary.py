"""Many cases in a row, counted: cases run, disagreements by kind and by class, each one with
the command that replays it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..realkubelet import RealKubelet
from .cases import draw_case
from .classify import CLASSES, classify
from .runner import ADMISSION_SECONDS, Outcome, run_case, workdir


def replay_command(seed: int, index: int, release: str) -> str:
    return (f"python -m tests.support.differential --seed {seed} --case {index} "
            f"--version {release} -v")


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
    disagreements: list[tuple[Outcome, str]] = field(default_factory=list)

    @property
    def disagreeing(self) -> int:
        return len(self.disagreements)

    def lines(self, each: bool = True) -> list[str]:
        rate = self.cases / self.seconds if self.seconds else 0.0
        out = [f"differential fit, real kubelet {self.release}, seed {self.seed}: "
               f"{self.cases} cases ({self.skipped} nodes the kubelet refused, {self.slow} with an "
               f"admission over {ADMISSION_SECONDS:g}s), "
               f"{self.disagreeing} disagreements, {self.seconds:.1f}s ({rate:.1f} cases/s; "
               f"slowest: case {self.slowest[1]}, {self.slowest[0]:.1f}s)"]
        if self.kinds:
            out.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())))
        for name, count in self.classes.most_common():
            first = next(o for o, c in self.disagreements if c == name)
            out.append(f"  class {name}: {count} — {CLASSES[name]}; e.g. "
                       + replay_command(self.seed, first.case.index, self.release))
        if each:
            for outcome, name in self.disagreements:
                out.append(f"  case {outcome.case.index} [{name}] {'; '.join(outcome.details)}"
                           f" — {replay_command(self.seed, outcome.case.index, self.release)}")
        return out


def run_many(release: str, seed: int, count: int, first: int = 0,
             progress: Callable[[Summary], None] | None = None) -> Summary:
    summary = Summary(release, seed)
    started = time.perf_counter()
    directory = workdir()
    with RealKubelet.start(release) as kubelet:
        for index in range(first, first + count):
            case_started = time.perf_counter()
            outcome = run_case(kubelet, draw_case(seed, index), directory)
            outcome.seconds = time.perf_counter() - case_started
            summary.slowest = max(summary.slowest, (outcome.seconds, index))
            summary.cases += 1
            if outcome.skipped:
                summary.skipped += 1
            elif outcome.slow:
                summary.slow += 1
            elif outcome.differences:
                name = classify(outcome)
                summary.kinds.update(outcome.differences)
                summary.classes[name] += 1
                summary.disagreements.append((outcome, name))
            if progress is not None and summary.cases % 100 == 0:
                summary.seconds = time.perf_counter() - started
                progress(summary)
    summary.seconds = time.perf_counter() - started
    return summary
