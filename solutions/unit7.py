"""Reference solutions for Unit 7: when the machine or the code changed."""

from __future__ import annotations

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec


def restore_on_new_mesh(ckpt_dir, mesh):
    checkpointer = ocp.StandardCheckpointer()
    saved = checkpointer.metadata(ckpt_dir).item_metadata.tree
    target = {name: jax.ShapeDtypeStruct(m.shape, m.dtype,
                                         sharding=NamedSharding(mesh, PartitionSpec(*m.sharding.partition_spec)))
              for name, m in saved.items()}
    return checkpointer.restore(ckpt_dir, target)


def _flat(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(_flat(value, path))
        else:
            out[path] = value
    return out


def _nest(flat):
    tree = {}
    for path, value in flat.items():
        *parents, last = path.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def migrate_checkpoint(ckpt_dir, target, rename, new):
    saved = _flat(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    wanted = _flat(target)
    source = {}  # target path -> saved path
    for old in saved:
        path = rename.get(old, old)
        if path is None:
            continue  # dropped on purpose
        if path not in wanted:
            raise ValueError(f"saved leaf {old!r} has no place in the new model (as {path!r}): rename it, or "
                             "map it to None to drop it")
        source[path] = old
    for path, leaf in wanted.items():
        if path in source:
            m = saved[source[path]]
            if tuple(m.shape) != tuple(leaf.shape) or np.dtype(m.dtype) != np.dtype(leaf.dtype):
                raise ValueError(f"{path!r}: saved as {m.dtype}{list(m.shape)}, the new model wants "
                                 f"{np.dtype(leaf.dtype)}{list(leaf.shape)}")
        elif path not in new:
            raise ValueError(f"{path!r} is in neither the checkpoint nor the new values")
    as_numpy = _nest({old: ocp.RestoreArgs(restore_type=np.ndarray) for old in source.values()})
    item = _nest({old: 0 for old in source.values()})
    restored = _flat(ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=item, restore_args=as_numpy, partial_restore=True)))
    return _nest({path: restored[source[path]] if path in source else np.asarray(new[path]) for path in wanted})


def compare_checkpoints(a_dir, b_dir, rtol):
    checkpointer = ocp.StandardCheckpointer()
    a = _flat(checkpointer.metadata(a_dir).item_metadata.tree)
    b = _flat(checkpointer.metadata(b_dir).item_metadata.tree)
    report = {"missing": sorted(a.keys() - b.keys()), "extra": sorted(b.keys() - a.keys()),
              "mismatched": [], "differing": []}

    def one(ckpt_dir, path):  # that leaf alone, as NumPy
        item = _nest({path: 0})
        args = _nest({path: ocp.RestoreArgs(restore_type=np.ndarray)})
        got = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=item, restore_args=args, partial_restore=True))
        return np.asarray(_flat(got)[path])

    for path in sorted(a.keys() & b.keys()):
        if tuple(a[path].shape) != tuple(b[path].shape) or np.dtype(a[path].dtype) != np.dtype(b[path].dtype):
            report["mismatched"].append(path)
        if tuple(a[path].shape) != tuple(b[path].shape):
            continue
        x, y = one(a_dir, path), one(b_dir, path)
        if x.dtype.kind in "iub" and y.dtype.kind in "iub":
            same = np.array_equal(x, y)  # integers exactly, whatever their width
        else:
            x, y = x.astype(np.float64), y.astype(np.float64)
            with np.errstate(invalid="ignore"):  # (inf - inf, 0 * inf: an infinity equals only itself)
                close = (np.abs(x - y) <= rtol * np.maximum(np.abs(x), np.abs(y))) & np.isfinite(x) & np.isfinite(y)
            same = bool(np.all(close | (np.isnan(x) & np.isnan(y)) | (x == y)))
        if not same:
            report["differing"].append(path)
    return report


def unstack_layers(ckpt_dir, out_dir, mesh, groups, scan_axis):
    from orbax.checkpoint import v1 as ocp_v1

    saved = _flat(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    for path, m in saved.items():
        # That array alone, to the host: one copy, however many devices held it.
        host = _flat(ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=_nest({path: 0}), restore_args=_nest({path: ocp.RestoreArgs(restore_type=np.ndarray)}),
            partial_restore=True)))[path]
        spec = tuple(m.sharding.partition_spec) + (None,) * (len(m.shape) - len(m.sharding.partition_spec))
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            out = {path: jax.device_put(host, NamedSharding(mesh, PartitionSpec(*spec)))}
        else:
            layer = NamedSharding(mesh, PartitionSpec(*(spec[:scan_axis] + spec[scan_axis + 1:])))
            out = {f"{group}_{i}/{path[len(group) + 1:]}": jax.device_put(np.take(host, i, axis=scan_axis), layer)
                   for i in range(m.shape[scan_axis])}
        del host
        ocp_v1.partial.save(out_dir, _nest(out))  # written before the next array is read
        del out
    ocp_v1.partial.finalize(out_dir)
