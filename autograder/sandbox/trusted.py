"""The course's own code run in a worker of the grader's, as a learner's is run: forked from the zygote
with the same libraries loaded and the same XLA flags, so it computes bit for bit what a learner's
worker computes (this process's JAX compiles with other flags, and differs in the last bits). Trusted
code only: such a worker runs nothing else. Problem 5.3's expected parameters come from here."""

from __future__ import annotations

import atexit
import threading

from autograder import sandbox

TRUSTED_TIMEOUT = 120.0
_FOLDER: list[str] = []
_FOLDER_LOCK = threading.Lock()


def _folder() -> str:
    """One work folder for this grader's trusted workers, kept for its life, where JAX keeps the
    programs they compiled (``Worker(compile_cache=True)``): the course's training step compiles
    once per grader, not once per case (most of a trusted run's time). Learner code never runs in
    a trusted worker, nor reaches this folder."""
    with _FOLDER_LOCK:
        if not _FOLDER:
            _FOLDER.append(sandbox.new_workdir())
            atexit.register(sandbox.remove_folder, _FOLDER[0])
        return _FOLDER[0]


def trusted_worker(source: str, function: str, args: tuple):
    """The course's own code (``function`` of ``source``), run in a worker started as a learner's is;
    its return value."""
    level = sandbox.BASIC if sandbox.strict_missing() else sandbox.STRICT
    run = sandbox.Worker(source, function, [args], timeout=TRUSTED_TIMEOUT, level=level, workdir=_folder(),
                         keep_scratch=True, compile_cache=True).wait()
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
