"""Unit 2's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit2.py."""

from autograder.units.unit2 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

SHARD_SHAPE = [
    # Asks JAX: NamedSharding over an AbstractMesh (no devices needed) and its shard_shape; an
    # indivisible dimension raises JAX's own IndivisibleError (a ValueError naming "array axis i").
    ("jax_abstract_mesh", '''
from jax.sharding import AbstractMesh


def shard_shape(global_shape, mesh_shape, spec):
    mesh = AbstractMesh(tuple(mesh_shape.values()), tuple(mesh_shape))
    return tuple(NamedSharding(mesh, P(*spec)).shard_shape(tuple(global_shape)))
'''),
    # Vectorised with NumPy: the number of parts per dimension as an array, np.divmod, the first
    # non-zero remainder named in the error.
    ("numpy_divmod", '''
def shard_shape(global_shape, mesh_shape, spec):
    ndim = len(global_shape)
    entries = list(spec) + [None] * (ndim - len(spec))
    parts = np.ones(ndim, dtype=np.int64)
    for i, entry in enumerate(entries):
        names = [] if entry is None else [entry] if isinstance(entry, str) else list(entry)
        for name in names:
            parts[i] *= mesh_shape[name]
    sizes = np.asarray(global_shape, dtype=np.int64).reshape(ndim)
    quotient, remainder = np.divmod(sizes, parts)
    bad = np.flatnonzero(remainder)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"dimension {i} of size {sizes[i]} is not divisible by {parts[i]}")
    return tuple(int(q) for q in quotient)
'''),
    # itertools.zip_longest pads the spec, functools.reduce multiplies the axis sizes, and the
    # shape is built by a generator after every dimension has been checked.
    ("zip_longest_reduce", '''
import functools
import operator


def _ways(entry, mesh_shape):
    if entry is None:
        return 1
    if isinstance(entry, str):
        return mesh_shape[entry]
    return functools.reduce(operator.mul, (mesh_shape[name] for name in entry), 1)


def shard_shape(global_shape, mesh_shape, spec):
    ways = [_ways(entry, mesh_shape) for _, entry in itertools.zip_longest(global_shape, spec)]
    for axis, (size, n) in enumerate(zip(global_shape, ways)):
        if size % n != 0:
            raise ValueError(f"dimension {axis} of size {size} is not divisible by {n}")
    return tuple(size // n for size, n in zip(global_shape, ways))
'''),
    # A real Mesh over the first devices and NamedSharding.shard_shape; JAX's IndivisibleError is
    # caught and re-raised as a ValueError with the course's wording.
    ("real_mesh_reraise", '''
def shard_shape(global_shape, mesh_shape, spec):
    names, sizes = tuple(mesh_shape), tuple(int(s) for s in mesh_shape.values())
    devices = np.array(jax.devices()[: math.prod(sizes)]).reshape(sizes)
    sharding = NamedSharding(Mesh(devices, names), P(*spec))
    try:
        return tuple(int(n) for n in sharding.shard_shape(tuple(global_shape)))
    except ValueError:
        padded = tuple(spec) + (None,) * (len(global_shape) - len(spec))
        for dim, (size, entry) in enumerate(zip(global_shape, padded)):
            axes = () if entry is None else (entry,) if isinstance(entry, str) else entry
            parts = math.prod(mesh_shape[a] for a in axes)
            if size % parts:
                raise ValueError(f"dimension {dim} of size {size} is not divisible by {parts}") from None
        raise
'''),
]

DEVICE_INDEX_DOMAINS = [
    # Asks JAX: a Mesh of the first devices in id order, devices_indices_map, slices turned into
    # (start, stop) with slice.indices.
    ("jax_devices_indices_map", '''
def device_index_domains(global_shape, mesh_shape, spec):
    sizes = tuple(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[: math.prod(sizes)]).reshape(sizes), tuple(mesh_shape))
    shape = tuple(global_shape)
    index_map = NamedSharding(mesh, P(*spec)).devices_indices_map(shape)
    return {
        device.id: tuple(sl.indices(size)[:2] for sl, size in zip(index, shape))
        for device, index in index_map.items()
    }
'''),
    # np.ndindex walks the mesh row-major; np.ravel_multi_index gives the shard position of a
    # tuple entry (first axis most significant).
    ("ndindex_ravel_multi_index", '''
def device_index_domains(global_shape, mesh_shape, spec):
    names = list(mesh_shape)
    sizes = tuple(mesh_shape.values())
    entries = list(spec) + [None] * (len(global_shape) - len(spec))
    axes = [[] if e is None else [e] if isinstance(e, str) else list(e) for e in entries]
    counts = [math.prod(mesh_shape[a] for a in ax) for ax in axes]
    for dim, (size, n) in enumerate(zip(global_shape, counts)):
        if size % n:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {n}")
    result = {}
    for device, coords in enumerate(np.ndindex(*sizes)):
        where = dict(zip(names, coords))
        domain = []
        for size, n, ax in zip(global_shape, counts, axes):
            pos = int(np.ravel_multi_index([where[a] for a in ax], [mesh_shape[a] for a in ax])) if ax else 0
            step = size // n
            domain.append((pos * step, pos * step + step))
        result[device] = tuple(domain)
    return result
'''),
    # Vectorised over the device grid: np.indices gives every device's mesh coordinates at once,
    # a shard-position grid per dimension, then one lookup per device id.
    ("vectorised_position_grids", '''
def device_index_domains(global_shape, mesh_shape, spec):
    names = list(mesh_shape)
    sizes = [int(v) for v in mesh_shape.values()]
    coords = np.indices(sizes)  # coords[k] is every device's coordinate along mesh axis k
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    lows, highs = [], []
    for dim, (size, entry) in enumerate(zip(global_shape, spec)):
        ax = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        position, ways = np.zeros(sizes, dtype=np.int64), 1
        for a in ax:
            position = position * mesh_shape[a] + coords[names.index(a)]
            ways *= mesh_shape[a]
        if size % ways:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {ways}")
        lows.append((position * (size // ways)).ravel())
        highs.append(((position + 1) * (size // ways)).ravel())
    n = math.prod(sizes)
    return {d: tuple((int(lo[d]), int(hi[d])) for lo, hi in zip(lows, highs)) for d in range(n)}
'''),
]

ORBAX_CHUNK_SHAPE = [
    # Asks Orbax v1: saves a sharded array (uint8 zeros, made on the devices by jit) in zarr 2
    # without OCDBT into a temporary folder and reads the chunks from its .zarray.
    ("orbax_v1_saved_zarray", '''
import glob
import json
import os
import tempfile

import jax.numpy as jnp
import orbax.checkpoint as ocp


def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    sizes = tuple(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[: math.prod(sizes)]).reshape(sizes), tuple(mesh_shape))
    shape = tuple(global_shape)
    array = jax.jit(lambda: jnp.zeros(shape, jnp.uint8), out_shardings=NamedSharding(mesh, P(*spec)))()
    v1 = ocp.v1
    saving = v1.options.ArrayOptions.Saving(use_ocdbt=False, use_zarr3=False,
                                            use_replica_parallel=bool(replica_parallel))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ckpt")
        with v1.Context(array_options=v1.options.ArrayOptions(saving=saving)):
            v1.save(path, {"w": array})
        (zarray,) = glob.glob(os.path.join(path, "**", "w", ".zarray"), recursive=True)
        with open(zarray) as f:
            return tuple(json.load(f)["chunks"])
'''),
    # Asks Orbax v0: a PyTreeCheckpointHandler (zarr 3, no OCDBT) with its own ArrayHandler
    # registry for replica-parallel on or off; the chunk shape read from zarr.json.
    ("orbax_v0_handler_zarr3", '''
import json
import os
import tempfile

import orbax.checkpoint as ocp


def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    n = math.prod(mesh_shape.values())
    mesh = jax.make_mesh(tuple(mesh_shape.values()), tuple(mesh_shape), devices=jax.devices()[:n])
    sharding = NamedSharding(mesh, P(*spec))
    shape = tuple(global_shape)
    array = jax.make_array_from_callback(shape, sharding, lambda index: np.zeros(np.empty(shape, np.int8)[index].shape, np.int8))
    registry = ocp.type_handlers.create_type_handler_registry(
        (jax.Array, ocp.type_handlers.ArrayHandler(use_replica_parallel=replica_parallel)))
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=True, type_handler_registry=registry)
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "save")
        with ocp.Checkpointer(handler) as checkpointer:
            checkpointer.save(target, args=ocp.args.PyTreeSave({"w": array}))
        with open(os.path.join(target, "w", "zarr.json")) as f:
            grid = json.load(f)["chunk_grid"]
    return tuple(int(c) for c in grid["configuration"]["chunk_shape"])
'''),
    # Plain arithmetic in one pass: replicas = devices / shards; a for/else finds the first
    # dimension divisible by them.
    ("arithmetic_for_else", '''
def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    padded = list(spec) + [None] * (len(global_shape) - len(spec))
    shard, shards = [], 1
    for dim, (size, entry) in enumerate(zip(global_shape, padded)):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        ways = math.prod(mesh_shape[a] for a in names)
        if size % ways:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {ways}")
        shard.append(size // ways)
        shards *= ways
    replicas = math.prod(mesh_shape.values()) // shards
    if replica_parallel and replicas > 1 and math.prod(shard) > 0:
        for i, n in enumerate(shard):
            if n % replicas == 0:
                shard[i] = n // replicas
                break
    return tuple(shard)
'''),
    # Asks JAX for the shard shape and counts the replicas as devices per distinct index domain
    # (devices_indices_map); the split done with a list comprehension.
    ("jax_replicas_from_indices", '''
def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    sizes = tuple(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[: math.prod(sizes)]).reshape(sizes), tuple(mesh_shape))
    sharding = NamedSharding(mesh, P(*spec))
    shape = tuple(global_shape)
    local = tuple(int(n) for n in sharding.shard_shape(shape))
    domains = {tuple(sl.indices(s)[:2] for sl, s in zip(index, shape))
               for index in sharding.devices_indices_map(shape).values()}
    r = mesh.size // len(domains)
    divisible = [i for i, n in enumerate(local) if n % r == 0]
    if not replica_parallel or r == 1 or not divisible or math.prod(local) == 0:
        return local
    return tuple(n // r if i == divisible[0] else n for i, n in enumerate(local))
'''),
]

CHUNK_FILES = [
    # Asks TensorStore: creates a zarr (2 or 3) array with that chunk shape in a memory kvstore,
    # writes ones everywhere and lists the keys that are not metadata.
    ("tensorstore_memory_kvstore", '''
import tensorstore as ts


def chunk_files(global_shape, chunk_shape, zarr_format=2):
    spec = {
        "driver": "zarr3" if int(zarr_format) == 3 else "zarr",
        "kvstore": {"driver": "memory"},
        "create": True,
        "schema": {"dtype": "uint8", "domain": {"shape": list(global_shape)},
                   "chunk_layout": {"write_chunk": {"shape": list(chunk_shape)}}},
    }
    array = ts.open(spec).result()
    array.write(np.ones(tuple(global_shape), np.uint8)).result()
    keys = [k.decode() for k in array.kvstore.list().result()]
    return sorted(k for k in keys if k not in (".zarray", ".zattrs", "zarr.json"))
'''),
    # np.ndindex over the chunk grid, math.ceil for partial chunks, f-string joins.
    ("ndindex_ceil", '''
def chunk_files(global_shape, chunk_shape, zarr_format=2):
    grid = tuple(math.ceil(g / c) for g, c in zip(global_shape, chunk_shape))
    names = []
    for idx in np.ndindex(*grid):
        parts = [str(i) for i in idx]
        if zarr_format == 3:
            names.append("/".join(["c"] + parts))
        else:
            names.append(".".join(parts) or "0")
    names.sort()
    return names
'''),
    # Recursion builds the index strings dimension by dimension (no itertools), then the
    # separator and prefix of the zarr version are applied.
    ("recursive_grid", '''
def chunk_files(global_shape, chunk_shape, zarr_format=2):
    counts = [(g + c - 1) // c for g, c in zip(global_shape, chunk_shape)]

    def grid(dims):
        if not dims:
            return [[]]
        return [[str(i)] + rest for i in range(dims[0]) for rest in grid(dims[1:])]

    if int(zarr_format) == 3:
        return sorted("/".join(["c", *idx]) for idx in grid(counts))
    return sorted(".".join(idx) if idx else "0" for idx in grid(counts))
'''),
]

BYTES_WRITTEN_PER_DEVICE = [
    # Asks Orbax which slices each replica writes: replica_slices.get_replica_slices (what
    # Orbax's ArrayHandler calls, replica 0 in one process) on a real sharded array.
    ("orbax_replica_slices", '''
import jax.numpy as jnp
from orbax.checkpoint._src.serialization import replica_slices


def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    sizes = tuple(mesh_shape.values())
    devices = jax.devices()[: math.prod(sizes)]
    mesh = Mesh(np.array(devices).reshape(sizes), tuple(mesh_shape))
    shape = tuple(global_shape)
    array = jax.jit(lambda: jnp.zeros(shape, jnp.uint8), out_shardings=NamedSharding(mesh, P(*spec)))()
    slices = replica_slices.get_replica_slices(array, 0, bool(replica_parallel))
    written = {d.id: 0 for d in devices}
    for rs in slices.replica_slices:
        (device,) = rs.unsliced_data.devices()
        shape_written = list(slices.local_shape)
        if rs.slice_args is not None:
            shape_written[rs.slice_args.axis] = rs.slice_args.limit_index - rs.slice_args.start_index
        written[device.id] += math.prod(shape_written) * int(itemsize)
    return written
'''),
    # JAX's own replica_id from the addressable shards of a real array (as the statement defines
    # replica 0), then the split rule by hand.
    ("jax_shard_replica_id", '''
def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    sizes = tuple(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[: math.prod(sizes)]).reshape(sizes), tuple(mesh_shape))
    shape = tuple(global_shape)
    sharding = NamedSharding(mesh, P(*spec))
    array = jax.make_array_from_callback(shape, sharding, lambda index: np.zeros(np.empty(shape, np.bool_)[index].shape, np.bool_))
    shards = array.addressable_shards
    local = shards[0].data.shape
    replicas = 1 + max(s.replica_id for s in shards)
    shard_bytes = math.prod(local) * itemsize
    split = bool(replica_parallel) and replicas > 1 and shard_bytes > 0 and any(n % replicas == 0 for n in local)
    out = {}
    for s in shards:
        if split:
            out[s.device.id] = shard_bytes // replicas
        else:
            out[s.device.id] = shard_bytes if s.replica_id == 0 else 0
    return out
'''),
    # Pure Python with collections.defaultdict: devices grouped by their domain (as in 2.2), each
    # group's first member is replica 0.
    ("group_by_domain_defaultdict", '''
from collections import defaultdict


def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    spec = list(spec) + [None] * (len(global_shape) - len(spec))
    axes = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    ways = [math.prod(mesh_shape[a] for a in ax) for ax in axes]
    for dim, (size, w) in enumerate(zip(global_shape, ways)):
        if size % w:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {w}")
    local = [size // w for size, w in zip(global_shape, ways)]
    groups = defaultdict(list)
    for device in range(math.prod(sizes)):
        coord = dict(zip(names, (int(c) for c in np.unravel_index(device, sizes))))
        key = []
        for ax in axes:
            pos = 0
            for a in ax:
                pos = pos * mesh_shape[a] + coord[a]
            key.append(pos)
        groups[tuple(key)].append(device)
    shard_bytes = math.prod(local) * itemsize
    r = len(next(iter(groups.values())))
    axis = next((i for i, n in enumerate(local) if n % r == 0), None) if replica_parallel and r > 1 and shard_bytes else None
    result = {}
    for members in groups.values():
        for k, device in enumerate(members):
            result[device] = shard_bytes // r if axis is not None else (shard_bytes if k == 0 else 0)
    return dict(sorted(result.items()))
'''),
    # Closed form: on a mesh built in id order, replica 0 of a shard is the device whose
    # coordinates along every mesh axis the spec leaves unused are all zero.
    ("replica_zero_by_coordinates", '''
def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    padded = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    used, local = set(), []
    for dim, (size, entry) in enumerate(zip(global_shape, padded)):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        used.update(names)
        ways = math.prod(mesh_shape[a] for a in names)
        if size % ways:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {ways}")
        local.append(size // ways)
    unused = [k for k, a in enumerate(mesh_shape) if a not in used]
    replicas = math.prod(list(mesh_shape.values())[k] for k in unused)
    shard_bytes = math.prod(local) * itemsize
    parallel = replica_parallel and replicas > 1 and shard_bytes > 0 and any(n % replicas == 0 for n in local)
    grid = np.arange(math.prod(mesh_shape.values())).reshape(tuple(mesh_shape.values()))
    out = {}
    for coords in itertools.product(*(range(s) for s in grid.shape)):
        device = int(grid[coords])
        if parallel:
            out[device] = shard_bytes // replicas
        else:
            out[device] = shard_bytes if all(coords[k] == 0 for k in unused) else 0
    return out
'''),
]

BYTES_WRITTEN_PER_HOST = [
    # Per-device bytes from the replica coordinates, summed per host with np.bincount.
    ("numpy_bincount", '''
def _per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel):
    padded = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    used, local = set(), []
    for dim, (size, entry) in enumerate(zip(global_shape, padded)):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        used.update(names)
        ways = math.prod(mesh_shape[a] for a in names)
        if size % ways:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {ways}")
        local.append(size // ways)
    sizes = tuple(mesh_shape.values())
    unused = [k for k, a in enumerate(mesh_shape) if a not in used]
    replicas = math.prod(sizes[k] for k in unused)
    shard_bytes = math.prod(local) * itemsize
    if replica_parallel and replicas > 1 and shard_bytes and any(n % replicas == 0 for n in local):
        return np.full(math.prod(sizes), shard_bytes // replicas, dtype=np.int64)
    first = np.ones(sizes, dtype=bool)
    for k in unused:
        first &= np.indices(sizes)[k] == 0
    return np.where(first.ravel(), shard_bytes, 0).astype(np.int64)


def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    per_device = _per_device(global_shape, int(itemsize), mesh_shape, spec, replica_parallel)
    hosts = np.arange(per_device.size) // int(devices_per_host)
    totals = np.bincount(hosts, weights=per_device.astype(np.float64))
    return {h: int(round(t)) for h, t in enumerate(totals)}
'''),
    # Asks JAX: a real array's addressable shards give each device's replica_id and slice; each
    # host's total accumulated shard by shard.
    ("jax_shards_per_host", '''
def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    sizes = tuple(mesh_shape.values())
    n = math.prod(sizes)
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(sizes), tuple(mesh_shape))
    shape = tuple(global_shape)
    array = jax.device_put(np.zeros(shape, np.uint8), NamedSharding(mesh, P(*spec)))
    shards = array.addressable_shards
    replicas = n // len({tuple(sl.indices(s)[:2] for sl, s in zip(sh.index, shape)) for sh in shards})
    local = shards[0].data.shape
    per_shard = math.prod(local) * int(itemsize)
    split_axis = None
    if replica_parallel and replicas > 1 and per_shard:
        split_axis = next((i for i, d in enumerate(local) if d % replicas == 0), None)
    hosts = {h: 0 for h in range(-(-n // int(devices_per_host)))}
    for sh in shards:
        host = sh.device.id // int(devices_per_host)
        if split_axis is not None:
            hosts[host] += per_shard // replicas
        elif sh.replica_id == 0:
            hosts[host] += per_shard
    return hosts
'''),
    # Host by host: each host's devices are a range of ids; a device writes when it is the first
    # of its domain group (itertools.groupby over devices sorted by domain) or when replicas split.
    ("groupby_domains_host_ranges", '''
def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    n = math.prod(sizes)
    entries = [None if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    entries += [None] * (len(global_shape) - len(entries))

    def position(device, axes):
        coord = dict(zip(names, np.unravel_index(device, sizes)))
        return int(np.ravel_multi_index([coord[a] for a in axes], [mesh_shape[a] for a in axes])) if axes else 0

    local = []
    for dim, (size, axes) in enumerate(zip(global_shape, entries)):
        ways = math.prod(mesh_shape[a] for a in axes or ())
        if size % ways:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {ways}")
        local.append(size // ways)
    domain = {d: tuple(position(d, axes or ()) for axes in entries) for d in range(n)}
    writers = set()
    replicas = 1
    for _, group in itertools.groupby(sorted(range(n), key=lambda d: (domain[d], d)), key=domain.get):
        members = list(group)
        replicas = len(members)
        writers.add(members[0])
    shard_bytes = math.prod(local) * itemsize
    split = replica_parallel and replicas > 1 and shard_bytes > 0 and any(x % replicas == 0 for x in local)
    per_device = {d: (shard_bytes // replicas if split else shard_bytes if d in writers else 0) for d in range(n)}
    dph = int(devices_per_host)
    return {h: sum(per_device[d] for d in range(h * dph, min(n, (h + 1) * dph))) for h in range(math.ceil(n / dph))}
'''),
]

RIGHT = {
    "shard_shape": SHARD_SHAPE,
    "device_index_domains": DEVICE_INDEX_DOMAINS,
    "orbax_chunk_shape": ORBAX_CHUNK_SHAPE,
    "chunk_files": CHUNK_FILES,
    "bytes_written_per_device": BYTES_WRITTEN_PER_DEVICE,
    "bytes_written_per_host": BYTES_WRITTEN_PER_HOST,
}
