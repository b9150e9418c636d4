"""Which problems a class fails, and whether they tell strong learners from weak ones: item analysis
of a graded class (``grade-batch`` writes it into ``summary.md``, ``summary.json`` and
``summary.png``), from each learner's saved result and, where a learner's submission holds one, the
progress file their own grading runs and practice sessions wrote (``progress.jsonl``).

Per problem:

- **pass rate**: learners with full marks, of all learners; **mean score**, as a fraction of its points;
- **discrimination** (Kelley's upper-lower index): learners ranked by their score on the rest of the
  assignment (this problem left out, so that it does not rank itself), the top and the bottom 27 %
  of the class (at least one learner each); the index is the mean score on this problem of the top
  group minus that of the bottom group, each as a fraction of its points, from -1 to 1. Learners
  tied with the last place of a group share its remaining places: each counts for that share. Near
  0: the problem does not separate those who did well elsewhere from those who did not; below 0:
  the weaker learners did better on it (look at the problem). Not given for fewer than four learners
  or when everyone scored the same elsewhere;
- the most common failure categories (the judge's own, for the instructor only);
- the median seconds spent inside the learner's function, over those who attempted it;
- from collected progress files: the median number of grading runs that attempted it before the
  submission, and the hints asked for (each learner's counted up to the number of hints the problem
  has). A handed-in progress file is the learner's: read with the care every learner file gets
  (:func:`progress_of`), and a bad one costs that learner's counts only, with a note.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

GROUP_FRACTION = 0.27  # Kelley's: the top and bottom 27 % of a class
MIN_LEARNERS = 4
PROGRESS_FILE = "progress.jsonl"


@dataclass
class Item:
    id: str
    function: str
    learners: int
    attempted: int
    pass_rate: float
    mean_score: float
    discrimination: float | None
    failures: list = field(default_factory=list)  # [(category, count)], most common first
    median_seconds: float | None = None
    median_attempts: float | None = None  # among learners whose progress file was collected
    hints: int | None = None
    with_progress: int = 0
    difficulty: str = ""  # as declared (its points follow it)

    def as_dict(self) -> dict:
        return asdict(self)


def _group_mean(item: list[float], rest: list[float], size: int, top: bool) -> float:
    """The mean item score of the ``size`` learners ranked first by ``rest`` (highest first where
    ``top``, else lowest first), learners tied with the last place sharing the places left to them."""
    ranked = sorted(range(len(rest)), key=lambda k: rest[k], reverse=top)
    cut = rest[ranked[size - 1]]
    beyond = [k for k in ranked if (rest[k] > cut if top else rest[k] < cut)]
    tied = [k for k in ranked if rest[k] == cut]
    share = (size - len(beyond)) / len(tied)
    return (sum(item[k] for k in beyond) + share * sum(item[k] for k in tied)) / size


def discrimination(item: list[float], rest: list[float], fraction: float = GROUP_FRACTION) -> float | None:
    """Kelley's upper-lower index of one problem: ``item[k]`` is learner k's score on it and
    ``rest[k]`` their score on the rest of the assignment, both as fractions of the points."""
    n = len(item)
    if n < MIN_LEARNERS or len(set(rest)) < 2:
        return None
    size = max(1, round(fraction * n))
    return _group_mean(item, rest, size, top=True) - _group_mean(item, rest, size, top=False)


# What a handed-in progress file may be: more is not a learner's own record (a heavy learner's year of
# grading runs is a few MiB), and is not read at all.
MAX_PROGRESS_BYTES = 8 * 2**20
MAX_PROBLEMS_PER_RECORD = 256
MAX_HINTS_PER_RECORD = 100  # hints one grading run or practice session can count for one problem
_MAX_DIGITS = 12  # a number with more digits is no count of attempts or hints: the line is skipped


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_DIGITS:
        raise ValueError("a number too long to be a count")
    return int(digits)


def _refuse(constant: str):
    raise ValueError(f"{constant} is not a count")


@dataclass
class Collected:
    """A learner's handed-in progress file, reduced to what the class summary uses: per problem,
    (grading runs that attempted it, hints counted); and why any of it was not read."""
    counts: dict = field(default_factory=dict)
    note: str = ""  # for the summary: the file refused, or how many of its lines were skipped

    @property
    def read(self) -> bool:
        return bool(self.counts) or not self.note


def tally(records) -> Collected:
    """Count attempts and hints per problem from parsed progress records, each checked for its
    shape: a ``grading`` record's ``problems`` a list of dicts with a string ``id``; hints an integer
    from 0 to :data:`MAX_HINTS_PER_RECORD` (else none); a notebook's ``hint`` record counts each hint
    number of a problem once; a record of another shape is skipped."""
    counts: dict[str, list[int]] = {}
    shown: dict[str, set[int]] = {}  # a notebook's hints, by number: one shown twice taught once
    skipped = 0
    for record in records:
        if isinstance(record, dict) and record.get("kind") == "hint":
            pid, n = record.get("problem"), record.get("hint")
            if isinstance(pid, str) and len(pid) <= 16 and type(n) is int and 0 < n <= MAX_HINTS_PER_RECORD:
                shown.setdefault(pid, set()).add(n)
            else:
                skipped += 1
            continue
        if not isinstance(record, dict) or record.get("kind") != "grading":
            continue
        problems = record.get("problems")
        if not isinstance(problems, list) or len(problems) > MAX_PROBLEMS_PER_RECORD or \
                not all(isinstance(p, dict) and isinstance(p.get("id"), str) and len(p["id"]) <= 16 for p in problems):
            skipped += 1
            continue
        for p in problems:
            hints = p.get("hints", 0)
            hints = hints if type(hints) is int and 0 <= hints <= MAX_HINTS_PER_RECORD else 0
            row = counts.setdefault(p["id"], [0, 0])
            row[0] += p.get("status") != "not_attempted"
            row[1] += hints
    for pid, numbers in shown.items():
        counts.setdefault(pid, [0, 0])[1] += len(numbers)
    note = f"{skipped} record{'s' * (skipped != 1)} of another shape skipped" if skipped else ""
    return Collected({k: (a, h) for k, (a, h) in counts.items()}, note)


def progress_of(submission: Path) -> Collected | None:
    """The counts of a learner's progress file, where their submission folder holds one (None where
    it holds none). Read as every learner file is (:func:`autograder.engine.extract.read_regular`: a
    regular file only, no link followed, never blocking, at most :data:`MAX_PROGRESS_BYTES`), each
    line parsed with bounded numbers and depth, each record checked (:func:`tally`). A file that
    cannot be read costs that learner's attempts and hints only, with a note saying why."""
    import json

    from autograder.engine.extract import read_regular

    path = Path(submission) / PROGRESS_FILE
    if not os.path.lexists(path):
        return None
    try:
        data = read_regular(path, MAX_PROGRESS_BYTES)
    except OSError as exc:
        return Collected({}, str(exc))
    damaged = 0

    def records():  # one at a time: the file's records are never all held
        nonlocal damaged
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            line, start = data[start:end], end + 1
            try:
                yield json.loads(line, parse_int=_bounded_int, parse_constant=_refuse)
            except (ValueError, RecursionError, UnicodeDecodeError):
                damaged += bool(line.strip())

    collected = tally(records())
    if damaged:
        collected.note = "; ".join(x for x in (f"{damaged} unreadable line{'s' * (damaged != 1)} skipped",
                                               collected.note) if x)
    return collected


def analyse(reports: list[dict], selected, progress: dict | None = None) -> list[Item]:
    """One :class:`Item` per problem of ``selected`` (the registry's problems) over ``reports``
    (learners' saved results); ``progress`` maps a report's ``key`` to its learner's progress
    records, where collected."""
    progress = {k: v if isinstance(v, Collected) else tally(v) for k, v in (progress or {}).items() if v is not None}
    ids = [p.id for p in selected]
    by_learner = [{p["id"]: p for p in r["problems"]} for r in reports]
    fraction = [{i: (row[i]["score"] / row[i]["max_score"] if i in row and row[i]["max_score"] else 0.0) for i in ids}
                for row in by_learner]
    points = {p.id: p.points for p in selected}
    total = sum(points.values())
    items = []
    for problem in selected:
        pid = problem.id
        results = [row[pid] for row in by_learner if pid in row]
        item = [f[pid] for f in fraction]
        others = total - points[pid]
        rest = [sum(f[i] * points[i] for i in ids if i != pid) / others if others else 0.0 for f in fraction]
        failures = Counter(p.get("category") or p["status"] for p in results if p["status"] != "correct")
        seconds = [p["code_seconds"] for p in results if p["status"] != "not_attempted" and p.get("code_seconds") is not None]
        collected = [progress[r["key"]] for r in reports if r.get("key", "") in progress]
        # A learner's hints count up to the hints the problem has: no one file moves the class's
        # figure past that learner's share.
        cap = len(problem.hints)
        counts = [(a, min(h, cap)) for a, h in (c.counts.get(pid, (0, 0)) for c in collected if c.read)]
        items.append(Item(
            id=pid, function=problem.function, learners=len(results),
            attempted=sum(p["status"] != "not_attempted" for p in results),
            pass_rate=sum(p["status"] == "correct" for p in results) / len(results) if results else 0.0,
            mean_score=sum(item) / len(item) if item else 0.0,
            discrimination=discrimination(item, rest),
            failures=failures.most_common(),
            median_seconds=statistics.median(seconds) if seconds else None,
            median_attempts=statistics.median(a for a, _ in counts) if counts else None,
            hints=sum(h for _, h in counts) if counts else None, with_progress=len(counts),
            difficulty=problem.difficulty))
    return items


# The difficulty a class's results point to: the share of the class that passed. A problem most pass
# is easy for them, one most fail hard; where that is not what was declared, the summary says so,
# and re-declaring the difficulty moves the points with it (autograder/declarations.py: POINTS).
FOUND_EASY, FOUND_HARD = 0.75, 0.4


def found_difficulty(item: Item) -> str | None:
    """easy, medium or hard as the class fared (None below :data:`MIN_LEARNERS` attempts)."""
    if item.attempted < MIN_LEARNERS:
        return None
    return "easy" if item.pass_rate >= FOUND_EASY else "medium" if item.pass_rate >= FOUND_HARD else "hard"


def reading(item: Item) -> str:
    """A few words on what the numbers say, for the summary's table."""
    if item.attempted == 0:
        return "nobody attempted it"
    words = _reading(item)
    found = found_difficulty(item)
    if found and item.difficulty and found != item.difficulty:
        from autograder.declarations import DIFFICULTIES, POINTS

        way = "harder" if DIFFICULTIES.index(found) > DIFFICULTIES.index(item.difficulty) else "easier"
        words = "; ".join(w for w in (words, f"{way} than declared ({item.difficulty}): as {found}, "
                                             f"{POINTS[found]} points") if w)
    return words


def _reading(item: Item) -> str:
    d = item.discrimination
    if d is not None and d < 0:
        return "weaker learners did better: look at the problem"
    if item.pass_rate >= 0.9:
        return "nearly everyone passed"
    if item.pass_rate <= 0.2:
        return "most failed: a gap in the lesson?"
    if d is not None and d < 0.2:
        return "does not separate strong from weak"
    return ""


def summary_rows(reports: list[dict], selected, progress: dict | None = None) -> list[dict]:
    """The class summary's rows (``summary.json``): per problem, the pass rate and the most common
    failure among those who tried, and the item analysis (:func:`analyse`) with its reading."""
    rows = []
    for item in analyse(reports, selected, progress):
        tried = [(k, n) for k, n in item.failures if k != "not_attempted"]
        # What went wrong among those who tried says more than how many did not try.
        common = tried[0] if tried else next(iter(item.failures), ("", 0))
        rows.append({"id": item.id, "function": item.function, "learners": item.learners, "attempted": item.attempted,
                     "pass_rate": item.pass_rate, "most_common_failure": common[0], "count": common[1],
                     "mean_score": item.mean_score, "discrimination": item.discrimination,
                     "failures": [list(f) for f in item.failures], "median_seconds": item.median_seconds,
                     "median_attempts": item.median_attempts, "hints": item.hints,
                     "with_progress": item.with_progress, "difficulty": item.difficulty,
                     "found_difficulty": found_difficulty(item), "reading": reading(item)})
    return rows


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.2g} s" if value < 10 else f"{value:.0f} s"


def markdown(rows: list[dict]) -> list[str]:
    """The summary's per-problem table, and what its columns mean."""
    progress = any(r["with_progress"] for r in rows)
    head = ["Problem", "Function", "Attempted", "Pass rate", "Difficulty (declared / found)", "Discrimination",
            "Median time in function"]
    head += ["Attempts (median)", "Hints"] if progress else []
    head += ["Most common failures", "Reading"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        d = "" if r["discrimination"] is None else f"{r['discrimination']:+.2f}"
        failures = ", ".join(f"{k} ({n})" for k, n in r["failures"][:4] if k != "not_attempted") or \
            ("" if not r["failures"] else f"not attempted ({r['failures'][0][1]})")
        found = r.get("found_difficulty")
        declared = r.get("difficulty", "")
        cells = [r["id"], f"`{r['function']}`", f"{r['attempted']}/{r['learners']}", f"{r['pass_rate']:.0%}",
                 f"{declared} / {found}" if found else declared, d, _seconds(r["median_seconds"])]
        if progress:
            cells += ["" if r["median_attempts"] is None else f"{r['median_attempts']:g}",
                      "" if r["hints"] is None else str(r["hints"])]
        cells += [failures, r["reading"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "*Discrimination* (Kelley's upper-lower index, from -1 to 1): the mean score on the problem of "
              f"the {GROUP_FRACTION:.0%} of learners who did best on the rest of the assignment, minus that of the "
              f"{GROUP_FRACTION:.0%} who did worst. Near 0, the problem does not tell them apart; below 0, the weaker "
              f"learners did better on it. Not given for fewer than {MIN_LEARNERS} learners, or when every learner "
              "scored the same on the rest. These numbers point at problems to look at; they judge no learner.",
              f"*Difficulty*: as the course declares it (its points follow it: easy 10, medium 15, hard 20), and as "
              f"this class found it: easy where {FOUND_EASY:.0%} or more passed, hard where under {FOUND_HARD:.0%} did "
              f"(from {MIN_LEARNERS} learners who attempted it). Where they differ, the reading says so."]
    if progress:
        n = max(r["with_progress"] for r in rows)
        lines.append(f"Attempts and hints come from the progress files of the {n} learner{'s' * (n != 1)} whose "
                     "submission held one (`progress.jsonl`): grading runs that attempted the problem, and hints shown.")
    return lines


def chart(rows: list[dict], fig) -> None:
    """Two panels on ``fig``: the pass rate per problem (its most common failure written in its bar), and
    each problem placed by pass rate and discrimination (the quadrants to look at shaded)."""
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [max(2, len(rows)), 8]})
    rates = [100 * r["pass_rate"] for r in rows]
    bars = left.bar([r["id"] for r in rows], rates, color=["#1a7f37" if x >= 50 else "#cf222e" for x in rates],
                    edgecolor="black", lw=0.5)
    for bar, row in zip(bars, rows):
        if row["most_common_failure"]:
            left.text(bar.get_x() + bar.get_width() / 2, 2, row["most_common_failure"][:14], rotation=90,
                      ha="center", va="bottom", fontsize=7, color="white" if bar.get_height() > 40 else "black")
    left.set_ylim(0, 105)
    left.set_ylabel("learners passing (%)")
    left.set_xlabel("problem (text: most common failure)")
    left.set_title("Pass rate per problem")
    right.axhspan(-1.05, 0, color="#cf222e", alpha=0.12, lw=0)
    right.axhspan(0, 0.2, color="#bf8700", alpha=0.12, lw=0)
    right.text(0.02, -0.95, "below 0: weaker learners did better", fontsize=7, va="bottom")
    right.text(0.02, 0.02, "0 to 0.2: does not separate", fontsize=7, va="bottom")
    placed = [r for r in rows if r["discrimination"] is not None]
    right.scatter([100 * r["pass_rate"] for r in placed], [r["discrimination"] for r in placed], s=22,
                  color="#0969da", edgecolor="black", lw=0.5, zorder=3)
    for r in placed:
        right.annotate(r["id"], (100 * r["pass_rate"], r["discrimination"]), textcoords="offset points",
                       xytext=(3, 3), fontsize=7)
    right.set_xlim(-3, 103)
    right.set_ylim(-1.05, 1.05)
    right.set_xlabel("learners passing (%)")
    right.set_ylabel("discrimination")
    missing = len(rows) - len(placed)
    right.set_title("Pass rate and discrimination" + (f" ({missing} not computable)" if missing else ""))
