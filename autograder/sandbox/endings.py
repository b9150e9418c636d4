"""How a worker ended, in words: why a worker that ended before any learner code ran did so (its
log, written by the grader's own start, never by learner code). Whose failure each ending is, the
worker decides (:class:`autograder.sandbox.worker.Worker`: its ``started`` frame, the kernel's OOM
kills) and the judge says (:mod:`autograder.engine.judge`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autograder.sandbox.worker import RunResult

# The lines of a worker's log that say why it ended: XLA's and Python's own words.
_CAUSE = re.compile(r"Unknown flag|Error|error:|FATAL|Fatal|Traceback|No module named|cannot|Abort", re.IGNORECASE)


def start_failure(run: RunResult) -> str:
    """Why a worker ended before any learner code ran: the last telling line of its log (written
    by the grader's own start, never by learner code), and how it ended."""
    how = (f"killed by signal {-run.returncode}" if (run.returncode or 0) < 0
           else f"exit code {run.returncode}" if run.returncode is not None else "no answer")
    lines = [line.strip() for line in run.stderr_tail.splitlines() if line.strip()]
    telling = [line for line in lines if _CAUSE.search(line)] or lines
    cause = telling[-1] if telling else ""
    # XLA's fatal lines start with a log prefix ("F0000 00:00:... file.cc:123] "): the words after it.
    cause = re.sub(r"^[FEW]\d{4} [\d:. ]+\S+\] ", "", cause)[:300]
    return f"{how}: {cause}" if cause else how
