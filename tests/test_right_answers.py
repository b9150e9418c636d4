"""Grading checked from the other side: every curated right answer (``tests/right_answers``), a
correct solution written unlike the reference, is graded correct, with full marks, at the strict
level where the machine has it. A right answer that fails is a grader defect."""

from __future__ import annotations

import pytest

from autograder import registry
from tests.right_answers import HEADERS, RIGHT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("pid", "name", "source"),
    [pytest.param(pid, n, s, id=f"{pid}-{n}") for pid, items in RIGHT.items() for n, s in items],
)
def test_curated_right_answers_get_full_marks(grade_code, pid, name, source):
    report = grade_code(HEADERS[pid] + source, problems=[pid], learner=f"right-{name}")
    (result,) = report.problems
    assert (result.status, result.score) == ("correct", registry.get(pid).points), (
        f"a correct answer ({name}) was graded {result.status}: {result.message}")
