"""Unit 3's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit3.py."""

from autograder.units.unit3 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

RIGHT = {
    "chunks_to_read": [
        # No JAX at all: each device's mesh coordinates by divmod, its slice by interval arithmetic.
        ("interval_arithmetic", '''
def _axes_of(entry):
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    names = list(mesh_shape)
    sizes = [mesh_shape[a] for a in names]
    entries = [_axes_of(e) for e in spec] + [()] * (len(global_shape) - len(spec))
    out = {}
    for device in range(math.prod(sizes)):
        coords, rest = {}, device
        for name, size in zip(reversed(names), reversed(sizes)):
            rest, coords[name] = divmod(rest, size)
        per_dim = []
        for n, c, axes in zip(global_shape, chunk_shape, entries):
            shard, count = 0, 1
            for a in axes:  # the first axis is the most significant
                shard = shard * mesh_shape[a] + coords[a]
                count *= mesh_shape[a]
            step = n // count
            start, stop = shard * step, (shard + 1) * step
            first, last = start // c, (stop - 1) // c
            per_dim.append(list(range(first, last + 1)))
        out[device] = sorted(itertools.product(*per_dim))
    return out
'''),
        # JAX's devices_indices_map on a real mesh, then every chunk of the grid tested for overlap
        # with np.ndindex (a scan, not a range per dimension).
        ("jax_map_grid_scan", '''
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    n = math.prod(mesh_shape.values())
    devices = np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values()))
    sharding = NamedSharding(Mesh(devices, tuple(mesh_shape)), P(*spec))
    grid = tuple(g // c for g, c in zip(global_shape, chunk_shape))
    result = {}
    for device, index in sharding.devices_indices_map(tuple(global_shape)).items():
        bounds = [sl.indices(g)[:2] for sl, g in zip(index, global_shape)]
        hits = []
        for chunk in np.ndindex(*grid):
            if all(i * c < stop and (i + 1) * c > start
                   for i, c, (start, stop) in zip(chunk, chunk_shape, bounds)):
                hits.append(tuple(int(i) for i in chunk))
        result[device.id] = sorted(hits)
    return result
'''),
        # JAX's shard_shape and each device's place in mesh.devices (np.ndenumerate), chunk ranges
        # by floor and ceil division.
        ("jax_shard_shape_positions", '''
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    shard = NamedSharding(mesh, P(*spec)).shard_shape(tuple(global_shape))
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    answer = {}
    for coords, device in np.ndenumerate(mesh.devices):
        where = dict(zip(mesh.axis_names, coords))
        ranges = []
        for entry, size, c in zip(spec, shard, chunk_shape):
            axes = () if entry is None else (entry,) if isinstance(entry, str) else entry
            k = 0
            for a in axes:
                k = k * mesh.shape[a] + int(where[a])
            lo, hi = k * size, (k + 1) * size
            ranges.append(range(math.floor(lo / c), math.ceil(hi / c)))
        answer[device.id] = sorted(itertools.product(*ranges))
    return answer
'''),
    ],
    "read_amplification": [
        # Self-contained interval arithmetic, no JAX: a host's chunks and slices gathered in sets.
        ("interval_sets", '''
def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    entries = list(spec) + [None] * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in entries]
    hosts = {}
    for device in range(math.prod(sizes)):
        coords = dict(zip(names, np.unravel_index(device, sizes)))
        box = []
        for n, axes in zip(global_shape, entries):
            k, m = 0, 1
            for a in axes:
                k, m = k * mesh_shape[a] + int(coords[a]), m * mesh_shape[a]
            box.append((k * n // m, (k + 1) * n // m))
        chunks, slices = hosts.setdefault(device // devices_per_host, (set(), set()))
        slices.add(tuple(box))
        chunks.update(itertools.product(*[range(a // c, -(-b // c)) for (a, b), c in zip(box, chunk_shape)]))
    per_chunk = math.prod(chunk_shape)
    read = sum(len(chunks) * per_chunk for chunks, _ in hosts.values())
    needed = sum(math.prod(b - a for a, b in box) for _, slices in hosts.values() for box in slices)
    return read / needed
'''),
        # JAX's devices_indices_map, and each host's chunks marked in a boolean mask of the chunk grid.
        ("jax_grid_mask", '''
def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    index_map = NamedSharding(mesh, P(*spec)).devices_indices_map(tuple(global_shape))
    grid = tuple(g // c for g, c in zip(global_shape, chunk_shape))
    masks, held = {}, {}
    for device, index in index_map.items():
        host = device.id // devices_per_host
        mask = masks.setdefault(host, np.zeros(grid, dtype=bool))
        box = tuple(sl.indices(g)[:2] for sl, g in zip(index, global_shape))
        mask[tuple(slice(a // c, -(-b // c)) for (a, b), c in zip(box, chunk_shape))] = True
        held.setdefault(host, set()).add(box)
    read = sum(int(m.sum()) for m in masks.values()) * math.prod(chunk_shape)
    needed = 0
    for boxes in held.values():
        for box in boxes:
            needed += math.prod(b - a for a, b in box)
    return float(read) / float(needed)
'''),
        # Built on a chunks_to_read helper; every slice has JAX's shard_shape, so a host needs that
        # many elements per distinct slice, the slices told apart by their per-dimension shard index.
        ("reuse_3_1_and_shard_shape", '''
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    out = {}
    for d, idx in NamedSharding(mesh, P(*spec)).devices_indices_map(tuple(global_shape)).items():
        ranges = []
        for sl, g, c in zip(idx, global_shape, chunk_shape):
            start, stop, _ = sl.indices(g)
            ranges.append(range(start // c, (stop + c - 1) // c))
        out[d.id] = sorted(itertools.product(*ranges))
    return out


def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    reads = chunks_to_read(global_shape, chunk_shape, mesh_shape, spec)
    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    shard = NamedSharding(mesh, P(*spec)).shard_shape(tuple(global_shape))
    read_chunks, distinct = {}, {}
    for device, chunks in reads.items():
        read_chunks.setdefault(device // devices_per_host, set()).update(chunks)
    # A slice is told apart by its shard index along each dimension: its start // shard size.
    for device, idx in NamedSharding(mesh, P(*spec)).devices_indices_map(tuple(global_shape)).items():
        starts = tuple(sl.indices(g)[0] // s for sl, g, s in zip(idx, global_shape, shard))
        distinct.setdefault(device.id // devices_per_host, set()).add(starts)
    read = sum(map(len, read_chunks.values())) * math.prod(chunk_shape)
    needed = sum(map(len, distinct.values())) * math.prod(shard)
    return read / needed
'''),
    ],
    "restore_resharded": [
        # PyTreeCheckpointer and ocp.args.PyTreeRestore with construct_restore_args, not
        # StandardCheckpointer.restore(dir, target).
        ("pytree_restore_args", '''
def restore_resharded(ckpt_dir, mesh, specs):
    checkpointer = ocp.PyTreeCheckpointer()
    saved = checkpointer.metadata(ckpt_dir).item_metadata.tree
    target = {name: jax.ShapeDtypeStruct(saved[name].shape, saved[name].dtype,
                                         sharding=NamedSharding(mesh, spec))
              for name, spec in specs.items()}
    restore_args = ocp.checkpoint_utils.construct_restore_args(target)
    return checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(item=target, restore_args=restore_args))
'''),
        # Orbax's v1 API: metadata for shapes and dtypes, load with the abstract target.
        ("v1_load", '''
def restore_resharded(ckpt_dir, mesh, specs):
    from orbax.checkpoint import v1 as ocp_v1

    saved = ocp_v1.metadata(ckpt_dir).metadata
    abstract = {}
    for name, meta in saved.items():
        abstract[name] = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, specs[name]))
    return ocp_v1.load(ckpt_dir, abstract)
'''),
        # A plain Checkpointer around a PyTreeCheckpointHandler, ArrayRestoreArgs written by hand
        # from each ShapeDtypeStruct.
        ("handler_checkpointer", '''
def restore_resharded(ckpt_dir, mesh, specs):
    checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
    tree = checkpointer.metadata(ckpt_dir).item_metadata.tree
    target, args = {}, {}
    for name in tree:
        spec = specs[name]
        target[name] = jax.ShapeDtypeStruct(tree[name].shape, tree[name].dtype, sharding=NamedSharding(mesh, spec))
        args[name] = ocp.ArrayRestoreArgs(sharding=target[name].sharding, global_shape=target[name].shape,
                                          dtype=target[name].dtype)
    restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(item=target, restore_args=args))
    return dict(restored)
'''),
        # A plain Checkpointer around a StandardCheckpointHandler, restored with the args= form
        # (ocp.args.StandardRestore), the target built in a loop over the specs.
        ("standard_handler_args", '''
def restore_resharded(ckpt_dir, mesh, specs):
    with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as checkpointer:
        meta = checkpointer.metadata(ckpt_dir).item_metadata.tree
        target = {}
        for key in specs:
            target[key] = jax.ShapeDtypeStruct(meta[key].shape, meta[key].dtype,
                                               sharding=NamedSharding(mesh, specs[key]))
        return checkpointer.restore(ckpt_dir, args=ocp.args.StandardRestore(target))
'''),
    ],
    "restore_error": [
        # JAX decides: an AbstractMesh (no devices needed), NamedSharding raises for an unknown axis
        # and shard_shape raises IndivisibleError.
        ("jax_abstract_mesh", '''
def restore_error(saved_shape, target_shape, mesh_shape, spec):
    from jax.sharding import AbstractMesh

    mesh = AbstractMesh(tuple(mesh_shape.values()), tuple(mesh_shape))
    try:
        sharding = NamedSharding(mesh, P(*spec))
    except ValueError as e:
        if "not found in mesh" in str(e):
            return "unknown_axis"
        raise
    if tuple(saved_shape) != tuple(target_shape):
        return "shape_mismatch"
    try:
        sharding.shard_shape(tuple(target_shape))
    except ValueError as e:
        if type(e).__name__ == "IndivisibleError":
            return "indivisible"
        raise
    return "ok"
'''),
        # Tries it for real: saves int8 zeros of saved_shape with Orbax in a temporary folder, restores
        # onto the target, and names the exception raised.
        ("try_with_orbax", '''
def restore_error(saved_shape, target_shape, mesh_shape, spec):
    import tempfile

    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    with tempfile.TemporaryDirectory() as tmp:
        path = tmp + "/ckpt"
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.save(path, {"a": np.zeros(tuple(saved_shape), np.int8)})
            checkpointer.wait_until_finished()
            try:
                target = {"a": jax.ShapeDtypeStruct(tuple(target_shape), np.int8,
                                                    sharding=NamedSharding(mesh, P(*spec)))}
                checkpointer.restore(path, target)
            except Exception as e:
                text = f"{type(e).__name__}: {e}"
                if "IndivisibleError" in text:
                    return "indivisible"
                if "not found in mesh" in text:
                    return "unknown_axis"
                if "is not compatible with the stored shape" in text:
                    return "shape_mismatch"
                raise
    return "ok"
'''),
        # Orbax's v1 API: ocp.v1.save of a small array of the saved shape, then ocp.v1.load with the
        # target, inside a v1 Context; the error is named by its class first, then by its message.
        ("orbax_v1_save_then_load", '''
import pathlib
import tempfile

import orbax.checkpoint.experimental.v1 as ocp_v1


def restore_error(saved_shape, target_shape, mesh_shape, spec):
    sizes = tuple(int(v) for v in mesh_shape.values())
    devices = np.asarray(jax.devices()[:math.prod(sizes)]).reshape(sizes)
    with tempfile.TemporaryDirectory() as scratch, ocp_v1.Context():
        where = pathlib.Path(scratch, "saved")
        ocp_v1.save(where, {"leaf": np.ones(tuple(saved_shape), np.uint8)})
        try:
            mesh = jax.sharding.Mesh(devices, tuple(mesh_shape.keys()))
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
            ocp_v1.load(where, {"leaf": jax.ShapeDtypeStruct(tuple(target_shape), np.uint8,
                                                             sharding=sharding)})
        except Exception as error:
            kinds = {cls.__name__ for cls in type(error).__mro__}
            if "IndivisibleError" in kinds:
                return "indivisible"
            words = str(error)
            if "Resource axis" in words:
                return "unknown_axis"
            if "stored shape" in words:
                return "shape_mismatch"
            raise
        return "ok"
'''),
        # The rules in another order (each input has at most one problem) and written with sets and
        # a per-dimension divisor list.
        ("rules_other_order", '''
def restore_error(saved_shape, target_shape, mesh_shape, spec):
    if list(saved_shape) != list(target_shape):
        return "shape_mismatch"
    divisors = []
    for entry in spec:
        names = set() if entry is None else {entry} if isinstance(entry, str) else set(entry)
        if not names <= set(mesh_shape):
            return "unknown_axis"
        d = 1
        for name in names:
            d *= mesh_shape[name]
        divisors.append(d)
    for size, d in zip(target_shape, divisors):
        if size % d != 0:
            return "indivisible"
    return "ok"
'''),
    ],
}
