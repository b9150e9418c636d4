"""Claims as code (ckptlab.claims): a claim prints its figures and fails when the run contradicts it, and a
lesson whose claim is edited to a false one fails when it runs in a real kernel."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from ckptlab.claims import ClaimFailed, claim

COURSE = Path(__file__).resolve().parents[2] / "course"
# the lessons whose outcomes are stated as claims, with no bare assert left (lessons 1 and 2 still pair
# print with assert; lesson 0 has neither)
CHECKED = ("03_restore_resharding.ipynb", "04_shard_reads_and_presharding.ipynb", "05_training_checkpoints.ipynb",
           "06_restore_for_serving.ipynb", "07_changed_machine_or_code.ipynb", "08_preemption.ipynb",
           "10_frontier_run.ipynb")


def test_a_claim_that_holds_prints_its_figures(capsys):
    claim("every peak above its bound", 3 > 2, peak=3.0, bound=2, ratio=1.23456, copies=[16, 1])
    assert capsys.readouterr().out == "every peak above its bound: True  (peak: 3, bound: 2, ratio: 1.235, copies: [16, 1])\n"


def test_a_claim_the_run_contradicts_fails_naming_it_and_its_figures(capsys):
    with pytest.raises(ClaimFailed, match=r"'16 copies' .*held: 15"):
        claim("16 copies", 15 == 16, held=15)
    assert capsys.readouterr().out == "16 copies: False  (held: 15)\n"
    assert issubclass(ClaimFailed, AssertionError)  # as a failed assert is, to pytest and to a reader


@pytest.mark.parametrize("undecided", [None, "True", [True], 1])
def test_a_claim_is_decided_by_a_truth_value_only(undecided):
    with pytest.raises(TypeError, match="must be True or False"):
        claim("x", undecided)


def test_numpy_truth_values_are_accepted():
    import numpy as np

    claim("equal", np.array_equal([1], [1]))
    claim("all", np.all(np.array([1, 2]) > 0))
    with pytest.raises(ClaimFailed):
        claim("none", np.bool_(False))


def test_lessons_state_their_outcomes_as_claims():
    """Each checked lesson imports claim and states its outcomes with it; none backs its prose with a bare
    assert (one that fails saying nothing of the claim or its figures) instead."""
    for name in CHECKED:
        source = "\n".join(c.source for c in nbformat.read(COURSE / name, as_version=4).cells if c.cell_type == "code")
        assert "from ckptlab.claims import claim" in source, name
        assert len(re.findall(r"\bclaim\(", source)) >= 5, name
        bare = [line.strip() for line in source.splitlines() if re.match(r"\s*assert\b", line)]
        assert not bare, f"{name} still backs its prose with bare asserts: {bare[:3]}"


def test_a_bare_assert_in_a_checked_lesson_is_found(tmp_path, monkeypatch):
    """The control for the check above: a checked lesson with one of its claims turned back into a bare
    assert fails it."""
    course = tmp_path / "course"
    course.mkdir()
    for name in CHECKED:
        (course / name).write_bytes((COURSE / name).read_bytes())
    nb = nbformat.read(course / CHECKED[0], as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "claim(" in c.source)
    cell.source += "\nassert True  # a bare assert"
    nbformat.write(nb, course / CHECKED[0])
    monkeypatch.setattr(sys.modules[__name__], "COURSE", course)
    with pytest.raises(AssertionError, match="bare asserts"):
        test_lessons_state_their_outcomes_as_claims()


@pytest.mark.slow
def test_a_lesson_cell_with_its_bound_edited_to_a_false_one_fails_the_notebook(tmp_path):
    """Lesson 7's check of section 1's restores, on a checkpoint saved here: with its bound edited to a
    false one (refused on 1, 2, 4 and 16 devices), the notebook fails, naming the claim. The control, the
    same cell as written passing in a real kernel, is the whole lesson's run in
    tests/lessons/test_notebooks.py::test_lessons_execute (run here too, it cost 11 s alone, 50 s in a loaded suite)."""
    cells = nbformat.read(COURSE / "07_changed_machine_or_code.ipynb", as_version=4).cells
    cell = next(c.source for c in cells if 'claim("without a target, refused on 1, 2 and 4 devices"' in c.source)
    setup = next(c.source for c in cells if c.cell_type == "code")
    imports = next(c.source for c in cells if "from ckptlab.claims import claim" in c.source)
    false = cell.replace("refused == [1, 2, 4]", "refused == [1, 2, 4, 16]")
    assert false != cell

    def run(source):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in (setup, imports, source,
                                                                                    "shutil.rmtree(work)")])
        NotebookClient(nb, timeout=300, kernel_name="python3", coalesce_streams=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        return "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))

    with pytest.raises(CellExecutionError, match="ClaimFailed") as failed:
        run(false)
    assert "the run contradicts the lesson's claim 'without a target, refused on 1, 2 and 4 devices'" in str(failed.value)
    assert "(refused_on: [1, 2, 4])" in str(failed.value)  # what the run measured: the lesson's own figures
