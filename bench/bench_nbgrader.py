"""Benchmark: the same class of submissions graded by `grade-batch` and by `nbgrader autograde`.

One run builds the nbgrader course (``python -m autograder nbgrader``), releases Unit 1, makes N
learners' submissions from the released notebook (full marks, curated wrong answers, stubs left,
syntax errors), and grades them both ways from the same files:

- ``nbgrader autograde unit1``: the course's nbgrader configuration grades each notebook with
  this grader (``GradeInSandbox``: no kernel, learner code only in jailed workers), one grading
  process per learner, one learner after another;
- ``python -m autograder grade-batch``: no kernel, only the problems' functions in workers, and
  learners in parallel.

It prints both wall times, their ratio, and checks that both give every learner the same score.
It also prints the time spent inside the learners' own functions (their eager Flax compiles,
mostly): shared over the jobs, no grader can take less, which bounds the ratio any grader reaches.
Run: ``make bench`` (or ``python bench/bench_nbgrader.py --learners 40``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import registry  # noqa: E402
from autograder.exports.nbgrader_course import write_course  # noqa: E402
from tests.nbgrader_work import reference_answers, submit, wrong_answer  # noqa: E402
from tests.wrong_answers import WRONG  # noqa: E402

UNIT = 1
NOTEBOOK = registry.UNITS[UNIT].notebook
IDS = [p.id for p in registry.PROBLEMS if p.unit == UNIT]
BIN = Path(sys.executable).parent


def learner_work(i: int, ref: dict[str, str]) -> dict[str, str]:
    """Learner i's answers: a deterministic mix of right, wrong, missing and broken."""
    kind = i % 4
    if kind == 0:
        return dict(ref)
    if kind == 1:  # one curated wrong answer, the rest right
        pid = IDS[i // 4 % len(IDS)]
        return {**ref, pid: wrong_answer(pid, i // 16 % len(WRONG[pid]))}
    if kind == 2:  # the first half solved, the rest stubs
        return {pid: ref[pid] for pid in IDS[: 1 + i // 4 % len(IDS)]}
    return {**ref, IDS[i // 4 % len(IDS)]: ref[IDS[i // 4 % len(IDS)]].replace("):", ")", 1)}  # a syntax error


def run(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("-j", "--jobs", type=int, default=2, help="grade-batch's parallel learners")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-nbgrader-") as tmp:
        tmp = Path(tmp)
        course = tmp / "course"
        write_course(course)
        run([str(BIN / "nbgrader"), "generate_assignment", f"unit{UNIT}"], course)
        released = course / "release" / f"unit{UNIT}" / NOTEBOOK
        ref = reference_answers(course / "source" / f"unit{UNIT}" / NOTEBOOK)
        batch_in = tmp / "submissions"
        learners = [f"learner{i:03d}" for i in range(args.learners)]
        for i, learner in enumerate(learners):
            folder = course / "submitted" / learner / f"unit{UNIT}"
            submit(released, learner_work(i, ref), folder / NOTEBOOK)
            (folder / "timestamp.txt").write_text("2026-11-20 12:00:00.000000 UTC")
            (batch_in / learner).mkdir(parents=True)
            shutil.copy(folder / NOTEBOOK, batch_in / learner / NOTEBOOK)

        print(f"{args.learners} submissions of Unit {UNIT} ({len(IDS)} problems), graded both ways:", flush=True)
        batch = run([sys.executable, "-m", "autograder", "grade-batch", str(batch_in), "--out", str(tmp / "results"),
                     "-j", str(args.jobs), "--quiet"], tmp)
        print(f"  grade-batch -j {args.jobs}:     {batch:8.1f} s  ({batch / args.learners:.2f} s per learner)", flush=True)
        nbg = run([str(BIN / "nbgrader"), "autograde", f"unit{UNIT}"], course)
        print(f"  nbgrader autograde: {nbg:8.1f} s  ({nbg / args.learners:.2f} s per learner)")
        print(f"  ratio nbgrader / grade-batch: {nbg / batch:.1f}x (target >= 6x: {'met' if nbg / batch >= 6 else 'NOT MET'})")

        run([str(BIN / "nbgrader"), "export"], course)
        with open(course / "grades.csv", newline="") as f:
            nbgrader_scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
        batch_reports = {learner: json.loads((tmp / "results" / "learners" / f"{learner}.json").read_text())
                         for learner in learners}
        batch_scores = {learner: r["score"] for learner, r in batch_reports.items()}
        # The learners' own functions cost the same whoever grades them: on these cores, no grader
        # can grade the class in less than that time shared over its jobs.
        code = sum(p.get("code_seconds", 0.0) for r in batch_reports.values() for p in r["problems"])
        floor = code / args.jobs
        print(f"  inside the learners' functions: {code:.1f} s in all, so at least {floor:.1f} s for any grader "
              f"with {args.jobs} jobs; the ratio a grader costing nothing more could reach: {nbg / floor:.1f}x")
        differ = [x for x in learners if nbgrader_scores.get(x) != batch_scores[x]]
        print(f"  same score both ways: {len(learners) - len(differ)}/{len(learners)} learners"
              + (f"; differ: {differ}" if differ else ""))
        if differ or batch >= nbg:
            sys.exit(1)


if __name__ == "__main__":
    main()
