"""Hidden tests for Unit 7: when the machine or the code changed."""

from __future__ import annotations

import re

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.kinds import AbstractArg, CheckpointArg, MeshArg, TreeCheckpointArg
from autograder.wall.memory import PLACED_FACTOR, PLACED_SLACK, UNSTACK_FACTOR, UNSTACK_SLACK

# ---------------------------------------------------------------------------------------------
# 7.1 restore_on_new_mesh: a checkpoint saved on another mesh (4, 8 or 16 devices, the same axis
# names, other sizes) restored onto this machine's 16; the grader measures the worker's memory.


def _placed_cases(rng):
    # Smaller first: a case is charged with the largest peak of its worker so far.
    d1, d2, d3 = sorted(int(d) for d in rng.choice((256, 320, 384, 448, 512), size=3, replace=False))
    seeds = [int(s) for s in rng.integers(0, 2**31, size=3)]
    vocab = 4096
    return [
        Case("more_devices", (CheckpointArg((("embed", (vocab, d1), "float32", ("x",)),
                                             ("w_in", (d1, 4 * d1), "bfloat16", (None, "x")),
                                             ("norm", (d1,), "float32", ())), (("x", 4),), seeds[0]),
                              MeshArg((("x", 16),)))),
        Case("two_axes", (CheckpointArg((("embed", (vocab, d2), "float32", (("data", "model"),)),
                                         ("w_in", (d2, 4 * d2), "bfloat16", (None, "model")),
                                         ("norm", (d2,), "float32", ())), (("data", 2), ("model", 4)), seeds[1]),
                          MeshArg((("data", 4), ("model", 4))))),
        Case("reshaped_mesh", (CheckpointArg((("embed", (vocab, d3), "float32", ("data", "model")),
                                              ("w_out", (4 * d3, d3), "bfloat16", ("model", "data")),
                                              ("norm", (d3,), "float32", ())), (("data", 8), ("model", 2)), seeds[2]),
                               MeshArg((("data", 2), ("model", 8))))),
    ]


def placed_bytes(args) -> int:
    """Bytes the 16 devices hold once every array is placed on the new mesh with its saved spec."""
    from autograder.wall.kinds import named_dtype
    from autograder.wall.memory import held_bytes

    ckpt, mesh = args
    return sum(held_bytes(shape, named_dtype(dtype).itemsize, mesh.shape, spec) for _, shape, dtype, spec in ckpt.arrays)


def _check_placed_memory(args, out) -> str | None:
    from autograder.wall.memory import placed_budget

    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > placed_budget(placed_bytes(args)) else None


def _diagnose_placed(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    if set(a) != set(e):
        return "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if any(a[k].sha256 != e[k].sha256 for k in e):
        return "values"
    saved_mesh = [[n, s] for n, s in args[0].mesh]
    meshes = [((a[k].placement or {}).get("sharding") or {}).get("mesh") for k in e]
    if any(m == saved_mesh for m in meshes):
        return "saved_layout"
    if all(((a[k].placement or {}).get("sharding") or {}).get("spec") == [] for k in e):
        return "replicated"
    return "wrong_sharding"


PLACED = Hidden(
    generate=_placed_cases,
    messages={
        "memory": "Right arrays, but your function's own peak host memory (anonymous, sampled from outside) was over "
                  f"the budget: {PLACED_FACTOR} times the bytes the devices hold once every array is placed as asked, plus "
                  f"{PLACED_SLACK >> 20} MiB. "
                  "Restore straight onto the target shardings: a replicated restore puts a whole copy on every device "
                  "(on CPU devices, all of them host memory) before any re-sharding.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it reads its "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "tree": "Return every saved array, a dict keyed by the checkpoint's own names.",
        "dtype": "Keep each array's saved dtype (a target's dtype is a cast): take it from the checkpoint's metadata.",
        "values": "Some values differ from the checkpoint's.",
        "saved_layout": "Silent: the arrays came back on the mesh they were saved from, not on `mesh`. A restore with no "
                        "target means 'as saved', and Orbax restores a checkpoint saved by fewer devices onto those "
                        "devices without a word. Give every leaf a target sharding on the new mesh.",
        "replicated": "Every array came back replicated (PartitionSpec()): a whole copy on each of the 16 devices. Keep "
                      "each array's saved partition spec (in the checkpoint's metadata), on the new mesh.",
        "wrong_sharding": "The values are right but the shardings are not the saved partition specs on the new mesh: "
                          "NamedSharding(mesh, <the spec the array was saved with>).",
        "more_devices": "Wrong for a checkpoint saved by 4 devices, restored onto 16.",
        "two_axes": "Wrong for a checkpoint saved on a 2 x 4 mesh, restored onto a 4 x 4 one.",
        "reshaped_mesh": "Wrong for a checkpoint saved on an 8 x 2 mesh, restored onto a 2 x 8 one.",
    },
    diagnose=_diagnose_placed,
    check_outcome=_check_placed_memory,
    requirements={
        "Return every saved array as a `jax.Array` with its saved dtype and values": (
            "more_devices", "two_axes", "reshaped_mesh"),
        "each sharded as `NamedSharding(mesh, spec)` where `spec` is the partition spec it was saved with": (
            "more_devices", "two_axes", "reshaped_mesh"),
        "it must stay under": ("more_devices", "two_axes", "reshaped_mesh"),
    },
    on_exception="Read each array's shape, dtype and saved sharding from ocp.StandardCheckpointer().metadata(ckpt_dir)"
                 ".item_metadata.tree (its .sharding.partition_spec), and restore into jax.ShapeDtypeStruct targets "
                 "that carry a sharding on `mesh`.",
)

HIDDEN = {
    "restore_on_new_mesh": PLACED,
}


# ---------------------------------------------------------------------------------------------
# 7.2 migrate_checkpoint: an old model's checkpoint, a new model's abstract tree, a rename map and
# values for new leaves. Four cases of the seven must raise, each for one leaf.

def _old_model(rng, layers: int):
    d = int(rng.choice((32, 48, 64)))
    arrays = [("params/embed", (128, d), "float32", ())]
    for i in range(layers):
        arrays += [(f"params/layer{i}/kernel", (d, d), "float32", ()), (f"params/layer{i}/bias", (d,), "float32", ())]
    # The counters: a step, and a data loader's position in int64 (NumPy in the checkpoint: JAX
    # without x64 holds no int64, and a restore onto devices narrows it to int32).
    arrays += [("opt_state/count", (), "int32", ()), ("data/tokens_seen", (2,), "int64", ())]
    return tuple(arrays), d


def _target(arrays, rename, add=(), change=()):
    """The new model's abstract tree: the saved leaves renamed (None: dropped), plus ``add`` ((path,
    shape, dtype), ...), with ``change`` ((path, shape, dtype), ...) replacing a leaf's."""
    flat = {}
    for path, shape, dtype, _ in arrays:
        new = rename.get(path, path)
        if new is not None:
            flat[new] = (shape, dtype)
    for path, shape, dtype in (*add, *change):
        flat[path] = (shape, dtype)
    tree: dict = {}
    for path, (shape, dtype) in flat.items():
        *parents, last = path.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = AbstractArg(tuple(shape), dtype)
    return tree


def _migrate_cases(rng):
    out = []
    layers = int(rng.choice((2, 3)))
    arrays, d = _old_model(rng, layers)

    def ckpt():
        return TreeCheckpointArg(arrays, (("x", 1),), int(rng.integers(0, 2**31)))

    def values(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    # Linen's names to NNX-style ones: every layer renamed, nothing added.
    nnx = {f"params/layer{i}/{w}": f"params/blocks/{i}/linear/{w}" for i in range(layers) for w in ("kernel", "bias")}
    out.append(Case("renamed", (ckpt(), _target(arrays, nnx), nnx, {})))
    # A norm added to each layer (given values), the last layer dropped on purpose, the embedding renamed.
    last = layers - 1
    changes = {f"params/layer{last}/kernel": None, f"params/layer{last}/bias": None, "params/embed": "params/tok_embed"}
    added = tuple((f"params/layer{i}/scale", (d,), "float32") for i in range(last))
    new = {path: values(d) for path, _, _ in added}
    out.append(Case("added_and_dropped", (ckpt(), _target(arrays, changes, added), changes, new)))
    # The same model, with the state a migration may not touch silently: the counter and the shapes.
    out.append(Case("kept", (ckpt(), _target(arrays, {}), {}, {})))
    # Each of these must raise, naming the leaf.
    out.append(Case("missing_leaf", (ckpt(), _target(arrays, {}, (("params/layer0/scale", (d,), "float32"),)), {}, {})))
    out.append(Case("unplaced_leaf", (ckpt(), _target(arrays, {f"params/layer{last}/kernel": None}), {}, {})))
    out.append(Case("dtype_change", (ckpt(), _target(arrays, {}, change=(("opt_state/count", (), "float32"),)), {}, {})))
    out.append(Case("shape_change", (ckpt(), _target(arrays, {}, change=(("params/embed", (256, d), "float32"),)), {}, {})))
    # `new` also gives values for leaves the checkpoint provides (an initialiser's whole tree passed
    # in): the saved values are kept, under a kept path and under a renamed one.
    kept_too = {"params/embed": values(128, d), "opt_state/count": np.asarray(7, np.int32)}
    out.append(Case("provided_and_new", (ckpt(), _target(arrays, {}), {}, kept_too)))
    moved = {f"params/layer0/{w}": f"params/block0/{w}" for w in ("kernel", "bias")}
    out.append(Case("renamed_and_new", (ckpt(), _target(arrays, moved), moved,
                                        {"params/block0/kernel": values(d, d), "params/block0/bias": values(d)})))
    # A name that rename moved or dropped, used again by the new model: it is not the old leaf.
    swap = {f"params/layer{i}/{w}": f"params/layer{1 - i}/{w}" for i in (0, 1) for w in ("kernel", "bias")}
    out.append(Case("swapped_layers", (ckpt(), _target(arrays, swap), swap, {})))
    dropped = {f"params/layer{last}/kernel": None, f"params/layer{last}/bias": None}
    out.append(Case("dropped_name_reused", (ckpt(), _target(arrays, {}), dropped,
                                            {f"params/layer{last}/kernel": values(d, d), f"params/layer{last}/bias": values(d)})))
    out.append(Case("moved_name_missing", (ckpt(), _target(arrays, {}, (("params/block0/kernel", (d, d), "float32"),)),
                                           {"params/layer0/kernel": "params/block0/kernel"}, {})))
    # Raise: a saved leaf renamed to a path the new model lacks; shapes of the same size (a
    # transpose, an added axis), which a reshape would take silently; a narrowing cast.
    out.append(Case("unplaced_renamed", (ckpt(), _target(arrays, {"params/layer0/bias": None}),
                                         {"params/layer0/bias": "params/layer0/b"}, {})))
    out.append(Case("same_size_reshape", (ckpt(), _target(arrays, {}, change=(("params/embed", (d, 128), "float32"),)), {}, {})))
    out.append(Case("added_axis", (ckpt(), _target(arrays, {}, change=(("params/layer0/bias", (1, d), "float32"),)), {}, {})))
    out.append(Case("narrowing_cast", (ckpt(), _target(arrays, {}, change=(("params/layer0/kernel", (d, d), "bfloat16"),)),
                                       {}, {})))
    return out


def migration_faults(args) -> list[set[str]]:
    """Each leaf a migration must refuse, as the names that may denote it (its old and new paths)."""
    from autograder.wall.returns import leaves_with_paths

    ckpt, target, rename, new = args
    wanted = dict(leaves_with_paths(target))
    faults, provided = [], set()
    for old, shape, dtype, _ in ckpt.arrays:  # (dtypes by name on both sides: AbstractArg's too)
        path = rename.get(old, old)
        if path is None:
            continue
        provided.add(path)
        if path not in wanted:
            faults.append({old, path})
        elif (tuple(wanted[path].shape), wanted[path].dtype) != (tuple(shape), dtype):
            faults.append({old, path})
    faults += [{path} for path in wanted if path not in provided and path not in new]
    return faults


def _names_leaf(message: str, path: str) -> bool:
    """Does the message name this leaf: its path with '/' or any other separator ('params.layer0',
    "('params', 'layer0')"), its parts in order?"""
    parts = [re.escape(p) for p in path.split("/")]
    return re.search(r"\W+".join(rf"\b{p}\b" if p[0].isalnum() else p for p in parts) if len(parts) > 1
                     else rf"(?<![\w]){parts[0]}(?![\w])", message) is not None


def _names_faulty_leaf(args, message: str) -> bool:
    """The message names a leaf at fault, and not the whole tree besides (a message listing every
    path would name the faulty one too): at most two other leaves."""
    from autograder.wall.returns import leaves_with_paths

    ckpt, target, rename, _ = args
    faults = migration_faults(args)
    at_fault = set().union(*faults)
    others = ({path for path, *_ in ckpt.arrays} | {p for p, _ in leaves_with_paths(target)}
              | {p for p in rename.values() if p}) - at_fault
    return (any(_names_leaf(message, name) for name in at_fault)
            and sum(_names_leaf(message, path) for path in others) <= 2)


def _diagnose_migration(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = {k: np.asarray(v) for k, v in leaves_with_paths(actual)}, {k: np.asarray(v) for k, v in leaves_with_paths(expected)}
    if set(a) != set(e):
        return "tree"
    if any(a[k].dtype != e[k].dtype or a[k].shape != e[k].shape for k in e):
        return "dtype"
    ckpt, _, rename, new = args
    differ = {k for k in e if a[k].tobytes() != e[k].tobytes()}
    saved = {path for path, *_ in ckpt.arrays}
    provided = {rename.get(old, old) for old in saved} - {None}
    if any(k in new and k in provided for k in differ):
        return "new_over_saved"
    if any(k in saved and rename.get(k, k) != k for k in differ):
        return "old_name"
    if any(k in new for k in differ):
        return "new_values"
    return "values"


MIGRATE = Hidden(
    generate=_migrate_cases,
    messages={
        "should_raise/missing_leaf": "Silent: a leaf of the new model that neither the checkpoint nor `new` provides "
                                     "got a value anyway (zeros, an initialiser, a placeholder). Raise ValueError "
                                     "naming it: a zero-filled weight trains and serves without an error.",
        "should_raise/unplaced_leaf": "Silent: a saved leaf that has no place in the new model was left behind (a "
                                      "partial load). Raise ValueError naming it, unless rename maps it to None.",
        "should_raise/dtype_change": "Silent: a saved leaf was cast to another dtype (an int32 counter above 2^24 "
                                     "does not survive float32). Raise ValueError naming it.",
        "should_raise/shape_change": "Silent: a saved leaf whose shape is not the new model's was reshaped, cut or "
                                     "padded. Raise ValueError naming it.",
        "should_raise": "A change the new model cannot take silently must raise ValueError naming the leaf.",
        "wrong_exception": "Raise ValueError (or a subclass) for a leaf the migration cannot place or fill.",
        "unclear_error": "Your ValueError should name the leaf at fault by its path (e.g. 'params/layer0/scale'), "
                         "not every leaf of the tree.",
        "tree": "Return a dict shaped exactly like `target`: every leaf of the new model, nothing else.",
        "dtype": "Every leaf must have the target's shape and dtype, and the saved one's bytes. A restore onto "
                 "devices narrows an int64 to int32 without a word where JAX runs without x64: restore as NumPy "
                 "(ocp.RestoreArgs(restore_type=np.ndarray)).",
        "new_values": "A leaf of the new model that the checkpoint does not have takes its value from `new`.",
        "new_over_saved": "Silent: a leaf the checkpoint provides took its value from `new`. Where the checkpoint "
                          "provides a leaf (under its own path or renamed), its saved value is the one to keep; "
                          "`new` only fills what the checkpoint lacks.",
        "old_name": "Silent: a leaf of the new model got the value of the saved leaf that had its name, although "
                    "rename moved that leaf elsewhere or dropped it. Once renamed, a saved leaf lives at its new "
                    "path only: look each target leaf up through rename, never by the old name.",
        "should_raise/moved_name_missing": "Silent: a leaf of the new model that rename left empty (the saved leaf "
                                           "of that name was moved) got a value anyway, the moved leaf's own. Raise "
                                           "ValueError naming it.",
        "should_raise/unplaced_renamed": "Silent: a saved leaf renamed to a path the new model does not have was "
                                         "left behind. Raise ValueError naming it.",
        "should_raise/same_size_reshape": "Silent: a saved leaf was reshaped into a target shape of the same size "
                                          "(the same number of elements, another layout: its values land in the "
                                          "wrong places). Never reshape: raise ValueError naming it.",
        "should_raise/added_axis": "Silent: a saved leaf was reshaped into a target shape of the same size. Never "
                                   "reshape: raise ValueError naming it.",
        "should_raise/narrowing_cast": "Silent: a saved leaf was cast to a narrower dtype (its low bits lost). Never "
                                       "cast: raise ValueError naming it.",
        "values": "Some values differ from the checkpoint's: a renamed leaf keeps its saved values.",
        "renamed": "Wrong when every layer is renamed (Linen's names to NNX-style ones).",
        "added_and_dropped": "Wrong when leaves are added (values in `new`), dropped (renamed to None) and renamed.",
        "kept": "Wrong when the new model is the old one.",
        "missing_leaf": "Wrong when a leaf of the new model has no value.",
        "unplaced_leaf": "Wrong when a saved leaf has no place in the new model.",
        "dtype_change": "Wrong when a leaf's dtype changed.",
        "shape_change": "Wrong when a leaf's shape changed.",
        "provided_and_new": "Wrong when `new` holds values for leaves the checkpoint provides.",
        "renamed_and_new": "Wrong when `new` holds values for renamed leaves the checkpoint provides.",
        "swapped_layers": "Wrong when rename swaps two layers' names.",
        "dropped_name_reused": "Wrong when the new model reuses the name of a leaf dropped on purpose (its value in "
                               "`new`).",
        "moved_name_missing": "Wrong when the new model keeps the name of a leaf that rename moved.",
        "unplaced_renamed": "Wrong when a saved leaf is renamed to a path the new model lacks.",
        "same_size_reshape": "Wrong when a leaf's shape changed but not its size.",
        "added_axis": "Wrong when a leaf gained an axis of length 1.",
        "narrowing_cast": "Wrong when a leaf's dtype narrowed.",
    },
    diagnose=_diagnose_migration,
    requirements={
        "a saved leaf not in `rename` keeps its path": ("kept", "provided_and_new", "same_size_reshape"),
        "to its path in the new model, or to None to drop it": (
            "renamed", "added_and_dropped", "swapped_layers", "dropped_name_reused", "moved_name_missing"),
        "`new` maps the path of each new-model leaf the checkpoint does not provide to its initial value": (
            "added_and_dropped", "dropped_name_reused"),
        "where the checkpoint provides a leaf, its saved value is the one to keep": ("provided_and_new", "renamed_and_new"),
        "each with the target's dtype (int64 included: JAX runs without x64 here)": ("renamed", "kept", "added_and_dropped"),
        "Raise `ValueError` naming the leaf's path when a change cannot be made without a silent loss": (
            "missing_leaf", "unplaced_leaf", "dtype_change", "shape_change", "moved_name_missing", "unplaced_renamed",
            "same_size_reshape", "added_axis", "narrowing_cast"),
        "a target leaf that neither the checkpoint nor `new` provides (never zero-fill it)": (
            "missing_leaf", "moved_name_missing"),
        "a saved leaf with no place in the new model (not dropped on purpose)": ("unplaced_leaf", "unplaced_renamed"),
        "a saved leaf whose shape or dtype is not the target's": (
            "dtype_change", "shape_change", "same_size_reshape", "added_axis", "narrowing_cast"),
        "never cast or reshape it": ("dtype_change", "narrowing_cast", "same_size_reshape", "added_axis"),
    },
    check_raise=_names_faulty_leaf,
    on_exception="Read the saved tree from ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree; name each "
                 "leaf by its path ('params/layer0/kernel'). Raise ValueError only for a leaf the migration cannot "
                 "place or fill.",
)

HIDDEN["migrate_checkpoint"] = MIGRATE


# ---------------------------------------------------------------------------------------------
# 7.3 compare_checkpoints: two checkpoints of one model, differences planted.

def _compare_model(rng):
    d = int(rng.choice((32, 48, 64)))
    arrays = [("params/embed", (128, d), "float32", ())]
    for i in range(3):
        arrays += [(f"params/layer{i}/kernel", (d, d), "float32", ()), (f"params/layer{i}/bias", (d,), "float32", ())]
    arrays += [("step", (), "int32", ()), ("tokens_seen", (4,), "int64", ())]
    return tuple(arrays), d


def _compare_cases(rng):
    arrays, d = _compare_model(rng)
    layer = [f"params/layer{i}" for i in rng.permutation(3)]
    nan = (("set", f"{layer[0]}/bias", int(rng.integers(d)), float("nan")),)  # in both: NaN equals NaN
    out = []
    seed = int(rng.integers(0, 2**31))
    out.append(Case("same", (TreeCheckpointArg(arrays, (("x", 1),), seed, nan),
                             TreeCheckpointArg(arrays, (("x", 1),), seed, nan), 0.0)))
    seed = int(rng.integers(0, 2**31))
    # Two int64 counters one apart, above 2^53: as float64 both are the same number (a tie between
    # 2^53 + 4k and 2^53 + 4k + 2 rounds to the even significand, 2^53 + 4k).
    count = 2**53 + 4 * int(rng.integers(1, 1000))
    changed = nan + (("drop", f"{layer[1]}/bias"), ("add", "params/head/kernel", (d, 16), "float32"),
                     ("scale", f"{layer[2]}/kernel", 1 + 1e-6), ("set", "tokens_seen", 1, count + 1),
                     ("reshape", f"{layer[0]}/kernel", (d, 2 * d)), ("cast", "params/embed", "bfloat16"))
    base = nan + (("set", "tokens_seen", 1, count),)
    out.append(Case("exact", (TreeCheckpointArg(arrays, (("x", 1),), seed, base),
                              TreeCheckpointArg(arrays, (("x", 1),), seed, changed), 0.0)))
    seed = int(rng.integers(0, 2**31))
    # Within rtol 0.1 of the larger value, either way round (0.905 and 1.105: beyond it relative to b,
    # then to a); an infinity in both (equal), and one against a number (differing); values near
    # 1e-12 three times apart (an absolute term hides them).
    both = nan + (("set", f"{layer[1]}/bias", 0, float("inf")),)
    tolerant = both + (("cast", "params/embed", "bfloat16"), ("set", "params/embed", 0, float("inf")),
                       ("scale", f"{layer[0]}/kernel", 0.905), ("scale", f"{layer[2]}/kernel", 1.105),
                       ("scale", f"{layer[1]}/kernel", 1.5), ("set", f"{layer[2]}/bias", 0, 3e-12))
    tiny = both + (("set", f"{layer[2]}/bias", 0, 1e-12),)
    out.append(Case("with_tolerance", (TreeCheckpointArg(arrays, (("x", 1),), seed, tiny),
                                       TreeCheckpointArg(arrays, (("x", 1),), seed, tolerant), 0.1)))
    # Counters alone, compared exactly (rtol 0; with a tolerance, "exactly" may be read as exact
    # arithmetic, which a right answer does): int64 ones apart above 2^53 (one float64), an int32
    # step one apart above 2^24 (one float32).
    seed = int(rng.integers(0, 2**31))
    count, step = 2**53 + 4 * int(rng.integers(1, 1000)), 2**24 + 2 * int(rng.integers(1, 1000))
    out.append(Case("exact_counters", (
        TreeCheckpointArg(arrays, (("x", 1),), seed, nan + (("set", "tokens_seen", 3, count), ("set", "step", 0, step))),
        TreeCheckpointArg(arrays, (("x", 1),), seed, nan + (("set", "tokens_seen", 3, count + 1), ("set", "step", 0, step + 1))),
        0.0)))
    # The same traps at bfloat16's rounding (rtol 2^-8), each side of the boundary by far more than
    # float32's rounding: within it relative to the larger value only (either way round), just
    # beyond 1 - rtol; a cast to float16 (within: mismatched, not differing); an infinity in both,
    # and one against a number; 1e-12 against 3e-12; a counter dropped and a leaf added deep in the tree.
    seed, rtol = int(rng.integers(0, 2**31)), 2.0**-8
    layer = [f"params/layer{i}" for i in rng.permutation(3)]
    both = nan + (("set", f"{layer[0]}/kernel", 1, float("inf")),)
    low = both + (("set", f"{layer[1]}/bias", 1, 1e-12),)
    high = both + (("cast", "params/embed", "float16"), ("set", f"{layer[2]}/bias", 0, float("inf")),
                   ("scale", f"{layer[0]}/kernel", (1 + rtol + 1 / (1 - rtol)) / 2),
                   ("scale", f"{layer[1]}/kernel", (1 - rtol + 1 / (1 + rtol)) / 2),
                   ("scale", f"{layer[2]}/kernel", (1 - rtol) * (1 - 1e-3)),
                   ("set", f"{layer[1]}/bias", 1, 3e-12),
                   ("drop", "tokens_seen"), ("add", "params/head/out/kernel", (d, 8), "float32"))
    out.append(Case("tight_tolerance", (TreeCheckpointArg(arrays, (("x", 1),), seed, low),
                                        TreeCheckpointArg(arrays, (("x", 1),), seed, high), rtol)))
    return out


def _diagnose_compare(args, actual, expected):
    if not isinstance(actual, dict) or set(actual) != set(expected):
        return None
    for key in ("missing", "extra"):
        if sorted(actual[key]) != expected[key]:
            return "missing_extra" if sorted(actual[key]) != sorted(expected[key]) else "unsorted"
    if actual["mismatched"] != expected["mismatched"]:
        return "mismatched" if sorted(actual["mismatched"]) != expected["mismatched"] else "unsorted"
    if actual["differing"] != expected["differing"]:
        got, want = set(actual["differing"]), set(expected["differing"])
        if sorted(got) == sorted(want):
            return "unsorted"
        if {"tokens_seen", "step"} & (want - got):  # the integer leaves
            return "int_as_float"
        if args[2] > 0 and all(path.startswith("params/") for path in got ^ want):
            return "tolerance"
        return "differing"
    return None


COMPARE = Hidden(
    generate=_compare_cases,
    messages={
        "unsorted": "Each list must be sorted.",
        "missing_extra": "'missing' lists the leaves of a that b lacks, 'extra' the leaves of b that a lacks, by path "
                         "('params/layer0/kernel'), at every depth of the tree.",
        "mismatched": "'mismatched' lists every leaf in both whose shape or dtype differs (a cast is a mismatch, even "
                      "when its values are within the tolerance).",
        "int_as_float": "Integers must be compared exactly: a float64 holds every integer only up to 2^53 (a "
                        "float32 up to 2^24), so two counters that differ by one can compare equal once converted.",
        "tolerance": "Two numbers differ when |x - y| > rtol * max(|x|, |y|): the tolerance is relative to the larger "
                     "of the two (whichever checkpoint comes first), with no absolute term; NaN equals NaN, and an "
                     "infinity equals only itself (inf - 1 is not within any tolerance of inf).",
        "differing": "'differing' lists every leaf in both, of the same shape, with a value that differs beyond the "
                     "tolerance (NaN equals NaN; integers exactly).",
        "same": "Wrong on two copies of one checkpoint (a NaN in both at the same place: equal).",
        "exact": "Wrong on two checkpoints compared exactly (rtol 0): leaves missing, extra, reshaped, cast, and "
                 "changed by very little.",
        "with_tolerance": "Wrong with a tolerance (rtol 0.1): a cast within it, values scaled within it and beyond "
                          "it, infinities.",
        "tight_tolerance": "Wrong with a tolerance as tight as bfloat16's rounding (rtol 2^-8): a cast within it, "
                           "values scaled within it and just beyond it, infinities, leaves missing and extra.",
        "exact_counters": "Wrong on two checkpoints whose integer counters differ by one (rtol 0).",
    },
    diagnose=_diagnose_compare,
    requirements={
        "leaves of a that b lacks; leaves of b that a lacks": ("exact", "tight_tolerance"),
        "leaves in both whose shape or dtype differs": ("exact", "with_tolerance", "tight_tolerance"),
        "each a sorted list of leaf paths": ("exact", "tight_tolerance"),
        "holding a value that differs": ("exact", "with_tolerance", "tight_tolerance"),
        "Two numbers x and y differ when |x - y| > rtol * max(|x|, |y|)": ("with_tolerance", "tight_tolerance"),
        "(no absolute term)": ("with_tolerance", "tight_tolerance"),
        "except that NaN equals NaN": ("same", "exact", "with_tolerance", "tight_tolerance"),
        "an infinity equals only itself": ("with_tolerance", "tight_tolerance"),
        "Two leaves of integers are compared exactly, whatever `rtol` (a float64 holds every integer only up to 2^53)": (
            "exact", "exact_counters"),
        "A cast leaf is mismatched whether or not its values are within the tolerance": ("with_tolerance", "tight_tolerance"),
    },
    on_exception="Read both trees' metadata (ocp.StandardCheckpointer().metadata(path).item_metadata.tree) and "
                 "restore one leaf at a time (a partial restore of that leaf alone, as NumPy).",
)

HIDDEN["compare_checkpoints"] = COMPARE


# ---------------------------------------------------------------------------------------------
# 7.4 unstack_layers: a scanned model's checkpoint (MaxText's names: each group's leaves stacked
# along the scan axis) written again with one subtree per layer; the grader restores what was
# written in its own worker, and measures the function's memory.

def _scanned_model(rng, groups: dict, scan_axis: int, d: int, f: int, mesh: tuple):
    """``((path, shape, dtype, spec), ...)`` of a scanned model in MaxText's names, every array split
    over every device (:func:`ckptlab.unstacking.scanned_arrays`, the lesson's own model)."""
    from ckptlab.unstacking import scanned_arrays

    layout = scanned_arrays(groups, scan_axis, d, f, tuple(name for name, _ in mesh))
    return tuple((path, shape, "float32", spec) for path, (shape, spec) in layout.items())


def _unstack_cases(rng):
    from autograder.wall.kinds import OutputFolder

    # Smaller first: a case is charged with the largest peak of its worker so far.
    out = []
    # A small model stacked along axis 1 (a Linen scan over another axis), beside a leaf whose name
    # merely begins with the group's ('layers_norm' beside 'layers'): not in the group.
    layers = int(rng.choice((2, 3)))
    mesh = (("data", 2), ("model", 8))
    arrays = _scanned_model(rng, {"params/decoder/layers": layers}, 1, 64, 128, mesh)
    arrays += (("params/decoder/layers_norm/scale", (64, layers + 1), "float32", ((("data", "model")),)),)
    out.append(Case("prefix_neighbour", (TreeCheckpointArg(arrays, mesh, int(rng.integers(0, 2**31))), OutputFolder(),
                                         MeshArg(mesh), ["params/decoder/layers"], 1)))
    # DeepSeek's two groups (dense layers first, then MoE ones), stacked along axis 0 as Linen's nn.scan
    # stacks, on a 2 x 8 mesh.
    dense = int(rng.choice((1, 2)))
    mesh = (("data", 2), ("model", 8))
    groups = {"params/decoder/dense_layers": dense, "params/decoder/moe_layers": 6 - dense}
    arrays = _scanned_model(rng, groups, 0, 256, 512, mesh)
    arrays += (("params/decoder/moe_layers_shared/scale", (6, 256), "float32", (None, ("data", "model"))),)
    out.append(Case("two_groups_axis_0", (TreeCheckpointArg(arrays, mesh, int(rng.integers(0, 2**31))), OutputFolder(),
                                          MeshArg(mesh), sorted(groups), 0)))
    # MaxText's default: one group, stacked along axis 1 (param_scan_axis), on one axis of 16 devices;
    # its largest arrays 8 MiB, the whole model 48 MiB.
    layers = int(rng.choice((4, 8)))
    mesh = (("model", 16),)
    arrays = _scanned_model(rng, {"params/decoder/layers": layers}, 1, 512, 4096 // layers, mesh)
    arrays += (("params/decoder/layers_norm/scale", (512, layers), "float32", ("model",)),)
    out.append(Case("scan_axis_1", (TreeCheckpointArg(arrays, mesh, int(rng.integers(0, 2**31))), OutputFolder(),
                                    MeshArg(mesh), ["params/decoder/layers"], 1)))
    return out


def unstacked(ckpt_dir, out_dir, mesh, groups, scan_axis):
    """What the written checkpoint must restore to, from the grader's own copy of the checkpoint
    (learner code reaches only its own): each group's leaves sliced per layer, every other leaf as
    saved, each placed as saved with the scan axis's spec entry removed."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    from autograder.wall.returns import leaves_with_paths

    saved = dict(leaves_with_paths(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree))
    as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray),
                            ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    values = dict(leaves_with_paths(ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=as_numpy))))
    out = {}
    for path, m in saved.items():
        spec = tuple(m.sharding.partition_spec) + (None,) * (len(m.shape) - len(m.sharding.partition_spec))
        host = values.pop(path)
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            out[path] = jax.device_put(host, NamedSharding(mesh, PartitionSpec(*spec)))
            continue
        sharding = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
        for i in range(m.shape[scan_axis]):
            out[f"{group}_{i}/{path[len(group) + 1:]}"] = jax.device_put(np.take(host, i, axis=scan_axis), sharding)
    tree: dict = {}
    for path, value in out.items():
        *parents, last = path.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def _check_unstack_memory(args, out) -> str | None:
    from autograder.wall.memory import unstack_budget

    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > unstack_budget(largest_held(args)) else None


def largest_held(args) -> int:
    """Bytes the devices hold of the checkpoint's largest array, placed as it was saved (replicas
    counted): the unit of 7.4's budget."""
    from autograder.wall.kinds import named_dtype
    from autograder.wall.memory import held_bytes

    ckpt, mesh = args[0], args[2].shape
    return max(held_bytes(shape, named_dtype(dtype).itemsize, mesh, spec) for _, shape, dtype, spec in ckpt.arrays)


def _layer_of(path: str, group: str) -> bool:
    """Is ``path`` a layer of ``group`` as written ('g_<i>/...'), not a neighbour named like it ('g_norm/...')?"""
    return re.match(re.escape(group) + r"_\d+/", path) is not None


def _diagnose_unstack(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    groups = args[3]
    if set(a) != set(e):
        # a neighbour named like a group ('g_norm/...') missing, and layers made of it ('g_0/orm/...')
        if any(p.startswith(g) and not p.startswith(g + "/") and any(_layer_of(q, g) for q in set(a) - set(e))
               for p in set(e) - set(a) for g in groups):
            return "prefix_neighbour_unstacked"
        if any(p.startswith(g + "/") for p in a for g in groups):
            return "stacked_kept" if any(_layer_of(p, g) for p in a for g in groups) else "nested_names"
        if set(e) - set(a) and all(any(_layer_of(p, g) for g in groups) for p in a):
            return "others_missing"
        return "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if any(a[k].shape != e[k].shape for k in e):
        return "shape"
    if any(a[k].sha256 != e[k].sha256 for k in e):
        return "values"
    return "wrong_sharding"


UNSTACK = Hidden(
    generate=_unstack_cases,
    messages={
        "memory": "The checkpoint is right, but your function's own memory (anonymous, sampled from outside) went over "
                  f"the budget: {UNSTACK_FACTOR} times the bytes the devices hold of the checkpoint's largest array, plus "
                  f"{UNSTACK_SLACK >> 20} MiB. Restore "
                  "one array at a time (a partial restore of that leaf alone), write its layers "
                  "(ocp_v1.partial.save) and let it go before the next: the whole model, or every layer "
                  "of it at once, is over.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it samples the worker's "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "nested_names": "Each layer is a subtree of its own named after its group and index, as MaxText names them: "
                        "'params/decoder/layers_0/mlp/wo/kernel', not 'params/decoder/layers/0/...', and no stacked "
                        "leaf is left in the checkpoint.",
        "stacked_kept": "The stacked leaves are still in the checkpoint beside the per-layer ones: write each layer's "
                        "slices in place of the stack, not as well.",
        "others_missing": "Every leaf outside the stacked groups (the embedding, the final norm) belongs in the new "
                          "checkpoint as it was saved.",
        "tree": "The checkpoint must hold every leaf outside the groups as saved, and for each group g and layer i the "
                "group's leaves as 'g_i/<the rest of the path>'.",
        "dtype": "Keep each array's saved dtype: unstacking changes the tree, not the numbers (MaxText's decode "
                 "checkpoint casts to bfloat16; this one must not).",
        "shape": "Some per-layer arrays have the wrong shape: slice along `scan_axis` (MaxText stacks along axis 1, "
                 "Linen's nn.scan along 0), which the per-layer array no longer has.",
        "values": "Some values differ from the checkpoint's: layer i of a stacked array is its index i along the scan "
                  "axis.",
        "wrong_sharding": "The values are right, but some arrays were not saved placed as the stack was: on `mesh`, with "
                          "the stacked array's saved spec less its scan-axis entry (a leaf outside the groups keeps "
                          "its spec).",
        "prefix_neighbour_unstacked": "Silent: a leaf outside the groups whose path merely begins with a group's "
                                      "name (a 'g_norm' or 'g_shared' beside the group 'g') was unstacked as if it "
                                      "were in the group. A leaf is under group g when its path begins with g "
                                      "followed by '/': match the separator too.",
        "prefix_neighbour": "Wrong for a small model stacked along axis 1, beside leaves named like its group.",
        "scan_axis_1": "Wrong for MaxText's layout: one group of layers stacked along axis 1, on one axis of 16 devices.",
        "two_groups_axis_0": "Wrong for two groups (DeepSeek's dense and MoE layers) stacked along axis 0, on a 2 x 8 "
                             "mesh.",
    },
    diagnose=_diagnose_unstack,
    check_outcome=_check_unstack_memory,
    requirements={
        "every leaf under a group holds all the group's layers, stacked along axis `scan_axis` (never sharded)": (
            "prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
        "for group `g` and layer `i`, the leaf `g/<rest>` becomes `g_i/<rest>`": (
            "prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
        "its index `i` along `scan_axis`": ("prefix_neighbour", "scan_axis_1"),
        "where `spec` is the stacked leaf's saved spec without its scan-axis entry": (
            "prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
        "Every leaf outside the groups is saved as it was (values, dtype, spec)": (
            "prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
        "no stacked leaf remains": ("prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
        "it must stay under": ("prefix_neighbour", "two_groups_axis_0", "scan_axis_1"),
    },
    expected=unstacked,
    on_exception="out_dir does not exist yet: Orbax's save creates it. ocp_v1.partial.save(out_dir, "
                 "tree) adds arrays to a checkpoint in the making; ocp_v1.partial.finalize(out_dir) makes it "
                 "a checkpoint. Read each saved array's shape and spec from "
                 "ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree.",
)

HIDDEN["unstack_layers"] = UNSTACK
