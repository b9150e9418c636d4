"""Benchmark: the similarity report's time per KB of a learner's code, honest and crafted.

A class of learners for problem 2.5 (the reference's code, its names changed per learner), then the
same class beside one crafted member: a right answer followed by thousands of dead assignments after
its `return`, each sorting before the last (a hostile holdout's: 1,500 of them took minutes when
ordering statements was a bubble sort). Prints each report's seconds and its seconds per KB of code
read, and whether the crafted member's code was cut at ``similarity.MAX_CHARS``. The goal: the
crafted class's time per KB within a few times the honest one's. Run: ``make bench``.
"""

from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT))
    from autograder import registry
    from autograder.classroom import similarity

    pid = "2.5"
    problem = registry.get(pid)
    stubs = similarity.course_code(ROOT / "problems", (problem,))
    references = similarity.course_code(ROOT / "solutions", (problem,))
    base = references[pid]
    honest = {f"learner{i}": base.replace("shard", f"piece{i}") for i in range(12)}
    end = base.index("\n", base.rindex("return"))
    for n in (400, 1500, 4000):
        dead = "".join(f"    z{i} = math.f{n - i:05d}\n" for i in range(n))
        for label, codes in (("honest", honest), (f"with one crafted ({n} dead assignments)",
                                                  {**honest, "crafted": base[:end + 1] + dead + base[end + 1:]})):
            kb = sum(len(c) for c in codes.values()) / 1024
            start = time.perf_counter()
            cut_codes, cut = similarity.capped({pid: codes})
            similarity.compare(cut_codes, stubs, references)
            seconds = time.perf_counter() - start
            print(f"{label:42s} {kb:7.0f} KB read  {seconds:6.2f} s  {1000 * seconds / kb:6.2f} ms per KB"
                  f"{'  (cut: ' + ', '.join(cut[pid]) + ')' if cut else ''}")


if __name__ == "__main__":
    main()
