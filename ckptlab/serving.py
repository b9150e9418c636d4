"""From a training checkpoint to a serving model (Lesson 6): restore only the parameters, cast on
restore, onto a serving mesh; measure the host memory a restore takes; turn a safetensors file into
a sharded Orbax checkpoint one tensor at a time.

    from ckptlab import serving
    serving.save_training_state(ckpt_dir, {"embed": (8192, 1024), ...})  # params, mu, nu (float32), step
    serving.restore_params(ckpt_dir, mesh, specs)            # the parameters alone, bfloat16, on `mesh`
    serving.restore_peak(ckpt_dir, {"what": "params", "dtype": "bfloat16"}, mesh_shape, specs)
    serving.convert_safetensors(path, out_dir, rename, mesh, specs)

Peaks are measured as the grader measures problems 6.1 and 6.2, with the same tools
(:mod:`ckptlab.memory`): in a fresh process, the kernel's peak resident set (``VmHWM``, 6.1's)
above the resident set just before the work, and the peak of the anonymous memory (sampled from
outside, 6.2's: the pages of a file the work maps are not its own), after
:func:`~ckptlab.memory.prepare_measurement` (one tiny Orbax save and restore with each API, and
large blocks given back to the kernel when freed). Linux only.
"""

from __future__ import annotations

import json
import os

# The measuring tools live in ckptlab.memory (the grader's too); named here as well for the lesson's
# ``serving.measured_tempdir`` and the other calls that have always said ``serving.``.
from ckptlab.memory import (  # noqa: F401
    MEASURED_MMAP_THRESHOLD,
    AnonymousPeak,
    give_back_freed_memory,
    measured_tempdir,
    on_tmpfs,
    prepare_measurement,
    reset_peak,
    run_measured,
    status_bytes,
    wait_for_line,
)

# ---------------------------------------------------------------------------------------------
# A training checkpoint, and a restore for serving

def training_state(shapes: dict, seed: int = 0) -> dict:
    """``{"params", "opt_state": {"mu", "nu"}, "step"}`` as NumPy arrays (float32), as AdamW keeps it."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    moments = {m: {k: (rng.standard_normal(s) * scale).astype(np.float32) for k, s in shapes.items()}
               for m, scale in (("mu", 1e-3), ("nu", 1e-6))}
    return {"params": params, "opt_state": moments, "step": np.int64(1000)}


def save_training_state(ckpt_dir: str, shapes: dict, seed: int = 0, devices: int = 8) -> dict:
    """Save a training state FSDP-style (first dimension over ``devices`` devices) with Orbax's
    StandardCheckpointer; return it (NumPy)."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    state = training_state(shapes, seed)
    mesh = jax.make_mesh((devices,), ("x",), devices=jax.devices()[:devices])
    tree = jax.tree.map(lambda a: jax.device_put(a, NamedSharding(mesh, PartitionSpec(*(("x",) if a.ndim else ())))), state)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(os.path.abspath(ckpt_dir), tree)
    checkpointer.wait_until_finished()
    return state


def restore_params(ckpt_dir: str, mesh, specs: dict, dtype="bfloat16", concurrent_gb: float | None = None) -> dict:
    """The parameters alone (``partial_restore``), cast to ``dtype`` on restore, each placed as
    ``NamedSharding(mesh, specs[name])``. ``concurrent_gb`` caps the bytes Orbax has in flight."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding

    saved = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree["params"]
    target = {"params": {k: jax.ShapeDtypeStruct(saved[k].shape, dtype, sharding=NamedSharding(mesh, spec))
                         for k, spec in specs.items()}}
    handler = ocp.PyTreeCheckpointHandler(restore_concurrent_gb=concurrent_gb) if concurrent_gb else ocp.PyTreeCheckpointHandler()
    with ocp.Checkpointer(handler) as checkpointer:
        restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
    return restored["params"]


def restore_whole(ckpt_dir: str, mesh, specs: dict, dtype="float32") -> dict:
    """The whole training state (moments too), each array placed as its parameter's spec says."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    tree = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree

    def leaf(path, m):
        spec = specs[path[-1].key] if len(m.shape) else PartitionSpec()
        return jax.ShapeDtypeStruct(m.shape, dtype if len(m.shape) else m.dtype, sharding=NamedSharding(mesh, spec))

    return ocp.StandardCheckpointer().restore(ckpt_dir, jax.tree_util.tree_map_with_path(leaf, tree))


# ---------------------------------------------------------------------------------------------
# safetensors -> Orbax

_ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
              "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def safetensors_header(path: str) -> tuple[int, dict]:
    """(where the data starts, the header without ``__metadata__``), from the first 8 + N bytes, read as
    strictly as safetensors reads it (:mod:`ckptlab.stheader`: ValueError, saying why, for a header
    ``safe_open`` refuses)."""
    from ckptlab import stheader

    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = dict(stheader.parse(f.read(n)))
    header.pop("__metadata__", None)
    return 8 + n, header


def convert_safetensors(path: str, out_dir: str, rename: dict, mesh, specs: dict, how: str = "tensor_by_tensor",
                        on_read=None) -> dict:
    """Write the tensors of the safetensors file ``path`` as an Orbax checkpoint in ``out_dir``,
    tensor ``old`` saved as ``rename[old]``, placed as ``NamedSharding(mesh, specs[new])``.

    ``how``: ``"tensor_by_tensor"`` reads one tensor's bytes, places it, adds it to the checkpoint
    (``orbax.checkpoint.v1.partial.save``) and drops it, then finalizes; ``"safe_open"`` does the same
    with the safetensors library's reader (which maps the file); ``"one_save"`` reads one
    tensor at a time but keeps them all and saves the whole tree once; ``"load_file"`` reads the
    whole file first (``safetensors.numpy.load_file``), then saves tensor by tensor. ``on_read()``
    is called once every tensor has been read. Returns the saved tree's shapes."""
    import gc

    import jax
    import ml_dtypes  # noqa: F401 - bfloat16 for NumPy
    import numpy as np
    from jax.sharding import NamedSharding
    from orbax.checkpoint import v1 as ocp_v1

    out_dir = os.path.abspath(out_dir)
    shapes, tree = {}, {}
    if how == "safe_open":  # the safetensors library's lazy reader: the file mapped, a tensor copied out at a time
        from safetensors import safe_open

        with safe_open(path, framework="np") as f:
            for old, new in rename.items():
                array = jax.device_put(f.get_tensor(old), NamedSharding(mesh, specs[new]))
                gc.collect()  # jaxlib 0.12's device_put leaves the host array to the cyclic collector
                shapes[new] = array.shape
                ocp_v1.partial.save(out_dir, {new: array})
                del array
        if on_read is not None:
            on_read()
        ocp_v1.partial.finalize(out_dir)
        return shapes
    if how == "load_file":
        from safetensors.numpy import load_file

        loaded = load_file(path)  # the whole file, in host memory, until the loop ends
        if on_read is not None:
            on_read()
        for old, new in rename.items():
            ocp_v1.partial.save(out_dir, {new: jax.device_put(loaded[old], NamedSharding(mesh, specs[new]))})
            shapes[new] = loaded[old].shape
        del loaded
        ocp_v1.partial.finalize(out_dir)
        return shapes
    base, header = safetensors_header(path)
    with open(path, "rb") as f:
        for old, new in rename.items():
            entry = header[old]
            begin, end = entry["data_offsets"]
            f.seek(base + begin)
            host = np.frombuffer(f.read(end - begin), np.dtype(_ST_DTYPES[entry["dtype"]])).reshape(entry["shape"])
            array = jax.device_put(host, NamedSharding(mesh, specs[new]))
            del host  # one tensor's host copy at a time
            gc.collect()  # jaxlib 0.12's device_put leaves the host array to the cyclic collector
            shapes[new] = array.shape
            if how == "one_save":
                tree[new] = array
            else:
                ocp_v1.partial.save(out_dir, {new: array})
            del array
    if on_read is not None:
        on_read()
    if how == "one_save":
        ocp_v1.save(out_dir, tree)
    else:
        ocp_v1.partial.finalize(out_dir)
    return shapes


# ---------------------------------------------------------------------------------------------
# Measured in a fresh process

_CHILD = r"""
import json, os, sys
from ckptlab import setup_devices

setup_devices()
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec
from orbax.checkpoint import v1 as ocp_v1

from ckptlab import memory, serving
from ckptlab.layout import course_mesh

logging.set_verbosity(logging.ERROR)
job = json.loads(sys.argv[1])
memory.prepare_measurement(job["scratch"])
mesh = course_mesh(dict(job["mesh"]))
specs = {k: PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in v]) for k, v in job["specs"].items()}
plan = job["plan"]
if plan["what"] == "replicate":
    host = np.random.default_rng(0).standard_normal(plan["shape"]).astype(plan["dtype"])
import gc
gc.collect()
memory.reset_peak()
before = memory.status_bytes("VmRSS")
print("ready", flush=True)  # the parent samples this process's anonymous memory from now on
sys.stdin.readline()


def rchar():
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


read = {}
start_reads = rchar()
held = lambda tree: sum(s.data.nbytes for a in jax.tree.leaves(tree) for s in a.addressable_shards)
if plan["what"] == "convert":
    serving.convert_safetensors(job["path"], plan["out_dir"], plan["rename"], mesh, specs, plan.get("how", "tensor_by_tensor"),
                                on_read=lambda: read.update(read_peak_bytes=memory.status_bytes("VmHWM") - before))
    at_once = 0
elif plan["what"] == "replicate":
    placed = jax.device_put(host, NamedSharding(mesh, PartitionSpec()))
    jax.block_until_ready(placed)
    read["grown_bytes"] = memory.status_bytes("VmRSS") - before
    at_once = held(placed)
elif plan["what"] == "unstack":
    from ckptlab import unstacking

    unstacking.unstack(job["path"], plan["out_dir"], mesh, plan["groups"], plan["scan_axis"], plan["how"])
    at_once = 0
elif plan["what"] == "whole":
    state = serving.restore_whole(job["path"], mesh, specs, plan.get("dtype", "float32"))
    jax.block_until_ready(state)  # every output landed before the peak is read (JAX may return before)
    at_once = held(state)
    out = {k: v.astype(plan["cast_after"]) for k, v in state["params"].items()} if plan.get("cast_after") else state["params"]
    jax.block_until_ready(out)
    at_once += held(out) if plan.get("cast_after") else 0
    del state
else:
    try:
        out = serving.restore_params(job["path"], mesh, specs, plan.get("dtype", "bfloat16"), plan.get("concurrent_gb"))
    except ValueError as exc:  # (a concurrency limit below what one read reserves)
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        os._exit(0)
    jax.block_until_ready(out)  # every output landed before the peak is read (JAX may return before)
    at_once = held(out)
    if plan.get("cast_after"):
        cast = {k: v.astype(plan["cast_after"]) for k, v in out.items()}
        jax.block_until_ready(cast)
        at_once += held(cast)
read["read_bytes"] = rchar() - start_reads  # every read of the work, as the kernel counts it
print(json.dumps({"peak_bytes": memory.status_bytes("VmHWM") - before, "held_bytes": at_once, **read}), flush=True)
"""


def restore_peak(path: str, plan: dict, mesh_shape: dict, specs: dict, timeout: float = 600) -> dict:
    """Run ``plan`` on the checkpoint (or safetensors file) ``path`` in a fresh process on the 16
    devices. Returns ``peak_bytes``, the kernel's peak resident set above the set before the work;
    ``anonymous_peak_bytes``, the peak of its anonymous memory above the same point, sampled from
    this process (:class:`~ckptlab.memory.AnonymousPeak`, as the grader samples problem 6.2's); ``held_bytes``, the
    bytes the devices held at once at the work's end, every replica counted (the restored arrays, and
    their cast beside them when the plan casts after); ``read_bytes``, what the work read, as the
    kernel counts it (``rchar``).

    ``plan``: ``{"what": "params" | "whole" | "convert" | "replicate" | "unstack", "dtype": ..., "cast_after":
    dtype or None, "concurrent_gb": float or None}`` (convert: ``"out_dir"``, ``"rename"``, ``"how"``, as
    :func:`convert_safetensors` takes it; replicate: ``"shape"`` and ``"dtype"`` of a random array put
    on every device of the mesh, its ``grown_bytes`` reported; unstack: ``"out_dir"``, ``"groups"``,
    ``"scan_axis"``, ``"how"``, as :func:`ckptlab.unstacking.unstack` takes them)."""
    plain = {k: [list(e) if isinstance(e, tuple) else e for e in spec] for k, spec in specs.items()}
    job = {"path": os.path.abspath(path), "plan": plan, "mesh": list(mesh_shape.items()), "specs": plain}
    out, anonymous = run_measured(_CHILD, job, prefix="serving-peak-", timeout=timeout,
                                  finished=lambda said: any(line.startswith("{") for line in said.splitlines()))
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return {**json.loads(lines[-1]), "anonymous_peak_bytes": anonymous}
