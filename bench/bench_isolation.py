"""Benchmark: what the strict isolation level costs, per problem, against basic, in one run.

Each problem of the reference solutions is graded at both levels, interleaved and in alternating
order, each run for a learner of its own (so that neither level finds the grader's compiled
references warm from the other's run: the references run beside the worker, on the same two
cores); a problem's time is its worker's wall time, start-up to kill (ProblemResult.seconds). A bare worker running a one-line function
shows the jail's own cost (namespaces, Landlock and seccomp set-up, reaping the pid namespace).
The goal: under 0.1 s per problem. Run: ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.1


def bare(level: str) -> float:
    from autograder.sandbox.outside import Worker

    start = time.perf_counter()
    run = Worker("def f(x):\n    return x + 1\n", "f", [(1,)], level=level).wait()
    assert run.status == "ok" and run.cases[0]["value"] == 2, run
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from autograder.sandbox.outside import resolve

    strict = resolve("auto")
    if strict.level != "strict":
        print(f"isolation: strict is not available here ({'; '.join(strict.missing)}): nothing to compare")
        return
    from ckptlab import setup_devices

    setup_devices()
    from autograder import registry
    from autograder.grade import grade

    levels = ("strict", "basic")
    workers = {level: [] for level in levels}
    for _ in range(max(5, args.repeat)):
        for level in levels:
            workers[level].append(bare(level))
    times = {level: {} for level in levels}
    for i in range(args.repeat):
        for level in levels if i % 2 == 0 else levels[::-1]:
            report = grade([ROOT / "solutions"], f"bench-isolation-{level}-{i}", jobs=1, isolation=level)
            assert report.score == report.max_score and report.isolation == level, report.to_json()
            for p in report.problems:
                times[level].setdefault(p.id, []).append(p.seconds)

    med = statistics.median
    print(f"isolation overhead, strict vs basic ({args.repeat} interleaved runs, medians):")
    print(f"  bare worker (one-line function): strict {med(workers['strict']):.3f} s, basic "
          f"{med(workers['basic']):.3f} s, overhead {med(workers['strict']) - med(workers['basic']):+.3f} s")
    print(f"  {'problem':8} {'strict':>8} {'basic':>8} {'overhead':>9} {'ratio':>6}")
    overheads = []
    for p in registry.PROBLEMS:
        s, b = med(times["strict"][p.id]), med(times["basic"][p.id])
        overheads.append(s - b)
        print(f"  {p.id:8} {s:7.2f}s {b:7.2f}s {s - b:+8.3f}s {s / b:5.2f}x")
    worst = max(overheads)
    print(f"  per problem: median {med(overheads):+.3f} s, worst {worst:+.3f} s; goal under {GOAL} s: "
          f"{'met' if med(overheads) < GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
