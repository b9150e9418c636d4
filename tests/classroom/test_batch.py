"""grade-batch on a small class: full marks, partial, broken, hanging and hostile submissions."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from autograder import registry
from autograder.classroom.batch import grade_batch
from autograder.engine.grade import grade

ROOT = Path(__file__).resolve().parents[2]
# Units whose problems grade in a second or two (Unit 1 initialises Flax models; Units 5 to 7 train,
# preempt, measure memory: graded as classes in test_hostile and test_hostile_submissions).
FAST = (2, 3, 4)
FAST_UNITS = tuple(f"unit{u}.py" for u in FAST)


def _class(tmp_path: Path) -> Path:
    subs = tmp_path / "submissions"
    full = subs / "ada"
    full.mkdir(parents=True)
    for name in FAST_UNITS:
        shutil.copy(ROOT / "solutions" / name, full / name)
    partial = subs / "bob"
    partial.mkdir()
    shutil.copy(ROOT / "solutions" / "unit2.py", partial / "unit2.py")
    (partial / "unit4.py").write_text(
        "def coalesce_runs(runs, max_gap):\n"
        "    out = []\n"
        "    for off, n in sorted(runs):\n"
        "        if out and off - (out[-1][0] + out[-1][1]) < max_gap:\n"
        "            out[-1] = (out[-1][0], max(out[-1][0] + out[-1][1], off + n) - out[-1][0])\n"
        "        else:\n"
        "            out.append((off, n))\n"
        "    return out\n")
    (subs / "carol.py").write_text("def shard_shape(global_shape, mesh_shape, spec)\n    return ()\n")  # broken
    (subs / "dave.py").write_text(
        "import os\n"
        "def shard_shape(global_shape, mesh_shape, spec):\n    while True:\n        pass\n"
        "def coalesce_runs(runs, max_gap):\n    os._exit(3)\n"
        "def read_shard(path, name, bounds):\n    return open('/etc/hostname').read() * 10**9\n")
    return subs


@pytest.mark.slow
def test_grade_batch_grades_a_class_resumes_and_writes_everything(tmp_path):
    subs, out = _class(tmp_path), tmp_path / "results"
    summary = grade_batch(subs, out, jobs=2, timeout=8, progress=False)  # (dave's endless loop: 8 s)
    detail = summary.pop("isolation_detail")
    assert summary == {"learners": 4, "graded": 4, "skipped": 0, "interrupted": False, "results": 4,
                       "isolation": "strict"}
    assert detail.startswith("strict (Landlock, seccomp")

    rows = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == {"ada", "bob", "carol", "dave"}
    fast_points = sum(p.points for p in registry.PROBLEMS if p.unit in FAST)
    assert float(rows["ada"]["total"]) == fast_points
    assert float(rows["bob"]["total"]) == sum(p.points for p in registry.PROBLEMS if p.unit == 2)
    assert float(rows["carol"]["total"]) == 0 and float(rows["dave"]["total"]) == 0
    # The same scores as grading each learner on their own.
    alone = grade([subs / "bob"], "bob", timeout=8)
    assert {p.id: p.score for p in alone.problems} == {i: float(rows["bob"][i]) for i in (p.id for p in registry.PROBLEMS)}

    dave = json.loads((out / "learners" / "dave.json").read_text())
    status = {p["id"]: p["status"] for p in dave["problems"]}
    assert status["2.1"] == "timeout" and status["4.3"] == "error" and status["4.4"] in ("error", "incorrect")
    carol = json.loads((out / "learners" / "carol.json").read_text())
    assert {p["id"]: p["status"] for p in carol["problems"]}["2.1"] == "error"

    feedback = (out / "feedback" / "bob.md").read_text()
    assert "coalesce_runs" in feedback and "Off by one" in feedback and "*Hint:*" in feedback
    assert (out / "feedback" / "bob.html").read_text().startswith("<!doctype html>")
    table = {r["id"]: r for r in json.loads((out / "summary.json").read_text())}
    assert table["2.1"]["pass_rate"] == 0.5 and table["4.3"]["most_common_failure"] == "strict_gap"
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 4.3 |" in (out / "summary.md").read_text()

    # Resumable: nothing to do again; a lost result is regraded alone; --force regrades all.
    before = (out / "learners" / "ada.json").read_text()
    assert grade_batch(subs, out, progress=False)["graded"] == 0
    (out / "learners" / "carol.json").unlink()
    assert grade_batch(subs, out, progress=False, timeout=8)["graded"] == 1
    assert (out / "learners" / "ada.json").read_text() == before
    assert not list(out.rglob(".*.tmp"))


def test_find_learners_rejects_two_submissions_for_one_learner(tmp_path):
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada.ipynb").write_text("{}")
    with pytest.raises(ValueError, match="ada"):
        grade_batch(tmp_path, tmp_path / "out", progress=False)


def test_an_interrupted_batch_keeps_what_was_graded_and_goes_on(tmp_path, monkeypatch):
    from autograder.classroom import batch

    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "ben", "cat"):
        (subs / f"{name}.py").write_text("def coalesce_runs(runs, max_gap):\n    raise NotImplementedError\n")
    real = batch._grade_one

    def interrupted_at_ben(learner, *args):
        if learner.id == "ben":
            raise KeyboardInterrupt  # as Ctrl-C would, in the middle of the class
        return real(learner, *args)

    monkeypatch.setattr(batch, "_grade_one", interrupted_at_ben)
    out = tmp_path / "out"
    first = grade_batch(subs, out, jobs=1, progress=False)
    assert first["interrupted"] and (out / "learners" / "ann.json").exists()
    assert not (out / "learners" / "ben.json").exists() and not list(out.rglob(".*.tmp"))
    monkeypatch.setattr(batch, "_grade_one", real)
    second = grade_batch(subs, out, jobs=1, progress=False)
    assert not second["interrupted"] and second["skipped"] >= 1 and second["results"] == 3
    assert sorted(p.stem for p in (out / "learners").glob("*.json")) == ["ann", "ben", "cat"]


def test_a_batch_runs_jobs_workers_in_all_and_its_last_learner_uses_every_one(tmp_path, monkeypatch):
    """grade-batch -j 2: two learners at a time, each may run two workers, and slots shared by
    the class bound them to two in all; a learner graded alone (the last, here the only one
    left) runs two at once. Each worker sleeps on its first case, so workers that could overlap do."""
    from autograder import sandbox
    from tests.conftest import best_isolation

    ids = ["2.1", "2.2", "2.3", "2.4"]
    sleepy = "import time\n\nSLEPT = []\n\n" + "".join(  # a worker sleeps on its first case only
        f"def {registry.get(i).call}:\n    if not SLEPT:\n        SLEPT.append(1)\n        time.sleep(0.4)\n"
        "    return None\n\n" for i in ids)
    live, most = [0], []
    real = sandbox.Worker

    class Counted(real):
        def __init__(self, *args, **kw):
            live[0] += 1  # (under the GIL: one bytecode at a time is enough for a count)
            most.append(live[0])
            super().__init__(*args, **kw)

        def wait(self):
            try:
                return super().wait()
            finally:
                live[0] -= 1

    monkeypatch.setattr(sandbox, "Worker", Counted)
    level = best_isolation()
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "ben", "cat"):
        (subs / f"{name}.py").write_text(sleepy)
    grade_batch(subs, tmp_path / "out", jobs=2, progress=False, isolation=level)
    assert max(most) == 2, most  # never more than two, though two learners with two threads each ran
    most.clear()
    (subs / "dan.py").write_text(sleepy)
    grade_batch(subs, tmp_path / "out", jobs=2, progress=False, isolation=level)  # dan only: the rest is done
    assert max(most) == 2, most  # alone, it used both
    assert json.loads((tmp_path / "out" / "learners" / "dan.json").read_text())["problems"][4]["status"] == "incorrect"


@pytest.mark.slow
def test_references_that_write_checkpoints_are_safe_under_concurrency(tmp_path):
    """8 learners' 3.3 graded with -j 2 while the machine is loaded, twice: every 3.3 correct.
    Two learners' references ran Orbax in one process at once and lost 3.3 to FileExistsError or
    TimeoutError in 9 of 12 runs (3 of 8 learners here) before the trusted side's saves and
    restores took turns (:data:`autograder.wall.kinds.ORBAX`)."""
    import inspect
    import subprocess
    import sys

    from solutions import unit3
    from tests.conftest import best_isolation

    subs = tmp_path / "subs"
    subs.mkdir()
    source = "import jax\nimport orbax.checkpoint as ocp\nfrom jax.sharding import NamedSharding, PartitionSpec\n\n" \
        + inspect.getsource(unit3.restore_resharded)
    for i in range(8):
        (subs / f"learner{i}.py").write_text(source)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for run in range(2):
            out = tmp_path / f"out{run}"
            grade_batch(subs, out, jobs=2, progress=False, isolation=best_isolation())
            for path in sorted((out / "learners").glob("*.json")):
                result = next(p for p in json.loads(path.read_text())["problems"] if p["id"] == "3.3")
                assert result["status"] == "correct", (run, path.stem, result["message"])
    finally:
        busy.kill()
        busy.wait()


def test_a_class_graded_for_one_unit_is_scored_fed_back_and_summarised_on_that_unit_only(tmp_path, root):
    """`grade-batch --unit 1`: totals out of Unit 1's 45 points, feedback and the summary on Unit 1's
    problems only; graded again for another choice, the results follow it. Before: every learner was
    graded out of 210, with 15 'No function named ...' sections for units nobody assigned."""
    import subprocess
    import sys

    subs = tmp_path / "subs"
    (subs / "ada").mkdir(parents=True)
    shutil.copy(root / "solutions" / "unit1.py", subs / "ada" / "unit1.py")
    (subs / "bob.py").write_text("def dense_params(features, seed, num_shards, x):\n    return [0, 0]\n")
    out = tmp_path / "out"

    def run(*choice):
        done = subprocess.run([sys.executable, "-m", "autograder", "grade-batch", str(subs), "--out", str(out), "--quiet",
                               *choice], cwd=root, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open())}

    unit1 = [p.id for p in registry.PROBLEMS if p.unit == 1]
    rows = run("--unit", "1")
    assert list(rows["ada"]) == ["learner", *unit1, "total", "max_total"]
    assert rows["ada"]["total"] == "45" and rows["ada"]["max_total"] == "45" and rows["bob"]["total"] == "0"
    feedback = (out / "feedback" / "bob.md").read_text()
    assert "Total: 0 / 45" in feedback and "2.1" not in feedback and "No function named" in feedback
    summary = json.loads((out / "summary.json").read_text())
    assert [r["id"] for r in summary] == unit1
    rows = run("--only", "2.1", "1.1")  # another choice: graded again for it, in the course's order
    assert list(rows["ada"])[1:3] == ["1.1", "2.1"] and rows["ada"]["max_total"] == "20"
    bad = subprocess.run([sys.executable, "-m", "autograder", "grade-batch", str(subs), "--out", str(out), "--unit", "99"],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no unit 99" in bad.stderr


# A learner who rewrites the checkpoint it was given (at the basic level, whose workers may write
# their inputs) and then fails; graded before an honest classmate on the same shared cases.
_VANDAL = '''
import os

def restore_resharded(ckpt_dir, target_mesh, target_specs):
    for top, _, names in os.walk(ckpt_dir):
        for name in names:
            with open(os.path.join(top, name), "r+b") as f:
                f.write(b"\\0" * 64)
    raise RuntimeError("vandalised")
'''


def _shared_class(tmp_path: Path) -> Path:
    subs = tmp_path / "submissions"
    subs.mkdir(parents=True)
    (subs / "a_vandal.py").write_text(_VANDAL)
    for name in ("b_honest", "c_honest"):
        shutil.copy(ROOT / "solutions" / "unit3.py", subs / f"{name}.py")
    return subs


@pytest.mark.slow
def test_shared_cases_run_the_references_once_per_problem_and_give_each_learner_its_own_files(tmp_path, monkeypatch):
    """With --shared-cases every learner is graded on the same hidden cases: the references run
    once per problem and case for the whole class (counted), each worker gets its own copy of the
    files (a learner who rewrote its checkpoint leaves the next learner's intact: full marks), the
    results and summary say so, and nothing of the class's files is left once it is done. The
    control: without the copy (each worker handed the grader's own files), the honest learners
    graded after the vandal fail."""
    import tempfile

    from autograder.engine import grade as engine
    from autograder.wall import files

    computed = []  # the references' processes started, by problem (each one writes every case's files and outcome)
    real = engine.trusted_side.parts
    monkeypatch.setattr(engine.trusted_side, "parts", lambda target, pid, *rest: computed.append(pid) or real(target, pid, *rest))
    grader_tmp = tmp_path / "grader-tmp"
    grader_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(grader_tmp))
    out = tmp_path / "results"
    grade_batch(_shared_class(tmp_path), out, jobs=1, progress=False, isolation="basic", problems=(registry.get("3.3"),),
                shared_cases=True)
    reports = {n: json.loads((out / "learners" / f"{n}.json").read_text()) for n in ("a_vandal", "b_honest", "c_honest")}
    assert reports["a_vandal"]["score"] == 0
    assert [reports[n]["score"] for n in ("b_honest", "c_honest")] == [registry.get("3.3").points] * 2, reports
    assert {r["cases"] for r in reports.values()} == {"shared"}
    assert computed == ["3.3"], computed  # once, not three times
    assert "the same for every learner (--shared-cases)" in (out / "summary.md").read_text()
    assert [n for n in os.listdir(grader_tmp) if n.startswith("ckpt-worker-")] == []  # the class's files removed

    # A batch run again without --shared-cases grades them again: the shared results do not count as their own.
    from autograder.classroom.batch import _graded_for

    saved = out / "learners" / "b_honest.json"
    assert _graded_for(saved, (registry.get("3.3"),), "shared") and not _graded_for(saved, (registry.get("3.3"),), "own")

    # The control: each worker handed the grader's own copy.
    monkeypatch.setattr(files, "mirror", lambda value, source, target: value)
    control = tmp_path / "control"
    grade_batch(_shared_class(tmp_path / "c"), control, jobs=1, progress=False, isolation="basic",
                problems=(registry.get("3.3"),), shared_cases=True)
    scores = [json.loads((control / "learners" / f"{n}.json").read_text())["score"] for n in ("b_honest", "c_honest")]
    assert scores == [0, 0], scores
