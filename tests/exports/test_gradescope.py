"""The Gradescope autograder zip, run locally against a fake /autograder tree."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import registry
from autograder.exports.gradescope import VISIBILITY, build_zip
from tests.hostile import SURFACES

ROOT = Path(__file__).resolve().parents[2]


def _validate(results: dict) -> None:
    """Gradescope's documented results.json: optional top-level score, output, visibility,
    execution_time; tests with name, score, max_score, output, visibility."""
    assert set(results) <= {"score", "execution_time", "output", "output_format", "visibility",
                            "stdout_visibility", "extra_data", "tests", "leaderboard"}
    assert isinstance(results["score"], (int, float)) and isinstance(results["execution_time"], int)
    assert results.get("visibility", "visible") in VISIBILITY and results.get("stdout_visibility") in VISIBILITY
    for t in results["tests"]:
        assert set(t) <= {"score", "max_score", "status", "name", "name_format", "number", "output",
                          "output_format", "tags", "visibility", "extra_data"}
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert isinstance(t["score"], float) and isinstance(t["max_score"], float) and 0 <= t["score"] <= t["max_score"]
        assert t["visibility"] in VISIBILITY and t["status"] in ("passed", "failed")
        assert isinstance(t["tags"], list) and all(isinstance(x, str) for x in t["tags"])
    assert results["score"] == sum(t["score"] for t in results["tests"])


@pytest.mark.slow
def test_zip_runs_against_a_fake_autograder_tree(tmp_path):
    zip_path = tmp_path / "autograder.zip"
    names = build_zip(ROOT, zip_path)
    assert {"setup.sh", "run_autograder", "pyproject.toml", "solutions/unit4.py", "autograder/hidden/unit4.py"} <= set(names)
    fake = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(fake / "source")
        for name in ("setup.sh", "run_autograder"):
            assert (z.getinfo(name).external_attr >> 16) & stat.S_IXUSR
    shutil.copy(fake / "source" / "run_autograder", fake / "run_autograder")
    (fake / "submission").mkdir()
    shutil.copy(ROOT / "solutions" / "unit4.py", fake / "submission" / "unit4.py")
    (fake / "submission" / "unit2.py").write_text("def shard_shape(global_shape, mesh_shape, spec):\n    raise KeyError(spec)\n")
    # and issue 35's attacks on Units 3, 5 and 6: a forged resume, pages given back while measured,
    # host arrays posing as placed ones
    attacks = {a.problem: a.source({"ROOT": str(ROOT)}) for a in SURFACES
               if a.name in ("forge_resume", "give_back_converting", "pose_as_resharded")}
    for pid, code in attacks.items():
        (fake / "submission" / f"unit{pid[0]}.py").write_text(code)
    (fake / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": [{"email": "ada@example.org", "id": "4242"}]}))

    env = {**os.environ, "AUTOGRADER_ROOT": str(fake), "PYTHON": sys.executable,
           "PYTHONPATH": str(fake / "source")}
    out = subprocess.run(["bash", str(fake / "run_autograder")], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads((fake / "results" / "results.json").read_text())
    _validate(results)
    by_number = {t["number"]: t for t in results["tests"]}
    assert set(by_number) == {p.id for p in registry.PROBLEMS}
    assert results["score"] == sum(p.points for p in registry.PROBLEMS if p.unit == 4)
    assert by_number["2.1"]["score"] == 0 and "Raised KeyError" in by_number["2.1"]["output"]
    assert "Hint:" in by_number["2.1"]["output"]
    for pid, said in (("5.3", "could not restore your latest committed step"), ("6.2", "wrote no checkpoint"),
                      ("3.3", "cannot return a value of type")):
        assert by_number[pid]["score"] == 0 and said in by_number[pid]["output"], by_number[pid]
    # The learner id from Gradescope's metadata chooses the hidden cases, as `grade --learner` does.
    from autograder.engine.grade import grade

    alone = grade([fake / "submission"], "4242", problems=["4.4"])
    assert alone.problems[0].score == by_number["4.4"]["score"]


def test_results_are_written_even_when_the_grader_cannot_run(tmp_path):
    from autograder.exports.gradescope import run

    results = run(tmp_path)  # no submission folder at all
    _validate(results)
    assert json.loads((tmp_path / "results" / "results.json").read_text()) == results


def test_no_submission_is_graded_where_strict_isolation_is_missing(tmp_path, monkeypatch):
    from autograder.exports.gradescope import RUN_AUTOGRADER, run

    monkeypatch.setattr("autograder.sandbox.worker.strict_missing", lambda: ("Landlock ABI 0 (a test)",))
    (tmp_path / "submission").mkdir()
    shutil.copy(ROOT / "solutions" / "unit4.py", tmp_path / "submission" / "unit4.py")
    results = run(tmp_path)
    _validate(results)
    assert results["score"] == 0 and results["tests"] == [] and "Not graded" in results["output"]
    assert "Landlock" not in results["output"]  # the reason goes to the instructor's log, not to learners
    basic = run(tmp_path, isolation="basic")  # the instructor's override (CKPT_ISOLATION=basic)
    assert basic["score"] > 0 and "Isolation: basic" in basic["output"]
    assert '--isolation "${CKPT_ISOLATION:-strict}"' in RUN_AUTOGRADER


@pytest.mark.slow
def test_a_unit_assignment_tried_locally_as_the_readme_says(tmp_path, capsys):
    """`gradescope OUT.zip --unit 1`, then `gradescope-try OUT.zip NOTEBOOK` (the README's local
    test): Gradescope's tree is built, the zip's own code grades Unit 1 only, out of 40."""
    from autograder.cli import main

    zip_path = tmp_path / "unit1.zip"
    assert main(["gradescope", str(zip_path), "--unit", "1"]) == 0
    assert "4 problems, 45 points" in capsys.readouterr().out
    with zipfile.ZipFile(zip_path) as z:
        assert json.loads(z.read("assignment.json")) == {"problems": ["1.1", "1.2", "1.3", "1.4"]}
    notebook = tmp_path / "unit1_parameter_accounting.ipynb"
    shutil.copy(ROOT / "problems" / notebook.name, notebook)
    tree = tmp_path / "tree"
    assert main(["gradescope-try", str(zip_path), str(notebook), "--tree", str(tree)]) == 0
    out = capsys.readouterr().out
    results = json.loads((tree / "results" / "results.json").read_text())
    _validate(results)
    assert [t["number"] for t in results["tests"]] == ["1.1", "1.2", "1.3", "1.4"]
    assert "Total: 0 / 45" in results["output"] and "Total: 0 / 45" in out
    assert (tree / "source" / "run_autograder").is_file() and (tree / "submission" / notebook.name).is_file()
    # The tree must be new: a second run does not mix its files into the first.
    assert main(["gradescope-try", str(zip_path), str(notebook), "--tree", str(tree)]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.slow
def test_visibility_and_an_attempt_limit_tried_locally_as_the_readme_says(tmp_path, capsys):
    """`gradescope OUT.zip --visibility V --max-attempts 2`, tried with gradescope-try: each problem's
    result carries V (the top-level message stays visible and says when results come); the first two
    graded runs count, a run the grader failed on (or one with no results) does not, and a third is
    not graded: it keeps the last graded run's score and says why."""
    from autograder.cli import main

    solved = tmp_path / "unit4.py"
    shutil.copy(ROOT / "solutions" / "unit4.py", solved)
    points = registry.get("4.3").points
    for visibility in VISIBILITY:
        zip_path = tmp_path / f"{visibility}.zip"
        assert main(["gradescope", str(zip_path), "--only", "4.3", "--visibility", visibility]) == 0
        capsys.readouterr()
        tree = tmp_path / f"tree-{visibility}"
        assert main(["gradescope-try", str(zip_path), str(solved), "--tree", str(tree)]) == 0
        results = json.loads((tree / "results" / "results.json").read_text())
        _validate(results)
        # Gradescope hides the total while a test is not yet shown, but not for a "hidden" test (its
        # documentation: those should carry no points): a hidden result keeps a test of no points
        # shown after publishing, so the total cannot give its verdict away.
        shown = [t["visibility"] for t in results["tests"]]
        assert shown == ([visibility, "after_published"] if visibility == "hidden" else [visibility]), shown
        assert results["visibility"] == "visible"
        if visibility != "visible":
            assert any(t["visibility"] in ("after_due_date", "after_published") for t in results["tests"])
        assert results["score"] == points and results["extra_data"] == {"ckpt_graded": True}
        assert ("Total:" in results["output"]) == (visibility == "visible")
        assert f"shown to the learner: {visibility}" in capsys.readouterr().out

    limited = tmp_path / "limited.zip"
    assert main(["gradescope", str(limited), "--only", "4.3", "--max-attempts", "2"]) == 0
    assert "at most 2 graded attempts" in capsys.readouterr().out
    first = tmp_path / "first.json"
    assert main(["gradescope-try", str(limited), str(solved), "--tree", str(tmp_path / "t1")]) == 0
    shutil.copy(tmp_path / "t1" / "results" / "results.json", first)
    assert "Graded attempt 1 of 2" in json.loads(first.read_text())["output"]
    failed = tmp_path / "failed.json"  # a run the grader itself failed on: not an attempt
    failed.write_text(json.dumps({"score": 0.0, "execution_time": 1, "output": "The autograder failed", "tests": [],
                                  "extra_data": {"ckpt_graded": False}}))
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def coalesce_runs(runs, max_gap):\n    return []\n")
    assert main(["gradescope-try", str(limited), str(wrong), "--tree", str(tmp_path / "t2"),
                 "--previous", str(first), "--previous", str(failed)]) == 0
    second = json.loads((tmp_path / "t2" / "results" / "results.json").read_text())
    assert second["score"] == 0 and "Graded attempt 2 of 2" in second["output"]
    (tmp_path / "second.json").write_text(json.dumps(second))
    capsys.readouterr()
    assert main(["gradescope-try", str(limited), str(solved), "--tree", str(tmp_path / "t3"), "--previous", str(first),
                 "--previous", str(failed), "--previous", str(tmp_path / "second.json")]) == 0
    third = json.loads((tmp_path / "t3" / "results" / "results.json").read_text())
    _validate(third)
    assert third["output"].startswith("Not graded: you have used your 2 graded attempts")
    assert third["score"] == 0 and third["tests"] == second["tests"]  # the last graded run's, not this right answer's
    assert third["extra_data"] == {"ckpt_graded": False}
