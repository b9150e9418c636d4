"""Hidden tests: case generators and failure messages. Loaded by the grader only; never released."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    category: str
    args: tuple


@dataclass(frozen=True)
class Hidden:
    """Hidden cases of one problem and what to tell a learner who fails them.

    ``messages`` maps a case category or a diagnosed mistake to the learner-facing text; its order
    is the order in which failing categories are reported. ``diagnose(args, actual, expected)``
    recognises common mistakes from the output and returns a key of ``messages``.
    """

    generate: Callable[[np.random.Generator], list[Case]]
    messages: dict[str, str]
    diagnose: Callable[[tuple, Any, Any], str | None] | None = None
    on_exception: str = ""
    fixed: tuple[Case, ...] = field(default_factory=tuple)
    # For problems that must raise on some inputs: does the learner's message say what is wrong?
    check_raise: Callable[[tuple, str], bool] | None = None
    # For a right value, anything else the grader measured (bytes read): a key of messages, or None.
    check_outcome: Callable[[tuple, dict], str | None] | None = None
    # Diagnoses that explain a result of the wrong type too (a "__metadata__" entry, say): reported
    # instead of the bare type error.
    type_diagnoses: tuple[str, ...] = ()
    # The expected value of a case, computed directly (arithmetic) instead of by running the
    # reference solution, where the reference is costly to run: Unit 1's references trace Flax's
    # init for every case (most of the grading process's time in a class's Unit 1), and import JAX
    # and Flax into the grading process (CPU taken from the zygote's start).
    # tests/solutions/test_references.py holds it equal to the reference on every public example and on
    # many learners' hidden cases, and the reference to eager Flax.
    expected: Callable[..., Any] | None = None
    # The expected value once the case has run, from what the grader itself did during it (5.3: a
    # state it planted in the run folder before the last restart): ``expected_after(expected,
    # outcome)``, the outcome's trusted keys only.
    expected_after: Callable[[Any, dict], Any] | None = None
    # 5.3: ``plant_table(total_steps, seed, plant)``, what the grader plants before a run's last
    # restart and what a run restoring it ends with (sandbox/trusted.planted_runs), cached.
    plant_table: Callable[[int, int, int], dict] | None = None
    # What the statement requires, each requirement quoted from it word for word, mapped to the case
    # categories built to break an answer that ignores it: ``{"never cast or reshape it":
    # ("dtype_change", "same_size_reshape"), ...}``. tests/completeness.py holds each requirement to
    # two or more cases in every learner's draw, and every requirement word of the statement
    # ("never", "must", "only", "exactly", "keep", "refuse", "raise") to a quoted requirement.
    requirements: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Diagnoses reported first wherever one of them shows, however few cases it explains: a root
    # mistake (5.2: a step that never committed) behind others (its steps, committed or not, never
    # restored either).
    precedence: tuple[str, ...] = ()
    # Failures the machine's timing alone can cause (8.3: its run still going when the grace window closed,
    # a window a loaded machine closes on a right answer too): a problem judged one of these is graded once
    # more, with no other worker of the grading process beside it, and that grading counts
    # (engine/grade.py, as for a worker the machine's memory killed). A run that never stops fails it too.
    retry_alone: tuple[str, ...] = ()

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = list(self.fixed) + list(self.generate(rng))
        missing = {c.category for c in cases} - set(self.messages)
        assert not missing, f"hidden categories without a message: {missing}"
        return cases


def load(problem) -> Hidden:
    """A problem's hidden tests: ``HIDDEN[<function name>]`` in ``autograder/hidden/unit<N>.py``."""
    import importlib

    return importlib.import_module(f"{__name__}.unit{problem.unit}").HIDDEN[problem.function]
