"""A real SIGTERM for a public example of problem 8.3, sent to the learner's own process (the
notebook's kernel, or the checking process of ``autograder check`` and practice) while their run
evaluates, as the grader sends one to its worker (:mod:`autograder.engine.preempted`).

The check cannot SIGKILL the kernel, and a SIGTERM that meets no handler would end it. So the
signal is raised in the main thread, from inside the learner's evaluation (``training.eval_batches``
and ``training.eval_loss``, patched for the call, also where the learner imported them by name),
once it has run a while: there, nothing can change the handler between the look at it and the
signal (only the main thread installs handlers). Where the learner's code left none (Python's
default action, which would end a real process at once, or the signal ignored), the signal is not
sent and the check says what a real process would have done. The learner's handler runs between
two bytecodes, as in any process. What the run did is timed from the signal to the function's
return, and read from its folder at that moment (a real process ends with the function, and a
commit still under way dies with it). The run starts with the default action, as the grader's
worker does, whatever handler an earlier run left in the kernel; that handler and the patched
functions are put back whatever happens.
"""

from __future__ import annotations

import os
import signal
import threading
import time

# Seconds from the evaluation's first batch to the SIGTERM: the evaluation (4.5 s) is well under way,
# about 4.2 s of it still to come, beyond the 3 s grace window, whatever the machine's speed (its
# waits are sleeps).
INTO_EVALUATION = 0.25


class _ProcessExit(BaseException):
    """``os._exit`` called by the learner's run: in the check it ends the call, not the kernel."""


def step_folders(root: str) -> dict[int, bool]:
    """{step: committed} for every step folder of ``root``: committed ones, and saves under way (a
    temporary folder, or a step folder without its commit file)."""
    from ckptlab.steps import committed, entries, step_of

    out: dict[int, bool] = {}
    for name in entries(root):
        step = step_of(name)
        if step is not None:
            out[step] = out.get(step, False) or committed(os.path.join(root, name))
    return out


def signalled_run(fn, real_args, point: tuple, grace: float) -> dict:
    """Call ``fn(*real_args)`` once, sending the process a SIGTERM :data:`INTO_EVALUATION` seconds into
    the first evaluation that starts once a step folder at least ``point[1]`` beyond where the run
    started exists (``("term_eval", k)``: a RunFolder's point). Returns what the check needs: ``sent``
    (whether the moment came), ``unhandled`` (the learner's code had no handler in place then),
    ``ended`` (the function ended with SystemExit or KeyboardInterrupt instead of returning: its
    name, or ``os._exit``: patched for the call, it ends the call, not the kernel), ``after`` (seconds
    from the signal to the return), ``before`` (the newest step folder when
    the signal went), ``start`` (the latest committed step when the call began), ``folders``
    (:func:`step_folders` at the return) and ``value`` (what the function returned)."""
    from ckptlab import training
    from ckptlab.steps import committed_steps

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("this example sends your run a real SIGTERM, which Python handles in the main thread "
                           "only: run the check from the main thread")
    root = real_args[0]
    start = max(committed_steps(root), default=0)
    state = {"sent": False, "unhandled": False, "ended": None, "after": None, "before": None, "start": start,
             "value": None}
    evaluating = _sender(root, start + int(point[1]), state)
    originals = {"eval_batches": training.eval_batches, "eval_loss": training.eval_loss}
    returned = _call_watched(fn, real_args, originals, _watched(originals, evaluating), state)
    if state["sent"]:
        state["after"] = returned - state.pop("sent_at")
    return state


def _sender(root: str, beyond: int, state: dict):
    """What the learner's evaluation calls, in the main thread, after its first batch: it sends the
    SIGTERM :data:`INTO_EVALUATION` seconds into the first evaluation that meets a step folder at least
    ``beyond`` in ``root``, once, and notes it in ``state``."""
    due: list[float] = []  # when the signal goes, once the evaluation it meets has begun

    def evaluating():
        if state["sent"]:
            return
        if not due:
            if max(step_folders(root), default=0) >= beyond:
                due.append(time.monotonic() + INTO_EVALUATION)
            return
        if time.monotonic() < due[0]:
            return
        state["before"] = max(step_folders(root), default=0)
        state["sent"], state["sent_at"] = True, time.monotonic()
        if callable(signal.getsignal(signal.SIGTERM)):
            signal.raise_signal(signal.SIGTERM)  # the handler runs at the next bytecode
        else:  # none of the learner's (the default action, or ignored): sent, it would end this process
            state["unhandled"] = True

    return evaluating


def _watched(originals: dict, evaluating) -> dict:
    """``training.eval_batches`` and ``training.eval_loss`` (``originals``), each calling ``evaluating``
    as the evaluation goes."""

    # Looked at from its second batch on: its first eval_loss compiles the model's forward pass, which a
    # real run pays before the SIGTERM too.
    def eval_batches(*args, **kwargs):
        for i, batch in enumerate(originals["eval_batches"](*args, **kwargs)):
            if i:
                evaluating()
            yield batch

    def eval_loss(*args, **kwargs):
        loss = originals["eval_loss"](*args, **kwargs)
        evaluating()
        return loss

    return {"eval_batches": eval_batches, "eval_loss": eval_loss}


def _call_watched(fn, real_args, originals: dict, patched: dict, state: dict) -> float:
    """Call ``fn(*real_args)`` with the evaluation ``patched`` (in ``training``, and where the learner
    imported it by name), SIGTERM's default action and ``os._exit`` ending the call alone; put every
    one of them back whatever happens. Notes ``value``, ``ended`` and ``folders`` in ``state``;
    returns the moment the call returned."""
    from ckptlab import training

    root = real_args[0]
    names = getattr(fn, "__globals__", {})
    by_name = [(name, key) for name, value in list(names.items()) for key in originals if value is originals[key]]
    previous = signal.getsignal(signal.SIGTERM)
    real_exit = os._exit

    def process_exit(status):
        raise _ProcessExit(status)

    try:
        # As the grader's worker starts: Python's default action, whatever an earlier run (or a cell) left here.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for key, value in patched.items():
            setattr(training, key, value)
        for name, key in by_name:
            names[name] = patched[key]
        os._exit = process_exit  # (a run that ends its process after the commit: the kernel would die with it)
        try:
            state["value"] = fn(*real_args)
        except (SystemExit, KeyboardInterrupt) as exc:
            state["ended"] = type(exc).__name__
        except _ProcessExit:
            state["ended"] = "os._exit"
        finally:
            os._exit = real_exit
        returned = time.monotonic()
        state["folders"] = step_folders(root)
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        for key, value in originals.items():
            setattr(training, key, value)
        for name, key in by_name:
            if names.get(name) is patched[key]:
                names[name] = originals[key]
    return returned
