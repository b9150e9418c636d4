"""Unit 1's drills (parameter accounting): a Dense layer's parameters and what one device holds of an MLP's.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=1``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question, drawn_dtype, fmt_number


def model_bytes(rng) -> Question:
    dtype, size = drawn_dtype(rng)
    layers, width, m = int(rng.integers(2, 9)), int(rng.choice([1024, 2048, 4096])), int(rng.choice([4, 8, 16]))
    kernel, bias = width * width // m, width
    total = layers * (kernel + bias) * size
    return Question(
        "model_bytes",
        f"An MLP of {layers} nn.Dense({width}) layers on inputs of width {width}, in {dtype}. Kernels are "
        f"sharded over their output dimension on {m} devices; biases are replicated. How many parameter bytes "
        "does one device hold?",
        total, "bytes",
        f"per layer a device holds {width} x {width}/{m} = {kernel:,} kernel values and all {bias:,} bias values; "
        f"{layers} layers x {kernel + bias:,} x {size} bytes = {total:,} bytes.", facts=dict(dtype=dtype, layers=layers, width=width, devices=m), unit_of_study=1,
        mistakes=((layers * (width * width + width) * size / m,
                   f"That divides the biases too: they are replicated, so a device holds all {width} of each layer's."),
                  (layers * kernel * size, f"That leaves out the biases: {layers} x {width} values x {size} bytes, "
                                           "replicated on every device."),
                  (total / size, f"That counts values, not bytes: x {size} bytes per {dtype} value."),
                  (layers * (width * width + width) * size, f"That is the whole model: a device holds 1/{m} of each kernel.")))


def dense_params(rng) -> Question:
    n, f, shards = int(rng.choice([3, 16, 100, 784, 1000])), int(rng.choice([8, 10, 64, 128, 256])), int(rng.choice([2, 4, 8]))
    total = n * f + f
    return Question(
        "dense_params",
        f"nn.Dense({f}) is initialised on inputs of shape (32, {n}). Its checkpoint is split evenly into "
        f"{shards} shards. How many parameters are in one shard (it may be a fraction)?",
        total / shards, "params",
        f"kernel ({n}, {f}) = {n * f:,} and bias ({f},) = {f}: {total:,} in total, / {shards} = {fmt_number(total / shards)}. "
        "The batch size (32) plays no part.", rel_tol=1e-6, facts=dict(n=n, features=f, shards=shards), unit_of_study=1,
        mistakes=((n * f / shards, f"That leaves out the bias: its {f} values are parameters too."),
                  (total, f"That is the whole layer: a shard holds 1/{shards} of it."),
                  (32 * total / shards, "That multiplies by the batch size (32): the parameters do not depend on it.")))


DRILLS = (dense_params, model_bytes)
