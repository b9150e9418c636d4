"""Lesson 9's conversions of the course's Llama-shaped model between a sharded Orbax checkpoint
and Hugging Face's sharded safetensors, one leaf at a time (:func:`orbax_to_hf`, :func:`hf_to_orbax`),
their controls, the whole model at once (:func:`whole_model_to_hf`, :func:`whole_model_to_orbax`),
and each one's memory measured in a fresh process from outside (:func:`conversion_peak`); one layer
of a stacked leaf read alone, its bytes read and its memory measured (:func:`layer_reads`); and Meta's
original names and rotary row order beside Hugging Face's (:func:`meta_name`,
:func:`permute_for_rotate_half`).

Problems 9.1 and 9.2 ask for these conversions: they may not import this module.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from ckptlab.hf import (
    from_hf,
    hf_names_of,
    hf_shapes,
    leaf_from_hf,
    leaf_to_hf,
    open_hf,
    save_hf,
    to_hf,
    write_config,
    write_shards,
)
from ckptlab.llama import LlamaConfig, flatten, nest, param_shapes, restore_leaf, saved_paths

# Meta's original Llama checkpoints (``consolidated.00.pth``) name the same weights otherwise, and order
# each head's q and k rows for a rotary that pairs neighbouring dimensions (complex numbers), where
# Hugging Face's ``rotate_half`` pairs dimension i with i + head_dim / 2. Hugging Face's converter
# (transformers' ``src/transformers/models/llama/convert_llama_weights_to_hf.py``) permutes those rows.
META_PARTS = {"input_layernorm": "attention_norm", "self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
              "self_attn.v_proj": "attention.wv", "self_attn.o_proj": "attention.wo",
              "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "feed_forward.w1",
              "mlp.up_proj": "feed_forward.w3", "mlp.down_proj": "feed_forward.w2"}


def meta_name(name: str) -> str:
    """The name Meta's original checkpoint gives Hugging Face's tensor ``name``."""
    top = {"model.embed_tokens.weight": "tok_embeddings.weight", "model.norm.weight": "norm.weight",
           "lm_head.weight": "output.weight"}
    if name in top:
        return top[name]
    i, part = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", name).groups()
    return f"layers.{i}.{META_PARTS[part]}.weight"


def permute_for_rotate_half(weight, heads: int):
    """Hugging Face's ``permute(w, n_heads)`` of ``convert_llama_weights_to_hf.py``, in NumPy: a q or k
    weight ``(heads * head_dim, in)`` from Meta's row order (each head's rows in pairs 2j, 2j + 1) to
    ``rotate_half``'s (row j, then row head_dim / 2 + j): ``w.view(heads, head_dim // 2, 2, in)
    .transpose(1, 2).reshape(out, in)``."""
    out, inner = weight.shape
    return np.ascontiguousarray(np.asarray(weight).reshape(heads, out // heads // 2, 2, inner).swapaxes(1, 2)
                                .reshape(out, inner))


def permute_for_pairs(weight, heads: int):
    """The inverse of :func:`permute_for_rotate_half`: ``rotate_half``'s row order to Meta's."""
    out, inner = weight.shape
    return np.ascontiguousarray(np.asarray(weight).reshape(heads, 2, out // heads // 2, inner).swapaxes(1, 2)
                                .reshape(out, inner))


def orbax_to_hf(ckpt_dir: str, out_dir: str, config: LlamaConfig, max_shard_bytes: int, dtype: str = "float32") -> list:
    """The checkpoint's model as a Hugging Face folder, one Flax leaf in memory at a time (and one
    file's tensors): each leaf restored alone, to the host, transformed, and written as its file fills."""
    where = saved_paths(ckpt_dir)
    paths = list(param_shapes(config))
    shapes = {name: hf_shapes(config)[name] for path in paths for name in hf_names_of(path, config)}

    def tensors():
        for path in paths:
            yield from leaf_to_hf(path, restore_leaf(ckpt_dir, where[path]), config, dtype).items()

    files = write_shards(out_dir, tensors(), shapes, dtype, max_shard_bytes)
    write_config(out_dir, config, dtype)
    return files


def hf_to_orbax(hf_dir: str, out_dir: str, mesh, specs: dict, tree: str = "nnx") -> None:
    """A Hugging Face folder as a sharded Orbax checkpoint of the course's model (``tree``: ``"nnx"``,
    or ``"linen"`` for the same leaves under ``params``), one Flax leaf in memory at a time: each
    built from its tensors (memory-mapped), placed on ``mesh`` as ``specs[path]`` says, and saved
    before the next (Orbax's partial save, then one finalize)."""
    import jax
    from jax.sharding import NamedSharding
    from orbax.checkpoint import v1 as ocp_v1

    checkpoint = open_hf(hf_dir)
    config = LlamaConfig.from_hf(checkpoint.config or {})
    prefix = "params/" if tree == "linen" else ""
    for path in param_shapes(config):
        host = leaf_from_hf(path, checkpoint.__getitem__, config)
        array = jax.device_put(host, NamedSharding(mesh, specs[path]))
        del host
        ocp_v1.partial.save(out_dir, nest({prefix + path: array}))
        del array
    ocp_v1.partial.finalize(out_dir)


def whole_model_to_hf(ckpt_dir: str, out_dir: str, config: LlamaConfig, max_shard_bytes: int, dtype: str = "float32") -> list:
    """The control for :func:`orbax_to_hf`'s memory: the whole checkpoint restored at once (as
    ``StandardCheckpointer().restore`` gives it), converted, then written."""
    import orbax.checkpoint as ocp

    saved = flatten(ocp.StandardCheckpointer().restore(ckpt_dir))
    params = {path: np.asarray(saved[at]) for path, at in saved_paths(ckpt_dir).items()}
    return save_hf(out_dir, to_hf(params, config, dtype), config, dtype, max_shard_bytes)


def whole_model_to_orbax(hf_dir: str, out_dir: str, mesh, specs: dict, tree: str = "nnx") -> None:
    """The control for :func:`hf_to_orbax`'s memory: every tensor read, the whole model converted and
    placed, then saved at once."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding

    checkpoint = open_hf(hf_dir)
    config = LlamaConfig.from_hf(checkpoint.config or {})
    tensors = {name: np.array(checkpoint[name]) for name in checkpoint.names()}
    params = {path: jax.device_put(value, NamedSharding(mesh, specs[path]))
              for path, value in from_hf(tensors, config).items()}
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(out_dir, {"params": nest(params)} if tree == "linen" else nest(params))
    checkpointer.wait_until_finished()


_CHILD = r"""
import json, sys
job = json.loads(sys.argv[1])
from ckptlab.devices import setup_devices
setup_devices()
import jax
from jax.sharding import PartitionSpec
from ckptlab import hfconvert, memory
from ckptlab.layout import course_mesh
from ckptlab.llama import LlamaConfig
import orbax.checkpoint  # (imported before the baseline, as the grader's worker imports what an answer imports)
memory.prepare_measurement(job["scratch"])
memory.settle()
print("ready", flush=True)
sys.stdin.readline()
how = job["how"]
if how in ("leaf_by_leaf_to_hf", "whole_model_to_hf"):
    fn = hfconvert.orbax_to_hf if how == "leaf_by_leaf_to_hf" else hfconvert.whole_model_to_hf
    fn(job["src"], job["out"], LlamaConfig(**job["config"]), job["max_shard_bytes"], job["dtype"])
else:
    mesh = course_mesh(dict(job["mesh"]))
    specs = {k: PartitionSpec(*v) for k, v in job["specs"].items()}
    fn = hfconvert.hf_to_orbax if how == "leaf_by_leaf_to_orbax" else hfconvert.whole_model_to_orbax
    fn(job["src"], job["out"], mesh, specs, job.get("tree", "nnx"))
print(json.dumps({"done": True}), flush=True)
"""


def conversion_peak(how: str, src: str, out: str, *, config: LlamaConfig | None = None, max_shard_bytes: int = 0,
                    dtype: str = "float32", mesh: dict | None = None, specs: dict | None = None, tree: str = "nnx",
                    timeout: float = 300) -> int:
    """Run one conversion in a fresh process on the 16 devices and return the peak of its anonymous
    memory above where it stood just before (sampled from outside, as the grader measures 9.1 and
    9.2: a mapped file's pages are not counted). ``how``: ``"leaf_by_leaf_to_hf"``,
    ``"whole_model_to_hf"`` (with ``config``, ``max_shard_bytes``, ``dtype``), ``"leaf_by_leaf_to_orbax"``
    or ``"whole_model_to_orbax"`` (with ``mesh``, ``specs`` as tuples of spec entries, ``tree``)."""
    import dataclasses

    from ckptlab.memory import run_measured

    job = {"how": how, "src": os.path.abspath(src), "out": os.path.abspath(out),
           "config": dataclasses.asdict(config) if config else None, "max_shard_bytes": max_shard_bytes,
           "dtype": dtype, "mesh": list((mesh or {}).items()), "tree": tree,
           "specs": {k: [list(e) if isinstance(e, tuple) else e for e in v] for k, v in (specs or {}).items()}}
    _, peak = run_measured(_CHILD, job, prefix="hf-peak-", timeout=timeout, finished=lambda said: '"done"' in said)
    return peak


_LAYER_CHILD = r"""
import hashlib, json, sys
job = json.loads(sys.argv[1])
import tensorstore as ts
from ckptlab import memory
from ckptlab.readcount import count_reads

memory.give_back_freed_memory(memory.MEASURED_MMAP_THRESHOLD)
context = ts.Context({"cache_pool": {"total_bytes_limit": 0}})  # no cache of chunks: every read is read
kvstore = {"driver": "ocdbt", "base": "file://" + job["ckpt_dir"], "path": job["key"] + "/"}
zarr3 = ts.KvStore.open(kvstore, context=context).result().read("zarr.json").result().state == "value"
store = ts.open({"driver": "zarr3" if zarr3 else "zarr", "kvstore": kvstore}, open=True, read=True,
                context=context).result()
out = {"shape": list(store.shape), "chunk_shape": list(store.chunk_layout.read_chunk.shape)}
digests = {}
for what in ("layer", "whole"):
    memory.settle()
    memory.reset_peak()
    before = memory.status_bytes("VmRSS")
    with count_reads(whole_process=True) as reads:
        value = (store[job["layer"]] if what == "layer" else store).read().result()
    out[what] = {"read_bytes": reads.bytes, "peak_bytes": memory.status_bytes("VmHWM") - before,
                 "nbytes": int(value.nbytes)}
    digests[what] = hashlib.sha256((value if what == "layer" else value[job["layer"]]).tobytes()).hexdigest()
    del value
out["same_values"] = digests["layer"] == digests["whole"]
print(json.dumps(out), flush=True)
"""


def layer_reads(ckpt_dir: str, saved_path: str, layer: int, timeout: float = 120) -> dict:
    """Read one layer's slice (``leaf[layer]``) of the stacked leaf at ``saved_path`` of an Orbax
    checkpoint (OCDBT) with TensorStore, Orbax's own storage layer, then the whole leaf, in a fresh
    process that does nothing else and caches no chunk. Returns the leaf's ``shape``, its stored
    ``chunk_shape``, and for ``"layer"`` and ``"whole"`` the bytes read (the kernel's count, every
    thread's) and the peak of the resident set above where it stood (``VmHWM``, reset before each),
    and whether the slice equals that layer of the whole leaf (``same_values``). Linux only."""
    import sys

    from ckptlab.twohost import run_hosts

    job = {"ckpt_dir": os.path.abspath(ckpt_dir), "key": ".".join(saved_path.split("/")), "layer": int(layer)}
    (report,) = run_hosts([[sys.executable, "-c", _LAYER_CHILD, json.dumps(job)]], timeout, "the reading process")
    return report
