"""Curated wrong answers: each must be rejected by the hidden tests with its intended message.

Each entry: (name, source of the learner's function, expected status, a fragment of the message).
"""

IMPORTS = """
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx
from ckptlab.models import MLP
"""

DENSE = [
    ("forgets_bias", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = params["params"]["kernel"].size
    return jnp.array([total, total / num_shards])
""", "incorrect", "only the kernel was counted"),
    ("integer_division", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return jnp.array([total, total // num_shards], dtype=jnp.float32)
""", "incorrect", "float division"),
    ("batch_dim_as_input_dim", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[0] * features + features
    return np.array([total, total / num_shards])
""", "incorrect", "x.shape[0]"),
    ("no_float_cast", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return jnp.array([total, total / num_shards])
""", "error", "cast seed, num_shards and features with int()"),
    ("wrong_order", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return np.array([total / num_shards, total])
""", "incorrect", "swapped"),
    ("returns_list", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[-1] * features + features
    return [total, total / num_shards]
""", "incorrect", "must return a 1-D array of shape (2,)"),
    ("integer_dtype", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[-1] * features + features
    return np.array([total, total // num_shards])
""", "incorrect", "floating dtype"),
]

NNX_LINEAR = [
    ("forgets_bias", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = model.kernel.get_value().size
    return jnp.array([total, total / int(num_shards)])
""", "incorrect", "only the kernel was counted"),
    ("batch_dim_as_input_dim", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[0], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(num_shards)])
""", "incorrect", "x.shape[0]"),
    ("features_and_shards_swapped", """
def orbax_save_count(seed, x, num_shards, features):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(num_shards)])
""", "error", "wrong order"),
    ("features_and_shards_swapped_in_body", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(num_shards), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(features)])
""", "incorrect", "features and num_shards look swapped"),
    ("integer_division", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return np.array([total, total // int(num_shards)], dtype=np.float64)
""", "incorrect", "float division"),
    ("no_float_cast", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / num_shards])
""", "error", "cast seed, features and num_shards with int()"),
]

PARAM_BYTES = [
    ("leaf_dtype", """
def param_bytes(params, dtype):
    return int(sum(l.nbytes for l in jax.tree.leaves(params)))
""", "incorrect", "current dtype, not the requested one"),
    ("bits", """
def param_bytes(params, dtype):
    return int(sum(l.size for l in jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize * 8)
""", "incorrect", "8 times too big"),
    ("counts_leaves", """
def param_bytes(params, dtype):
    return len(jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize
""", "incorrect", "counted leaves"),
    ("top_level_only", """
def param_bytes(params, dtype):
    return int(sum(v.size for v in params.values() if hasattr(v, "size")) * jnp.dtype(dtype).itemsize)
""", "incorrect", "every depth"),
    ("returns_float", """
def param_bytes(params, dtype):
    return sum(l.size for l in jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize / 1.0
""", "incorrect", "must return an int"),
]

NNX_TABLE = [
    ("includes_batch_stats", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): int(v.get_value().size) for p, v in nnx.to_flat_state(nnx.state(model))}
""", "incorrect", "batch statistics"),
    ("dot_separator", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {".".join(map(str, p)): int(v.get_value().size) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "not '.'"),
    ("shape_not_size", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): int(v.get_value().shape[-1]) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "number of elements"),
    ("linear_only", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    out = {}
    for i, layer in enumerate(model.layers):
        out[f"layers/{i}/kernel"] = layer.kernel.get_value().size
        out[f"layers/{i}/bias"] = layer.bias.get_value().size
    return out
""", "incorrect", "scale and bias are parameters"),
    ("shapes_as_values", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): v.get_value().shape for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "must be an int, but is a tuple"),
]

WRONG = {"1.1": DENSE, "1.2": NNX_LINEAR, "1.3": PARAM_BYTES, "1.4": NNX_TABLE}

U2 = IMPORTS + """
import itertools
import math
"""

SHARD_SHAPE = [
    ("integer_division", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for size, e in zip(global_shape, spec):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        out.append(size // math.prod(mesh_shape[a] for a in axes))
    return tuple(out)
""", "incorrect", "not round down"),
    ("raises_without_naming_the_dimension", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for size, e in zip(global_shape, spec):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        if size % parts:
            raise ValueError("does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "should name the dimension"),
    ("raises_the_wrong_exception", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        assert size % parts == 0, f"dimension {i}"
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "Raise ValueError"),
    ("tuple_entry_uses_first_axis_only", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        parts = 1 if e is None else mesh_shape[e if isinstance(e, str) else e[0]]
        if size % parts:
            raise ValueError(f"dimension {i} does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "product of both axis sizes"),
    ("forgets_to_pad_the_spec", """
def shard_shape(global_shape, mesh_shape, spec):
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        if size % parts:
            raise ValueError(f"dimension {i} does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "including dimensions the spec leaves out"),
]

_DOMAIN_BODY = """
def device_index_domains(global_shape, mesh_shape, spec):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    out = {}
    for d in range(math.prod(sizes)):
        at = dict(zip(names, (int(c) for c in np.unravel_index(d, sizes, order=ORDER))))
        dom = []
        for ax, n in zip(entries, local):
            pos = 0
            for a in AXES:
                pos = pos * mesh_shape[a] + at[a]
            dom.append(WRAP((pos * n, (pos + 1) * n - STOP)))
        out[d] = WRAP(dom)
    return out
"""


def _domains(order="'C'", axes="ax", stop="0", wrap="tuple"):
    return (_DOMAIN_BODY.replace("ORDER", order).replace("AXES", axes).replace("STOP", stop)
            .replace("WRAP", wrap))


DOMAINS = [
    ("column_major_devices", _domains(order="'F'"), "incorrect", "row-major"),
    ("tuple_axes_minor_first", _domains(axes="reversed(ax)"), "incorrect", "most significant"),
    ("inclusive_stop", _domains(stop="1"), "incorrect", "exclusive"),
    ("lists_not_tuples", _domains(wrap="list"), "incorrect", "must be a tuple"),
]

_CHUNK_BODY = """
def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    used = {a for ax in entries for a in ax}
    r = math.prod(s for a, s in mesh_shape.items() if a not in used)
    if CONDITION:
        for i in ORDER:
            if local[i] % r == 0:
                local[i] //= r
                break
    return RESULT
"""


def _chunk(condition="replica_parallel and r > 1", order="range(len(local))", result="tuple(local)"):
    return _CHUNK_BODY.replace("CONDITION", condition).replace("ORDER", order).replace("RESULT", result)


CHUNK_SHAPE = [
    ("ignores_replica_parallel", _chunk(condition="False"), "incorrect", "each write 1/R"),
    ("splits_the_last_axis", _chunk(order="reversed(range(len(local)))"), "incorrect", "FIRST dimension"),
    ("splits_even_when_told_not_to", _chunk(condition="r > 1"), "incorrect", "replica_parallel=False"),
    ("returns_a_list", _chunk(result="local"), "incorrect", "must be a tuple"),
]

_FILES_BODY = """
def chunk_files(global_shape, chunk_shape, zarr_format=2):
    grid = [range(GRID) for g, c in zip(global_shape, chunk_shape)]
    idx = list(itertools.product(*grid))
    if FORMAT == 3:
        names = ["/".join(["c", *map(str, i)]) for i in idx]
    else:
        names = [".".join(map(str, i)) if i else "0" for i in idx]
    return SORT
"""


def _files(grid="-(-g // c)", fmt="zarr_format", sort="sorted(names)"):
    return _FILES_BODY.replace("GRID", grid).replace("FORMAT", fmt).replace("SORT", sort)


CHUNK_FILES = [
    ("zarr2_names_for_zarr3", _files(fmt="2"), "incorrect", "name chunks differently"),
    ("sorted_numerically", _files(sort="names"), "incorrect", "Sort the names as strings"),
    ("floor_division_grid", _files(grid="g // c"), "incorrect", "partial chunk"),
    ("returns_a_tuple", _files(sort="tuple(sorted(names))"), "incorrect", "must be a list"),
]

_BYTES_HELPERS = """
def _layout(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    used = {a for ax in entries for a in ax}
    r = math.prod(s for a, s in mesh_shape.items() if a not in used)
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    doms = {}
    for d in range(math.prod(sizes)):
        at = dict(zip(names, (int(c) for c in np.unravel_index(d, sizes, order=ORDER))))
        key = []
        for ax in entries:
            pos = 0
            for a in ax:
                pos = pos * mesh_shape[a] + at[a]
            key.append(pos)
        doms[d] = tuple(key)
    return local, r, doms

def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    local, r, doms = _layout(global_shape, mesh_shape, spec)
    shard = math.prod(local) * itemsize
    split = SPLIT
    seen, out = set(), {}
    for d in sorted(doms):
        if split:
            out[d] = shard // r
        elif FULL or doms[d] not in seen:
            out[d] = shard
        else:
            out[d] = 0
        seen.add(doms[d])
    return FILTER
"""


def _bytes(order="'C'", split="replica_parallel and r > 1 and any(n % r == 0 for n in local)", full="False",
           filt="out"):
    return (_BYTES_HELPERS.replace("ORDER", order).replace("SPLIT", split).replace("FULL", full)
            .replace("FILTER", filt))


BYTES_PER_DEVICE = [
    ("every_replica_writes_a_full_copy", _bytes(split="False", full="True"), "incorrect", "written once in total"),
    ("column_major_replica_zero", _bytes(order="'F'", split="False"), "incorrect", "lowest-numbered device"),
    ("only_replica_zero_writes", _bytes(split="False"), "incorrect", "each writes its 1/R slice"),
    ("drops_devices_that_write_nothing", _bytes(filt="{d: b for d, b in out.items() if b}"), "incorrect",
     "entry for every device"),
]

_HOSTS = """
def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    per_device = bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel)
    hosts = {}
    n_hosts = len(per_device) // devices_per_host
    for d, b in per_device.items():
        if b or KEEP_EMPTY:
            hosts[HOST] = hosts.get(HOST, 0) + b
    return hosts
"""


def _hosts(host="d // devices_per_host", keep_empty="True", **per_device):
    return _bytes(**per_device) + _HOSTS.replace("HOST", host).replace("KEEP_EMPTY", keep_empty)


BYTES_PER_HOST = [
    ("hosts_by_modulo", _hosts(host="d % n_hosts"), "incorrect", "consecutive"),
    ("drops_hosts_that_write_nothing", _hosts(keep_empty="False"), "incorrect", "including hosts that write nothing"),
    ("every_replica_writes", _hosts(split="False", full="True"), "incorrect", "written once in total"),
    ("only_replica_zero_writes", _hosts(split="False"), "incorrect", "each writes its 1/R slice"),
]

WRONG.update({"2.1": SHARD_SHAPE, "2.2": DOMAINS, "2.3": CHUNK_SHAPE, "2.4": CHUNK_FILES,
              "2.5": BYTES_PER_DEVICE, "2.6": BYTES_PER_HOST})
HEADERS = {pid: (U2 if pid.startswith("2.") else IMPORTS) for pid in WRONG}

U3 = U2 + """
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec
from ckptlab.layout import real_index_domains
"""

_READS = """
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    out = {}
    for d, dom in real_index_domains(global_shape, mesh_shape, spec).items():
        ranges = [range(s // c, STOP) for (s, e), c in zip(dom, chunk_shape)]
        out[d] = WRAP
    return FILTER
"""


def _reads(stop="-(-e // c)", wrap="sorted(itertools.product(*ranges))", filt="out"):
    return _READS.replace("STOP", stop).replace("WRAP", wrap).replace("FILTER", filt)


CHUNKS_TO_READ = [
    ("off_by_one_at_boundaries", _reads(stop="e // c + 1"), "incorrect", "stop is exclusive"),
    ("lists_not_tuples", _reads(wrap="[list(t) for t in sorted(itertools.product(*ranges))]"), "incorrect",
     "must be a tuple"),
    ("unsorted", _reads(wrap="sorted(itertools.product(*ranges), reverse=True)"), "incorrect", "sorted list"),
    ("first_replica_only", _reads(filt="{d: v for d, v in out.items() if d % 2 == 0}"), "incorrect",
     "every device of the target mesh"),
]

_AMP = _reads() + """
def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    reads = chunks_to_read(global_shape, chunk_shape, mesh_shape, spec)
    doms = real_index_domains(global_shape, mesh_shape, spec)
    hosts = {}
    for d in doms:
        hosts.setdefault(HOST, []).append(d)
    need = NEED
    read = READ
    return RESULT
"""
_PER_HOST_READ = "sum(len({c for d in ds for c in reads[d]}) for ds in hosts.values()) * math.prod(chunk_shape)"
_PER_HOST_NEED = ("sum(math.prod(e - s for s, e in dom) for ds in hosts.values() "
                  "for dom in {tuple(tuple(b) for b in doms[d]) for d in ds})")


def _amp(read=_PER_HOST_READ, result="read / need", need=_PER_HOST_NEED, host="d // devices_per_host"):
    return _AMP.replace("READ", read).replace("RESULT", result).replace("NEED", need).replace("HOST", host)


AMPLIFICATION = [
    ("counts_needed_bytes", _amp(read="need"), "incorrect", "read whole"),
    ("inverted", _amp(result="need / read"), "incorrect", "upside down"),
    ("ignores_hosts", _amp(host="d"), "incorrect", "once per host"),
    ("one_read_in_all", _amp(read="len({c for v in reads.values() for c in v}) * math.prod(chunk_shape)"),
     "incorrect", "reads for itself"),
    ("needs_each_replica", _amp(need="sum(math.prod(e - s for s, e in dom) for dom in doms.values())"),
     "incorrect", "needed once"),
    ("integer_division", _amp(result="read // need"), "incorrect", "must be a float"),
]

RESTORE = [
    ("restores_without_a_target", """
def restore_resharded(ckpt_dir, mesh, specs):
    return ocp.StandardCheckpointer().restore(ckpt_dir)
""", "incorrect", "laid out as saved"),
    ("returns_numpy", """
def restore_resharded(ckpt_dir, mesh, specs):
    return {k: np.asarray(v) for k, v in ocp.StandardCheckpointer().restore(ckpt_dir).items()}
""", "incorrect", "instead of converting to NumPy"),
    ("abstract_mesh_target", """
def restore_resharded(ckpt_dir, mesh, specs):
    ckpt = ocp.StandardCheckpointer()
    meta = ckpt.metadata(ckpt_dir).item_metadata.tree
    target = {k: jax.ShapeDtypeStruct(meta[k].shape, meta[k].dtype,
                                      sharding=NamedSharding(mesh.abstract_mesh, s)) for k, s in specs.items()}
    return ckpt.restore(ckpt_dir, target)
""", "error", "AbstractMesh"),
    ("replicates_everything", """
def restore_resharded(ckpt_dir, mesh, specs):
    ckpt = ocp.StandardCheckpointer()
    meta = ckpt.metadata(ckpt_dir).item_metadata.tree
    target = {k: jax.ShapeDtypeStruct(meta[k].shape, meta[k].dtype, sharding=NamedSharding(mesh, PartitionSpec()))
              for k in specs}
    return ckpt.restore(ckpt_dir, target)
""", "incorrect", "shardings are not what the specs ask for"),
]

_ERR = """
def restore_error(saved_shape, target_shape, mesh_shape, spec):
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    if UNKNOWN and any(a not in mesh_shape for ax in entries for a in ax):
        return "unknown_axis"
    if SHAPES:
        return "shape_mismatch"
    entries += [()] * (len(target_shape) - len(entries))
    if any(n % math.prod(mesh_shape.get(a, 1) for a in ax) for n, ax in zip(target_shape, entries)):
        return INDIVISIBLE
    return "ok"
"""


def _err(unknown="True", shapes="tuple(target_shape) != tuple(saved_shape)", indivisible='"indivisible"'):
    return _ERR.replace("UNKNOWN", unknown).replace("SHAPES", shapes).replace("INDIVISIBLE", indivisible)


ERRORS = [
    ("ignores_unknown_axes", _err(unknown="False"), "incorrect", "axis the mesh lacks"),
    ("compares_sizes_not_shapes", _err(shapes="math.prod(target_shape) != math.prod(saved_shape)"), "incorrect",
     "even by rank"),
    ("names_the_exception_class", _err(indivisible='"IndivisibleError"'), "incorrect", "'indivisible'"),
    ("never_checks_shapes", _err(shapes="False"), "incorrect", "shape_mismatch"),
]

WRONG.update({"3.1": CHUNKS_TO_READ, "3.2": AMPLIFICATION, "3.3": RESTORE, "3.4": ERRORS})
HEADERS.update({pid: U3 for pid in ("3.1", "3.2", "3.3", "3.4")})

U4 = IMPORTS + """
import itertools
import json
import math
import os
"""

_HEADER = """
def parse_safetensors_header(path):
    size = os.path.getsize(path)
    if size < 8:
        raise ValueError("truncated file")
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), ORDER)
        if n > size - 8:
            raise ValueError("truncated file")
        raw = f.read(n)
    PARSE
    if not isinstance(header, dict):
        raise ValueError("corrupt header")
    DROP
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str) and isinstance(info.get("shape"), list)
                and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2):
            raise ValueError("corrupt header")
        if CHECK_DATA and 8 + n + info["data_offsets"][1] > size:
            raise ValueError("truncated file")
    return header, START
"""

_PARSE_OK = """try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise ValueError("corrupt header") from None"""


def _header(order='"little"', parse=_PARSE_OK, drop='header.pop("__metadata__", None)', check="True", start="8 + n"):
    return (_HEADER.replace("ORDER", order).replace("PARSE", parse).replace("DROP", drop)
            .replace("CHECK_DATA", check).replace("START", start))


HEADER = [
    ("keeps_metadata", _header(drop="pass"), "incorrect", "Leave \"__metadata__\" out"),
    ("data_start_without_the_8_bytes", _header(start="n"), "incorrect", "off by 8"),
    ("never_checks_the_data", _header(check="False"), "incorrect", "must raise ValueError"),
    ("lets_json_errors_through", _header(parse='header = json.loads(raw.decode("utf-8"))'), "incorrect",
     "Say what is wrong in the message"),
    ("big_endian_length", _header(order='"big"'), "error", "little-endian"),
    ("trusts_the_length", """
def parse_safetensors_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n
""", "error", "Ran out of memory"),
]

_RUNS = """
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    ndim = len(global_shape)
    if ndim == 0:
        return [(base, itemsize)]
    strides = [itemsize] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * global_shape[i + 1]
    k = ndim - 1
    while MERGE and k >= 0 and tuple(bounds[k]) == (0, global_shape[k]):
        k -= 1
    if k < 0:
        return [(base, strides[0] * global_shape[0])]
    length = (bounds[k][1] - bounds[k][0]) * strides[k]
    first = BASE + bounds[k][0] * strides[k]
    outer = itertools.product(*(range(start, stop) for start, stop in bounds[:k]))
    return SORT((first + sum(i * s for i, s in zip(index, strides)), length) for index in outer)
"""


def _runs(merge="True", base="base", sort="sorted"):
    return _RUNS.replace("MERGE", merge).replace("BASE", base).replace("SORT", sort)


RUNS = [
    ("runs_not_merged", _runs(merge="False"), "incorrect", "merge runs that touch"),
    ("column_major_runs", """
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    if not global_shape:
        return [(base, itemsize)]
    strides = [itemsize] * len(global_shape)
    for i in range(1, len(global_shape)):
        strides[i] = strides[i - 1] * global_shape[i - 1]
    k = 0
    while k < len(global_shape) and tuple(bounds[k]) == (0, global_shape[k]):
        k += 1
    if k == len(global_shape):
        return [(base, strides[-1] * global_shape[-1])]
    length = (bounds[k][1] - bounds[k][0]) * strides[k]
    first = base + bounds[k][0] * strides[k]
    outer = itertools.product(*(range(s, e) for s, e in bounds[k + 1:]))
    return sorted((first + sum(i * s for i, s in zip(idx, strides[k + 1:])), length) for idx in outer)
""", "incorrect", "column-major"),
    ("forgets_the_base", _runs(base="0"), "incorrect", "add base"),
    ("unsorted_runs", _runs(sort="(lambda g: sorted(g, reverse=True))"), "incorrect", "sorted by offset"),
    ("lists_not_tuples", _runs(sort="(lambda g: [list(r) for r in sorted(g)])"), "incorrect", "must be a tuple"),
]

_COALESCE = """
def coalesce_runs(runs, max_gap):
    reads = []
    for offset, length in ORDER(runs):
        if reads and offset - (reads[-1][0] + reads[-1][1]) GAP max_gap:
            start, size = reads[-1]
            reads[-1] = (start, END - start)
        else:
            reads.append((offset, length))
    return RESULT
"""


def _coalesce(order="sorted", gap="<=", end="max(start + size, offset + length)", result="reads"):
    return _COALESCE.replace("ORDER", order).replace("GAP", gap).replace("END", end).replace("RESULT", result)


COALESCE = [
    ("gap_off_by_one", _coalesce(gap="<"), "incorrect", "Off by one"),
    ("not_sorted_first", _coalesce(order="list"), "incorrect", "Sort the runs"),
    ("contained_run_shrinks_the_read", _coalesce(end="offset + length"), "incorrect", "must not shorten"),
    ("returns_start_end", _coalesce(result="[(s, s + n) for s, n in reads]"), "incorrect", "not (start, end)"),
]

_READ_SHARD = """
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_shard(path, name, bounds):
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    info = header[name]
    dtype = np.dtype(DTYPES[info["dtype"]])
    shape = info["shape"]
    base = START + info["data_offsets"][0]
    BODY
"""

_EXACT = """strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    out = []
    with open(path, "rb", buffering=BUFFERING) as f:
        for index in itertools.product(*(range(a, b) for a, b in bounds[:-1])):
            offset = base + sum(i * s for i, s in zip(index, strides)) + (bounds[-1][0] * dtype.itemsize if bounds else 0)
            f.seek(offset)
            out.append(f.read(((bounds[-1][1] - bounds[-1][0]) if bounds else 1) * dtype.itemsize))
    return np.frombuffer(b"".join(out), dtype).reshape(tuple(b - a for a, b in bounds))"""


_UNBUFFERED = _EXACT.replace("BUFFERING", "0")


def _read(start="8 + n", body=_UNBUFFERED):
    return _READ_SHARD.replace("START", start).replace("BODY", body)


READ_SHARD = [
    ("reads_the_whole_tensor", _read(body="""size = math.prod(shape) * dtype.itemsize
    with open(path, "rb") as f:
        f.seek(base)
        full = np.frombuffer(f.read(size), dtype).reshape(shape)
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "incorrect", "at least the whole tensor"),
    ("buffered_small_reads", _read(body=_EXACT.replace("BUFFERING", "-1")), "incorrect", "buffering=0"),
    ("memory_map", _read(body="""full = np.memmap(path, dtype=dtype, mode="r", offset=base, shape=tuple(shape))
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "error", "memory maps"),
    ("offsets_from_byte_zero", _read(start="0"), "incorrect", "data section"),
    ("forgets_the_tensors_offset", _read().replace(' + info["data_offsets"][0]', ""), "incorrect",
     "data_start + data_offsets[0]"),
    ("column_major", _read(body="""size = math.prod(shape) * dtype.itemsize
    with open(path, "rb", buffering=0) as f:
        f.seek(base)
        full = np.frombuffer(f.read(size), dtype).reshape(shape, order="F")
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "incorrect", "column-major"),
    ("reads_one_contiguous_run", _read(body="""strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    with open(path, "rb", buffering=0) as f:
        f.seek(base + sum(a * s for (a, _), s in zip(bounds, strides)))
        data = f.read(math.prod(b - a for a, b in bounds) * dtype.itemsize)
    return np.frombuffer(data, dtype).reshape(tuple(b - a for a, b in bounds))"""), "incorrect", "one run per row"),
    ("always_float32", _read(body=_EXACT.replace("BUFFERING", "0").replace(
        "np.frombuffer(b\"\".join(out), dtype)", "np.frombuffer(b\"\".join(out), dtype).astype(np.float32)")),
     "incorrect", "own dtype"),
]

_PRESHARD = """
import itertools


def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    domains = real_index_domains(global_shape, mesh_shape, spec)
    reads = {}
    for name, chunk in candidates.items():
        hosts = {}
        for dev, dom in domains.items():
            hosts.setdefault(HOST, set()).update(
                itertools.product(*[range(s // c, -(-e // c)) for (s, e), c in zip(dom, chunk)]))
        chunks = sum(len(v) for v in hosts.values())
        reads[name] = READ
    return PICK, reads
"""


def _preshard(read="chunks * math.prod(chunk) * itemsize", pick="min(sorted(reads), key=lambda k: reads[k])",
              host="dev // devices_per_host"):
    return _PRESHARD.replace("READ", read).replace("PICK", pick).replace("HOST", host)


PRESHARD = [
    ("counts_needed_bytes", _preshard(
        read="sum(math.prod(e - s for s, e in d) for d in domains.values()) * itemsize"), "incorrect", "whole chunks"),
    ("forgets_itemsize", _preshard(read="chunks * math.prod(chunk)"), "incorrect", "multiply by itemsize"),
    ("picks_the_most", _preshard(pick="max(sorted(reads), key=lambda k: reads[k])"), "incorrect", "FEWEST"),
    ("ties_by_insertion_order", _preshard(pick="min(reads, key=lambda k: reads[k]) if len(set(reads.values())) > 1 "
                                               "else list(reads)[-1]"), "incorrect", "sorts first"),
    ("ignores_hosts", _preshard(host="dev"), "incorrect", "once per host"),
    ("one_read_in_all", _preshard(host="0"), "incorrect", "reads for itself"),
]

WRONG.update({"4.1": HEADER, "4.2": RUNS, "4.3": COALESCE, "4.4": READ_SHARD, "4.5": PRESHARD})
HEADERS.update({pid: U4 + "from ckptlab.layout import real_index_domains\n" for pid in ("4.1", "4.2", "4.3", "4.4", "4.5")})
