"""Benchmark: grade-batch's memory as the class grows, at the strict isolation level.

1. ``grade-batch -j 2`` over classes of 4, 8 and 16 full submissions (copies of the reference
   solutions): the grading process's peak resident set for each, and its growth per extra learner.
2. In one grading process, learner after learner: its resident set after each, so that state a
   learner's grading leaves behind (caches, compiled code) shows as growth.

Targets: under 1 GiB for 8 learners, under 20 MiB per extra learner. Run: ``make bench``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# grade-batch, in this process's child, reporting its own peak resident set when it exits.
_BATCH = r'''
import atexit, resource, runpy, sys
atexit.register(lambda: print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr))
sys.argv = ["autograder", "grade-batch", *sys.argv[1:]]
runpy.run_module("autograder", run_name="__main__")
'''

_SEQUENCE = r'''
import sys
from autograder.engine.grade import grade

def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS:")).split()[1]) * 1024

for i in range(int(sys.argv[2])):
    report = grade([sys.argv[1]], f"learner{i:03d}", isolation="strict")
    assert report.score == report.max_score
    print("RSS", i, rss(), flush=True)
'''


def class_of(n: int, folder: Path) -> Path:
    for i in range(n):
        shutil.copytree(ROOT / "solutions", folder / f"learner{i:03d}", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4,8,16")
    parser.add_argument("--sequence", type=int, default=10, help="learners graded one after another in one process")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    peaks = {}
    print("grade-batch -j 2 at the strict level, full submissions (the reference solutions):", flush=True)
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            subs = class_of(n, Path(tmp) / "subs")
            out = subprocess.run([sys.executable, "-c", _BATCH, str(subs), "--out", str(Path(tmp) / "results"),
                                  "-j", "2", "--quiet"], cwd=ROOT, capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            peaks[n] = int(next(line.split()[1] for line in out.stderr.splitlines() if line.startswith("PEAK")))
        print(f"  {n:3} learners: grading process peak {peaks[n] / 2**20:7,.0f} MiB", flush=True)
    if len(sizes) > 1:
        slope = (peaks[sizes[-1]] - peaks[sizes[0]]) / (sizes[-1] - sizes[0])
        print(f"  growth per extra learner ({sizes[0]} -> {sizes[-1]}): {slope / 2**20:.1f} MiB "
              f"(target < 20 MiB: {'met' if slope < 20 * 2**20 else 'NOT MET'})")
    if 8 in peaks:
        print(f"  8 learners: {peaks[8] / 2**20:,.0f} MiB (target < 1024 MiB: {'met' if peaks[8] < 2**30 else 'NOT MET'})")

    print(f"\none grading process, {args.sequence} learners one after another (resident set after each):", flush=True)
    out = subprocess.run([sys.executable, "-c", _SEQUENCE, str(ROOT / "solutions"), str(args.sequence)], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    rss = [int(line.split()[2]) for line in out.stdout.splitlines() if line.startswith("RSS")]
    print("  " + " -> ".join(f"{r / 2**20:,.0f}" for r in rss) + " MiB")
    if len(rss) > 3:  # early learners warm the libraries' caches and the allocator; the second half shows what stays
        half = len(rss) // 2
        per = (rss[-1] - rss[half - 1]) / (len(rss) - half)
        print(f"  growth per learner over the last {len(rss) - half}: {per / 2**20:.1f} MiB "
              f"(target < 20 MiB: {'met' if per < 20 * 2**20 else 'NOT MET'})")


if __name__ == "__main__":
    main()
