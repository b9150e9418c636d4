"""Practice sessions, progress records and drills: real grading, real libraries behind the drills."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from autograder import registry
from autograder.learner import drills, practice, progress
from autograder.registry import stub_source
from ckptlab.explore import restore_reads
from ckptlab.layout import course_mesh, real_index_domains
from solutions import unit1

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh progress store for this test (and the processes it starts)."""
    monkeypatch.setenv("CKPT_COURSE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _cli(*args, stdin=None, timeout=600, cwd=None):
    return subprocess.run([sys.executable, "-m", "autograder", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env={**os.environ})


def _run(status_by_id: dict[str, str], learner="ann") -> dict:
    points = {p.id: p.points for p in registry.PROBLEMS}
    return {"learner": learner, "problems": [
        {"id": pid, "status": st, "score": float(points[pid] if st == "correct" else 0), "max_score": float(points[pid])}
        for pid, st in status_by_id.items()]}


# --- progress ------------------------------------------------------------------------------------

def test_progress_keeps_best_score_attempts_and_time(home):
    progress.record_grading(_run({"1.1": "incorrect", "1.2": "not_attempted"}), "grade")
    progress.record_grading(_run({"1.1": "correct", "1.2": "error"}), "practice",
                            {"1.1": {"seconds_spent": 125.0, "hints": 2}})
    progress.record_grading(_run({"1.1": "incorrect"}), "grade")  # a later regression keeps the best
    progress.record_grading(_run({"1.3": "correct"}, learner="someone-else"), "grade")
    with open(progress.store(), "a") as f:
        f.write("{not json\n")  # a damaged line is skipped, never fatal
    rows = {r.problem.id: r for r in progress.summarize(progress.load("ann"))}
    assert (rows["1.1"].status, rows["1.1"].best, rows["1.1"].attempts) == ("mastered", 10.0, 3)
    assert (rows["1.1"].seconds, rows["1.1"].hints) == (125.0, 2)
    assert (rows["1.2"].status, rows["1.2"].attempts) == ("attempted", 1)  # not_attempted is no attempt
    assert rows["1.3"].status == "not started"  # another learner's run
    assert progress.mastered(progress.load("ann")) == {"1.1"}
    text = progress.table("ann", progress.load("ann"))
    assert "Unit 1: Parameter accounting" in text and "1/4 mastered" in text
    assert "1.1   dense_checkpoint_accounting  easy   accounting      mastered" in text and "attempts 3" in text \
        and "time 2 min" in text
    assert "Next: 1.2 orbax_save_count" in text


def test_progress_store_is_outside_the_repository_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("CKPT_COURSE_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert progress.store() == tmp_path / "ckpt-course" / "progress.jsonl"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert progress.store() == Path.home() / ".local" / "share" / "ckpt-course" / "progress.jsonl"
    assert ROOT not in progress.store().parents


def test_an_unwritable_store_costs_a_warning_not_the_run(monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CKPT_COURSE_HOME", str(blocker / "sub"))
    assert progress.record_grading(_run({"1.1": "correct"}), "grade") is None
    assert "progress not recorded" in capsys.readouterr().err


@pytest.mark.slow
def test_grading_runs_are_recorded_and_shown(home, tmp_path):
    src = tmp_path / "work.py"
    src.write_text("import jax\nimport jax.numpy as jnp\nimport numpy as np\n\n" + inspect.getsource(unit1.param_bytes))
    out = _cli("grade", str(src), "--only", "1.3", "--learner", "ann")
    assert out.returncode == 0, out.stderr
    out = _cli("grade", str(src), "--only", "1.3", "--learner", "ann", "--no-record")
    assert out.returncode == 0, out.stderr
    out = _cli("progress", "--learner", "ann", "--json", str(tmp_path / "p.json"))
    assert "1.3   param_bytes                  easy   accounting      mastered      10/10   attempts 1" in out.stdout, \
        out.stdout
    data = json.loads((tmp_path / "p.json").read_text())
    assert next(p for p in data["problems"] if p["id"] == "1.3")["attempts"] == 1
    assert "No progress recorded yet" in _cli("progress", "--learner", "nobody").stdout


# --- choosing a practice set -------------------------------------------------------------------------

def test_practice_draws_unmastered_problems_that_fit_the_time(home):
    progress.record_grading(_run({"2.1": "correct", "2.2": "correct"}), "grade")
    records = progress.load("ann")
    for seed in range(20):
        chosen, review = practice.choose(records, 30, unit=2, rng=np.random.default_rng(seed))
        ids = [p.id for p in chosen]
        assert not review and ids and len(set(ids)) == len(ids)
        assert all(p.unit == 2 and p.id not in ("2.1", "2.2") for p in chosen)
        assert sum(p.points for p in chosen) <= 30
    sets = {tuple(p.id for p in practice.choose(records, 30, unit=2, rng=np.random.default_rng(s))[0]) for s in range(20)}
    assert len(sets) > 3  # drawn at random
    assert len(practice.choose(records, 5, rng=np.random.default_rng(0))[0]) == 1  # at least one problem
    assert len(practice.choose(records, 30, count=5, rng=np.random.default_rng(0))[0]) == 5
    progress.record_grading(_run({p.id: "correct" for p in registry.PROBLEMS if p.unit == 1}), "grade")
    chosen, review = practice.choose(progress.load("ann"), 30, unit=1)
    assert review and all(p.unit == 1 for p in chosen)
    with pytest.raises(ValueError, match="no unit 99"):
        practice.choose(records, 30, unit=99)


def test_practice_file_is_valid_python_with_every_stub():
    chosen = [registry.get("1.3"), registry.get("2.1"), registry.get("4.2")]
    src = practice.workspace_source(chosen, 30)
    compile(src, "practice.py", "exec")
    assert all(f"def {p.call}:" in src for p in chosen) and "autograder.learner.notebook" not in src


# --- examples in the learner's terms ------------------------------------------------------------------

GRADER_NAMES = re.compile(r"\b\w*Arg\(|RunFolder\(|OutputFolder\(|array\(\[")


def _kinds_in(value):
    from autograder.wall import kinds

    if isinstance(value, (kinds.MeshArg, kinds.SpecArg, kinds.AbstractArg, *kinds.FILE_KINDS)):
        yield type(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _kinds_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _kinds_in(v)


def test_every_public_example_shows_its_arguments_in_the_learners_terms():
    """What practice prints (and a check shows) for every problem's examples: no grader object's repr."""
    from autograder.learner.notebook import describe_args
    from autograder.wall import kinds

    seen = set()
    for p in registry.PROBLEMS:
        prompt = practice.Session([p], 30, "ann", Path("x.py")).prompt(600)
        assert not GRADER_NAMES.search(prompt), (p.id, prompt)
        for ex in p.examples:
            shown = describe_args(ex.args)
            assert not GRADER_NAMES.search(shown), (p.id, shown)
            seen.update(_kinds_in(ex.args))
    # every kind a public example holds (each a kind of kinds.py: a new one needs its own words)
    assert seen == {kinds.MeshArg, kinds.SpecArg, kinds.AbstractArg, kinds.CheckpointArg, kinds.TrainingCheckpointArg,
                    kinds.TreeCheckpointArg, kinds.SafetensorsArg, kinds.PreemptedRootArg, kinds.TieredRootArg,
                    kinds.RunFolder, kinds.OutputFolder, kinds.LlamaCheckpointArg, kinds.HFFolderArg}, seen


def test_examples_of_4_1_and_5_2_read_as_words():
    p41, p52 = registry.get("4.1"), registry.get("5.2")
    prompt = practice.Session([p41], 30, "ann", Path("x.py")).prompt(600)
    assert ("parse_safetensors_header(<a safetensors file (2 tensors: embed (8, 4) float32, norm.scale (4,) float16; "
            "__metadata__ {'format': 'np'})>)") in prompt, prompt
    assert "norm.scale (4,) float16) cut short inside its header>) -> raises ValueError" in prompt, prompt
    prompt = practice.Session([p52], 30, "ann", Path("x.py")).prompt(600)
    assert ("latest_restorable_step(<a CheckpointManager root: steps 1, 2, 3, ... saved (the newest 3 kept), each "
            "holding 'state' and 'data', with the POSIX protocol: each step written to <step>.orbax-checkpoint-tmp, "
            "then renamed; the saver was killed with SIGKILL during a save, while that step was in its temporary "
            "folder, after 3 steps had committed>) -> 3") in prompt, prompt


def test_every_variant_of_every_kind_has_words():
    """Each damage, kill point, edit and preemption in words (the hidden cases draw them all), every
    kind kinds.py declares with words, and the dataclasses' repr unchanged (a cache key)."""
    from autograder.wall import kinds, words as words_module
    from autograder.wall.words import DAMAGE, in_words
    from ckptlab.preempt import KILLS

    tensors = (("embed", (8, 4), "float32"), ("step", (), "int64"))
    for damage in kinds.TRUNCATED + kinds.CORRUPT:
        words = in_words(kinds.SafetensorsArg(tensors, 0, (), damage))
        assert words.startswith("<a safetensors file (2 tensors: embed (8, 4) float32, step scalar int64)")
        assert words.endswith(DAMAGE[damage] + ">")
    for kill in KILLS:
        for commit_file in (False, True):
            spec = tuple(sorted({"kill": kill, "commit_file": commit_file, "min_committed": 2, "save_every": 2}.items()))
            words = in_words(kinds.PreemptedRootArg(spec, (("state_removed", 1), ("state_unreadable", 2),
                                                           ("data_removed", 0))))
            assert "steps 2, 4, 6, ... saved" in words and ("object-store" in words) == commit_file, words
            assert "the newest committed step" in words and "every committed step" in words, words
    harms = (("lost", 1), ("cut", 2), ("hole", 1, 0), ("hole", 2, 2), ("persistent_cut",), ("persistent_hole", 0))
    spec = (("slices", 3), ("per_slice", 1), ("steps", 9))
    tiers = in_words(kinds.TieredRootArg(spec, harms))
    assert tiers.startswith("<a folder Orbax's emergency CheckpointManager wrote for a job of 3 processes in 3 replica "
                            "slices of 1 process, over 9 steps"), tiers
    for said in ("process 1's local tier emptied", "process 2's newest local save cut short", "process 1's newest local "
                 "step gone", "process 2's 2 before the newest local step gone", "the newest persistent save cut short",
                 "a persistent step gone"):
        assert said in tiers, (said, tiers)
    pairs = in_words(kinds.TieredRootArg((("slices", 2), ("per_slice", 2))))
    assert "4 processes in 2 replica slices of 2 processes" in pairs, pairs
    edits = (("drop", "a"), ("add", "b", (2,), "int32"), ("cast", "c", "bfloat16"), ("reshape", "c", (4,)),
             ("scale", "a", 2.0), ("set", "a", 0, 1.0))
    tree = kinds.TreeCheckpointArg((("a", (4, 2), "float32", ("x",)), ("c", (), "int32", ())), (("x", 2),), 0, edits)
    assert in_words(tree) == (
        "<a checkpoint folder of nested dicts (Orbax StandardCheckpointer) saved on 2 devices, mesh {'x': 2}: "
        "a (4, 2) float32 as P('x'), c scalar int32 replicated, except that a is left out, b (2,) int32 is added, "
        "c is cast to bfloat16, c is reshaped to (4,) (new values), a's values are scaled by 2.0, one element of a "
        "is changed>")
    term = in_words(kinds.RunFolder(kills=(("term_eval", 2),), plant=7, grace=1.5))
    assert "SIGTERM during the evaluation after a save of a step at least 2" in term and "SIGKILL 1.5 s later" in term
    folder = kinds.RunFolder(kills=(("commit", 2), ("mid_save", 3)), plant=7)
    assert "7" not in in_words(folder) and "SIGKILL" in in_words(folder)
    left = in_words(kinds.RunFolder(left_at=2))  # a run stopped after step 2, started again (5.3's example 2)
    assert "already run once, with total_steps 2" in left and "started again" in left and "fresh" not in left, left
    # (the hidden cases' folders, left_at 0, keep the repr they had)
    assert repr(folder) == "RunFolder(kills=(('commit', 2), ('mid_save', 3)), plant=7)"
    assert repr(kinds.RunFolder(left_at=2)) == "RunFolder(kills=(), plant=0, left_at=2)"
    assert repr(kinds.MeshArg((("x", 2),))) == "MeshArg(axes=(('x', 2),))"
    assert in_words((kinds.MeshArg((("x", 2),)),)) == "(Mesh {'x': 2},)"
    assert in_words({"w": kinds.SpecArg((None, ("x", "y")))}) == "{'w': PartitionSpec(None, ('x', 'y'))}"
    # every kind kinds.py declares has words (a new one fails here until words.py says what it is)
    declared = [c for c in vars(kinds).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
                and c.__module__ == kinds.__name__]
    assert len(declared) == 13 and all(c in words_module._WORDS for c in declared), declared


def test_every_hidden_case_has_words():
    """The words hold for every argument the grader draws, not only the public ones."""
    from autograder.engine.cases import hidden_cases
    from autograder.wall.words import in_words

    for p in registry.PROBLEMS:
        _, cases = hidden_cases(p, "ann")
        for case in cases:
            assert not GRADER_NAMES.search(in_words(case.args)), (p.id, case.category)


# --- a session, scripted ----------------------------------------------------------------------------

class Script:
    """Commands typed at given times (a fake clock): each entry (seconds after start, command)."""

    def __init__(self, steps):
        self.steps, self.now = list(steps), 0.0

    def clock(self):
        return self.now

    def read(self, prompt, timeout):
        if not self.steps:
            self.now += timeout
            return None  # nobody types: time runs out
        at, cmd = self.steps.pop(0)
        if at - self.now > timeout:
            self.now += timeout
            return None
        self.now = at
        return cmd


@pytest.mark.slow
def test_a_session_notes_hints_and_time_grades_and_reviews(home, tmp_path):
    chosen = [registry.get("1.3"), registry.get("2.1")]
    path = practice.new_workspace(chosen, 10, tmp_path)
    # 1.3 solved with the reference, 2.1 a wrong answer.
    src = path.read_text().replace(stub_source(chosen[0]), inspect.getsource(unit1.param_bytes))
    path.write_text(src.replace(stub_source(chosen[1]), "def shard_shape(global_shape, mesh_shape, spec):\n"
                                                      "    return tuple(global_shape)\n"))
    said = []
    script = Script([(60, "h"), (90, "h"), (120, "n"), (150, "x"), (200, "h"), (300, "g")])
    report = practice.Session(chosen, 10, "ann", path, read=script.read, say=said.append, clock=script.clock).run()
    text = "\n".join(said)
    assert "Hint 1/" in text and "Hint 2/" in text and "Unknown command 'x'" in text
    assert [p["status"] for p in report["problems"]] == ["correct", "incorrect"]
    assert "Review: 10/20 points, graded with hidden tests; 5:00 of 10:00 used." in text
    assert re.search(r"1\.3 param_bytes +correct 10/10 +2:00 +2/3", text), text
    assert re.search(r"2\.1 shard_shape +incorrect 0/10 +3:00 +1/3", text), text
    assert "Revisit course/02_sharded_save_layouts.ipynb" in text and "1.3 solved with 2 hint(s)" in text
    rows = {r.problem.id: r for r in progress.summarize(progress.load("ann"))}
    assert (rows["1.3"].status, rows["1.3"].seconds, rows["1.3"].hints) == ("mastered", 120.0, 2)
    assert (rows["2.1"].status, rows["2.1"].seconds, rows["2.1"].hints) == ("attempted", 180.0, 1)


def test_time_up_grades_and_quitting_records_nothing(home, tmp_path):
    chosen = [registry.get("1.3")]
    path = practice.new_workspace(chosen, 1, tmp_path)
    graded = []

    def fake_grade(p, learner, ids):  # the grading itself is tested above
        graded.append(ids)
        return _run({"1.3": "not_attempted"}, learner) | {"score": 0.0, "max_score": 10.0, "graded_by": "hidden"}

    said = []
    script = Script([(30, "h")])
    practice.Session(chosen, 1, "ann", path, read=script.read, say=said.append, clock=script.clock,
                     grade_fn=fake_grade).run()
    assert graded == [["1.3"]] and "Time is up" in "\n".join(said) and script.now == 60
    said.clear()
    script = Script([(10, "q")])
    assert practice.Session(chosen, 1, "ann", path, read=script.read, say=said.append, clock=script.clock,
                            grade_fn=fake_grade).run() is None
    assert graded == [["1.3"]] and "Stopped without grading" in said[-1]
    assert len(progress.load("ann")) == 1


@pytest.mark.slow
def _at(day: float, run: dict) -> dict:
    """A progress record of ``run`` made ``day`` days after 1 January 2026."""
    import datetime as dt

    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=day)
    return {"kind": "grading", "time": when.isoformat(timespec="seconds"), "learner": "ann", **run}


def test_a_mastered_problem_comes_back_after_a_growing_interval():
    """Mastered on day 0: back on day 2. Solved again on day 1 (too soon: nothing changes), then on
    day 3 (due): back 4 days later, on day 7. Failed on day 8 (due): back at once, the interval
    starting over: solved on day 9, back on day 11. Practice draws a due problem first, and a
    mastered one not due never."""
    import datetime as dt

    day = lambda d: dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=d)  # noqa: E731
    records = [_at(0, _run({"2.1": "correct"})), _at(1, _run({"2.1": "correct"}))]
    assert progress.reviews(records)["2.1"] == progress.Review(day(2), 2.0, 1)
    assert progress.due(records, day(1.9)) == set() and progress.due(records, day(2)) == {"2.1"}
    unmastered_unit2 = {p.id for p in registry.PROBLEMS if p.unit == 2} - {"2.1"}
    for seed in range(5):
        early = practice.choose(records, 60, unit=2, rng=np.random.default_rng(seed), now=day(1.5))[0]
        late = practice.choose(records, 60, unit=2, rng=np.random.default_rng(seed), now=day(2.5))[0]
        assert "2.1" not in {p.id for p in early} and {p.id for p in early} <= unmastered_unit2
        assert late[0].id == "2.1"  # the review first
    records.append(_at(3, _run({"2.1": "correct"})))
    assert progress.reviews(records)["2.1"] == progress.Review(day(7), 4.0, 2)
    records.append(_at(8, _run({"2.1": "incorrect"})))
    assert progress.reviews(records)["2.1"] == progress.Review(day(8), 1.0, 2) and progress.due(records, day(8)) == {"2.1"}
    records.append(_at(9, _run({"2.1": "correct"})))
    assert progress.reviews(records)["2.1"] == progress.Review(day(11), 2.0, 3)
    assert "review 2026-01-12" in progress.table("ann", records, now=day(10))
    assert "Due for review" in progress.table("ann", records, now=day(12)) and "review due now" in \
        progress.table("ann", records, now=day(12))


def test_practice_filters_by_difficulty_and_category(home):
    for seed in range(10):
        chosen, _ = practice.choose([], 600, rng=np.random.default_rng(seed), difficulty=("easy",))
        assert chosen and {p.difficulty for p in chosen} == {"easy"}
        chosen, _ = practice.choose([], 600, rng=np.random.default_rng(seed), category=("orbax", "formats"))
        assert chosen and {p.category for p in chosen} <= {"orbax", "formats"}
    assert {p.id for p in practice.choose([], 600, unit=7, difficulty=("medium",))[0]} == \
        {p.id for p in registry.PROBLEMS if p.unit == 7 and p.difficulty == "medium"}
    with pytest.raises(ValueError, match="no difficulty 'tricky'"):
        practice.choose([], 30, difficulty=("tricky",))
    with pytest.raises(ValueError, match="no problem matches"):
        practice.choose([], 30, unit=1, category=("fault-tolerance",))


def test_make_practice_with_a_filter_brings_back_a_problem_due_for_review(home, tmp_path):
    """`make practice DIFFICULTY=easy UNIT=2` with a progress file where 2.1 (easy) was mastered
    three days ago and every other easy problem of the unit too: the set is 2.1, back for review,
    shown with its difficulty and category; make progress says it is due."""
    import datetime as dt

    three_days_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    easy = [p.id for p in registry.PROBLEMS if p.unit == 2 and p.difficulty == "easy"]
    assert "2.1" in easy
    home.mkdir(parents=True, exist_ok=True)
    record = {"v": 1, "kind": "grading", "time": three_days_ago.isoformat(timespec="seconds"), "learner": "ann",
              "source": "grade", **_run({pid: "correct" for pid in easy})}
    (home / "progress.jsonl").write_text(json.dumps(record) + "\n")
    env = {**os.environ, "CKPT_COURSE_HOME": str(home)}
    make = ["make", "-s", "-C", str(ROOT)]
    out = subprocess.run([*make, "practice", "DIFFICULTY=easy", "UNIT=2", "MINUTES=30"], input="q\n",
                         capture_output=True, text=True, timeout=300, env={**env, "USER": "ann", "LOGNAME": "ann"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Back for a spaced review (mastered a while ago): " in out.stdout and "2.1" in out.stdout, out.stdout
    assert "(10 points, easy, layout" in out.stdout and "Stopped without grading" in out.stdout
    shown = subprocess.run([*make, "progress"], capture_output=True, text=True, timeout=300,
                           env={**env, "USER": "ann", "LOGNAME": "ann"})
    assert "review due now" in shown.stdout and "Due for review" in shown.stdout, shown.stdout


def test_practice_in_a_terminal(home, tmp_path):
    out = _cli("practice", "--unit", "1", "--count", "1", "--seed", "4", "--learner", "ann",
               "--workspace", str(tmp_path), stdin="h\nc\n\ng\n")
    assert out.returncode == 0, out.stderr
    assert "Practice: 1 problem(s)" in out.stdout and "left" in out.stdout and "Hint 1/" in out.stdout
    assert "Public examples: not attempted" in out.stdout and re.search(r"Review: 0/(10|15) points, graded with hidden tests", out.stdout)
    assert len(list(tmp_path.glob("session-*.py"))) == 1
    out = _cli("practice", "--minutes", "0", "--learner", "ann")
    assert out.returncode == 2 and "--minutes and --count must be positive" in out.stderr
    # Nobody types and the input stays open: the countdown runs out and the set is graded.
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "practice", "--minutes", "0.05", "--count", "1",
                             "--unit", "1", "--learner", "ann", "--workspace", str(tmp_path)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)  # stdin stays open all along
        stdout = proc.stdout.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert "Time is up: grading your file." in stdout and re.search(r"Review: 0/(10|15) points", stdout), stdout


# --- drills --------------------------------------------------------------------------------------

def test_answers_are_parsed_with_units():
    q = drills.drill("shard_bytes", seed=0)
    assert drills.parse_answer("12,288", "bytes") == 12288
    assert drills.parse_answer("1.5 KiB", "bytes") == 1536
    assert drills.parse_answer("140 GB", "GB") == 140
    assert drills.parse_answer("0.14 TB", "GB") == pytest.approx(140)
    assert drills.parse_answer("4x", "x") == 4 and drills.parse_answer(7, "chunks") == 7
    for bad in ("lots", "3 apples", ""):
        right, feedback = q.grade(bad)
        assert right is None and "Answer with a number" in feedback


def _wrong(q: drills.Question) -> list[float]:
    """Curated wrong answers: each drill's classic mistakes."""
    f = q.facts
    size = drills.DTYPES.get(f.get("dtype", ""), 1)
    return {
        "shard_bytes": lambda: [q.solution / size, q.solution * f["mesh"]["data"], np.prod(f["shape"]) * size],
        "model_bytes": lambda: [f["layers"] * (f["width"] ** 2 + f["width"]) * size / f["devices"], q.solution / size],
        "dense_params": lambda: [f["n"] * f["features"] / f["shards"], (f["n"] + 1) * f["features"] * 32 / f["shards"]],
        "reshard_ram": lambda: [f["billions"] * size * 1e9 / 2**30, f["billions"], f["billions"] * size * 2],
        # (the floor: every device alone, the ceiling, is the classic mistake)
        "ep_chunks": lambda: [1, f["fsdp"] // f["ep"] or 2] if q.unit == "chunks" else [1, f["ep"], f["fsdp"]],
        "row_restore": lambda: [f["saved"] / f["restored"] * 2, f["restored"], max(f["restored"] // f["saved"], 1)],
        "column_runs": lambda: [1, f["devices"]],
        "safetensors_offset": lambda: [f["header"] + f["begin"], 8 + f["begin"]],
        # only the parameters; float32 moments beside bfloat16 weights
        "adam_checkpoint": lambda: [f["billions"] * size, f["billions"] * (size + 8)],
        # every host writing it all; the devices, not the hosts, dividing the bytes
        "save_time": lambda: [f["gb"] / f["bandwidth"], f["gb"] / (f["hosts"] * 8) / f["bandwidth"]],
        # the newest step; one interval too far back; counted from 1, not 0
        "steps_kept": lambda: [f["last"] // f["every"] * f["every"], q.solution - f["every"],
                               q.solution + f["every"]],
        # float32 kept; the whole checkpoint; the replicas forgotten
        "serving_bytes": lambda: [f["billions"] * 4 * f["data"], f["billions"] * 12, f["billions"] * 2],
        # half of it (bytes per parameter against 4, not 2); the moments forgotten
        "state_to_serving": lambda: [q.solution / 2, (4 if f["param_dtype"] == "float32" else 2) / 2],
        # one copy; float32 copies
        "replicated_copies": lambda: [f["rows"] * f["cols"] * 2, f["rows"] * f["cols"] * 4 * f["devices"]],
        # one copy; the saved mesh's copies; every device a whole copy
        "moved_restore_bytes": lambda: [f["rows"] * f["cols"] * size,
                                        f["rows"] * f["cols"] * size * (f["saved"]["data"] * f["saved"]["model"] // f["saved"][f["spec"]]),
                                        f["rows"] * f["cols"] * size * 16],
        # the counter unchanged; truncated rather than rounded
        "silent_cast": lambda: [f["step"], f["step"] - 1],
        # the stack alone (the slices forgotten); the replicas forgotten; the stack on every device
        "unstack_peak": lambda: [q.solution / 2, q.solution / f["data"],
                                 f["layers"] * f["width"] ** 2 * size * 16],
        # the whole interval; the step under way counted
        "steps_lost": lambda: [f["every"], q.solution + 1],
        # the wait for the next check forgotten; one host writing it all
        "save_in_grace": lambda: [30 - f["gb"] / f["hosts"] / f["bandwidth"], 30 - f["gb"] / f["bandwidth"] - f["check"]],
        # the saved job's hosts; a per-host count
        "restart_position": lambda: [f["step"] * f["batch"] + f["host"] * (f["batch"] // f["old"]),
                                     f["step"] * f["batch"] // f["new"] + f["host"]],
        # the fused qkv counted as one tensor; the head counted the other way round
        "hf_tensor_count": lambda: [2 + 7 * f["layers"] + (0 if f["tied"] else 1), 2 + 9 * f["layers"] + f["tied"]],
        # the keys given the queries' heads; where the keys start
        "v_columns_start": lambda: [2 * f["heads"] * f["head_dim"], f["heads"] * f["head_dim"]],
        # the total over the limit, rounded up (the tensors reordered)
        "shard_files": lambda: [-(-sum(f["sizes"]) // f["limit"])],
        # the whole training state; the bfloat16 weights alone
        "restart_checkpoint": lambda: [f["billions"] * 16, f["billions"] * 2],
        # one GPU's MTBF; divided by the hosts, not the GPUs
        "job_mtbf": lambda: [f["years"] * 8766, f["years"] * 8766 / (f["gpus"] // 8)],
        # the asynchronous write counted as blocking; the MTBF left in hours
        "young_minutes": lambda: [(2 * (f["blocking"] + f["write"]) * f["mtbf_hours"] * 3600) ** 0.5 / 60,
                                  (2 * f["blocking"] * f["mtbf_hours"]) ** 0.5 / 60],
    }[q.kind]()


@pytest.mark.parametrize("kind", list(drills.KINDS))
def test_every_drill_rejects_its_classic_mistakes(kind):
    for seed in range(30):
        q = drills.drill(kind, seed=seed)
        assert q.grade(q.solution)[0] is True and "Worked answer: " in q.grade(q.solution)[1]
        for wrong in _wrong(q):
            if not np.isclose(wrong, q.solution, rtol=max(q.rel_tol, 1e-9)):
                assert q.grade(wrong)[0] is False, (kind, seed, wrong)
        assert q.grade(q.solution * 1.5)[0] is False


@pytest.mark.parametrize("seed", range(6))
def test_unit7_drills_equal_what_jax_places_and_orbax_restores(seed, tmp_path):
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    q = drills.drill("moved_restore_bytes", seed=seed)
    f = q.facts
    # The same layout on a small array (the bytes the devices hold scale with its size).
    x = jax.device_put(jnp.zeros((16, 8), f["dtype"]), NamedSharding(course_mesh(f["new"]), P(f["spec"])))
    held = sum(s.data.nbytes for s in x.addressable_shards)
    assert held * f["rows"] * f["cols"] // (16 * 8) == q.solution
    q = drills.drill("silent_cast", seed=seed)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "c", {"step": np.int32(q.facts["step"])})
    checkpointer.wait_until_finished()
    restored = checkpointer.restore(tmp_path / "c", {"step": jax.ShapeDtypeStruct((), jnp.float32)})["step"]
    assert restored.dtype == jnp.float32 and float(restored) == q.solution != q.facts["step"]
    q = drills.drill("unstack_peak", seed=seed)
    f = q.facts
    # The same layout on a small stack, sliced as the question says: what every live array's shards hold,
    # counted by JAX (the stack, the slices, and nothing else of this size alive).
    small = (f["layers"], 32, 32)
    stack = jax.device_put(jnp.ones(small, f["dtype"]), NamedSharding(course_mesh({"data": f["data"], "model": f["model"]}),
                                                                      P(None, "model")))
    slices = [stack[i] for i in range(f["layers"])]
    held = sum(s.data.nbytes for x in [stack, *slices] for s in x.addressable_shards)
    assert all(not x.is_deleted() for x in [stack, *slices]) and len(slices[0].sharding.device_set) == 16
    assert held * f["width"] ** 2 // (32 * 32) == q.solution


def test_drills_draw_fresh_numbers():
    texts = {drills.drill("shard_bytes").text for _ in range(20)}
    assert len(texts) > 5


@pytest.mark.parametrize("seed", range(12))
def test_shard_bytes_and_model_bytes_equal_what_jax_places(seed):
    q = drills.drill("shard_bytes", seed=seed)
    f = q.facts
    mesh = course_mesh(f["mesh"])
    x = jax.device_put(np.zeros(f["shape"], f["dtype"]) if f["dtype"] != "bfloat16"
                       else jax.numpy.zeros(f["shape"], jax.numpy.bfloat16), NamedSharding(mesh, P(*f["spec"])))
    assert x.addressable_shards[0].data.nbytes == q.solution
    q = drills.drill("model_bytes", seed=seed)
    f = q.facts
    import flax.linen as nn

    mesh = course_mesh({"model": f["devices"]})
    params = nn.Dense(f["width"], param_dtype=f["dtype"]).init(jax.random.PRNGKey(0), np.zeros((1, f["width"]), f["dtype"]))
    kernel = jax.device_put(params["params"]["kernel"], NamedSharding(mesh, P(None, "model")))
    bias = jax.device_put(params["params"]["bias"], NamedSharding(mesh, P()))
    on_device0 = kernel.addressable_shards[0].data.nbytes + bias.addressable_shards[0].data.nbytes
    assert f["layers"] * on_device0 == q.solution


@pytest.mark.parametrize("seed", range(12))
def test_dense_params_equal_flax(seed):
    import flax.linen as nn

    q = drills.drill("dense_params", seed=seed)
    f = q.facts
    params = nn.Dense(f["features"]).init(jax.random.PRNGKey(0), np.zeros((32, f["n"]), np.float32))
    assert sum(x.size for x in jax.tree.leaves(params)) / f["shards"] == q.solution


def _chunk_grid(domain, chunk):
    import itertools

    return set(itertools.product(*(range(start // c, -(-stop // c)) for (start, stop), c in zip(domain, chunk))))


def _chunks_overlapped(domain, chunk):
    return int(np.prod([-(-stop // c) - start // c for (start, stop), c in zip(domain, chunk)]))


@pytest.mark.parametrize("seed", range(12))
def test_row_restore_equals_the_chunks_orbax_writes(seed, tmp_path):
    import orbax.checkpoint as ocp

    q = drills.drill("row_restore", seed=seed)
    f = q.facts
    x = jax.device_put(np.zeros(f["shape"], np.float32), NamedSharding(course_mesh({"x": f["saved"]}), P("x")))
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=False)) as ckpt:
        ckpt.save(tmp_path / "ckpt", args=ocp.args.PyTreeSave({"w": x}))
    chunk = json.loads((tmp_path / "ckpt" / "w" / ".zarray").read_text())["chunks"]
    reads = restore_reads(f["shape"], chunk, {"x": f["restored"]}, ("x",), devices_per_host=f.get("per_host", 1))
    # the ceiling (a device alone), or the floor (one read per chunk per host), as the question asks
    assert (reads["read_amplification"] if "per_host" in f else reads["no_sharing_amplification"]) == q.solution


@pytest.mark.parametrize("seed", range(12))
def test_ep_chunks_equal_chunk_overlaps_of_jax_domains(seed):
    q = drills.drill("ep_chunks", seed=seed)
    f = q.facts
    experts, layers, emb, mlp = f["shape"]
    chunk = (experts // f["ep"], layers, emb, mlp)
    # Device 0 of the FSDP job holds rows [0, emb / fsdp) of dimension 2. JAX's own domain for it, on
    # the course's 16 devices: dimension 2 cut to emb / fsdp * 16 rows gives device 0 the same rows.
    domain = real_index_domains((experts, layers, emb // f["fsdp"] * 16, mlp), {"x": 16}, (None, None, "x"))[0]
    assert domain[2] == (0, emb // f["fsdp"])
    n = _chunks_overlapped(domain, chunk)
    need = int(np.prod([b - a for a, b in domain]))
    expected = n if q.unit == "chunks" else n * int(np.prod(chunk)) / need
    if "per_host" in f:  # the host's devices 0..per_host-1: the chunks they overlap together, read once
        domains = real_index_domains((experts, layers, emb // f["fsdp"] * 16, mlp), {"x": 16}, (None, None, "x"))
        mine = [domains[d] for d in range(f["per_host"])]
        together = len({c for dom in mine for c in _chunk_grid(dom, chunk)})
        expected = together * int(np.prod(chunk)) / (need * f["per_host"])
    assert expected == q.solution


@pytest.mark.parametrize("seed", range(12))
def test_column_runs_and_offsets_equal_orbax_and_safetensors(seed, tmp_path):
    from safetensors.numpy import save_file

    from ckptlab.adapters.orbax_internals import index_domain_to_byte_runs

    q = drills.drill("column_runs", seed=seed)
    f = q.facts
    rows, cols = f["shape"]
    domain = real_index_domains(f["shape"], {"x": f["devices"]}, (None, "x"))[0]
    assert len(index_domain_to_byte_runs(domain, f["shape"], drills.DTYPES[f["dtype"]], 0)) == q.solution

    q = drills.drill("safetensors_offset", seed=seed)
    arrays = {"a": np.arange(10, dtype=np.float32), "b": np.arange(6, dtype=np.int16).reshape(2, 3)}
    save_file(arrays, str(tmp_path / "t.safetensors"))
    data = (tmp_path / "t.safetensors").read_bytes()
    header = int.from_bytes(data[:8], "little")
    begin, end = json.loads(data[8:8 + header])["b"]["data_offsets"]
    # The drill's rule, on a real file: the tensor's bytes start at 8 + header + begin.
    probe = drills.Question("safetensors_offset", "", 8 + header + begin, "byte offset", "", facts={"header": header, "begin": begin})
    assert np.array_equal(np.frombuffer(data[int(probe.solution):int(probe.solution) + end - begin], np.int16).reshape(2, 3), arrays["b"])
    assert q.solution == 8 + q.facts["header"] + q.facts["begin"]


def test_reshard_ram_is_the_weights_bytes():
    for seed in range(12):
        q = drills.drill("reshard_ram", seed=seed)
        f = q.facts
        assert q.solution * 1e9 == f["billions"] * 1e9 * np.dtype(jax.numpy.dtype(f["dtype"])).itemsize


def test_drill_in_a_terminal_and_in_a_notebook(home, capsys):
    out = _cli("drill", "--count", "2", "--seed", "5", "--learner", "ann", stdin="1\n?\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Worked answer: ") == 2 and "Done: 0/2 right." in out.stdout
    assert _cli("drill", "--kind", "nope").returncode == 2 and _cli("drill", "--count", "0").returncode == 2
    q = drills.drill("reshard_ram", seed=1)
    assert q.answer(f"{q.solution} GB", learner="ann") is True
    assert "Right." in capsys.readouterr().out
    stats = progress.drill_stats(progress.load("ann"))
    assert sum(a for a, _ in stats.values()) == 3 and sum(b for _, b in stats.values()) == 1
    assert "Drills: 1/3 right" in progress.table("ann", progress.load("ann"))
    # The review's study pointers name a drill for every unit.
    assert all(practice._drills_for(u) for u in registry.units())


def test_without_hidden_tests_a_set_is_checked_on_its_public_examples(monkeypatch, tmp_path):
    # The learner bundle: one checking process for the whole set, with the worker's limits.
    monkeypatch.setattr(registry, "hidden_tests_available", lambda: False)
    chosen = [registry.get("1.3"), registry.get("2.1")]
    path = practice.new_workspace(chosen, 20, tmp_path)
    path.write_text(path.read_text().replace(stub_source(chosen[0]), inspect.getsource(unit1.param_bytes)))
    report = practice._grade(path, "ann", ["1.3", "2.1"])
    assert report["graded_by"] == "public" and report["score"] == 10.0
    assert [p["status"] for p in report["problems"]] == ["correct", "not_attempted"]
    assert "public examples only" in practice.review([practice.Item(p) for p in chosen], report, 60, 20)


def test_public_checks_run_under_the_worker_memory_limit(tmp_path):
    path = tmp_path / "greedy.py"
    path.write_text("def param_bytes(params, dtype):\n    return len(bytearray(8 * 2**30))\n")
    status, message = practice.public_checks(path, [registry.get("1.3")])["1.3"]
    assert status == "error" and "MemoryError" in message


def test_a_drill_placeholder_is_no_answer_and_records_nothing(capsys):
    from autograder.learner import drills, progress

    q = drills.drill("reshard_ram", seed=3)
    before = len(progress.load())
    assert q.answer(...) is None and q.answer(None) is None
    assert "Replace ... with your answer" in capsys.readouterr().out
    assert len(progress.load()) == before
    assert q.answer(q.solution) is True and len(progress.load()) == before + 1
