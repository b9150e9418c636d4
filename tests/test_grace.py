"""Problem 8.3, graded through real SIGTERMs: what the grader's runner does (engine/preempted.py's
``_terminate``), and what a learner can now forge: a save 'made on the SIGTERM' that is no save (a
folder shaped like a committed step), or an older save copied under the new step's number. Each
forgery scores 0 beside the control, the reference, which scores full marks through the same runs."""

from __future__ import annotations

import inspect

import pytest

from autograder.units.unit8 import UNIT
from solutions import unit8

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


def _grade(grade_code, source, learner):
    report = grade_code(source, problems=["8.3"], learner=learner)
    (result,) = report.problems
    return result


def test_the_reference_control_scores_full_marks_through_real_sigterms(grade_code):
    assert _SAVE_ON_TERM in _REFERENCE
    result = _grade(grade_code, _REFERENCE, "forger")
    assert (result.status, result.score) == ("correct", result.max_score), result.message


@pytest.mark.parametrize(("forgery", "says"), [
    # (its own restart then fails to restore the forged step: an error, which the message names)
    (_FOLDER_ONLY, "FileNotFoundError"),
    (_OLDER_COPY, "does not hold the training state after that many steps"),
])
def test_a_forged_save_on_the_sigterm_scores_nothing(grade_code, forgery, says):
    """A folder named by the step, its items' metadata in place, and nothing to restore; or the last
    periodic save copied under the step the loop stood at: the grader restores the step itself and
    compares it with the training state after that many steps."""
    result = _grade(grade_code, _REFERENCE.replace(_SAVE_ON_TERM, forgery), "forger")
    assert result.status in ("incorrect", "error") and result.score == 0, result.message
    assert says in result.message, result.message


_HANDLES = """
import signal
import time


def wait_for_term(ready, seconds):
    got = []
    signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    open(ready, "w").close()
    start = time.monotonic()
    while not got and time.monotonic() - start < seconds:
        time.sleep(0.01)
    return "handled" if got else "no signal"
"""
_NO_HANDLER = """
import time


def wait_for_term(ready, seconds):
    open(ready, "w").close()
    time.sleep(seconds)
    return "ran on"
"""


@pytest.mark.parametrize("level", ["strict", "basic"])
def test_the_sigterm_reaches_the_learners_process_and_only_a_handler_keeps_it_alive(level, tmp_path):
    """Worker.terminate sends the learner's own process a SIGTERM: a handler gets it at either level.
    Without one, outside a pid namespace (basic) the process ends on it, as on a cluster; inside one
    (strict) the kernel drops it and the process runs on, to the grader's SIGKILL (SECURITY.md)."""
    import threading
    import time

    from autograder import sandbox

    if level == "strict" and sandbox.strict_missing():
        pytest.skip("this machine cannot give the strict level")
    outcomes = {}
    for name, source in (("handler", _HANDLES), ("none", _NO_HANDLER)):
        ready = tmp_path / name / "scratch" / "ready"  # (the worker's own scratch folder: it may write there)
        worker = sandbox.Worker(source, "wait_for_term", [(str(ready), 4.0)], timeout=30,
                                workdir=str(tmp_path / name), level=level, keep_scratch=True)

        def term(worker=worker, ready=ready):
            while not ready.exists() and worker.thread.is_alive():
                time.sleep(0.01)  # (the function has started, its handler set, where it has one)
            worker.terminate()

        threading.Thread(target=term, daemon=True).start()
        result = worker.wait()
        outcomes[name] = (result.status, [c.get("value") for c in result.cases])
    assert outcomes["handler"] == ("ok", ["handled"]), outcomes
    namespaced = level == "strict" and sandbox.strict_namespaces()
    assert outcomes["none"] == (("ok", ["ran on"]) if namespaced else ("crashed", [])), outcomes


def test_a_decoy_step_folder_that_calls_the_signal_early_gains_nothing(grade_code):
    """The grader times its SIGTERM by the run folder's listing (a step's folder appearing), which the
    learner writes: a loop that looks at the signal only between training steps, which fails the
    evaluation's case, makes a folder named as the step the signal waits for as soon as it starts, so
    the SIGTERM comes while it trains, where it does look (and removes them before its first save). The
    newest step folder when the signal was called is the decoy's, and the loop stands below it: it saves
    no step past it, and scores 0 (the control, the reference, scores full marks above)."""
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
    result = _grade(grade_code, IMPORTS + decoy, "forger")
    assert result.status in ("incorrect", "error") and result.score == 0, result.message
