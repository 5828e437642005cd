"""One step of a differential sequence judged (:mod:`.sequences`): the running exporter's
/metrics page and fit answers against the real kubelet's managers and admissions.

- the per-NUMA figures and ``podresources_numa_free`` equal what the managers' dump gives
  (:mod:`tests.support.managerfigures`);
- the /metrics shape series say what the fit answers say (admitted, reason, capacity);
- each shape's answer agrees with the real kubelet, compared as the differential compares a
  case (:func:`.runner.compare`: verdict, reason, each container's NUMA set, capacity, and the
  first copy exactly, :mod:`.exact`: CPU ids, memory blocks, devices where determined): copies
  of the shape are admitted one after another until the kubelet refuses one, then deleted
  (:func:`probe`; what they leave in the managers' state goes at the next admission's
  ``removeStaleState``, as any deleted pod's does, and a memory group a copy broke stays
  broken, so each shape after the first is judged on the exporter's answer to the state the
  probe before left). The named exceptions apply as there.

A difference is checked once more against a fresh ``snapshot`` read of the same node
(:func:`fresh_opinion`), which says whether the running exporter's kept state or the model is
at fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exporter.commands.snapshot import read_once
from exporter.fit.answers import CAPACITY_CAP

from ..harness import Scrape
from ..managerfigures import (
    expected_figures,
    expected_numa_free,
    metrics_figures,
    metrics_numa_free,
)
from ..realkubelet import Admission, RealKubelet
from .cases import Case, PodDraw
from .classify import classify
from .exceptions import PLUGIN_NOT_REGISTERED, told_unregistered, unregistered_resources
from .runner import FitRead, Outcome, compare, except_if_told, except_unseen
from .serving import RunningExporter, wait_caught_up
from .steps import NAMESPACE, SLOW_ADMISSION_SECONDS, Sequence


@dataclass(frozen=True)
class Difference:
    step: int
    kind: str  # figures, served, context, or a case's kinds (verdict, reason, ...)
    detail: str
    fresh: str = ""  # what a fresh snapshot of the same node says


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


def probe(kubelet: RealKubelet, shape: PodDraw,
          tag: str) -> tuple[Admission, int, str, dict[str, Any] | None]:
    """The kubelet's answer for one more pod of ``shape``: the first copy's admission, how
    many copies it admits one after another (up to the fit engine's cap), why it refused the
    next, and the managers' dump just after the first copy (None when it was refused: what
    exact.py compares); every copy is deleted again."""
    names = []
    first = last = after = None
    admitted = 0
    while admitted < CAPACITY_CAP:
        name = f"{shape.name}-{tag}-{admitted}"
        names.append(name)
        last = kubelet.admit(shape.manifest(name, NAMESPACE), timeout=SLOW_ADMISSION_SECONDS)
        if first is None:
            first = last
            after = kubelet.dump() if last.admitted else None
        if not last.admitted:
            break
        admitted += 1
    for name in names:
        kubelet.remove(NAMESPACE, name)
    assert first is not None and last is not None
    return first, admitted, "" if last.admitted else last.reason, after


async def judge_step(kubelet: RealKubelet, sequence: Sequence, number: int,
                     description: dict[str, Any], exporter: RunningExporter,
                     moment: float, clock: Clock,
                     exact: Counter[str]) -> tuple[list[Difference], list[str], int]:
    """One step's comparisons (``moment``: when the step was applied): (differences, named
    exceptions, shape answers compared); what was compared exactly is counted in ``exact``
    (exact.py's kinds, and ``random_devices``: device picks of the kubelet's map order)."""
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
            first, capacity, stop, after = await asyncio.to_thread(probe, kubelet, shape,
                                                                   f"s{number}")
        case = Case(sequence.seed, sequence.index, sequence.profile, (), shape)
        # with the dumps, compare() checks the first copy exactly (exact.py): its CPU ids,
        # memory blocks, each NUMA node's memory after it, devices where determined
        outcome = Outcome(case, real=first, real_capacity=capacity, stop_reason=stop, fit=mine,
                          dumps=(dump, after))
        now = health_now(description, dump)
        compare(outcome, now)
        if outcome.differences:
            read = FitRead(mine, current.state, current.rules)
            except_unseen(outcome, now, dump, read)
            except_unregistered(outcome, now, dump, read)
        compared += 1
        if outcome.exact is not None:
            exact.update(outcome.exact.compared)
            exact["random_devices"] += outcome.exact.random_devices
        if outcome.exception:
            named.append(f"step {number} {shape.name}: {outcome.exception}")
        for kind, detail in zip(outcome.differences, outcome.details, strict=True):
            found.append(Difference(number, kind, f"{shape.name} [{classify(outcome)}] "
                                    f"{detail}; {placements(first, mine, dump)}"))
    return found, named, compared


def health_now(description: dict[str, Any], dump: dict[str, Any]) -> dict[str, Any]:
    """``description`` with each device healthy as the device manager has it now (a
    ``health`` step, a plugin not registered again yet), not as the node was reset: the exact
    comparison's device tiers take the healthy devices (exact.py)."""
    registered = dump["device_manager"]["registered"] or {}
    devices = [{**d, "healthy": registered.get(d["resource"], {}).get(d["id"], {})
                .get("healthy", d["healthy"])} for d in description["devices"]]
    return {**description, "devices": devices}


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
