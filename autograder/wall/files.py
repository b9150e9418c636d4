"""Arguments that are files (their kinds are in :mod:`autograder.wall.kinds`): checkpoints and
safetensors files the grader writes fresh, for each learner, into the worker's own temporary
directory (removed with it), and the folders a run or a function writes in; their paths go to the
worker in their place. Grader side only: it runs trusted code."""

from __future__ import annotations

import os
import uuid

from autograder.wall.codec import leaves, map_leaves
from autograder.wall.kinds import (
    FILE_KINDS,
    CheckpointArg,
    HFFolderArg,
    OutputFolder,
    PreemptedRootArg,
    RunFolder,
    SafetensorsArg,
    TieredRootArg,
)


def _roots_of(kind, value, workdir: str, make) -> dict:
    """id(arg) -> root, for every argument of ``kind`` in ``value``: their roots made at once by
    ``make(args, roots)``, in one helper process (a killed saver's, or the tiers' writer)."""
    args = [leaf for leaf in leaves(value) if isinstance(leaf, kind)]
    if not args:
        return {}
    roots = [os.path.join(workdir, f"ckpt-{uuid.uuid4().hex[:12]}") for _ in args]
    notes = make(args, roots) or [None] * len(roots)
    return {id(arg): (root, note) for arg, root, note in zip(args, roots, notes)}


def _kill_and_damage(args, roots) -> None:
    """:class:`~autograder.wall.kinds.PreemptedRootArg`'s roots: savers killed, then damaged."""
    from ckptlab.preempt import kill_savers

    kill_savers([arg.saver(root) for arg, root in zip(args, roots)])
    for arg, root in zip(args, roots):
        damage_root(root, arg.damage)


# (spec, damage) -> (a pristine copy of the folder, what Orbax restored from it): a tiers folder costs a job of
# processes, and the same one comes again (a check run twice, the public examples of every learner graded by one
# process, the same hidden draw); each use gets a copy of its own. Removed when the process ends.
_TIERS_WRITTEN: dict = {}


def _tiers_kept() -> str:
    import atexit
    import shutil
    import tempfile

    if "folder" not in _TIERS_WRITTEN:
        folder = tempfile.mkdtemp(prefix="ckpt-tiers-written-")
        atexit.register(shutil.rmtree, folder, True)
        _TIERS_WRITTEN["folder"] = folder
    return _TIERS_WRITTEN["folder"]


def _write_tiers(args, roots) -> list:
    """:class:`~autograder.wall.kinds.TieredRootArg`'s folders, written and damaged (each new one by a real
    job, :func:`ckptlab.tiers.make_tiers`, then kept; each root a copy); what Orbax restores from each
    (``(step, slice)`` or None)."""
    import shutil

    from ckptlab.tiers import make_tiers

    keys = [(arg.spec, arg.damage) for arg in args]
    new = {key: arg for key, arg in zip(keys, args) if key not in _TIERS_WRITTEN}
    if new:
        kept = [os.path.join(_tiers_kept(), uuid.uuid4().hex[:12]) for _ in new]
        restored = make_tiers([(folder, arg.tier_spec(), arg.damage) for folder, arg in zip(kept, new.values())])
        _TIERS_WRITTEN.update({key: (folder, r.answer) for key, folder, r in zip(new, kept, restored)})
    for key, root in zip(keys, roots):
        shutil.copytree(_TIERS_WRITTEN[key][0], root, symlinks=True)
    return [_TIERS_WRITTEN[key][1] for key in keys]


def damage_root(root: str, damage: tuple) -> None:
    """Apply a :class:`~autograder.wall.kinds.PreemptedRootArg`'s ``damage`` to its root (see there)."""
    import shutil

    from ckptlab.steps import committed_folders

    for kind, n in damage:
        folders = [committed_folders(root)[s] for s in sorted(committed_folders(root), reverse=True)]
        for name in folders[:n] if n else folders:
            step = os.path.join(root, name)
            if kind == "state_removed":
                shutil.rmtree(os.path.join(step, "state"))
            elif kind == "data_removed":
                shutil.rmtree(os.path.join(step, "data"))
            elif kind == "state_unreadable":
                state = os.path.join(step, "state")
                for entry in os.listdir(state):  # the arrays' data (OCDBT's files, zarr's chunks), not the records
                    if entry.startswith(("ocdbt.process_", "d")) or entry == "manifest.ocdbt":
                        target = os.path.join(state, entry)
                        shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)
            else:
                raise ValueError(f"unknown damage {kind!r}")


class RunPath(str):
    """A realized :class:`~autograder.wall.kinds.RunFolder`: its path, still carrying the seed of the state the grader
    plants (for the hidden tests' expected value, computed on this side). A worker gets the path
    alone (it travels as a plain string)."""

    def __new__(cls, path: str, plant: int = 0):
        self = super().__new__(cls, path)
        self.plant = int(plant)
        return self


class TieredPath(str):
    """A realized :class:`~autograder.wall.kinds.TieredRootArg`: its path, carrying what Orbax's emergency
    manager restored from the folder (``restored``: ``(step, slice)`` or None), for the hidden tests'
    expected value, computed on this side. A worker gets the path alone (a plain string)."""

    def __new__(cls, path: str, restored=None):
        self = super().__new__(cls, path)
        self.restored = None if restored is None else tuple(restored)
        return self

    def __reduce__(self):
        return TieredPath, (str(self), self.restored)


def realize(value, workdir: str):
    """Write every file argument inside ``value`` under ``workdir``; return paths instead."""
    preempted = _roots_of(PreemptedRootArg, value, workdir, _kill_and_damage)
    tiered = _roots_of(TieredRootArg, value, workdir, _write_tiers)

    def save(leaf):
        if isinstance(leaf, PreemptedRootArg):
            return preempted[id(leaf)][0]
        if isinstance(leaf, TieredRootArg):
            return TieredPath(*tiered[id(leaf)])
        if isinstance(leaf, RunFolder):  # not made: the run makes it, in the scratch folder it writes
            return RunPath(os.path.join(workdir, "scratch", f"run-{uuid.uuid4().hex[:12]}"), leaf.plant)
        if isinstance(leaf, OutputFolder):  # not made: the function writes it (its parent exists)
            os.makedirs(os.path.join(workdir, "scratch"), exist_ok=True)
            return os.path.join(workdir, "scratch", f"out-{uuid.uuid4().hex[:12]}")
        if isinstance(leaf, CheckpointArg):
            return leaf.save(os.path.join(workdir, f"ckpt-{uuid.uuid4().hex[:12]}"))
        if isinstance(leaf, SafetensorsArg):
            return leaf.save(workdir)
        if isinstance(leaf, HFFolderArg):
            return leaf.save(os.path.join(workdir, f"ckpt-hf-{uuid.uuid4().hex[:12]}"))
        return leaf

    return map_leaves(value, save)


def mirror(value, source: str, target: str):
    """Copy the files :func:`realize` wrote under ``source`` into ``target``; return ``value``
    with its paths moved there too."""
    import shutil

    shutil.copytree(source, target, dirs_exist_ok=True)

    def move(leaf):
        if isinstance(leaf, str) and leaf.startswith(source + os.sep):
            moved = target + leaf[len(source):]
            return RunPath(moved, leaf.plant) if isinstance(leaf, RunPath) else moved  # (a TieredPath: its path alone)
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
