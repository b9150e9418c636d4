"""Problem 8.3, graded through real SIGTERMs: what the grader's runner does (engine/preempted.py's
``_terminate``), and what a learner can now forge: a save 'made on the SIGTERM' that is no save (a
folder shaped like a committed step), or an older save copied under the new step's number, or a
handler set only where the process is pid 1. Each forgery scores 0 beside the control, the
reference, which scores full marks through the same runs. (That the SIGTERM reaches the learner's
process, its default action intact, at every level: tests/sandbox/test_jail.py.)"""

from __future__ import annotations

import inspect

import pytest

from autograder.units.unit8 import UNIT
from solutions import unit8
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

_REFERENCE = UNIT.imports.replace("from autograder.notebook import problem\n", "") + "\n" + \
    inspect.getsource(unit8._Preempted) + "\n" + inspect.getsource(unit8.train_with_grace)
# On a SIGTERM, the forgeries make step `done` look committed instead of saving it.
_SAVE_ON_TERM = """            if done != saved:
                save(done)  # the steps finished since the last save, saved while the window is open"""
_FOLDER_ONLY = """            if done != saved:
                mngr.wait_until_finished()
                for item in ("state", "data"):
                    os.makedirs(os.path.join(ckpt_dir, str(done), item), exist_ok=True)
                    with open(os.path.join(ckpt_dir, str(done), item, "_CHECKPOINT_METADATA"), "w") as f:
                        f.write("{}")"""
_OLDER_COPY = """            if done != saved:
                import shutil
                mngr.wait_until_finished()
                shutil.copytree(os.path.join(ckpt_dir, str(saved)), os.path.join(ckpt_dir, str(done)))"""


# The reference's handler, set only where the process is pid 1 of its pid namespace: what the grader's
# sandbox once was, and no machine a job runs on (a container's entrypoint, under --init, is not).
_HANDLER = "    previous = signal.signal(signal.SIGTERM, lambda signum, frame: signalled.append(signum))\n"
_PID_1_ONLY = _HANDLER.replace("signalled.append(signum))", "signalled.append(signum)) if os.getpid() == 1 \\\n"
                               "        else signal.getsignal(signal.SIGTERM)")


def _decoy() -> str:
    """The decoy's source (its test says what it does)."""
    from tests.wrong_answers.unit8 import IMPORTS, WRONG

    source = next(s for name, s, *_ in WRONG["train_with_grace"] if name == "looks_only_between_steps")
    decoy = source.replace("    done = saved = first\n", "    done = saved = first\n"
                           "    decoys = [os.path.join(ckpt_dir, str(s)) for s in range(first + 1, first + 5)]\n"
                           "    for path in decoys:\n"
                           "        os.makedirs(path, exist_ok=True)\n", 1)
    decoy = decoy.replace("        done += 1\n", "        done += 1\n"
                          "        while decoys:  # gone before its own first save, which would meet them\n"
                          "            os.rmdir(decoys.pop())\n", 1)
    assert decoy.count("decoys") == 4
    return IMPORTS + decoy


def _pauses_before_each_evaluation() -> str:
    """A hostile holdout's: a loop that looks at the signal between steps only, never inside an evaluation,
    but waits 1.5 s before each, watching the signal there (where the grader once sent it: 0.5 s after the
    step folder before the evaluation appeared)."""
    from tests.wrong_answers.unit8 import IMPORTS, WRONG

    source = next(s for name, s, *_ in WRONG["train_with_grace"] if name == "looks_only_between_steps")
    paused = source.replace("        if done % eval_every == 0:\n", "        if done % eval_every == 0:\n"
                            "            import time\n"
                            "            waited = time.monotonic()\n"
                            "            while not stop and time.monotonic() - waited < 1.5:\n"
                            "                time.sleep(0.01)\n"
                            "            if stop:\n"
                            "                break\n", 1)
    assert paused != source
    return IMPORTS + paused


def _faked_save_under_way() -> str:
    """A loop that looks at the signal only between steps, with an empty folder named as a save under way."""
    from ckptlab.steps import TMP_MARK
    from tests.wrong_answers.unit8 import IMPORTS, WRONG

    source = next(s for name, s, *_ in WRONG["train_with_grace"] if name == "looks_only_between_steps")
    faked = source.replace("    done = saved = first\n", "    done = saved = first\n"
                           f"    os.makedirs(os.path.join(ckpt_dir, '99{TMP_MARK}'), exist_ok=True)\n", 1)
    assert faked != source
    return IMPORTS + faked


def class_sources() -> dict[str, str]:
    """The control and every forgery, by name: graded as learners ``grace-<name>`` of the suite's
    background class (tests/background.py), as an instructor grades one (grade-batch: these runs
    mostly wait, for evaluations and grace windows; the references run once, every learner on the
    same cases)."""
    assert _SAVE_ON_TERM in _REFERENCE and _REFERENCE.count(_HANDLER) == 1
    return {"reference": _REFERENCE, "folder_only": _REFERENCE.replace(_SAVE_ON_TERM, _FOLDER_ONLY),
            "older_copy": _REFERENCE.replace(_SAVE_ON_TERM, _OLDER_COPY),
            "pid_1_only": _REFERENCE.replace(_HANDLER, _PID_1_ONLY), "decoy": _decoy(),
            "faked_save_under_way": _faked_save_under_way(), "paused": _pauses_before_each_evaluation()}


@pytest.fixture(scope="module")
def graded() -> dict:
    """Each of :func:`class_sources`' learners' result for 8.3."""
    from tests import background

    reports = background.result("class")["reports"]
    return {name: next(p for p in reports[f"grace-{name}"]["problems"] if p["id"] == "8.3")
            for name in class_sources()}


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_the_reference_control_scores_full_marks_through_real_sigterms(graded):
    result = graded["reference"]
    assert (result["status"], result["score"]) == ("correct", result["max_score"]), result["message"]


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("forgery", "says"), [
    # (its own restart then fails to restore the forged step: an error, which the message names)
    ("folder_only", "FileNotFoundError"),
    ("older_copy", "does not hold the training state after that many steps"),
])
def test_a_forged_save_on_the_sigterm_scores_nothing(graded, forgery, says):
    """A folder named by the step, its items' metadata in place, and nothing to restore; or the last
    periodic save copied under the step the loop stood at: the grader restores the step itself and
    compares it with the training state after that many steps."""
    result = graded[forgery]
    assert result["status"] in ("incorrect", "error") and result["score"] == 0, result["message"]
    assert says in result["message"], result["message"]


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_a_loop_that_handles_the_sigterm_only_as_pid_1_scores_nothing(graded):
    """A loop that installs its handler only `if os.getpid() == 1`: on any machine it has none, and
    the SIGTERM ends it at once. In the grader it is pid 2 of its pid namespace, under a minimal init,
    as on a machine: it scores 0, told that no handler was in place (the control, the reference,
    scores full marks above). Before, the learner's process was pid 1 there, and this scored 20/20."""
    result = graded["pid_1_only"]
    assert result["status"] == "incorrect" and result["score"] == 0, result["message"]
    assert "no SIGTERM handler of yours was in place" in result["message"], result["message"]


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_a_decoy_step_folder_that_calls_the_signal_early_gains_nothing(graded):
    """The grader times its SIGTERM by the run folder's listing (a step's folder appearing), which the
    learner writes: a loop that looks at the signal only between training steps, which fails the
    evaluation's case, makes a folder named as the step the signal waits for as soon as it starts, so
    the SIGTERM comes while it trains, where it does look (and removes them before its first save). The
    newest step folder when the signal was called is the decoy's, and the loop stands below it: it saves
    no step past it, and scores 0 (the control, the reference, scores full marks above)."""
    result = graded["decoy"]
    assert result["status"] in ("incorrect", "error") and result["score"] == 0, result["message"]


def test_a_run_the_sigterm_ended_is_told_apart_from_one_that_exited_after_it():
    """What the grader says of a run that did not return after the SIGTERM: ended by the signal's
    default action (its process killed by SIGTERM: no handler was in place), or by an exit or an
    exception of its own after it (a handler that calls sys.exit), or by the SIGKILL (a handler that
    answered too late). Each gets its own message; the curated wrong answers grade the first for real."""
    from autograder.hidden.unit8 import GRACE_RUN, _grace_outcome

    args = ("ckpt", 5, 0, 2, 3)
    out = lambda **how: {"planned": 1, "terms": [{"point": "term_eval", "before": 2, "committed": 2,  # noqa: E731
                                                   "ended_first": False, "killed": False, **how}]}
    assert _grace_outcome(args, out(returned=False, by_term=True)) == "ended_by_term"
    assert _grace_outcome(args, out(returned=False, by_term=False)) == "exited_on_term"
    assert _grace_outcome(args, out(returned=False, by_term=False, killed=True)) == "grace_exceeded"
    # Killed having answered (a save begun or under way): late, perhaps by the machine's load, and graded once more
    # alone; killed without having answered: the loop never looked at the signal, and a second grading would not help.
    assert _grace_outcome(args, out(returned=False, by_term=False, killed=True, answered=True)) == "grace_exceeded_saving"
    assert "grace_exceeded_saving" in GRACE_RUN.retry_alone and "grace_exceeded" not in GRACE_RUN.retry_alone
    # A step committed after the signal went (held: the latest when it went): a handler saved it, whatever the
    # exit status then (os._exit(143) reads as the signal's default action from outside).
    assert _grace_outcome(args, out(returned=False, by_term=True, held=2, committed=3)) == "exited_after_commit"
    assert _grace_outcome(args, out(returned=False, by_term=False, held=2, committed=3)) == "exited_after_commit"
    assert _grace_outcome(args, out(returned=False, by_term=True, held=2)) == "ended_by_term"
    assert "no SIGTERM handler of yours was in place" in GRACE_RUN.messages["ended_by_term"]
    assert "sys.exit" in GRACE_RUN.messages["exited_on_term"]


def test_a_failure_on_timing_is_graded_once_more_alone_and_that_grading_counts(grade_code, monkeypatch):
    """A problem judged a failure its hidden tests name the machine's timing for (``retry_alone``: 8.3's
    run still going when its grace window closed) is graded once more, with no other worker beside it,
    and only that grading is heard and counts: a right answer the load failed gets its marks, and an
    answer failing the same way again (a loop that never stops) gains nothing, tried once more only.
    Shown on problem 1.1, cheap, its hidden tests given every category as ``retry_alone``."""
    import dataclasses

    from autograder.engine import grade as engine
    from autograder.hidden import unit1 as hidden1
    from tests.wrong_answers.unit1 import IMPORTS, WRONG

    function = "dense_checkpoint_accounting"
    original = hidden1.HIDDEN[function]
    monkeypatch.setitem(hidden1.HIDDEN, function, dataclasses.replace(original, retry_alone=tuple(original.messages)))
    wrong = IMPORTS + next(s for name, s, *_ in WRONG[function] if name == "forgets_bias")
    reference = (ROOT / "solutions" / "unit1.py").read_text()
    real, calls = engine.runners.run, []

    def run(plan, level):  # the first grading of 1.1 fails (the load, here a wrong answer in its place)
        calls.append(plan.problem.id)
        if plan.problem.id == "1.1" and calls.count("1.1") == 1:
            plan.source = wrong
        return real(plan, level)

    monkeypatch.setattr(engine.runners, "run", run)
    heard = []
    report = grade_code(reference, problems=["1.1"], on_result=heard.append)
    assert calls.count("1.1") == 2 and [r.status for r in heard] == ["correct"] and heard[0] is report.problems[0]
    calls.clear()
    report = grade_code(wrong, problems=["1.1"])  # failing again on its retry: graded twice, never more
    assert calls.count("1.1") == 2 and report.problems[0].status == "incorrect" and report.problems[0].score == 0


def test_the_reference_scores_full_marks_with_both_cores_busy(grade_code, monkeypatch):
    """8.3's grace window is wall-clock time, and a loaded machine (a class graded with -j N, Gradescope's
    half CPU) slows the learner's run within it: the reference, graded while two busy processes keep two
    cores busy, still scores full marks (a failure on timing alone is graded once more, alone: said here
    when it happens)."""
    import subprocess
    import sys

    from autograder.engine import grade as engine

    real, calls = engine.runners.run, []
    monkeypatch.setattr(engine.runners, "run", lambda plan, level: calls.append(plan.problem.id) or real(plan, level))
    busy = []
    try:
        for _ in range(2):
            busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        report = grade_code(_REFERENCE, problems=["8.3"])
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    result = report.problems[0]
    print(f"\n8.3's reference with both cores busy: {result.status}, graded {calls.count('8.3')} time(s)")
    assert (result.status, result.score) == ("correct", result.max_score), result.message


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_a_loop_that_watches_the_signal_in_a_pause_before_each_evaluation_scores_nothing(graded):
    """The SIGTERM goes as the run reads a batch of its evaluation, which the grader paces (drawn per
    case from the hidden draw): a loop that watches the signal only in a pause before each evaluation
    meets it inside the evaluation, which it does not watch, and is killed there. A hostile holdout's:
    it scored 20/20 twice when the signal came 0.5 s after the step folder before the evaluation
    appeared (the control, the reference, scores full marks above)."""
    result = graded["paused"]
    assert result["score"] == 0 and "look at the signal inside it too" in result["message"], result["message"]


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_a_loop_that_fakes_a_save_under_way_is_graded_once_more_and_still_scores_nothing(graded):
    """The retry's evidence (a save begun or under way when the window closes) is the learner's folder, so a
    loop can fake it: one that never looks at the signal inside an evaluation, with an empty folder named as a
    save under way beside its steps, is graded once more (its message says it was graded twice: never more)
    and scores 0 again. (Graded in the class above: its retry waits for the other learners' runs to end.)"""
    result = graded["faked_save_under_way"]
    assert result["score"] == 0 and "graded twice" in result["message"], result["message"]


def test_only_a_run_a_sigterm_is_planned_for_evaluates_slowly():
    """A run the grader sends no signal to evaluates at once (engine/preempted.py sets ckptlab.training's
    variable in its worker's environment): its evaluations change nothing but the grading's time. A worker
    given the variable waits 0 s a batch; one without it, EVAL_WAIT, as in the learner's notebook."""
    from autograder import sandbox
    from autograder.engine import preempted
    from ckptlab import training

    assert preempted.EVAL_WAIT_VARIABLE == training.EVAL_WAIT_VARIABLE  # (the grader's copies: it imports no JAX)
    assert preempted.EVAL_FEED_VARIABLE == training.EVAL_FEED_VARIABLE and preempted.FEED_WAIT == training.EVAL_WAIT
    probe = ("import time\nfrom ckptlab import training\n\ndef probe():\n    waits = []\n"
             "    time.sleep = waits.append\n    n = sum(1 for _ in training.eval_batches(0))\n"
             "    return n, sorted(set(waits))\n")
    fast = sandbox.Worker(probe, "probe", [()], timeout=60, env={preempted.EVAL_WAIT_VARIABLE: "0"}).wait()
    slow = sandbox.Worker(probe, "probe", [()], timeout=60).wait()
    assert fast.cases[0]["value"] == (training.EVAL_BATCHES, [0.0]), fast
    assert slow.cases[0]["value"] == (training.EVAL_BATCHES, [training.EVAL_WAIT]), slow
    # The public check's runs with no signal (autograder/wall/run_returns.py), in the learner's own process:
    # the variable set for the call only, the process's environment left as it was.
    import os

    before = os.environ.pop(training.EVAL_WAIT_VARIABLE, None)
    try:
        with training.evaluations_at_once():
            assert os.environ[training.EVAL_WAIT_VARIABLE] == "0"
        assert training.EVAL_WAIT_VARIABLE not in os.environ
    finally:
        if before is not None:
            os.environ[training.EVAL_WAIT_VARIABLE] = before


def test_one_learners_runs_take_the_problems_clock_at_most(grade_code, monkeypatch):
    """All of 8.3's runs together, every case's, get engine/preempted.py's PROBLEM_CLOCK on the clock (said
    in the statement and GRADESCOPE.md): a run that waits long, each under its own limit, used to hold a
    grading slot for up to about 16 minutes (two runs a case of 2 x 90 s, the plant worker's 2 x 60 s).
    Here the clock is made 8 s and the reference waits 3 s in each run: the grading stops once the clock is
    spent, said as a timeout of the whole problem. (The control, the reference under the real clock, scores
    full marks above.)"""
    from autograder.engine import preempted

    monkeypatch.setattr(preempted, "PROBLEM_CLOCK", 8.0)
    slow = _REFERENCE.replace("def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):\n",
                              "def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):\n"
                              "    import time\n    time.sleep(3)\n", 1)
    assert slow != _REFERENCE
    result = grade_code(slow, problems=["8.3"]).problems[0]
    assert result.status == "timeout" and "all cases together" in result.message, result.message
    assert result.seconds < 8.0 + 30, result.seconds  # (the clock, and one plant worker's start at most)
