"""Human-readable grading reports: what `make check` prints while it grades (a line per problem as
its result arrives) and after (the problems attempted, those not attempted on one line), and which
problems a learner's paths cover."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

from autograder import registry
from autograder.engine.results import ProblemResult, Report
from autograder.outputs import label
from autograder.sandbox import NO_CODE_RAN


def _points(x: float) -> str:
    return f"{x:g}"


def _isolation_lines(report: Report, width: int) -> list[str]:
    if report.isolation == NO_CODE_RAN:
        return textwrap.wrap("Isolation: none needed: no function of yours ran (each is missing or still the stub). "
                             "Once one runs, this line names how it was isolated (see SECURITY.md).", width=width,
                             subsequent_indent="    ")
    if report.isolation:
        why = f"; strict is not available here: {'; '.join(report.isolation_missing)}" if report.isolation_missing else ""
        see = "" if report.isolation.startswith("none") else " (see SECURITY.md)"
        return textwrap.wrap(f"Isolation: {report.isolation}{why}{see}", width=width, subsequent_indent="    ")
    return []


def table(report: Report, width: int = 100) -> str:
    """Every problem, a row each, with the message under each one not correct."""
    rows = [("Problem", "Function", "Status", "Score")]
    for p in report.problems:
        rows.append((p.id, p.function, label(p.status), f"{_points(p.score)}/{_points(p.max_score)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [f"Learner: {report.learner} (this id chooses your hidden cases)",
             fmt.format(*rows[0]), "  ".join("-" * w for w in widths)]
    for p, row in zip(report.problems, rows[1:]):
        lines.append(fmt.format(*row))
        if p.status != "correct" and p.message:
            lines += textwrap.wrap(p.message, width=width, initial_indent="    ", subsequent_indent="    ")
    lines.append("  ".join("-" * w for w in widths))
    lines.append(f"Total: {_points(report.score)}/{_points(report.max_score)}")
    lines += _isolation_lines(report, width)
    return "\n".join(lines)


# --- what `make check` prints -------------------------------------------------------------------

def id_ranges(ids) -> str:
    """Problem ids in the course's order, three or more in a row of one unit as a range:
    ``3.1-3.4, 4.1-4.5, 5.2``."""
    order = {p.id: i for i, p in enumerate(registry.PROBLEMS)}
    ids = sorted(ids, key=order.__getitem__)
    runs: list[list[str]] = []
    for pid in ids:
        last = runs[-1][-1] if runs else None
        if last and order[pid] == order[last] + 1 and registry.get(pid).unit == registry.get(last).unit:
            runs[-1].append(pid)
        else:
            runs.append([pid])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(r) for r in runs)


def not_attempted_line(results: list[ProblemResult]) -> str | None:
    """The problems not attempted, on one line (None when there are none)."""
    left = [p for p in results if p.status == "not_attempted"]
    if not left:
        return None
    missing = [p.function for p in left if p.message.startswith("No function named")]
    points = sum(p.max_score for p in left)
    note = ("" if not missing else f"; no function named {' or '.join(missing)} found" if len(missing) <= 3
            else f"; {len(missing)} of them have no function of their name in what was graded")
    return (f"Not attempted: {len(left)} problem{'s' * (len(left) != 1)}, {_points(points)} points "
            f"({id_ranges(p.id for p in left)}{note})")


def _units_named(units) -> str:
    return f"Unit{'s' * (len(units) > 1)} {', '.join(map(str, sorted(units)))}"


def _listed(values) -> list[str]:
    """``--only 2.5,3.1`` as ``--only 2.5 3.1`` (make's ``ONLY=2.5,3.1``)."""
    return [x for v in values or () for x in str(v).replace(",", " ").split()]


def grading_scope(paths, units=(), only=()) -> tuple[tuple, str]:
    """The problems to grade and how to name them. ``units`` and ``only`` (as typed: ``2,3``
    splits) choose, their union; otherwise a folder covers every problem, a unit's problem notebook
    (by its name) that unit's, and any other file the problems whose functions it defines (every
    problem where it defines none, so that what is missing is named). Raises ValueError or
    KeyError for an unknown unit or problem."""
    from autograder.engine.extract import load_submission
    from autograder.registry import selection

    units, only = _listed(units), _listed(only)
    if not all(u.isdigit() for u in units):
        raise ValueError(f"--unit takes unit numbers (UNIT=2 with make), not {' '.join(units)}")
    units = [int(u) for u in units]
    if units or only:
        chosen = selection(units, only)
        named = [_units_named(units)] * bool(units) + [registry.get(x).id for x in only
                                                       if registry.get(x).unit not in set(units)]
        return chosen, ", ".join(named)
    if any(Path(p).is_dir() for p in paths):
        return registry.PROBLEMS, "every problem"
    by_notebook = {u.notebook: n for n, u in registry.UNITS.items()}
    wanted: set[str] = set()
    for path in map(Path, paths):
        unit = by_notebook.get(path.name)
        if unit is not None:
            wanted |= {p.id for p in registry.PROBLEMS if p.unit == unit}
        else:
            sub = load_submission(path)
            wanted |= {p.id for p in registry.PROBLEMS if sub.function(p.function) or sub.broken_function(p.function)}
    chosen = tuple(p for p in registry.PROBLEMS if p.id in wanted)
    if not chosen:
        return registry.PROBLEMS, "every problem (none of their functions is defined there)"
    units_in = sorted({p.unit for p in chosen})
    whole = [u for u in units_in if all(p.id in wanted for p in registry.PROBLEMS if p.unit == u)]
    if whole == units_in:
        return chosen, _units_named(units_in)
    return chosen, id_ranges(wanted)


class LiveReport:
    """Prints a line for each problem graded, as its result arrives (the engine's ``on_result``):
    id, function, status, points, and the start of the message (whole in the table at the end).
    Problems not attempted are left to :func:`summary`'s one line."""

    def __init__(self, chosen, out=None, width: int | None = None):
        self.out = out or sys.stdout
        self.width = width or max(80, min(shutil.get_terminal_size((100, 24)).columns, 160))
        self.function_width = max((len(p.function) for p in chosen), default=8)
        self.printed = 0

    def header(self, learner: str, what: str, paths, chosen) -> None:
        where = ", ".join(map(str, paths))
        self.say(f"Learner: {learner} (this id chooses your hidden cases)")
        self.say(f"Grading {what} in {where}: {len(chosen)} problem{'s' * (len(chosen) != 1)}, "
                 f"{sum(p.points for p in chosen)} points. Each problem you attempted is listed as it is graded.")

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)  # flushed: a pipe (make, tee) shows it now, not at the end

    def __call__(self, result: ProblemResult) -> None:
        if result.status == "not_attempted":
            return
        score = f"{_points(result.score)}/{_points(result.max_score)}"
        line = f"{result.id:<5} {result.function:<{self.function_width}}  {label(result.status):<9} {score:>5}  "
        reason = f"graded in {result.seconds:.1f} s" if result.status == "correct" else " ".join(result.message.split())
        room = self.width - len(line)
        if len(reason) > room:
            reason = reason[: max(room - 3, 10)].rstrip() + "..."
        self.say(line + reason)
        self.printed += 1


def debriefs(results: list[ProblemResult], width: int = 100, solved_before=frozenset()) -> list[str]:
    """For each problem correct in this run (its hidden tests passed), and for no other: why the
    answer is right, and the question an interviewer would ask next; once, the first time it is
    correct (``solved_before``: the problems the learner's progress already had correct), the others
    named on one line."""
    lines, again = [], []
    for result in results:
        if result.status == "correct":
            if result.id in solved_before:
                again.append(result.id)
                continue
            text = registry.get(result.id).debrief(min(width, 100), indent="    ")
            lines += [f"{result.id} {result.function}", *text] if text else []
    out = ["", "Correct: why it is right, and what an interviewer would ask next", *lines] if lines else []
    if again:
        out += ["", f"Correct before too: {', '.join(again)} (a debrief again: problem('{again[0]}').debrief() in its notebook)."]
    return out


def summary(report: Report, width: int = 100, solved_before=frozenset()) -> str:
    """After the live lines: the problems attempted (each message whole), the rest on one line,
    the total and the isolation level; then, for each problem correct for the first time, its debrief."""
    tried = [p for p in report.problems if p.status != "not_attempted"]
    lines = [""]
    if tried:
        rows = [("Problem", "Function", "Status", "Score")] + [
            (p.id, p.function, label(p.status), f"{_points(p.score)}/{_points(p.max_score)}") for p in tried]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        rule = "  ".join("-" * w for w in widths)
        lines += [fmt.format(*rows[0]), rule]
        for p, row in zip(tried, rows[1:]):
            lines.append(fmt.format(*row).rstrip())
            if p.status != "correct" and p.message:
                lines += textwrap.wrap(p.message, width=width, initial_indent="    ", subsequent_indent="    ")
        lines.append(rule)
    rest = not_attempted_line(report.problems)
    if rest:
        lines.append(rest)
    lines.append(f"Total: {_points(report.score)}/{_points(report.max_score)}")
    lines += _isolation_lines(report, width)
    lines += debriefs(report.problems, width, solved_before)
    return "\n".join(lines)
