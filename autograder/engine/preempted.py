"""Preempted runs (problem 5.3): the learner's training function, run in a worker and killed with
SIGKILL from this side at the points each case's :class:`~autograder.wall.kinds.RunFolder` names,
then started again in a fresh worker with the same arguments, until a run ends by itself.

The workers of one case share one scratch folder, kept between them (the checkpoints a run leaves
are what the next one resumes from), watched for size from here. The learner's code never runs in
this process: what this side reads is the run folder's listing (which steps committed, which save
is under way), to choose the moment of each kill.
"""

from __future__ import annotations

import os
import threading
import time

from autograder import sandbox
from autograder.wall import codec, kinds, plant
from ckptlab.steps import (
    COMMIT_FILE,
    TMP_MARK,
    committed,
    committed_folders,
    committed_steps,
    entries,
    step_folder,
    step_of,
)

POLL = 0.002  # seconds between two looks at the run folder
MAX_RUNS = 8  # workers per case at most: the kills, then runs that end by themselves (a crash ends it sooner)
# Entries a run folder may hold: a run's steps (at most ten here) and a save under way; the grader
# lists the folder every POLL, so more would make one learner's run cost the whole class's grading
# process (tests/engine/test_preempted.py crowds a folder).
MAX_ENTRIES = 64


# The run folder is the learner's: it is listed here, never read, and no link in it is followed
# (a link to a folder elsewhere would make the moment of a kill say what that folder holds). Its
# step folders are named as the learner's CheckpointManager names them (a step prefix, a fixed
# length): read with Orbax's own parsing (ckptlab.steps.step_of).

def _saving(folder: str, beyond: int) -> bool:
    """Whether a save of a step >= ``beyond`` is under way: a temporary folder (atomic rename) or a
    step folder without its commit file (written in place)."""
    for name in entries(folder):
        step = step_of(name)
        path = os.path.join(folder, name)
        if step is None or step < beyond or not step_folder(path):
            continue
        if TMP_MARK in name or not committed(path):
            return True
    return False


def _saved_again(folder: str, start: int, since: float) -> bool:
    """Whether a step at or below ``start`` (where this run should have resumed) committed after
    ``since``: the run did not resume, it started over."""
    for step, name in committed_folders(folder).items():
        if step > start:
            continue
        try:
            if os.lstat(os.path.join(folder, name, COMMIT_FILE)).st_mtime >= since:
                return True
        except OSError:
            continue
    return False


def _newest_folder(folder: str) -> int:
    """The newest step with a folder of any kind: committed, or a save under way."""
    steps = [step_of(name) for name in entries(folder)]
    return max((s for s in steps if s is not None), default=0)


def _point_reached(kill: tuple, folder: str, start: int) -> bool:
    point, steps = kill
    if point == "commit":
        return max(committed_steps(folder), default=0) >= start + steps
    return _saving(folder, start + steps)  # "mid_save", "term_save" ("term_eval": the feed's, _Feed)


TERMS = ("term_save", "term_eval")
# A "term_eval" point's SIGTERM goes as the run reads the k-th batch of its evaluation: the grader paces
# it (ckptlab.training.eval_batches waits on a pipe of the grader's, a byte a batch, FEED_WAIT seconds
# apart, as its own waits are), so it knows the moment from its own end of the pipe, never from the
# run's files or pauses (which once timed it: a loop that paused, watching the signal, before each
# evaluation it did not watch scored full marks). k is drawn from the case's hidden draw, between
# FEED_BATCHES' bounds: 0.1 to 0.7 s into the 4.5 s evaluation, 3.8 s or more of it still to come,
# beyond the 3 s grace window. Batches count once a step folder at least k steps beyond the run's start
# exists (the evaluation the case is about follows that step: batches read before it call nothing).
FEED_WAIT = 0.05  # ckptlab.training.EVAL_WAIT (not imported here: it imports JAX)
FEED_BATCHES = (2, 14)
EVAL_FEED_VARIABLE = "CKPTLAB_EVAL_FEED"  # ckptlab.training's


def signal_batch(plant: int) -> int:
    """The batch of the evaluation a case's SIGTERM goes at: from its hidden draw (its plant)."""
    low, high = FEED_BATCHES
    return low + int(plant) % (high - low + 1)


class _Feed:
    """The pace of one run's evaluations: a named pipe in the case's folder (read-only to the worker),
    a byte written each FEED_WAIT seconds once the last one was read. ``reached`` is set as the run reads
    its ``batch``-th byte counted (``counts()`` true)."""

    def __init__(self, workdir: str, batch: int, counts):
        import itertools

        for n in itertools.count():
            self.path = os.path.join(workdir, f"eval-feed-{n}")
            try:
                os.mkfifo(self.path, 0o644)
                break
            except FileExistsError:
                continue
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)  # (a writer from the start: the run's open never waits)
        self.batch, self.counts, self.read = batch, counts, 0
        self.reached, self._done = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ckpt-eval-feed")
        self._thread.start()

    def _unread(self) -> int:
        import array
        import fcntl
        import termios

        buf = array.array("i", [0])
        fcntl.ioctl(self.fd, termios.FIONREAD, buf, True)
        return buf[0]

    def _run(self) -> None:
        try:
            while not self._done.wait(FEED_WAIT):
                os.write(self.fd, b"\0")
                while self._unread() and not self._done.wait(POLL):
                    pass
                if self._done.is_set():
                    return
                if self.counts():
                    self.read += 1
                    if self.read >= self.batch:
                        self.reached.set()
        except OSError:
            return

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        os.close(self.fd)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _terminate(worker, kill: tuple, folder: str, grace: float, seen: set) -> dict:
    """SIGTERM the run, then SIGKILL it if it still runs ``grace`` seconds later. Returns what this
    side saw: the newest step folder when the point was reached or the signal went (``before``: a
    run stands past it once it has saved it), whether it had answered the signal by the window's end
    (``answered``: a save begun since, or one under way then), the latest committed step when it went (``held``: a
    step committed after it was saved by a handler, whatever the process's end), whether the SIGKILL came
    (``killed``), how long after the signal the run ended (``after``), and whether it had ended
    before the signal went (``ended_first``: a run that does not evaluate where the statement says)."""
    before = _newest_folder(folder)  # (a step folder gone by the signal still counts: it counted the batches)
    held = max(committed_steps(folder), default=0)
    under_way = _saving(folder, 1)  # a save was being written when the signal went
    sent = time.monotonic()
    ended_first = not worker.thread.is_alive()  # the run ended by itself before the signal could go
    worker.terminate()
    while worker.thread.is_alive() and time.monotonic() - sent < grace:
        seen.update(committed_steps(folder))
        time.sleep(POLL)
    killed = worker.thread.is_alive()
    # Whether the run had answered the signal when the window closed: a save begun since (a step folder
    # newer than any then), or one under way then, to wait for. A loop that never looked at the signal
    # has neither; a right one the machine's load slowed has one.
    answered = under_way or _newest_folder(folder) > before
    if killed:
        worker.preempt()
    return {"point": kill[0], "before": before, "held": held, "killed": killed, "answered": answered,
            "after": round(time.monotonic() - sent, 3), "ended_first": ended_first}


PLANT_TIMEOUT = 60.0
# All of a problem's runs together (every case's workers, the grader's plant workers too) get this long
# on the clock: one learner's grading holds a slot of the class's for at most that (8.3's reference:
# about 25 s here). A worker starts with the time left as its own limit; none starts with under
# MIN_LEFT seconds left. The statement and GRADESCOPE.md say it.
PROBLEM_CLOCK = 300.0
MIN_LEFT = 2.0
CLOCK_DETAIL = "problem_clock"  # a RunResult's detail: the timeout was the problem's whole clock
EVAL_WAIT_VARIABLE = "CKPTLAB_EVAL_WAIT"  # ckptlab.training's (not imported here: it imports JAX)


def _same_state(got, want: dict) -> bool:
    """Whether what the plant worker restored is, leaf for leaf and bit for bit, ``want``."""
    if not isinstance(got, dict) or set(got) != set(want):
        return False
    import numpy as np

    return all(isinstance(got[k], np.ndarray) and got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
               and np.array_equal(got[k], want[k]) for k in want)


def plant_state(folder: str, step: int, table: dict, *, workdir: str, level: str,
                timeout: float = PLANT_TIMEOUT) -> tuple[str | None, dict | None]:
    """Before a run's last start: restore the latest committed step's state (in a sandboxed worker
    of the grader's own, :mod:`autograder.wall.plant`), check it is the training state after
    ``step`` steps, and write ``table``'s planted state in its place. Returns (None, the parameters
    a run that restores it ends with) once planted, else (why not: a key of 5.3's messages, None)."""
    name = committed_folders(folder).get(step)
    if name is None or step not in table["planted"]:
        return "plant_not_state", None
    worker = sandbox.Worker(plant.SOURCE, plant.FUNCTION, [(os.path.join(folder, name), table["planted"][step])],
                            timeout=timeout, workdir=workdir, level=level, keep_scratch=True)
    back = worker.wait()
    if back.status == "failed_start":  # the grader's own worker: its failure, never the learner's
        raise RuntimeError(f"the grader's plant worker failed to start ({sandbox.start_failure(back)})")
    got = back.cases[0].get("value") if back.status == "ok" and not back.setup and back.cases else None
    if got == plant.NOT_A_STATE or (isinstance(got, dict) and not _same_state(got.get("saved"), table["saved"][step])):
        return "plant_not_state", None
    if not isinstance(got, dict):
        return "plant_unreadable", None
    return None, table["final"][step]


def run_case(source: str, function: str, args: tuple, kills: tuple, *, timeout: float, workdir: str, level: str,
             memory_bytes: int = sandbox.DEFAULT_MEMORY, plant_table=None,
             left_at: int = 0, grace: float = 0.0, eval_batch: int = FEED_BATCHES[0],
             deadline: float | None = None) -> tuple[dict | None, sandbox.RunResult, int]:
    """Run one case to its end, preempting it at each of ``kills``. Returns (the case's outcome as
    the last worker gave it, with ``preempted`` (kills made), ``planned`` and ``restarted`` (a run
    saved again a step at or below where it should have resumed), or None when the last worker
    gave none; ``resumed_at``, the latest committed step when the last worker started, is where it
    should have resumed; ``committed_after``, the latest once its process ended with its answer;
    ``terms``, what each SIGTERM met (:func:`_terminate`; ``committed``, the newest committed step
    once that run ended; ``returned``, whether its function returned, rather than its process ending
    on the signal or the SIGKILL; ``by_term``, whether the signal's default action ended it);
    ``seen``, every step this side saw committed, in any run); that worker's RunResult, its times the whole series'; the kills made).

    With ``plant_table`` (a function giving :func:`autograder.sandbox.trusted.planted_runs`'s table for this case), once every
    kill is made (or, with ``left_at``, the first run ended) and before the last run starts, the latest
    committed step is read back and another state planted in it (:func:`plant_state`): the outcome
    then says ``planted_at`` (that step), ``plant_expected`` (the parameters a run restoring it
    ends with) and ``plant_fresh_data`` (those of a run restoring it but not the data's position:
    a mistake the hidden tests name), or ``plant_problem`` (why the step could not be planted). The trusted computation
    this needs runs beside the learner's first runs.

    With ``left_at`` (k, a :class:`~autograder.wall.kinds.RunFolder`'s), a worker first runs the
    function in the fresh folder with ``total_steps=k``, to its end, unkilled, as the notebook's
    check runs that public example; the case's runs then start in what it left. A first run that
    gives no answer, or raises, is the case's outcome (its error is the one to report)."""
    folder = next(leaf for leaf in codec.leaves(args) if isinstance(leaf, str) and os.path.basename(leaf).startswith("run-"))
    step_of("0")  # (Orbax, which reads step names, imported here: not on the watcher's thread, mid-run)
    series = _Series(folder, grace)
    computing, table = _start_plant_table(plant_table) if plant_table is not None and (kills or left_at) else (None, {})
    leading = bool(left_at)  # the first run, with total_steps=left_at, still to come
    last: sandbox.RunResult | None = None
    start = 0  # (the latest committed step when the last worker started: only read once one has run)
    out_of_time = False
    for _ in range(MAX_RUNS):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left < MIN_LEFT:
            out_of_time = True
            break
        run_timeout = timeout if left is None else min(timeout, left / sandbox.WALL_FACTOR)
        start = max(committed_steps(folder), default=0)
        kill = None if leading else kills[series.made] if series.made < len(kills) else None
        # (after the kills, or after the first run of a folder a run has left: the public example's plant)
        if computing is not None and kill is None and (series.made or left_at) and not leading and start \
                and not series.planted:
            series.plant(computing, table, start, workdir=workdir, level=level, timeout=run_timeout)
        run_args = (args[0], int(left_at), *args[2:]) if leading else args
        last, killed, termed = series.run_once(source, function, run_args, kill, start, timeout=run_timeout,
                                               workdir=workdir, level=level, memory_bytes=memory_bytes, eval_batch=eval_batch)
        if last.status == "timeout" and run_timeout < timeout:  # its limit was what the problem's clock had left
            last.detail = CLOCK_DETAIL
        if series.crowded.is_set():
            last.status, last.cases = "crowded", []
            break
        if killed:
            series.count_kill(last, termed)
            continue
        if leading and last.status == "ok" and not last.setup and last.cases and "value" in last.cases[0]:
            leading = False  # it ended by itself, as asked: the case's own runs start in what it left
            continue
        break
    if out_of_time:  # the problem's whole clock spent: a timeout, said as such (judge.py)
        last = last or sandbox.RunResult("timeout")
        last.status, last.cases, last.detail = "timeout", [], CLOCK_DETAIL
    return series.outcome(last, kills, start), last, series.made


def _start_plant_table(plant_table) -> tuple[threading.Thread, dict]:
    """The plant table computed on a thread of its own, beside the learner's first runs: (that thread,
    the table it fills in, or its ``failure``: the grader's own, raised in the case's thread)."""
    table: dict = {}

    def compute():
        try:
            table.update(plant_table())
        except Exception as exc:  # noqa: BLE001 - the grader's own failure: raised in run_case's thread (_Series.plant)
            table["failure"] = exc

    computing = threading.Thread(target=compute, daemon=True, name="ckpt-planted-runs")
    computing.start()
    return computing, table


class _Series:
    """One case's runs (:func:`run_case`), one worker after another in its run folder, and what they
    came to so far."""

    def __init__(self, folder: str, grace: float):
        self.folder, self.grace = folder, grace
        self.made = 0  # kills made
        self.total = self.code = self.killed_seconds = 0.0  # seconds: of every run, in the learner's function, of runs killed
        self.restarted = False  # a run saved again a step at or below where it should have resumed
        self.crowded = threading.Event()  # a run's folder held more than MAX_ENTRIES entries: it was stopped
        self.terms: list = []  # what each SIGTERM met
        self.seen: set = set()  # every step seen committed, in any run
        self.planted: dict = {}  # what came of the plant (:meth:`plant`)

    def plant(self, computing: threading.Thread, table: dict, start: int, *, workdir: str, level: str,
              timeout: float) -> None:
        """Once the plant table is computed, another state planted in the latest committed step
        ``start`` (:func:`plant_state`), before the last run starts."""
        computing.join()
        if "failure" in table:
            raise table["failure"]
        problem, expected = plant_state(self.folder, start, table, workdir=workdir, level=level,
                                        timeout=min(PLANT_TIMEOUT, timeout))
        self.planted.update({"plant_problem": problem} if problem else {
            "planted_at": start, "plant_expected": expected,
            "plant_fresh_data": table.get("fresh_data", {}).get(start)})

    def run_once(self, source: str, function: str, run_args: tuple, kill: tuple | None, start: int, *,
                 timeout: float, workdir: str, level: str, memory_bytes: int,
                 eval_batch: int) -> tuple[sandbox.RunResult, bool, dict]:
        """One run in a fresh worker, watched from here to its end (killed at ``kill``'s point): (its
        RunResult, whether it was killed, what its SIGTERM met); its times added to the series'."""
        folder = self.folder
        since = time.time()
        # A run that gets no signal evaluates at once (8.3's loop; 5.3's evaluates nothing): its evaluations
        # change nothing but its time, and only a run a SIGTERM is planned for needs them longer than the window.
        env = {EVAL_WAIT_VARIABLE: "0"} if kill is None else None
        feed = None
        if kill is not None and kill[0] == "term_eval":  # its evaluations paced from here: the signal at a batch
            feed = _Feed(workdir, eval_batch, lambda start=start, k=kill[1]: _newest_folder(folder) >= start + k)
            env = {EVAL_FEED_VARIABLE: feed.path}
        worker = sandbox.Worker(source, function, [run_args], timeout=timeout, workdir=workdir, level=level,
                                memory_bytes=memory_bytes, keep_scratch=True, exit_when_done=True,
                                compile_cache=True, env=env)
        killed, again = threading.Event(), threading.Event()
        termed: dict = {}
        watcher = threading.Thread(target=self._watch, args=(worker, kill, start, since, feed, killed, again, termed),
                                   daemon=True, name="ckpt-preempt")
        watcher.start()
        try:
            last = worker.wait()
            watcher.join()
        finally:
            if feed is not None:
                feed.close()
        self.restarted = self.restarted or again.is_set()
        self.total += last.seconds
        self.code += last.code_seconds
        return last, killed.is_set(), termed

    def _watch(self, worker, kill: tuple | None, start: int, since: float, feed: _Feed | None,
               killed: threading.Event, again: threading.Event, termed: dict) -> None:
        """While a run's worker lives: stop it where its folder is crowded, note a step it saved again,
        and kill it (or SIGTERM it: :func:`_terminate`) once its kill's point is reached."""
        folder = self.folder
        while worker.thread.is_alive():
            if len(entries(folder)) > MAX_ENTRIES:
                self.crowded.set()
                worker.preempt()
                return
            if start and not again.is_set() and _saved_again(folder, start, since):
                again.set()
            if self.grace:
                self.seen.update(committed_steps(folder))
            if kill is not None and (feed.reached.is_set() if feed is not None else _point_reached(kill, folder, start)):
                if kill[0] in TERMS:
                    termed.update(_terminate(worker, kill, folder, self.grace, self.seen))
                killed.set()
                if not termed:
                    worker.preempt()
                return
            time.sleep(POLL)

    def count_kill(self, last: sandbox.RunResult, termed: dict) -> None:
        """Count a run killed at its point, and what its SIGTERM met, if it got one."""
        self.made += 1
        self.killed_seconds += last.seconds
        if termed:
            self.seen.update(committed_steps(self.folder))
            # Ended by the SIGTERM's default action: as its launcher reports it (128 + 15 from a pid
            # namespace's init, -15 elsewhere), the learner's process killed by the signal itself.
            self.terms.append({**termed, "committed": max(committed_steps(self.folder), default=0),
                               "returned": last.status == "ok" and bool(last.cases) and "value" in last.cases[0],
                               "by_term": last.returncode in (-15, 128 + 15)})

    def outcome(self, last: sandbox.RunResult, kills: tuple, start: int) -> dict | None:
        """The case's outcome as the last worker gave it, with what the series came to (:func:`run_case`);
        None where it gave none. The last RunResult's times made the whole series'."""
        last.seconds, last.code_seconds, last.killed_seconds = self.total, self.code, self.killed_seconds
        outcome = last.cases[0] if last.status == "ok" and not last.setup and last.cases else None
        if outcome is not None:
            self.seen.update(committed_steps(self.folder))
            outcome = {**outcome, "preempted": self.made, "planned": len(kills), "restarted": self.restarted,
                       "resumed_at": start, "committed_after": max(committed_steps(self.folder), default=0), **self.planted}
            if self.grace:
                outcome.update(terms=self.terms, seen=sorted(self.seen))
        return outcome


def _table_for(plan, run_folder, args):
    """The function giving a case's plant table (its hidden tests' own, cached: the expected value
    is computed from the same table), or None where the case plants nothing."""
    hidden = getattr(plan, "hidden", None)
    if not run_folder.plant or hidden is None or hidden.plant_table is None:
        return None
    return lambda: hidden.plant_table(int(args[1]), int(args[2]), run_folder.plant)


def run(plan, prepared, level: str) -> sandbox.RunResult:
    """Every case of ``plan`` (an engine plan of a preempted problem), each a series of workers;
    one RunResult for the judge, whose cases say how many kills each met (``preempted``)."""
    workdir = prepared.workdir
    result = sandbox.RunResult("ok")
    deadline = time.monotonic() + PROBLEM_CLOCK
    try:
        for case, args in zip(plan.cases, prepared.worker_args):
            run_folder = next(leaf for leaf in codec.leaves(case.args) if isinstance(leaf, kinds.RunFolder))
            outcome, last, made = run_case(plan.source, plan.problem.function, args, run_folder.kills,
                                           timeout=plan.timeout, workdir=workdir, level=level,
                                           plant_table=_table_for(plan, run_folder, args),
                                           left_at=run_folder.left_at, grace=run_folder.grace,
                                           eval_batch=signal_batch(run_folder.plant), deadline=deadline)
            result.seconds += last.seconds
            result.code_seconds += last.code_seconds
            result.killed_seconds += last.killed_seconds
            result.peak_bytes = max(result.peak_bytes, last.peak_bytes)
            if outcome is None:  # the last worker ended in a timeout, a crash or a load error: the judge says which
                last.cases = []
                return last
            result.cases.append(outcome)
        return result
    finally:
        sandbox.remove_folder(workdir)
