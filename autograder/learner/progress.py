"""Where a learner stands: every way of learning recorded in one place, locally.

One store for all of them: grading runs (``make check``), practice sets (their time and hints
ride on the set's grading record), drills (terminal or notebook), and in a notebook each
``problem(id).hint()`` and ``problem(id).check()``. Records are JSON lines in ``progress.jsonl`` under the course's data folder, outside the
repository: ``$CKPT_COURSE_HOME``, else ``$XDG_DATA_HOME/ckpt-course``, else
``~/.local/share/ckpt-course``. ``python -m autograder progress`` (``make progress``) prints per
unit and per problem: status, best score, attempts, practice time, hints (notebook and practice)
and notebook checks, then the drills; in a notebook,
``show_progress()`` shows the same as a chart.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder import registry

VERSION = 1


def home() -> Path:
    if os.environ.get("CKPT_COURSE_HOME"):
        return Path(os.environ["CKPT_COURSE_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ckpt-course"


def store() -> Path:
    return home() / "progress.jsonl"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


_WARNED: set[Path] = set()  # stores this process has already warned about (a notebook asks often)


def append(record: dict) -> Path | None:
    """Append one record (one line, under a lock, so parallel runs never interleave). A store that
    cannot be written costs a warning (once per process and store), never the grading run."""
    path = store()
    line = json.dumps({"v": VERSION, "time": _now(), **record}, separators=(",", ":")) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(line)
        return path
    except OSError as e:
        if path not in _WARNED:
            _WARNED.add(path)
            print(f"note: progress not recorded ({e}); set CKPT_COURSE_HOME to a folder you can write.",
                  file=sys.stderr)
        return None


def record_grading(report_json: dict, source: str, extra: dict[str, dict] | None = None) -> Path | None:
    """Record a grading run (``Report.to_json()``); ``extra[problem_id]`` adds practice facts
    (seconds spent, hints used)."""
    problems = []
    for p in report_json["problems"]:
        row = {k: p[k] for k in ("id", "status", "score", "max_score")}
        row.update((extra or {}).get(p["id"], {}))
        problems.append(row)
    return append({"kind": "grading", "source": source, "learner": report_json["learner"], "problems": problems})


def record_drill(learner: str, kind: str, correct: bool, seconds: float) -> Path | None:
    return append({"kind": "drill", "learner": learner, "drill": kind, "correct": bool(correct),
                   "seconds": round(float(seconds), 1)})


def record_hint(learner: str, problem_id: str, number: int, of: int, source: str = "notebook") -> Path | None:
    """Hint ``number`` (1-based, of ``of``) of a problem was shown (in a notebook: ``.hint()``)."""
    return append({"kind": "hint", "source": source, "learner": learner, "problem": problem_id,
                   "hint": int(number), "of": int(of)})


def record_check(learner: str, problem_id: str, status: str, source: str = "notebook") -> Path | None:
    """A check of a problem's public examples ran (in a notebook: ``.check()``) and said ``status``."""
    return append({"kind": "check", "source": source, "learner": learner, "problem": problem_id, "status": status})


def load(learner: str | None = None) -> list[dict]:
    """Every readable record (of ``learner`` if given); a damaged line is skipped."""
    return read(store(), learner)


def read(path: Path, learner: str | None = None) -> list[dict]:
    """The readable records of the progress file ``path`` (of ``learner`` if given; a damaged line is
    skipped; none if it is missing): the learner's own store, or a copy handed in with a submission."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and (learner is None or rec.get("learner") == learner):
            out.append(rec)
    return out


@dataclass
class ProblemProgress:
    problem: registry.Problem
    status: str = "not started"  # "mastered" (full marks on hidden tests), "attempted", "not started"
    best: float = 0.0
    attempts: int = 0  # grading runs (make check, practice sets) that attempted it
    seconds: float = 0.0  # time spent on it in practice sessions
    hints: int = 0  # hints asked for: each practice set's, and each hint the notebook showed (once)
    last: str = ""  # when last attempted (UTC, ISO 8601)
    checks: int = 0  # notebook checks of its public examples (``problem(id).check()``)
    check_status: str = ""  # what the last of them said: "correct", "incorrect", "error", "not_attempted" ...
    worked: bool = False  # graded, or checked past its stub, or a hint asked for: the learner is on it


CHECK_STATUSES = ("correct", "incorrect", "error", "timeout", "not_attempted")  # "skipped" is no check
_TRIED = ("correct", "incorrect", "error", "timeout")  # a check that ran the learner's own code


def _count(value, limit: int) -> int:
    """A count from the learner-side store: a whole number from 0 to ``limit``, else none (0)."""
    return value if type(value) is int and 0 <= value <= limit else 0


def _number(value) -> float:
    """A score or a time from the store: a finite number, else 0."""
    return float(value) if type(value) in (int, float) and abs(value) < 1e12 else 0.0


def _problem_rows(rec: dict) -> list[dict]:
    problems = rec.get("problems")
    return [p for p in problems if isinstance(p, dict)] if isinstance(problems, list) else []


def summarize(records: list[dict]) -> list[ProblemProgress]:
    """Per problem, from every kind of record: grading runs (with practice time and hints), and the
    notebook's hints and checks. A record of another shape is passed over."""
    rows = {p.id: ProblemProgress(p) for p in registry.PROBLEMS}
    seen_hints: dict[str, set[int]] = {}
    for rec in records:
        kind = rec.get("kind")
        if kind in ("hint", "check"):
            row = rows.get(rec["problem"]) if isinstance(rec.get("problem"), str) else None
            if row is None:
                continue
            if kind == "hint":
                n = _count(rec.get("hint"), len(row.problem.hints))
                if n:  # a hint shown twice (the cell run again, the kernel restarted) taught once
                    seen_hints.setdefault(row.problem.id, set()).add(n)
                    row.worked = True
            elif rec.get("status") in CHECK_STATUSES:
                row.checks += 1
                row.check_status = rec["status"]
                if rec["status"] in _TRIED:
                    row.worked = True
                    if row.status == "not started":
                        row.status = "attempted"
            continue
        if kind != "grading":
            continue
        for p in _problem_rows(rec):
            row = rows.get(p.get("id")) if isinstance(p.get("id"), str) else None
            if row is None:
                continue
            row.seconds += _number(p.get("seconds_spent", 0))
            hints = _count(p.get("hints", 0), 100)
            row.hints += hints
            row.worked |= hints > 0
            if p.get("status") == "not_attempted":
                continue
            row.attempts += 1
            row.worked = True
            row.best = max(row.best, _number(p.get("score", 0)))
            if isinstance(rec.get("time"), str):
                row.last = max(row.last, rec["time"])
            if p.get("status") == "correct":
                row.status = "mastered"
            elif row.status != "mastered":
                row.status = "attempted"
    for pid, seen in seen_hints.items():
        rows[pid].hints += len(seen)
    return list(rows.values())


def studied_units(records: list[dict]) -> list[int]:
    """The units a learner has studied: those with a problem graded or checked past its stub, or a
    hint asked for (in a notebook or a practice set). None yet (a fresh store): the first unit,
    where the course starts."""
    return studied_units_of(summarize(records))


def studied_units_of(rows: list[ProblemProgress]) -> list[int]:
    return sorted({r.problem.unit for r in rows if r.worked}) or [registry.units()[0]]


def mastered(records: list[dict]) -> set[str]:
    return {r.problem.id for r in summarize(records) if r.status == "mastered"}


FIRST_INTERVAL_DAYS = 2.0  # a problem first mastered comes back after 2 days, then 4, 8, 16 ...


@dataclass(frozen=True)
class Review:
    """When a mastered problem comes back: ``due`` (UTC), after ``interval_days`` since it was last
    solved on time (after a failed review, half the first interval: the next solve starts over);
    ``solves``, the spaced solves so far (the first mastery included)."""

    due: dt.datetime
    interval_days: float
    solves: int


def reviews(records: list[dict]) -> dict[str, Review]:
    """Each mastered problem's next review, from the grading runs in time order. The first full-marks
    run schedules it FIRST_INTERVAL_DAYS later; solved again once due, the interval doubles; a
    failed attempt once due brings it back at once, and its next solve starts over at
    FIRST_INTERVAL_DAYS. Runs before the due date
    change nothing (solving it twice in a day is not spacing)."""
    out: dict[str, Review] = {}
    runs = sorted((r for r in records if r.get("kind") == "grading" and isinstance(r.get("time"), str)),
                  key=lambda r: r["time"])
    for rec in runs:
        try:
            when = dt.datetime.fromisoformat(rec["time"])
        except ValueError:
            continue
        for p in rec.get("problems", []):
            pid, status = p.get("id"), p.get("status")
            if not isinstance(pid, str) or status in (None, "not_attempted"):
                continue
            now = out.get(pid)
            if status == "correct":
                if now is None:
                    out[pid] = Review(when + dt.timedelta(days=FIRST_INTERVAL_DAYS), FIRST_INTERVAL_DAYS, 1)
                elif when >= now.due:
                    interval = 2 * now.interval_days
                    out[pid] = Review(when + dt.timedelta(days=interval), interval, now.solves + 1)
            elif now is not None and when >= now.due:  # due now, and the next solve starts over
                out[pid] = Review(when, FIRST_INTERVAL_DAYS / 2, now.solves)
    return out


def due(records: list[dict], now: dt.datetime | None = None) -> set[str]:
    """The mastered problems due for a review at ``now`` (default: the current time)."""
    now = now or dt.datetime.now(dt.UTC)
    return {pid for pid, r in reviews(records).items() if r.due <= now}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else (f"{seconds:.0f} s" if seconds >= 1 else "")


def drill_stats(records: list[dict]) -> dict[str, tuple[int, int]]:
    """Per drill kind: (answered, right)."""
    stats: dict[str, list[int]] = {}
    for rec in records:
        if rec.get("kind") == "drill":
            s = stats.setdefault(str(rec.get("drill", "?"))[:40], [0, 0])
            s[0] += 1
            s[1] += rec.get("correct") is True
    return {k: (a, b) for k, (a, b) in stats.items()}


def table(learner: str, records: list[dict], now: dt.datetime | None = None, keep=None) -> str:
    """The progress table; ``keep(problem)``: which problems to list (default: all)."""
    rows = [r for r in summarize(records) if keep is None or keep(r.problem)]
    spaced, now = reviews(records), now or dt.datetime.now(dt.UTC)
    gradings = [r for r in records if r.get("kind") == "grading"]
    if not gradings and not drill_stats(records) and not any(r.checks or r.hints for r in rows):
        return (f"No progress recorded yet for {learner!r}. Grade your work (make check), practise "
                f"(python -m autograder practice) or drill (python -m autograder drill); checks and hints in the "
                f"notebooks count too. Results are kept in {store()}.")
    last = max((r["time"] for r in gradings if isinstance(r.get("time"), str)), default="")
    checks, hints = sum(r.checks for r in rows), sum(r.hints for r in rows)
    lines = [f"Progress of {learner!r}: " + (f"{len(gradings)} grading run(s), last {last[:16].replace('T', ' ')} UTC"
                                              if gradings else "no grading run yet")
             + (f"; {checks} notebook check(s)" if checks else "") + (f"; {hints} hint(s)" if hints else "")]
    for unit in registry.units():
        title = registry.UNITS[unit].title
        unit_rows = [r for r in rows if r.problem.unit == unit]
        if not unit_rows:
            continue
        got = sum(r.best for r in unit_rows)
        total = sum(r.problem.points for r in unit_rows)
        done = sum(r.status == "mastered" for r in unit_rows)
        bar = "#" * round(10 * got / total) + "." * (10 - round(10 * got / total))
        lines += ["", f"Unit {unit}: {title}  [{bar}] {got:g}/{total} points, {done}/{len(unit_rows)} mastered"]
        for r in unit_rows:
            bits = [f"  {r.problem.id:5} {r.problem.function:28} {r.problem.difficulty:6} {r.problem.category:15} "
                    f"{r.status:11} {r.best:>4g}/{r.problem.points:<3}"]
            if r.attempts:
                bits.append(f"attempts {r.attempts}")
            if r.seconds:
                bits.append(f"time {_minutes(r.seconds)}")
            if r.hints:
                bits.append(f"hints {r.hints}")
            if r.checks:
                bits.append(f"checks {r.checks} (last: {r.check_status.replace('_', ' ')})")
            if r.last:
                bits.append(f"last {r.last[:10]}")
            review = spaced.get(r.problem.id)
            if review is not None and r.status == "mastered":
                bits.append("review due now" if review.due <= now else f"review {review.due.date().isoformat()}")
            lines.append("  ".join(bits).rstrip())
    drills = drill_stats(records)
    if drills:
        answered = sum(a for a, _ in drills.values())
        right = sum(b for _, b in drills.values())
        lines += ["", f"Drills: {right}/{answered} right ("
                  + ", ".join(f"{k} {b}/{a}" for k, (a, b) in sorted(drills.items())) + ")"]
    todo = [r for r in rows if r.status != "mastered"]
    if todo:
        lines += ["", "Next: " + ", ".join(f"{r.problem.id} {r.problem.function}" for r in todo[:3])]
    waiting = sorted(pid for pid, r in spaced.items() if r.due <= now)
    if waiting:
        lines += ["", f"Due for review (mastered a while ago; make practice brings them back): {', '.join(waiting)}"]
    return "\n".join(lines)


def show_progress(learner: str | None = None):
    """In a notebook: the progress table and a chart of best scores per problem."""
    from autograder.invoke import default_learner
    from ckptlab import plotting

    learner = learner or default_learner()
    records = load(learner)
    print(table(learner, records))
    rows = summarize(records)
    return plotting.plot_progress([(r.problem.id, r.problem.unit, r.best, r.problem.points, r.status) for r in rows],
                                  title=f"Best score per problem ({learner})")
