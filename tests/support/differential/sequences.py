"""Differential sequences: a running exporter against the real kubelet, step after step.

A sequence is a node and one or two shapes (drawn as a case's are), then :data:`STEPS` random
steps (:mod:`.steps`: admissions, starts, init containers finishing, pods ending and deleted,
device health changes, kubelet restarts). One ``serve`` (:mod:`.serving`) runs against the
node from the first step to the last, reading what a deployed exporter reads: the real
podresources socket, the node's sysfs, the kubelet's state files (``--watch-path``), its
config file, the shapes file, and pod context from the kubelet's Pods API (1.37) or the
Kubernetes-API view of the real API server (1.34 to 1.36, tests/controlplane, one per worker):
each pod created there before the kubelet admits it, the Node and the pods' statuses written
there after every step as the kubelet keeps them (:mod:`..controlplane_publish`). After
every step, once the exporter has refreshed since, :mod:`.judging` compares its figures and
every shape answer with the real kubelet's::

    python -m tests.support.differential.sequences --seed 1 --sequences 20 --version 1.37
    python -m tests.support.differential.sequences --seed 1 --sequence 7 --version 1.37 -v
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from exporter.simulator.profile import parse_profile

from ..controlplane_publish import Publisher, publisher
from ..realkubelet import (
    RELEASES,
    RealKubelet,
    RealKubeletError,
    RealKubeletTimeout,
    node_description,
    write_kubelet_config,
)
from .judging import Clock, Difference, fresh_opinion, judge_step
from .runner import workdir
from .serving import INTERVAL, MAX_REFRESH_RATE, RunningExporter
from .steps import SLOW_ADMISSION_SECONDS, STEPS, draw_sequence, set_devices, take_step

# a sequence waits more than it computes (the exporter's refresh interval, its back-off of a
# second after a refresh that met a restarting kubelet): more workers than cores
WORKERS = int(os.environ.get("PODRESOURCES_SEQUENCE_WORKERS", "4"))
# On 6 and 8 NUMA nodes under best-effort or restricted, with several aligned resources, the
# Topology Manager merging every permutation of its providers' hints takes the real kubelet
# up to seconds of CPU per admission (policy.go HintMerger.Merge), hundreds of them in a
# sequence: a sequence whose kubelet has spent this much CPU (not wall time, which a loaded
# machine stretches), or one admission longer than SLOW_ADMISSION_SECONDS, is stopped,
# counted as slow, and not judged. Most sequences' kubelet spends under a second.
SEQUENCE_KUBELET_CPU_SECONDS = 10.0


@dataclass(frozen=True)
class SequenceResult:
    index: int
    seconds: float
    steps: tuple[str, ...] = ()
    skipped: str = ""
    slow: str = ""  # stopped: the kubelet too slow (SEQUENCE_KUBELET_CPU_SECONDS)
    differences: tuple[Difference, ...] = ()
    exceptions: tuple[str, ...] = ()  # named exceptions, with their step
    restarts: int = 0
    refused_restarts: int = 0  # restarts not taken: the kubelet would refuse to start
    probes: int = 0  # shape answers compared
    exact: tuple[tuple[str, int], ...] = ()  # what the first copies' exact comparison covered
    spent: tuple[tuple[str, float], ...] = ()  # seconds by part (Clock)
    cpu: float = 0.0  # CPU seconds: this process (the exporter, the driver) and the kubelet's


def kubelet_cpu_seconds(kubelet: RealKubelet) -> float:
    """The kubelet process's CPU time so far (from /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{kubelet.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_seconds(kubelet: RealKubelet) -> float:
    """CPU time so far of this process (every thread: the exporter's loop and worker, the
    driver) and of the kubelet's."""
    return time.process_time() + kubelet_cpu_seconds(kubelet)


async def run_sequence(kubelet: RealKubelet, seed: int, index: int,
                       directory: Path) -> SequenceResult:
    result = await _run_sequence(kubelet, seed, index, directory, cpu_seconds(kubelet))
    return replace(result, cpu=cpu_seconds(kubelet) - result.cpu)


async def _run_sequence(kubelet: RealKubelet, seed: int, index: int, directory: Path,
                        cpu: float) -> SequenceResult:
    started = time.perf_counter()
    sequence = draw_sequence(seed, index)
    description = node_description(parse_profile(sequence.profile))
    try:
        node = await asyncio.to_thread(kubelet.reset, description)
    except RealKubeletError as error:
        return SequenceResult(index, time.perf_counter() - started, skipped=str(error),
                              cpu=cpu)
    set_devices(sequence, description)
    config = write_kubelet_config(description, directory / "kubelet-config.yaml")
    shapes = directory / "shapes.json"
    shapes.write_text(json.dumps({"shapes": {s.name: s.shape() for s in sequence.shapes}}))
    argv = ["--socket", node.socket, "--sysfs-root", node.sysfs_root,
            "--watch-path", node.root_dir, "--kubelet-config", str(config),
            "--fit-shapes", str(shapes), "--node-name", description["name"],
            "--interval", str(INTERVAL), "--max-refresh-rate", str(MAX_REFRESH_RATE)]
    api: Publisher | None = None
    environ: dict[str, str] = {}
    if node.pods_api_socket is not None:
        argv += ["--pods-api-socket", node.pods_api_socket]
    else:  # no Pods API: the pods through the Kubernetes API
        api = publisher()
        await asyncio.to_thread(api.create_pods, [], description["name"])  # the last ones go
        sequence.create = lambda manifest: api.create_pod(manifest, description["name"])
        await asyncio.to_thread(publish, kubelet, api)
        environ["KUBECONFIG"] = api.kubeconfig
        argv += ["--kube-api", "--no-pods-api"]
    exporter = await RunningExporter(argv, environ).start()
    differences: list[Difference] = []
    exceptions: list[str] = []
    probes = 0
    clock = Clock()
    exact: Counter[str] = Counter()
    slow = ""
    kubelet_cpu = kubelet_cpu_seconds(kubelet)
    try:
        for number in range(STEPS):
            if kubelet_cpu_seconds(kubelet) - kubelet_cpu > SEQUENCE_KUBELET_CPU_SECONDS:
                slow = (f"the kubelet spent over {SEQUENCE_KUBELET_CPU_SECONDS:g}s of CPU "
                        f"before step {number}")
                break
            with clock("steps"):
                await asyncio.to_thread(take_step, kubelet, sequence, STEPS - number - 1)
                moment = time.monotonic()
                if api is not None:
                    await asyncio.to_thread(publish, kubelet, api)
            found, named, compared = await judge_step(kubelet, sequence, number, description,
                                                      exporter, moment, clock, exact)
            probes += compared
            exceptions.extend(named)
            if found:
                with clock("fresh"):
                    fresh = await fresh_opinion(sequence, exporter, environ, description,
                                                kubelet)
                differences.extend(Difference(d.step, d.kind, d.detail, fresh) for d in found)
    except RealKubeletTimeout as error:  # the component was started again, with no node
        slow = str(error)
    except RealKubeletError as error:  # a step the component refused: this sequence fails
        differences.append(Difference(len(sequence.steps), "kubelet",
                                      f"the real kubelet refused a step: {error}"))
    finally:
        await exporter.stop()
    return SequenceResult(index, time.perf_counter() - started,
                          tuple(s.describe() for s in sequence.steps), slow=slow,
                          differences=tuple(differences), exceptions=tuple(exceptions),
                          restarts=sequence.restarts,
                          refused_restarts=sequence.refused_restarts, probes=probes,
                          exact=tuple(sorted(exact.items())),
                          spent=tuple(sorted(clock.spent.items())), cpu=cpu)


def publish(kubelet: RealKubelet, api: Publisher) -> None:
    """The API server's Node and pods as the kubelet keeps them there now: pods deleted from
    the kubelet are deleted from it, changed statuses written."""
    api.publish(*kubelet.api_objects())


# ---- many sequences ------------------------------------------------------------------------


@dataclass
class SequenceSummary:
    release: str
    seed: int
    results: list[SequenceResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def judged(self) -> list[SequenceResult]:
        return [r for r in self.results if not (r.skipped or r.slow)]

    @property
    def slow(self) -> list[SequenceResult]:
        return [r for r in self.results if r.slow]

    @property
    def disagreeing(self) -> list[SequenceResult]:
        """Sequences with a disagreement, a slow one's up to where it stopped included."""
        return [r for r in self.results if r.differences]

    @property
    def steps(self) -> int:
        return sum(len(r.steps) for r in self.judged)

    def lines(self, each: bool = True) -> list[str]:
        judged = self.judged
        kinds = Counter(d.kind for r in self.results for d in r.differences)
        ops = Counter(step.split()[0] for r in judged for step in r.steps)
        named = Counter(e.rsplit(": ", 1)[1] for r in self.results for e in r.exceptions)
        cpu = sum(r.cpu for r in self.results)
        skipped = sum(1 for r in self.results if r.skipped)
        slowest = max(self.results, key=lambda r: r.seconds, default=None)
        out = [f"differential sequences, real kubelet {self.release}, seed {self.seed}: "
               f"{len(judged)} sequences of {STEPS} steps judged ({len(self.results)} drawn, "
               f"{skipped} nodes the kubelet refused, {len(self.slow)} slow), {self.steps} "
               f"steps ({', '.join(f'{op} {n}' for op, n in sorted(ops.items()))}), "
               f"{sum(r.probes for r in self.results)} shape answers compared, "
               f"{sum(len(r.differences) for r in self.results)} disagreements in "
               f"{len(self.disagreeing)} sequences, {sum(named.values())} named exceptions"
               + "".join(f" ({n} {name})" for name, n in sorted(named.items())) + "; "
               f"{self.seconds:.1f}s, CPU {cpu:.1f}s ({1000 * cpu / max(1, self.steps):.0f} ms "
               "a step)" + (f"; slowest: sequence {slowest.index}, {slowest.seconds:.1f}s"
                            if slowest else "")]
        spent: Counter[str] = Counter()
        for result in self.results:
            spent.update(dict(result.spent))
        if spent:
            out.append("  time: " + ", ".join(f"{part} {seconds:.1f}s" for part, seconds
                                               in spent.most_common()))
        if self.slow:
            out.append(f"  not judged (the kubelet over {SEQUENCE_KUBELET_CPU_SECONDS:g}s of CPU "
                       f"in the sequence or {SLOW_ADMISSION_SECONDS:g}s for one admission: "
                       "the Topology Manager merging every permutation of its hints): "
                       "sequences " + ", ".join(str(r.index) for r in self.slow))
        exact: Counter[str] = Counter()
        for result in self.results:
            exact.update(dict(result.exact))
        out.append(f"  exactly compared (the first copy of each shape answer admitted): "
                   f"{exact['cpus']} containers' CPU ids and memory blocks, {exact['nodes']} "
                   f"NUMA nodes' memory after it, {exact['devices']} device picks "
                   f"({exact['random_devices']} more the kubelet's map order and "
                   f"{exact['after_draw']} containers whose hints followed one, counted only)")
        refused = [r for r in judged if r.refused_restarts]
        out.append(f"  kubelet restarts: {sum(r.restarts for r in judged)} taken, "
                   f"{sum(r.refused_restarts for r in refused)} not taken in {len(refused)} "
                   "sequences (the kubelet would refuse to start: strict-cpu-reservation, every "
                   "other CPU assigned, validateState's \"default cpuset cannot be empty\")")
        if kinds:
            out.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        if each:
            for result in self.disagreeing:
                out.append(f"  sequence {result.index}: "
                           + replay_command(self.seed, result.index, self.release))
                for d in result.differences[:6]:
                    step = result.steps[d.step] if d.step < len(result.steps) else "refused"
                    out.append(f"    step {d.step} ({step}) {d.kind}: {d.detail}"
                               + (f" — {d.fresh}" if d.fresh else ""))
        return out


def replay_command(seed: int, index: int, release: str) -> str:
    return (f"python -m tests.support.differential.sequences --seed {seed} --sequence {index} "
            f"--version {release} -v")


def run_share(release: str, seed: int, indices: list[int]) -> list[SequenceResult]:
    """One worker's sequences, on its own real kubelet. The exporter's own log lines (a
    kubelet restart, each rejection it judges) stay out, but for errors; the level is put
    back, since with one worker this runs in the caller's process."""
    logger = logging.getLogger("exporter")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return asyncio.run(_share(release, seed, indices))
    finally:
        logger.setLevel(level)


async def _share(release: str, seed: int, indices: list[int]) -> list[SequenceResult]:
    directory = workdir()
    results = []
    with RealKubelet.start(release) as kubelet:
        for index in indices:
            results.append(await run_sequence(kubelet, seed, index, directory))
    return results


def run_sequences(release: str, seed: int, count: int, first: int = 0,
                  workers: int = WORKERS, judged: bool = False) -> SequenceSummary:
    """Sequences ``first`` … ``first + count - 1``; with ``judged``, more after them until
    ``count`` were judged (neither refused by the kubelet nor slow)."""
    summary = SequenceSummary(release, seed)
    started = time.perf_counter()
    results = run_indices(release, seed, list(range(first, first + count)), workers)
    end = first + count
    while judged and (missing := count - sum(1 for r in results
                                             if not (r.skipped or r.slow))) > 0:
        results += run_indices(release, seed, list(range(end, end + missing)), workers)
        end += missing
    summary.results = sorted(results, key=lambda r: r.index)
    summary.seconds = time.perf_counter() - started
    return summary


def run_indices(release: str, seed: int, indices: list[int],
                workers: int) -> list[SequenceResult]:
    workers = max(1, min(workers, len(indices)))
    if workers == 1:
        return run_share(release, seed, indices)
    # spawned, not forked: gRPC threads
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        shares = [indices[w::workers] for w in range(workers)]
        return [r for share in pool.map(run_share, [release] * workers, [seed] * workers,
                                        shares) for r in share]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.differential.sequences")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sequences", type=int, default=20)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--sequence", type=int, help="replay this one sequence")
    parser.add_argument("--version", default="1.37", choices=sorted(RELEASES))
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.sequence is not None:
        summary = run_sequences(args.version, args.seed, 1, args.sequence, workers=1)
        (result,) = summary.results
        if args.verbose:
            sequence = draw_sequence(args.seed, args.sequence)
            print("node:", json.dumps(sequence.profile, sort_keys=True))
            for shape in sequence.shapes:
                print(f"shape {shape.name}:", json.dumps(shape.shape(), sort_keys=True))
            for number, step in enumerate(result.steps):
                print(f"step {number}: {step}")
    else:
        summary = run_sequences(args.version, args.seed, args.sequences, args.first)
    print("\n".join(summary.lines(each=True)))
    return 0 if not summary.disagreeing else 1


if __name__ == "__main__":
    sys.exit(main())
