"""Differential sequences: a running exporter against the real kubelet, step after step.

A sequence is a node and one or two shapes (drawn as a case's are), then :data:`STEPS` random
steps (:mod:`.steps`: admissions, starts, init containers finishing, pods ending and deleted,
device health changes, kubelet restarts). One ``serve`` (:mod:`.serving`) runs against the
node from the first step to the last, reading what a deployed exporter reads: the real
podresources socket, the node's sysfs, the kubelet's state files (``--watch-path``), its
config file, the shapes file, and pod context from the kubelet's Pods API (1.37) or the
Kubernetes-API view of an API server the test keeps in step with the kubelet (1.34). After
every step, once the exporter has refreshed since:

- the per-NUMA figures of its /metrics page equal those the managers' dump gives
  (:func:`tests.support.managerfigures.expected_figures`);
- its /metrics shape series say what its fit answers say (admitted, reason, capacity);
- each shape's answer agrees with the real kubelet, compared as the differential compares a
  case (:func:`.runner.compare`: verdict, reason, each container's NUMA set, capacity): copies
  of the shape are admitted one after another until the kubelet refuses one, then deleted
  (what they leave in the managers' state goes at the next admission's ``removeStaleState``,
  as any deleted pod's does). The named exceptions apply as there (:func:`.runner.except_unseen`).

A difference found is checked once more against a fresh ``snapshot`` read of the same node,
which says whether the running exporter's kept state or the model is at fault::

    python -m tests.support.differential.sequences --seed 1 --sequences 20 --version 1.37
    python -m tests.support.differential.sequences --seed 1 --sequence 7 --version 1.37 -v
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exporter.commands.snapshot import read_once
from exporter.fit.answers import CAPACITY_CAP
from exporter.simulator.apiserver import FakeApiServer
from exporter.simulator.profile import parse_profile

from ..harness import Scrape
from ..managerfigures import (
    expected_figures,
    expected_numa_free,
    metrics_figures,
    metrics_numa_free,
)
from ..realkubelet import (
    Admission,
    RealKubelet,
    RealKubeletError,
    RealKubeletTimeout,
    node_description,
    write_kubelet_config,
)
from .cases import Case, PodDraw
from .classify import classify
from .exceptions import PLUGIN_NOT_REGISTERED, told_unregistered, unregistered_resources
from .runner import (
    FitRead,
    Outcome,
    compare,
    except_if_told,
    except_unseen,
    workdir,
)
from .serving import INTERVAL, MAX_REFRESH_RATE, RunningExporter, wait_caught_up
from .steps import (
    NAMESPACE,
    SLOW_ADMISSION_SECONDS,
    STEPS,
    Sequence,
    draw_sequence,
    set_devices,
    take_step,
)

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
class Difference:
    step: int
    kind: str  # figures, served, context, or a case's kinds (verdict, reason, ...)
    detail: str
    fresh: str = ""  # what a fresh snapshot of the same node says


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
    probes: int = 0  # shape answers compared
    spent: tuple[tuple[str, float], ...] = ()  # seconds by part (Clock)
    cpu: float = 0.0  # CPU seconds: this process (the exporter, the driver) and the kubelet's


class Clock:
    """Where a sequence's time goes: the kubelet's steps, its dumps, waiting for the
    exporter, the kubelet's probes, fresh snapshots."""

    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.spent[part] += time.perf_counter() - started


def probe(kubelet: RealKubelet, shape: PodDraw, tag: str) -> tuple[Admission, int, str]:
    """The kubelet's answer for one more pod of ``shape``: the first copy's admission, how
    many copies it admits one after another (up to the fit engine's cap), why it refused the
    next; every copy is deleted again."""
    names = []
    first = last = None
    admitted = 0
    while admitted < CAPACITY_CAP:
        name = f"{shape.name}-{tag}-{admitted}"
        names.append(name)
        last = kubelet.admit(shape.manifest(name, NAMESPACE), timeout=SLOW_ADMISSION_SECONDS)
        first = first or last
        if not last.admitted:
            break
        admitted += 1
    for name in names:
        kubelet.remove(NAMESPACE, name)
    assert first is not None and last is not None
    return first, admitted, "" if last.admitted else last.reason


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
    server = None
    environ: dict[str, str] = {}
    if node.pods_api_socket is not None:
        argv += ["--pods-api-socket", node.pods_api_socket]
    else:  # 1.34: no Pods API; the pods through the Kubernetes API
        server = await FakeApiServer().start()
        await asyncio.to_thread(sync_api_server, kubelet, server)
        environ["KUBECONFIG"] = str(server.write_kubeconfig(directory / "kubeconfig"))
        argv += ["--kube-api", "--no-pods-api"]
    exporter = await RunningExporter(argv, environ).start()
    differences: list[Difference] = []
    exceptions: list[str] = []
    probes = 0
    clock = Clock()
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
                if server is not None:
                    await asyncio.to_thread(sync_api_server, kubelet, server)
            found, named, compared = await judge_step(kubelet, sequence, number, description,
                                                      exporter, moment, clock)
            probes += compared
            exceptions.extend(named)
            if found:
                with clock("fresh"):
                    fresh = await fresh_opinion(sequence, exporter, environ, description,
                                                kubelet)
                differences.extend(Difference(d.step, d.kind, d.detail, fresh) for d in found)
    except RealKubeletTimeout as error:  # the component was started again, with no node
        slow = str(error)
    finally:
        await exporter.stop()
        if server is not None:
            await server.stop()
    return SequenceResult(index, time.perf_counter() - started,
                          tuple(s.describe() for s in sequence.steps), slow=slow,
                          differences=tuple(differences), exceptions=tuple(exceptions),
                          restarts=sequence.restarts, probes=probes,
                          spent=tuple(sorted(clock.spent.items())), cpu=cpu)


def sync_api_server(kubelet: RealKubelet, server: FakeApiServer) -> None:
    """The API server's Node and pods as the kubelet keeps them there now: pods deleted from
    the kubelet are deleted from it, the others put (a watcher sees only what changed)."""
    node, pods = kubelet.api_objects()
    server.put("nodes", node)
    current = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
    for namespace, name in [k for k in server.objects["pods"] if k not in current]:
        server.delete("pods", name, namespace)
    for pod in pods:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        stored = server.objects["pods"].get(key)
        if stored is None or _without_version(stored) != _without_version(pod):
            server.put("pods", pod)


def _without_version(pod: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in pod["metadata"].items()
            if k not in ("resourceVersion", "creationTimestamp")}
    return {**pod, "metadata": meta}


async def judge_step(kubelet: RealKubelet, sequence: Sequence, number: int,
                     description: dict[str, Any], exporter: RunningExporter,
                     moment: float, clock: Clock) -> tuple[list[Difference], list[str], int]:
    """One step's comparisons (``moment``: when the step was applied): (differences, named
    exceptions, shape answers compared)."""
    with clock("dumps"):
        dump = await asyncio.to_thread(kubelet.dump)
    with clock("exporter"):
        current, lag = await wait_caught_up(exporter, moment, dump)
    if current is None:
        return [Difference(number, "context", f"the exporter did not catch up: {lag}")], [], 0
    found: list[Difference] = []
    expected = expected_figures(dump, description)
    reported = metrics_figures(current.scrape)
    for kind, figures in expected.items():
        if reported[kind] != figures:
            found.append(Difference(number, "figures", f"{kind}: kubelet {sorted(figures.items())}"
                                    f", exporter {sorted(reported[kind].items())}"))
    free, reported_free = expected_numa_free(dump, description), metrics_numa_free(current.scrape)
    if any(reported_free.get(key) != value for key, value in free.items()):
        found.append(Difference(number, "numa_free", f"kubelet {sorted(free.items())}, exporter "
                                f"{sorted(reported_free.items())}"))
    named: list[str] = []
    compared = 0
    for position, shape in enumerate(sequence.shapes):
        if position:
            # the probe before left the kubelet's state changed (its copies came and went,
            # and not all of it comes back: a memory group a copy broke stays broken): the
            # next shape is judged on the exporter's answer to that state
            with clock("dumps"):
                dump = await asyncio.to_thread(kubelet.dump)
            with clock("exporter"):
                answered, lag = await wait_caught_up(exporter, time.monotonic(), dump)
            if answered is None:
                found.append(Difference(number, "context",
                                        f"the exporter did not catch up: {lag}"))
                break
            current = answered
        mine = current.answers.get(shape.name)
        if mine is None:
            found.append(Difference(number, "served", f"no answer for shape {shape.name}"))
            continue
        served = served_difference(current.scrape, shape.name, mine)
        if served:
            found.append(Difference(number, "served", served))
        with clock("probes"):
            first, capacity, stop = await asyncio.to_thread(probe, kubelet, shape,
                                                            f"s{number}")
        case = Case(sequence.seed, sequence.index, sequence.profile, (), shape)
        outcome = Outcome(case, real=first, real_capacity=capacity, stop_reason=stop, fit=mine)
        compare(outcome, description)
        if outcome.differences:
            read = FitRead(mine, current.state, current.rules)
            except_unseen(outcome, description, dump, read)
            except_unregistered(outcome, description, dump, read)
        compared += 1
        if outcome.exception:
            named.append(f"step {number} {shape.name}: {outcome.exception}")
        for kind, detail in zip(outcome.differences, outcome.details, strict=True):
            found.append(Difference(number, kind, f"{shape.name} [{classify(outcome)}] "
                                    f"{detail}; {placements(first, mine, dump)}"))
    return found, named, compared


def except_unregistered(outcome: Outcome, description: dict[str, Any], dump: dict[str, Any],
                        read: FitRead) -> None:
    """The named exception ``plugin-not-registered-yet``: the shape asks for a resource whose
    plugin has not registered with the restarted kubelet yet, and the fit engine, told that
    the resource has no device at all, agrees."""
    asked = {r for c in outcome.case.candidate.containers for r in c.devices}
    waiting = unregistered_resources(dump, asked)
    if outcome.differences and waiting:
        except_if_told(outcome, description, read, told_unregistered(read.state, waiting),
                       PLUGIN_NOT_REGISTERED)


def placements(real: Admission, mine: Any, dump: dict[str, Any]) -> str:
    """Both sides' placement of the first copy, and what the active pods hold: enough to
    see a disagreement without replaying it (device picks are random in the kubelet)."""
    kubelet = "; ".join(f"{c.name} {c.numa} preferred={c.preferred} cpus={list(c.cpus)} "
                        f"memory={[(t, s, list(n)) for t, s, n in c.memory]} "
                        f"devices={c.devices}" for c in real.containers.values())
    fit = "; ".join(f"{p.container} hint={sorted(p.hint) if p.hint is not None else None} "
                    f"cpus={sorted(p.cpu_ids)} "
                    f"memory={[(t, s, sorted(n)) for t, s, n in p.memory_blocks]} "
                    f"devices={ {r: dict(n) for r, n in p.device_sets.items()} }"
                    for p in mine.verdict.placements)
    held = "; ".join(f"{p['name']}/{c['name']} cpus={c['cpus']} devices={c['devices']} "
                     f"memory={[(b['type'], b['size'], b['numa']) for b in c['memory']]}"
                     for p in dump["pods"] or () if p["active"] for c in p["containers"] or ()
                     if c["cpus"] or c["devices"] or c["memory"])
    return f"kubelet: {kubelet} | fit engine: {fit} | held: {held}"


def served_difference(scrape: Any, name: str, answer: Any) -> str:
    """Where /metrics does not say what the fit answer says."""
    verdict = answer.verdict
    admitted = scrape.get("podresources_shape_admitted", shape=name)
    capacity = scrape.get("podresources_shape_capacity", shape=name)
    reasons = {k[0] for k in scrape.by("podresources_shape_rejection_info", "reason",
                                       "blocking_resource", shape=name)}
    want_reasons = set() if verdict.admitted or not verdict.reason else {verdict.reason}
    if admitted != int(verdict.admitted) or capacity != answer.capacity \
            or reasons != want_reasons:
        return (f"{name}: /metrics admitted={admitted} capacity={capacity} reasons={reasons}, "
                f"answer admitted={verdict.admitted} capacity={answer.capacity} "
                f"reason={verdict.reason}")
    return ""


async def fresh_opinion(sequence: Sequence, exporter: RunningExporter,
                        environ: dict[str, str], description: dict[str, Any],
                        kubelet: RealKubelet) -> str:
    """What a fresh ``snapshot`` of the node says (its figures against the managers' dump, its
    shape answers against the running exporter's): whether the running exporter's kept state
    or the model is at fault. The probes' copies are gone again by then."""
    refresher, _ = await read_once(exporter.settings, kube_environ=environ)
    fit = refresher.fit
    if fit is None or fit.state is None or fit.config is None:
        return f"fresh snapshot: no fit state ({refresher.last_error})"
    dump = await asyncio.to_thread(kubelet.dump)
    scrape = Scrape(refresher.body(openmetrics=False).decode())
    figures = (metrics_figures(scrape) == expected_figures(dump, description)
               and all(metrics_numa_free(scrape).get(key) == value
                       for key, value in expected_numa_free(dump, description).items()))
    said = [f"fresh snapshot: figures {'as' if figures else 'unlike'} the kubelet's"]
    rules = fit.config.rules()
    running = await exporter.answers()
    for shape in sequence.shapes:
        fresh = fit.answer(next(s for s in fit.current_shapes() if s.name == shape.name), rules)
        kept = running.answers.get(shape.name)
        same = kept is not None and (fresh.verdict.admitted, fresh.verdict.reason,
                                     fresh.capacity) == (kept.verdict.admitted,
                                                         kept.verdict.reason, kept.capacity)
        verdict = "admits" if fresh.verdict.admitted else f"rejects ({fresh.verdict.reason})"
        said.append(f"{shape.name} {verdict}, capacity {fresh.capacity} "
                    f"({'as' if same else 'unlike'} the running exporter)")
    return "; ".join(said)


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
        named = sum(len(r.exceptions) for r in self.results)
        cpu = sum(r.cpu for r in self.results)
        skipped = sum(1 for r in self.results if r.skipped)
        slowest = max(self.results, key=lambda r: r.seconds, default=None)
        out = [f"differential sequences, real kubelet {self.release}, seed {self.seed}: "
               f"{len(judged)} sequences of {STEPS} steps judged ({len(self.results)} drawn, "
               f"{skipped} nodes the kubelet refused, {len(self.slow)} slow), {self.steps} "
               f"steps ({', '.join(f'{op} {n}' for op, n in sorted(ops.items()))}), "
               f"{sum(r.probes for r in self.results)} shape answers compared, "
               f"{sum(len(r.differences) for r in self.results)} disagreements in "
               f"{len(self.disagreeing)} sequences, {named} named exceptions; "
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
        if kinds:
            out.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        if each:
            for result in self.disagreeing:
                out.append(f"  sequence {result.index}: "
                           + replay_command(self.seed, result.index, self.release))
                for d in result.differences[:6]:
                    out.append(f"    step {d.step} ({result.steps[d.step]}) {d.kind}: {d.detail}"
                               + (f" — {d.fresh}" if d.fresh else ""))
        return out


def replay_command(seed: int, index: int, release: str) -> str:
    return (f"python -m tests.support.differential.sequences --seed {seed} --sequence {index} "
            f"--version {release} -v")


def run_share(release: str, seed: int, indices: list[int]) -> list[SequenceResult]:
    """One worker's sequences, on its own real kubelet. The exporter's own log lines (a
    kubelet restart, each rejection it judges) stay out, but for errors."""
    logging.getLogger("exporter").setLevel(logging.ERROR)
    return asyncio.run(_share(release, seed, indices))


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
    parser.add_argument("--version", default="1.37", choices=("1.37", "1.34"))
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
