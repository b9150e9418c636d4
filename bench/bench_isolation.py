"""Benchmark: what the strict isolation level costs, per problem, against basic, in one run.

Each problem of the reference solutions is graded at both levels, interleaved and in alternating
order, each run for a learner of its own (so that neither level finds the grader's compiled
references warm from the other's run: the references run beside the worker, on the same two
cores); a problem's time is its worker's wall time, start-up to kill (ProblemResult.seconds). A bare worker running a one-line function
shows the jail's own cost (namespaces, Landlock and seccomp set-up, reaping the pid namespace).
The goal: under 0.1 s per problem. Each optional mechanism (a root grader's cgroups, Landlock below
the kernel's ABI) is timed on its own too. Run: ``make bench``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.1


def bare(level: str, **kw) -> float:
    from autograder.sandbox import Worker

    start = time.perf_counter()
    run = Worker("def f(x):\n    return x + 1\n", "f", [(1,)], level=level, **kw).wait()
    assert run.status == "ok" and run.cases[0]["value"] == 2, run
    return time.perf_counter() - start


def mechanisms() -> list[str]:
    """A bare strict worker's time with each optional mechanism on and off: a root grader's
    cgroups (processes, memory, CPU), Landlock at the kernel's ABI or capped at ABI 1 (where
    seccomp refuses truncate instead), and the level without namespaces (where a machine refuses
    them: no fork, the scratch folder watched from outside)."""
    import os

    from autograder.sandbox import cgroups

    def timed(**switch) -> float:
        saved_cgroups, saved_cap = cgroups.worker_cgroups, os.environ.pop("CKPT_TEST_LANDLOCK_ABI", None)
        try:
            if switch.get("no_cgroups"):
                cgroups.worker_cgroups = lambda *a: []
            if switch.get("abi"):
                os.environ["CKPT_TEST_LANDLOCK_ABI"] = switch["abi"]
            return statistics.median(bare("strict", **({"namespaces": False} if switch.get("no_namespaces") else {}))
                                     for _ in range(7))
        finally:
            cgroups.worker_cgroups = saved_cgroups
            os.environ.pop("CKPT_TEST_LANDLOCK_ABI", None)
            if saved_cap is not None:
                os.environ["CKPT_TEST_LANDLOCK_ABI"] = saved_cap

    full, plain, abi1, no_ns = timed(), timed(no_cgroups=True), timed(abi="1"), timed(no_namespaces=True)
    made = cgroups.worker_cgroups()
    for cgroup in made:
        cgroups.remove_cgroup(cgroup)
    return [f"everything this machine gives: {full:.3f} s",
            f"cgroups ({len(made)} made per worker; none here unless the grader is root): "
            f"{full - plain:+.3f} s against none",
            f"Landlock capped at ABI 1 (seccomp refuses truncate): {abi1 - full:+.3f} s against the kernel's ABI",
            f"without namespaces (Docker's default profile): {no_ns - full:+.3f} s against with them"]


_WRITER = """
def f():
    block = b"x" * 2**24
    n = 0
    while True:
        with open(f"w{n}", "wb") as out:
            for _ in range(16):  # 256 MiB a file, the most one file may hold
                out.write(block)
        n += 1
"""


def scratch_overshoot() -> str:
    """Without namespaces the scratch folder is measured from outside: how far past 512 MiB a
    writer as fast as this machine allows gets before it is stopped (medians of 5)."""
    from autograder.sandbox import STRICT, Worker, jail

    over = []
    for _ in range(5):
        worker = Worker(_WRITER, "f", [()], timeout=60, level=STRICT, namespaces=False)
        worker.thread.join()
        used = sum(os.lstat(os.path.join(worker.scratch, n)).st_blocks * 512 for n in os.listdir(worker.scratch))
        status = worker.wait().status
        assert status == "scratch_full", status
        over.append(used - jail.SCRATCH_BYTES)
    return (f"without namespaces, a writer at full speed was stopped {statistics.median(over) / 2**20:.0f} MiB past "
            f"the scratch folder's 512 MiB (worst {max(over) / 2**20:.0f} MiB of 5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from autograder.sandbox import resolve

    strict = resolve("auto")
    if strict.level != "strict":
        print(f"isolation: strict is not available here ({'; '.join(strict.missing)}): nothing to compare")
        return
    from ckptlab import setup_devices

    setup_devices()
    from autograder import registry
    from autograder.engine.grade import grade

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
    print("strict worker by mechanism (bare worker, start to kill, medians of 7):")
    for line in mechanisms() + [scratch_overshoot()]:
        print("  " + line)
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
