"""What the problems that return a checkpoint's contents must return, one spec each (the generic
specs are in :mod:`autograder.wall.returns`; the training runs of 5.3 and 8.3 in
:mod:`autograder.wall.run_returns`): a checkpoint restored onto a mesh (Unit 3), a safetensors shard
(Unit 4), and the trees served, written, placed, migrated and unstacked of Units 6 and 7.

Each also checks a public example from the example's own arguments (``check_example``: no reference
needed), in the learner's kernel, on real arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.wall.returns import ArrayTree, ExactArray, ReturnSpec, leaves_with_paths, type_name


@dataclass(frozen=True)
class RestoredTree(ReturnSpec):
    """A restored pytree (nested dicts) of jax.Arrays: values, dtype, sharding and the shard on each
    device must all match."""

    checks_examples = True

    @property
    def describe(self) -> str:
        return "a dict of jax.Arrays (the restored pytree, shaped like the specs)"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.codec import JaxArray

        if type(v) is not dict:
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        for path, leaf in leaves_with_paths(v):
            if not isinstance(leaf, JaxArray):
                return (f"must return {self.describe}, but {repr(path) if detail else 'an array'} is a "
                        f"{type_name(leaf, detail)}: restore onto "
                        "the devices, with a target sharding, instead of converting to NumPy")
        return None

    def has_nan(self, v) -> bool:
        return any(np.isnan(np.asarray(leaf, np.float64)).any() for _, leaf in leaves_with_paths(v)
                   if np.asarray(leaf).dtype.kind == "f")

    def check_example(self, args, real_args, got) -> str | None:
        """Check a public example from its own arguments (no reference needed): the saved values,
        placed as ``NamedSharding(mesh, spec)`` says. Runs in the learner's kernel, on real arrays."""
        import jax
        from jax.sharding import NamedSharding

        ckpt, (_, mesh, specs) = args[0], real_args
        values = ckpt.values()
        if not isinstance(got, dict) or set(got) != set(values):
            return f"must return a dict with keys {sorted(values)}, got {type(got).__name__}"
        for name, want in values.items():
            leaf = got[name]
            if not isinstance(leaf, jax.Array):
                return f"{name!r} is a {type(leaf).__name__}, not a jax.Array"
            if leaf.dtype != want.dtype:  # (values compare equal across a cast: bfloat16's fit in float32)
                return f"{name!r} is {leaf.dtype}, but was saved as {want.dtype}: take each dtype from the metadata"
            if not np.array_equal(np.asarray(leaf), want):
                return f"the values of {name!r} differ from the checkpoint's"
            target = NamedSharding(mesh, specs[name])
            if not leaf.sharding.is_equivalent_to(target, leaf.ndim):
                return f"{name!r} is sharded as {leaf.sharding}, but the spec asks for {target}"
            shapes = {tuple(s.data.shape) for s in leaf.addressable_shards}
            if shapes != {target.shard_shape(leaf.shape)}:
                return f"{name!r} has shards of shapes {sorted(shapes)}, expected {target.shard_shape(leaf.shape)}"
        return None

    def equal(self, actual, expected) -> bool:
        a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
        return set(a) == set(e) and all(
            a[k].dtype == e[k].dtype and a[k].shape == e[k].shape and np.array_equal(np.asarray(a[k]), np.asarray(e[k]))
            and a[k].placement == e[k].placement for k in e)


@dataclass(frozen=True)
class SafetensorsShard(ExactArray):
    """A shard read from a safetensors file: checked against the file's own values."""

    checks_examples = True

    def check_example(self, args, real_args, got) -> str | None:
        arg, name, bounds = args
        want = arg.values()[name][tuple(slice(start, stop) for start, stop in bounds)]
        if not isinstance(got, np.ndarray):
            return f"must return {self.describe}, but returned a {type(got).__name__}"
        if got.dtype != want.dtype:
            return f"the dtype is {got.dtype}, but the tensor's is {want.dtype}"
        if got.shape != want.shape:
            return f"the shape is {got.shape}, but bounds {bounds} give {want.shape}"
        if not np.array_equal(got, want):
            return "the values differ from the tensor's (check the base offset and the row-major order)"
        return None


@dataclass(frozen=True)
class ServedTree(RestoredTree):
    """The parameters restored for serving, from a memory-measured worker: its arrays come back as
    digests (:class:`~autograder.wall.codec.ArrayDigest`), and dtype, shape, bytes and sharding
    must all match."""

    dtype: str = "bfloat16"

    @property
    def describe(self) -> str:
        return "a dict of jax.Arrays (the parameters, keyed like the specs)"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.codec import ArrayDigest

        if type(v) is not dict:
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        for path, leaf in leaves_with_paths(v):
            if not (isinstance(leaf, ArrayDigest) and leaf.jax):
                return (f"must return {self.describe}, but {repr(path) if detail else 'an array'} is not a jax.Array: "
                        "restore onto the devices, with a target sharding")
        return None

    def has_nan(self, v) -> bool:
        return False  # (digests: NaNs show as wrong values)

    def equal(self, actual, expected) -> bool:
        a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
        return set(a) == set(e) and all(a[k].same(e[k]) for k in e)

    def check_example(self, args, real_args, got) -> str | None:
        """The saved parameters, cast to ``dtype`` and placed as the specs say (memory is the
        grader's to measure: see the problem's statement)."""
        import jax
        import ml_dtypes  # noqa: F401 - registers bfloat16 with NumPy
        from jax.sharding import NamedSharding

        ckpt, (_, mesh, specs) = args[0], real_args
        values = ckpt.values()
        if not isinstance(got, dict) or set(got) != set(values):
            return (f"must return the parameters only, a dict with keys {sorted(values)}, got "
                    f"{sorted(got) if isinstance(got, dict) else type(got).__name__}")
        for name, saved in values.items():
            leaf = got[name]
            if not isinstance(leaf, jax.Array):
                return f"{name!r} is a {type(leaf).__name__}, not a jax.Array"
            if leaf.dtype != np.dtype(self.dtype):
                return f"{name!r} is {leaf.dtype}, not {self.dtype}"
            if not np.array_equal(np.asarray(leaf), saved.astype(leaf.dtype)):
                return f"the values of {name!r} differ from the checkpoint's parameters"
            target = NamedSharding(mesh, specs[name])
            if not leaf.sharding.is_equivalent_to(target, leaf.ndim):
                return f"{name!r} is sharded as {leaf.sharding}, but the spec asks for {target}"
        return None


@dataclass(frozen=True)
class WrittenTree(ServedTree):
    """A checkpoint the function wrote to its output folder, as the grader's own worker restored it
    with no target (the arrays in the layout they were saved in, as digests): names, dtypes, bytes
    and the saved sharding must all match. The function's own return value is not looked at."""

    dtype: str = ""

    @property
    def describe(self) -> str:
        return "an Orbax checkpoint in out_dir, restorable, its arrays named and sharded as asked"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.reader import UNREADABLE

        if v == UNREADABLE:
            return ("wrote no checkpoint the grader could restore in out_dir: save with Orbax into out_dir itself (with "
                    "ocp_v1.partial.save, then ocp_v1.partial.finalize)")
        return super().type_error(v, detail)

    def check_example(self, args, real_args, got) -> str | None:
        """Restore what the function wrote (in the learner's kernel) and compare it with the file's tensors,
        renamed and placed as the specs say."""
        import jax
        from jax.sharding import NamedSharding
        from orbax.checkpoint import v1 as ocp

        _, out_dir, rename, mesh, specs = real_args
        values = args[0].values()
        try:
            written = dict(ocp.load(out_dir))
        except Exception as exc:  # noqa: BLE001 - shown to the learner, in their own kernel
            return f"no checkpoint could be restored from out_dir ({type(exc).__name__}: {str(exc)[:200]})"
        if set(written) != set(rename.values()):
            return f"the checkpoint holds {sorted(written)}, but the new names are {sorted(rename.values())}"
        for old, new in rename.items():
            leaf = written[new]
            if not isinstance(leaf, jax.Array) or not np.array_equal(np.asarray(leaf), values[old]):
                return f"{new!r} does not hold the values of the file's {old!r}"
            if leaf.dtype != values[old].dtype:
                return f"{new!r} was saved as {leaf.dtype}, but the file's {old!r} is {values[old].dtype}: keep its dtype"
            target = NamedSharding(mesh, specs[new])
            if not leaf.sharding.is_equivalent_to(target, leaf.ndim):
                return f"{new!r} was saved sharded as {leaf.sharding.spec}, but the spec asks for {specs[new]}"
        return None


@dataclass(frozen=True)
class PlacedTree(ServedTree):
    """A checkpoint restored onto another mesh (Unit 7), from a memory-measured worker: each saved
    array with its saved dtype and values, placed as ``NamedSharding(mesh, <its saved spec>)``."""

    dtype: str = ""

    @property
    def describe(self) -> str:
        return "a dict of jax.Arrays (every saved array, keyed by its name)"

    def check_example(self, args, real_args, got) -> str | None:
        """The saved values and dtypes, each placed on the new mesh with the spec it was saved with."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        ckpt, (_, mesh) = args[0], real_args
        values = ckpt.values()
        if not isinstance(got, dict) or set(got) != set(values):
            return (f"must return every saved array, a dict with keys {sorted(values)}, got "
                    f"{sorted(got) if isinstance(got, dict) else type(got).__name__}")
        for name, _, _, spec in ckpt.arrays:
            leaf, saved = got[name], values[name]
            if not isinstance(leaf, jax.Array):
                return f"{name!r} is a {type(leaf).__name__}, not a jax.Array"
            if leaf.dtype != saved.dtype:
                return f"{name!r} is {leaf.dtype}, but was saved as {saved.dtype}"
            if not np.array_equal(np.asarray(leaf), saved):
                return f"the values of {name!r} differ from the checkpoint's"
            target = NamedSharding(mesh, PartitionSpec(*spec))
            if not (leaf.sharding.device_set == target.device_set and leaf.sharding.is_equivalent_to(target, leaf.ndim)):
                return (f"{name!r} is sharded as {leaf.sharding} ({len(leaf.sharding.device_set)} devices), but it was "
                        f"saved with the spec {PartitionSpec(*spec)}: on the new mesh, {target}")
        return None


@dataclass(frozen=True)
class MigratedTree(ArrayTree):
    """Problem 7.2's migrated model: :class:`~autograder.wall.returns.ArrayTree`, its public
    examples checked from their own arguments (the saved values renamed, and ``new``'s)."""

    checks_examples = True

    def check_example(self, args, real_args, got) -> str | None:
        ckpt, target, rename, new = args
        saved = ckpt.values()
        source = {rename.get(path, path): path for path in saved if rename.get(path, path) is not None}
        want = {path: saved[source[path]] if path in source else np.asarray(new[path]) for path, _ in leaves_with_paths(target)}
        import jax

        if type(got) is not dict:
            return f"must return {self.describe}, but returned a {type_name(got)}"
        for path, leaf in leaves_with_paths(got):
            if not isinstance(leaf, (np.ndarray, np.generic, jax.Array)):
                return f"{path!r} is a {type_name(leaf)}, not an array"
        have = {path: np.asarray(leaf) for path, leaf in leaves_with_paths(got)}
        if set(have) != set(want):
            return f"must return the target's leaves {sorted(want)}, got {sorted(have)}"
        for path, value in want.items():
            if have[path].dtype != value.dtype or have[path].shape != value.shape:
                return f"{path!r} is {have[path].dtype}{list(have[path].shape)}, the target's is {value.dtype}{list(value.shape)}"
            if have[path].tobytes() != np.ascontiguousarray(value).tobytes():
                return f"the values of {path!r} are not " + ("new[path]'s" if path not in source else f"the saved {source[path]!r}'s")
        return None


@dataclass(frozen=True)
class UnstackedTree(WrittenTree):
    """Problem 7.4's checkpoint, written to its output folder and restored by the grader's own worker
    with no target: each stacked group's leaves one subtree per layer, every other leaf as saved, and
    each array placed as the saved one was, less the scan axis."""

    @property
    def describe(self) -> str:
        return "an Orbax checkpoint in out_dir: one subtree per layer, each array placed on the mesh"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.codec import ArrayDigest
        from autograder.wall.reader import UNREADABLE

        if v == UNREADABLE:
            return ("wrote no checkpoint the grader could restore in out_dir: save with Orbax into out_dir itself (with "
                    "ocp_v1.partial.save, then ocp_v1.partial.finalize)")
        if type(v) is not dict:
            return f"must write {self.describe}, but it restored as a {type_name(v, detail)}"
        for path, leaf in leaves_with_paths(v):
            if not (isinstance(leaf, ArrayDigest) and leaf.jax):
                return (f"must write {self.describe}, but {repr(path) if detail else 'an array'} was saved as a "
                        f"{'NumPy array' if isinstance(leaf, ArrayDigest) else type_name(leaf, detail)}: it restores "
                        "on no device. Save jax.Arrays placed with NamedSharding(mesh, spec)")
        return None

    def check_example(self, args, real_args, got) -> str | None:
        """Restore what the function wrote (in the learner's kernel) and compare it with the checkpoint's
        arrays, sliced per layer and placed as the stacks were."""
        from orbax.checkpoint import v1 as ocp

        _, out_dir, mesh, groups, scan_axis = real_args
        ckpt = args[0]
        values = ckpt.values()
        try:
            written = dict(leaves_with_paths(dict(ocp.load(out_dir))))
        except Exception as exc:  # noqa: BLE001 - shown to the learner, in their own kernel
            return f"no checkpoint could be restored from out_dir ({type(exc).__name__}: {str(exc)[:200]})"
        want = {}
        for path, shape, _, spec in ckpt.arrays:
            spec = tuple(spec) + (None,) * (len(shape) - len(spec))
            group = next((g for g in groups if path.startswith(g + "/")), None)
            if group is None:
                want[path] = (values[path], spec)
            else:
                for i in range(shape[scan_axis]):
                    want[f"{group}_{i}/{path[len(group) + 1:]}"] = (np.take(values[path], i, axis=scan_axis),
                                                                    spec[:scan_axis] + spec[scan_axis + 1:])
        return written_leaves_error(written, want, mesh, "the unstacked model's", "the checkpoint's values")


def written_leaves_error(written: dict, want: dict, mesh, model: str, values: str) -> str | None:
    """What is wrong with a written checkpoint's leaves (``{path: array}``, as restored) against
    ``want`` (``{path: (values, spec entries)}``), or None: the same paths, each a jax.Array of the
    values' shape, dtype and values, placed as ``NamedSharding(mesh, PartitionSpec(*spec))``."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if set(written) != set(want):
        extra, missing = sorted(set(written) - set(want)), sorted(set(want) - set(written))
        return (f"the checkpoint's leaves are not {model}: {len(missing)} missing (e.g. "
                f"{missing[:2]}), {len(extra)} not expected (e.g. {extra[:2]})")
    for path, (value, spec) in want.items():
        leaf = written[path]
        if not isinstance(leaf, jax.Array):
            return f"{path!r} was saved as a {type(leaf).__name__}: save a jax.Array placed on the mesh"
        if leaf.shape != value.shape or leaf.dtype != value.dtype:
            return f"{path!r} is {leaf.dtype}{list(leaf.shape)}, expected {value.dtype}{list(value.shape)}"
        if not np.array_equal(np.asarray(leaf), value):
            return f"{path!r} does not hold {values}"
        target = NamedSharding(mesh, PartitionSpec(*spec))
        if not leaf.sharding.is_equivalent_to(target, leaf.ndim):
            return f"{path!r} was saved sharded as {leaf.sharding}, expected {target}"
    return None

