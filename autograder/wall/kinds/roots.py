"""Checkpoint roots real savers leave, which the grader makes by running them: a root a saver left
when it was killed (:class:`PreemptedRootArg`, problem 5.2) and the tiers Orbax's emergency manager
wrote for a job of processes (:class:`TieredRootArg`, problem 8.2). Each kind makes every one of its
arguments of a :func:`~autograder.wall.files.realize` call at once, in one helper process."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from autograder.wall.kinds.base import FileKind, RealizedPath, plural


def damage_root(root: str, damage: tuple) -> None:
    """Apply a :class:`PreemptedRootArg`'s ``damage`` to its root (see there)."""
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


def _kill_and_damage(args, roots) -> None:
    """:class:`PreemptedRootArg`'s roots: savers killed, then damaged."""
    from ckptlab.preempt import kill_savers

    kill_savers([arg.saver(root) for arg, root in zip(args, roots)])
    for arg, root in zip(args, roots):
        damage_root(root, arg.damage)


def _root_damage_in_words(kind: str, n: int) -> str:
    steps = ("every committed step" if n == 0 else "the newest committed step" if n == 1
             else f"the newest {n} committed steps")
    return {
        "state_removed": f"took the 'state' item out of {steps}",
        "state_unreadable": f"deleted the arrays' data files of the 'state' item of {steps}, its records kept",
        "data_removed": f"took the 'data' item out of {steps}",
    }[kind]


@dataclass(frozen=True)
class PreemptedRootArg(FileKind):
    """A checkpoint root a real saver left when it was killed (SIGKILL, from outside) at the point
    ``spec`` names (a :class:`ckptlab.preempt.SaverSpec`'s fields, ``root`` aside, as pairs).
    Every such argument of a :func:`~autograder.wall.files.realize` call is made by one helper process."""

    spec: tuple
    # What the grader does to the root once the saver is dead, in order: ``(kind, n)`` applies to
    # the newest ``n`` committed steps (0: all of them). ``"state_removed"``: the step's `state`
    # item taken away (the step still holds `data` and commit_success.txt); ``"state_unreadable"``:
    # its arrays' data files deleted, its records (`_METADATA`, the step's metadata) kept, so its
    # metadata reads and a restore fails; ``"data_removed"``: the `data` item taken away, `state`
    # left whole. A committed step that does not restore, and one that does although its other
    # item is gone.
    damage: tuple = ()

    make_together = staticmethod(_kill_and_damage)

    def saver(self, root: str):
        from ckptlab.preempt import SaverSpec

        return SaverSpec(root=root, **dict(self.spec))

    def realize(self, workdir: str, made=None) -> str:
        return made[0]  # (its root, the saver killed there)

    def words(self) -> str:
        """The root in words: which protocol, how often it saved, what it keeps, and where the saver
        was killed (:mod:`ckptlab.preempt`'s kill points)."""
        spec = dict(self.spec)
        every, keep = spec.get("save_every", 1), spec.get("max_to_keep", 3)
        protocol = ("the object-store protocol: each step written in place, commit_success.txt last"
                    if spec.get("commit_file", False)
                    else "the POSIX protocol: each step written to <step>.orbax-checkpoint-tmp, then renamed")
        committed = spec.get("min_committed", 0)
        after = f", after {plural(committed, 'step')} had committed" if committed else ""
        ending = {
            "tmp": f"killed with SIGKILL during a save, while that step was in its temporary folder{after}",
            "uncommitted": f"killed with SIGKILL during a save, its step folder not yet committed{after}",
            "written": f"killed with SIGKILL once a save had written both items but before it committed{after}",
            "first": "killed with SIGKILL during its first save",
            "delay": "killed with SIGKILL at a moment of the grader's choosing",
            "none": f"never killed: it saved all {spec.get('steps', 40)} steps",
        }[spec.get("kill", "none")]
        text = (f"<a CheckpointManager root: steps {', '.join(str(every * k) for k in (1, 2, 3))}, ... saved "
                f"({'every one kept' if keep is None else f'the newest {keep} kept'}), each holding 'state' and "
                f"'data', with {protocol}; the saver was {ending}")
        if self.damage:
            text += "; then the grader " + "; ".join(_root_damage_in_words(kind, n) for kind, n in self.damage)
        return text + ">"


class TieredPath(RealizedPath):
    """A realized :class:`TieredRootArg`: its path, carrying what Orbax's emergency
    manager restored from the folder (``restored``: ``(step, slice)`` or None), for the hidden tests'
    expected value, computed on this side. A worker gets the path alone (a plain string), and so
    does a copy elsewhere (:func:`~autograder.wall.files.mirror`)."""

    def __new__(cls, path: str, restored=None):
        self = super().__new__(cls, path)
        self.restored = None if restored is None else tuple(restored)
        return self

    def __reduce__(self):
        return TieredPath, (str(self), self.restored)


# (spec, damage) -> (a pristine copy of the folder, what Orbax restored from it): a tiers folder costs a job of
# processes, and the same one comes again (a check run twice, the public examples of every learner graded by one
# process, the same hidden draw); each use gets a copy of its own. Removed when the process ends.
_TIERS_WRITTEN: dict = {}


def _tiers_kept() -> str:
    import atexit
    import shutil
    import tempfile

    if "folder" not in _TIERS_WRITTEN:
        # Named as a worker's folder of this process (autograder.sandbox.folders): a process killed
        # outright (no atexit) leaves it to the next grader's sweep, not to /tmp for ever.
        folder = tempfile.mkdtemp(prefix=f"ckpt-worker-{os.getpid()}-tiers-written-")
        atexit.register(shutil.rmtree, folder, True)
        _TIERS_WRITTEN["folder"] = folder
    return _TIERS_WRITTEN["folder"]


def _write_tiers(args, roots) -> list:
    """:class:`TieredRootArg`'s folders, written and damaged (each new one by a real
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


def _tier_harm_in_words(harm: tuple) -> str | None:
    kind = harm[0]
    if kind == "lost":
        return f"process {harm[1]}'s local tier emptied (its machine replaced)"
    if kind == "cut":
        return f"process {harm[1]}'s newest local save cut short before its rename"
    if kind == "hole":
        which = "newest" if harm[2] == 0 else "one before the newest" if harm[2] == 1 else \
            f"{harm[2]} before the newest"
        return f"process {harm[1]}'s {which} local step gone"
    if kind == "persistent_cut":
        return "the newest persistent save cut short before its rename"
    if kind == "persistent_hole":
        return "a persistent step gone"
    return None


@dataclass(frozen=True)
class TieredRootArg(FileKind):
    """Problem 8.2's folder: Orbax's emergency manager's tiers, saved by a real job of processes
    (:func:`ckptlab.tiers.make_tiers`; ``spec``: a ``TierSpec``'s fields as pairs), then ``damage``d.
    Orbax's own restore of it travels with the realized path (:class:`TieredPath`), never inside it."""

    spec: tuple
    damage: tuple = ()

    make_together = staticmethod(_write_tiers)

    def tier_spec(self):
        from ckptlab.tiers import TierSpec

        return TierSpec(**dict(self.spec))

    def realize(self, workdir: str, made=None) -> str:
        return TieredPath(*made)  # (its root, a copy of the tiers written, and what Orbax restored from them)

    def words(self) -> str:
        """The folder in words: the job's slices, how often each tier saved and kept, what the grader did to it."""
        spec = self.tier_spec()
        per = "1 process" if spec.per_slice == 1 else f"{spec.per_slice} processes"
        text = (f"<a folder Orbax's emergency CheckpointManager wrote for a job of {spec.processes} processes in "
                f"{spec.slices} replica slices of {per}, over {spec.steps} steps: slice 0's persistent tier saved "
                f"every {spec.persistent_every} steps (the newest {spec.persistent_keep} kept), the other slices' "
                f"local tiers every {spec.local_every} (the newest {spec.local_keep} kept)")
        harms = [said for said in map(_tier_harm_in_words, self.damage) if said is not None]
        if harms:
            text += "; then " + "; ".join(harms)
        return text + ">"
