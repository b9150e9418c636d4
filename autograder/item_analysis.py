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
  submission, and the hints asked for in practice.
"""

from __future__ import annotations

import json
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


def progress_of(submission: Path) -> list[dict]:
    """The records of a learner's progress file, where their submission folder holds one."""
    path = Path(submission) / PROGRESS_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _attempts_and_hints(records: list[dict], problem_id: str) -> tuple[int, int]:
    attempts = hints = 0
    for record in records:
        if record.get("kind") != "grading":
            continue
        for p in record.get("problems", []):
            if isinstance(p, dict) and p.get("id") == problem_id:
                attempts += p.get("status") != "not_attempted"
                hints += p["hints"] if type(p.get("hints")) is int and p["hints"] > 0 else 0
    return attempts, hints


def analyse(reports: list[dict], selected, progress: dict[str, list[dict]] | None = None) -> list[Item]:
    """One :class:`Item` per problem of ``selected`` (the registry's problems) over ``reports``
    (learners' saved results); ``progress`` maps a report's ``key`` to its learner's progress
    records, where collected."""
    progress = progress or {}
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
        collected = [progress[r["key"]] for r in reports if progress.get(r.get("key", ""))]
        counts = [_attempts_and_hints(records, pid) for records in collected]
        items.append(Item(
            id=pid, function=problem.function, learners=len(results),
            attempted=sum(p["status"] != "not_attempted" for p in results),
            pass_rate=sum(p["status"] == "correct" for p in results) / len(results) if results else 0.0,
            mean_score=sum(item) / len(item) if item else 0.0,
            discrimination=discrimination(item, rest),
            failures=failures.most_common(3),
            median_seconds=statistics.median(seconds) if seconds else None,
            median_attempts=statistics.median(a for a, _ in counts) if counts else None,
            hints=sum(h for _, h in counts) if counts else None, with_progress=len(counts)))
    return items


def reading(item: Item) -> str:
    """A few words on what the numbers say, for the summary's table."""
    if item.attempted == 0:
        return "nobody attempted it"
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
