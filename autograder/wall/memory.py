"""Grading memory: a memory-measured problem's peak host memory, measured by the grader from
outside (``/proc/<pid>/status``: the kernel's peak resident set of the worker, above the set it had
just before the learner's code loaded; see :class:`autograder.sandbox.outside.Worker`).

Before that point the worker (trusted code, no learner code yet) makes the measure about the
learner's code alone, as Lesson 6 measures (:func:`ckptlab.serving.prepare_measurement`): it imports
the libraries that code imports, does one tiny Orbax save and restore (what the first restore of a
process allocates once), and has large blocks given back to the kernel when freed (else a freed
block stays resident and the next case starts above the last one's peak).
"""

from __future__ import annotations

import importlib

MiB = 2**20
# Problem 6.1's budget: twice the bytes of the saved float32 parameters, plus this (what any
# restore allocates beside its arrays: a frame, Orbax's metadata, a thread's buffers). The whole
# training state (parameters and two moments) is three times the parameters.
SERVING_SLACK = 16 * MiB


def serving_budget(param_bytes: int) -> int:
    """Bytes a restore of ``param_bytes`` of saved float32 parameters may peak at, for serving."""
    return 2 * param_bytes + SERVING_SLACK


def prepare(modules, scratch: str) -> None:
    """In the worker, before its baseline is taken."""
    for name in modules:
        importlib.import_module(name)
    from ckptlab.serving import prepare_measurement

    prepare_measurement(scratch)
