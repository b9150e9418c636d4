"""Unit 6's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit6.py."""

from autograder.units.unit6 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

SERVE = [
    # Orbax's v1 API: load with an abstract target holding only the parameters, a context
    # that allows a partial load, shapes from v1's metadata.
    ("orbax_v1_partial_load", """
def restore_for_serving(ckpt_dir, mesh, specs):
    saved = ocp_v1.metadata(ckpt_dir).metadata["params"]
    abstract = {"params": {name: jax.ShapeDtypeStruct(saved[name].shape, jnp.bfloat16,
                                                      sharding=NamedSharding(mesh, spec))
                           for name, spec in specs.items()}}
    context = ocp_v1.Context()
    context.pytree.loading.partial_load = True
    with context:
        return ocp_v1.load(ckpt_dir, abstract)["params"]
"""),
    # Orbax's v0 handler with restore arguments built by hand (ArrayRestoreArgs: the dtype to cast
    # to and the target sharding), shapes from the PyTree handler's own metadata.
    ("handler_with_array_restore_args", """
def restore_for_serving(ckpt_dir, mesh, specs):
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
        shapes = {k: m.shape for k, m in checkpointer.metadata(ckpt_dir).item_metadata.tree["params"].items()}
        item = {"params": {k: np.zeros((), np.float32) for k in specs}}  # which leaves: only the tree matters
        restore_args = {"params": {k: ocp.ArrayRestoreArgs(dtype=jnp.bfloat16, global_shape=shapes[k],
                                                           sharding=NamedSharding(mesh, PartitionSpec(*specs[k])))
                                   for k in specs}}
        out = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args,
                                                                          partial_restore=True))
    return out["params"]
"""),
    # TensorStore beneath Orbax, read directly: each parameter's zarr array inside the OCDBT store,
    # cast to bfloat16 as it is read, each device's slice read into its own shard.
    ("tensorstore_slices_per_device", """
import tensorstore as ts


def restore_for_serving(ckpt_dir, mesh, specs):
    base = "file://" + os.path.abspath(ckpt_dir)
    out = {}
    for name, spec in specs.items():
        stored = ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base,
                                                        "path": f"params.{name}/"}}).result()
        as_bf16 = ts.cast(stored, ts.bfloat16)
        sharding = NamedSharding(mesh, spec)
        out[name] = jax.make_array_from_callback(
            tuple(stored.shape), sharding, lambda index, a=as_bf16: np.asarray(a[index].read().result()))
    return out
"""),
]
CONVERT = [
    # The safetensors library's own lazy reader, the idiomatic Hugging Face way: safe_open maps the
    # file, get_tensor copies out one tensor at a time.
    ("safe_open_get_tensor", """
from safetensors import safe_open


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    with safe_open(st_path, framework="np") as f:
        for name in f.keys():
            new = rename[name]
            array = jax.device_put(f.get_tensor(name), NamedSharding(mesh, specs[new]))
            ocp_v1.partial.save(out_dir, {new: array})
            del array
    ocp_v1.partial.finalize(out_dir)
"""),
    # safe_open's slices: each device's shard read on its own (get_slice(name)[index]), the global
    # array assembled by JAX from them; no whole tensor on the host.
    ("safe_open_get_slice_per_device", """
from safetensors import safe_open


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    with safe_open(st_path, framework="np") as f:
        for name, new in rename.items():
            lazy = f.get_slice(name)
            sharding = NamedSharding(mesh, specs[new])
            array = jax.make_array_from_callback(tuple(lazy.get_shape()), sharding, lambda index: lazy[index])
            ocp_v1.partial.save(out_dir, {new: array})
            del array
    ocp_v1.partial.finalize(out_dir)
"""),
    # A NumPy memory map per tensor at its offset (header parsed with struct), shards copied out of it.
    ("numpy_memmap_with_struct_header", """
import struct


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": jnp.bfloat16, "I32": np.int32, "I64": np.int64}
    with open(st_path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length).decode("utf-8"))
    header.pop("__metadata__", None)
    for name, entry in header.items():
        start, _ = entry["data_offsets"]
        mapped = np.memmap(st_path, dtype=dtypes[entry["dtype"]], mode="r", offset=8 + length + start,
                           shape=tuple(entry["shape"]))
        sharding = NamedSharding(mesh, specs[rename[name]])
        array = jax.make_array_from_callback(mapped.shape, sharding, lambda index, m=mapped: np.array(m[index]))
        ocp_v1.partial.save(out_dir, {rename[name]: array})
        del array, mapped
    ocp_v1.partial.finalize(out_dir)
"""),
]

RIGHT = {
    "restore_for_serving": SERVE,
    "convert_safetensors": CONVERT,
}
