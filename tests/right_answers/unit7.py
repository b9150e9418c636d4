"""Unit 7's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit7.py."""

from autograder.units.unit7 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

RESTORE = [
    # Orbax's v1 API: the saved specs from v1's metadata (each leaf's sharding_metadata), an
    # abstract tree of ShapeDtypeStructs placed on the new mesh, and load with it.
    ("orbax_v1_abstract_tree", """
def restore_on_new_mesh(ckpt_dir, mesh):
    saved = ocp_v1.metadata(ckpt_dir).metadata
    abstract = {
        name: jax.ShapeDtypeStruct(
            m.shape, m.dtype,
            sharding=NamedSharding(mesh, PartitionSpec(*m.sharding_metadata.partition_spec)))
        for name, m in saved.items()
    }
    return ocp_v1.load(ckpt_dir, abstract)
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
    # Orbax's v1 API: every check against v1's metadata first, then load with a target
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

    saved = flat(ocp_v1.metadata(ckpt_dir).metadata)
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
            loaded = flat(ocp_v1.load(ckpt_dir, abstract))
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
    # Orbax's v1 API: metadata of both checkpoints walked by hand, then one load per leaf
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
            got = ocp_v1.load(ckpt_dir, abstract)
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

    a = dict(walk(ocp_v1.metadata(a_dir).metadata))
    b = dict(walk(ocp_v1.metadata(b_dir).metadata))
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

UNSTACK = [
    # Orbax's v1 API for reading too: the metadata from ocp_v1.metadata, one load per leaf under a
    # partial-load Context (a NumPy leaf in the abstract tree: the stack comes back as one host copy),
    # np.take per layer, device_put with the stack's spec less its scan entry; one partial save per array.
    ("orbax_v1_partial_load_numpy_take", """
def _u74_spec(entries, rank, drop=None):
    entries = [tuple(e) if isinstance(e, list) else e for e in (entries or ())]
    entries += [None] * (rank - len(entries))
    if drop is not None:
        del entries[drop]
    return PartitionSpec(*entries)


def _u74_leaves(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _u74_leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _u74_nest(keys, leaf):
    for key in reversed(keys):
        leaf = {key: leaf}
    return leaf


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    saved = ocp_v1.metadata(ckpt_dir).metadata
    prefixes = [tuple(g.split("/")) for g in groups]
    context = ocp_v1.Context()
    context.pytree.loading.partial_load = True
    for keys, meta in _u74_leaves(saved):
        shape, rank = tuple(meta.shape), len(meta.shape)
        spec = meta.sharding_metadata.partition_spec
        group = next((p for p in prefixes if keys[:len(p)] == p), None)
        if group is None:
            # Not stacked: loaded onto the mesh as saved, written as it is.
            abstract = jax.ShapeDtypeStruct(shape, meta.dtype, sharding=NamedSharding(mesh, _u74_spec(spec, rank)))
            with context:
                leaf = ocp_v1.load(ckpt_dir, _u74_nest(keys, abstract))
            ocp_v1.partial.save(out_dir, leaf)
            del leaf
            continue
        # A NumPy leaf in the abstract tree asks for NumPy back: one host copy of the stack.
        with context:
            stack = ocp_v1.load(ckpt_dir, _u74_nest(keys, np.empty(shape, meta.dtype)))
        for key in keys:
            stack = stack[key]
        sharding = NamedSharding(mesh, _u74_spec(spec, rank, drop=scan_axis))
        rest = keys[len(group):]
        layers = {}
        for i in range(shape[scan_axis]):
            layer_keys = group[:-1] + (f"{group[-1]}_{i}",) + rest
            layers[layer_keys] = jax.device_put(np.take(stack, i, axis=scan_axis), sharding)
        del stack
        out = {}
        for layer_keys, layer in layers.items():
            node = out
            for key in layer_keys[:-1]:
                node = node.setdefault(key, {})
            node[layer_keys[-1]] = layer
        del layers
        ocp_v1.partial.save(out_dir, out)
        del out
    ocp_v1.partial.finalize(out_dir)
"""),
    # No Orbax restore at all: each stacked array's zarr array opened in the OCDBT store with TensorStore,
    # and every layer built with jax.make_array_from_callback, each device reading only its block of
    # that layer (an integer index at the scan axis); the stack is never read whole.
    ("tensorstore_per_layer_callback", """
import tensorstore as ts


def _u74_ts_spec(entries, rank):
    entries = [tuple(e) if isinstance(e, list) else e for e in entries]
    return entries + [None] * (rank - len(entries))


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    metadata = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree
    flat, _ = jax.tree_util.tree_flatten_with_path(metadata)
    base = "file://" + os.path.abspath(ckpt_dir)
    for key_path, meta in flat:
        keys = [k.key for k in key_path]
        path = "/".join(keys)
        # Each saved array is a zarr array in the checkpoint's OCDBT store, named by its keys joined by '.'.
        store = ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base,
                                                      "path": ".".join(keys) + "/"}}).result()
        entries = _u74_ts_spec(meta.sharding.partition_spec, len(meta.shape))
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            sharding = NamedSharding(mesh, PartitionSpec(*entries))
            named = {path: jax.make_array_from_callback(
                tuple(meta.shape), sharding, lambda index, s=store: s[index].read().result())}
        else:
            del entries[scan_axis]
            sharding = NamedSharding(mesh, PartitionSpec(*entries))
            layer_shape = tuple(meta.shape[:scan_axis]) + tuple(meta.shape[scan_axis + 1:])
            rest = path[len(group) + 1:]
            named = {}
            for i in range(meta.shape[scan_axis]):
                # Each device reads its own block of layer i alone: an integer index drops the scan axis.
                def read(index, i=i, s=store):
                    return s[tuple(index[:scan_axis]) + (i,) + tuple(index[scan_axis:])].read().result()
                named[f"{group}_{i}/{rest}"] = jax.make_array_from_callback(layer_shape, sharding, read)
        tree = {}
        for name, array in named.items():
            node = tree
            parts = name.split("/")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = array
        del named
        ocp_v1.partial.save(out_dir, tree)
        del tree
    ocp_v1.partial.finalize(out_dir)
"""),
    # MaxText's way, one array at a time: v0 PyTreeCheckpointer restoring the stack onto the devices with
    # its saved sharding (construct_restore_args, partial_restore=True), the layers sliced there by a
    # jax.jit(..., out_shardings=<the layer's sharding>) of lax.dynamic_index_in_dim.
    ("v0_sharded_restore_jit_slice", """
def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    checkpointer = ocp.PyTreeCheckpointer()
    tree = checkpointer.metadata(ckpt_dir).item_metadata.tree
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    for key_path, meta in leaves:
        keys = [k.key for k in key_path]
        path = "/".join(keys)
        spec = [tuple(e) if isinstance(e, list) else e for e in meta.sharding.partition_spec]
        spec += [None] * (len(meta.shape) - len(spec))
        # A target naming this one leaf, placed as saved: the stack lands on the devices, sharded.
        target = jax.ShapeDtypeStruct(tuple(meta.shape), meta.dtype, sharding=NamedSharding(mesh, PartitionSpec(*spec)))
        for key in reversed(keys):
            target = {key: target}
        restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
        array = restored
        for key in keys:
            array = array[key]
        del restored
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            out = {path: array}
        else:
            layer_sharding = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
            rest = path[len(group) + 1:]
            # As MaxText's generate_param_only_checkpoint.py slices a scanned stack: on the devices, with
            # the per-layer sharding as out_shardings (the layer index traced: one compilation per array).
            slice_layer = jax.jit(lambda stack, i: jax.lax.dynamic_index_in_dim(stack, i, scan_axis, keepdims=False),
                                  out_shardings=layer_sharding)
            out = {f"{group}_{i}/{rest}": slice_layer(array, i) for i in range(meta.shape[scan_axis])}
            jax.block_until_ready(list(out.values()))
        del array
        nested = {}
        for name, value in out.items():
            node = nested
            *parents, last = name.split("/")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        del out
        ocp_v1.partial.save(out_dir, nested)
        del nested
    ocp_v1.partial.finalize(out_dir)
"""),
    # Layer by layer: one ocp_v1.partial.save per layer of each stacked array; flax.traverse_util's
    # '/'-joined flat dicts for every path; each leaf read by a v0 restore of the whole tree's structure
    # with every other leaf an ocp.PLACEHOLDER (skipped), the stacks as NumPy.
    ("layer_by_layer_saves_placeholders_traverse_util", """
from flax import traverse_util


def _u74_one_leaf(flat_meta, wanted, value):
    # The whole tree's structure, every other leaf an Orbax placeholder (skipped: never read).
    return traverse_util.unflatten_dict(
        {path: value if path == wanted else ocp.PLACEHOLDER for path in flat_meta}, sep="/")


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    checkpointer = ocp.PyTreeCheckpointer()
    flat_meta = traverse_util.flatten_dict(checkpointer.metadata(ckpt_dir).item_metadata.tree, sep="/")
    for path, meta in flat_meta.items():
        spec = [tuple(e) if isinstance(e, list) else e for e in meta.sharding.partition_spec]
        spec += [None] * (len(meta.shape) - len(spec))
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            sharding = NamedSharding(mesh, PartitionSpec(*spec))
            args = ocp.ArrayRestoreArgs(sharding=sharding, global_shape=tuple(meta.shape), dtype=meta.dtype)
        else:
            args = ocp.RestoreArgs(restore_type=np.ndarray, dtype=meta.dtype)
        restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=_u74_one_leaf(flat_meta, path, 0), restore_args=_u74_one_leaf(flat_meta, path, args)))
        value = traverse_util.flatten_dict(restored, sep="/")[path]
        del restored
        if group is None:
            ocp_v1.partial.save(out_dir, traverse_util.unflatten_dict({path: value}, sep="/"))
            del value
            continue
        sharding = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
        rest = path[len(group) + 1:]
        # Layer by layer: one partial save per layer, so a single layer is on the devices at a time.
        for i in range(value.shape[scan_axis]):
            layer = jax.device_put(np.take(value, i, axis=scan_axis), sharding)
            ocp_v1.partial.save(out_dir, traverse_util.unflatten_dict({f"{group}_{i}/{rest}": layer}, sep="/"))
            del layer
        del value
    ocp_v1.partial.finalize(out_dir)
"""),
    # Orbax's v1 API with the stack loaded onto the devices as saved (a sharded ShapeDtypeStruct, partial
    # load), split there in one jitted jnp.unstack whose out_shardings lay every layer out at once; the
    # v1 metadata walked with jax.tree_util.tree_map_with_path; written with partial.save_async, awaited.
    ("v1_sharded_load_jnp_unstack", """
def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    metadata = ocp_v1.metadata(ckpt_dir).metadata
    saved = {}

    def record(key_path, meta):
        saved[tuple(k.key for k in key_path)] = meta

    jax.tree_util.tree_map_with_path(record, metadata)
    group_keys = [tuple(g.split("/")) for g in groups]
    partial_load = ocp_v1.Context()
    partial_load.pytree.loading.partial_load = True

    def as_tree(flat):
        tree = {}
        for keys, value in flat.items():
            node = tree
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
        return tree

    for keys, meta in saved.items():
        spec = list(meta.sharding_metadata.partition_spec)
        spec = [tuple(e) if isinstance(e, list) else e for e in spec] + [None] * (len(meta.shape) - len(spec))
        abstract = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, PartitionSpec(*spec)))
        with partial_load:
            loaded = ocp_v1.load(ckpt_dir, as_tree({keys: abstract}))
        for key in keys:
            loaded = loaded[key]
        group = next((g for g in group_keys if keys[:len(g)] == g), None)
        if group is None:
            ocp_v1.partial.save(out_dir, as_tree({keys: loaded}))
            del loaded
            continue
        # The stack is on the devices, sharded as saved: jnp.unstack splits it there, in one compiled
        # program per array whose outputs are laid out with the stack's spec less its scan-axis entry.
        layer_sharding = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
        split = jax.jit(lambda stack: jnp.unstack(stack, axis=scan_axis), out_shardings=layer_sharding)
        layers = {group[:-1] + (f"{group[-1]}_{i}",) + keys[len(group):]: layer
                  for i, layer in enumerate(split(loaded))}
        del loaded
        ocp_v1.partial.save_async(out_dir, as_tree(layers)).result()
        del layers
    ocp_v1.partial.finalize(out_dir)
"""),
    # Eager JAX, no jit of its own: the stack loaded onto the devices (v1, partial load), split by
    # jnp.unstack outside jit (which compiles a program per shape and sharding, kept by JAX: the grader
    # forgets them between cases), each layer device_put to its sharding.
    ("v1_eager_jnp_unstack", """
def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    metadata = ocp_v1.metadata(ckpt_dir).metadata
    saved = {}

    def record(key_path, meta):
        saved[tuple(k.key for k in key_path)] = meta

    jax.tree_util.tree_map_with_path(record, metadata)
    group_keys = [tuple(g.split("/")) for g in groups]
    partial_load = ocp_v1.Context()
    partial_load.pytree.loading.partial_load = True

    def as_tree(flat):
        tree = {}
        for keys, value in flat.items():
            node = tree
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
        return tree

    for keys, meta in saved.items():
        spec = list(meta.sharding_metadata.partition_spec)
        spec = [tuple(e) if isinstance(e, list) else e for e in spec] + [None] * (len(meta.shape) - len(spec))
        abstract = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, PartitionSpec(*spec)))
        with partial_load:
            loaded = ocp_v1.load(ckpt_dir, as_tree({keys: abstract}))
        for key in keys:
            loaded = loaded[key]
        group = next((g for g in group_keys if keys[:len(g)] == g), None)
        if group is None:
            ocp_v1.partial.save(out_dir, as_tree({keys: loaded}))
            del loaded
            continue
        layer_sharding = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
        layer_path = lambda i: group[:-1] + (f"{group[-1]}_{i}",) + keys[len(group):]  # noqa: E731
        layers = {layer_path(i): jax.device_put(layer, layer_sharding)
                  for i, layer in enumerate(jnp.unstack(loaded, axis=scan_axis))}
        jax.block_until_ready(list(layers.values()))
        del loaded
        ocp_v1.partial.save_async(out_dir, as_tree(layers)).result()
        del layers
    ocp_v1.partial.finalize(out_dir)
"""),
]

RIGHT = {
    "restore_on_new_mesh": RESTORE,
    "migrate_checkpoint": MIGRATE,
    "compare_checkpoints": COMPARE,
    "unstack_layers": UNSTACK,
}
