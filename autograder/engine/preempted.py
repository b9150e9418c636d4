"""Preempted runs (problem 5.3): the learner's training function, run in a worker and killed with
SIGKILL from this side at the points each case's :class:`~autograder.wall.files.RunFolder` names,
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

from autograder.sandbox import outside as sandbox
from autograder.wall import codec, files
from ckptlab.preempt import (
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
# process (19,000 names, each looked at every 2 ms, made a batch ten times slower).
MAX_ENTRIES = 64


# The run folder is the learner's: it is listed here, never read, and no link in it is followed
# (a link to a folder elsewhere would make the moment of a kill say what that folder holds). Its
# step folders are named as the learner's CheckpointManager names them (a step prefix, a fixed
# length): read with Orbax's own parsing (ckptlab.preempt.step_of).

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


def _point_reached(kill: tuple, folder: str, start: int) -> bool:
    point, steps = kill
    if point == "commit":
        return max(committed_steps(folder), default=0) >= start + steps
    return _saving(folder, start + steps)


def run_case(source: str, function: str, args: tuple, kills: tuple, *, timeout: float, workdir: str, level: str,
             memory_bytes: int = sandbox.DEFAULT_MEMORY) -> tuple[dict | None, sandbox.RunResult, int]:
    """Run one case to its end, preempting it at each of ``kills``. Returns (the case's outcome as
    the last worker gave it, with ``preempted`` (kills made), ``planned`` and ``restarted`` (a run
    saved again a step at or below where it should have resumed), or None when the last worker
    gave none; ``resumed_at``, the latest committed step when the last worker started, is where it
    should have resumed; ``committed_after``, the latest once its process ended with its answer); that worker's RunResult, its times the whole series'; the kills made)."""
    folder = next(leaf for leaf in codec.leaves(args) if isinstance(leaf, str) and os.path.basename(leaf).startswith("run-"))
    step_of("0")  # (Orbax, which reads step names, imported here: not on the watcher's thread, mid-run)
    made = 0
    total = 0.0
    code = 0.0
    killed_seconds = 0.0
    restarted = False
    last: sandbox.RunResult | None = None
    crowded = threading.Event()
    for _ in range(MAX_RUNS):
        start = max(committed_steps(folder), default=0)
        kill = kills[made] if made < len(kills) else None
        since = time.time()
        worker = sandbox.Worker(source, function, [args], timeout=timeout, workdir=workdir, level=level,
                                memory_bytes=memory_bytes, keep_scratch=True, exit_when_done=True)
        killed, again = threading.Event(), threading.Event()

        def watch(worker=worker, kill=kill, start=start, since=since, killed=killed, again=again):
            while worker.thread.is_alive():
                if len(entries(folder)) > MAX_ENTRIES:
                    crowded.set()
                    worker.preempt()
                    return
                if start and not again.is_set() and _saved_again(folder, start, since):
                    again.set()
                if kill is not None and _point_reached(kill, folder, start):
                    killed.set()
                    worker.preempt()
                    return
                time.sleep(POLL)

        watcher = threading.Thread(target=watch, daemon=True, name="ckpt-preempt")
        watcher.start()
        last = worker.wait()
        watcher.join()
        restarted = restarted or again.is_set()
        total += last.seconds
        code += last.code_seconds
        if crowded.is_set():
            last.status, last.cases = "crowded", []
            break
        if killed.is_set():
            made += 1
            killed_seconds += last.seconds
            continue
        break
    last.seconds, last.code_seconds, last.killed_seconds = total, code, killed_seconds
    outcome = last.cases[0] if last.status == "ok" and not last.setup and last.cases else None
    if outcome is not None:
        outcome = {**outcome, "preempted": made, "planned": len(kills), "restarted": restarted, "resumed_at": start,
                   "committed_after": max(committed_steps(folder), default=0)}
    return outcome, last, made


def run(plan, level: str, workdir: str) -> sandbox.RunResult:
    """Every case of ``plan`` (an engine plan of a preempted problem), each a series of workers;
    one RunResult for the judge, whose cases say how many kills each met (``preempted``)."""

    result = sandbox.RunResult("ok")
    try:
        for case, args in zip(plan.cases, plan.worker_args):
            run_folder = next(leaf for leaf in codec.leaves(case.args) if isinstance(leaf, files.RunFolder))
            outcome, last, made = run_case(plan.source, plan.problem.function, args, run_folder.kills,
                                           timeout=plan.timeout, workdir=workdir, level=level)
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
