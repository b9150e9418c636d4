"""After a correct answer, and never before: why it is right, and what an interviewer asks next
(``Problem.why`` and ``Problem.next_question``), in `make check`'s summary, a graded practice set's
review and a notebook check."""

from __future__ import annotations

import inspect

import pytest

from autograder import registry
from autograder.learner import practice, progress
from autograder.learner.notebook import ProblemHandle
from autograder.learner.report import summary
from solutions import unit1

RIGHT, WRONG = registry.get("1.3"), registry.get("1.1")
WRONG_SOURCE = ("import numpy as np\n\n"
                "def dense_checkpoint_accounting(seed, x, num_shards, features):\n"
                "    return np.array([0.0, 0.0])\n")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_COURSE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _shown(text: str, p: registry.Problem) -> bool:
    """Both halves of ``p``'s debrief are in ``text``, however wrapped."""
    flat = " ".join(text.split())
    return all(" ".join(f"{label}: {half}".replace("`", "").split()) in flat
               for label, half in (("Why it is right", p.why), ("Next question", p.next_question)))


def test_every_problem_has_a_debrief_that_wraps():
    for p in registry.PROBLEMS:
        lines = p.debrief(100, "    ")
        assert lines[0].startswith("    Why it is right: ") and any("Next question: " in x for x in lines), p.id
        assert "`" not in "".join(lines) and max(map(len, lines)) <= 100, p.id


def test_a_grading_run_debriefs_the_problems_it_found_correct_only(grade_code):
    source = "import jax\nimport jax.numpy as jnp\nimport numpy as np\n\n" + inspect.getsource(unit1.param_bytes) + "\n" + WRONG_SOURCE
    report = grade_code(source, problems=["1.1", "1.2", "1.3"])
    assert {p.id: p.status for p in report.problems} == {"1.1": "incorrect", "1.2": "not_attempted", "1.3": "correct"}
    text = summary(report)
    table, _, debrief = text.partition("Correct: why it is right, and what an interviewer would ask next")
    assert "Total: 10/" in table and debrief, text
    assert debrief.splitlines()[1] == "1.3 param_bytes" and _shown(debrief, RIGHT), text
    assert not _shown(text, WRONG) and "1.1" not in debrief and "1.2" not in debrief, text
    # A run with nothing correct shows none.
    none = grade_code(WRONG_SOURCE, problems=["1.1"])
    assert "Why it is right" not in summary(none) and "interviewer" not in summary(none)
    # Once: a problem the learner's progress already had correct is named, not debriefed again.
    again = summary(report, solved_before={"1.3"})
    assert "Why it is right" not in again and "Correct before too: 1.3 (a debrief again: problem('1.3').debrief()" in again


def test_a_graded_practice_set_debriefs_its_correct_problems():
    items = [practice.Item(RIGHT), practice.Item(WRONG)]
    report = {"learner": "ann", "score": 10.0, "max_score": 20.0, "graded_by": "hidden", "problems": [
        {"id": "1.3", "function": RIGHT.function, "status": "correct", "score": 10.0, "max_score": 10.0, "message": ""},
        {"id": "1.1", "function": WRONG.function, "status": "incorrect", "score": 0.0, "max_score": 10.0,
         "message": "Wrong on 6 of 12 cases."}]}
    text = practice.review(items, report, 300, 20)
    assert "Correct: why it is right, and what an interviewer would ask next:" in text
    assert "  1.3 param_bytes" in text and _shown(text, RIGHT) and not _shown(text, WRONG), text
    assert text.rstrip().endswith("Your progress: python -m autograder progress (make progress).")


def test_a_notebook_check_shows_it_under_a_correct_result_only(home, capsys):
    wrong = ProblemHandle(RIGHT, {"param_bytes": lambda params, dtype: 0})
    result = wrong.check()
    assert result.status == "incorrect" and "Why it is right" not in repr(result)
    wrong.debrief()
    assert capsys.readouterr().out.startswith("Not yet: the debrief of 1.3 opens once its check says correct")
    right = ProblemHandle(RIGHT, {"param_bytes": unit1.param_bytes})
    result = right.check()
    assert result.passed and _shown(repr(result), RIGHT) and "Next question" in result._repr_html_()
    right.debrief()
    assert _shown(capsys.readouterr().out, RIGHT)


def test_a_recorded_correct_grading_opens_it_in_a_fresh_handle(home, capsys):
    from autograder.invoke import default_learner

    handle = ProblemHandle(RIGHT, {})
    handle.debrief()
    assert capsys.readouterr().out.startswith("Not yet")
    progress.record_grading({"learner": default_learner(), "problems": [
        {"id": "1.3", "status": "correct", "score": 10.0, "max_score": 10.0},
        {"id": "1.1", "status": "incorrect", "score": 0.0, "max_score": 10.0}]}, "grade")
    handle.debrief()
    assert _shown(capsys.readouterr().out, RIGHT)
    ProblemHandle(WRONG, {}).debrief()
    assert capsys.readouterr().out.startswith("Not yet")
