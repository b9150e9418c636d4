"""Unit 5's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

import inspect

import solutions.unit2 as _unit2
from tests.wrong_answers.unit1 import IMPORTS as UNIT1_IMPORTS

U5 = UNIT1_IMPORTS + """
import itertools
import math
import os
import orbax.checkpoint as ocp
"""

# A learner's 5.1 holds its own problem 2.6 beside it (copied from Unit 2's notebook): the reference's.
_PER_HOST = "\n\n".join(inspect.getsource(f) for f in (
    _unit2._entries, _unit2.shard_shape, _unit2.device_index_domains, _unit2._replicas, _unit2._replica_split_axis,
    _unit2.bytes_written_per_device, _unit2.bytes_written_per_host))

_STATE = _PER_HOST + """

SIZES = {"float32": 4, "bfloat16": 2, "float16": 2}


def training_state_bytes(params, specs, mesh_shape, devices_per_host):
    out = {h: 0 for h in range(math.prod(mesh_shape.values()) // devices_per_host)}
    for name, (shape, dtype) in params.items():
        for i in range(ARRAYS):
            size = MOMENT if i else SIZES[dtype]
            for h, n in bytes_written_per_host(shape, size, mesh_shape, specs[name], devices_per_host, RP).items():
                out[h] += n
    SCALARS
    return out
"""


def _state(arrays="3", moment="SIZES[dtype]", scalars="out[0] += 8", rp="True"):
    return (_STATE.replace("ARRAYS", arrays).replace("MOMENT", moment).replace("SCALARS", scalars)
            .replace("RP", rp))


STATE = [
    ("counts_only_the_parameters", _state(arrays="1"), "incorrect", "the parameters alone"),
    ("forgets_the_parameters", _state(arrays="2", moment="SIZES[dtype]"), "incorrect", "not the parameters"),
    ("forgets_the_step_counts", _state(scalars="pass"), "incorrect", "two 4-byte scalars"),
    ("float32_moments", _state(moment="4"), "incorrect", "bfloat16 parameter's moments are bfloat16"),
    ("scalars_on_every_host", _state(scalars="for h in out: out[h] += 8"), "incorrect", "written once"),
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
    ("asks_a_default_manager", """
def latest_restorable_step(ckpt_root):
    return ocp.CheckpointManager(ckpt_root).latest_step()
""", "incorrect", "never committed"),
]

WRONG = {
    "training_state_bytes": STATE,
    "latest_restorable_step": PREEMPTED,
}


IMPORTS = U5  # what these answers run with
