"""Reference solutions for Unit 6: from a training checkpoint to a serving model."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding


def restore_for_serving(ckpt_dir, mesh, specs):
    saved = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree["params"]
    target = {"params": {name: jax.ShapeDtypeStruct(saved[name].shape, jnp.bfloat16,
                                                    sharding=NamedSharding(mesh, spec))
                         for name, spec in specs.items()}}
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
    return restored["params"]


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    import json

    import numpy as np
    from orbax.checkpoint import v1 as ocp_v1

    dtypes = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
    with open(st_path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        for name, new in rename.items():
            entry = header[name]
            begin, end = entry["data_offsets"]
            f.seek(8 + n + begin)
            host = np.frombuffer(f.read(end - begin), dtypes[entry["dtype"]]).reshape(entry["shape"])
            array = jax.device_put(host, NamedSharding(mesh, specs[new]))
            del host
            ocp_v1.partial.save(out_dir, {new: array})  # one tensor in memory at a time
            del array
    ocp_v1.partial.finalize(out_dir)
