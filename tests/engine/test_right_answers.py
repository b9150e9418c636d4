"""Grading checked from the other side: every curated right answer (``tests/right_answers``), a
correct solution written unlike the reference, is graded correct, with full marks, at the strict
level where the machine has it. A right answer that fails is a grader defect."""

from __future__ import annotations

import pytest

from autograder import registry
from tests.graded_together import right_rounds
from tests.right_answers import RIGHT

pytestmark = pytest.mark.slow


@pytest.mark.background("class")
@pytest.mark.timeout(1800)  # (the first may wait for the class's grading: tests/background.py)
@pytest.mark.parametrize(
    ("pid", "name"),
    [pytest.param(pid, n, id=f"{pid}-{n}") for pid, items in RIGHT.items() for n, _ in items],
)
def test_curated_right_answers_get_full_marks(pid, name):
    result = right_rounds().result(pid, name)
    assert (result.status, result.score) == ("correct", registry.get(pid).points), (
        f"a correct answer ({name}) was graded {result.status}: {result.message}")
