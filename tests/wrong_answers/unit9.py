"""Unit 9's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py). Each
is a silent mistake: it raises nothing, and what it writes (or says) has every tensor's name and
shape right, or is right but costs the whole model's memory."""

from autograder.units.unit9 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

# --- 9.1 orbax_to_hf ---
# A practitioner's conversion, leaf by leaf: each leaf restored alone to NumPy, turned into its
# tensors, which fill a shard until the next would take it over the limit; the shards written
# with safetensors' NumPy writer under temporary names, renamed once their count is known. Each
# wrong answer below changes one piece of it (its mistake), unless it is written another way.
_TO_HF = '''
from safetensors.numpy import save_file

from ckptlab.llama import flatten, nest

_PART = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
         "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj",
         "layers/attn_norm/scale": "input_layernorm", "layers/mlp_norm/scale": "post_attention_layernorm"}


def _restore_one(ckpt_dir, key):
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=nest({key: 0}), restore_args=nest({key: ocp.RestoreArgs(restore_type=np.ndarray)}),
        partial_restore=True))
    return flatten(restored)[key]


def _to_torch(kernel):
    return TRANSPOSE


def _norm_weight(scale):
    return NORM


def _tensors(path, leaf, c):
    """(Hugging Face name, tensor) pairs made from one saved leaf."""
    if path == "embed/embedding":
        return [("model.embed_tokens.weight", leaf)]HEAD
    if path == "final_norm/scale":
        return [("model.norm.weight", _norm_weight(leaf))]
    if path == "lm_head/kernel":
        return [("lm_head.weight", _to_torch(leaf))]
    out = []
    for i, w in enumerate(leaf):
        layer = f"model.layers.{i}."
        if path == "layers/attn/qkv/kernel":
            SPLIT
            out += [(layer + "self_attn.q_proj.weight", _to_torch(q)), (layer + "self_attn.k_proj.weight", _to_torch(k)),
                    (layer + "self_attn.v_proj.weight", _to_torch(v))]
        elif path.endswith("norm/scale"):
            out.append((layer + _PART[path] + ".weight", _norm_weight(w)))
        else:
            out.append((layer + _PART[path] + ".weight", _to_torch(w)))
    return out


def _write(shard, path):
    save_file(shard, path, METADATA)


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    saved = flatten(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    where = {k.removeprefix("params/").removesuffix("/value"): k for k in saved}  # Linen's, nnx.State's, a pure dict's
    target = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float32)
    os.makedirs(out_dir)
    shards, shard, used, total = [], {}, 0, 0
    for path in param_shapes(c):
        leaf = _restore_one(ckpt_dir, where[path])CAST_LEAF
        for name, tensor in _tensors(path, leaf, c):
            tensor = CAST
            ADD
            total += tensor.nbytes
        del leaf
    if shard:
        shards.append(list(shard))
        _write(shard, os.path.join(out_dir, f"part-{len(shards)}.safetensors"))
    weight_map = {}
    for n, names in enumerate(shards, 1):
        final = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        os.rename(os.path.join(out_dir, f"part-{n}.safetensors"), os.path.join(out_dir, final))
        weight_map.update(dict.fromkeys(names, final))
    TOTAL
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({**config, "torch_dtype": dtype}, f, indent=2)
'''

_ADD_BEFORE = """if shard and used + tensor.nbytes > max_shard_bytes:
                shards.append(list(shard))
                _write(shard, os.path.join(out_dir, f"part-{len(shards)}.safetensors"))
                shard, used = {}, 0
            shard[name] = tensor
            used += tensor.nbytes"""


def _to_hf(transpose="np.ascontiguousarray(kernel.T)", norm="scale + 1", head="",
           split="q, k, v = np.split(w, [c.q_size, c.q_size + c.kv_size], axis=1)",
           metadata='metadata={"format": "pt"}', cast_leaf="", cast="tensor.astype(target)", add=_ADD_BEFORE,
           total="") -> str:
    return (_TO_HF.replace("TRANSPOSE", transpose).replace("NORM", norm).replace("HEAD", head)
            .replace("SPLIT", split).replace("METADATA", metadata).replace("CAST_LEAF", cast_leaf)
            .replace("CAST", cast).replace("ADD", add).replace("TOTAL", total))


TO_HF = [
    # The transpose done as a reshape to the (out, in) shape: every shape right, the numbers misplaced.
    ("reshape_for_transpose", _to_hf(transpose="kernel.reshape(kernel.shape[::-1])"),
     "incorrect", "A reshape to the other shape keeps the numbers in the wrong places"),
    # The fused columns split as q, v, k (the order some other stacks fuse them in).
    ("qkv_split_as_q_v_k", _to_hf(split="q, v, k = np.split(w, [c.q_size, c.q_size + c.kv_size], axis=1)"),
     "incorrect", "k_proj and v_proj came out exchanged"),
    # q's and k's columns permuted within each head as transformers' convert_llama_weights_to_hf
    # permutes Meta's wq and wk (neighbouring dimensions paired, to Hugging Face's halves): the
    # course's model rotates halves already, so nothing was to be permuted.
    ("rotary_permuted_as_metas", _to_hf(split="""q, k, v = np.split(w, [c.q_size, c.q_size + c.kv_size], axis=1)
            q, k = _permute(q, c.num_attention_heads), _permute(k, c.num_key_value_heads)""").replace(
        "def _to_torch(kernel):", """def _permute(kernel, heads):  # the converter's permute(w, n_heads), on the kernel's (in, out) columns
    rows, cols = kernel.shape
    return kernel.reshape(rows, heads, cols // heads // 2, 2).transpose(0, 1, 3, 2).reshape(rows, cols)


def _to_torch(kernel):"""), "incorrect", "q_proj and k_proj hold each head's rows permuted"),
    # The norm scales copied as they are: Hugging Face's RMSNorm multiplies by its weight, not 1 + it.
    ("norm_offset_forgotten", _to_hf(norm="scale"), "incorrect", "Hugging Face's weight multiplies as it is: add 1"),
    # Each leaf cast to dtype as soon as it is restored (to save memory), the norm's 1 added in bfloat16.
    ("cast_first", _to_hf(cast_leaf=".astype(target)", cast="tensor"),
     "incorrect", "add the offset in float32, as saved, then cast"),
    # bfloat16 made by hand as a float32's upper 16 bits (its low 16 dropped): truncation, where a cast
    # rounds to the nearest bfloat16; the last bit wrong in about half the values.
    ("bfloat16_by_truncation", _to_hf(cast="_upper_half(tensor) if dtype == 'bfloat16' else tensor.astype(target)").replace(
        "def _write(shard, path):", """def _upper_half(x):  # a bfloat16 is a float32's upper half
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)


def _write(shard, path):"""), "incorrect", "truncated to bfloat16 (each float32's low 16 bits dropped)"),
    # lm_head.weight written from the embeddings although they are tied (the model computes its logits so).
    ("ties_written_as_lm_head", _to_hf(head=' + ([("lm_head.weight", leaf)] if c.tie_word_embeddings else [])'),
     "incorrect", "Hugging Face writes no lm_head.weight then"),
    # The shard closed once it has gone over the limit (the check after adding): files over max_shard_bytes.
    ("shard_closed_after_the_limit", _to_hf(add="""shard[name] = tensor
            used += tensor.nbytes
            if used >= max_shard_bytes:
                shards.append(list(shard))
                _write(shard, os.path.join(out_dir, f"part-{len(shards)}.safetensors"))
                shard, used = {}, 0"""),
     "incorrect", "A file holds more than max_shard_bytes of tensors"),
    # One shard per saved leaf (every layer's tensors of one kind together), the limit ignored.
    ("one_shard_per_leaf", _to_hf(add="shard[name] = tensor").replace(
        "        del leaf\n", """        shards.append(list(shard))
        _write(shard, os.path.join(out_dir, f"part-{len(shards)}.safetensors"))
        shard = {}
        del leaf
"""), "incorrect", "A file holds more than max_shard_bytes of tensors"),
    # The limit ignored: every tensor in one file, model-00001-of-00001.safetensors, with its index.
    ("everything_in_one_file", _to_hf(add="shard[name] = tensor"),
     "incorrect", "A file holds more than max_shard_bytes of tensors"),
    # safetensors' writer called without metadata: transformers loads such files (4.x and 5.x alike),
    # but they are not save_pretrained's, whose header the statement asks for.
    ("no_format_metadata", _to_hf(metadata="metadata=None"), "incorrect", '"__metadata__": {"format": "pt"}'),
    # The header written by hand, its metadata holding a number beside the format (the file's tensor bytes,
    # as the index's total_size): Python's json writes it, safetensors' safe_open (so transformers) refuses
    # the file, metadata values being strings only. (A hostile holdout's: 20/20 before the reader was as strict.)
    ("metadata_holds_a_number", _to_hf().replace("""def _write(shard, path):
    save_file(shard, path, metadata={"format": "pt"})""", """def _write(shard, path):
    header, offset = {"__metadata__": {"format": "pt", "total_size": sum(t.nbytes for t in shard.values())}}, 0
    for name, tensor in shard.items():
        header[name] = {"dtype": {"float32": "F32", "bfloat16": "BF16"}[tensor.dtype.name],
                        "shape": list(tensor.shape), "data_offsets": [offset, offset + tensor.nbytes]}
        offset += tensor.nbytes
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for tensor in shard.values():
            f.write(np.ascontiguousarray(tensor).tobytes())"""), "incorrect",
     "safe_open (and so transformers) refuses a file whose metadata"),
    # total_size taken as the files' sizes on disk: each file's header counted too.
    ("total_size_from_file_sizes", _to_hf(
        total="total = sum(os.path.getsize(os.path.join(out_dir, f)) for f in set(weight_map.values()))"),
     "incorrect", "total_size must be the bytes of all the tensors"),
    # The whole checkpoint restored at once (StandardCheckpointer().restore, no target), then converted
    # and written: right files, the whole model (and its converted copy) in memory.
    ("whole_model_restored", """
from safetensors.numpy import save_file

from ckptlab.llama import flatten


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    c = LlamaConfig.from_hf(config)
    params = {k.removeprefix("params/").removesuffix("/value"): np.asarray(v)
              for k, v in flatten(ocp.StandardCheckpointer().restore(ckpt_dir)).items()}
    target = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float32)
    hf = {"model.embed_tokens.weight": params["embed/embedding"]}
    for i in range(c.num_hidden_layers):
        layer = f"model.layers.{i}."
        qkv = params["layers/attn/qkv/kernel"][i]
        hf[layer + "input_layernorm.weight"] = params["layers/attn_norm/scale"][i] + 1
        hf[layer + "self_attn.q_proj.weight"] = qkv[:, :c.q_size].T
        hf[layer + "self_attn.k_proj.weight"] = qkv[:, c.q_size:c.q_size + c.kv_size].T
        hf[layer + "self_attn.v_proj.weight"] = qkv[:, c.q_size + c.kv_size:].T
        hf[layer + "self_attn.o_proj.weight"] = params["layers/attn/o/kernel"][i].T
        hf[layer + "post_attention_layernorm.weight"] = params["layers/mlp_norm/scale"][i] + 1
        for part in ("gate", "up", "down"):
            hf[layer + f"mlp.{part}_proj.weight"] = params[f"layers/mlp/{part}/kernel"][i].T
    hf["model.norm.weight"] = params["final_norm/scale"] + 1
    if not c.tie_word_embeddings:
        hf["lm_head.weight"] = params["lm_head/kernel"].T
    hf = {name: np.ascontiguousarray(t).astype(target) for name, t in hf.items()}

    shards, shard, used = [], {}, 0
    for name, t in hf.items():
        if shard and used + t.nbytes > max_shard_bytes:
            shards.append(shard)
            shard, used = {}, 0
        shard[name] = t
        used += t.nbytes
    shards.append(shard)
    os.makedirs(out_dir)
    weight_map = {}
    for n, shard in enumerate(shards, 1):
        file = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out_dir, file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, file))
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t.nbytes for t in hf.values())}, "weight_map": weight_map}, f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({**config, "torch_dtype": dtype}, f)
""", "incorrect", "went over the budget"),
    # Each leaf restored alone, but every leaf restored before the first file is written: the whole
    # checkpoint (float32) in memory at once.
    ("every_leaf_restored_before_writing", _to_hf().replace(
        "    for path in param_shapes(c):\n        leaf = _restore_one(ckpt_dir, where[path])",
        "    leaves = {p: _restore_one(ckpt_dir, where[p]) for p in param_shapes(c)}\n"
        "    for path in param_shapes(c):\n        leaf = leaves[path]"), "incorrect", "went over the budget"),
    # The transpose handed to safetensors' NumPy writer as a view (kernel.T): it writes the buffer as
    # it lies in memory, the kernel untransposed under the transposed shape (safetensors 0.8).
    ("transposed_view_saved_as_is", _to_hf(transpose="kernel.T", cast="tensor.astype(target, copy=False)"),
     "incorrect", "writes the buffer as it lies in memory"),
    # The checkpoint's tree guessed from Linen's 'params' alone: an nnx.State saved as it is (each
    # path ending in 'value') is read as a pure dict, and its leaves are not found.
    ("tree_guessed_from_params_alone", _to_hf().replace(
        'where = {k.removeprefix("params/").removesuffix("/value"): k for k in saved}  # Linen\'s, nnx.State\'s, a pure dict\'s',
        'where = {k.removeprefix("params/"): k for k in saved}'), "error", "which of the three trees holds them"),
    # The lesson's own helper called: the problem's answer, not the learner's.
    ("calls_the_lessons_helper", """
import ckptlab.hfconvert


def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    ckptlab.hfconvert.orbax_to_hf(ckpt_dir, out_dir, LlamaConfig.from_hf(config), max_shard_bytes, dtype)
""", "incorrect", "the course's own ckptlab.hfconvert"),
]

# --- 9.2 hf_to_orbax ---
# A practitioner's conversion back: where each tensor is from the index (or the one file), each
# tensor read alone with safetensors' lazy reader, a stacked leaf filled layer by layer, placed
# on the mesh and added to the checkpoint (Orbax v1's partial save) before the next is built.
_TO_ORBAX = '''
from safetensors import safe_open

from ckptlab.llama import nest

_PART = {"layers/attn/o/kernel": "self_attn.o_proj", "layers/mlp/gate/kernel": "mlp.gate_proj",
         "layers/mlp/up/kernel": "mlp.up_proj", "layers/mlp/down/kernel": "mlp.down_proj",
         "layers/attn_norm/scale": "input_layernorm", "layers/mlp_norm/scale": "post_attention_layernorm"}


def _files(hf_dir):
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return {name: os.path.join(hf_dir, file) for name, file in json.load(f)["weight_map"].items()}
    single = os.path.join(hf_dir, "model.safetensors")
    with safe_open(single, framework="np") as f:
        return dict.fromkeys(f.keys(), single)


def _read(files, name):
    with safe_open(files[name], framework="np") as f:
        return f.get_tensor(name)


def _to_flax(weight):
    return TRANSPOSE


def _scale(weight):
    return NORM


def _layer(files, path, i):
    layer = f"model.layers.{i}."
    if path == "layers/attn/qkv/kernel":
        q, k, v = (_to_flax(_read(files, layer + f"self_attn.{x}_proj.weight")) for x in "qkv")
        return np.concatenate(QKV, axis=1)
    if path.endswith("norm/scale"):
        return _scale(_read(files, layer + _PART[path] + ".weight"))
    return _to_flax(_read(files, layer + _PART[path] + ".weight"))


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    files = _files(hf_dir)
    root = ROOT
    for path, shape in param_shapes(c).items():
        if path == "embed/embedding":
            host = _read(files, "model.embed_tokens.weight")
        elif path == "final_norm/scale":
            host = _scale(_read(files, "model.norm.weight"))
        elif path == "lm_head/kernel":
            host = _to_flax(_read(files, "lm_head.weight"))
        else:
            host = None
            for i in range(c.num_hidden_layers):
                layer = _layer(files, path, i)
                if host is None:
                    host = np.empty((c.num_hidden_layers, *layer.shape), layer.dtype)
                host[i] = layer
        array = jax.device_put(host, PLACE)
        del host
        ocp_v1.partial.save(out_dir, nest({root + path: array}))
        del array
    ocp_v1.partial.finalize(out_dir)
'''


def _to_orbax(transpose="weight.T", norm="weight - 1", qkv="[q, k, v]", root='"params/" if tree == "linen" else ""',
              place="NamedSharding(mesh, specs[path])") -> str:
    return (_TO_ORBAX.replace("TRANSPOSE", transpose).replace("NORM", norm).replace("QKV", qkv)
            .replace("ROOT", root).replace("PLACE", place))


TO_ORBAX = [
    # The transposes done as reshapes to the (in, out) shape: every leaf's shape right, its numbers not.
    ("reshape_for_transpose", _to_orbax(transpose="weight.reshape(weight.shape[::-1])"),
     "incorrect", "each kernel is the transpose of its weight"),
    # q, k, v fused in the order q, v, k.
    ("qkv_fused_as_q_v_k", _to_orbax(qkv="[q, v, k]"), "incorrect", "its columns are q_proj, k_proj, v_proj in that order"),
    # q_proj's and k_proj's rows put back in Meta's rotary order (the inverse of transformers'
    # convert_llama_weights_to_hf permute, as conversions to Meta's layout do): the course's model
    # rotates each head's halves, Hugging Face's order.
    ("rotary_unpermuted_to_metas", _to_orbax().replace(
        """        q, k, v = (_to_flax(_read(files, layer + f"self_attn.{x}_proj.weight")) for x in "qkv")""",
        """        q, k, v = (_read(files, layer + f"self_attn.{x}_proj.weight") for x in "qkv")
        q, k, v = _to_flax(_to_meta(q, _HEADS[0])), _to_flax(_to_meta(k, _HEADS[1])), _to_flax(v)""").replace(
        "def _to_flax(weight):", """_HEADS = []


def _to_meta(weight, heads):  # the inverse of the converter's permute(w, n_heads): halves to neighbours
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def _to_flax(weight):""").replace(
        "    files = _files(hf_dir)\n", "    files = _files(hf_dir)\n    _HEADS[:] = [c.num_attention_heads, c.num_key_value_heads]\n"),
     "incorrect", "holds q_proj's and k_proj's rows permuted within each head"),
    # Hugging Face's norm weights kept as they are: the model multiplies by 1 + scale.
    ("norm_offset_not_subtracted", _to_orbax(norm="weight"), "incorrect", "subtract 1 from Hugging Face's weight"),
    # The offset subtracted as `- 1.0`: NumPy makes bfloat16 - 1.0 a float32, so a bfloat16 model's
    # norm scales come out float32.
    ("offset_as_float_promotes_bfloat16", _to_orbax(norm="weight - 1.0"), "incorrect", "Keep the files' dtype"),
    # The tree argument ignored: an NNX model's tree always.
    ("nnx_tree_always", _to_orbax(root='""'), "incorrect", "a Linen tree puts every leaf under 'params'"),
    # Each layer its own subtree (layers_0, layers_1, ...: Linen's names for unscanned layers), no stack.
    ("layers_not_stacked", _to_orbax().replace("""            host = None
            for i in range(c.num_hidden_layers):
                layer = _layer(files, path, i)
                if host is None:
                    host = np.empty((c.num_hidden_layers, *layer.shape), layer.dtype)
                host[i] = layer
""", """            for i in range(c.num_hidden_layers):
                spec = PartitionSpec(*specs[path][1:])  # a layer's: the stack's without its first axis
                layer = jax.device_put(_layer(files, path, i), NamedSharding(mesh, spec))
                name = path.replace("layers/", f"layers_{i}/")
                ocp_v1.partial.save(out_dir, nest({root + name: layer}))
            continue
"""), "incorrect", "stack each layer's tensors into one leaf"),
    # Every leaf put on the default device: the values right, no sharding.
    ("no_sharding", _to_orbax(place="jax.devices()[0]"), "incorrect", "not saved sharded as the specs say"),
    # Every file read whole (safetensors.numpy.load_file) into one dict, then converted leaf by leaf:
    # the whole model in memory.
    ("load_file_on_every_file", _to_orbax().replace('''def _read(files, name):
    with safe_open(files[name], framework="np") as f:
        return f.get_tensor(name)''', '''_LOADED = {}


def _read(files, name):
    from safetensors.numpy import load_file

    if name not in _LOADED:
        for path in sorted(set(files.values())):
            _LOADED.update(load_file(path))
    return _LOADED[name]''').replace("    ocp_v1.partial.finalize(out_dir)", "    ocp_v1.partial.finalize(out_dir)\n"
                                     "    _LOADED.clear()"), "incorrect", "went over the budget"),
    # Each tensor read alone, but kept: a cache of every tensor read, emptied only at the end (the
    # files' whole contents in memory by the last leaf).
    ("keeps_every_tensor_read", _to_orbax().replace('''def _read(files, name):
    with safe_open(files[name], framework="np") as f:
        return f.get_tensor(name)''', '''_READ = {}


def _read(files, name):
    if name not in _READ:
        with safe_open(files[name], framework="np") as f:
            _READ[name] = f.get_tensor(name)
    return _READ[name]''').replace("    ocp_v1.partial.finalize(out_dir)", "    ocp_v1.partial.finalize(out_dir)\n"
                                     "    _READ.clear()"), "incorrect", "went over the budget"),
    # The layers stacked in the order of their names sorted as strings (0, 1, 10, 11, 2, ...): right
    # for a model of ten layers or fewer.
    ("layers_stacked_in_name_order", _to_orbax().replace(
        "            for i in range(c.num_hidden_layers):\n                layer = _layer(files, path, i)",
        "            for i, n in enumerate(sorted(range(c.num_hidden_layers), key=str)):\n"
        "                layer = _layer(files, path, n)"), "incorrect", "in the order of their names as strings"),
    # Every leaf built first (a dict of the whole model, placed on the mesh), then one save of the tree.
    ("whole_tree_saved_at_once", _to_orbax().replace(
        "        ocp_v1.partial.save(out_dir, nest({root + path: array}))\n        del array\n"
        "    ocp_v1.partial.finalize(out_dir)",
        "        leaves[root + path] = array\n    ocp_v1.save(out_dir, nest(leaves))").replace(
        "    root = ", "    leaves = {}\n    root = "), "incorrect", "went over the budget"),
    # The lesson's own helper called: the problem's answer, not the learner's.
    ("calls_the_lessons_helper", """
from ckptlab.hfconvert import hf_to_orbax as convert


def hf_to_orbax(hf_dir, out_dir, mesh, specs, tree):
    convert(hf_dir, out_dir, mesh, specs, tree)
""", "incorrect", "the course's own ckptlab.hfconvert"),
]

# --- 9.3 conversion_is_right ---
# Shared pieces: the checkpoint's leaves (the whole small model, as a verifier may), where each
# Hugging Face tensor is, and one tensor read in float64.
_READ = '''
from safetensors import safe_open

from ckptlab.llama import flatten


def _checkpoint(ckpt_dir):
    return {k.removeprefix("params/").removesuffix("/value"): np.asarray(v) for k, v in
            flatten(ocp.StandardCheckpointer().restore(ckpt_dir)).items()}


def _hf(hf_dir):
    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = {name: os.path.join(hf_dir, file) for name, file in json.load(f)["weight_map"].items()}
    else:
        single = os.path.join(hf_dir, "model.safetensors")
        with safe_open(single, framework="np") as f:
            files = dict.fromkeys(f.keys(), single)

    def get(name):
        with safe_open(files[name], framework="np") as f:
            return f.get_tensor(name).astype(np.float64)

    return config, files, get
'''

# A forward pass from Hugging Face's layout (float64 NumPy), and the logits compared at TOLERANCE.
_FORWARD = _READ + '''

def _rms(x, weight, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * weight


def _rotate(x, theta):  # (tokens, heads, head_dim), Hugging Face's rotate_half
    t, _, d = x.shape
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    angles = np.outer(np.arange(t), inv)
    cos, sin = np.cos(np.concatenate([angles, angles], -1))[:, None], np.sin(np.concatenate([angles, angles], -1))[:, None]
    return x * cos + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1) * sin


def _hf_logits(c, get, tokens):
    t, hd = len(tokens), c.head_dim
    h = get("model.embed_tokens.weight")[tokens]
    mask = np.triu(np.ones((t, t), bool), 1)
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        x = _rms(h, get(p + "input_layernorm.weight"), c.rms_norm_eps)
        q = _rotate((x @ get(p + "self_attn.q_proj.weight").T).reshape(t, -1, hd), c.rope_theta)
        k = _rotate((x @ get(p + "self_attn.k_proj.weight").T).reshape(t, -1, hd), c.rope_theta)
        v = (x @ get(p + "self_attn.v_proj.weight").T).reshape(t, -1, hd)
        rep = c.num_attention_heads // c.num_key_value_heads
        k, v = k.repeat(rep, axis=1), v.repeat(rep, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        s[:, mask] = -np.inf
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        h = h + np.einsum("hts,shd->thd", a, v).reshape(t, -1) @ get(p + "self_attn.o_proj.weight").T
        x = _rms(h, get(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
        g = x @ get(p + "mlp.gate_proj.weight").T
        h = h + (g / (1 + np.exp(-g)) * (x @ get(p + "mlp.up_proj.weight").T)) @ get(p + "mlp.down_proj.weight").T
    h = _rms(h, get("model.norm.weight"), c.rms_norm_eps)
    return h @ get("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight").T


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import logits

    config, _, get = _hf(hf_dir)
    c = LlamaConfig.from_hf(config)
    reference = np.asarray(logits(c, _checkpoint(ckpt_dir), tokens), np.float64)
    converted = _hf_logits(c, get, np.asarray(tokens))
    tolerance = TOLERANCE
    return bool(np.abs(converted - reference).max() <= tolerance * np.abs(reference).max())
'''

# The checkpoint converted to Hugging Face's layout in float32, tensor by tensor (for the answers
# that compare tensors, not outputs).
_EXPECTED = _READ + '''

def _expected(c, params):
    out = {"model.embed_tokens.weight": params["embed/embedding"], "model.norm.weight": params["final_norm/scale"] + 1}
    if not c.tie_word_embeddings:
        out["lm_head.weight"] = params["lm_head/kernel"].T
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        qkv = params["layers/attn/qkv/kernel"][i]
        out[p + "self_attn.q_proj.weight"] = qkv[:, :c.q_size].T
        out[p + "self_attn.k_proj.weight"] = qkv[:, c.q_size:c.q_size + c.kv_size].T
        out[p + "self_attn.v_proj.weight"] = qkv[:, c.q_size + c.kv_size:].T
        out[p + "self_attn.o_proj.weight"] = params["layers/attn/o/kernel"][i].T
        out[p + "input_layernorm.weight"] = params["layers/attn_norm/scale"][i] + 1
        out[p + "post_attention_layernorm.weight"] = params["layers/mlp_norm/scale"][i] + 1
        for part in ("gate", "up", "down"):
            out[p + f"mlp.{part}_proj.weight"] = params[f"layers/mlp/{part}/kernel"][i].T
    return out
'''

VERDICT = [
    # Only the tree checked: every expected name there, at its shape. Every planted mistake keeps both.
    ("names_and_shapes_only", _EXPECTED + '''

def conversion_is_right(ckpt_dir, hf_dir, tokens):
    config, files, get = _hf(hf_dir)
    c = LlamaConfig.from_hf(config)
    want = _expected(c, _checkpoint(ckpt_dir))
    if set(files) != set(want):
        return False
    return all(get(name).shape == value.shape for name, value in want.items())
''', "incorrect", "Called a wrong conversion right"),
    # Each tensor's norm and sum compared with the checkpoint's (at a tolerance for bfloat16): a
    # reshape instead of a transpose keeps both.
    ("compares_norms_and_sums", _EXPECTED + '''

def conversion_is_right(ckpt_dir, hf_dir, tokens):
    config, files, get = _hf(hf_dir)
    c = LlamaConfig.from_hf(config)
    want = _expected(c, _checkpoint(ckpt_dir))
    if set(files) != set(want):
        return False
    rtol = 1e-2 if config["torch_dtype"] == "bfloat16" else 1e-5
    for name, value in want.items():
        got = get(name)
        if got.shape != value.shape:
            return False
        if not np.isclose(np.linalg.norm(got), np.linalg.norm(value), rtol=rtol):
            return False
        if not np.isclose(got.sum(), value.sum(), rtol=rtol, atol=rtol * np.abs(value).sum()):
            return False
    return True
''', "incorrect", "Called a wrong conversion right"),
    # Every tensor compared exactly with the checkpoint's float32 conversion: a bfloat16 file's
    # rounding counted as a mistake.
    ("exact_tensor_comparison", _EXPECTED + '''

def conversion_is_right(ckpt_dir, hf_dir, tokens):
    config, files, get = _hf(hf_dir)
    c = LlamaConfig.from_hf(config)
    want = _expected(c, _checkpoint(ckpt_dir))
    if set(files) != set(want):
        return False
    return all(np.array_equal(get(name), value) for name, value in want.items())
''', "incorrect", "Use the statement's tolerance for bfloat16 files"),
    # The logits compared at float32's tolerance whatever the files' dtype.
    ("float32_tolerance_always", _FORWARD.replace("tolerance = TOLERANCE", "tolerance = 1e-4"),
     "incorrect", "Use the statement's tolerance for bfloat16 files"),
    # The output layer always taken from the embeddings (as a tied model's is): an untied model's
    # lm_head.weight never read. Only a right untied conversion shows it (its wrong twin, lm_head.weight
    # written as the embeddings, is called wrong as it should be).
    ("output_layer_always_the_embeddings", _FORWARD.replace(
        'get("model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight")',
        'get("model.embed_tokens.weight")').replace(
        "tolerance = TOLERANCE", 'tolerance = {"float32": 1e-4, "bfloat16": 5e-2}[config["torch_dtype"]]'),
     "incorrect", "Called a right conversion whose embeddings are not tied wrong"),
    # The logits compared at a loose tolerance (half the largest logit), to be safe whatever the dtype:
    # mistakes that move the logits less (a weight reshaped, weights rounded) are called right.
    ("half_the_largest_logit", _FORWARD.replace("tolerance = TOLERANCE", "tolerance = 0.5"),
     "incorrect", "by more than the statement's tolerance"),
    # Only the first layer's tensors (and the embeddings and final norm) checked, as a spot check:
    # a mistake in the last layer goes by.
    ("first_layer_only", _EXPECTED + '''

def conversion_is_right(ckpt_dir, hf_dir, tokens):
    config, files, get = _hf(hf_dir)
    c = LlamaConfig.from_hf(config)
    want = _expected(c, _checkpoint(ckpt_dir))
    if set(files) != set(want):
        return False
    rtol = 1e-2 if config["torch_dtype"] == "bfloat16" else 1e-6
    checked = [n for n in want if n.startswith("model.layers.0.") or not n.startswith("model.layers.")]
    return all(np.allclose(get(n), want[n], rtol=rtol, atol=rtol) for n in checked)
''', "incorrect", "Called a wrong conversion right"),
    # bfloat16's tolerance for every file, to be safe: a float32 folder whose weights were rounded
    # through bfloat16 on their way passes it.
    ("bfloat16_tolerance_always", _FORWARD.replace("tolerance = TOLERANCE", "tolerance = 5e-2"),
     "incorrect", "Called a wrong conversion right"),
    # The lesson's own helpers called: the problem's answer, not the learner's.
    ("calls_the_lessons_helper", """
from ckptlab import hf, hfcheck


def conversion_is_right(ckpt_dir, hf_dir, tokens):
    from ckptlab.llama import flatten, logits

    source = hf.open_hf(hf_dir)
    c = LlamaConfig.from_hf(source.config)
    params = {k.removeprefix("params/").removesuffix("/value"): np.asarray(v) for k, v in
              flatten(ocp.StandardCheckpointer().restore(ckpt_dir)).items()}
    gap = hfcheck.logits_gap(logits(c, params, tokens), hfcheck.hf_logits(source.__getitem__, c, tokens))
    return gap <= hfcheck.logits_tolerance(source.config["torch_dtype"])
""", "incorrect", "the course's own ckptlab.hf"),
]

WRONG = {
    "orbax_to_hf": TO_HF,
    "hf_to_orbax": TO_ORBAX,
    "conversion_is_right": VERDICT,
}
