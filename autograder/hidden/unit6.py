"""Hidden tests for Unit 6: from a training checkpoint to a serving model."""

from __future__ import annotations

import math

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.kinds import MeshArg, SpecArg, TrainingCheckpointArg
from autograder.wall.memory import CONVERSION_FACTOR, CONVERSION_SLACK, SERVING_FACTOR, SERVING_SLACK, serving_budget

# ---------------------------------------------------------------------------------------------
# 6.1 restore_for_serving: a fresh training checkpoint (24-42 MiB of float32 parameters, three
# times that with the moments) for every case; the grader measures the worker's peak memory.

_FSDP8 = (("x", 8),)


def _model(rng, d: int, vocab: int = 8192):
    """A transformer block's weights, FSDP over 8 devices as trained, and their serving specs."""
    trained = (("embed", (vocab, d), "float32", ("x",)), ("w_in", (d, 4 * d), "float32", (None, "x")),
               ("w_out", (4 * d, d), "float32", ("x",)), ("norm", (d,), "float32", ()))
    return trained, int(rng.integers(0, 2**31))


def _serving_cases(rng):
    tp = MeshArg((("data", 2), ("model", 8)))
    flat = MeshArg((("model", 16),))
    # Smaller first: the peak the grader reads is the process's since before its code loaded, so a
    # case is charged with the largest peak so far (never less than its own).
    d1, d2 = (int(d) for d in rng.choice((512, 640, 768), size=2, replace=False))
    d1, d2 = min(d1, d2), max(d1, d2)
    (a1, s1), (a2, s2) = _model(rng, d1), _model(rng, d2)
    return [
        Case("tensor_parallel", (TrainingCheckpointArg(a1, _FSDP8, s1), tp,
                                 {"embed": SpecArg((None, "model")), "w_in": SpecArg((None, "model")),
                                  "w_out": SpecArg(("model",)), "norm": SpecArg(())})),
        Case("one_axis", (TrainingCheckpointArg(a2, _FSDP8, s2), flat,
                          {"embed": SpecArg(("model",)), "w_in": SpecArg((None, "model")),
                           "w_out": SpecArg(("model", None)), "norm": SpecArg(())})),
    ]


def param_bytes(arg: TrainingCheckpointArg) -> int:
    """Bytes of the saved parameters (float32)."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype, _ in arg.arrays)


def _check_memory(args, out) -> str | None:
    # Its own, anonymous memory, sampled from outside (as 6.2's): the resident set's peak counts the
    # library pages it maps, which code can give back before it allocates (and so lower that peak).
    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > serving_budget(param_bytes(args[0])) else None


def _diagnose_serving(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    if set(a) != set(e):
        return "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if all(a[k].sha256 == e[k].sha256 for k in e):
        if any(len(((a[k].placement or {}).get("sharding") or {}).get("devices", [])) == 8 for k in e):
            return "no_target"
        return "wrong_sharding"
    return "values"


SERVING = Hidden(
    generate=_serving_cases,
    messages={
        "memory": "Right arrays, but your function's own peak host memory (anonymous, sampled from outside), was over the budget "
                  f"({SERVING_FACTOR} times the saved float32 parameters, plus {SERVING_SLACK >> 20} MiB). Restore the parameters alone "
                  "(partial_restore=True: the moments are twice their bytes again), cast on restore (a bfloat16 "
                  "target: .astype after a float32 restore holds both), and onto the target sharding directly.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it reads its "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "tree": "Return the parameters only: a dict keyed by the parameters' names (the keys of specs), not the "
                "whole training state.",
        "dtype": "Serve in bfloat16: restore into jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=...), which "
                 "casts on restore.",
        "no_target": "The values are right but the arrays are laid out as saved, on 8 devices: give every leaf of "
                     "the target a sharding, NamedSharding(mesh, specs[name]).",
        "wrong_sharding": "The values are right but the shardings are not what the specs ask for: use "
                          "NamedSharding(mesh, specs[name]) for each parameter.",
        "values": "Some values differ from the checkpoint's parameters cast to bfloat16: restore 'params' (not a "
                  "moment), with the saved shapes.",
        "tensor_parallel": "Wrong when serving tensor-parallel on a 2 x 8 mesh.",
        "one_axis": "Wrong when serving on one axis of 16 devices.",
    },
    diagnose=_diagnose_serving,
    check_outcome=_check_memory,
    requirements={
        "Return the parameters only, as a dict `{name: jax.Array}`": ("tensor_parallel", "one_axis"),
        "in bfloat16": ("tensor_parallel", "one_axis"),
        "each sharded as `NamedSharding(mesh, specs[name])`": ("tensor_parallel", "one_axis"),
        f"it must stay under {SERVING_FACTOR} times the bytes of the saved float32 parameters plus "
        f"{SERVING_SLACK >> 20} MiB": ("tensor_parallel", "one_axis"),
        "not for a float32 copy kept beside a bfloat16 one, nor for the whole training state": (
            "tensor_parallel", "one_axis"),
    },
    on_exception="Read the parameters' shapes from ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata"
                 ".tree['params']. A restore of a part of the tree needs partial_restore=True "
                 "(ocp.args.PyTreeRestore).",
)

HIDDEN = {
    "restore_for_serving": SERVING,
}


# ---------------------------------------------------------------------------------------------
# 6.2 convert_safetensors: a fresh safetensors file (64 MiB of float32, eight tensors) for every
# case; the grader's own worker restores what the function wrote; its peak memory is measured.

def _hub_model(rng, two_axes: bool, layers: int = 4):
    """A hub's tensor names and shapes (float32), our names for them, and serving specs: every array
    split over every device, none replicated (Orbax's save of a replicated array compiles a slice
    program per device: memory that is the library's, not the learner's)."""
    d = int(rng.choice((512, 1024)))
    f = 2**20 // d  # each tensor 4 MiB... times two below: 8 MiB
    tensors, rename, specs = [], {}, {}
    for i in range(layers):
        up, down = (("data", "model"), ("model", "data")) if two_axes else ((None, "model"), ("model",))
        for hub, ours, shape, spec in ((f"model.layers.{i}.mlp.up_proj.weight", f"layer{i}_w_in", (d, 2 * f), up),
                                       (f"model.layers.{i}.mlp.down_proj.weight", f"layer{i}_w_out", (2 * f, d), down)):
            tensors.append((hub, shape, "float32"))
            rename[hub] = ours
            specs[ours] = SpecArg(spec)
    return tuple(tensors), rename, specs


def _convert_cases(rng):
    from autograder.wall.kinds import OutputFolder, SafetensorsArg

    out = []
    for category, mesh in (("two_axes", MeshArg((("data", 2), ("model", 8)))), ("one_axis", MeshArg((("model", 16),)))):
        tensors, rename, specs = _hub_model(rng, category == "two_axes")
        out.append(Case(category, (SafetensorsArg(tensors, int(rng.integers(0, 2**31))), OutputFolder(), rename, mesh, specs)))
    return out


def _converted(path, out_dir, rename, mesh, specs):
    """What the checkpoint must restore to: the file's tensors, renamed, placed as the specs say
    (computed from the grader's own copy of the file)."""
    import jax
    from jax.sharding import NamedSharding
    from safetensors.numpy import load_file

    values = load_file(path)
    return {new: jax.device_put(values[old], NamedSharding(mesh, specs[new])) for old, new in rename.items()}


def _check_conversion_memory(args, out) -> str | None:
    from autograder.wall.memory import conversion_budget

    # What the conversion allocates: the pages of the file a reader maps (safetensors' safe_open, a
    # memory map) are the kernel's page cache, not the learner's allocation, and are not counted.
    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > conversion_budget(max(args[0].nbytes(name) for name, _, _ in args[0].tensors)) else None


def _diagnose_conversion(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    if set(a) != set(e):
        return "not_renamed" if set(a) == set(args[2]) else "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if all(a[k].sha256 == e[k].sha256 for k in e):
        return "wrong_sharding"
    return "values"


CONVERT = Hidden(
    generate=_convert_cases,
    messages={
        "memory": "The checkpoint is right, but your function's own memory (anonymous, sampled from outside: a mapped "
                  f"file's pages are not counted) went over the budget ({CONVERSION_FACTOR} times the file's largest tensor, plus {CONVERSION_SLACK >> 20} MiB). Read one tensor at a time (its byte range, from "
                  "the header: not the whole file), and save it as you go (ocp_v1.partial.save, then "
                  "finalize), so that neither the file nor the whole model is in memory at once.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it samples the worker's "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "not_renamed": "The checkpoint holds the file's own names: save each tensor under rename[name].",
        "tree": "The checkpoint must hold exactly one array per tensor of the file, named rename[name].",
        "dtype": "Keep each tensor's dtype (the file's): convert the format, not the numbers.",
        "wrong_sharding": "The values are right but the arrays were not saved sharded as the specs say: place each one "
                          "with NamedSharding(mesh, specs[new name]) before saving it.",
        "values": "Some saved values differ from the file's tensors: read each tensor's bytes at 8 + N + its "
                  "data_offsets, row-major, in its dtype.",
        "two_axes": "Wrong when saving for a 2 x 8 mesh, each array split over both axes.",
        "one_axis": "Wrong when saving for one axis of 16 devices.",
    },
    diagnose=_diagnose_conversion,
    check_outcome=_check_conversion_memory,
    requirements={
        "holding every tensor of the file": ("two_axes", "one_axis"),
        "tensor `name` saved as `rename[name]`": ("two_axes", "one_axis"),
        "with its dtype and values": ("two_axes", "one_axis"),
        "placed as `NamedSharding(mesh, specs[rename[name]])`": ("two_axes", "one_axis"),
        f"it must stay under {CONVERSION_FACTOR} times the bytes of the file's largest tensor, plus "
        f"{CONVERSION_SLACK >> 20} MiB (a tensor's host copy, its copy on the devices, and the tensor before it, "
        "which JAX may keep until Python's garbage collector runs)": ("two_axes", "one_axis"),
        "So neither the whole file nor the whole model may be in your memory at once": ("two_axes", "one_axis"),
    },
    expected=_converted,
    on_exception="out_dir does not exist yet: Orbax's save creates it. ocp_v1.partial.save(out_dir, "
                 "{name: array}) adds arrays to a checkpoint in the making; ocp_v1.partial.finalize(out_dir) "
                 "makes it a checkpoint.",
)

HIDDEN["convert_safetensors"] = CONVERT
