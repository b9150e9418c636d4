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
    new = args[3]
    if any(k in new and a[k].tobytes() != e[k].tobytes() for k in e):
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
        "values": "Some values differ from the checkpoint's: a renamed leaf keeps its saved values.",
        "renamed": "Wrong when every layer is renamed (Linen's names to NNX-style ones).",
        "added_and_dropped": "Wrong when leaves are added (values in `new`), dropped (renamed to None) and renamed.",
        "kept": "Wrong when the new model is the old one.",
        "missing_leaf": "Wrong when a leaf of the new model has no value.",
        "unplaced_leaf": "Wrong when a saved leaf has no place in the new model.",
        "dtype_change": "Wrong when a leaf's dtype changed.",
        "shape_change": "Wrong when a leaf's shape changed.",
    },
    diagnose=_diagnose_migration,
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
        if "tokens_seen" in want - got:
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
        "int_as_float": "Integers must be compared exactly: a float64 holds every integer only up to 2^53, so two "
                        "int64 counters that differ by one can compare equal once converted.",
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
    },
    diagnose=_diagnose_compare,
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
    # DeepSeek's two groups (dense layers first, then MoE ones), stacked along axis 0 as Linen's nn.scan
    # stacks, on a 2 x 8 mesh.
    dense = int(rng.choice((1, 2)))
    mesh = (("data", 2), ("model", 8))
    groups = {"params/decoder/dense_layers": dense, "params/decoder/moe_layers": 6 - dense}
    arrays = _scanned_model(rng, groups, 0, 256, 512, mesh)
    out.append(Case("two_groups_axis_0", (TreeCheckpointArg(arrays, mesh, int(rng.integers(0, 2**31))), OutputFolder(),
                                          MeshArg(mesh), sorted(groups), 0)))
    # MaxText's default: one group, stacked along axis 1 (param_scan_axis), on one axis of 16 devices;
    # its largest arrays 8 MiB, the whole model 48 MiB.
    layers = int(rng.choice((4, 8)))
    mesh = (("model", 16),)
    arrays = _scanned_model(rng, {"params/decoder/layers": layers}, 1, 512, 4096 // layers, mesh)
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


def _diagnose_unstack(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    groups = args[3]
    if set(a) != set(e):
        if any(p.startswith(g + "/") for p in a for g in groups):
            return "stacked_kept" if any(p.startswith(g + "_") for p in a for g in groups) else "nested_names"
        if set(e) - set(a) and all(any(p.startswith(g + "_") for g in groups) for p in a):
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
        "scan_axis_1": "Wrong for MaxText's layout: one group of layers stacked along axis 1, on one axis of 16 devices.",
        "two_groups_axis_0": "Wrong for two groups (DeepSeek's dense and MoE layers) stacked along axis 0, on a 2 x 8 "
                             "mesh.",
    },
    diagnose=_diagnose_unstack,
    check_outcome=_check_unstack_memory,
    expected=unstacked,
    on_exception="out_dir does not exist yet: Orbax's save creates it. ocp_v1.partial.save(out_dir, "
                 "tree) adds arrays to a checkpoint in the making; ocp_v1.partial.finalize(out_dir) makes it "
                 "a checkpoint. Read each saved array's shape and spec from "
                 "ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree.",
)

HIDDEN["unstack_layers"] = UNSTACK
