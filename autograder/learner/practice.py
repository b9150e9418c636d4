"""Timed practice: ``python -m autograder practice [--minutes M] [--unit U]``.

A set of problems drawn at random from those the learner has not mastered (their progress
records), sized to the time. The learner writes answers in a practice file (``practice/`` here,
ignored by git) in any editor while the terminal shows each prompt and the time left, gives
hints one step at a time (each noted), runs the public examples on demand, and at the end (or
when time is up) grades the set with the hidden tests and prints a review: time per problem,
hints used, what to study next. The session is recorded in the learner's progress.

Learners' code never runs in this process: public examples run in a separate process with the
worker's limits, and grading uses the grader's workers.
"""

from __future__ import annotations

import datetime as dt
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autograder import registry
from autograder.learner import progress
from autograder.wall.returns import Raises

MINUTES_PER_POINT = 1.0  # a 10-point problem is budgeted 10 minutes


def estimate(p: registry.Problem) -> float:
    """The minutes a problem is budgeted in a set: its points (which already weigh its difficulty:
    every 20-point problem is medium or hard), a minute each. What the prompt's "about N min" says."""
    return p.points * MINUTES_PER_POINT


def fill(order: list[registry.Problem], minutes: float) -> list[registry.Problem]:
    """The problems of ``order`` whose estimates together come closest to ``minutes`` without
    passing them; of the sets that do, the one that takes the earliest problems of ``order`` (those
    first in line: the reviews due, then a random order). None where no problem fits alone."""
    cost = [max(0, round(estimate(p) * 60)) for p in order]  # in seconds: whole numbers to add up
    budget = int(minutes * 60 + 1e-6)
    # reach[i]: the totals (within the budget) some set of order[i:] adds up to exactly.
    reach = [set() for _ in range(len(order) + 1)]
    reach[-1] = {0}
    for i in range(len(order) - 1, -1, -1):
        reach[i] = reach[i + 1] | {t + cost[i] for t in reach[i + 1] if t + cost[i] <= budget}
    best = max(reach[0])
    chosen, left = [], best
    for i, p in enumerate(order):  # take each problem in line where the best total is still reachable
        if left >= cost[i] and left - cost[i] in reach[i + 1]:
            chosen.append(p)
            left -= cost[i]
    return chosen
CHECK_TIMEOUT = 120.0

HELP = ("Commands: Enter = prompt and time left, h = next hint, c = run the public examples on your file, "
        "n / p = next / previous problem (or its number), g = grade now, q = stop without grading.")


@dataclass
class Item:
    problem: registry.Problem
    seconds: float = 0.0
    hints: int = 0


def choose(records: list[dict], minutes: float, unit: int | None = None, count: int | None = None,
           rng: np.random.Generator | None = None, difficulty: tuple = (), category: tuple = (),
           now: dt.datetime | None = None) -> tuple[list[registry.Problem], bool]:
    """Problems not yet mastered and mastered ones due for a spaced review
    (:func:`autograder.learner.progress.reviews`), of ``unit``, of these difficulties and categories (any,
    where empty), the reviews first, then in random order, as many as fit ``minutes`` (``count``
    overrides): those whose estimates (:func:`estimate`) fill the minutes most closely without
    passing them (:func:`fill`). Where not one fits, the shortest alone, which :func:`over_time`
    then names. Returns (problems, review) where review means all were mastered, none due, and the
    set is drawn from every problem instead."""
    from autograder.declarations import CATEGORIES, DIFFICULTIES

    rng = rng or np.random.default_rng()
    for value, allowed, what in ((difficulty, DIFFICULTIES, "difficulty"), (category, tuple(CATEGORIES), "category")):
        unknown = [v for v in value if v not in allowed]
        if unknown:
            raise ValueError(f"no {what} {', '.join(map(repr, unknown))}; choose from {', '.join(allowed)}")
    if unit is not None and unit not in registry.units():
        raise ValueError(f"no unit {unit}; units are {', '.join(map(str, registry.units()))}")
    pool = [p for p in registry.PROBLEMS if (unit is None or p.unit == unit)
            and (not difficulty or p.difficulty in difficulty) and (not category or p.category in category)]
    if not pool:
        raise ValueError("no problem matches that choice (unit, difficulty and category together)")
    done, waiting = progress.mastered(records), progress.due(records, now)
    due_now = [p for p in pool if p.id in waiting]
    todo = [p for p in pool if p.id not in done]
    review = not todo and not due_now
    todo = todo or ([] if due_now else pool)
    order = [due_now[i] for i in rng.permutation(len(due_now))] + [todo[i] for i in rng.permutation(len(todo))]
    if count:
        return order[:count], review
    chosen = fill(order, minutes)
    if not chosen:  # nothing fits: the shortest (first in line among equals), named as over the time
        chosen = [min(order, key=estimate)]
    return chosen, review


def over_time(problems: list[registry.Problem], minutes: float) -> str | None:
    """What to tell the learner where the set's estimates pass the minutes asked (only when not one
    problem fits them): None where they fit."""
    total = sum(estimate(p) for p in problems)
    if total <= minutes + 1e-9:
        return None
    if len(problems) == 1:
        p = problems[0]
        return (f"No problem here fits {minutes:g} minutes: the shortest is {p.id} {p.function}, about "
                f"{estimate(p):g} min. It is offered over your time; the clock still stops at {minutes:g} minutes "
                f"(q stops without grading; --minutes {estimate(p):g}, MINUTES={estimate(p):g} with make, gives it its time).")
    return (f"This set is estimated at about {total:g} min, over the {minutes:g} minutes asked "
            "(--count chose how many).")


def workspace_source(problems: list[registry.Problem], minutes: float) -> str:
    from autograder.registry import stub_source

    imports = []
    for unit in sorted({p.unit for p in problems}):
        for line in registry.UNITS[unit].imports.splitlines():
            if line.strip() and "autograder.learner.notebook" not in line and line not in imports:
                imports.append(line)
    head = (f'"""Practice set: {len(problems)} problem(s), {minutes:g} minutes.\n\n'
            "Write each function below and save the file; the terminal session checks and grades it.\n"
            '"""\n')
    body = "\n\n\n".join(stub_source(p) for p in problems)
    return head + "\n".join(imports) + "\n\n\n" + body + "\n"


def public_checks(path: Path, problems: list[registry.Problem]) -> dict[str, tuple[str, str]]:
    """{problem id: (status, message)} of the public examples on the saved file, all in one separate
    process under the worker's limits, with a time limit."""
    from autograder.invoke import run_json

    ids = [p.id for p in problems]
    try:
        data, _, _ = run_json(["check", str(path.resolve()), "--only", *ids, "--worker-limits"], CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        data = {"problems": [{"id": i, "status": "timeout", "message": f"the public examples did not finish in "
                              f"{CHECK_TIMEOUT:.0f} s: look for an endless loop."} for i in ids]}
    if data is None:
        data = {"problems": [{"id": i, "status": "error", "message": "the check stopped without a result (out of "
                              "memory, or the code exits the interpreter)."} for i in ids]}
    # A correct check's detail is the problem's debrief: the review shows it once the set is graded.
    return {r["id"]: (r["status"], r["message"] + (f"\n{r['detail']}" if r.get("detail") and r["status"] != "correct"
                                                   else ""))
            for r in data["problems"]}


WARN_AT = (300, 60)  # seconds left at which the terminal says so


def terminal_reader(prompt: str, timeout: float) -> str | None:
    """A line from stdin, or None when ``timeout`` seconds pass first (time is up).

    On a terminal the countdown ticks in the window title every second, and a line says when 5
    minutes and 1 minute are left (redrawing the prompt line would hide what the learner types)."""
    print(prompt, end="", flush=True)
    deadline = time.monotonic() + timeout
    tty = sys.stdout.isatty()
    warned = {w for w in WARN_AT if timeout <= w}
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            print()
            return None
        if tty:
            print(f"\033]0;practice: {_clock(left)} left\007", end="", flush=True)
        for w in WARN_AT:
            if left <= w and w not in warned:
                warned.add(w)
                print(f"\n[{_clock(w)} left]\n{prompt}", end="", flush=True)
        ready, _, _ = select.select([sys.stdin], [], [], min(1.0, left))
        if ready:
            line = sys.stdin.readline()
            return "g" if line == "" else line.strip()  # end of input: grade what is there


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:d}:{seconds % 60:02d}"


class Session:
    def __init__(self, problems: list[registry.Problem], minutes: float, learner: str, path: Path, *,
                 read=terminal_reader, say=print, clock=time.monotonic, grade_fn=None):
        self.items = [Item(p) for p in problems]
        self.minutes, self.learner, self.path = minutes, learner, path
        self.read, self.say, self.clock = read, say, clock
        self.grade_fn = grade_fn or _grade
        self.current = 0

    # --- showing -----------------------------------------------------------------------------
    def prompt(self, left: float) -> str:
        from autograder.learner.notebook import describe_args, fmt_value

        item = self.items[self.current]
        p = item.problem
        lines = [f"\n[{self.current + 1}/{len(self.items)}] Problem {p.id} ({p.points} points, {p.difficulty}, "
                 f"{p.category}, about {estimate(p):g} min): {p.title}    {_clock(left)} left",
                 f"    {p.call}", "", p.statement.replace("`", "")]
        if p.seen_in:
            lines += ["", f"As seen in {p.seen_in.replace('`', '')}."]
        for ex in p.examples[:2]:
            if isinstance(ex.expected, Raises):
                expected = f"raises {ex.expected.type}"
            else:
                expected = "(see the statement)" if ex.expected is None else fmt_value(ex.expected)
            lines.append(f"  e.g. {p.function}({describe_args(ex.args)}) -> {expected}")
        lines.append(f"Hints used: {item.hints}/{len(p.hints)}.")
        return "\n".join(lines)

    # --- the loop ------------------------------------------------------------------------------
    def run(self) -> dict | None:
        start = self.clock()
        deadline = start + self.minutes * 60
        note = over_time([i.problem for i in self.items], self.minutes)
        if note:
            self.say(note)
        estimated = sum(estimate(i.problem) for i in self.items)
        self.say(f"Practice: {len(self.items)} problem(s) in {self.minutes:g} minutes (about {estimated:g} min "
                 f"estimated). Write your answers in\n"
                 f"  {self.path}\n(open it in your editor or in JupyterLab and save as you go).\n{HELP}")
        self.say(self.prompt(deadline - self.clock()))
        shown_at = self.clock()
        while True:
            line = self.read("> ", deadline - self.clock())
            now = self.clock()
            self.items[self.current].seconds += now - shown_at
            shown_at = now
            if line is None or now >= deadline:
                self.say("Time is up: grading your file.")
                break
            cmd = line.strip().lower()
            if cmd in ("g", "grade", "done"):
                break
            if cmd in ("q", "quit", "exit"):
                self.say(f"Stopped without grading. Your file stays at {self.path}.")
                return None
            if cmd == "h":
                self.hint()
            elif cmd == "c":
                problem = self.items[self.current].problem
                status, message = public_checks(self.path, [problem])[problem.id]
                self.say(f"Public examples: {status.replace('_', ' ')}. {message}")
            elif cmd in ("n", "p") or cmd.isdigit():
                k = self.current + (1 if cmd == "n" else -1) if not cmd.isdigit() else int(cmd) - 1
                self.current = min(max(k, 0), len(self.items) - 1)
                self.say(self.prompt(deadline - now))
            elif cmd == "":
                self.say(self.prompt(deadline - now))
            else:
                self.say(f"Unknown command {line!r}. {HELP}")
        return self.finish(self.clock() - start)

    def hint(self) -> None:
        item = self.items[self.current]
        hints = item.problem.hints
        if item.hints >= len(hints):
            self.say(f"No more hints for {item.problem.id}: all {len(hints)} shown. Try `c` to run the public examples.")
            return
        item.hints += 1
        self.say(f"Hint {item.hints}/{len(hints)}: {hints[item.hints - 1]}")

    def finish(self, used: float) -> dict:
        ids = [i.problem.id for i in self.items]
        report = self.grade_fn(self.path, self.learner, ids)
        extra = {i.problem.id: {"seconds_spent": round(i.seconds, 1), "hints": i.hints} for i in self.items}
        if report.get("graded_by") == "hidden":
            progress.record_grading(report, "practice", extra)
        self.say(review(self.items, report, used, self.minutes))
        return report


def _grade(path: Path, learner: str, ids: list[str]) -> dict:
    """The hidden tests (workers, as in grading); in the learner bundle, the public examples."""
    from autograder.registry import hidden_tests_available

    if hidden_tests_available():
        from autograder.engine.grade import grade

        report = grade([path], learner, problems=ids).to_json()
        return {**report, "graded_by": "hidden"}
    checked = public_checks(path, [registry.get(pid) for pid in ids])
    problems = []
    for pid in ids:
        p = registry.get(pid)
        status, message = checked[pid]
        problems.append({"id": pid, "function": p.function, "status": status, "message": message,
                         "score": float(p.points if status == "correct" else 0), "max_score": float(p.points)})
    return {"learner": learner, "score": sum(x["score"] for x in problems),
            "max_score": sum(x["max_score"] for x in problems), "problems": problems, "graded_by": "public"}


def _lesson(unit: int) -> str:
    return f"course/{registry.UNITS[unit].lesson}"


def _drills_for(unit: int) -> list[str]:
    from autograder.learner.drills import UNIT_OF

    return [k for k, u in UNIT_OF.items() if u == unit]


def review(items: list[Item], report: dict, used: float, minutes: float) -> str:
    results = {p["id"]: p for p in report["problems"]}
    how = "hidden tests" if report.get("graded_by") == "hidden" else "public examples only (no hidden tests here)"
    lines = ["", f"Review: {report['score']:g}/{report['max_score']:g} points, graded with {how}; "
             f"{_clock(used)} of {_clock(minutes * 60)} used.", "",
             f"  {'problem':34} {'result':22} {'time':>6} {'hints':>6}"]
    for item in items:
        p, r = item.problem, results[item.problem.id]
        result = f"{r['status'].replace('_', ' ')} {r['score']:g}/{r['max_score']:g}"
        lines.append(f"  {p.id + ' ' + p.function:34} {result:22} {_clock(item.seconds):>6} "
                     f"{item.hints:>2}/{len(p.hints)}")
    lines += ["", "What to study next:"]
    todo = [i for i in items if results[i.problem.id]["status"] != "correct"]
    for item in todo:
        p, r = item.problem, results[item.problem.id]
        drills = ", ".join(_drills_for(p.unit)[:2])
        lines.append(f"  - {p.id} {p.function}: {r.get('message', '')}")
        lines.append(f"    Revisit {_lesson(p.unit)}" + (f"; drill: python -m autograder drill --kind {drills.split(', ')[0]}"
                                                           if drills else "") + ".")
    for item in items:
        if results[item.problem.id]["status"] == "correct" and item.hints:
            lines.append(f"  - {item.problem.id} solved with {item.hints} hint(s): try it again without them another day.")
    if not todo:
        lines.append("  - All solved. Practise the next unit, or drill: python -m autograder drill")
    right = [i.problem for i in items if results[i.problem.id]["status"] == "correct" and i.problem.debrief()]
    if right:
        lines += ["", "Correct: why it is right, and what an interviewer would ask next:"]
        for p in right:
            lines += [f"  {p.id} {p.function}", *p.debrief(96, indent="    ")]
        lines.append("")
    lines.append("Your progress: python -m autograder progress (make progress).")
    return "\n".join(lines)


def new_workspace(problems: list[registry.Problem], minutes: float, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"session-{stamp}.py"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"session-{stamp}-{n}.py"
    path.write_text(workspace_source(problems, minutes))
    return path
