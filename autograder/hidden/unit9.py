"""Hidden tests for Unit 9: to and from Hugging Face."""

from __future__ import annotations

import hashlib

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.units.unit9 import config_of as hf_config  # (the public examples' config, as the problem gives it)
from autograder.wall.kinds import HFFolderArg, LlamaCheckpointArg, MeshArg, OutputFolder, SpecArg
from autograder.wall.memory import HF_FACTOR, HF_FIXED, HF_READ_FACTOR, hf_budget

MiB = 2**20


def _small(rng, tied: bool) -> tuple:
    """A small model's config pairs: o_proj square (hidden = heads * head_dim), grouped key-value heads."""
    heads, head_dim = (int(x) for x in rng.choice(((4, 16), (8, 8), (2, 32))))
    kv = int(rng.choice([k for k in (1, 2) if heads % k == 0 and k < heads]))
    return (("vocab_size", int(rng.choice((128, 256)))), ("hidden_size", heads * head_dim),
            ("num_hidden_layers", int(rng.choice((2, 3)))), ("num_attention_heads", heads),
            ("num_key_value_heads", kv), ("head_dim", head_dim), ("intermediate_size", int(rng.choice((96, 128)))),
            ("tie_word_embeddings", tied))


def _large(rng, tied: bool) -> tuple:
    """A model whose memory the grader can tell apart from its largest leaf: more than ten layers (so
    that layer 10 is not layer 2: names sorted as strings put "10" before "2"), its leaves of like
    sizes (the stacked MLP kernels, the fused qkv kernel and the embeddings each 9 to 12 MiB in
    float32), so that the whole model is 5.3 to 6.5 times its largest leaf (55 to 76 MiB in float32):
    a leaf-by-leaf conversion holds a few leaves, a whole-model one all of them."""
    return (("vocab_size", int(rng.choice((6144, 7168)))), ("hidden_size", 384),
            ("num_hidden_layers", int(rng.choice((12, 14)))), ("num_attention_heads", 12),
            ("num_key_value_heads", int(rng.choice((2, 3)))), ("head_dim", 32),
            ("intermediate_size", 576), ("tie_word_embeddings", tied))


def _seed(rng) -> int:
    return int(rng.integers(0, 2**31))


def _sha(x) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).reshape(-1).view(np.uint8).data).hexdigest()


# ---------------------------------------------------------------------------------------------
# 9.1 orbax_to_hf: a checkpoint the grader saves, converted by the learner's worker, read back by
# the grader's own (sandboxed) Hugging Face reader; the worker's peak memory measured.

def _to_hf_cases(rng):
    out = []
    # Smaller first: a case is charged with the largest peak so far.
    for category, pairs, tree, dtype, limit in (
            ("small_nnx_float32", _small(rng, True), "nnx", "float32", 2**15),
            ("small_linen_bfloat16", _small(rng, False), "linen", "bfloat16", 2**14),
            ("large_linen_bfloat16", _large(rng, False), "linen", "bfloat16", 3 * MiB),
            ("large_nnx_state_float32", _large(rng, True), "nnx_state", "float32", 6 * MiB)):
        out.append(Case(category, (LlamaCheckpointArg(config=pairs, seed=_seed(rng), tree=tree), OutputFolder(),
                                   hf_config(pairs), limit, dtype)))
    return out


def _to_hf_expected(ckpt_dir, out_dir, config, limit, dtype):
    """The folder as the grader's reader gives it back, from the grader's own copy of the checkpoint."""
    from ckptlab.hf import leaf_to_hf
    from ckptlab.llama import LlamaConfig, param_shapes, restore_leaf, saved_paths

    c = LlamaConfig.from_hf(config)
    where = saved_paths(ckpt_dir)
    tensors = {}
    for path in param_shapes(c):
        tensors.update(leaf_to_hf(path, restore_leaf(ckpt_dir, where[path]), c, dtype))
    return {"tensors": tensors, "total_size": sum(v.nbytes for v in tensors.values()),
            "config": {**config, "torch_dtype": dtype}, "limit": limit}


# Memory is held to the budget where the model is large enough for it to mean something: a small
# model's budget is mostly the slack, below what XLA allocates once to compile a sharded program
# (24-28 MiB, measured by a right answer that stacks on the devices), so the small cases check values only.
MEASURED_FROM = 2 * MiB  # bytes of the largest leaf (float32)


def _check_to_hf_memory(args, out) -> str | None:
    if args[0].largest_leaf_bytes() < MEASURED_FROM:
        return None
    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > hf_budget(args[0].largest_leaf_bytes(), args[3]) else None


def _rotary_orders(weight, heads: int) -> tuple:
    """A q_proj or k_proj weight ``(heads * head_dim, in)`` with each head's rows put in the other
    rotary order, both ways: ``convert_llama_weights_to_hf``'s ``permute`` (Meta's neighbouring pairs
    to Hugging Face's halves) and its inverse (halves to pairs). Names and shapes all kept."""
    rows, cols = weight.shape
    d = rows // heads
    return (np.ascontiguousarray(weight.reshape(heads, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)),
            np.ascontiguousarray(weight.reshape(heads, 2, d // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)))


def _truncated(x):
    """float32 values to bfloat16 by dropping each one's low 16 bits, where a cast rounds to nearest (even)."""
    import ml_dtypes

    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)


def _mistaken(args) -> dict:
    """Each silent mistake's digest of each tensor it changes: ``{name: {sha: mistake}}``."""
    from autograder.wall.kinds import named_dtype
    from ckptlab.hf import layer_name, leaf_to_hf, norm_to_hf, split_qkv
    from ckptlab.llama import param_shapes

    ckpt = args[0]
    c, params, target = ckpt.llama_config(), ckpt.params(), named_dtype(args[4])
    out: dict = {}

    def note(name, value, mistake):
        out.setdefault(name, {})[_sha(np.asarray(value).astype(target))] = mistake

    for i in range(c.num_hidden_layers):
        qkv = params["layers/attn/qkv/kernel"][i]
        q, k, v = split_qkv(qkv, c)
        note(layer_name(i, "self_attn.k_proj"), v.T, "qkv_order")
        note(layer_name(i, "self_attn.v_proj"), k.T, "qkv_order")
        for x, part, heads in ((q, "self_attn.q_proj", c.num_attention_heads), (k, "self_attn.k_proj", c.num_key_value_heads)):
            for permuted in _rotary_orders(x.T, heads):
                note(layer_name(i, part), permuted, "rotary_permuted")
        for x, part in zip((q, k, v), ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")):
            note(layer_name(i, part), x.reshape(x.shape[::-1]), "not_transposed")
        for path, part in (("layers/attn/o/kernel", "self_attn.o_proj"), ("layers/mlp/gate/kernel", "mlp.gate_proj"),
                           ("layers/mlp/up/kernel", "mlp.up_proj"), ("layers/mlp/down/kernel", "mlp.down_proj")):
            w = params[path][i]
            note(layer_name(i, part), w.reshape(w.shape[::-1]), "not_transposed")
        for path, part in (("layers/attn_norm/scale", "input_layernorm"),
                           ("layers/mlp_norm/scale", "post_attention_layernorm")):
            scale = params[path][i]
            note(layer_name(i, part), scale, "norm_offset")
            out[layer_name(i, part)][_sha(norm_to_hf(scale.astype(target)))] = "cast_first"
    note("model.norm.weight", params["final_norm/scale"], "norm_offset")
    out["model.norm.weight"][_sha(norm_to_hf(params["final_norm/scale"].astype(target)))] = "cast_first"
    if args[4] == "bfloat16":  # each right float32 tensor truncated to bfloat16, not rounded
        for path in param_shapes(c):
            for name, value in leaf_to_hf(path, params[path], c).items():
                out.setdefault(name, {}).setdefault(_sha(_truncated(value)), "truncated")
    return out


def _diagnose_to_hf(args, actual, expected):
    from autograder.wall.hf_returns import HFWritten

    if not isinstance(actual, dict):
        return None
    a, e = actual["tensors"], expected["tensors"]
    if set(a) != set(e):
        if "lm_head.weight" in set(a) - set(e):
            return "tied_head"
        if "lm_head.weight" in set(e) - set(a):
            return "untied_head"
        if any(name.startswith("model.layers.") for name in e) and not any(name.startswith("model.layers.") for name in a):
            return "names"
        return "tensors"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    wrong = [k for k in e if not a[k].same(e[k])]
    if wrong:
        mistakes = _mistaken(args)
        found = [mistakes.get(k, {}).get(a[k].sha256) for k in wrong]
        for mistake in ("qkv_order", "not_transposed", "norm_offset", "rotary_permuted", "truncated", "cast_first"):
            if mistake in found:
                return mistake
        return "values"
    bad = HFWritten.layout_error(actual["files"], expected["limit"])
    if bad:
        return bad
    if actual["total_size"] != expected["total_size"]:
        return "total_size"
    if actual["config"] != expected["config"]:
        return "config"
    return None


TO_HF = Hidden(
    generate=_to_hf_cases,
    messages={
        "memory": "The folder is right, but your function's own memory (anonymous, sampled from outside) went over "
                  f"the budget ({HF_FACTOR} times the checkpoint's largest leaf, plus max_shard_bytes, plus "
                  f"{HF_FIXED >> 20} MiB). Restore one leaf at a time (a partial restore of that leaf alone), turn it "
                  "into its tensors, and write each file as soon as its tensors are all there.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it samples the worker's "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "tied_head": "The embeddings are tied: Hugging Face writes no lm_head.weight then (the output layer is the "
                     "embeddings).",
        "untied_head": "The embeddings are not tied: the checkpoint's lm_head/kernel must become lm_head.weight "
                       "(transposed).",
        "names": "The tensors must be one per layer, named model.layers.{i}.<part>.weight: unstack the layers.",
        "tensors": "The tensors' names are not the Hugging Face model's: one tensor per name listed in the statement.",
        "dtype": "Store every tensor in dtype.",
        "qkv_order": "The fused qkv kernel's columns are every query head, then every key head, then every value head: "
                     "k_proj and v_proj came out exchanged.",
        "not_transposed": "A Flax kernel is (in, out), a PyTorch Linear weight (out, in): transpose it. A reshape to "
                          "the other shape keeps the numbers in the wrong places, and so does safetensors' NumPy "
                          "writer given any non-contiguous view (a transpose such as kernel.T, a column slice of "
                          "qkv): it writes the buffer as it lies in memory, from the view's first element. Make "
                          "every tensor contiguous (np.ascontiguousarray) before writing.",
        "norm_offset": "The norm scales are stored around zero (the norm multiplies by 1 + scale); Hugging Face's "
                       "weight multiplies as it is: add 1.",
        "cast_first": "The norm weights differ in their last bits: add the offset in float32, as saved, then cast "
                      "(the cast last).",
        "rotary_permuted": "q_proj and k_proj hold each head's rows permuted, as convert_llama_weights_to_hf's permute "
                           "(or its inverse) moves them between Meta's rotary order (neighbouring dimensions paired) "
                           "and Hugging Face's (each head's halves). The course's model rotates each head's halves, "
                           "as Hugging Face's Llama does: the qkv kernel's q and k columns become q_proj's and "
                           "k_proj's rows in the same order.",
        "truncated": "The bfloat16 tensors hold the right values truncated to bfloat16 (each float32's low 16 bits "
                     "dropped), where a cast rounds to the nearest bfloat16, ties to even, as "
                     "astype(ml_dtypes.bfloat16) and PyTorch's .to(torch.bfloat16) do: they differ in their last bit.",
        "values": "Some tensors do not hold the converted values: check each transform against the statement's layout.",
        "file_names": "The files must be named model-00001-of-0000N.safetensors to model-0000N-of-0000N.safetensors "
                      "(N the number of files), with model.safetensors.index.json beside them.",
        "shard_size": "A file holds more than max_shard_bytes of tensors (and more than one tensor): start a new file "
                      "before a tensor would take the current one over the limit.",
        "format": 'Each file\'s header needs "__metadata__": {"format": "pt"}, as save_pretrained writes it '
                  "(transformers 5.x never reads it, but 4.x turns away a file whose metadata names no format it "
                  'knows, and reads a lone file saying "flax" as Flax weights).',
        "total_size": "The index's metadata.total_size must be the bytes of all the tensors.",
        "config": "config.json must hold config, with \"torch_dtype\" set to dtype.",
        "small_nnx_float32": "Wrong on a small model saved as an NNX tree, converted to float32.",
        "small_linen_bfloat16": "Wrong on a small model saved as a Linen tree (under params), embeddings not tied, "
                                "converted to bfloat16.",
        "large_nnx_state_float32": "Wrong on a larger model saved as an NNX model's state as it is (each path "
                                   "ending in 'value'), converted to float32.",
        "large_linen_bfloat16": "Wrong on a larger model (a Linen tree, not tied, bfloat16).",
    },
    diagnose=_diagnose_to_hf,
    check_outcome=_check_to_hf_memory,
    expected=_to_hf_expected,
    requirements={
        "Store every tensor in `dtype`": ("small_nnx_float32", "small_linen_bfloat16", "large_linen_bfloat16"),
        "each transform done in float32 as saved and the cast last": ("small_linen_bfloat16", "large_linen_bfloat16"),
        "each file at most `max_shard_bytes` bytes of tensors unless it holds a single tensor": (
            "small_nnx_float32", "small_linen_bfloat16", "large_nnx_state_float32", "large_linen_bfloat16"),
        "`lm_head.weight` only when the embeddings are not tied": ("small_nnx_float32", "small_linen_bfloat16",
                                                                    "large_nnx_state_float32", "large_linen_bfloat16"),
        f"it must stay under {HF_FACTOR} times the bytes of the checkpoint's largest leaf (float32), plus "
        f"`max_shard_bytes`, plus {HF_FIXED >> 20} MiB": ("large_nnx_state_float32", "large_linen_bfloat16"),
    },
    on_exception="out_dir does not exist yet: make it. Restore one leaf with ocp.PyTreeCheckpointer().restore(ckpt_dir, "
                 "args=ocp.args.PyTreeRestore(item=..., restore_args=..., partial_restore=True)); find the leaves, and "
                 "which of the three trees holds them (under params, ending in value, or neither), with "
                 "ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree.",
)


# ---------------------------------------------------------------------------------------------
# 9.2 hf_to_orbax: a Hugging Face folder the grader writes, converted by the learner's worker, its
# checkpoint restored by the grader's own worker; the worker's peak memory measured.

def _specs_for(pairs: tuple, axes: tuple) -> dict:
    """Every leaf split over the mesh, none replicated: matrices on their last two dimensions when the
    mesh has two axes (the last alone when one), vectors on their one dimension."""
    from ckptlab.llama import LlamaConfig, param_shapes

    out = {}
    for path, shape in param_shapes(LlamaConfig(**dict(pairs))).items():
        if len(shape) == 1:
            out[path] = SpecArg((axes[-1],))
        elif len(axes) == 2 and len(shape) >= 2 and not path.endswith("scale"):
            out[path] = SpecArg((None,) * (len(shape) - 2) + axes)
        else:
            out[path] = SpecArg((None,) * (len(shape) - 1) + (axes[-1],))
    return out


def _to_orbax_cases(rng):
    out = []
    # Smaller budgets first (a case is charged with the largest peak so far): bfloat16 before float32.
    for category, pairs, dtype, tree, mesh in (
            ("small_nnx_float32", _small(rng, True), "float32", "nnx", (("model", 8),)),
            ("small_linen_bfloat16", _small(rng, False), "bfloat16", "linen", (("data", 2), ("model", 4))),
            ("large_nnx_bfloat16", _large(rng, True), "bfloat16", "nnx", (("data", 2), ("model", 8))),
            ("large_linen_float32", _large(rng, False), "float32", "linen", (("model", 16),))):
        axes = tuple(name for name, _ in mesh)
        limit = 2**20 if category == "small_nnx_float32" else 4 * MiB  # the first: one file, no index
        out.append(Case(category, (HFFolderArg(pairs, _seed(rng), dtype=dtype, max_shard_bytes=limit), OutputFolder(),
                                   MeshArg(mesh), _specs_for(pairs, axes), tree)))
    return out


def _to_orbax_expected(hf_dir, out_dir, mesh, specs, tree):
    """What the checkpoint must restore to, from the grader's own copy of the folder."""
    import jax
    from jax.sharding import NamedSharding

    from ckptlab.hf import from_hf, open_hf
    from ckptlab.llama import LlamaConfig, nest

    source = open_hf(hf_dir)
    params = from_hf(source, LlamaConfig.from_hf(source.config))
    placed = {path: jax.device_put(value, NamedSharding(mesh, specs[path])) for path, value in params.items()}
    return {"params": nest(placed)} if tree == "linen" else nest(placed)


def _largest_leaf(arg: HFFolderArg) -> int:
    from ckptlab.llama import param_shapes

    itemsize = 2 if arg.dtype == "bfloat16" else 4
    return max(int(np.prod(shape)) for shape in param_shapes(arg.llama_config()).values()) * itemsize


def _check_to_orbax_memory(args, out) -> str | None:
    if _largest_leaf(args[0]) < MEASURED_FROM:
        return None
    peak = out.get("anonymous_peak_bytes")
    if peak is None:
        return "unmeasured"
    return "memory" if peak > hf_budget(_largest_leaf(args[0]), factor=HF_READ_FACTOR) else None


def _qkv_rotary_permuted(folder: HFFolderArg, sha: str) -> bool:
    """Whether the stacked qkv leaf is the right one but for q's and k's rows permuted within each head
    (convert_llama_weights_to_hf's permute, or its inverse), in the files' dtype."""
    from autograder.wall.kinds import named_dtype
    from ckptlab.hf import layer_name

    c, tensors, dtype = folder.llama_config(), folder.tensors(), named_dtype(folder.dtype)
    for way in (0, 1):
        layers = []
        for i in range(c.num_hidden_layers):
            q, k, v = (np.asarray(tensors[layer_name(i, f"self_attn.{x}_proj")]).astype(dtype) for x in "qkv")
            layers.append(np.concatenate([_rotary_orders(q, c.num_attention_heads)[way].T,
                                          _rotary_orders(k, c.num_key_value_heads)[way].T, v.T], axis=1))
        if _sha(np.stack(layers)) == sha:
            return True
    return False


def _in_name_order(arg: HFFolderArg, actual: dict, wrong: set) -> bool:
    """Whether every stacked leaf in ``wrong`` holds its layers in the order of their names sorted as
    strings (0, 1, 10, 11, 2, ...), from the grader's own copy of the files' tensors."""
    from autograder.wall.kinds import named_dtype
    from ckptlab.hf import from_hf

    if not wrong or not all(path.startswith("layers/") for path in wrong):
        return False
    stored = named_dtype(arg.dtype)  # (the files' dtype, as the grader's copy writes them)
    leaves = from_hf({name: t.astype(stored) for name, t in arg.tensors().items()}, arg.llama_config())
    for path in wrong:
        layers = np.asarray(leaves[path])
        found = next(v for k, v in actual.items() if k.removeprefix("params/") == path)
        if found.sha256 != _sha(layers[sorted(range(len(layers)), key=str)]):
            return False
    return True


def _diagnose_to_orbax(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    if not isinstance(actual, dict):
        return None
    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    if set(a) != set(e):
        if {p.removeprefix("params/") for p in a} == {p.removeprefix("params/") for p in e}:
            return "tree_style"
        if any("layers/0" in p or "layers_0" in p for p in a):
            return "not_stacked"
        return "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if all(a[k].sha256 == e[k].sha256 for k in e):
        return "wrong_sharding"
    wrong = {k.removeprefix("params/") for k in e if a[k].sha256 != e[k].sha256}
    if _in_name_order(args[0], a, wrong):
        return "layer_order"
    if wrong == {"layers/attn/qkv/kernel"}:
        qkv = next(a[k] for k in a if k.removeprefix("params/") == "layers/attn/qkv/kernel")
        return "rotary_permuted" if _qkv_rotary_permuted(args[0], qkv.sha256) else "qkv"
    if wrong and all(k.endswith("norm/scale") for k in wrong):
        return "norm_offset"
    return "values"


TO_ORBAX = Hidden(
    generate=_to_orbax_cases,
    messages={
        "memory": "The checkpoint is right, but your function's own memory (anonymous, sampled from outside: a mapped "
                  f"file's pages are not counted) went over the budget ({HF_READ_FACTOR} times the model's largest leaf, "
                  f"plus {HF_FIXED >> 20} MiB). Build one leaf at a time from the tensors it needs (read one tensor at "
                  "a time), place it, and save it (ocp_v1.partial.save) before building the next.",
        "unmeasured": "The grader could not measure your function's memory on this machine (it samples the worker's "
                      "anonymous memory in /proc: Linux only). Grade on Linux.",
        "tree_style": "The leaves are right but the tree is not the one asked: a Linen tree puts every leaf under "
                      "'params', an NNX tree does not.",
        "not_stacked": "The course's layout stacks the layers on a leading axis (layers/attn/qkv/kernel holds every "
                       "layer): stack each layer's tensors into one leaf.",
        "tree": "The checkpoint must hold exactly the leaves of param_shapes(LlamaConfig.from_hf(config)), at their paths.",
        "dtype": "Keep the files' dtype: convert the layout, not the numbers' type.",
        "wrong_sharding": "The values are right but the arrays were not saved sharded as the specs say: place each leaf "
                          "with NamedSharding(mesh, specs[path]) before saving it.",
        "layer_order": "The layers are stacked in the order of their names as strings (layer 10 after layer 1, "
                       "before layer 2): layer i of a stacked leaf is model.layers.i's tensor.",
        "qkv": "The fused qkv kernel is wrong: its columns are q_proj, k_proj, v_proj in that order, each transposed "
               "to (in, out).",
        "rotary_permuted": "The fused qkv kernel holds q_proj's and k_proj's rows permuted within each head, as "
                           "convert_llama_weights_to_hf's permute (or its inverse) moves them between Meta's rotary "
                           "order (neighbouring dimensions paired) and Hugging Face's (each head's halves); v_proj's "
                           "and the columns' order are right. The course's model rotates each head's halves, as "
                           "Hugging Face's Llama does: take the rows in the files' order.",
        "norm_offset": "The norm scales are wrong: ours are stored around zero, so subtract 1 from Hugging Face's "
                       "weight, in the file's dtype.",
        "values": "Some leaves do not hold the converted values: each kernel is the transpose of its weight, layer i "
                  "of a stack is layer i's tensor.",
        "small_nnx_float32": "Wrong on a small float32 model, written as an NNX tree on 8 devices.",
        "small_linen_bfloat16": "Wrong on a small bfloat16 model, embeddings not tied, written as a Linen tree on a "
                                "2 x 4 mesh.",
        "large_linen_float32": "Wrong on a larger float32 model, embeddings not tied, written as a Linen tree on 16 "
                               "devices.",
        "large_nnx_bfloat16": "Wrong on a larger bfloat16 model written as an NNX tree on a 2 x 8 mesh.",
    },
    diagnose=_diagnose_to_orbax,
    check_outcome=_check_to_orbax_memory,
    expected=_to_orbax_expected,
    requirements={
        "`lm_head.weight` only when the embeddings are not tied": ("small_nnx_float32", "small_linen_bfloat16",
                                                                    "large_linen_float32", "large_nnx_bfloat16"),
        "a model small enough for one file comes as `model.safetensors` alone, with no index": (
            "small_nnx_float32", "small_linen_bfloat16"),
        "with the files' values transformed and the files' dtype kept": (
            "small_nnx_float32", "small_linen_bfloat16", "large_linen_float32", "large_nnx_bfloat16"),
        "placed as `NamedSharding(mesh, specs[path])`": ("small_nnx_float32", "small_linen_bfloat16",
                                                         "large_linen_float32", "large_nnx_bfloat16"),
        "as an NNX model's pure dict (the leaves at their paths) when `tree` is `\"nnx\"`": (
            "small_nnx_float32", "large_nnx_bfloat16"),
        "a Linen model's variables (every leaf under `params`) when it is `\"linen\"`": (
            "small_linen_bfloat16", "large_linen_float32"),
        "layers stacked on a leading axis": ("large_linen_float32", "large_nnx_bfloat16"),
        f"it must stay under {HF_READ_FACTOR} times the bytes of the model's largest leaf, plus {HF_FIXED >> 20} MiB": (
            "large_linen_float32", "large_nnx_bfloat16"),
        "so neither the files nor the whole model may be in your memory at once": ("large_linen_float32",
                                                                                    "large_nnx_bfloat16"),
    },
    on_exception="out_dir does not exist yet: Orbax's save creates it. Read config.json for the sizes; the index's "
                 "weight_map says which file holds a tensor. ocp_v1.partial.save(out_dir, {...}) adds leaves to a "
                 "checkpoint in the making; ocp_v1.partial.finalize(out_dir) makes it one.",
)


# ---------------------------------------------------------------------------------------------
# 9.3 conversion_is_right: pairs of an Orbax checkpoint and a Hugging Face folder of the same model,
# right (float32 and bfloat16) or with one silent mistake planted.

_VERDICT_CASES = (
    ("right_float32", "", "float32", True),
    ("right_bfloat16", "", "bfloat16", True),
    ("swapped", "swapped", "float32", True),
    ("transpose", "transpose", "float32", True),
    ("qkv_order", "qkv_order", "bfloat16", True),
    ("norm_offset", "norm_offset", "float32", True),
    ("rounded", "rounded", "float32", True),
    ("tied_head", "tied_head", "bfloat16", False),
    ("right_untied", "", "bfloat16", False),
)


def _verdict_cases(rng):
    out = []
    for category, mistake, dtype, tied in _VERDICT_CASES:
        pairs, seed = _small(rng, tied), _seed(rng)
        tree = str(rng.choice(("nnx", "nnx_state", "linen")))
        tokens = [int(t) for t in rng.integers(0, dict(pairs)["vocab_size"], size=int(rng.integers(5, 12)))]
        out.append(Case(category, (LlamaCheckpointArg(config=pairs, seed=seed, tree=tree),
                                   HFFolderArg(pairs, seed, dtype=dtype, max_shard_bytes=2**15, mistake=mistake),
                                   tokens)))
    return out


def _diagnose_verdict(args, actual, expected):
    """Which kind of case was called wrongly, as the case itself shows it: a right conversion tied in
    float32, tied in bfloat16 or untied (its lm_head.weight the output layer), or a wrong one. Two
    mistakes can fail the same case (a tolerance too tight and an output layer taken from the
    embeddings both fail the untied bfloat16 one): the simplest kind that failed is reported
    (``precedence``), so that each message can say which kinds passed."""
    if actual is True and expected is False:
        return "passed_mistake"
    if actual is False and expected is True:
        if not args[1].llama_config().tie_word_embeddings:
            return "failed_untied"
        return "failed_bfloat16" if args[1].dtype == "bfloat16" else "failed_right"
    return None


VERDICT = Hidden(
    generate=_verdict_cases,
    messages={
        "passed_mistake": "Called a wrong conversion right: every tensor's name and shape match a right one's, and its "
                          "logits differ from the checkpoint's by more than the statement's tolerance times the "
                          "largest |logit| (1e-4 for float32 files, 5e-2 for bfloat16 ones). Only the logits, held "
                          "to that tolerance, tell it from a right conversion.",
        "failed_bfloat16": "Called a right bfloat16 conversion wrong (the right float32 ones were called right): "
                           "bfloat16 rounds every weight, so the logits move a little. Use the statement's tolerance "
                           "for bfloat16 files.",
        "failed_untied": "Called a right conversion whose embeddings are not tied wrong (config.json's "
                         "tie_word_embeddings false, an lm_head.weight in the files), while the right tied ones, "
                         "float32 and bfloat16, were called right: an untied model's output layer is lm_head.weight, "
                         "the embeddings only when tied.",
        "failed_right": "Called a right conversion wrong: check your forward pass on it (every Linear computes "
                        "x @ weight.T; the norms multiply by their weight; rotary embeddings rotate each head's halves).",
        "right_float32": "Wrong on a right conversion in float32.",
        "right_bfloat16": "Wrong on a right conversion in bfloat16.",
        "right_untied": "Wrong on a right conversion whose embeddings are not tied (it has an lm_head.weight).",
        "swapped": "Wrong on a conversion with two layers' tensors of one kind exchanged.",
        "transpose": "Wrong on a conversion with a square weight reshaped where it should have been transposed.",
        "qkv_order": "Wrong on a conversion whose fused q, k, v columns were split in the wrong order.",
        "norm_offset": "Wrong on a conversion whose norm weights lack their offset of 1.",
        "rounded": "Wrong on a float32 conversion whose weights were rounded through bfloat16 on their way: "
                   "float32 files are held to float32's tolerance.",
        "tied_head": "Wrong on a conversion that wrote the embeddings as the (untied) output layer.",
    },
    diagnose=_diagnose_verdict,
    # A right tied float32 conversion called wrong is the forward pass's mistake, whatever else fails; a
    # tied bfloat16 one (float32's passing) the tolerance's; only then the untied one's output layer.
    precedence=("failed_right", "failed_bfloat16"),
    requirements={
        "`lm_head.weight` only when the embeddings are not tied": ("tied_head", "right_untied", "right_float32"),
        "Return True when `hf_dir` holds the same model": ("right_float32", "right_bfloat16", "right_untied"),
        "the tolerance being 1e-4 for float32 files and 5e-2 for bfloat16 ones": ("right_bfloat16", "right_untied",
                                                                                   "rounded", "right_float32"),
        "Return False otherwise": ("swapped", "transpose", "qkv_order", "norm_offset", "tied_head"),
        "a tree that matches proves nothing": ("swapped", "transpose", "qkv_order", "norm_offset", "tied_head"),
    },
    on_exception="Read config.json for the sizes and torch_dtype, the index for where each tensor is. "
                 "ckptlab.llama.logits(config, params, tokens) runs the checkpoint's model; the forward pass from "
                 "Hugging Face's layout is yours to write.",
)

HIDDEN = {
    "orbax_to_hf": TO_HF,
    "hf_to_orbax": TO_ORBAX,
    "conversion_is_right": VERDICT,
}
