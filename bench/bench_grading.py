"""Benchmark: wall time to grade one whole submission, and the grader's overhead per problem.

Overhead = the time to grade a problem minus the time spent inside the learner's function
(worker start-up, JAX import, device set-up, encoding, judging). Run: ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()

    from ckptlab import setup_devices

    setup_devices()
    from autograder.grade import grade

    submission = ROOT / "solutions"  # a full-marks submission of every unit: every case runs
    walls, per_problem = [], {}
    for i in range(args.repeat):
        start = time.perf_counter()
        report = grade([submission], f"bench-{i}", jobs=args.jobs)
        walls.append(time.perf_counter() - start)
        assert report.score == report.max_score, report.to_json()
        for p in report.problems:
            per_problem.setdefault(p.id, []).append((p.seconds, p.code_seconds))

    print(f"whole submission ({len(per_problem)} problems), {args.repeat} runs:")
    print(f"  wall time: median {statistics.median(walls):.2f} s  (min {min(walls):.2f}, max {max(walls):.2f})")
    print(f"  {'problem':8} {'graded in':>10} {'learner code':>13} {'overhead':>9} {'overhead share':>15}")
    for pid, runs in per_problem.items():
        wall = statistics.median(r[0] for r in runs)
        code = statistics.median(r[1] for r in runs)
        print(f"  {pid:8} {wall:9.2f}s {code:12.2f}s {wall - code:8.2f}s {(wall - code) / wall:14.0%}")


if __name__ == "__main__":
    main()
