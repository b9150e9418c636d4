"""Unit 7's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py). The
silent paths (restores and migrations that raise nothing and return something plausible) are
among them: each must score 0 with a message naming its silence."""

from autograder.units.unit7 import UNIT

IMPORTS = UNIT.imports.replace("from autograder.notebook import problem", "") + "\n"

_PLACE = """
def restore_on_new_mesh(ckpt_dir, mesh):
    checkpointer = ocp.StandardCheckpointer()
    saved = checkpointer.metadata(ckpt_dir).item_metadata.tree
    target = {name: jax.ShapeDtypeStruct(m.shape, DTYPE, sharding=NamedSharding(mesh, SPEC)) for name, m in saved.items()}
    return AFTER
"""


def _place(dtype="m.dtype", spec="PartitionSpec(*m.sharding.partition_spec)", after="checkpointer.restore(ckpt_dir, target)"):
    return _PLACE.replace("DTYPE", dtype).replace("SPEC", spec).replace("AFTER", after)


PLACE = [
    # Silent: no target means "as saved", and a checkpoint of 4 or 8 devices restores onto those.
    ("no_target", """
def restore_on_new_mesh(ckpt_dir, mesh):
    return ocp.StandardCheckpointer().restore(ckpt_dir)
""", "incorrect", "Silent: the arrays came back on the mesh they were saved from"),
    # The quickest target to write: replicated on every device (MaxText PR #3192's OOM).
    ("replicated_target", _place(spec="PartitionSpec()"), "incorrect", "replicated"),
    # Replicated restore, then re-sharded to the right layout: right arrays, 16 copies on the way.
    ("replicated_then_resharded", _place(
        spec="PartitionSpec()",
        after="{name: jax.device_put(a, NamedSharding(mesh, PartitionSpec(*saved[name].sharding.partition_spec))) "
              "for name, a in checkpointer.restore(ckpt_dir, target).items()}"),
     "incorrect", "over the budget"),
    # Every array as float32: the bfloat16 ones cast up.
    ("float32_target", _place(dtype="jnp.float32"), "incorrect", "saved dtype"),
    # The values, as NumPy on the host: nothing placed.
    ("numpy_restore", """
def restore_on_new_mesh(ckpt_dir, mesh):
    checkpointer = ocp.PyTreeCheckpointer()
    saved = checkpointer.metadata(ckpt_dir).item_metadata.tree
    args = {name: ocp.RestoreArgs(restore_type=np.ndarray) for name in saved}
    return checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=args))
""", "incorrect", "not a jax.Array"),
    # Split along the first axis whatever it was saved with: a layout of one's own.
    ("own_layout", _place(spec="PartitionSpec(mesh.axis_names)"), "incorrect", "not the saved partition specs"),
]

_MIGRATE = """
import flax.traverse_util as tu


def migrate_checkpoint(ckpt_dir, target, rename, new):
    saved = tu.flatten_dict(ocp.StandardCheckpointer().restore(ckpt_dir), sep="/")
    wanted = tu.flatten_dict(target, sep="/")
    moved = {}
    for old, value in saved.items():
        path = rename.get(old, old)
        if path is None:
            continue
        PLACE
    out = {}
    for path, leaf in wanted.items():
        if path in moved:
            value = moved[path]
            CHECK
            out[path] = value
        elif path in new:
            out[path] = np.asarray(new[path])
        else:
            MISSING
    return tu.unflatten_dict(out, sep="/")
"""

_STRICT_PLACE = """if path not in wanted:
            raise ValueError(f"{old} has no place in the new model")
        moved[path] = np.asarray(value)"""
_STRICT_CHECK = """if value.shape != leaf.shape or value.dtype != leaf.dtype:
                raise ValueError(f"{path}: saved {value.dtype}{value.shape}, wanted {leaf.dtype}{leaf.shape}")"""
_STRICT_MISSING = """raise ValueError(f"{path} has no value")"""


def _migrate(place=_STRICT_PLACE, check=_STRICT_CHECK, missing=_STRICT_MISSING):
    return _MIGRATE.replace("PLACE", place).replace("CHECK", check).replace("MISSING", missing)


MIGRATE = [
    # MaxText PR #4341: missing weights zero-filled.
    ("zero_fills_missing", _migrate(missing="out[path] = np.zeros(leaf.shape, leaf.dtype)"),
     "incorrect", "Silent: a leaf of the new model that neither the checkpoint nor `new` provides"),
    # Orbax #2972: saved leaves the new model has no place for, left behind without a word.
    ("partial_load", _migrate(place="moved[path] = np.asarray(value)"),
     "incorrect", "Silent: a saved leaf that has no place in the new model"),
    # The int32 counter as float32: the cast a restore does silently.
    ("casts_to_target_dtype", _migrate(check="""if value.shape != leaf.shape:
                raise ValueError(f"{path}: saved shape {value.shape}, wanted {leaf.shape}")
            value = value.astype(leaf.dtype)"""),
     "incorrect", "Silent: a saved leaf was cast to another dtype"),
    # A grown vocabulary: the saved rows padded with zeros into the new shape.
    ("pads_to_target_shape", _migrate(check="""if value.dtype != leaf.dtype:
                raise ValueError(f"{path}: saved dtype {value.dtype}, wanted {leaf.dtype}")
            if value.shape != leaf.shape:
                grown = np.zeros(leaf.shape, leaf.dtype)
                grown[tuple(slice(0, n) for n in value.shape)] = value
                value = grown"""),
     "incorrect", "Silent: a saved leaf whose shape is not the new model's"),
    # Renames ignored: every renamed leaf missing (and raised about, naming it: a loud failure).
    ("ignores_rename", _migrate().replace("path = rename.get(old, old)", "path = old if rename.get(old, old) is not None else None"),
     "error", "Raised ValueError"),
    # Raises, but says only that something is wrong.
    ("vague_error", _migrate(missing='raise ValueError("the checkpoint does not match the model")'),
     "incorrect", "should name the leaf at fault"),
    # Raises where it should, with a message naming every leaf of both trees: the faulty one among them.
    ("names_every_leaf", _migrate(place="""if path not in wanted:
            raise ValueError(f"migration failed; leaves: {sorted(saved)} -> {sorted(wanted)}")
        moved[path] = np.asarray(value)""", check="""if value.shape != leaf.shape or value.dtype != leaf.dtype:
                raise ValueError(f"migration failed; leaves: {sorted(saved)} -> {sorted(wanted)}")""",
        missing='raise ValueError(f"migration failed; leaves: {sorted(saved)} -> {sorted(wanted)}")'),
     "incorrect", "not every leaf of the tree"),
    # Checked against the metadata (int64 is int64 there), then restored onto a device: without x64,
    # JAX narrows the data loader's int64 position to int32, silently.
    ("restores_onto_a_device", """
import flax.traverse_util as tu


def migrate_checkpoint(ckpt_dir, target, rename, new):
    meta = tu.flatten_dict(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree, sep="/")
    wanted = tu.flatten_dict(target, sep="/")
    source = {}
    for old, m in meta.items():
        path = rename.get(old, old)
        if path is None:
            continue
        if path not in wanted:
            raise ValueError(f"{old} has no place in the new model")
        if tuple(m.shape) != tuple(wanted[path].shape) or m.dtype != wanted[path].dtype:
            raise ValueError(f"{path} changed its shape or dtype")
        source[path] = old
    for path in wanted:
        if path not in source and path not in new:
            raise ValueError(f"{path} has no value")
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    item = tu.unflatten_dict({old: jax.ShapeDtypeStruct(meta[old].shape, meta[old].dtype, sharding=device)
                              for old in source.values()}, sep="/")
    restored = tu.flatten_dict(ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True)), sep="/")
    return tu.unflatten_dict({p: restored[source[p]] if p in source else np.asarray(new[p]) for p in wanted}, sep="/")
""", "incorrect", "narrows an int64 to int32"),
    # `new` first: an initialiser's value replaces the leaf the checkpoint provides.
    ("new_overrides_saved", _migrate().replace("        if path in moved:\n", "        if path in new:\n"
                                               "            out[path] = np.asarray(new[path])\n"
                                               "        elif path in moved:\n"),
     "incorrect", "its saved value is the one to keep"),
    # A same-size shape taken by a reshape: the element count checked, not the shape.
    ("reshapes_same_size", _migrate(check="""if value.size != math.prod(leaf.shape) or value.dtype != leaf.dtype:
                raise ValueError(f"{path}: saved {value.dtype}{value.shape}, wanted {leaf.dtype}{leaf.shape}")
            value = value.reshape(leaf.shape)"""),
     "incorrect", "reshaped into a target shape of the same size"),
    # Each saved leaf also kept under its old name wherever the new model has that name: an old leaf
    # that rename moved or dropped comes back under its old name.
    ("old_name_first", _migrate(place="""if path not in wanted:
            raise ValueError(f"{old} has no place in the new model")
        moved[path] = np.asarray(value)
    for old, value in saved.items():
        if old in wanted:
            moved[old] = np.asarray(value)"""),
     "incorrect", "although rename moved that leaf elsewhere or dropped it"),
    # Shapes compared, dtypes let through when a cast keeps the kind (float32 to bfloat16: "both floats").
    ("casts_within_a_kind", _migrate(check="""if value.shape != leaf.shape or jnp.issubdtype(value.dtype, jnp.floating) != jnp.issubdtype(leaf.dtype, jnp.floating):
                raise ValueError(f"{path}: saved {value.dtype}{value.shape}, wanted {leaf.dtype}{leaf.shape}")
            value = value.astype(leaf.dtype)"""),
     "incorrect", "Never cast"),
    # A renamed leaf checked against the target by its old path only: renamed to a path the target
    # lacks, it is left behind.
    ("unplaced_rename_ignored", _migrate(place="""if old in wanted or path in wanted:
            moved[path] = np.asarray(value)
        elif old == path:
            raise ValueError(f"{old} has no place in the new model")"""),
     "incorrect", "renamed to a path the new model does not have"),
    # `new` ignored: the new leaves zero-filled although their values were given.
    ("ignores_new_values", _migrate().replace("out[path] = np.asarray(new[path])", "out[path] = np.zeros(leaf.shape, leaf.dtype)"),
     "incorrect", "takes its value from `new`"),
]

_COMPARE = """
import flax.traverse_util as tu


def compare_checkpoints(a_dir, b_dir, rtol):
    a = tu.flatten_dict(ocp.StandardCheckpointer().restore(a_dir), sep="/")
    b = tu.flatten_dict(ocp.StandardCheckpointer().restore(b_dir), sep="/")
    a = {k: np.asarray(v) for k, v in a.items()}
    b = {k: np.asarray(v) for k, v in b.items()}
    out = {"missing": sorted(a.keys() - b.keys()), "extra": sorted(b.keys() - a.keys()), "mismatched": [], "differing": []}
    for k in sorted(a.keys() & b.keys()):
        x, y = a[k], b[k]
        if x.shape != y.shape or x.dtype != y.dtype:
            out["mismatched"].append(k)
        if x.shape != y.shape:
            continue
        if not (SAME):
            out["differing"].append(k)
    return out
"""

_EXACT = ("np.array_equal(x, y) if x.dtype.kind in 'iu' and y.dtype.kind in 'iu' else bool(np.all("
          "(np.abs(x.astype(np.float64) - y.astype(np.float64)) <= rtol * np.maximum(np.abs(x.astype(np.float64)), "
          "np.abs(y.astype(np.float64)))) | (np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64)))))")


def _compare(same=_EXACT):
    return _COMPARE.replace("SAME", same)


COMPARE = [
    # np.allclose: an absolute term of 1e-8, relative to its second argument.
    ("allclose_defaults", _compare("np.array_equal(x, y) if x.dtype.kind in 'iu' and y.dtype.kind in 'iu' else "
                                   "np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, equal_nan=True)"),
     "incorrect", "no absolute term"),
    # Every value as float64: int64 counters above 2^53 that differ by one compare equal.
    ("integers_as_floats", _compare(_EXACT.replace("np.array_equal(x, y) if x.dtype.kind in 'iu' and y.dtype.kind in 'iu' else ", "")),
     "incorrect", "Integers must be compared exactly"),
    # np.array_equal without equal_nan: a NaN in both at the same place makes a difference.
    ("nan_differs", _compare(_EXACT.replace("| (np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64)))", "")),
     "incorrect", "NaN"),
    # Relative to a's value (np.isclose(y, x): its tolerance is |x| * rtol): b scaled by 1.105 differs.
    ("relative_to_a", _compare("np.array_equal(x, y) if x.dtype.kind in 'iu' and y.dtype.kind in 'iu' else bool(np.all("
                               "np.isclose(y.astype(np.float64), x.astype(np.float64), rtol=rtol, atol=0, equal_nan=True)))"),
     "incorrect", "relative to the larger"),
    # The formula as written, infinities forgotten: |inf - 1| <= rtol * inf, so inf equals any number.
    ("inf_equals_anything", _compare(_EXACT.replace(
        "| (np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64)))",
        "| (np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64))) | (x.astype(np.float64) == y.astype(np.float64))")),
     "incorrect", "an infinity equals only itself"),
    # Every value as float32 (the model's dtype): an int32 step one apart above 2^24 compares equal.
    ("integers_as_float32", _compare(_EXACT.replace("np.array_equal(x, y) if x.dtype.kind in 'iu' and y.dtype.kind in 'iu' else ", "")
                                     .replace("np.float64", "np.float32")),
     "incorrect", "Integers must be compared exactly"),
    # Relative to the smaller value (np.isclose's tolerance from b, or min(|x|, |y|)).
    ("relative_to_smaller", _compare(_EXACT.replace("np.maximum(", "np.minimum(")), "incorrect", "relative to the larger"),
    # An absolute term of its own, "to be safe with zeros": 1e-12 against 3e-12 equal.
    ("own_absolute_term", _compare(_EXACT.replace("<= rtol *", "<= 1e-9 + rtol *")), "incorrect", "no absolute term"),
    # A cast within the tolerance not reported as a mismatch.
    ("cast_not_mismatched", _compare().replace("if x.shape != y.shape or x.dtype != y.dtype:", "if x.shape != y.shape:"),
     "incorrect", "'mismatched' lists every leaf"),
    # Only a's leaves looked at: extra leaves of b never reported.
    ("one_direction", _compare().replace('"extra": sorted(b.keys() - a.keys())', '"extra": []'),
     "incorrect", "'missing' lists the leaves of a"),
    # Only the top level of the tree compared.
    ("top_level_only", """
def compare_checkpoints(a_dir, b_dir, rtol):
    a = ocp.StandardCheckpointer().metadata(a_dir).item_metadata.tree
    b = ocp.StandardCheckpointer().metadata(b_dir).item_metadata.tree
    return {"missing": sorted(a.keys() - b.keys()), "extra": sorted(b.keys() - a.keys()), "mismatched": [], "differing": []}
""", "incorrect", "Wrong on"),
    # The course's own tool called: its answer, not the learner's.
    ("calls_the_course_tool", """
from ckptlab.tool.diffing import diff_checkpoints


def compare_checkpoints(a_dir, b_dir, rtol):
    r = diff_checkpoints(a_dir, b_dir, rtol)
    return {"missing": r.missing, "extra": r.extra, "mismatched": sorted(set(r.shape) | set(r.dtype)),
            "differing": sorted(r.values)}
""", "incorrect", "the course's own ckptlab.tool.diffing"),
]

_UNSTACK = """
from orbax.checkpoint import v1 as ocp_v1


def _paths(tree, prefix=""):
    for key, value in tree.items():
        path = prefix + "/" + key if prefix else key
        if isinstance(value, dict):
            yield from _paths(value, path)
        else:
            yield path, value


def _tree(flat):
    out = {}
    for path, value in flat.items():
        keys = path.split("/")
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return out


def _one(ckpt_dir, path):
    got = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=_tree({path: 0}), restore_args=_tree({path: ocp.RestoreArgs(restore_type=np.ndarray)}), partial_restore=True))
    return dict(_paths(got))[path]


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    saved = dict(_paths(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree))
    BEFORE
    for path, m in saved.items():
        spec = tuple(m.sharding.partition_spec) + (None,) * (len(m.shape) - len(m.sharding.partition_spec))
        host = READ
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            out = {path: jax.device_put(host, NamedSharding(mesh, PartitionSpec(*spec)))}
        else:
            layer = NamedSharding(mesh, LAYER_SPEC)
            out = {NAME: PLACE
                   for i in range(m.shape[scan_axis])}
        SAVE
    AFTER
"""


def _unstack(before="", read="_one(ckpt_dir, path)", layer_spec="PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:]))",
             name='f"{group}_{i}/{path[len(group) + 1:]}"', place="jax.device_put(np.take(host, i, axis=scan_axis), layer)",
             save="ocp_v1.partial.save(out_dir, _tree(out))", after="ocp_v1.partial.finalize(out_dir)"):
    return (_UNSTACK.replace("BEFORE", before).replace("READ", read).replace("LAYER_SPEC", layer_spec)
            .replace("NAME", name).replace("PLACE", place).replace("SAVE", save).replace("AFTER", after))


UNSTACK = [
    # MaxText's force_unroll: every array restored at once (onto the devices, as saved), every layer
    # sliced, one save of the whole model.
    ("whole_model_at_once", _unstack(
        before="whole = dict(_paths(ocp.StandardCheckpointer().restore(ckpt_dir)))\n    written = {}",
        read="whole.pop(path)", place="jax.device_put(host[(slice(None),) * scan_axis + (i,)], layer)",
        save="written.update(out)", after="ocp_v1.save(out_dir, _tree(written))"),
     "incorrect", "over the budget"),
    # Each array written as it is sliced, but the whole model read first (as NumPy: one host copy of it).
    ("whole_model_read_first", _unstack(
        before="whole = dict(_paths(ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args="
               "jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), "
               "ocp.PyTreeCheckpointer().metadata(ckpt_dir).item_metadata.tree)))))",
        read="whole.pop(path)"),
     "incorrect", "over the budget"),
    # Always the first axis: Linen's nn.scan layout assumed, MaxText's (axis 1) sliced wrong.
    ("first_axis_always", _unstack(layer_spec="PartitionSpec(*spec[1:])", place="jax.device_put(host[i], layer)"),
     "incorrect", "slice along `scan_axis`"),
    # The layers saved as host arrays: nothing placed.
    ("numpy_layers", _unstack(place="np.take(host, i, axis=scan_axis)"),
     "incorrect", "NumPy array"),
    # Each layer replicated on every device (PartitionSpec()), the stack's spec forgotten.
    ("replicated_layers", _unstack(layer_spec="PartitionSpec()"), "incorrect", "the stacked array's saved spec"),
    # Layers as a nested index (layers/0/...), not MaxText's layers_0.
    ("nested_index", _unstack(name='f"{group}/{i}/{path[len(group) + 1:]}"'), "incorrect", "layers_0"),
    # Only the groups written: the embedding and the final norm left behind.
    ("groups_only", _unstack().replace("            out = {path: jax.device_put(host, NamedSharding(mesh, PartitionSpec(*spec)))}",
                                       "            continue"),
     "incorrect", "Every leaf outside the stacked groups"),
    # A group matched by its name alone, without the separator: a neighbour named like the group
    # ('layers_norm' beside 'layers') unstacked too.
    ("prefix_without_separator", _unstack().replace('path.startswith(g + "/")', "path.startswith(g)"),
     "incorrect", "merely begins with a group's name"),
    # Cast to bfloat16, as MaxText's decode checkpoint is.
    ("cast_to_bfloat16", _unstack(place="jax.device_put(np.take(host, i, axis=scan_axis).astype(jnp.bfloat16), layer)"),
     "incorrect", "saved dtype"),
    # The lesson's own helper called: its answer, not the learner's.
    ("calls_the_course_tool", """
from ckptlab import unstacking


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    unstacking.unstack(ckpt_dir, out_dir, mesh, groups, scan_axis)
""", "incorrect", "the course's own ckptlab.unstacking"),
]

WRONG = {
    "restore_on_new_mesh": PLACE,
    "migrate_checkpoint": MIGRATE,
    "compare_checkpoints": COMPARE,
    "unstack_layers": UNSTACK,
}
