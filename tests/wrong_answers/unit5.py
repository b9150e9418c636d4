"""Unit 5's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

from tests.wrong_answers.unit1 import IMPORTS as UNIT1_IMPORTS

U5 = UNIT1_IMPORTS + """
import itertools
import math
import os
import orbax.checkpoint as ocp
"""

_STATE = """
from ckptlab.explore import placement


def training_state_bytes(params, specs, mesh_shape, devices_per_host, mu_dtype=None, accumulate=1):
    out = {h: 0 for h in range(math.prod(mesh_shape.values()) // devices_per_host)}
    for name, (shape, dtype) in params.items():
        arrays = [dtype, MU, NU]
        if accumulate > 1:
            arrays.append(ACC)
        for dt in arrays[:ARRAYS]:
            for h, n in placement(shape, dt, mesh_shape, specs[name], devices_per_host)["bytes_per_host"].items():
                out[h] += n
    SCALARS
    return out
"""


def _state(arrays="len(arrays)", mu="mu_dtype or dtype", nu="dtype", acc="'float32'",
           scalars="out[0] += 8 if accumulate == 1 else 16"):
    return (_STATE.replace("ARRAYS", arrays).replace("MU", mu).replace("NU", nu).replace("ACC", acc)
            .replace("SCALARS", scalars))


STATE = [
    ("counts_only_the_parameters", _state(arrays="1"), "incorrect", "the parameters alone"),
    ("ignores_mu_dtype", _state(mu="dtype"), "incorrect", "with mu_dtype given, mu is not"),
    ("nu_in_mu_dtype_too", _state(nu="mu_dtype or dtype"), "incorrect", "the first moment only"),
    ("forgets_the_accumulator", _state(arrays="3"), "incorrect", "MultiSteps keeps the gradients it accumulates"),
    ("accumulates_in_the_parameters_dtype", _state(acc="dtype"), "incorrect", "a bfloat16 parameter's accumulator is float32"),
    ("forgets_multisteps_counters", _state(scalars="out[0] += 8"), "incorrect", "MultiSteps' own"),
    ("scalars_on_every_host", _state(scalars="for h in out: out[h] += 8 if accumulate == 1 else 16"), "incorrect",
     "written once"),
]

_LATEST = """
def latest_restorable_step(ckpt_root):
    steps = []
    for name in os.listdir(ckpt_root):
        if KEEP:
            steps.append(STEP)
    steps.sort(reverse=True)
    return PICK
"""


def _latest(keep="name.isdigit()", step="int(name)", pick="steps[0] if steps else None"):
    return _LATEST.replace("KEEP", keep).replace("STEP", step).replace("PICK", pick)


_COMMITTED = "name.isdigit() and os.path.exists(os.path.join(ckpt_root, name, 'commit_success.txt'))"

PREEMPTED = [
    ("newest_step_folder", _latest(), "incorrect", "never committed"),
    ("reads_temporary_folders", _latest(keep="name.split('.')[0].isdigit()", step="int(name.split('.')[0])"),
     "incorrect", "never committed"),
    ("trusts_orbax_default_check", _latest(
        keep="name.isdigit() and ocp.step.is_checkpoint_finalized(os.path.join(ckpt_root, name))"),
     "incorrect", "never committed"),
    ("one_step_back", _latest(keep=_COMMITTED, pick="steps[1] if len(steps) > 1 else (steps[0] if steps else None)"),
     "incorrect", "older step"),
    ("zero_when_nothing", _latest(keep=_COMMITTED, pick="steps[0] if steps else 0"), "incorrect", "return None"),
    ("step_as_text", _latest(keep=_COMMITTED, step="name"), "incorrect", "must be an int"),
    # Committed is taken for restorable: commit_success.txt checked, the state never restored.
    ("commit_marker_only", _latest(keep=_COMMITTED), "incorrect", "does not restore"),
    # The state's records read (its metadata), its arrays never: a step whose data files are gone passes.
    ("state_metadata_only", _latest(keep=_COMMITTED + " and _meta_reads(os.path.join(ckpt_root, name, 'state'))")
     .replace("def latest_restorable_step", """def _meta_reads(path):
    try:
        ocp.StandardCheckpointer().metadata(path)
    except Exception:
        return False
    return True


def latest_restorable_step"""), "incorrect", "does not restore"),
    # The whole step restored, both items: a step whose `data` item is gone is skipped, though its
    # state restores.
    ("restores_every_item", _latest(keep=_COMMITTED + " and _restores(os.path.join(ckpt_root, name))")
     .replace("def latest_restorable_step", """def _restores(folder):
    try:
        ocp.StandardCheckpointer().restore(os.path.join(folder, "state"))
        ocp.Checkpointer(ocp.JsonCheckpointHandler()).restore(os.path.join(folder, "data"))
    except Exception:
        return False
    return True


def latest_restorable_step"""), "incorrect", "restore the `state` item alone"),
    ("asks_a_default_manager", """
def latest_restorable_step(ckpt_root):
    return ocp.CheckpointManager(ckpt_root).latest_step()
""", "incorrect", "never committed"),
]

_TRAIN = """
import shutil
import jax
from ckptlab import training


def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    PREPARE
    mngr = ocp.CheckpointManager(ckpt_dir)
    latest = LATEST
    if latest is not None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, training.train_state(model, optimizer))
        restored = mngr.restore(latest, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                data=ocp.args.JsonRestore()))
        LOAD
        POSITION
    for s in range(FIRST, total_steps):
        x, y = next(batches)
        step(model, optimizer, x, y)
        SAVE
    WAIT
    return training.params_of(model), latest or 0
"""


def _train(prepare="pass", latest="mngr.latest_step()", load="training.load_train_state(model, optimizer, restored['state'])",
           position="batches.set_state(restored['data'])", first="latest or 0",
           save="mngr.save(s + 1, args=ocp.args.Composite(state=ocp.args.StandardSave(training.train_state(model, optimizer)), "
                "data=ocp.args.JsonSave(batches.get_state())))", wait="mngr.wait_until_finished()"):
    return (_TRAIN.replace("PREPARE", prepare).replace("LATEST", latest).replace("LOAD", load)
            .replace("POSITION", position).replace("FIRST", first).replace("SAVE", save).replace("WAIT", wait))


RUN = [
    ("parameters_only", _train(load="nnx_state = restored['state']['model']; "
                                    "__import__('flax').nnx.update(model, nnx_state)"), "incorrect", "optimizer's moments"),
    ("forgets_the_batches_position", _train(position="pass"), "incorrect", "continue the data where it stopped"),
    # Lesson 5's resume as it once was, copied: the step as the data item ({'next_step': s + 1}), read
    # back as where to start, and the batches drawn from a fresh pipeline (no set_state). It passed
    # the notebook's check while its only example was a fresh folder.
    ("copies_the_lessons_old_resume", """
import jax
from ckptlab import training


def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    mngr = ocp.CheckpointManager(ckpt_dir)
    start = 0
    latest = mngr.latest_step()
    if latest is not None:
        restored = mngr.restore(latest, args=training.restore_args(model, optimizer))
        training.load_train_state(model, optimizer, restored["state"])
        start = restored["data"]["next_step"]
    for s in range(start, total_steps):
        x, y = next(batches)
        step(model, optimizer, x, y)
        mngr.save(s + 1, args=ocp.args.Composite(state=ocp.args.StandardSave(training.train_state(model, optimizer)),
                                                 data=ocp.args.JsonSave({"next_step": s + 1})))
    mngr.wait_until_finished()
    mngr.close()
    return training.params_of(model), start
""", "incorrect", "continue the data where it stopped"),
    ("resumes_one_step_too_far", _train(first="(latest + 1) if latest is not None else 0"), "incorrect",
     "train only the steps that remain"),
    ("never_saves", _train(save="pass"), "incorrect", "save a checkpoint after every step"),
    ("starts_over", _train(prepare="shutil.rmtree(ckpt_dir, ignore_errors=True)"), "incorrect", "started over"),
    ("never_restores", _train(latest="None"), "incorrect", "did not go on from what its latest committed step holds"),
    # Issue 35's forgery of real saves whose restore is never used (the state recomputed: training
    # is deterministic); the one with no checkpoint at all, folders shaped like saves, is
    # tests/engine/test_preempted.py's.
    ("recomputes_instead_of_restoring", _train(load="pass", position="pass", first="0", save=(
        "if s + 1 > (latest or 0): mngr.save(s + 1, args=ocp.args.Composite(state=ocp.args.StandardSave("
        "training.train_state(model, optimizer)), data=ocp.args.JsonSave(batches.get_state())))")),
     "incorrect", "did not go on from what its latest committed step holds"),
    ("returns_before_the_commit", _train(wait="pass"), "incorrect", "the last save was lost"),
]

WRONG = {
    "training_state_bytes": STATE,
    "latest_restorable_step": PREEMPTED,
    "train_with_preemption": RUN,
}


IMPORTS = U5  # what these answers run with
