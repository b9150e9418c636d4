"""Reference solutions for Unit 9: to and from Hugging Face."""

from __future__ import annotations

import json
import math
import os
import struct

import jax
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding

from ckptlab.llama import LlamaConfig, flatten, nest, param_shapes


def _saved(ckpt_dir):
    """Where the checkpoint holds each of the model's leaves: under 'params' (Linen), at its path
    followed by 'value' (an nnx.State saved as it is), or at its path (a pure dict)."""
    saved = flatten(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    def model_path(p):
        return p.removeprefix("params/").removesuffix("/value")
    return {model_path(p): p for p in saved}


def _one_leaf(ckpt_dir, path):
    """One saved leaf alone, to the host."""
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=nest({path: 0}), restore_args=nest({path: ocp.RestoreArgs(restore_type=np.ndarray)}),
        partial_restore=True))
    return flatten(restored)[path]


def _hf_tensors(path, leaf, c):
    """The Hugging Face tensors (name, float32 array) made from one leaf, per layer where stacked."""
    if path == "embed/embedding":
        yield "model.embed_tokens.weight", leaf
    elif path == "final_norm/scale":
        yield "model.norm.weight", leaf + 1
    elif path == "lm_head/kernel":
        yield "lm_head.weight", leaf.T
    else:
        for i in range(c.num_hidden_layers):
            w = leaf[i]
            name = f"model.layers.{i}."
            if path == "layers/attn/qkv/kernel":
                q, kv = c.q_size, c.kv_size
                yield name + "self_attn.q_proj.weight", w[:, :q].T
                yield name + "self_attn.k_proj.weight", w[:, q:q + kv].T
                yield name + "self_attn.v_proj.weight", w[:, q + kv:].T
            elif path.endswith("norm/scale"):
                part = "input_layernorm" if path == "layers/attn_norm/scale" else "post_attention_layernorm"
                yield name + part + ".weight", w + 1
            else:
                part = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
                        "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj"}[path]
                yield name + part + ".weight", w.T


def _write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    codes = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}
    for name, value in tensors.items():
        header[name] = {"dtype": codes[value.dtype.name], "shape": list(value.shape),
                        "data_offsets": [offset, offset + value.nbytes]}
        offset += value.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for value in tensors.values():
            f.write(np.ascontiguousarray(value).tobytes())


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    saved = _saved(ckpt_dir)
    target = np.dtype(getattr(ml_dtypes, dtype, dtype))
    itemsize = target.itemsize

    # Which tensors go to which file, planned from the shapes alone, in the order they are made.
    order = [(path, name, shape) for path, shape in param_shapes(c).items()
             for name, shape in _planned(path, shape, c)]
    files, current, used = [], [], 0
    for _, name, shape in order:
        size = math.prod(shape) * itemsize
        if current and used + size > max_shard_bytes:
            files.append(current)
            current, used = [], 0
        current.append(name)
        used += size
    files.append(current)
    file_of = {name: n for n, names in enumerate(files) for name in names}
    names = [f"model-{n + 1:05d}-of-{len(files):05d}.safetensors" for n in range(len(files))]

    os.makedirs(out_dir)
    pending, total = {}, 0
    for path in param_shapes(c):
        leaf = _one_leaf(ckpt_dir, saved[path])
        for name, tensor in _hf_tensors(path, leaf, c):
            pending[name] = np.ascontiguousarray(tensor).astype(target)  # the cast last
            total += pending[name].nbytes
            n = file_of[name]
            if all(other in pending for other in files[n]):  # that file is complete
                _write_safetensors(os.path.join(out_dir, names[n]), {k: pending.pop(k) for k in files[n]})
        del leaf
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": {k: names[n] for k, n in file_of.items()}}, f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({**config, "torch_dtype": dtype}, f)


def _planned(path, shape, c):
    """The names and shapes of the tensors _hf_tensors makes from a leaf of ``shape``, without its values."""
    fake = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=shape, strides=(0,) * len(shape))
    return [(name, tensor.shape) for name, tensor in _hf_tensors(path, fake, c)]


def _open_hf(hf_dir):
    """Each tensor's file, dtype, shape and byte offset, from the index and the files' headers."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:  # a model small enough for one file: no index
        files = ["model.safetensors"]
    where = {}
    for file in files:
        path = os.path.join(hf_dir, file)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))  # the header's length, then the header
            header = json.loads(f.read(n).decode("utf-8"))
        for name, entry in header.items():
            if name != "__metadata__":
                dtype = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16}[entry["dtype"]]
                where[name] = (path, dtype, tuple(entry["shape"]), 8 + n + entry["data_offsets"][0])
    return where


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    from orbax.checkpoint import v1 as ocp_v1

    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    where = _open_hf(hf_dir)

    def get(name):  # a memory map: only that tensor's pages are read, and they are not our allocation
        path, dtype, shape, offset = where[name]
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)

    def layer(path, i):
        name = f"model.layers.{i}."
        if path == "layers/attn/qkv/kernel":
            return np.concatenate([get(name + f"self_attn.{x}_proj.weight").T for x in "qkv"], axis=1)
        if path.endswith("norm/scale"):
            part = "input_layernorm" if path == "layers/attn_norm/scale" else "post_attention_layernorm"
            return get(name + part + ".weight") - 1
        part = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
                "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj"}[path]
        return get(name + part + ".weight").T

    for path, shape in param_shapes(c).items():
        if path == "embed/embedding":
            host = np.array(get("model.embed_tokens.weight"))
        elif path == "final_norm/scale":
            host = get("model.norm.weight") - 1
        elif path == "lm_head/kernel":
            host = np.array(get("lm_head.weight").T)
        else:
            first = layer(path, 0)
            host = np.empty(shape, first.dtype)  # filled layer by layer: one stacked copy
            host[0] = first
            for i in range(1, shape[0]):
                host[i] = layer(path, i)
        array = jax.device_put(host, NamedSharding(mesh, specs[path]))
        del host
        ocp_v1.partial.save(out_dir, nest({("params/" if tree == "linen" else "") + path: array}))
        del array
    ocp_v1.partial.finalize(out_dir)


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    c = LlamaConfig.from_hf(config)
    saved = _saved(ckpt_dir)
    params = {path: _one_leaf(ckpt_dir, saved[path]) for path in param_shapes(c)}
    reference = logits(c, params, tokens)

    where = _open_hf(hf_dir)

    def w(name):
        path, dtype, shape, offset = where[name]
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape).astype(np.float64)

    def norm(x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + c.rms_norm_eps) * weight

    def rope(x):  # (t, heads, d): the halves rotated
        half = c.head_dim // 2
        freq = c.rope_theta ** (-np.arange(half) * 2 / c.head_dim)
        angle = np.arange(len(x))[:, None, None] * np.concatenate([freq, freq])[None, None, :]
        return x * np.cos(angle) + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * np.sin(angle)

    t = len(tokens)
    h = w("model.embed_tokens.weight")[np.asarray(tokens)]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        x = norm(h, w(p + "input_layernorm.weight"))
        q = rope((x @ w(p + "self_attn.q_proj.weight").T).reshape(t, -1, c.head_dim))
        k = rope((x @ w(p + "self_attn.k_proj.weight").T).reshape(t, -1, c.head_dim))
        v = (x @ w(p + "self_attn.v_proj.weight").T).reshape(t, -1, c.head_dim)
        group = c.num_attention_heads // c.num_key_value_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(c.head_dim) + np.triu(np.full((t, t), -np.inf), 1)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        h = h + np.einsum("hqk,khd->qhd", probs, v).reshape(t, -1) @ w(p + "self_attn.o_proj.weight").T
        x = norm(h, w(p + "post_attention_layernorm.weight"))
        gate = x @ w(p + "mlp.gate_proj.weight").T
        h = h + (gate / (1 + np.exp(-gate)) * (x @ w(p + "mlp.up_proj.weight").T)) @ w(p + "mlp.down_proj.weight").T
    h = norm(h, w("model.norm.weight"))
    converted = h @ w("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight").T

    tolerance = {"float32": 1e-4, "bfloat16": 5e-2}[config["torch_dtype"]]
    return bool(np.max(np.abs(converted - reference)) <= tolerance * np.max(np.abs(reference)))
