"""The autograder test cell of the nbgrader course: its source and nbgrader metadata, and
:func:`grade_cell`, what it runs in a learner's kernel. Under each problem of an assignment, a
locked test cell worth the problem's points::

    from autograder.exports.nbgrader_course import grade_cell
    grade_cell("1.1")

(``autograder.exports.nbgrader_course`` re-exports :func:`grade_cell`: the cells written into instructors'
courses import it from there.) The cell holds no test, so nbgrader's feedback, which shows test
cells in full (nbgrader issue 917 for ``### BEGIN HIDDEN TESTS``), has no hidden test to show.

A learner running a test cell in their own kernel (or ``nbgrader validate``) runs
:func:`grade_cell`: the hidden tests in a separate process where they are installed, the public
examples where they are not. This module never imports nbgrader or nbconvert: a learner's kernel
loads it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from autograder import registry

CELL_TIMEOUT = 180  # seconds nbgrader waits for one cell; a test cell takes a few seconds


# --- the test cell -----------------------------------------------------------------------------

class NotFullMarks(Exception):
    """Raised by a test cell that did not earn its points: nbgrader gives an erroring cell 0.

    IPython shows ``_render_traceback_`` instead of a traceback, so feedback shows the grader's
    message and nothing of the grader's own code."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        return wrapped_lines(self.message)


def _learner_id() -> str:
    """nbgrader autogrades in ``autograded/<student>/<assignment>/``: the student id, so cases match
    ``grade --learner <student>``. ``CKPT_LEARNER`` overrides; otherwise the user name."""
    if os.environ.get("CKPT_LEARNER"):
        return os.environ["CKPT_LEARNER"]
    cwd = Path.cwd()
    if cwd.parent.parent.name == "autograded":
        return cwd.parent.name
    from autograder.invoke import default_learner

    return default_learner()


def _kernel_cells() -> list[str]:
    """The cells this kernel has run, in order (the raw input history, magics and all)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("grade_cell runs inside a Jupyter notebook")
    return list(shell.history_manager.input_hist_raw[1:])


def _autograding() -> bool:
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def grade_cell(problem_id: str, timeout: float = CELL_TIMEOUT - 20) -> None:
    """Grade one problem with the hidden tests, from the code this kernel has run so far.

    Full marks: prints the result. Anything else raises :class:`NotFullMarks` with the grader's
    message (the cell errors, and nbgrader gives it 0)."""
    from autograder.registry import hidden_tests_available

    p = registry.get(problem_id)
    if _autograding():
        # nbgrader is running this notebook in a kernel: the course's nbgrader_config.py (which
        # grades without one) was not loaded. A kernel's cells can change what this cell does.
        raise NotFullMarks(f"Problem {p.id}: not graded. nbgrader ran this notebook in a kernel, where the "
                           "learner's cells can change the test cells; autograde with the course's "
                           "nbgrader_config.py (python -m autograder nbgrader writes it).")
    if not hidden_tests_available():
        return _public_check(p)
    from autograder.invoke import run_json

    with tempfile.TemporaryDirectory(prefix="nbgrader-cell-") as tmp:
        # Named as the learner's notebook, so messages say "<notebook> code cell N".
        nb_path = Path(tmp) / registry.UNITS[p.unit].notebook
        nbformat.write(new_notebook(cells=[new_code_cell(c) for c in _kernel_cells()]), str(nb_path))
        try:
            data, status, _ = run_json(["grade", str(nb_path), "--only", p.id, "--learner", _learner_id(), "--no-record"],
                                    timeout)
        except subprocess.TimeoutExpired:
            raise NotFullMarks(f"Problem {p.id}: grading took longer than {timeout:.0f} s and was stopped.") from None
    if data is None:
        # No detail from the grader's output: it would reach learners' feedback.
        raise NotFullMarks(f"Problem {p.id}: the grader could not run here (exit status {status}). Your "
                           "instructor can grade the notebook with `python -m autograder grade`.")
    result = data["problems"][0]
    line = f"Problem {p.id} {p.function}: {result['status'].replace('_', ' ')}, {result['score']:g}/{result['max_score']:g} points."
    if result["status"] == "correct":
        print(line)
        return None
    raise NotFullMarks(f"{line}\n{result['message']}")


def _public_check(p: registry.Problem) -> None:
    from autograder.learner.notebook import CheckFailed, problem

    try:
        result = problem(p.id).check()
    except CheckFailed as failed:  # raised while nbgrader validates: this cell says more
        result = failed.result
    if not result.passed:
        raise NotFullMarks(f"{result!r}\n(Public examples only: the hidden tests run when your instructor autogrades.)")
    print(f"{result!r}\n(Public examples only: the hidden tests run when your instructor autogrades.)")


def wrapped_lines(message: str, width: int = 100) -> list[str]:
    """The message's lines, each wrapped at ``width``: nbgrader's feedback and formgrader show an
    error output as preformatted text, where a long line runs off the page."""
    import textwrap

    return [piece for line in message.splitlines()
            for piece in (textwrap.wrap(line, width, subsequent_indent="    ", break_on_hyphens=False) or [""])]


# --- the test cell as nbgrader holds it ---------------------------------------------------------

def nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def grading_cell_source(p: registry.Problem) -> str:
    return (f"# Autograder test for problem {p.id} ({p.points} points). The hidden tests run in a separate\n"
            "# process on the code above; outside autograding, the public examples run. Do not edit.\n"
            "from autograder.exports.nbgrader_course import grade_cell\n"
            "\n"
            f'grade_cell("{p.id}")')
