"""A ``CheckpointManager``'s root, read as Orbax writes it: which entries are step folders, for
which step, and which of those committed. Nothing is imported but Orbax's own name parser, and no
link is followed (the grader reads a learner's run folder with these, every few milliseconds).

    from ckptlab.steps import committed_steps, step_of
    step_of("step_12.orbax-checkpoint-tmp")    # -> 12 (a save under way: TMP_MARK in its name)
    committed_steps("runs/ckpt")               # -> [8, 10, 12]

Lesson 5 (:mod:`ckptlab.preempt`), the tool (:mod:`ckptlab.tool.inspection`) and the grader's problems
5.2 and 5.3 all read roots with these.
"""

from __future__ import annotations

import functools
import os

TMP_MARK = ".orbax-checkpoint-tmp"
COMMIT_FILE = "commit_success.txt"


@functools.lru_cache(maxsize=4096)
def step_of(name: str) -> int | None:
    """The step an entry of a checkpoint root is named for, as Orbax names a ``CheckpointManager``'s
    step folders, whatever its options (``12``, ``step_12`` with ``step_prefix="step"``, ``00000012``
    with ``step_format_fixed_length=8``) and their temporary folders (``step_12.orbax-checkpoint-tmp``):
    parsed by Orbax itself (``ocp.step.step_from_checkpoint_name``); None for any other name. A name
    is read once, and a long one not at all (the grader reads a learner's run folder with this, every
    few milliseconds: Orbax's pattern for temporary folders backtracks)."""
    if len(name) > 96 or not (name[-1:].isdigit() or TMP_MARK in name):
        return None
    import orbax.checkpoint as ocp

    try:
        step = ocp.step.step_from_checkpoint_name(name)
    except ValueError:
        return None
    return step if step >= 0 else None


def committed_folders(root: str) -> dict[int, str]:
    """Each committed step of ``root`` and its folder's name: a folder named for the step (as
    :func:`step_of` reads it, not a temporary one) that holds ``commit_success.txt``. Links are
    never followed (the grader reads a learner's run folder with this: see
    ``autograder/engine/preempted.py``)."""
    out = {}
    for name in sorted(entries(root)):
        step = None if TMP_MARK in name else step_of(name)
        if step is not None and committed(os.path.join(root, name)):
            out.setdefault(step, name)
    return out


def committed_steps(root: str) -> list[int]:
    """The committed steps of ``root`` (:func:`committed_folders`), ascending."""
    return sorted(committed_folders(root))


def step_folder(path: str) -> bool:
    """A folder, not a link to one."""
    return os.path.isdir(path) and not os.path.islink(path)


def committed(folder: str) -> bool:
    """Whether the step folder ``folder`` holds its commit file (a file, not a link)."""
    marker = os.path.join(folder, COMMIT_FILE)
    return step_folder(folder) and os.path.isfile(marker) and not os.path.islink(marker)


def entries(root: str) -> list[str]:
    """The entries of ``root``: none when it is a link (never followed) or missing."""
    if os.path.islink(root):
        return []
    try:
        return os.listdir(root)
    except OSError:
        return []
