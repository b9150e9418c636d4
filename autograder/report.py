"""Human-readable grading reports: the table `make check` prints."""

from __future__ import annotations

import textwrap

from autograder.engine.results import Report
from autograder.outputs import label
from autograder.sandbox import NO_CODE_RAN


def _points(x: float) -> str:
    return f"{x:g}"


def table(report: Report, width: int = 100) -> str:
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
    if report.isolation == NO_CODE_RAN:
        lines += textwrap.wrap("Isolation: none needed: no function of yours ran (each is missing or still the stub). "
                               "Once one runs, this line names how it was isolated (see SECURITY.md).", width=width,
                               subsequent_indent="    ")
    elif report.isolation:
        why = f"; strict is not available here: {'; '.join(report.isolation_missing)}" if report.isolation_missing else ""
        see = "" if report.isolation.startswith("none") else " (see SECURITY.md)"
        lines += textwrap.wrap(f"Isolation: {report.isolation}{why}{see}", width=width, subsequent_indent="    ")
    return "\n".join(lines)
