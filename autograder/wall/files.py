"""Arguments that are files (their kinds are in :mod:`autograder.wall.kinds`): checkpoints and
safetensors files the grader writes fresh, for each learner, into the worker's own temporary
directory (removed with it), and the folders a run or a function writes in; their paths go to the
worker in their place. Grader side only: it runs trusted code.

Each kind says how its files are made, in its own class (``realize``, and ``make_together`` for the
kinds whose arguments one helper process makes at once: a killed saver's roots, the tiers' job);
this module walks an argument tree and calls them.
"""

from __future__ import annotations

import os
import uuid

from autograder.wall.codec import leaves, map_leaves
from autograder.wall.kinds import FILE_KINDS, FileKind, RealizedPath, RunPath, TieredPath

__all__ = ["RunPath", "TieredPath", "has_files", "mirror", "realize", "remove"]  # (the realized paths: their kinds')


def _roots_of(kind, value, workdir: str, make) -> dict:
    """id(arg) -> (root, note), for every argument of ``kind`` in ``value``: their roots made at once by
    ``make(args, roots)``, in one helper process (a killed saver's, or the tiers' writer)."""
    args = [leaf for leaf in leaves(value) if isinstance(leaf, kind)]
    if not args:
        return {}
    roots = [os.path.join(workdir, f"ckpt-{uuid.uuid4().hex[:12]}") for _ in args]
    notes = make(args, roots) or [None] * len(roots)
    return {id(arg): (root, note) for arg, root, note in zip(args, roots, notes)}


def realize(value, workdir: str):
    """Write every file argument inside ``value`` under ``workdir``; return paths instead (each its
    kind's ``realize``: the arguments a kind makes together made first, kind by kind)."""
    made: dict = {}
    for kind in FILE_KINDS:
        if kind.make_together is not None:
            made.update(_roots_of(kind, value, workdir, kind.make_together))

    def save(leaf):
        if isinstance(leaf, FileKind):
            return leaf.realize(workdir, made.get(id(leaf)))
        return leaf

    return map_leaves(value, save)


def mirror(value, source: str, target: str):
    """Copy the files :func:`realize` wrote under ``source`` into ``target``; return ``value``
    with its paths moved there too (a realized path carrying facts: as its kind moves it)."""
    import shutil

    shutil.copytree(source, target, dirs_exist_ok=True)

    def move(leaf):
        if isinstance(leaf, str) and leaf.startswith(source + os.sep):
            moved = target + leaf[len(source):]
            return leaf.moved(moved) if isinstance(leaf, RealizedPath) else moved
        return leaf

    return map_leaves(value, move)


def remove(value) -> None:
    """Delete the files :func:`realize` wrote for ``value`` (its paths): a checkpoint folder or a file."""
    import shutil

    for leaf in leaves(value):
        if isinstance(leaf, str) and os.path.isabs(leaf) and os.path.basename(leaf).startswith(("ckpt-", "model-", "run-")):
            if os.path.isdir(leaf):
                shutil.rmtree(leaf, ignore_errors=True)
            elif os.path.exists(leaf):
                os.unlink(leaf)


def has_files(value, kinds=FILE_KINDS) -> bool:
    """Whether ``value`` holds a file argument (of ``kinds``)."""
    return any(isinstance(leaf, kinds) for leaf in leaves(value))
