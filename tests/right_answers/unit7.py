"""Unit 7's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit7.py."""

from autograder.units.unit7 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

RESTORE = [
    # Orbax's v1 API: the saved specs from v1's pytree_metadata (each leaf's sharding_metadata), an
    # abstract tree of ShapeDtypeStructs placed on the new mesh, and load_pytree with it.
    ("orbax_v1_abstract_tree", """
def restore_on_new_mesh(ckpt_dir, mesh):
    saved = ocp_v1.pytree_metadata(ckpt_dir).metadata
    abstract = {
        name: jax.ShapeDtypeStruct(
            m.shape, m.dtype,
            sharding=NamedSharding(mesh, PartitionSpec(*m.sharding_metadata.partition_spec)))
        for name, m in saved.items()
    }
    return ocp_v1.load_pytree(ckpt_dir, abstract)
"""),
    # Orbax's v0 PyTreeCheckpointer with restore arguments built by hand: ArrayRestoreArgs given the
    # mesh and mesh_axes (not a sharding), the item left to the handler; the tree walked with
    # jax.tree_util over the PyTree handler's metadata.
    ("v0_pytree_checkpointer_array_restore_args", """
def restore_on_new_mesh(ckpt_dir, mesh):
    checkpointer = ocp.PyTreeCheckpointer()
    tree = checkpointer.metadata(ckpt_dir).item_metadata.tree
    restore_args = jax.tree_util.tree_map(
        lambda m: ocp.ArrayRestoreArgs(restore_type=jax.Array, dtype=m.dtype, global_shape=tuple(m.shape),
                                       mesh=mesh, mesh_axes=PartitionSpec(*m.sharding.partition_spec)),
        tree)
    return checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=restore_args))
"""),
    # The checkpoint's own files: the saved specs from the `_sharding` JSON (keys base64 of the
    # leaf's name), shapes and dtypes from the zarr header TensorStore opens, then the
    # StandardCheckpointer restoring into that abstract tree.
    ("sharding_json_file_and_standard_restore", """
import base64
import json

import tensorstore as ts


def restore_on_new_mesh(ckpt_dir, mesh):
    with open(os.path.join(ckpt_dir, "_sharding")) as f:
        recorded = json.load(f)
    base = "file://" + os.path.abspath(ckpt_dir)
    abstract = {}
    for key, text in recorded.items():
        name = base64.b64decode(key).decode("utf-8")
        entries = json.loads(text)["partition_spec"]
        spec = PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in entries])
        stored = ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base, "path": name + "/"}},
                         open=True).result()
        abstract[name] = jax.ShapeDtypeStruct(tuple(stored.shape), stored.dtype.numpy_dtype,
                                              sharding=NamedSharding(mesh, spec))
    return ocp.StandardCheckpointer().restore(ckpt_dir, abstract)
"""),
    # No Orbax restore at all: TensorStore reads each device's slice of each saved array, and
    # jax.make_array_from_callback assembles the global array on the new mesh from those slices.
    ("tensorstore_per_device_callback", """
import tensorstore as ts


def restore_on_new_mesh(ckpt_dir, mesh):
    metadata = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree
    base = "file://" + os.path.abspath(ckpt_dir)
    out = {}
    for name, m in metadata.items():
        stored = ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base, "path": f"{name}/"}}).result()
        sharding = NamedSharding(mesh, PartitionSpec(*m.sharding.partition_spec))
        out[name] = jax.make_array_from_callback(
            tuple(stored.shape), sharding, lambda index, s=stored: np.asarray(s[index].read().result()))
    return out
"""),
]
MIGRATE = [
    # The whole checkpoint restored as NumPy (v0 PyTreeCheckpointer, RestoreArgs(restore_type=np.ndarray)
    # for every leaf), then renamed in flax.traverse_util's flat dicts ('/'-joined keys) and checked leaf
    # by leaf against the target; every fault found goes in one message; unflatten_dict nests the result.
    ("flax_flatten_whole_numpy_restore", """
from flax import traverse_util


def migrate_checkpoint(ckpt_dir, target, rename, new):
    checkpointer = ocp.PyTreeCheckpointer()
    tree = checkpointer.metadata(ckpt_dir).item_metadata.tree
    restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    saved = traverse_util.flatten_dict(
        checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=restore_args)), sep="/")
    wanted = traverse_util.flatten_dict(target, sep="/")
    placed, claimed, problems = {}, set(), []
    for path, value in saved.items():
        dest = rename[path] if path in rename else path
        if dest is None:
            continue
        if dest not in wanted:
            problems.append(f"saved leaf {path!r} has no place in the new model (as {dest!r})")
            continue
        if dest in claimed:
            problems.append(f"saved leaf {path!r} goes to {dest!r}, which another saved leaf fills")
        want = wanted[dest]
        if tuple(value.shape) != tuple(want.shape) or np.dtype(value.dtype) != np.dtype(want.dtype):
            problems.append(f"saved leaf {path!r} is {value.dtype}{list(value.shape)}, but {dest!r} in the "
                            f"new model is {np.dtype(want.dtype)}{list(want.shape)}")
        claimed.add(dest)
        placed[dest] = value
    out = {}
    for path in wanted:
        if path in placed:
            out[path] = placed[path]
        elif path in new:
            out[path] = np.asarray(new[path])
        elif path not in claimed:
            problems.append(f"the new model's leaf {path!r} is neither in the checkpoint nor in new")
    if problems:
        raise ValueError("; ".join(problems))
    return traverse_util.unflatten_dict(out, sep="/")
"""),
    # Orbax's v1 API: every check against v1's pytree_metadata first, then load_pytree with a target
    # tree of NumPy leaves naming only the kept ones (so they come back as NumPy, 64-bit integers
    # intact), under a Context that allows a partial load; renamed afterwards. Hand-written flatten/nest.
    ("orbax_v1_partial_load", """
def migrate_checkpoint(ckpt_dir, target, rename, new):
    def flat(tree, prefix=""):
        out = {}
        for key, value in tree.items():
            path = prefix + str(key)
            if isinstance(value, dict):
                out.update(flat(value, path + "/"))
            else:
                out[path] = value
        return out

    def nest(flat_tree):
        out = {}
        for path, value in flat_tree.items():
            *parents, last = path.split("/")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        return out

    saved = flat(ocp_v1.pytree_metadata(ckpt_dir).metadata)
    wanted = flat(target)
    source, errors = {}, []
    for path, meta in saved.items():
        dest = rename.get(path, path)
        if dest is None:
            continue
        if dest not in wanted:
            errors.append(f"{path}: no place for it in the new model")
            continue
        if dest in source:
            errors.append(f"{path}: {dest} is already given by {source[dest]}")
        if tuple(meta.shape) != tuple(wanted[dest].shape):
            errors.append(f"{path}: saved shape {tuple(meta.shape)}, target {tuple(wanted[dest].shape)}")
        if np.dtype(meta.dtype) != np.dtype(wanted[dest].dtype):
            errors.append(f"{path}: saved dtype {meta.dtype}, target {np.dtype(wanted[dest].dtype)}")
        source[dest] = path
    errors += [f"{path}: not in the checkpoint and no initial value in new"
               for path in wanted if path not in source and path not in new]
    if errors:
        raise ValueError("cannot migrate without a silent change: " + "; ".join(errors))
    # NumPy leaves (np.empty touches no memory) ask for NumPy back: no device, no 64-bit narrowing.
    abstract = nest({src: np.empty(saved[src].shape, saved[src].dtype) for src in source.values()})
    loaded = {}
    if source:
        context = ocp_v1.Context()
        context.pytree.loading.partial_load = True
        with context:
            loaded = flat(ocp_v1.load_pytree(ckpt_dir, abstract))
    return nest({path: loaded[source[path]] if path in source else np.asarray(new[path]) for path in wanted})
"""),
    # The checks as set algebra over paths (jax.tree_util.tree_flatten_with_path on the v0 metadata and
    # the target): unplaced = kept - target, unprovided = target - kept - new, then the shared leaves'
    # shapes and dtypes; then a v0 partial restore (PyTreeRestore, partial_restore=True) of the kept
    # leaves only, as NumPy.
    ("set_algebra_then_partial_restore", """
def migrate_checkpoint(ckpt_dir, target, rename, new):
    def paths(tree):
        leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
        return {"/".join(str(k.key) for k in path): leaf for path, leaf in leaves}

    def nest(flat_tree):
        out = {}
        for path, value in flat_tree.items():
            node = out
            for part in path.split("/")[:-1]:
                node = node.setdefault(part, {})
            node[path.split("/")[-1]] = value
        return out

    checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
    saved = paths(checkpointer.metadata(ckpt_dir).item_metadata.tree)
    wanted = paths(target)
    kept_sources = set(saved) - {p for p in saved if p in rename and rename[p] is None}
    kept = {rename.get(p, p): p for p in kept_sources}
    faults = []
    if len(kept) != len(kept_sources):
        dests = [rename.get(p, p) for p in kept_sources]
        faults.append(f"saved leaves sent to one place: {sorted(p for p in kept_sources if dests.count(rename.get(p, p)) > 1)}")
    unplaced = {kept[d] for d in set(kept) - set(wanted)}
    if unplaced:
        faults.append(f"saved leaves with no place in the new model: {sorted(unplaced)}")
    unprovided = set(wanted) - set(kept) - set(new)
    if unprovided:
        faults.append(f"new-model leaves neither saved nor in new: {sorted(unprovided)}")
    unfit = {kept[d] for d in set(kept) & set(wanted)
             if (tuple(saved[kept[d]].shape), np.dtype(saved[kept[d]].dtype))
             != (tuple(wanted[d].shape), np.dtype(wanted[d].dtype))}
    if unfit:
        faults.append(f"saved leaves whose shape or dtype is not the target's: {sorted(unfit)}")
    if faults:
        raise ValueError("; ".join(faults))
    values = {}
    if kept:
        item = nest({src: 0 for src in kept.values()})
        restore_args = nest({src: ocp.RestoreArgs(restore_type=np.ndarray) for src in kept.values()})
        values = paths(checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=item, restore_args=restore_args, partial_restore=True)))
    return nest({d: values[kept[d]] if d in kept else np.asarray(new[d]) for d in wanted})
"""),
    # TensorStore, no Orbax restore: the saved leaves listed from the checkpoint's _METADATA file
    # (tuple-keyed paths), each leaf's zarr array opened in the OCDBT store for its shape and dtype,
    # and read only when kept; the target walked with an explicit stack.
    ("tensorstore_leaf_reads", """
import ast
import json

import tensorstore as ts


def migrate_checkpoint(ckpt_dir, target, rename, new):
    with open(os.path.join(ckpt_dir, "_METADATA")) as f:
        keys = [ast.literal_eval(k) for k in json.load(f)["tree_metadata"]]
    base = "file://" + os.path.abspath(ckpt_dir)
    stores = {"/".join(map(str, key)): ts.open({"driver": "zarr", "kvstore": {
        "driver": "ocdbt", "base": base, "path": ".".join(map(str, key)) + "/"}}).result() for key in keys}

    wanted = {}
    stack = [("", target)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            if isinstance(value, dict):
                stack.append((prefix + key + "/", value))
            else:
                wanted[prefix + key] = value

    source, bad = {}, []
    for path in sorted(stores):
        dest = rename.get(path, path)
        if dest is None:
            continue
        if dest not in wanted or dest in source:
            bad.append(f"saved leaf {path!r} has no free place in the new model")
            continue
        store, want = stores[path], wanted[dest]
        if tuple(store.shape) != tuple(want.shape) or store.dtype.numpy_dtype != np.dtype(want.dtype):
            bad.append(f"saved leaf {path!r} ({store.dtype.numpy_dtype}{list(store.shape)}) does not "
                       f"fit {dest!r} ({np.dtype(want.dtype)}{list(want.shape)})")
        source[dest] = path
    bad += [f"no value for the new model's leaf {p!r}" for p in sorted(wanted) if p not in source and p not in new]
    if bad:
        raise ValueError("\\n".join(bad))

    out = {}
    for path in wanted:
        value = stores[source[path]].read().result() if path in source else np.asarray(new[path])
        node = out
        *parents, last = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out
"""),
]
COMPARE = [
    # flax.traverse_util over both checkpoints' v0 metadata gives the first three lists as set
    # algebra; the values come from one whole restore per checkpoint as NumPy (StandardCheckpointer
    # restoring into ShapeDtypeStructs without a sharding); exact arithmetic (Python ints and
    # fractions) wherever an integer is involved, float64 otherwise.
    ("flax_flatten_numpy_restore_exact_fractions", """
from fractions import Fraction

from flax import traverse_util


def compare_checkpoints(a_dir, b_dir, rtol):
    def load(path):
        checkpointer = ocp.StandardCheckpointer()
        meta = checkpointer.metadata(path).item_metadata.tree
        abstract = jax.tree_util.tree_map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), meta)
        return traverse_util.flatten_dict(checkpointer.restore(path, abstract), sep="/")

    def differs(x, y):
        x_int, y_int = x.dtype.kind in "iub", y.dtype.kind in "iub"
        if x_int or y_int:
            for u, v in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
                if any(isinstance(w, float) and not math.isfinite(w) for w in (u, v)):
                    return True
                u, v = Fraction(u), Fraction(v)
                if abs(u - v) > Fraction(rtol) * max(abs(u), abs(v)):
                    return True
            return False
        x, y = x.astype(np.float64), y.astype(np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        same = (x == y) | both_nan
        with np.errstate(invalid="ignore", over="ignore"):
            beyond = np.abs(x - y) > rtol * np.maximum(np.abs(x), np.abs(y))
        one_nan = np.isnan(x) ^ np.isnan(y)
        infinite = np.isinf(x) | np.isinf(y)
        return bool(np.any(~same & (beyond | one_nan | infinite)))

    a, b = load(a_dir), load(b_dir)
    both = set(a) & set(b)
    return {
        "missing": sorted(set(a) - set(b)),
        "extra": sorted(set(b) - set(a)),
        "mismatched": sorted(p for p in both if (a[p].shape, a[p].dtype) != (b[p].shape, b[p].dtype)),
        "differing": sorted(p for p in both if a[p].shape == b[p].shape and differs(a[p], b[p])),
    }
"""),
    # jax.tree_util.tree_flatten_with_path over the v0 PyTree handler's metadata; each shared leaf read
    # straight from its zarr array in the OCDBT store with TensorStore (no Orbax restore); the
    # comparison vectorised in NumPy: object arrays of Python ints (exact) when an integer is involved.
    ("tree_flatten_with_path_tensorstore_reads", """
from fractions import Fraction

import tensorstore as ts


def compare_checkpoints(a_dir, b_dir, rtol):
    def leaves(path):
        tree = ocp.PyTreeCheckpointer().metadata(path).item_metadata.tree
        flat, _ = jax.tree_util.tree_flatten_with_path(tree)
        return {"/".join(k.key for k in keys): m for keys, m in flat}

    def read(ckpt_dir, path):
        spec = {"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": "file://" + os.path.abspath(ckpt_dir),
                                              "path": path.replace("/", ".") + "/"}}
        return ts.open(spec).result().read().result()

    def exact(x):
        if x.dtype.kind in "iub":
            return x.astype(object).reshape(-1) if x.dtype.kind != "b" else x.astype(np.int64).astype(object).reshape(-1)
        x = x.astype(np.float64).reshape(-1)
        return np.array([Fraction(v) if math.isfinite(v) else v for v in x.tolist()], dtype=object)

    def differ(x, y):
        if x.dtype.kind in "iub" or y.dtype.kind in "iub":
            xs, ys = exact(x), exact(y)
            finite = np.array([not isinstance(v, float) for v in xs]) & np.array([not isinstance(v, float) for v in ys])
            if not finite.all():
                return True  # an integer against a NaN or an infinity
            return bool(np.any(np.abs(xs - ys) > Fraction(rtol) * np.maximum(np.abs(xs), np.abs(ys))))
        x, y = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close = (x == y) | (np.isnan(x) & np.isnan(y)) | (
                np.isfinite(x) & np.isfinite(y) & ~(np.abs(x - y) > rtol * np.maximum(np.abs(x), np.abs(y))))
        return not bool(close.all())

    a, b = leaves(a_dir), leaves(b_dir)
    shared = sorted(set(a) & set(b))
    report = {"missing": sorted(set(a) - set(b)), "extra": sorted(set(b) - set(a)), "mismatched": [], "differing": []}
    for path in shared:
        same_shape = tuple(a[path].shape) == tuple(b[path].shape)
        if not same_shape or np.dtype(a[path].dtype) != np.dtype(b[path].dtype):
            report["mismatched"].append(path)
        if same_shape and differ(read(a_dir, path), read(b_dir, path)):
            report["differing"].append(path)
    return report
"""),
    # Orbax's v1 API: pytree_metadata of both checkpoints walked by hand, then one load_pytree per leaf
    # and checkpoint with a partial-load Context (a tree naming that leaf alone, a NumPy leaf so as to get NumPy back), so that
    # only two leaves are ever in memory; integers compared with integer cross-multiplication
    # (rtol as an exact fraction), element by element.
    ("orbax_v1_leaf_by_leaf_partial_load", """
from fractions import Fraction


def compare_checkpoints(a_dir, b_dir, rtol):
    def walk(tree, prefix=()):
        for key, value in tree.items():
            if isinstance(value, dict):
                yield from walk(value, prefix + (key,))
            else:
                yield prefix + (key,), value

    def load_one(ckpt_dir, keys, meta):
        abstract = leaf = np.empty(tuple(meta.shape), meta.dtype)  # a NumPy leaf: restored as NumPy
        for key in reversed(keys):
            abstract = {key: abstract}
        context = ocp_v1.Context()
        context.pytree.loading.partial_load = True
        with context:
            got = ocp_v1.load_pytree(ckpt_dir, abstract)
        for key in keys:
            got = got[key]
        del leaf
        return np.asarray(got)

    num, den = Fraction(rtol).numerator, Fraction(rtol).denominator

    def pair_differs(u, v):
        if isinstance(u, int) and isinstance(v, int):
            return abs(u - v) * den > num * max(abs(u), abs(v))
        if isinstance(u, float) and isinstance(v, float):
            if math.isnan(u) or math.isnan(v):
                return math.isnan(u) != math.isnan(v)
            if u == v:
                return False
            if math.isinf(u) or math.isinf(v):
                return True
            return abs(u - v) > rtol * max(abs(u), abs(v))
        if not (math.isfinite(u) and math.isfinite(v)):
            return True
        u, v = Fraction(u), Fraction(v)
        return abs(u - v) * den > num * max(abs(u), abs(v))

    def python_numbers(x):
        if x.dtype.kind in "iub":
            return x.reshape(-1).tolist()
        return x.astype(np.float64).reshape(-1).tolist()

    a = dict(walk(ocp_v1.pytree_metadata(a_dir).metadata))
    b = dict(walk(ocp_v1.pytree_metadata(b_dir).metadata))
    missing = sorted("/".join(k) for k in a.keys() - b.keys())
    extra = sorted("/".join(k) for k in b.keys() - a.keys())
    mismatched, differing = [], []
    for keys in a.keys() & b.keys():
        ma, mb = a[keys], b[keys]
        if tuple(ma.shape) != tuple(mb.shape) or np.dtype(ma.dtype) != np.dtype(mb.dtype):
            mismatched.append("/".join(keys))
        if tuple(ma.shape) == tuple(mb.shape):
            xs = python_numbers(load_one(a_dir, keys, ma))
            ys = python_numbers(load_one(b_dir, keys, mb))
            if any(pair_differs(u, v) for u, v in zip(xs, ys)):
                differing.append("/".join(keys))
    return {"missing": missing, "extra": extra, "mismatched": sorted(mismatched), "differing": sorted(differing)}
"""),
    # A chunked comparison: the leaf paths and shapes from the checkpoints' _METADATA JSON (its
    # tuple-string keys) and each zarr header, the values read block by block along the first axis
    # with TensorStore (at most 2**16 elements a block), stopping at the first block that differs;
    # integer blocks compared in Python integers.
    ("chunked_tensorstore_blocks", """
import ast
import json
from fractions import Fraction

import tensorstore as ts


def compare_checkpoints(a_dir, b_dir, rtol):
    def arrays(ckpt_dir):
        with open(os.path.join(ckpt_dir, "_METADATA")) as f:
            keys = [ast.literal_eval(k) for k in json.load(f)["tree_metadata"]]
        base = "file://" + os.path.abspath(ckpt_dir)
        return {"/".join(map(str, k)): ts.open({"driver": "zarr", "kvstore": {
            "driver": "ocdbt", "base": base, "path": ".".join(map(str, k)) + "/"}}).result() for k in keys}

    def block_differs(x, y):
        if x.dtype.kind in "iub" or y.dtype.kind in "iub":
            for u, v in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
                if isinstance(u, float) and not math.isfinite(u) or isinstance(v, float) and not math.isfinite(v):
                    return True
                fu, fv = Fraction(u), Fraction(v)
                if abs(fu - fv) > Fraction(rtol) * max(abs(fu), abs(fv)):
                    return True
            return False
        x = x.astype(np.float64)
        y = y.astype(np.float64)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        if np.any(nan_x != nan_y):
            return True
        ok = nan_x | (x == y)
        rest = ~ok
        if np.any(np.isinf(x[rest]) | np.isinf(y[rest])):
            return True
        xr, yr = x[rest], y[rest]
        return bool(np.any(np.abs(xr - yr) > rtol * np.maximum(np.abs(xr), np.abs(yr))))

    def differs(sa, sb):
        shape = tuple(sa.shape)
        if not shape:
            return block_differs(np.asarray(sa.read().result()), np.asarray(sb.read().result()))
        per_row = max(1, math.prod(shape[1:]))
        rows = max(1, 2**16 // per_row)
        for start in range(0, shape[0], rows):
            stop = min(shape[0], start + rows)
            if block_differs(np.asarray(sa[start:stop].read().result()), np.asarray(sb[start:stop].read().result())):
                return True
        return False

    a, b = arrays(a_dir), arrays(b_dir)
    result = {"missing": sorted(set(a) - set(b)), "extra": sorted(set(b) - set(a)), "mismatched": [], "differing": []}
    for path in sorted(set(a) & set(b)):
        sa, sb = a[path], b[path]
        if tuple(sa.shape) != tuple(sb.shape) or sa.dtype.numpy_dtype != sb.dtype.numpy_dtype:
            result["mismatched"].append(path)
        if tuple(sa.shape) == tuple(sb.shape) and differs(sa, sb):
            result["differing"].append(path)
    return result
"""),
]

RIGHT = {
    "restore_on_new_mesh": RESTORE,
    "migrate_checkpoint": MIGRATE,
    "compare_checkpoints": COMPARE,
}
