"""What a course declares: a unit and its problems, and a problem's public examples.

Everything here is public (the learner bundle holds it). Each unit is one file in
``autograder/units/``; a problem's other parts are keyed by its function name, in files mirrored by
unit: its hidden cases (``autograder/hidden/unitN.py``, ``HIDDEN``), its reference
(``solutions/unitN.py``) and its curated wrong answers (``tests/wrong_answers/unitN.py``).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograder.limits import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from autograder.wall.returns import ReturnSpec

# How the layout problems (Units 2 to 4) name meshes and specs: appended to their statements.
CONVENTIONS = (
    " Conventions: `mesh_shape` is an ordered dict `{axis_name: size}`; devices are numbered "
    "row-major over the mesh (`np.arange(n).reshape(sizes)`); `spec` is a tuple whose entries are "
    "None, an axis name, or a tuple of axis names (the first one most significant), and may be "
    "shorter than the array's rank (missing entries are None)."
)

DIFFICULTIES = ("easy", "medium", "hard")
# Points follow difficulty, one rule for every problem (a practice estimate is a minute a point).
# Where a class's pass rates say a problem is easier or harder than declared (grade-batch's
# summary: "as found"), re-declaring its difficulty moves its points with it.
POINTS = {"easy": 10, "medium": 15, "hard": 20}
# What kind of work a problem asks for (practice can draw by it).
CATEGORIES = {
    "accounting": "count parameters, bytes and copies",
    "layout": "shard shapes, device indices, chunks and byte runs, by arithmetic",
    "orbax": "save and restore real checkpoints with Orbax's APIs",
    "formats": "read and write checkpoint files (safetensors headers, byte ranges)",
    "fault-tolerance": "checkpoints that survive a kill",
    "debugging": "explain what went wrong, or what differs",
}

# A Markdown code span: hints and messages name code this way.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Unit:
    """A unit: its facts, in one place (the lesson, the problem notebook and its imports)."""

    number: int
    title: str
    intro: str  # the problem notebook's introduction (Markdown)
    notebook: str  # the problem notebook, relative to problems/
    lesson: str  # the lesson notebook, relative to course/
    imports: str  # the problem notebook's import cell
    lesson_figures: int  # figures the lesson draws (the notebook test checks each one appears)


@dataclass(frozen=True)
class Example:
    """A public example: arguments and the expected return value."""

    args: tuple
    expected: Any
    note: str = ""


@dataclass(frozen=True)
class Problem:
    id: str  # "1.1": unit 1, problem 1
    function: str
    signature: tuple[str, ...]  # as the learner writes it, defaults included ("zarr_format=2")
    points: int
    title: str
    statement: str
    returns: ReturnSpec  # what the function must return, and how a return is judged
    hints: tuple[str, ...]
    examples: tuple[Example, ...]
    timeout: float = DEFAULT_TIMEOUT  # seconds for all of this problem's cases, worker start-up included
    raises: tuple[str, ...] = ()  # exceptions that are a correct outcome on some inputs
    count_reads: bool = False  # the grader counts the bytes the function reads from files
    # The grader measures the function's memory from outside, above what the worker held before the
    # learner's code loaded (its VmHWM, and its anonymous memory sampled: each problem's hidden tests
    # say which they judge); its arrays return as digests.
    measure_memory: bool = False
    # Modules of the course whose use makes the problem trivial (the lesson's own helper for it):
    # a function that imports or names one is told to write it with the libraries instead.
    forbidden: tuple[str, ...] = ()
    # How its cases run (autograder.engine.runners.RUNNERS): "worker", all in one worker; "readback",
    # the function writes a checkpoint to an OutputFolder argument that a sandboxed worker of the
    # grader's own restores, and what it restores is judged (engine/readback.py); "preempted", each
    # case in workers the grader kills and starts again (engine/preempted.py).
    mode: str = "worker"
    tags: tuple[str, ...] = field(default_factory=tuple)
    # For practice: how hard the course's authors judge it (one of DIFFICULTIES; a class's real pass
    # rates are in grade-batch's summary), what kind of work it is (one of CATEGORIES), and the public
    # incident it comes from, where there is one ("Orbax issue #2972 (...)").
    difficulty: str = "medium"
    category: str = ""
    seen_in: str = ""
    # Shown once the learner's answer is correct, never before (a notebook check's public examples, a
    # grading run's hidden tests, a graded practice set): why the right answer is right, the principle
    # it rests on and what the library really does (a sentence or two), and the follow-up question an
    # interviewer for an ML-infrastructure role would ask, with no answer given. Each under 300
    # characters; tests/completeness.py wants both for every problem.
    why: str = ""
    next_question: str = ""

    def __post_init__(self):
        if self.difficulty not in DIFFICULTIES:
            raise ValueError(f"problem {self.id}: difficulty {self.difficulty!r} is not one of {DIFFICULTIES}")
        if self.points != POINTS[self.difficulty]:
            raise ValueError(f"problem {self.id}: {self.points} points for a {self.difficulty} problem; points follow "
                             f"difficulty ({', '.join(f'{d} {n}' for d, n in POINTS.items())})")
        if self.category not in CATEGORIES:
            raise ValueError(f"problem {self.id}: category {self.category!r} is not one of {tuple(CATEGORIES)}")

    @property
    def unit(self) -> int:
        return int(self.id.split(".")[0])

    @property
    def params(self) -> tuple[str, ...]:
        """Parameter names, without the defaults the signature may show."""
        return tuple(s.split("=")[0] for s in self.signature)

    @property
    def call(self) -> str:
        return f"{self.function}({', '.join(self.signature)})"

    def hint_for(self, message: str) -> str:
        """The hint to show beside a grader's message: the first hint that names code the message
        names (a `//` in both, say), else the first hint."""
        spans = set(_CODE_SPAN.findall(message))
        return next((h for h in self.hints if spans & set(_CODE_SPAN.findall(h))), self.hints[0])

    def debrief(self, width: int = 88, indent: str = "") -> list[str]:
        """``why`` and ``next_question`` as text lines (code spans without their backticks), wrapped
        to ``width``: for a learner whose answer is correct, never before."""
        lines = []
        for label, text in (("Why it is right", self.why), ("Next question", self.next_question)):
            if text:
                lines += textwrap.wrap(f"{label}: {text.replace('`', '')}", width=width, initial_indent=indent,
                                       subsequent_indent=indent + "  ", break_on_hyphens=False)
        return lines
