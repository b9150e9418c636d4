"""Issue 49: every way a learner learns reaches one progress record, and what `make practice`,
`make drill` and `make` itself do on a learner's first afternoon: each test drives the path a learner
uses (a notebook's calls, make's targets, the install script with a slow fake pip)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autograder import registry
from autograder.classroom import item_analysis
from autograder.learner import drills, practice, progress

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh progress store for this test and the processes it starts, of learner 'ann'."""
    monkeypatch.setenv("CKPT_COURSE_HOME", str(tmp_path / "home"))
    for name in ("USER", "LOGNAME"):
        monkeypatch.setenv(name, "ann")
    return tmp_path / "home"


def _make(*args, stdin=None, timeout=300):
    return subprocess.run(["make", "-s", "-C", str(ROOT), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ})


def _practice(*args: str) -> subprocess.CompletedProcess:
    """`make practice ...`, stopped at once (q); the practice file it wrote is removed (its path is
    in what it printed: only this run's file, never another's)."""
    out = _make("practice", *args, stdin="q\n")
    for name in re.findall(r"practice/session-[\d-]+\.py", out.stdout):
        (ROOT / name).unlink(missing_ok=True)
    return out


def _drilled() -> list[str]:
    return [r["drill"] for r in progress.load("ann") if r.get("kind") == "drill"]


# --- A: the notebook's hints and checks, in the one progress record ----------------------------------

NOTEBOOK = """
from autograder.notebook import problem
q7_3 = problem("7.3")
q7_3.hint()
q7_3.hint()
q7_3.hint(1)            # hint 1 again: taught once
def param_bytes(params, dtype):
    return 0            # a wrong answer, checked
print(repr(problem("1.3").check()))
"""


def test_a_notebook_hint_and_check_appear_in_make_progress(home):
    """The learner's report: `problem('7.3').hint()` in a notebook never reached `make progress`.
    The notebook's calls run as a notebook runs them (its cells in __main__), then make progress."""
    run = subprocess.run([sys.executable, "-c", NOTEBOOK], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ})
    assert run.returncode == 0, run.stderr
    assert "Hint 2/3" in run.stdout and "1.3 param_bytes" in run.stdout
    shown = _make("progress")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "no grading run yet; 1 notebook check(s); 2 hint(s)" in out, out
    assert re.search(r"7\.3 +\w+ +medium +\w+ +not started +0/15 +hints 2$", out, re.M), out
    assert re.search(r"1\.3 +param_bytes .* attempted +0/10 +checks 1 \(last: incorrect\)$", out, re.M), out
    # nbgrader validating the notebook is not the learner asking: nothing more is recorded.
    before = len(progress.load("ann"))
    run = subprocess.run([sys.executable, "-c", NOTEBOOK], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "NBGRADER_EXECUTION": "validate"})
    assert len(progress.load("ann")) == before


def test_every_kind_of_record_in_one_store_and_the_class_reader_takes_them(home):
    """Grading, practice (on its grading record), drills and the notebook's hints and checks, all in
    progress.jsonl; a learner hands that file in, and item_analysis's careful reader counts its
    grading runs as before and the notebook's hint beside the practice set's, without a note."""
    from autograder.notebook import problem

    progress.record_grading({"learner": "ann", "problems": [
        {"id": "2.1", "status": "incorrect", "score": 0.0, "max_score": 10.0}]}, "practice",
        {"2.1": {"seconds_spent": 60.0, "hints": 1}})
    progress.record_drill("ann", "shard_bytes", True, 12.0)
    handle = problem("2.1")
    handle.hint()
    handle.check(lambda *a: (1, 1))
    kinds = [r["kind"] for r in progress.load("ann")]
    assert kinds == ["grading", "drill", "hint", "check"]
    row = {r.problem.id: r for r in progress.summarize(progress.load("ann"))}["2.1"]
    assert (row.hints, row.checks, row.check_status, row.attempts) == (2, 1, "incorrect", 1)
    text = progress.table("ann", progress.load("ann"))
    assert "hints 2  checks 1 (last: incorrect)" in text and "Drills: 1/1 right" in text
    handed_in = home / "submission"
    handed_in.mkdir()
    (handed_in / "progress.jsonl").write_bytes(progress.store().read_bytes())
    got = item_analysis.progress_of(handed_in)
    assert got.counts == {"2.1": (1, 2)} and got.note == ""


def test_damaged_new_records_are_passed_over(home):
    home.mkdir(parents=True)
    lines = [{"kind": "hint", "learner": "ann", "problem": "7.3", "hint": 10**9},
             {"kind": "hint", "learner": "ann", "problem": ["7.3"], "hint": 1},
             {"kind": "check", "learner": "ann", "problem": "1.1", "status": "<b>owned</b>"},
             {"kind": "grading", "learner": "ann", "problems": [5, {"id": "1.1", "score": "lots", "status": "error"}]},
             {"kind": "drill", "learner": "ann", "drill": ["x"], "correct": "yes"}]
    progress.store().write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = {r.problem.id: r for r in progress.summarize(progress.load("ann"))}
    assert rows["7.3"].hints == 0 and rows["1.1"].checks == 0 and rows["1.1"].best == 0
    assert "Drills: 0/1 right" in progress.table("ann", progress.load("ann"))


# --- C: drills from the units studied, kinds varied, a mistake named ----------------------------------

def test_make_drill_unit_1_asks_only_unit_1(home):
    out = _make("drill", "UNIT=1", stdin="?\n" * 5)
    assert out.returncode == 0, out.stderr
    assert "5 drill question(s) from Unit 1." in out.stdout
    asked = _drilled()
    assert len(asked) == 5 and {drills.UNIT_OF[k] for k in asked} == {1}, asked


def test_on_a_fresh_store_drills_start_with_unit_1_then_follow_what_was_studied(home):
    out = subprocess.run([sys.executable, "-m", "autograder", "drill"], input="?\n" * 5, capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert "from Unit 1, where the course starts; make drill UNIT=N" in out.stdout, out.stdout
    assert {drills.UNIT_OF[k] for k in _drilled()} == {1}
    # A hint asked for in Unit 4's notebook and a graded 2.1: Units 2 and 4 are what was studied.
    progress.record_hint("ann", "4.2", 1, 3)
    progress.record_grading({"learner": "ann", "problems": [
        {"id": "2.1", "status": "incorrect", "score": 0.0, "max_score": 10.0},
        {"id": "5.1", "status": "not_attempted", "score": 0.0, "max_score": 10.0}]}, "grade")
    assert progress.studied_units(progress.load("ann")) == [2, 4]
    said = []
    drills.run(5, None, "ann", seed=1, ask=lambda _: "?", say=said.append)
    assert "from Units 2, 4, the units you have studied" in said[0]
    assert {drills.UNIT_OF[k] for k in _drilled()[5:]} <= {2, 4}
    assert drills.drill(seed=0).unit_of_study in (2, 4)  # the notebook's drill() too
    assert subprocess.run([sys.executable, "-m", "autograder", "drill", "--unit", "99"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300).returncode == 2


def test_five_drill_questions_are_of_five_kinds(home):
    out = subprocess.run([sys.executable, "-m", "autograder", "drill", "--unit", "4", "5", "--count", "5"],
                         input="?\n" * 5, capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert len(set(_drilled())) == 5, _drilled()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        for units in ([1], [4], [4, 5], list(registry.units())):
            kinds = drills.kinds_of(units)
            got = drills.plan(5, kinds, rng)
            assert len(set(got)) == min(5, len(kinds)), (units, got)
            assert all(a != b for a, b in itertools.pairwise(got)), got  # Unit 1 has two kinds: they alternate


@pytest.mark.parametrize("seed", range(10))
def test_the_safetensors_answer_8_bytes_short_is_told_it_left_out_the_length_bytes(seed):
    q = drills.drill("safetensors_offset", seed=seed)
    right, feedback = q.grade(q.solution - 8)
    assert right is False and "You left out the 8 length bytes" in feedback, feedback
    right, feedback = q.grade(8 + q.facts["begin"])
    assert right is False and f"JSON header's {q.facts['header']} bytes" in feedback
    assert "left out" not in q.grade(q.solution - 9)[1]  # no mistake of a known kind: none named


@pytest.mark.parametrize("kind", list(drills.KINDS))
def test_every_drill_names_the_mistakes_it_knows(kind):
    named = 0
    for seed in range(30):
        q = drills.drill(kind, seed=seed)
        assert "That" not in q.grade(q.solution)[1].split("\n")[0]
        for wrong, why in q.mistakes:
            if q._same(float(wrong), q.solution):
                continue
            right, feedback = q.grade(wrong)
            assert right is False
            others = {w for v, w in q.mistakes if q._same(float(v), float(wrong))}
            assert (why in feedback) == (len(others) == 1), (kind, seed, wrong, feedback)
            named += why in feedback
    assert named, kind  # every kind knows at least one mistake, and names it


# --- B: a practice set fits the minutes asked ------------------------------------------------------------

def test_practice_of_10_minutes_never_offers_a_20_minute_problem(home, tmp_path):
    for seed in range(200):
        chosen, _ = practice.choose([], 10, rng=np.random.default_rng(seed))
        assert [practice.estimate(p) for p in chosen] == [10.0], [p.id for p in chosen]
    out = _practice("MINUTES=10")
    assert out.returncode == 0, out.stderr
    assert "about 10 min)" in out.stdout and "about 20 min" not in out.stdout, out.stdout


def test_nothing_fits_says_so_and_offers_the_shortest_as_over_the_time(home):
    out = _practice("MINUTES=10", "UNIT=6")  # Unit 6: a 15-point and a 20-point problem
    assert out.returncode == 0, out.stderr
    assert "No problem here fits 10 minutes: the shortest is 6." in out.stdout
    assert "restore_for_serving, about 15 min. It is offered over your time" in out.stdout


def test_a_set_fills_the_minutes_as_closely_as_the_problems_allow():
    sums = {0.0}
    for p in registry.PROBLEMS:  # every total some set of problems adds up to
        sums |= {t + practice.estimate(p) for t in sums}
    for minutes in (10, 15, 25, 30, 35, 45, 60, 95):
        best = max(t for t in sums if t <= minutes)
        for seed in range(10):
            chosen, _ = practice.choose([], minutes, rng=np.random.default_rng(seed))
            total = sum(practice.estimate(p) for p in chosen)
            assert total == best, (minutes, seed, [p.id for p in chosen])
            assert practice.over_time(chosen, minutes) is None


# --- D: the first install says what it is doing ------------------------------------------------------

_spec = importlib.util.spec_from_file_location("setup_env", ROOT / "tools" / "setup_env.py")
setup_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_env)

SLOW_PIP = """#!/bin/sh
case "$*" in
  *--upgrade*) sleep 1.2 ;;
  *-c*) exit 1 ;;
  *) echo "Collecting jax==0.12.0.1"
     echo "Installing collected packages: numpy, jaxlib, jax"
     sleep 1.2
     echo "Successfully installed jax jaxlib numpy" ;;
esac
"""


def test_setup_env_says_each_step_and_beats_while_pip_is_silent(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(setup_env, "HEARTBEAT_S", 0.2)
    fake = tmp_path / "venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(SLOW_PIP)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    start = time.monotonic()
    assert setup_env.main([str(tmp_path / "venv"), "-e", "."]) == 0
    assert time.monotonic() - start >= 2.4
    out = capsys.readouterr().out
    assert "updating pip" in out and "installing 3 packages" in out and "Environment ready in" in out
    # Each silent second and more of pip is covered: at least a beat per 0.2 s heartbeat (some slack).
    assert out.count("updating pip: still at it") >= 3, out
    assert out.count("installing 3 packages into the environment (the longest step: unpacking JAX and jaxlib): "
                     "still at it") >= 3, out
    assert out.strip().splitlines()[-1].startswith("Environment ready in")  # no beat after the last line
