"""Benchmark: where the memory-measured problems' answers peak, against each case's budget.

A memory budget means something only if it lies between the right answers and the wrong ones. For
each memory-measured problem (6.1, 6.2, 7.1, 7.4, 9.1, 9.2), every curated right answer, the
reference, and every curated wrong answer whose message names the budget are graded for real
(grade-batch at the strict level, several learners each, so several draws of the hidden cases), and
each case's measured peak (the worker's anonymous memory, sampled from outside) is printed as a
ratio of that case's budget: the right answers' highest ratio and the wrong answers' lowest, per
problem. Target: right answers at most 0.85 of their budgets, memory-wrong answers at least 1.15
(each side at least 15% away). For Unit 9, whose budgets are a fixed cost plus a multiple of the
data, each answer's fixed cost is printed too: its peak on the hidden small models (the same
operations on tiny shapes, in the same worker, graded before the large ones), against the budgets'
HF_FIXED. Run: ``python bench/bench_budgets.py [--learners 3] [--only 7.4]`` (minutes per problem).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEASURED = ("6.1", "6.2", "7.1", "7.4", "9.1", "9.2")
TARGET_RIGHT, TARGET_WRONG = 0.85, 1.15


def _answers(pid: str) -> list[tuple[str, str, str]]:
    """(kind, name, source) of the reference, the right answers and the memory-wrong answers."""
    from autograder import registry
    from tests.right_answers import HEADERS as RIGHT_HEADERS, RIGHT
    from tests.wrong_answers import HEADERS as WRONG_HEADERS, WRONG

    p = registry.get(pid)
    reference = (ROOT / "solutions" / f"unit{p.unit}.py").read_text()
    out = [("right", "reference", reference)]
    out += [("right", name, RIGHT_HEADERS[pid] + source) for name, source in RIGHT.get(pid, [])]
    out += [("wrong", name, WRONG_HEADERS[pid] + source) for name, source, _, fragment in WRONG.get(pid, [])
            if "budget" in fragment or "memory" in fragment]
    return out


def measure(pid: str, learners: int) -> list[tuple[str, str, float]]:
    """(kind, answer, peak / budget), per learner of every answer: its largest over the learner's
    cases (a case is charged the largest peak so far, so the last case is the largest)."""
    from autograder import registry
    from autograder.classroom.batch import grade_batch
    from autograder.hidden import load

    hidden = load(registry.get(pid))
    budget_of = _budget_function(pid)
    seen, lock = [], threading.Lock()
    check = hidden.check_outcome

    def spy(args, out):
        peak = out.get("anonymous_peak_bytes")
        if peak is not None:
            with lock:
                seen.append((args, peak / budget_of(args), peak, _held_to_budget(pid, args)))
        return check(args, out)

    object.__setattr__(hidden, "check_outcome", spy)
    rows = []
    try:
        for kind, name, source in _answers(pid):
            with tempfile.TemporaryDirectory(prefix="bench-budgets-") as tmp:
                subs = Path(tmp, "subs")
                subs.mkdir()
                for i in range(learners):
                    (subs / f"{name}-{i}.py").write_text(source)
                seen.clear()
                # One learner at a time: their cases' peaks come in order, a learner's together.
                grade_batch(subs, Path(tmp, "out"), jobs=1, progress=False, problems=(registry.get(pid),))
                per = len(seen) // learners if learners else 0
                for i in range(learners):
                    mine = seen[i * per:(i + 1) * per]
                    ratios = [r for _, r, _, held in mine if held]
                    fixed = max((peak for _, _, peak, held in mine if not held), default=None)
                    if ratios:  # a right answer's worst case; a wrong answer's case that catches it
                        rows.append((kind, name, max(ratios), fixed))
    finally:
        object.__setattr__(hidden, "check_outcome", check)
    return rows


def _held_to_budget(pid: str, args) -> bool:
    """Whether the hidden tests hold this case to its budget (Unit 9's small models are not: their
    peaks are the answers' fixed cost)."""
    if pid == "9.1":
        from autograder.hidden.unit9 import MEASURED_FROM

        return args[0].largest_leaf_bytes() >= MEASURED_FROM
    if pid == "9.2":
        from autograder.hidden.unit9 import MEASURED_FROM, _largest_leaf

        return _largest_leaf(args[0]) >= MEASURED_FROM
    return True


def _budget_function(pid: str):
    """The budget the hidden tests hold a case's peak to, as a function of its arguments."""
    from autograder.hidden import unit6, unit7
    from autograder.wall import memory

    if pid == "6.1":
        return lambda args: memory.serving_budget(unit6.param_bytes(args[0]))
    if pid == "6.2":
        return lambda args: memory.conversion_budget(max(args[0].nbytes(n) for n, _, _ in args[0].tensors))
    if pid == "7.1":
        return lambda args: memory.placed_budget(unit7.placed_bytes(args))
    if pid == "9.1":
        return lambda args: memory.hf_budget(args[0].largest_leaf_bytes(), args[3])
    if pid == "9.2":
        from autograder.hidden import unit9

        return lambda args: memory.hf_budget(unit9._largest_leaf(args[0]), factor=memory.HF_READ_FACTOR)
    return lambda args: memory.unstack_budget(unit7.largest_held(args))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(MEASURED))
    args = parser.parse_args(argv)
    from ckptlab import setup_devices

    setup_devices()
    ok = True
    for pid in args.only:
        rows = measure(pid, args.learners)
        right = [r for k, _, r, _ in rows if k == "right"]
        wrong = [(r, n) for k, n, r, _ in rows if k == "wrong"]
        worst_right = max(rows, key=lambda row: row[2] if row[0] == "right" else -1)
        print(f"{pid}: right answers peak at most {max(right):.2f} of their budget ({worst_right[1]}), "
              f"over {len(right)} learners" + (f"; memory-wrong answers at least {min(wrong)[0]:.2f} ({min(wrong)[1]}), "
                                               f"over {len(wrong)} learners" if wrong else "; no memory-wrong answer"))
        fixed_ok = True
        if pid.startswith("9."):
            from autograder.wall.memory import HF_FIXED

            fixed = [f for k, _, _, f in rows if k == "right" and f is not None]
            fixed_ok = bool(fixed) and max(fixed) <= TARGET_RIGHT * HF_FIXED
            print(f"    fixed cost (the small models' peak), right answers: at most {max(fixed, default=0) / 2**20:.1f} "
                  f"MiB, {max(fixed, default=0) / HF_FIXED:.2f} of the budgets' {HF_FIXED >> 20} MiB")
        for name in dict.fromkeys(n for _, n, _, _ in rows):
            ratios = [r for _, n, r, _ in rows if n == name]
            kind = next(k for k, n, _, _ in rows if n == name)
            fixed = [f for _, n, _, f in rows if n == name and f is not None]
            cost = f"   fixed cost {max(fixed) / 2**20:4.1f} MiB" if fixed else ""
            print(f"    {kind:5} {name:48} {min(ratios):.2f} to {max(ratios):.2f}{cost}")
        met = fixed_ok and max(right) <= TARGET_RIGHT and (not wrong or min(w for w, _ in wrong) >= TARGET_WRONG)
        ok &= met
        print(f"    target (right <= {TARGET_RIGHT}, wrong >= {TARGET_WRONG}): {'met' if met else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
