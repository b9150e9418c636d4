"""How a problem's cases run, by its declared mode (:attr:`autograder.declarations.Problem.mode`): one
row each, so that a new way of running is a module and a row here. A runner takes a plan whose files
are written, runs its cases in workers, and returns one RunResult for the judge; it waits for the
expected outcomes too (computed meanwhile on the trusted side), and fails as that side failed."""

from __future__ import annotations

from autograder import sandbox
from autograder.engine import preempted, readback
from autograder.engine.plan import Plan, Prepared


def run_worker(plan: Plan, prepared: Prepared, level: str) -> sandbox.RunResult:
    """Every case in one worker (the worker owns its folder, and removes it when done)."""
    worker = sandbox.Worker(plan.source, plan.problem.function, prepared.worker_args, timeout=plan.timeout,
                            workdir=prepared.workdir, count_reads=plan.problem.count_reads, level=level,
                            measure_memory=plan.problem.measure_memory)
    try:
        plan.expected_outcomes()
    except BaseException:
        worker.kill()
        raise
    return worker.wait()


RUNNERS = {
    "worker": run_worker,
    "readback": readback.run,
    "readback_hf": readback.run_hf,
    "preempted": preempted.run,
}


def run(plan: Plan, level: str) -> sandbox.RunResult:
    """The plan's cases, run as its problem's mode says, once its files are written."""
    return RUNNERS[plan.problem.mode](plan, plan.take(), level)
