"""The read-back worker's code: a checkpoint a learner's function wrote (problems 6.2 and 7.4) is read
back by this trusted code, run by the grader in a sandboxed worker of its own (the files are the
learner's: parsing them is never done in the grading process; :mod:`autograder.engine.readback` runs
it). It restores the checkpoint with no target, so the arrays come back in the layout they were
saved in, and returns them (as digests: see codec.ArrayDigest), or :data:`UNREADABLE` when there is
no checkpoint Orbax can restore at that path."""

from __future__ import annotations

UNREADABLE = "no Orbax checkpoint could be restored from the folder"

FUNCTION = "read_back"
SOURCE = f'''
import os


def {FUNCTION}(path):
    from orbax.checkpoint import v1 as ocp

    if not os.path.isdir(path) or os.path.islink(path):
        return {UNREADABLE!r}
    try:
        return dict(ocp.load(path))
    except Exception:  # noqa: BLE001 - any failure to restore is the learner's: said as one
        return {UNREADABLE!r}
'''
