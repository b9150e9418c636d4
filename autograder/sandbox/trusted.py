"""The course's own code run in a worker of the grader's, as a learner's is run: forked from the zygote
with the same libraries loaded and the same XLA flags, so it computes bit for bit what a learner's
worker computes (this process's JAX compiles with other flags, and differs in the last bits). Trusted
code only: such a worker runs nothing else. Problem 5.3's expected parameters come from here."""

from __future__ import annotations

from autograder import sandbox

TRUSTED_TIMEOUT = 120.0


def trusted_worker(source: str, function: str, args: tuple):
    """The course's own code (``function`` of ``source``), run in a worker started as a learner's is;
    its return value."""
    level = sandbox.BASIC if sandbox.strict_missing() else sandbox.STRICT
    run = sandbox.Worker(source, function, [args], timeout=TRUSTED_TIMEOUT, level=level).wait()
    if run.status != "ok" or run.setup or not run.cases or "value" not in run.cases[0]:
        raise RuntimeError(f"the course's own {function} failed in a worker ({run.status}, {run.setup or ''}): "
                           f"{run.stderr_tail[-1000:]}")
    return run.cases[0]["value"]


def uninterrupted_params(total_steps: int, seed: int) -> dict:
    """:func:`ckptlab.training.uninterrupted_params`, computed as a worker computes it
    (:func:`trusted_worker`)."""
    return trusted_worker("from ckptlab.training import uninterrupted_params\n", "uninterrupted_params",
                          (int(total_steps), int(seed)))


def planted_runs(total_steps: int, seed: int, plant_seed: int) -> dict:
    """:func:`ckptlab.training.planted_runs`, computed as a worker computes it (:func:`trusted_worker`)."""
    return trusted_worker("from ckptlab.training import planted_runs\n", "planted_runs",
                          (int(total_steps), int(seed), int(plant_seed)))
