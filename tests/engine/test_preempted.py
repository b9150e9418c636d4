"""Unit 5's preemptions, from the trusted side: the grader's kills are real and counted, the run
folder a killed worker leaves is the next worker's, and a learner gains nothing by faking what the
grader reads (a commit marker) or by trying to outlive a kill.

Each hostile test says what its attack did without the protection it checks."""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pytest

from autograder import registry, sandbox
from autograder.engine import preempted
from autograder.wall import files, kinds
from tests.conftest import best_isolation
from tests.hostile import CROWDS, FAKES_ITS_FOLDERS, LEAVES_A_MESS

pytestmark = pytest.mark.slow

_COMMITTED = """
import os
import time


def latest_restorable_step(ckpt_root):
    steps = sorted((int(n) for n in os.listdir(ckpt_root) if n.isdigit()), reverse=True)
    if not steps:
        return None
    newest = os.path.join(ckpt_root, str(steps[0]), "commit_success.txt")
    try:  # forge the marker on the newest step (uncommitted in most roots), then answer it
        with open(newest, "w") as f:
            f.write("Checkpoint commit was successful")
    except OSError:
        return None  # the forgery failed: a wrong answer
    return steps[0]
"""


def test_a_forged_commit_marker_gains_nothing(grade_code):
    """The root is read-only to the learner, and the expected step comes from the grader's own copy:
    at the basic level (no jail) the forgery succeeds on the learner's copy, and still earns nothing."""
    for level in {best_isolation(), "basic"}:
        report = grade_code(_COMMITTED, problems=["5.2"], learner="forger", isolation=level)
        (result,) = report.problems
        assert result.status == "incorrect", (level, result.message)


_SURVIVOR = """
import os
import time
import time


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    marker = os.path.join(ckpt_dir, "..", "survivor-" + str(seed))
    if os.listdir(ckpt_dir):  # the second run: did a child of the first outlive its kill?
        time.sleep(2.5)
        return {}, int(os.path.exists(marker))
    try:
        if os.fork() == 0:  # a grandchild that outlives the kill would write the marker
            os.setsid()  # out of the worker's process group
            if os.fork():
                os._exit(0)  # and no longer the worker's child
            time.sleep(1.5)
            open(marker, "w").write("alive")
            os._exit(0)
    except OSError:
        pass
    time.sleep(0.2)
    folder = os.path.join(ckpt_dir, "1")  # the commit the grader waits for, then its kill
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, "commit_success.txt"), "w").write("ok")
    time.sleep(10)
    return {}, -1
"""


@pytest.mark.skipif(bool(sandbox.strict_missing()), reason="this machine cannot give the strict level")
@pytest.mark.parametrize("level", ["strict", "basic"])
def test_a_run_cannot_outlive_its_kill(level):
    """A worker starts a grandchild, in a session of its own, to outlive the grader's kill. At the strict
    level (in the worker's pid namespace, killed with it; without namespaces, refused) the next
    worker never finds its marker. At the basic level, the contrast, it lives on."""
    workdir = sandbox.new_workdir()
    args = files.realize((kinds.RunFolder((("commit", 1),)), 3, 7), workdir)
    try:
        outcome, last, made = preempted.run_case(_SURVIVOR, "train_with_preemption", args, (("commit", 1),),
                                                 timeout=30, workdir=workdir, level=level)
        assert made == 1 and outcome is not None, (made, last)
        survived = os.path.exists(os.path.join(workdir, "scratch", "survivor-7"))
        assert outcome["value"] == ({}, int(survived)), outcome  # what the second run found
        assert survived == (level == "basic")
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


_ESCAPE = """
import os
import time


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    wrote = []
    for target in (os.path.join(ckpt_dir, "..", "..", "escaped"), "/tmp/ckpt-escaped-" + str(seed)):
        try:
            with open(target, "w") as f:
                f.write("out")
            wrote.append(target)
        except OSError:
            pass
    for step in range(1, total_steps + 1):
        folder = os.path.join(ckpt_dir, str(step))
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "commit_success.txt"), "w").write("ok")
    return {}, len(wrote)
"""


@pytest.mark.parametrize("level", ["strict", "basic"])
def test_a_kept_scratch_folder_is_still_the_only_place_a_run_writes(level):
    """Its scratch folder outlives a 5.3 worker, but the jail is the same: a write beside it (into
    the folder the grader keeps for the series) or into /tmp is refused at the strict level. At the
    basic level, the contrast, both land."""
    if level == "strict" and sandbox.strict_missing():
        pytest.skip("this machine cannot give the strict level")
    workdir = sandbox.new_workdir()
    seed = int(time.time() * 1000) % 100000
    args = files.realize((kinds.RunFolder(), 2, seed), workdir)
    outside_file = f"/tmp/ckpt-escaped-{seed}"
    try:
        outcome, last, made = preempted.run_case(_ESCAPE, "train_with_preemption", args, (), timeout=30,
                                                 workdir=workdir, level=level)
        landed = [os.path.exists(os.path.join(workdir, "escaped")), os.path.exists(outside_file)]
        assert outcome["value"][1] == sum(landed), (outcome, landed)
        assert landed == ([True, True] if level == "basic" else [False, False])
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        if os.path.exists(outside_file):
            os.unlink(outside_file)


def test_links_in_a_run_folder_are_never_followed(tmp_path):
    """The grader lists a learner's run folder to time its kills. Links there (the folder itself,
    a step folder, a commit file) pointing at folders elsewhere would make the moment of a kill say
    what those hold; none is followed. Before, a run folder linked to /proc read as a save of every
    running pid under way, and linked step folders as committed steps."""
    outside_dir = tmp_path / "elsewhere"
    (outside_dir / "42").mkdir(parents=True)
    (outside_dir / "42" / "commit_success.txt").write_text("ok")
    (outside_dir / "77").mkdir()
    run = tmp_path / "run-linked"
    run.symlink_to(outside_dir)
    assert preempted.committed_steps(str(run)) == [] and not preempted._saving(str(run), 0)
    assert not preempted._point_reached(("commit", 1), str(run), 0)
    proc = tmp_path / "run-proc"
    proc.symlink_to("/proc")
    assert not preempted._saving(str(proc), 0)
    real = tmp_path / "run-real"
    real.mkdir()
    (real / "5").symlink_to(outside_dir / "42")
    (real / "6").mkdir()
    (real / "6" / "commit_success.txt").symlink_to(outside_dir / "42" / "commit_success.txt")
    (real / "9").symlink_to(outside_dir / "77")
    assert preempted.committed_steps(str(real)) == []
    assert preempted._saving(str(real), 0)  # only 6, a real folder without a real commit file
    assert not preempted._saved_again(str(real), 10, 0.0)


def test_each_kill_is_real_and_the_next_worker_finds_the_run_folder():
    """Three planned kills make four workers, each started on the folder the last left; the kills
    are the grader's (SIGKILL), counted, and the last run's outcome carries where it resumed."""
    source = """
import os
import time
import time


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    done = sorted(int(n) for n in os.listdir(ckpt_dir)
                  if n.isdigit() and os.path.exists(os.path.join(ckpt_dir, n, "commit_success.txt")))
    first = done[-1] if done else 0
    for step in range(first + 1, total_steps + 1):
        folder = os.path.join(ckpt_dir, str(step))
        os.makedirs(folder, exist_ok=True)
        time.sleep(0.1)
        open(os.path.join(folder, "commit_success.txt"), "w").write("ok")
    return {}, first
"""
    workdir = sandbox.new_workdir()
    kills = (("commit", 1), ("mid_save", 1), ("commit", 2))
    args = files.realize((kinds.RunFolder(kills), 8, 0), workdir)
    try:
        outcome, last, made = preempted.run_case(source, "train_with_preemption", args, kills, timeout=30,
                                                 workdir=workdir, level=best_isolation())
        assert made == 3 and outcome["preempted"] == 3 and not outcome["restarted"], outcome
        first = outcome["value"][1]
        assert first == outcome["resumed_at"] and 3 <= first < 8, outcome
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


_STEPS = """
import os
import time


def train_with_preemption(ckpt_dir, total_steps, seed):
    os.makedirs(ckpt_dir, exist_ok=True)
    done = sorted(int(n) for n in os.listdir(ckpt_dir)
                  if n.isdigit() and os.path.exists(os.path.join(ckpt_dir, n, "commit_success.txt")))
    first = FIRST
    if total_steps < 0:
        raise ValueError("no such run")
    for step in range(first + 1, total_steps + 1):
        folder = os.path.join(ckpt_dir, str(step))
        os.makedirs(folder, exist_ok=True)
        time.sleep(0.05)
        open(os.path.join(folder, "commit_success.txt"), "w").write("ok")
    return {}, first
"""


@pytest.mark.parametrize(("first", "left_at", "restarted", "error"), [
    ("done[-1] if done else 0", 2, False, None),  # goes on from where the first run stopped
    ("0", 2, True, None),                          # starts over: it saves steps 1 and 2 again
    ("done[-1] if done else 0", -1, False, "ValueError"),  # the first run raises: its error is the case's
])
def test_a_run_left_at_a_step_runs_first_to_that_step_then_starts_again(first, left_at, restarted, error):
    """5.3's second public example in the grader, as the notebook's check runs it: a first worker,
    given total_steps=left_at, ends by itself (nothing killed); the case's run starts in the folder it
    left, and the outcome says where it should have resumed (the step that first run committed)."""
    workdir = sandbox.new_workdir()
    args = files.realize((kinds.RunFolder(left_at=left_at), 5, 0), workdir)
    try:
        outcome, last, made = preempted.run_case(_STEPS.replace("FIRST", first), "train_with_preemption", args, (),
                                                 timeout=30, workdir=workdir, level=best_isolation(), left_at=left_at)
        assert made == 0, outcome
        if error:
            assert outcome["error"]["type"] == error and "value" not in outcome, outcome
            return
        assert outcome["resumed_at"] == 2 and outcome["committed_after"] == 5, outcome
        assert outcome["restarted"] == restarted and outcome["value"][1] == (0 if restarted else 2), outcome
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_problem_5_3_is_graded_through_real_kills():
    p = registry.get("5.3")
    assert p.mode == "preempted" and p.returns.describe.startswith("a tuple (params, first_step)")


def test_step_folders_are_read_as_orbax_names_them(tmp_path):
    """A learner's manager may name its steps otherwise than by the number alone
    (``CheckpointManagerOptions(step_prefix=..., step_format_fixed_length=...)``); the grader reads
    them with Orbax's own parsing. Before, only digit-only names counted: a run saving ``step_1``,
    ``step_2``, ... read as a run that never saved (0/20, told to save after every step)."""
    import orbax.checkpoint as ocp

    from ckptlab.steps import step_of

    for prefix, length in ((None, None), ("step", None), (None, 8), ("ckpt", 3), ("my_run", 5)):
        fmt = ocp.step.standard_name_format(step_prefix=prefix, step_format_fixed_length=length)
        for step in (0, 7, 123):
            name = fmt.build_name(step)
            assert step_of(name) == step and step_of(name + ".orbax-checkpoint-tmp") == step, name
    assert [step_of(n) for n in ("state", "data", "step_", ".orbax-checkpoint-tmp", "notes.txt")] == [None] * 5
    # a long name the learner chose is not handed to Orbax's backtracking pattern every poll
    assert step_of("_" * 127 + "1" * 127 + ".orbax-checkpoint-tmp") is None
    run = tmp_path / "run-prefixed"
    for name, commit in (("step_3", True), ("step_4", True), ("step_5", False), ("step_6.orbax-checkpoint-tmp", False)):
        (run / name).mkdir(parents=True)
        if commit:
            (run / name / "commit_success.txt").write_text("ok")
    assert preempted.committed_steps(str(run)) == [3, 4]
    assert preempted._point_reached(("commit", 1), str(run), 3) and not preempted._point_reached(("commit", 2), str(run), 3)
    assert preempted._saving(str(run), 5) and preempted._saving(str(run), 6) and not preempted._saving(str(run), 7)
    assert preempted._saved_again(str(run), 4, 0.0) and not preempted._saved_again(str(run), 2, 0.0)


def _nested_and_locked(top: str) -> None:
    """What a hostile run leaves in its kept scratch folder: a chain of 1,500 nested folders (30
    chains of 50, joined by renames, so no watcher's look sees it grow) holding a file, a folder
    made with mode 0o300 (its owner may not list it) and one with 0o500 (nor remove from it)."""
    for c in range(30):
        os.makedirs(os.path.join(top, f"c{c}", *["d"] * 49))
    for c in range(28, -1, -1):
        os.rename(os.path.join(top, f"c{c + 1}"), os.path.join(top, f"c{c}", *["d"] * 49, "next"))
    with open(os.path.join(top, "c0", "d", "f"), "w") as f:
        f.write("x")
    os.mkdir(os.path.join(top, "locked"), 0o300)
    with open(os.path.join(top, "locked", "inside"), "w") as f:
        f.write("x")
    os.mkdir(os.path.join(top, "sealed"))
    with open(os.path.join(top, "sealed", "inside"), "w") as f:
        f.write("x")
    os.chmod(os.path.join(top, "sealed"), 0o500)
    os.symlink("/etc", os.path.join(top, "link"))


def test_a_scratch_folder_is_removed_whatever_its_worker_left_there(tmp_path):
    """The grader removes a kept scratch folder without recursion, without long paths and whatever
    its modes: nothing is left, and no link is followed. The control: a recursive removal (what
    shutil.rmtree, which the grader used before, was until Python 3.13) fails on the same tree
    (RecursionError, or the folder left behind)."""

    def recursive(path: str) -> None:
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                recursive(entry.path)
            else:
                os.unlink(entry.path)
        os.rmdir(path)

    control = tmp_path / "control"
    _nested_and_locked(str(control))
    try:
        if sys.version_info < (3, 13):
            shutil.rmtree(control, ignore_errors=True)
        else:
            recursive(str(control))
        left = control.exists()
    except (RecursionError, OSError):
        left = True
    assert left, "the control removed the tree: the test shows nothing"
    assert sandbox.remove_folder(str(control)) and not control.exists()
    top = tmp_path / "scratch"
    _nested_and_locked(str(top))
    assert sandbox.remove_folder(str(top)) and not top.exists()
    assert os.path.exists("/etc/passwd") and sandbox.remove_folder(str(top))  # (gone already: still True)


def test_a_run_that_leaves_a_mess_leaves_nothing_in_the_graders_temporary_folder(grade_code, tmp_path,
                                                                                 monkeypatch):
    """Graded for real (5.3, whose scratch folder is kept): a run leaving a 1,500-deep chain and an
    unlistable folder costs its own problem only; the grader's temporary folder is empty afterwards,
    and the problem is never reported as the grader's own failure. Before: RecursionError in the
    removal, the folder left (411 MiB in the holdout's batch), "the grader itself failed"."""
    import tempfile

    grader_tmp = tmp_path / "grader-tmp"
    grader_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(grader_tmp))
    report = grade_code(LEAVES_A_MESS, problems=["5.3"], learner="messy")
    (result,) = report.problems
    assert result.score == 0 and "grader itself" not in result.message, (result.status, result.message)
    # (but for the folder the grader's own trusted workers keep their compiled programs in, for its life)
    from autograder.sandbox import trusted

    left = [n for n in os.listdir(grader_tmp) if str(grader_tmp / n) not in trusted._FOLDER]
    assert left == [], left


def test_a_run_folder_crowded_with_step_names_is_stopped_not_watched():
    """The grading process lists a run folder every 2 ms, for the whole class: a run that fills it
    with names shaped like steps is stopped once it holds more than MAX_ENTRIES, with its own
    message, instead of being listed and looked at until its time runs out. Before: 19,000 names
    looked at every 2 ms for the run's whole minute, a batch ten times slower (422 s against 43 s)."""
    workdir = sandbox.new_workdir()
    args = files.realize((kinds.RunFolder((("commit", 1),)), 3, 0), workdir)
    started = time.monotonic()
    try:
        outcome, last, made = preempted.run_case(CROWDS, "train_with_preemption", args, (("commit", 1),),
                                                 timeout=60, workdir=workdir, level=best_isolation())
        assert outcome is None and last.status == "crowded" and made == 0, (outcome, last.status)
        assert time.monotonic() - started < 50, "stopped only when its time ran out"
    finally:
        sandbox.remove_folder(workdir)


def test_a_run_that_never_saves_forges_a_resume_only_where_the_grader_plants_nothing(grade_code, monkeypatch):
    """Issue 35's forgery, graded for real: empty folders shaped like saves just ahead of each
    planned kill, training from scratch in memory, the first_step the grader expects. Everything a
    grader that only looks at the folder saw says "resumed" (the control, from the same run: every
    kill made, first_step where it should have resumed, the last step committed, nothing saved
    again, the parameters of a run never interrupted): it had full marks. This grader restores the
    latest committed step itself before the last restart, and it scores 0."""
    from autograder.hidden import unit5

    outcomes = []
    real = preempted.run_case

    def recorded(*args, **kwargs):
        outcome, last, made = real(*args, **kwargs)
        outcomes.append((args[2], outcome))
        return outcome, last, made

    monkeypatch.setattr(preempted, "run_case", recorded)
    (result,) = grade_code(FAKES_ITS_FOLDERS, problems=["5.3"], learner="forger").problems
    assert result.status == "incorrect" and result.category == "plant_unreadable", result.message
    planned = [(a, o) for a, o in outcomes if o and o["planned"]]
    assert len(planned) == 2, outcomes  # (both hidden cases, each killed and planted)
    for args, outcome in planned:
        params, first = outcome["value"]
        assert outcome["preempted"] == outcome["planned"] > 0 and first == outcome["resumed_at"] > 0
        assert outcome["committed_after"] >= args[1] and not outcome["restarted"], outcome
        (table,) = [t for key, t in unit5._TABLES.items() if key[:2] == (int(args[1]), int(args[2]))]
        uninterrupted = table["uninterrupted"]  # (the grader's own, computed for this case)
        assert set(params) == set(uninterrupted) and all(np.array_equal(params[k], uninterrupted[k]) for k in params)
        assert "planted_at" not in outcome and outcome["plant_problem"] == "plant_unreadable"


def test_the_sweep_of_a_dead_graders_folders_follows_no_link_and_keeps_a_live_graders(tmp_path):
    """What the next grader removes is named after a dead grader and is its uid's: a link named so
    (a learner at the basic level, which writes where the grader does) loses the link only, never
    what it points at; a live grader's folder stays."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # a pid that has ended
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("x")
    (tmp_path / f"ckpt-worker-{dead}-link").symlink_to(precious)
    (tmp_path / f"ckpt-worker-{dead}-left" / "scratch").mkdir(parents=True)
    (tmp_path / f"ckpt-worker-{os.getppid()}-live").mkdir()  # this test's parent runs
    from autograder.sandbox import folders

    assert folders.sweep_orphaned_workdirs(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"ckpt-worker-{os.getppid()}-live", "precious"]
    assert (precious / "keep").read_text() == "x"


def test_the_tiers_folders_a_killed_process_kept_are_swept_by_the_next_grader(tmp_path):
    """8.2's written tiers are kept for the life of the process that wrote them (removed at exit);
    one killed outright leaves its folder, named after it, to the next grader's sweep. The control:
    the folder is there before the sweep (the kill did leave it)."""
    import subprocess
    import sys

    from autograder.sandbox import folders

    code = ("import os, tempfile; tempfile.tempdir = os.environ['HOLD']\n"
            "from autograder.wall.kinds import roots\nprint(roots._tiers_kept(), flush=True)\nos._exit(0)\n")
    left = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          env={**os.environ, "HOLD": str(tmp_path)}).stdout.strip()
    assert os.path.isdir(left) and os.path.dirname(left) == str(tmp_path)
    assert folders.sweep_orphaned_workdirs.__wrapped__(str(tmp_path)) == 1
    assert list(tmp_path.iterdir()) == []
