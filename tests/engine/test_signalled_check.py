"""Problem 8.3's public check sends a real SIGTERM into the learner's own process (the kernel,
autograder/wall/grace.py): whatever the learner's code does with the signal's disposition (no
handler, the default action put back through a name bound before the check), the process lives on
and is told what a real process would have done; the signal comes where the learner imported the
evaluation's functions by name too; and the process is left as the check found it (its handler, the
course's functions, the learner's names), no SIGTERM reaching it once the function has returned. The
runs happen in a process of their own: one the SIGTERM ended says so by its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.wrong_answers.unit8 import _GRACE, IMPORTS, _grace

pytestmark = pytest.mark.slow

# The right loop of the curated answers, its evaluation taken by name (`from ckptlab.training import ...`),
# the handler it found put back before it returns.
_BY_NAME = ("\nfrom ckptlab.training import eval_batches, eval_loss\n"
            + _grace(handler="previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))",
                     wait="mngr.wait_until_finished()\n    signal.signal(signal.SIGTERM, previous)")
            .replace("training.eval_batches(seed)", "eval_batches(seed)").replace("training.eval_loss(", "eval_loss("))

# Arms the check's SIGTERM (a step folder there, an evaluation batch done), then returns at once.
_RETURNS_BEFORE_THE_SIGNAL = """
def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    os.makedirs(os.path.join(ckpt_dir, "2"), exist_ok=True)
    for x, y in training.eval_batches(seed):
        training.eval_loss(training.make_model(seed), x, y)
        break
    return {}, 0
"""

SCENARIOS = {
    "no_handler": _grace(handler="pass"),  # run where an earlier run's handler was left in the process
    # SIG_DFL put back through a name bound before the check patched signal.signal
    "default_through_a_bound_name": _grace(handler="install(signal.SIGTERM, signal.SIG_DFL)",
                                           header="\nfrom signal import signal as install\n"),
    "imports_by_name": _BY_NAME,
    "returns_before_the_signal": _RETURNS_BEFORE_THE_SIGNAL,
    # commits its save on the SIGTERM, then ends its process (the kernel, in a notebook): the check's call ends
    "ends_its_process_after_the_commit": _grace(wait="mngr.wait_until_finished()\n    if stop:\n        os._exit(143)"),
}

_RUN = textwrap.dedent("""
    import json, os, signal, sys, time
    from ckptlab import setup_devices
    setup_devices()
    from autograder import registry
    from autograder.learner.notebook import ProblemHandle
    from ckptlab import training

    scenarios = json.loads(sys.stdin.read())
    calls = []
    mine = lambda signum, frame: calls.append(signum)  # the process's own handler, before any check
    stale = lambda signum, frame: calls.append(signum)  # one an earlier run of the learner's left behind
    before = {"no_handler": stale, "default_through_a_bound_name": signal.SIG_DFL}
    signal.signal(signal.SIGTERM, mine)
    originals = (training.eval_batches, training.eval_loss)
    real_exit = os._exit
    for name, source in scenarios.items():
        namespace = {"__name__": "learner"}
        exec(compile(source, name, "exec"), namespace)
        signal.signal(signal.SIGTERM, before.get(name, mine))
        result = ProblemHandle(registry.get("8.3"), namespace).check()
        time.sleep(0.6)  # a SIGTERM sent late would land here
        print(json.dumps({"name": name, "status": result.status, "message": result.message,
                          "handler_kept": signal.getsignal(signal.SIGTERM) is before.get(name, mine),
                          "late_signals": len(calls),
                          "restored": (training.eval_batches, training.eval_loss) == originals
                                      and namespace.get("eval_batches", originals[0]) is originals[0]
                                      and os._exit is real_exit}), flush=True)
        signal.signal(signal.SIGTERM, mine)
        calls.clear()
""")


def test_the_signalled_check_survives_the_learners_dispositions_and_leaves_the_process_as_it_was():
    sources = {name: IMPORTS + source for name, source in SCENARIOS.items()}
    proc = subprocess.run([sys.executable, "-c", _RUN], input=json.dumps(sources), capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, f"the checking process ended with {proc.returncode}: {proc.stderr[-2000:]}"
    got = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(got) == set(SCENARIOS)
    for name in ("no_handler", "default_through_a_bound_name"):
        assert got[name]["status"] == "incorrect" and "reached no handler of yours" in got[name]["message"], got[name]
    assert got["imports_by_name"]["status"] == "correct", got["imports_by_name"]  # the signal came, by those names
    assert got["returns_before_the_signal"]["status"] == "incorrect"
    assert "before the check could send its SIGTERM" in got["returns_before_the_signal"]["message"]
    ended = got["ends_its_process_after_the_commit"]  # (the process lived on: its os._exit ended the call only)
    assert ended["status"] == "incorrect" and "ended with os._exit after the SIGTERM" in ended["message"], ended
    # (the handler in place before met no SIGTERM: not an earlier run's, and none once a function had returned)
    assert all(r["handler_kept"] and r["restored"] and r["late_signals"] == 0 for r in got.values()), got


def test_the_by_name_scenario_takes_the_evaluation_by_name():
    # (else it would show nothing: the curated loop calls training.eval_batches and training.eval_loss)
    assert "training.eval_batches(seed)" in _GRACE and "training.eval_loss(" in _GRACE
    assert "training.eval_" not in _BY_NAME and "eval_batches(seed)" in _BY_NAME and "eval_loss(model" in _BY_NAME
