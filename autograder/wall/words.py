"""The kinds of argument (:mod:`autograder.wall.kinds`) in the learner's terms: what the learner's
function receives, the JAX object or the file or folder the grader makes, never the grader's own
names. That is how a public example shows its arguments (the notebook's check, practice sets,
``python -m autograder check``); ``repr`` stays each dataclass's own.

    >>> in_words((MeshArg((("x", 16),)), {"w": SpecArg((None, "x"))}))
    "(Mesh {'x': 16}, {'w': PartitionSpec(None, 'x')})"

A kind without words here raises: each new kind says what it is (tests/test_practice.py holds
every public example and every variant to it).
"""

from __future__ import annotations

import math

import numpy as np

from autograder.wall.kinds import (
    AbstractArg,
    CheckpointArg,
    HFFolderArg,
    LlamaCheckpointArg,
    MeshArg,
    OutputFolder,
    PreemptedRootArg,
    RunFolder,
    SafetensorsArg,
    SpecArg,
    TieredRootArg,
    TrainingCheckpointArg,
    TreeCheckpointArg,
)

MOST_SHOWN = 8  # leaves or tensors a file's words name; more are counted

# Each damage of a safetensors file (kinds.TRUNCATED and kinds.CORRUPT), as SafetensorsArg.content does it.
DAMAGE = {
    "short": "cut short before the end of its 8-byte header length",
    "header_cut": "cut short inside its header",
    "huge_length": "whose 8-byte header length claims far more bytes than the file holds",
    "data_cut": "cut short inside its data section",
    "bad_json": "whose header is not valid JSON",
    "not_object": "whose header is JSON but not an object",
    "bad_utf8": "whose header is not valid UTF-8",
    "bad_entry": "with a tensor entry whose data_offsets are not [begin, end]",
    "bad_dtype": "with a tensor entry whose dtype is not a string",
    "bad_shape": "with a tensor entry whose shape is not a list",
}


def in_words(value) -> str:
    """An argument as a learner reads it: each kind by its words, a NumPy array by its shape and
    dtype, containers element by element, anything else by its ``repr``."""
    for cls in type(value).__mro__:
        if cls in _WORDS:
            return _WORDS[cls](value)
    if isinstance(value, np.ndarray):
        return f"<array shape={value.shape} dtype={value.dtype}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {in_words(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(in_words(v) for v in value) + "]"
    if type(value) is tuple:
        return "(" + ", ".join(in_words(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if type(value).__module__ == "autograder.wall.kinds":
        raise TypeError(f"{type(value).__name__} has no words in autograder/wall/words.py")
    return repr(value)


def _entries(entries) -> str:
    return "(" + ", ".join(repr(e) for e in entries) + ")"


def _shape(shape) -> str:
    return "scalar" if tuple(shape) == () else repr(tuple(shape))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _saved_on(arg: CheckpointArg) -> str:
    shape = dict(arg.mesh)
    n = math.prod(shape.values())
    return "saved on 1 device" if n == 1 else f"saved on {n} devices, mesh {shape!r}"


def _leaves(arg: CheckpointArg) -> str:
    """Each leaf's name, shape, dtype and (on more than one device) spec."""
    placed = math.prod(dict(arg.mesh).values()) > 1
    shown = []
    for name, shape, dtype, spec in arg.arrays[:MOST_SHOWN]:
        where = "" if not placed else " replicated" if all(e is None for e in spec) else " as P" + _entries(spec)
        shown.append(f"{name} {_shape(shape)} {dtype}{where}")
    if len(arg.arrays) > MOST_SHOWN:
        shown.append(f"and {len(arg.arrays) - MOST_SHOWN} more")
    return ", ".join(shown)


def _checkpoint(arg: CheckpointArg) -> str:
    return f"<a checkpoint folder (Orbax StandardCheckpointer) {_saved_on(arg)}: {_leaves(arg)}>"


def _training_checkpoint(arg: TrainingCheckpointArg) -> str:
    return (f"<a training checkpoint folder (Orbax StandardCheckpointer) of step {arg.step}, {_saved_on(arg)}: "
            f"'params' ({_leaves(arg)}), 'opt_state' (AdamW's 'mu' and 'nu', each shaped, typed and sharded as "
            "the parameters) and 'step'>")


def _edit(edit) -> str:
    kind, path, *rest = edit
    return {
        "drop": lambda: f"{path} is left out",
        "add": lambda: f"{path} {_shape(rest[0])} {rest[1]} is added",
        "cast": lambda: f"{path} is cast to {rest[0]}",
        "reshape": lambda: f"{path} is reshaped to {_shape(rest[0])} (new values)",
        "scale": lambda: f"{path}'s values are scaled by {rest[0]!r}",
        "set": lambda: f"one element of {path} is changed",
    }[kind]()


def _tree_checkpoint(arg: TreeCheckpointArg) -> str:
    text = f"<a checkpoint folder of nested dicts (Orbax StandardCheckpointer) {_saved_on(arg)}: {_leaves(arg)}"
    if arg.edits:
        text += ", except that " + ", ".join(_edit(edit) for edit in arg.edits)
    return text + ">"


def _safetensors(arg: SafetensorsArg) -> str:
    n = len(arg.tensors)
    shown = [f"{name} {_shape(shape)} {dtype}" for name, shape, dtype in arg.tensors[:MOST_SHOWN]]
    if n > MOST_SHOWN:
        shown.append(f"and {n - MOST_SHOWN} more")
    text = f"<a safetensors file ({_plural(n, 'tensor')}: {', '.join(shown)}"
    if arg.metadata:
        text += f"; __metadata__ {dict(arg.metadata)!r}"
    text += ")"
    if arg.damage:
        text += " " + DAMAGE[arg.damage]
    return text + ">"


def _root_damage(kind: str, n: int) -> str:
    steps = ("every committed step" if n == 0 else "the newest committed step" if n == 1
             else f"the newest {n} committed steps")
    return {
        "state_removed": f"took the 'state' item out of {steps}",
        "state_unreadable": f"deleted the arrays' data files of the 'state' item of {steps}, its records kept",
        "data_removed": f"took the 'data' item out of {steps}",
    }[kind]


def _preempted_root(arg: PreemptedRootArg) -> str:
    """The root in words: which protocol, how often it saved, what it keeps, and where the saver
    was killed (:mod:`ckptlab.preempt`'s kill points)."""
    spec = dict(arg.spec)
    every, keep = spec.get("save_every", 1), spec.get("max_to_keep", 3)
    protocol = ("the object-store protocol: each step written in place, commit_success.txt last"
                if spec.get("commit_file", False)
                else "the POSIX protocol: each step written to <step>.orbax-checkpoint-tmp, then renamed")
    committed = spec.get("min_committed", 0)
    after = f", after {_plural(committed, 'step')} had committed" if committed else ""
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
    if arg.damage:
        text += "; then the grader " + "; ".join(_root_damage(kind, n) for kind, n in arg.damage)
    return text + ">"


def _tiered_root(arg: TieredRootArg) -> str:
    """The folder in words: the job's slices, how often each tier saved and kept, what the grader did to it."""
    spec = arg.tier_spec()
    per = "1 process" if spec.per_slice == 1 else f"{spec.per_slice} processes"
    text = (f"<a folder Orbax's emergency CheckpointManager wrote for a job of {spec.processes} processes in "
            f"{spec.slices} replica slices of {per}, over {spec.steps} steps: slice 0's persistent tier saved every "
            f"{spec.persistent_every} steps (the newest {spec.persistent_keep} kept), the other slices' local tiers "
            f"every {spec.local_every} (the newest {spec.local_keep} kept)")
    harms = []
    for harm in arg.damage:
        kind = harm[0]
        if kind == "lost":
            harms.append(f"process {harm[1]}'s local tier emptied (its machine replaced)")
        elif kind == "cut":
            harms.append(f"process {harm[1]}'s newest local save cut short before its rename")
        elif kind == "hole":
            which = "newest" if harm[2] == 0 else "one before the newest" if harm[2] == 1 else \
                f"{harm[2]} before the newest"
            harms.append(f"process {harm[1]}'s {which} local step gone")
        elif kind == "persistent_cut":
            harms.append("the newest persistent save cut short before its rename")
        elif kind == "persistent_hole":
            harms.append("a persistent step gone")
    if harms:
        text += "; then " + "; ".join(harms)
    return text + ">"


def _run_folder(arg: RunFolder) -> str:
    # (``plant`` stays unsaid: the grader's own, hidden)
    if arg.left_at:
        text = (f"<a path for the run's checkpoints where this same function has already run once, with total_steps "
                f"{arg.left_at}, to its end (its last step, {arg.left_at}, committed): this call is the run started "
                "again there")
    else:
        text = "<a path for the run's checkpoints (a fresh folder: it does not exist yet)"
    if arg.grace:
        kills = [f"during the evaluation after a save of a step at least {k} beyond where it started" if point == "term_eval"
                 else f"during a save of a step at least {k} beyond where it started" for point, k in arg.kills]
        text += (f"; the grader sends the run a SIGTERM {', then '.join(kills)}, a SIGKILL {arg.grace:g} s later if it "
                 "still runs, and starts it again each time")
    elif arg.kills:
        kills = [f"once {_plural(k, 'step')} beyond where it started had committed" if point == "commit"
                 else f"during a save of a step at least {k} beyond where it started" for point, k in arg.kills]
        text += "; the grader kills the run with SIGKILL " + ", then ".join(kills) + ", starting it again each time"
    return text + ">"


def _llama_config(config: tuple) -> str:
    c = dict(config)
    return (f"{c.get('num_hidden_layers', 2)} layers, hidden_size {c.get('hidden_size', 64)}, "
            f"{c.get('num_attention_heads', 4)} heads of {c.get('head_dim', 16)} ({c.get('num_key_value_heads', 2)} "
            f"key-value heads), intermediate_size {c.get('intermediate_size', 128)}, vocab {c.get('vocab_size', 256)}, "
            f"embeddings {'tied' if c.get('tie_word_embeddings', True) else 'not tied'}")


def _llama_checkpoint(arg) -> str:
    tree = {"linen": "a Linen model's variables (every leaf under 'params')",
            "nnx_state": "an NNX model's state saved as it is (each leaf's path ending in 'value')",
            "nnx": "an NNX model's pure dict"}[arg.tree]
    return (f"<a checkpoint folder (Orbax StandardCheckpointer) of ckptlab.llama's model, {_llama_config(arg.config)}, "
            f"as {tree}, {_saved_on(arg)}>")


def _hf_folder(arg) -> str:
    from ckptlab.hf import MISTAKES

    how = f"converted with {MISTAKES[arg.mistake]}" if arg.mistake else "converted correctly"
    return (f"<a Hugging Face folder (config.json, safetensors files of at most {arg.max_shard_bytes} bytes and their "
            f"index, or one model.safetensors) holding the same model in {arg.dtype}, {how}>")


_WORDS = {
    MeshArg: lambda arg: f"Mesh {arg.shape!r}",
    SpecArg: lambda arg: "PartitionSpec" + _entries(arg.entries),
    AbstractArg: lambda arg: f"ShapeDtypeStruct(shape={tuple(arg.shape)!r}, dtype={arg.dtype})",
    CheckpointArg: _checkpoint,
    TrainingCheckpointArg: _training_checkpoint,
    TreeCheckpointArg: _tree_checkpoint,
    SafetensorsArg: _safetensors,
    PreemptedRootArg: _preempted_root,
    TieredRootArg: _tiered_root,
    RunFolder: _run_folder,
    OutputFolder: lambda arg: "<a path to write the checkpoint to (it does not exist yet)>",
    LlamaCheckpointArg: _llama_checkpoint,
    HFFolderArg: _hf_folder,
}
