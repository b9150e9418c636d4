"""Planting a training state into a learner's run folder (problem 5.3): trusted code, run by the
grader in a sandboxed worker of its own, in the run's own scratch folder (the files are the
learner's: parsing them is never done in the grading process).

Before the last run of a preempted case, the grader has this worker restore the ``state`` item of
the latest committed step with Orbax (no target: as saved), send it back (the grader compares it,
leaf by leaf, with the training state after that many steps), and write in its place another valid
training state the learner's code could not compute (its values arrive in this worker's arguments,
never in a file learner code could read), in the same tree, dtypes and shardings, with Orbax's own
handler. Only a run that restores from disk then ends where the grader computes: a run from
scratch, or from a copy kept elsewhere, ends as if nothing had been planted.

Returns ``{"saved": {path: array}}`` once planted (paths as :func:`ckptlab.training.state_path`
gives them), or one of :data:`UNREADABLE` and :data:`NOT_A_STATE`.
"""

from __future__ import annotations

UNREADABLE = "unreadable"  # no Orbax checkpoint of a state item at the latest committed step
NOT_A_STATE = "not_a_state"  # one, but not holding the training state's leaves (paths, shapes, dtypes)

FUNCTION = "plant_state"
SOURCE = f'''
import os


def {FUNCTION}(step_folder, planted):
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from etils import epath

    from ckptlab.training import state_path

    item = os.path.join(step_folder, "state")
    for path in (step_folder, item):
        if not os.path.isdir(path) or os.path.islink(path):
            return {UNREADABLE!r}
    try:
        restored = ocp.StandardCheckpointer().restore(item)
        leaves, treedef = jax.tree_util.tree_flatten_with_path(restored)
    except Exception:  # noqa: BLE001 - any failure to restore is the learner's: said as one
        return {UNREADABLE!r}
    saved = {{state_path(path): leaf for path, leaf in leaves}}
    if len(saved) != len(leaves) or set(saved) != set(planted):
        return {NOT_A_STATE!r}
    new = []
    for path, leaf in leaves:
        value = np.asarray(planted[state_path(path)])
        if not hasattr(leaf, "sharding") or value.shape != tuple(leaf.shape) or value.dtype != leaf.dtype:
            return {NOT_A_STATE!r}
        new.append(jax.device_put(value, leaf.sharding))
    out = item + ".planting"
    os.mkdir(out)
    handler = ocp.StandardCheckpointHandler()
    handler.save(epath.Path(out), args=ocp.args.StandardSave(jax.tree_util.tree_unflatten(treedef, new)))
    handler.finalize(epath.Path(out))
    handler.close()
    for name in os.listdir(item):  # the item's own files Orbax wrote beside the arrays (a commit file)
        source = os.path.join(item, name)
        if name not in os.listdir(out) and os.path.isfile(source) and not os.path.islink(source):
            with open(source, "rb") as f, open(os.path.join(out, name), "wb") as g:
                g.write(f.read(1 << 20))
    os.rename(item, item + ".replaced")
    os.rename(out, item)
    try:
        import shutil

        shutil.rmtree(item + ".replaced")
    except Exception:  # noqa: BLE001 - what a learner left there: the grader removes the whole scratch later
        pass
    return {{"saved": {{k: np.asarray(v) for k, v in saved.items()}}}}
'''
