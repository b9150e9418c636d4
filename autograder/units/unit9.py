"""Unit 9, To and from Hugging Face: its record and its problems. Public: what learners may see
(statements, signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit9.py``, keyed by
function name; references: ``solutions/unit9.py``."""

from __future__ import annotations

from autograder.declarations import Example, Problem, Unit
from autograder.wall.hf_returns import ConvertedTree, HFWritten
from autograder.wall.kinds import HFFolderArg, LlamaCheckpointArg, MeshArg, OutputFolder, SpecArg
from autograder.wall.memory import HF_FACTOR, HF_FIXED, HF_READ_FACTOR
from autograder.wall.returns import Struct

UNIT = Unit(
    number=9,
    title="To and from Hugging Face",
    intro=(
        "A JAX stack's checkpoint and a Hugging Face checkpoint hold the same model in different layouts: "
        "Flax kernels `(in, out)` against PyTorch weights `(out, in)`, one fused q-k-v projection against "
        "three, layers stacked against one tensor per layer, norm scales stored around zero against weights "
        "that multiply. Convert the course's Llama-shaped model (`ckptlab.llama`) from a sharded Orbax "
        "checkpoint to Hugging Face's sharded safetensors files and their index, and back onto a mesh, one "
        "leaf at a time under a memory budget the grader measures from outside; then tell a right conversion "
        "from the silent mistakes, whose tensors' names and shapes all match, by the models' outputs. The "
        "lesson is `course/09_hugging_face.ipynb`."
    ),
    notebook="unit9_hugging_face.ipynb",
    lesson="09_hugging_face.ipynb",
    lesson_figures=1,
    # the problem notebook's import cell
    imports=(
        "import json\n"
        "import math\n"
        "import os\n"
        "\n"
        "import jax\n"
        "import ml_dtypes\n"
        "import numpy as np\n"
        "import orbax.checkpoint as ocp\n"
        "from jax.sharding import NamedSharding, PartitionSpec\n"
        "from orbax.checkpoint import v1 as ocp_v1\n"
        "\n"
        "from autograder.notebook import problem\n"
        "from ckptlab.llama import LlamaConfig, param_shapes"
    ),
)

# The lesson's small model: 2 layers, hidden 64, 4 heads of 16 (2 key-value heads), tied embeddings.
_SMALL = (("vocab_size", 256), ("hidden_size", 64), ("num_hidden_layers", 2), ("num_attention_heads", 4),
          ("num_key_value_heads", 2), ("head_dim", 16), ("intermediate_size", 128), ("tie_word_embeddings", True))
_UNTIED = tuple((k, False if k == "tie_word_embeddings" else v) for k, v in _SMALL)
# Twelve layers of a smaller width: more than ten, so that layer 10 is not layer 2.
_DEEP = tuple((k, {"num_hidden_layers": 12, "hidden_size": 32, "head_dim": 8, "intermediate_size": 64}.get(k, v))
              for k, v in _SMALL)


def config_of(pairs: tuple) -> dict:
    from ckptlab.llama import LlamaConfig

    config = LlamaConfig(**dict(pairs)).hf_config()
    del config["torch_dtype"]
    return config


def _specs(axis: str = "model", pairs: tuple = _SMALL) -> dict:
    """Specs for a small model over one axis: matrices split on their last dimension, vectors replicated."""
    from ckptlab.llama import LlamaConfig, param_shapes

    out = {}
    for path, shape in param_shapes(LlamaConfig(**dict(pairs))).items():
        out[path] = SpecArg((None,) * (len(shape) - 1) + (axis,)) if len(shape) >= 2 and not path.endswith("scale") \
            else SpecArg(())
    return out


# The lesson's own layout, conversions and check: each problem's answer, written by the course.
_FORBIDDEN = ("ckptlab.hf", "ckptlab.hfcheck", "ckptlab.hfconvert")

# The three trees a checkpoint of the model comes as (Lesson 9 saves each).
_TREES = (
    "as one of the three trees a model is saved as: an NNX model's state saved as it is (`nnx.state(model)`: "
    "each leaf of `ckptlab.llama.param_shapes` at its path followed by `value`), its pure dict "
    "(`nnx.to_pure_dict`: the leaves at their paths) or a Linen model's variables (the leaves under `params`)"
)

_CONVERSION_WORDS = (
    "Hugging Face's layout names each tensor as its Llama model (LlamaForCausalLM) does: `model.embed_tokens.weight`; for "
    "each layer i, `model.layers.{i}.input_layernorm.weight`, `model.layers.{i}.self_attn.{q,k,v,o}_proj.weight`, "
    "`model.layers.{i}.post_attention_layernorm.weight`, `model.layers.{i}.mlp.{gate,up,down}_proj.weight`; "
    "`model.norm.weight`; and `lm_head.weight` only when the embeddings are not tied. Each weight is a PyTorch "
    "`Linear`'s, `(out, in)`; a norm's weight multiplies as it is (`1 + scale` of ours). The course's layout is "
    "`ckptlab.llama`'s (read its docstring): kernels `(in, out)`, layers stacked on a leading axis, one fused "
    "`qkv` kernel whose columns are every query head, then every key head, then every value head."
)

PROBLEMS = (
    Problem(
        id="9.1",
        function="orbax_to_hf",
        signature=("ckpt_dir", "out_dir", "config", "max_shard_bytes", "dtype"),
        points=20,
        title="From a sharded Orbax checkpoint to Hugging Face's sharded safetensors",
        statement=(
            "`ckpt_dir` holds the course's Llama-shaped model (`ckptlab.llama`) saved with "
            "`ocp.StandardCheckpointer` on 8 devices, float32, " + _TREES + ". `config` is the "
            "model's Hugging Face config (a dict: `LlamaConfig.from_hf(config)` reads it). Write the model into "
            "`out_dir` (it does not exist yet) as Hugging Face's `save_pretrained` lays it out. "
            + _CONVERSION_WORDS + " Store every tensor in `dtype` (`\"float32\"` or `\"bfloat16\"`), each "
            "transform done in float32 as saved and the cast last. Write the tensors as safetensors files "
            "named `model-00001-of-0000N.safetensors` to `model-0000N-of-0000N.safetensors`, each file's header "
            "holding `\"__metadata__\": {\"format\": \"pt\"}` (as `save_pretrained` writes it: transformers 5.x loads "
            "a file whatever its metadata says, but 4.x turns away one whose metadata names no format it knows, and "
            "reads a lone file saying `\"flax\"` as Flax weights), "
            "each file at most `max_shard_bytes` bytes of tensors unless it holds a single tensor; then "
            "`model.safetensors.index.json`, `{\"metadata\": {\"total_size\": <bytes of all the tensors>}, "
            "\"weight_map\": {<tensor>: <its file>}}`; and `config.json`, `config` with `\"torch_dtype\"` set "
            "to `dtype`. The grader reads the folder back in a worker of its own, and measures your function's "
            f"own memory from outside (its anonymous memory, sampled): it must stay under {HF_FACTOR} times the "
            "bytes of the checkpoint's largest leaf (float32), plus `max_shard_bytes`, plus "
            f"{HF_FIXED >> 20} MiB, so the whole model may not be in your memory at once. What you return is "
            "not looked at."
        ),
        returns=HFWritten(),
        hints=(
            "Map each saved leaf to the Hugging Face tensors it becomes, and the transforms in between, before "
            "writing any code: which leaves are stacked, which kernels are transposed, which columns of `qkv` are "
            "q, k and v (their widths come from the config), which leaves get their norm offset.",
            "Restore one leaf at a time (a partial restore of a one-leaf tree, to NumPy) and turn it into its "
            "tensors before restoring the next. Which file each tensor goes to can be planned from the shapes "
            "alone, before any value is read, so that a file is written as soon as its tensors are all there.",
            "`safetensors.numpy.save_file` writes an array's bytes from its first element as they lie in memory, "
            "whatever its strides, so any non-contiguous view is written wrong: a transposed view (`kernel.T`) "
            "untransposed under the transposed shape, a column slice of `qkv` as the bytes after its first "
            "element. Make every tensor contiguous first (`np.ascontiguousarray`). It "
            "writes bfloat16 (ml_dtypes'), which `safe_open` reads back. Or write a file yourself: an 8-byte "
            "little-endian header length, the JSON header, then each tensor's bytes.",
        ),
        examples=(
            Example((LlamaCheckpointArg(config=_SMALL, seed=3), OutputFolder(), config_of(_SMALL), 65536, "float32"),
                    None, "the lesson's small model (2 layers, tied embeddings) in float32, files of at most 64 KiB"),
            Example((LlamaCheckpointArg(config=_UNTIED, seed=4, tree="linen"), OutputFolder(), config_of(_UNTIED), 65536,
                     "bfloat16"),
                    None, "a Linen tree, embeddings not tied (an lm_head), stored in bfloat16"),
            Example((LlamaCheckpointArg(config=_SMALL, seed=5, tree="nnx_state"), OutputFolder(), config_of(_SMALL), 32768,
                     "float32"),
                    None, "an nnx.State saved as it is (each path ending in 'value'), files of at most 32 KiB: smaller "
                          "than one kind of tensor of both layers together"),
        ),
        measure_memory=True,
        forbidden=_FORBIDDEN,
        mode="readback_hf",
        timeout=120.0,
        difficulty="hard",
        category="formats",
        tags=("hugging-face", "safetensors", "conversion", "memory"),
        seen_in="MaxText issue #3003 (NNX-trained checkpoints failing to convert back to Hugging Face)",
        why=(
            "Every transform is a function of one leaf, so memory stays near one leaf: restore it alone, "
            "unstack, split and transpose it, cast last, and write each file as soon as its tensors are in, "
            "its place planned from the shapes. The index then says where each tensor lives."
        ),
        next_question=(
            "The model has 70 billion parameters on 64 hosts: which host writes which file, and how would you "
            "make the index agree with the files if one host fails half way?"
        ),
    ),
    Problem(
        id="9.2",
        function="hf_to_orbax",
        signature=("hf_dir", "out_dir", "mesh", "specs", "tree"),
        points=20,
        title="From Hugging Face's sharded safetensors to a sharded Orbax checkpoint for a mesh",
        statement=(
            "`hf_dir` holds the course's Llama-shaped model as Hugging Face writes it: `config.json`, "
            "safetensors files and `model.safetensors.index.json` (which file holds which tensor; a model small "
            "enough for one file comes as `model.safetensors` alone, with no index). "
            + _CONVERSION_WORDS + " Write an Orbax checkpoint into `out_dir` (it does not exist yet) holding "
            "the model in the course's layout: every leaf of `param_shapes(LlamaConfig.from_hf(config))`, "
            "`config` being `config.json`'s dict, at its path, with the files' values transformed and the files' dtype kept, placed as "
            "`NamedSharding(mesh, specs[path])`; as an NNX model's pure dict (the leaves at their paths) when "
            "`tree` is `\"nnx\"`, or a Linen model's variables (every leaf under `params`) when it is `\"linen\"`. The grader restores what you wrote with "
            "`ocp.v1.load(out_dir)` in a worker of its own and measures your function's own memory from outside "
            f"(its anonymous memory, sampled: the pages of a file a reader maps are not counted): it must stay "
            f"under {HF_READ_FACTOR} times the bytes of the model's largest leaf, plus {HF_FIXED >> 20} MiB, so "
            "neither the files nor the whole model may be in your memory at once. What you return is not "
            "looked at."
        ),
        returns=ConvertedTree(),
        hints=(
            "The index's `weight_map` says which file holds each tensor; each file's header gives its tensors' "
            "offsets (Unit 4). `safetensors.safe_open` or a NumPy memory map reads one tensor without the rest.",
            "Build one leaf at a time: gather its tensors from every layer, transform each, stack them, place "
            "the stack on the mesh and add it to the checkpoint before building the next (`ocp_v1.partial.save`, "
            "then `ocp_v1.partial.finalize`).",
            "A norm's offset subtracted in another dtype than the file's, or a list of layers kept beside the "
            "stack made of them, shows: in the values, or in the memory the grader measures.",
        ),
        examples=(
            Example((HFFolderArg(_SMALL, 5), OutputFolder(), MeshArg((("model", 8),)), _specs(), "nnx"),
                    None, "the lesson's small model, every matrix split over 8 devices on its last dimension"),
            Example((HFFolderArg(_UNTIED, 6, dtype="bfloat16"), OutputFolder(), MeshArg((("model", 8),)),
                     {**_specs(), "lm_head/kernel": SpecArg((None, "model"))}, "linen"),
                    None, "embeddings not tied, bfloat16 files, a Linen tree"),
            Example((HFFolderArg(_DEEP, 11), OutputFolder(), MeshArg((("model", 8),)), _specs(pairs=_DEEP), "nnx"),
                    None, "twelve layers: layer i of a stacked leaf is model.layers.i's, and 10 comes after 9"),
        ),
        measure_memory=True,
        forbidden=_FORBIDDEN,
        mode="readback",
        timeout=120.0,
        difficulty="hard",
        category="formats",
        tags=("hugging-face", "safetensors", "conversion", "memory"),
        seen_in="MaxText issues #1324 (a stored shape that is not the requested one), #2591 (per-tensor loading)",
        why=(
            "The index turns a model of many files into one lookup, and a memory map reads one tensor's bytes "
            "only; each leaf is gathered across layers, transformed and stacked, placed, and saved before the "
            "next, so memory holds one leaf."
        ),
        next_question=(
            "A layer of the Hugging Face model is split across two files: what changes in your code, and what "
            "would a reader that loads one file at a time get wrong?"
        ),
    ),
    Problem(
        id="9.3",
        function="conversion_is_right",
        signature=("ckpt_dir", "hf_dir", "tokens"),
        points=15,
        title="Tell a right conversion from a silent mistake, by the model's outputs",
        statement=(
            "`ckpt_dir` holds the course's Llama-shaped model saved with `ocp.StandardCheckpointer` in float32, "
            + _TREES + "; `hf_dir` a conversion of it into Hugging Face's layout (`config.json`, "
            "safetensors files, `model.safetensors.index.json` or one `model.safetensors`), stored in float32 or bfloat16 as its "
            "`config.json`'s `torch_dtype` says. " + _CONVERSION_WORDS + " Return True when `hf_dir` holds the "
            "same model: when the logits of a forward pass written from Hugging Face's layout, on `tokens`, "
            "differ from those of `ckptlab.llama.logits` on the checkpoint's weights (float32 on any backend: its "
            "matmuls run at `precision=\"highest\"`) by at most a tolerance times "
            "the largest |logit| of the checkpoint's model, the tolerance being 1e-4 for float32 files and 5e-2 "
            "for bfloat16 ones (a bfloat16 conversion rounds every weight). Return False otherwise. Every "
            "conversion has every tensor's name and shape right: a tree that matches proves nothing."
        ),
        returns=Struct("bool"),
        hints=(
            "The forward pass to write is Llama's: RMSNorm, attention with rotary embeddings (each head's two "
            "halves rotated) and grouped key-value heads, causal, then a SiLU-gated MLP, every `Linear` "
            "computing `x @ weight.T`. `ckptlab.llama`'s `__call__` is the same model in the other layout: "
            "read it.",
            "Check your forward pass on a conversion you know is right before trusting it to find a wrong one.",
            "A check by names, shapes or each tensor's norm passes a weight that was reshaped instead of "
            "transposed; an exact comparison fails every bfloat16 conversion.",
        ),
        examples=(
            Example((LlamaCheckpointArg(config=_SMALL, seed=7), HFFolderArg(_SMALL, 7), [3, 14, 15, 92, 65, 35]),
                    True, "a right conversion"),
            Example((LlamaCheckpointArg(config=_SMALL, seed=7, tree="nnx_state"), HFFolderArg(_SMALL, 7, mistake="qkv_order"),
                     [3, 14, 15, 92, 65, 35]),
                    False, "the same model, its fused q, k, v columns split as q, v, k: names and shapes all match"),
            Example((LlamaCheckpointArg(config=_UNTIED, seed=8, tree="linen"), HFFolderArg(_UNTIED, 8, dtype="bfloat16"),
                     [7, 1, 8, 2, 8, 1]),
                    True, "a right conversion of a Linen tree (embeddings not tied) stored in bfloat16: its logits are "
                          "further from the checkpoint's than float32's tolerance, within bfloat16's"),
            Example((LlamaCheckpointArg(config=_SMALL, seed=9), HFFolderArg(_SMALL, 9, mistake="rounded"), [2, 7, 1, 8]),
                    False, "float32 files whose weights were rounded through bfloat16 on their way: float32's tolerance "
                           "applies to them"),
            Example((LlamaCheckpointArg(config=_SMALL, seed=10), HFFolderArg(_SMALL, 10, mistake="transpose"),
                     [1, 4, 1, 4, 2]),
                    False, "the last layer's o_proj reshaped where it should have been transposed: every tensor's "
                           "name, shape, norm and sum as in a right conversion"),
        ),
        forbidden=_FORBIDDEN,
        timeout=90.0,
        difficulty="medium",
        category="formats",
        tags=("hugging-face", "verification", "logits"),
        seen_in="MaxText issue #1906 (a logit check, --max_kl_div), #2961 (Gemma 3's RMSNorm offset)",
        why=(
            "The outputs depend on every weight in its place, so a tensor swapped, left untransposed or split "
            "in the wrong order moves the logits far beyond what rounding can; rounding to bfloat16 moves them "
            "a little, which the tolerance, set from the dtype, allows."
        ),
        next_question=(
            "Your model is too large for one host to run in float64: how would you check a conversion layer by "
            "layer, and which mistakes could that miss?"
        ),
    ),
)
