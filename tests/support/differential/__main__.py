"""``python -m tests.support.differential``: run seeded cases against the real kubelet and the
fit engine, print the counts and each disagreement; ``--case N -v`` replays one case in full."""

from __future__ import annotations

import argparse
import json
import sys

from ..realkubelet import RELEASES, RealKubelet
from .cases import draw_case
from .classify import classify
from .exceptions import EXCEPTIONS
from .runner import run_case, workdir
from .summary import run_many


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.differential")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=200, help="how many cases (from --first)")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--case", type=int, help="replay this one case")
    parser.add_argument("--version", default="1.37", choices=tuple(RELEASES))
    parser.add_argument("--hidden-state", action="store_true",
                        help="the exporter reads no state file (the default chart mounts none)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.case is not None:
        return replay(args.seed, args.case, args.version, args.verbose, not args.hidden_state)
    summary = run_many(args.version, args.seed, args.cases, args.first,
                       state_files=not args.hidden_state)
    print("\n".join(summary.lines(each=True)))
    return 0 if not summary.disagreements else 1


def replay(seed: int, index: int, release: str, verbose: bool, state_files: bool = True) -> int:
    case = draw_case(seed, index)
    print(case.describe())
    if verbose:
        print("node:", json.dumps(case.profile, sort_keys=True))
        for pod in case.pods:
            print(f"pod {pod.name} ({pod.qos}, {'started' if pod.start else 'pending'}):",
                  json.dumps(pod.shape(), sort_keys=True))
        print("candidate:", json.dumps(case.candidate.shape(), sort_keys=True))
    with RealKubelet.start(release) as kubelet:
        outcome = run_case(kubelet, case, workdir(), state_files)
    if outcome.skipped:
        print("the kubelet refuses this node:", outcome.skipped)
        return 0
    real, fit = outcome.real, outcome.fit
    assert real is not None and fit is not None
    print(f"kubelet: {'admits' if real.admitted else 'rejects'} {real.reason} {real.message}; "
          f"capacity {outcome.real_capacity} (stopped by {outcome.stop_reason or 'the cap'})")
    if verbose:
        for container in real.containers.values():
            print(f"  {container.kind} {container.name}: cpus {list(container.cpus)}, memory "
                  f"{list(container.memory)}, devices {container.devices}, affinity "
                  f"{container.numa} preferred {container.preferred}")
    print(f"fit engine: {'admits' if fit.verdict.admitted else 'rejects'} {fit.verdict.reason} "
          f"({fit.verdict.blocking_resource}); capacity {fit.capacity}")
    if verbose:
        for placement in fit.verdict.placements:
            print(f"  {placement.container}: hint {sorted(placement.hint or ())}, cpus "
                  f"{sorted(placement.cpus)}, memory {sorted(placement.memory)}, devices "
                  f"{ {r: sorted(n) for r, n in placement.devices.items()} }")
        print("unlisted holdings:", outcome.held)
        print("assumes:", ", ".join(fit.assumptions) or "nothing")
        for seconds, merges in outcome.timing.admissions:
            print(f"  admission: {seconds:.3f}s in the kubelet, merges (permutations, seconds, "
                  f"reduced): {list(merges)}")
    if outcome.exception:
        print(f"named exception [{outcome.exception}]: {EXCEPTIONS[outcome.exception]}; "
              + "; ".join(outcome.excepted))
        return 0
    if outcome.differences:
        print(f"DISAGREE [{classify(outcome)}]: " + "; ".join(outcome.details))
        return 1
    print("agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
