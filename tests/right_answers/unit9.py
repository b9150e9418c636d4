"""Unit 9's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit9.py."""

from autograder.units.unit9 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

TO_HF = [
    # Orbax's v1 API: one load per leaf, the saved tree given back with every other leaf
    # ocp_v1.PLACEHOLDER (skipped) and this one a NumPy array (so it comes back as NumPy); the
    # transforms table-driven (np.split for q, k, v); files planned as huggingface_hub splits a state
    # dict (a tensor over the limit alone in a file of its own, the current file left open), each
    # written by safetensors.numpy.save_file with {"format": "pt"} as soon as its tensors are in.
    ("v1_placeholders_safetensors_numpy_hub_plan", """
from safetensors.numpy import save_file as _h91a_save_file

# Each stacked leaf's Hugging Face parts, per layer, and how each is made from the layer's slice.
_H91A_PARTS = {
    "layers/attn_norm/scale": (("input_layernorm", "plus_one"),),
    "layers/attn/qkv/kernel": (("self_attn.q_proj", 0), ("self_attn.k_proj", 1), ("self_attn.v_proj", 2)),
    "layers/attn/o/kernel": (("self_attn.o_proj", "T"),),
    "layers/mlp_norm/scale": (("post_attention_layernorm", "plus_one"),),
    "layers/mlp/gate/kernel": (("mlp.gate_proj", "T"),),
    "layers/mlp/up/kernel": (("mlp.up_proj", "T"),),
    "layers/mlp/down/kernel": (("mlp.down_proj", "T"),),
}


def _h91a_made(path, shape, c):
    # The tensors (name, shape) made from a leaf of that shape, in the order they are made.
    if path == "embed/embedding":
        return [("model.embed_tokens.weight", shape)]
    if path == "final_norm/scale":
        return [("model.norm.weight", shape)]
    if path == "lm_head/kernel":
        return [("lm_head.weight", shape[::-1])]
    widths = (c.q_size, c.kv_size, c.kv_size)
    out = []
    for i in range(shape[0]):
        for part, how in _H91A_PARTS[path]:
            if how == "plus_one":
                made = shape[1:]
            elif how == "T":
                made = shape[1:][::-1]
            else:
                made = (widths[how], shape[1])
            out.append((f"model.layers.{i}.{part}.weight", made))
    return out


def _h91a_values(path, leaf, c):
    if path == "embed/embedding":
        yield leaf
    elif path == "final_norm/scale":
        yield leaf + np.float32(1)
    elif path == "lm_head/kernel":
        yield leaf.T
    else:
        for layer in leaf:
            for _, how in _H91A_PARTS[path]:
                if how == "plus_one":
                    yield layer + np.float32(1)
                elif how == "T":
                    yield layer.T
                else:
                    yield np.split(layer, [c.q_size, c.q_size + c.kv_size], axis=1)[how].T


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    target = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float32)
    saved = ocp_v1.metadata(ckpt_dir).metadata
    # Where each leaf is saved, whichever tree holds it: under "params" (Linen's variables), ending in
    # "value" (an nnx.State saved as it is), or at its path (a pure dict).
    saved_at = {}
    for key_path, _ in jax.tree_util.tree_flatten_with_path(saved)[0]:
        keys = tuple(k.key for k in key_path)
        path = keys[1:] if keys[0] == "params" else keys
        path = path[:-1] if path[-1] == "value" else path
        saved_at["/".join(path)] = keys

    made = [(path, name, shape) for path, leaf_shape in param_shapes(c).items()
            for name, shape in _h91a_made(path, leaf_shape, c)]
    # huggingface_hub's split: a tensor over the limit goes alone, at once; the others fill the current file.
    shards, current, used = [], [], 0
    for _, name, shape in made:
        size = math.prod(shape) * target.itemsize
        if size > max_shard_bytes:
            shards.append([name])
            continue
        if used + size > max_shard_bytes:
            shards.append(current)
            current, used = [], 0
        current.append(name)
        used += size
    if current:
        shards.append(current)
    files = [f"model-{n:05d}-of-{len(shards):05d}.safetensors" for n in range(1, len(shards) + 1)]
    home = {name: files[n] for n, names in enumerate(shards) for name in names}
    members = dict(zip(files, shards))

    os.makedirs(out_dir)
    waiting = {file: {} for file in files}
    total = 0
    for path in param_shapes(c):
        keys = saved_at[path]
        abstract = jax.tree.map(lambda m: ocp_v1.PLACEHOLDER, saved)
        node, meta = abstract, saved
        for key in keys[:-1]:
            node, meta = node[key], meta[key]
        node[keys[-1]] = np.empty(tuple(meta[keys[-1]].shape), np.float32)  # a NumPy leaf: NumPy back
        leaf = ocp_v1.load(ckpt_dir, abstract)
        for key in keys:
            leaf = leaf[key]
        names = [name for p, name, _ in made if p == path]
        for name, value in zip(names, _h91a_values(path, leaf, c)):
            file = home[name]
            waiting[file][name] = np.ascontiguousarray(value).astype(target)  # the cast last
            total += waiting[file][name].nbytes
            if len(waiting[file]) == len(members[file]):
                _h91a_save_file(waiting.pop(file), os.path.join(out_dir, file), metadata={"format": "pt"})
        del leaf
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": home}, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dict(config, torch_dtype=dtype), f, indent=2)
"""),
    # No Orbax restore: TensorStore opens each leaf's zarr array inside the checkpoint's OCDBT store
    # (the keys from Orbax's _METADATA file) and reads only the block a tensor needs (layer i, and for
    # q, k, v only its columns). The tensors are made in Hugging Face's own order (layer by layer), the
    # files planned on that order, and each file streamed: its header written by hand (8-byte length,
    # JSON, padded to 8), then each tensor's bytes as soon as it is made; one tensor in memory at a time.
    ("tensorstore_blocks_streamed_hand_header", """
import ast
import struct

import tensorstore as ts


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    out_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    code = {"bfloat16": "BF16", "float32": "F32"}[dtype]
    with open(os.path.join(ckpt_dir, "_METADATA")) as f:
        saved = [ast.literal_eval(k) for k in json.load(f)["tree_metadata"]]
    # the model's path of each saved key: Linen's "params" before it, an nnx.State's "value" after it
    stored_as = {"/".join(k[k[0] == "params":len(k) - (k[-1] == "value")]): ".".join(k) for k in saved}
    base = "file://" + os.path.abspath(ckpt_dir)
    stores = {}

    def store(path):
        if path not in stores:
            stores[path] = ts.open({"driver": "zarr", "kvstore": {
                "driver": "ocdbt", "base": base, "path": stored_as[path] + "/"}}).result()
        return stores[path]

    def read(path, *index):
        return np.asarray(store(path)[index].read().result(), np.float32)

    q, kv, d, f, v = c.q_size, c.kv_size, c.hidden_size, c.intermediate_size, c.vocab_size
    # (name, shape, how to make it), in the order save_pretrained writes a Llama model
    plan = [("model.embed_tokens.weight", (v, d), lambda: read("embed/embedding"))]
    for i in range(c.num_hidden_layers):
        plan += [
            (f"model.layers.{i}.input_layernorm.weight", (d,), lambda i=i: read("layers/attn_norm/scale", i) + 1),
            (f"model.layers.{i}.self_attn.q_proj.weight", (q, d),
             lambda i=i: read("layers/attn/qkv/kernel", i, slice(None), slice(0, q)).T),
            (f"model.layers.{i}.self_attn.k_proj.weight", (kv, d),
             lambda i=i: read("layers/attn/qkv/kernel", i, slice(None), slice(q, q + kv)).T),
            (f"model.layers.{i}.self_attn.v_proj.weight", (kv, d),
             lambda i=i: read("layers/attn/qkv/kernel", i, slice(None), slice(q + kv, q + 2 * kv)).T),
            (f"model.layers.{i}.self_attn.o_proj.weight", (d, q), lambda i=i: read("layers/attn/o/kernel", i).T),
            (f"model.layers.{i}.post_attention_layernorm.weight", (d,),
             lambda i=i: read("layers/mlp_norm/scale", i) + 1),
            (f"model.layers.{i}.mlp.gate_proj.weight", (f, d), lambda i=i: read("layers/mlp/gate/kernel", i).T),
            (f"model.layers.{i}.mlp.up_proj.weight", (f, d), lambda i=i: read("layers/mlp/up/kernel", i).T),
            (f"model.layers.{i}.mlp.down_proj.weight", (d, f), lambda i=i: read("layers/mlp/down/kernel", i).T),
        ]
    plan.append(("model.norm.weight", (d,), lambda: read("final_norm/scale") + 1))
    if not c.tie_word_embeddings:
        plan.append(("lm_head.weight", (v, d), lambda: read("lm_head/kernel").T))

    itemsize = np.dtype(out_type).itemsize
    groups = [[]]
    for entry in plan:
        size = math.prod(entry[1]) * itemsize
        if groups[-1] and sum(math.prod(s) for _, s, _ in groups[-1]) * itemsize + size > max_shard_bytes:
            groups.append([])
        groups[-1].append(entry)
    names = ["model-%05d-of-%05d.safetensors" % (n + 1, len(groups)) for n in range(len(groups))]

    os.makedirs(out_dir)
    weight_map, total = {}, 0
    for file, group in zip(names, groups):
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape, _ in group:
            nbytes = math.prod(shape) * itemsize
            header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = file
        total += offset
        text = json.dumps(header).encode("utf-8")
        text += b" " * (-len(text) % 8)
        with open(os.path.join(out_dir, file), "wb") as out:
            out.write(struct.pack("<Q", len(text)))
            out.write(text)
            for name, shape, make in group:
                value = np.ascontiguousarray(make()).astype(out_type)  # transformed in float32, cast last
                assert value.shape == shape, (name, value.shape, shape)
                out.write(value.tobytes())
                del value
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as out:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, out)
    with open(os.path.join(out_dir, "config.json"), "w") as out:
        json.dump({**config, "torch_dtype": dtype}, out)
"""),
    # Orbax's v0 PyTreeCheckpointer restores each leaf alone (partial_restore) onto one device as a
    # jax.Array (ArrayRestoreArgs with a SingleDeviceSharding); the transforms in jax.numpy (jnp.split,
    # .T, + 1, astype last); safetensors.flax.save_file writes jax arrays. Files are filled as the tensors
    # come and written under temporary names, renamed model-0000k-of-0000N once N is known.
    ("v0_one_device_jnp_flax_save_then_rename", """
import jax.numpy as jnp
from safetensors.flax import save_file as _h91c_save_file


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    target = jnp.bfloat16 if dtype == "bfloat16" else jnp.float32
    checkpointer = ocp.PyTreeCheckpointer()
    saved, _ = jax.tree_util.tree_flatten_with_path(checkpointer.metadata(ckpt_dir).item_metadata.tree)
    one_device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    os.makedirs(out_dir)
    written = []  # (temporary file, its tensors)
    state = {"tensors": {}, "bytes": 0, "total": 0}

    def flush():
        if state["tensors"]:
            temporary = os.path.join(out_dir, f"part{len(written)}.tmp")
            _h91c_save_file(state["tensors"], temporary, metadata={"format": "pt"})
            written.append((temporary, list(state["tensors"])))
            state["tensors"], state["bytes"] = {}, 0

    def add(name, value):
        value = value.astype(target)  # every transform done in float32: the cast last
        nbytes = value.size * value.dtype.itemsize
        if state["tensors"] and state["bytes"] + nbytes > max_shard_bytes:
            flush()
        state["tensors"][name] = value
        state["bytes"] += nbytes
        state["total"] += nbytes

    for key_path, meta in saved:
        keys = [k.key for k in key_path]
        model_keys = [k for n, k in enumerate(keys) if not (n == 0 and k == "params")
                      and not (n == len(keys) - 1 and k == "value")]  # Linen's prefix, an nnx.State's suffix
        path = "/".join(model_keys)
        item, args = {}, {}
        node_item, node_args = item, args
        for key in keys[:-1]:
            node_item, node_args = node_item.setdefault(key, {}), node_args.setdefault(key, {})
        node_item[keys[-1]] = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=one_device)
        node_args[keys[-1]] = ocp.ArrayRestoreArgs(sharding=one_device, global_shape=meta.shape, dtype=meta.dtype)
        restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(
            item=item, restore_args=args, partial_restore=True))
        for key in keys:
            restored = restored[key]
        leaf = restored
        if path == "embed/embedding":
            add("model.embed_tokens.weight", leaf)
        elif path == "final_norm/scale":
            add("model.norm.weight", leaf + 1.0)
        elif path == "lm_head/kernel":
            add("lm_head.weight", leaf.T)
        else:
            for i in range(c.num_hidden_layers):
                layer, at = leaf[i], f"model.layers.{i}."
                if path == "layers/attn/qkv/kernel":
                    q, k, v = jnp.split(layer, [c.q_size, c.q_size + c.kv_size], axis=-1)
                    add(at + "self_attn.q_proj.weight", q.T)
                    add(at + "self_attn.k_proj.weight", k.T)
                    add(at + "self_attn.v_proj.weight", v.T)
                elif path == "layers/attn_norm/scale":
                    add(at + "input_layernorm.weight", layer + 1.0)
                elif path == "layers/mlp_norm/scale":
                    add(at + "post_attention_layernorm.weight", layer + 1.0)
                else:
                    part = {"attn/o": "self_attn.o_proj", "mlp/gate": "mlp.gate_proj", "mlp/up": "mlp.up_proj",
                            "mlp/down": "mlp.down_proj"}[path[len("layers/"):-len("/kernel")]]
                    add(at + part + ".weight", layer.T)
        del leaf, restored
    flush()

    weight_map = {}
    for n, (temporary, names) in enumerate(written, start=1):
        final = f"model-{n:05d}-of-{len(written):05d}.safetensors"
        os.replace(temporary, os.path.join(out_dir, final))
        weight_map.update(dict.fromkeys(names, final))
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": state["total"]}, "weight_map": weight_map}, f)
    config_out = dict(config)
    config_out["torch_dtype"] = dtype
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_out, f)
"""),
    # The leaves listed by NNX itself: the model built abstractly (nnx.eval_shape over
    # ckptlab.llama.model, nothing allocated), its parameters' state as a pure dict of shapes; each
    # leaf found in v1's metadata at the path of one of the three trees (its path, then `value`, or
    # under `params`), loaded with Orbax v1 (partial load) onto the devices it was saved on (the
    # sharding read back from that metadata), gathered with np.asarray; the layers transposed at once
    # with np.einsum; files planned greedily from the shapes, each written as safetensors.numpy.save's bytes.
    ("nnx_abstract_model_v1_sharded_load", """
import jax.numpy as jnp
from flax import nnx
from safetensors.numpy import save as _h91d_to_bytes

from ckptlab import llama as _h91d_llama


def _h91d_leaves(c):
    zeros = {path: shape for path, shape in param_shapes(c).items()}
    abstract = nnx.eval_shape(lambda: _h91d_llama.model(c, {p: jnp.zeros(s, jnp.float32) for p, s in zeros.items()}))
    pure = nnx.to_pure_dict(nnx.state(abstract, nnx.Param))
    flat, _ = jax.tree_util.tree_flatten_with_path(pure)
    return {"/".join(str(k.key) for k in key_path): tuple(leaf.shape) for key_path, leaf in flat}


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    out_type = np.dtype(dtype) if dtype == "float32" else np.dtype(ml_dtypes.bfloat16)
    leaves = _h91d_leaves(c)
    saved = ocp_v1.metadata(ckpt_dir).metadata

    def lookup(keys):
        node = saved
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def saved_keys(path):  # the pure dict's path, the nnx.State's (a Variable: its value), Linen's
        for keys in (path.split("/"), path.split("/") + ["value"], ["params"] + path.split("/")):
            if lookup(keys) is not None and not isinstance(lookup(keys), dict):
                return keys
        raise KeyError(path)

    q, kv = c.q_size, c.kv_size

    def produce(path, leaf):
        if path == "embed/embedding":
            return [("model.embed_tokens.weight", leaf)]
        if path == "final_norm/scale":
            return [("model.norm.weight", leaf + np.float32(1.0))]
        if path == "lm_head/kernel":
            return [("lm_head.weight", leaf.T)]
        if path.endswith("norm/scale"):
            part = {"layers/attn_norm/scale": "input_layernorm", "layers/mlp_norm/scale": "post_attention_layernorm"}[path]
            return [(f"model.layers.{i}.{part}.weight", row + np.float32(1.0)) for i, row in enumerate(leaf)]
        flipped = np.einsum("lab->lba", leaf)  # every layer's (in, out) as (out, in): a view
        if path == "layers/attn/qkv/kernel":
            return [(f"model.layers.{i}.self_attn.{x}_proj.weight", w[lo:hi])
                    for i, w in enumerate(flipped) for x, lo, hi in (("q", 0, q), ("k", q, q + kv), ("v", q + kv, q + 2 * kv))]
        part = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
                "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj"}[path]
        return [(f"model.layers.{i}.{part}.weight", w) for i, w in enumerate(flipped)]

    # Plan from the shapes alone: produce() on a stand-in of zero strides (np.broadcast_to: no memory) gives the
    # names and shapes, in the order the tensors will come.
    order = []
    for path, shape in leaves.items():
        for name, fake in produce(path, np.broadcast_to(np.float32(0), shape)):
            order.append((name, math.prod(fake.shape) * out_type.itemsize))
    files, size = [[]], 0
    for name, nbytes in order:
        if files[-1] and size + nbytes > max_shard_bytes:
            files.append([])
            size = 0
        files[-1].append(name)
        size += nbytes
    file_names = [f"model-{n + 1:05d}-of-{len(files):05d}.safetensors" for n in range(len(files))]
    where = {name: n for n, names in enumerate(files) for name in names}

    os.makedirs(out_dir)
    ready = {}
    for path in leaves:
        keys = saved_keys(path)
        meta = lookup(keys)
        abstract = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=meta.sharding_metadata.to_jax_sharding())
        for key in reversed(keys):
            abstract = {key: abstract}
        context = ocp_v1.Context()
        context.pytree.loading.partial_load = True
        with context:
            loaded = ocp_v1.load(ckpt_dir, abstract)
        for key in keys:
            loaded = loaded[key]
        leaf = np.asarray(loaded)
        del loaded
        for name, value in produce(path, leaf):
            ready[name] = np.ascontiguousarray(value.astype(out_type))
            n = where[name]
            if all(other in ready for other in files[n]):
                blob = _h91d_to_bytes({k: ready.pop(k) for k in files[n]}, metadata={"format": "pt"})
                with open(os.path.join(out_dir, file_names[n]), "wb") as f:
                    f.write(blob)
                del blob
        del leaf
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(nbytes for _, nbytes in order)},
                   "weight_map": {name: file_names[where[name]] for name, _ in order}}, f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({**config, "torch_dtype": dtype}, f)
"""),
]

TO_ORBAX = [
    # safetensors' own lazy reader, the idiomatic Hugging Face way: every file opened once with
    # safe_open(framework="np") (an ExitStack closes them), get_tensor copies one tensor out at a time
    # into a stack allocated once per leaf; the norm's 1 taken off in float32, then cast back to the
    # file's dtype; each leaf placed with device_put and added with ocp_v1.partial.save.
    ("safe_open_get_tensor_into_one_stack", """
import contextlib

from safetensors import safe_open as _h92a_safe_open


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    with contextlib.ExitStack() as stack:
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
        else:  # one file, no index
            single = stack.enter_context(_h92a_safe_open(os.path.join(hf_dir, "model.safetensors"), framework="np"))
            weight_map = dict.fromkeys(single.keys(), "model.safetensors")
        readers = {file: stack.enter_context(_h92a_safe_open(os.path.join(hf_dir, file), framework="np"))
                   for file in sorted(set(weight_map.values()))}

        def tensor(name):
            return readers[weight_map[name]].get_tensor(name)

        def less_one(w):
            return (w.astype(np.float32) - 1).astype(w.dtype)  # exact in float32, back to the file's dtype

        per_layer = {
            "layers/attn_norm/scale": lambda i: less_one(tensor(f"model.layers.{i}.input_layernorm.weight")),
            "layers/mlp_norm/scale": lambda i: less_one(tensor(f"model.layers.{i}.post_attention_layernorm.weight")),
            "layers/attn/qkv/kernel": lambda i: np.hstack(
                [tensor(f"model.layers.{i}.self_attn.{x}_proj.weight").T for x in "qkv"]),
            "layers/attn/o/kernel": lambda i: tensor(f"model.layers.{i}.self_attn.o_proj.weight").T,
            "layers/mlp/gate/kernel": lambda i: tensor(f"model.layers.{i}.mlp.gate_proj.weight").T,
            "layers/mlp/up/kernel": lambda i: tensor(f"model.layers.{i}.mlp.up_proj.weight").T,
            "layers/mlp/down/kernel": lambda i: tensor(f"model.layers.{i}.mlp.down_proj.weight").T,
        }
        for path, shape in param_shapes(c).items():
            if path == "embed/embedding":
                value = tensor("model.embed_tokens.weight")
            elif path == "final_norm/scale":
                value = less_one(tensor("model.norm.weight"))
            elif path == "lm_head/kernel":
                value = np.ascontiguousarray(tensor("lm_head.weight").T)
            else:
                value = None
                for i in range(shape[0]):
                    layer = per_layer[path](i)
                    if value is None:
                        value = np.empty(shape, layer.dtype)
                    value[i] = layer
                    del layer
            placed = jax.device_put(value, NamedSharding(mesh, specs[path]))
            del value
            node = leaf_tree = {}
            keys = (["params"] if tree == "linen" else []) + path.split("/")
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = placed
            ocp_v1.partial.save(out_dir, leaf_tree)
            del placed, leaf_tree, node
    ocp_v1.partial.finalize(out_dir)
"""),
    # No leaf is ever whole on the host: jax.make_array_from_callback asks for each device's block, and
    # the block is cut from safe_open's lazy slices (get_slice(name)[rows, cols]) of the layers it spans,
    # the fused q, k, v columns mapped to the rows of q_proj, k_proj and v_proj they come from.
    ("get_slice_per_device_blocks", """
from safetensors import safe_open as _h92b_safe_open


def _h92b_bounds(index, shape):
    return [range(*s.indices(n)) for s, n in zip(index, shape)]


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    index_file = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.isfile(index_file):
        with open(index_file) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    lazy = {}
    opened = [_h92b_safe_open(os.path.join(hf_dir, file), framework="np") for file in files]
    for reader in opened:
        for name in reader.keys():
            lazy[name] = reader.get_slice(name)

    def cut(name, rows, cols=None):  # a block of a Hugging Face tensor, by ranges of its rows (and columns)
        if cols is None:
            return lazy[name][rows.start:rows.stop]
        return lazy[name][rows.start:rows.stop, cols.start:cols.stop]

    q, kv = c.q_size, c.kv_size
    parts = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
             "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj",
             "layers/attn_norm/scale": "input_layernorm", "layers/mlp_norm/scale": "post_attention_layernorm"}

    def minus_one(x):
        return (x.astype(np.float32) - np.float32(1)).astype(x.dtype)

    def qkv_block(i, rows, cols):  # kernel columns cols of layer i: rows of q, k, v weights, transposed
        pieces = []
        for x, start in (("q", 0), ("k", q), ("v", q + kv)):
            width = kv if x != "q" else q
            lo, hi = max(cols.start, start), min(cols.stop, start + width)
            if lo < hi:
                pieces.append(cut(f"model.layers.{i}.self_attn.{x}_proj.weight", range(lo - start, hi - start), rows).T)
        return np.concatenate(pieces, axis=1)

    for path, shape in param_shapes(c).items():
        def block(index, path=path, shape=shape):
            b = _h92b_bounds(index, shape)
            if path == "embed/embedding":
                return cut("model.embed_tokens.weight", b[0], b[1])
            if path == "final_norm/scale":
                return minus_one(cut("model.norm.weight", b[0]))
            if path == "lm_head/kernel":
                return np.ascontiguousarray(cut("lm_head.weight", b[1], b[0]).T)
            layers = []
            for i in b[0]:
                if path == "layers/attn/qkv/kernel":
                    layers.append(qkv_block(i, b[1], b[2]))
                elif path.endswith("norm/scale"):
                    layers.append(minus_one(cut(f"model.layers.{i}.{parts[path]}.weight", b[1])))
                else:
                    layers.append(cut(f"model.layers.{i}.{parts[path]}.weight", b[2], b[1]).T)
            return np.ascontiguousarray(np.stack(layers))

        array = jax.make_array_from_callback(shape, NamedSharding(mesh, specs[path]), block)
        keys = path.split("/")
        out = {keys[-1]: array}
        for key in reversed(keys[:-1]):
            out = {key: out}
        ocp_v1.partial.save(out_dir, {"params": out} if tree == "linen" else out)
        del array, out
    ocp_v1.partial.finalize(out_dir)
    del lazy, opened
"""),
    # Each stack built on the devices, not on the host: a jitted, donating update writes layer i into
    # a stack laid out as specs[path] (jax.lax.dynamic_update_index_in_dim), the transform (transpose,
    # the norm's 1 taken off in float32) done in the same program; q, k and v joined on the host
    # (np.concatenate of the (out, in) weights, transposed on the devices). The files read through NumPy
    # memory maps at offsets from headers parsed with struct; saved with ocp_v1.partial.save_async, awaited.
    ("memmap_stack_assembled_on_devices", """
import struct

import jax.numpy as jnp


def _h92c_tensors(hf_dir):
    codes = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16}
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = set(json.load(f)["weight_map"].values())
    else:
        files = {"model.safetensors"}
    found = {}
    for file in files:
        path = os.path.join(hf_dir, file)
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            found[name] = np.memmap(path, dtype=codes[entry["dtype"]], mode="r", offset=8 + size + begin,
                                    shape=tuple(entry["shape"]))
    return found


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    hf = _h92c_tensors(hf_dir)
    dtype = hf["model.embed_tokens.weight"].dtype
    layer = "model.layers.{}.".format
    sources = {
        "layers/attn_norm/scale": ["input_layernorm"], "layers/mlp_norm/scale": ["post_attention_layernorm"],
        "layers/attn/qkv/kernel": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
        "layers/attn/o/kernel": ["self_attn.o_proj"], "layers/mlp/gate/kernel": ["mlp.gate_proj"],
        "layers/mlp/up/kernel": ["mlp.up_proj"], "layers/mlp/down/kernel": ["mlp.down_proj"],
    }

    def transform(path, w):
        if path.endswith("norm/scale"):
            return (w.astype(jnp.float32) - 1).astype(w.dtype)
        return w.T

    def weight(i, path):  # layer i's Hugging Face weight(s) for path, q, k, v stacked as rows: (out, in)
        ws = [hf[layer(i) + part + ".weight"] for part in sources[path]]
        return np.concatenate(ws, axis=0) if len(ws) > 1 else np.asarray(ws[0])

    for path, shape in param_shapes(c).items():
        sharding = NamedSharding(mesh, specs[path])
        if path in sources:
            put = jax.jit(
                lambda stack, i, w, path=path: jax.lax.dynamic_update_index_in_dim(stack, transform(path, w), i, 0),
                donate_argnums=0, out_shardings=sharding)
            array = jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=sharding)()
            for i in range(shape[0]):
                array = put(array, i, weight(i, path))
        elif path == "embed/embedding":
            array = jax.device_put(np.asarray(hf["model.embed_tokens.weight"]), sharding)
        elif path == "final_norm/scale":
            array = jax.jit(lambda w: transform(path, w), out_shardings=sharding)(np.asarray(hf["model.norm.weight"]))
        else:  # lm_head/kernel
            array = jax.jit(jnp.transpose, out_shardings=sharding)(np.asarray(hf["lm_head.weight"]))
        node = {}
        root = node
        for key in (["params"] if tree == "linen" else []) + path.split("/")[:-1]:
            node = node.setdefault(key, {})
        node[path.split("/")[-1]] = array
        ocp_v1.partial.save_async(out_dir, root).result()
        del array, node, root
    ocp_v1.partial.finalize(out_dir)
"""),
    # safe_open(framework="flax") hands out jax arrays; each leaf's layers are transformed and stacked
    # by jax.numpy on the default device (one jitted function per leaf), then laid out as specs[path]
    # by device_put from the host's view of it (np.asarray: no copy on CPU); the tree made with
    # flax.traverse_util.unflatten_dict from '/'-joined paths.
    ("safe_open_flax_jnp_stack_then_device_put", """
import jax.numpy as jnp
from flax import traverse_util
from safetensors import safe_open as _h92d_safe_open


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    try:
        with open(os.path.join(hf_dir, "model.safetensors.index.json")) as f:
            weight_map = json.load(f)["weight_map"]
    except FileNotFoundError:
        with _h92d_safe_open(os.path.join(hf_dir, "model.safetensors"), framework="flax") as f:
            weight_map = {name: "model.safetensors" for name in f.keys()}

    def get(name):
        with _h92d_safe_open(os.path.join(hf_dir, weight_map[name]), framework="flax") as f:
            return f.get_tensor(name)

    def less_one(w):
        return (w.astype(jnp.float32) - 1.0).astype(w.dtype)

    names = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
             "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj",
             "layers/attn_norm/scale": "input_layernorm", "layers/mlp_norm/scale": "post_attention_layernorm"}
    prefix = "params/" if tree == "linen" else ""
    for path, shape in param_shapes(c).items():
        if path == "embed/embedding":
            leaf = get("model.embed_tokens.weight")
        elif path == "lm_head/kernel":
            leaf = jnp.transpose(get("lm_head.weight"))
        elif path == "final_norm/scale":
            leaf = less_one(get("model.norm.weight"))
        elif path == "layers/attn/qkv/kernel":
            qkv = [[get(f"model.layers.{i}.self_attn.{x}_proj.weight") for x in "qkv"] for i in range(shape[0])]
            leaf = jax.jit(lambda layers: jnp.stack([jnp.concatenate([w.T for w in ws], axis=1) for ws in layers]))(qkv)
            del qkv
        else:
            ws = [get(f"model.layers.{i}.{names[path]}.weight") for i in range(shape[0])]
            leaf = jax.jit(lambda ws, norm=path.endswith("norm/scale"): jnp.stack(
                [less_one(w) if norm else w.T for w in ws]))(ws)
            del ws
        placed = jax.device_put(np.asarray(leaf), NamedSharding(mesh, specs[path]))
        del leaf
        ocp_v1.partial.save(out_dir, traverse_util.unflatten_dict({prefix + path: placed}, sep="/"))
        del placed
    ocp_v1.partial.finalize(out_dir)
"""),
]

VERDICT = [
    # A NumPy forward pass in float64 written apart from the course's: rotary embeddings as complex
    # numbers (each head's halves the real and imaginary parts, turned by e^(i * position * frequency)),
    # attention one head at a time (head h reads key-value head h // group), the mask by np.tril. The
    # checkpoint loaded whole with Orbax v1 (NumPy leaves asked, NumPy back), every file read by
    # safetensors.numpy.load_file; the rule as np.allclose with rtol=0 and atol=tolerance * max|logit|.
    ("numpy_complex_rotary_per_head", """
from safetensors.numpy import load_file as _h93a_load_file


def _h93a_flat(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_h93a_flat(value, path))
        else:
            out[path] = value
    return out


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    c = LlamaConfig.from_hf(config)

    saved = ocp_v1.metadata(ckpt_dir).metadata
    abstract = jax.tree.map(lambda m: np.empty(tuple(m.shape), m.dtype), saved)
    loaded = _h93a_flat(ocp_v1.load(ckpt_dir, abstract))
    params = {path.removeprefix("params/").removesuffix("/value"): np.asarray(value) for path, value in loaded.items()}
    expected = logits(c, params, tokens).astype(np.float64)

    files = ["model.safetensors"]
    if os.path.exists(os.path.join(hf_dir, "model.safetensors.index.json")):
        with open(os.path.join(hf_dir, "model.safetensors.index.json")) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for file in files:
        w.update({k: v.astype(np.float64) for k, v in _h93a_load_file(os.path.join(hf_dir, file)).items()})

    def rms(x, weight):
        return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + c.rms_norm_eps) * weight

    half = c.head_dim // 2
    freqs = 1.0 / c.rope_theta ** (np.arange(half) / half)
    turn = np.exp(1j * np.outer(np.arange(len(tokens)), freqs))  # (t, half)

    def rotate(x):  # x: (t, head_dim), one head
        z = (x[:, :half] + 1j * x[:, half:]) * turn
        return np.concatenate([z.real, z.imag], axis=1)

    t, group = len(tokens), c.num_attention_heads // c.num_key_value_heads
    causal = np.tril(np.ones((t, t), bool))
    h = w["model.embed_tokens.weight"][list(tokens)]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        x = rms(h, w[p + "input_layernorm.weight"])
        q, k, v = (x @ w[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        heads = []
        for head in range(c.num_attention_heads):
            kv = head // group
            qh = rotate(q[:, head * c.head_dim:(head + 1) * c.head_dim])
            kh = rotate(k[:, kv * c.head_dim:(kv + 1) * c.head_dim])
            vh = v[:, kv * c.head_dim:(kv + 1) * c.head_dim]
            scores = np.where(causal, qh @ kh.T / np.sqrt(c.head_dim), -np.inf)
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            heads.append((scores / scores.sum(axis=1, keepdims=True)) @ vh)
        h = h + np.hstack(heads) @ w[p + "self_attn.o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        gate, up = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate * (1 / (1 + np.exp(-gate))) * up) @ w[p + "mlp.down_proj.weight"].T
    head_weight = w["model.embed_tokens.weight"] if c.tie_word_embeddings else w["lm_head.weight"]
    got = rms(h, w["model.norm.weight"]) @ head_weight.T

    tolerance = 1e-4 if config["torch_dtype"] == "float32" else 5e-2
    return bool(np.allclose(got, expected, rtol=0.0, atol=tolerance * np.abs(expected).max()))
"""),
    # A JAX forward pass from Hugging Face's layout, in float32: jax.nn.dot_product_attention (causal,
    # grouped key-value heads as it takes them), jax.nn.silu; the tensors read by safe_open with
    # framework="flax" (jax arrays). The checkpoint restored whole to NumPy by Orbax's v0
    # PyTreeCheckpointer (RestoreArgs(restore_type=np.ndarray) for every leaf of its metadata).
    ("jax_dot_product_attention_from_hf", """
import jax.numpy as jnp
from safetensors import safe_open as _h93b_safe_open


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    c = LlamaConfig.from_hf(config)

    checkpointer = ocp.PyTreeCheckpointer()
    meta = checkpointer.metadata(ckpt_dir).item_metadata.tree
    restore_args = jax.tree.map(lambda m: ocp.RestoreArgs(restore_type=np.ndarray), meta)
    restored = checkpointer.restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=restore_args))
    flat = {"/".join(str(k.key) for k in path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(restored)[0]}
    params = {}
    for path, leaf in flat.items():
        parts = path.split("/")
        parts = parts[1:] if parts[0] == "params" else parts  # Linen's variables
        parts = parts[:-1] if parts[-1] == "value" else parts  # an nnx.State saved as it is
        params["/".join(parts)] = leaf
    reference = jnp.asarray(logits(c, params, tokens))

    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = set(json.load(f)["weight_map"].values())
    else:
        files = {"model.safetensors"}
    w = {}
    for file in files:
        with _h93b_safe_open(os.path.join(hf_dir, file), framework="flax") as f:
            for name in f.keys():
                w[name] = f.get_tensor(name).astype(jnp.float32)

    def norm(x, weight):
        return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + c.rms_norm_eps) * weight

    t = len(tokens)
    inv = 1.0 / (c.rope_theta ** (jnp.arange(0, c.head_dim, 2, dtype=jnp.float32) / c.head_dim))
    angle = jnp.arange(t, dtype=jnp.float32)[:, None] * inv[None, :]
    cos, sin = jnp.cos(jnp.tile(angle, 2))[:, None, :], jnp.sin(jnp.tile(angle, 2))[:, None, :]

    def rope(x):  # (t, heads, head_dim)
        a, b = jnp.split(x, 2, axis=-1)
        return x * cos + jnp.concatenate([-b, a], axis=-1) * sin

    h = w["model.embed_tokens.weight"][jnp.asarray(tokens)]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        x = norm(h, w[p + "input_layernorm.weight"])
        q = rope((x @ w[p + "self_attn.q_proj.weight"].T).reshape(t, c.num_attention_heads, c.head_dim))
        k = rope((x @ w[p + "self_attn.k_proj.weight"].T).reshape(t, c.num_key_value_heads, c.head_dim))
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(t, c.num_key_value_heads, c.head_dim)
        attended = jax.nn.dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
        h = h + attended.reshape(t, c.q_size) @ w[p + "self_attn.o_proj.weight"].T
        x = norm(h, w[p + "post_attention_layernorm.weight"])
        h = h + (jax.nn.silu(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T)) \\
            @ w[p + "mlp.down_proj.weight"].T
    out = norm(h, w["model.norm.weight"]) @ w["model.embed_tokens.weight" if c.tie_word_embeddings
                                              else "lm_head.weight"].T

    tolerance = {"float32": 1e-4, "bfloat16": 5e-2}[config["torch_dtype"]]
    return bool(jnp.max(jnp.abs(out - reference)) <= tolerance * jnp.max(jnp.abs(reference)))
"""),
    # No forward pass of its own: the Hugging Face folder converted back into the course's layout (an
    # inverse written here: q, k, v transposed and joined, layers stacked, the norms' 1 taken off), and
    # ckptlab.llama.logits run on both trees. The files read through NumPy memory maps (headers parsed
    # with struct), the checkpoint's leaves read with TensorStore.
    ("inverse_conversion_both_through_llama_logits", """
import ast
import struct

import tensorstore as ts


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    c = LlamaConfig.from_hf(config)

    with open(os.path.join(ckpt_dir, "_METADATA")) as f:
        keys = [ast.literal_eval(k) for k in json.load(f)["tree_metadata"]]
    base = "file://" + os.path.abspath(ckpt_dir)
    saved = {}
    for key in keys:
        store = ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base,
                                                      "path": ".".join(key) + "/"}}).result()
        model_path = "/".join(key[1:] if key[0] == "params" else key)
        saved[model_path.removesuffix("/value")] = store.read().result()

    codes = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16}
    try:
        with open(os.path.join(hf_dir, "model.safetensors.index.json")) as f:
            files = set(json.load(f)["weight_map"].values())
    except FileNotFoundError:  # one file, no index
        files = {"model.safetensors"}
    hf = {}
    for file in files:
        path = os.path.join(hf_dir, file)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        for name, e in header.items():
            hf[name] = np.memmap(path, codes[e["dtype"]], "r", 8 + n + e["data_offsets"][0],
                                 tuple(e["shape"])).astype(np.float32)

    def per_layer(fn):
        return np.stack([fn(f"model.layers.{i}.") for i in range(c.num_hidden_layers)])

    back = {
        "embed/embedding": hf["model.embed_tokens.weight"],
        "layers/attn_norm/scale": per_layer(lambda p: hf[p + "input_layernorm.weight"] - 1),
        "layers/attn/qkv/kernel": per_layer(lambda p: np.concatenate(
            [hf[p + "self_attn.q_proj.weight"], hf[p + "self_attn.k_proj.weight"], hf[p + "self_attn.v_proj.weight"]]).T),
        "layers/attn/o/kernel": per_layer(lambda p: hf[p + "self_attn.o_proj.weight"].T),
        "layers/mlp_norm/scale": per_layer(lambda p: hf[p + "post_attention_layernorm.weight"] - 1),
        "layers/mlp/gate/kernel": per_layer(lambda p: hf[p + "mlp.gate_proj.weight"].T),
        "layers/mlp/up/kernel": per_layer(lambda p: hf[p + "mlp.up_proj.weight"].T),
        "layers/mlp/down/kernel": per_layer(lambda p: hf[p + "mlp.down_proj.weight"].T),
        "final_norm/scale": hf["model.norm.weight"] - 1,
    }
    if not c.tie_word_embeddings:
        back["lm_head/kernel"] = hf["lm_head.weight"].T

    ours, theirs = logits(c, saved, tokens), logits(c, back, tokens)
    tolerance = 5e-2 if config["torch_dtype"] == "bfloat16" else 1e-4
    return float(np.abs(theirs - ours).max()) <= tolerance * float(np.abs(ours).max())
"""),
    # Token by token, as a model generates: each new token's query attends to the keys and values
    # cached so far (no mask: the cache holds only the past), in float64 NumPy with einsum; rotary
    # embeddings with HF's rotate_half at that token's position alone. The tensors read with safe_open
    # (framework="np"); the checkpoint loaded with Orbax v1 onto the devices it was saved on (no target:
    # the metadata's own shardings), then gathered with np.asarray.
    ("kv_cache_token_by_token", """
from safetensors import safe_open as _h93d_safe_open


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    c = LlamaConfig.from_hf(config)

    loaded = ocp_v1.load(ckpt_dir)
    if set(loaded) == {"params"}:  # Linen's variables
        loaded = loaded["params"]
    params = {}
    for key_path, leaf in jax.tree_util.tree_flatten_with_path(loaded)[0]:
        keys = [k.key for k in key_path]
        if keys[-1] == "value":  # an nnx.State saved as it is: each Variable's value
            keys = keys[:-1]
        params["/".join(keys)] = np.asarray(leaf)
    want = np.asarray(logits(c, params, tokens), np.float64)

    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as f:
            where = json.load(f)["weight_map"]
    else:
        with _h93d_safe_open(os.path.join(hf_dir, "model.safetensors"), framework="np") as f:
            where = dict.fromkeys(f.keys(), "model.safetensors")
    w = {}
    for file in set(where.values()):
        with _h93d_safe_open(os.path.join(hf_dir, file), framework="np") as f:
            for name in f.keys():
                w[name] = f.get_tensor(name).astype(np.float64)

    hd, half = c.head_dim, c.head_dim // 2
    group = c.num_attention_heads // c.num_key_value_heads
    inv_freq = c.rope_theta ** (-np.arange(0, hd, 2) / hd)

    def rope(x, pos):  # x: (heads, hd) at one position
        angle = np.concatenate([pos * inv_freq] * 2)
        rotated = np.concatenate([-x[:, half:], x[:, :half]], axis=1)
        return x * np.cos(angle) + rotated * np.sin(angle)

    def rms(x, g):
        return g * x / np.sqrt(np.mean(x * x) + c.rms_norm_eps)

    cache = [([], []) for _ in range(c.num_hidden_layers)]
    rows = []
    for pos, token in enumerate(tokens):
        h = w["model.embed_tokens.weight"][token]
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            x = rms(h, w[p + "input_layernorm.weight"])
            q = rope((w[p + "self_attn.q_proj.weight"] @ x).reshape(-1, hd), pos)
            keys, values = cache[i]
            keys.append(rope((w[p + "self_attn.k_proj.weight"] @ x).reshape(-1, hd), pos))
            values.append((w[p + "self_attn.v_proj.weight"] @ x).reshape(-1, hd))
            k = np.repeat(np.stack(keys), group, axis=1)  # (past, heads, hd)
            v = np.repeat(np.stack(values), group, axis=1)
            scores = np.einsum("hd,shd->hs", q, k) / np.sqrt(hd)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            h = h + w[p + "self_attn.o_proj.weight"] @ np.einsum("hs,shd->hd", weights, v).reshape(-1)
            x = rms(h, w[p + "post_attention_layernorm.weight"])
            gate = w[p + "mlp.gate_proj.weight"] @ x
            h = h + w[p + "mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * (w[p + "mlp.up_proj.weight"] @ x))
        out_weight = w["model.embed_tokens.weight"] if c.tie_word_embeddings else w["lm_head.weight"]
        rows.append(out_weight @ rms(h, w["model.norm.weight"]))
    got = np.stack(rows)

    tolerance = 1e-4 if config.get("torch_dtype") == "float32" else 5e-2
    return bool(np.linalg.norm((got - want).ravel(), ord=np.inf) <= tolerance * np.linalg.norm(want.ravel(), ord=np.inf))
"""),
]

RIGHT = {
    "orbax_to_hf": TO_HF,
    "hf_to_orbax": TO_ORBAX,
    "conversion_is_right": VERDICT,
}
