"""Problems whose function writes a checkpoint (6.2): the learner's worker writes it into its own
scratch folder (kept, not a tmpfs of its own, so it outlives the worker); then a second worker, in
the same sandbox, running the grader's own code (:mod:`autograder.wall.reader`), restores what
was written. Each case's value becomes what that restore gave (digests of the arrays in the layout
they were saved in, or :data:`~autograder.wall.reader.UNREADABLE`); its peak memory stays the
learner's worker's. The grading process never parses a file learner code wrote."""

from __future__ import annotations

import os

from autograder import sandbox
from autograder.wall import codec, reader

READBACK_TIMEOUT = 60.0


def run_hf(plan, prepared, level: str) -> sandbox.RunResult:
    """As :func:`run`, the folders read back as Hugging Face checkpoints (problem 9.1)."""
    return run(plan, prepared, level, reader.HF_SOURCE, reader.HF_FUNCTION, reader.UNREADABLE_HF)


def _output_folder(args) -> str:
    return next(leaf for leaf in codec.leaves(args) if isinstance(leaf, str) and os.path.basename(leaf).startswith("out-"))


def run(plan, prepared, level: str, source: str = reader.SOURCE, function: str = reader.FUNCTION,
        unreadable: str = reader.UNREADABLE) -> sandbox.RunResult:
    """Every case of ``plan`` in one learner's worker, then every folder it wrote read back (by the
    Orbax reader, or ``source``'s ``function``: 9.1's Hugging Face reader)."""
    workdir = prepared.workdir
    try:
        worker = sandbox.Worker(plan.source, plan.problem.function, prepared.worker_args, timeout=plan.timeout,
                                workdir=workdir, level=level, measure_memory=plan.problem.measure_memory,
                                keep_scratch=True)
        try:
            plan.expected_outcomes()
        except BaseException:
            worker.kill()
            raise
        result = worker.wait()
        # What the function returned is not looked at: a value that could not be sent back counts as an answer.
        answered = [i for i, case in enumerate(result.cases)
                    if "value" in case or case.get("error", {}).get("kind") == "bad_return"]
        if result.status != "ok" or result.setup or not answered:
            return result
        folders = [(_output_folder(prepared.worker_args[i]),) for i in answered]
        back = sandbox.Worker(source, function, folders, timeout=READBACK_TIMEOUT, workdir=workdir,
                              level=level, digest_arrays=True, keep_scratch=True).wait()
        result.seconds += back.seconds  # the grader's own work: overhead, never the learner's time
        if back.status == "failed_start":  # the grader's reader never ran: its failure, not the learner's
            result.status, result.stderr_tail, result.returncode = back.status, back.stderr_tail, back.returncode
            return result
        for n, i in enumerate(answered):
            got = back.cases[n] if back.status == "ok" and not back.setup and n < len(back.cases) else {}
            case = {k: v for k, v in result.cases[i].items() if k != "error"}
            result.cases[i] = {**case, "value": got.get("value", unreadable)}
        return result
    finally:
        sandbox.remove_folder(workdir)
