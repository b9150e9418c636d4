"""Unit 9's drills (to and from Hugging Face): how many tensors a Hugging Face checkpoint of a model
holds, where a fused projection's value columns start, how many files a shard-size limit makes.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=9``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question


def hf_tensor_count(rng) -> Question:
    layers = int(rng.choice([16, 24, 28, 32, 40, 80]))
    tied = bool(rng.integers(0, 2))
    count = 2 + 9 * layers + (0 if tied else 1)
    return Question(
        "hf_tensor_count",
        f"A Llama-shaped model of {layers} layers, its embeddings {'tied to' if tied else 'not tied to'} the output "
        "layer, is saved in a JAX stack with its layers stacked (one leaf per kind of weight) and a fused q-k-v "
        "projection. How many tensors does its Hugging Face checkpoint (LlamaForCausalLM's names) hold?",
        count, "tensors",
        f"Each layer has 9: input_layernorm, q_proj, k_proj, v_proj, o_proj, post_attention_layernorm, gate_proj, "
        f"up_proj, down_proj ({layers} x 9 = {9 * layers}); then model.embed_tokens.weight and model.norm.weight"
        + ("; tied embeddings write no lm_head.weight" if tied else ", and lm_head.weight, the output layer being untied")
        + f": {count}. Stacking and fusing change the count of leaves, never the numbers.",
        facts=dict(layers=layers, tied=tied), unit_of_study=9,
        mistakes=((2 + 7 * layers + (0 if tied else 1), "That counts the fused qkv as one tensor: Hugging Face keeps "
                                                         "q_proj, k_proj and v_proj apart."),
                  (3 + 9 * layers if tied else 2 + 9 * layers,
                   "Tied embeddings write no lm_head.weight; untied ones write it." if tied
                   else "The output layer is not tied: lm_head.weight is a tensor of its own.")))


def v_columns_start(rng) -> Question:
    head_dim = int(rng.choice([64, 128]))
    heads = int(rng.choice([8, 16, 32, 64]))
    kv = int(rng.choice([k for k in (1, 2, 4, 8) if k < heads]))
    start = (heads + kv) * head_dim
    return Question(
        "v_columns_start",
        f"A fused q-k-v kernel (in, out) holds every query head, then every key head, then every value head in its "
        f"columns: {heads} query heads and {kv} key-value heads, each of {head_dim}. At which column (from 0) do "
        "the value heads' columns start?",
        start, "column",
        f"The queries take {heads} x {head_dim} = {heads * head_dim} columns, the keys {kv} x {head_dim} = "
        f"{kv * head_dim}; the values start after both: {start}. Split at the wrong place and the shapes break; "
        "swap k and v (the same width) and nothing breaks but the outputs.",
        facts=dict(heads=heads, kv=kv, head_dim=head_dim), unit_of_study=9,
        mistakes=((2 * heads * head_dim, "That gives the keys as many heads as the queries: with grouped-query "
                                         f"attention they have {kv}."),
                  (heads * head_dim, "That is where the keys start; the values come after them.")))


def shard_files(rng) -> Question:
    from ckptlab.hf import plan_shards

    sizes = [int(x) for x in rng.choice([1, 2, 3, 4], size=int(rng.integers(6, 10)))]
    limit = int(rng.choice([4, 5, 6]))
    files = len(plan_shards({f"t{i}": s for i, s in enumerate(sizes)}, limit))
    shown = ", ".join(f"{s}" for s in sizes)
    least = -(-sum(sizes) // limit)
    return Question(
        "shard_files",
        f"A checkpoint's tensors weigh, in order, {shown} GB. It is saved as sharded safetensors with a limit of "
        f"{limit} GB a file, split as huggingface_hub splits a state dict: tensors in order, a new file whenever the "
        "next tensor would take the current one over the limit. How many files?",
        files, "files",
        f"Filling in order, a file closes as soon as the next tensor does not fit: {files} files for {sum(sizes)} GB. "
        f"A packing that reordered tensors could need as few as {least}, but the split keeps their order, so a file "
        "often holds less than the limit.",
        facts=dict(sizes=sizes, limit=limit), unit_of_study=9,
        mistakes=((least, "That is the total over the limit, rounded up: the split keeps the tensors in order, so "
                          "files close before they are full."),) if least != files else ())


DRILLS = (hf_tensor_count, v_columns_start, shard_files)
