"""Benchmark: grade-batch's memory as the class grows and as units are added, at the strict isolation level.

1. ``grade-batch -j 2`` over classes of 4, 8 and 16 full submissions (copies of the reference
   solutions): the grading process's peak resident set for each, its growth per extra learner, and
   the peak of its whole tree (the grading process, the zygote and its workers, the references'
   server and the processes it forks), summed as proportional set sizes (a page shared by several
   processes counted once), sampled every 100 ms.
2. Unit by unit, a class of 8 graded on that unit alone: the same two peaks, so that a unit whose
   references (or workers) need more than the others shows.
3. In one grading process, learner after learner: its resident set after each, so that state a
   learner's grading leaves behind (caches, compiled code) shows as growth.

The references' own work (models built, checkpoints written, programs compiled) runs in short-lived
processes of its own (autograder/engine/trusted_side.py): the grading process holds the class, not
what its references used. Targets: the grading process under 1 GiB for 8 learners, under 20 MiB per
extra learner. Run: ``make bench``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# grade-batch, in this process's child, reporting its own peak resident set when it exits.
_BATCH = r'''
import atexit, runpy, sys
# (its own high-water mark, VmHWM: ru_maxrss would keep the forked bench's from before exec)
atexit.register(lambda: print("PEAK", next(int(l.split()[1]) for l in open("/proc/self/status")
                                           if l.startswith("VmHWM:")) * 1024, file=sys.stderr))
sys.argv = ["autograder", "grade-batch", *sys.argv[1:]]
runpy.run_module("autograder", run_name="__main__")
'''


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (read from /proc: each process's children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


class TreePeak:
    """The largest sum of proportional set sizes over a process's tree, sampled every 100 ms on a thread."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, sum(_pss(p) for p in _tree(self.pid)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def batch(subs: Path, out: Path, *extra: str) -> tuple[int, int]:
    """(the grading process's peak resident set, its tree's peak) for grade-batch -j 2 of ``subs``."""
    proc = subprocess.Popen([sys.executable, "-c", _BATCH, str(subs), "--out", str(out), "-j", "2", "--quiet", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = TreePeak(proc.pid)
    stdout, stderr = proc.communicate()
    tree_peak = tree.stop()
    if proc.returncode:
        sys.exit(stderr[-3000:])
    return int(next(line.split()[1] for line in stderr.splitlines() if line.startswith("PEAK"))), tree_peak

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
    parser.add_argument("--per-unit", type=int, default=8, metavar="N",
                        help="the class graded unit by unit (0: not at all)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    peaks = {}
    print("grade-batch -j 2 at the strict level, full submissions (the reference solutions):", flush=True)
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            peaks[n], tree = batch(class_of(n, Path(tmp) / "subs"), Path(tmp) / "results")
        print(f"  {n:3} learners: grading process peak {peaks[n] / 2**20:7,.0f} MiB; its whole tree "
              f"{tree / 2**20:7,.0f} MiB", flush=True)
    if len(sizes) > 1:
        slope = (peaks[sizes[-1]] - peaks[sizes[0]]) / (sizes[-1] - sizes[0])
        print(f"  growth per extra learner ({sizes[0]} -> {sizes[-1]}): {slope / 2**20:.1f} MiB "
              f"(target < 20 MiB: {'met' if slope < 20 * 2**20 else 'NOT MET'})")
    if 8 in peaks:
        print(f"  8 learners: {peaks[8] / 2**20:,.0f} MiB (target < 1024 MiB: {'met' if peaks[8] < 2**30 else 'NOT MET'})")

    if args.per_unit:
        from autograder import registry

        print(f"\nunit by unit, a class of {args.per_unit} graded on that unit alone (grade-batch -j 2 --unit N):",
              flush=True)
        for unit in registry.units():
            with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
                own, tree = batch(class_of(args.per_unit, Path(tmp) / "subs"), Path(tmp) / "results", "--unit", str(unit))
            print(f"  unit {unit}: grading process peak {own / 2**20:6,.0f} MiB; its whole tree {tree / 2**20:6,.0f} MiB",
                  flush=True)

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
