"""The proof that a conversion of the course's Llama-shaped model is right (Lesson 9): an
independent forward pass in NumPy, written from Hugging Face's layout alone (:func:`hf_logits`), and
its logits compared with the Flax model's on the same tokens, within a tolerance set from the dtype
the converted weights are stored in (:func:`logits_tolerance`, :func:`logits_gap`).

Problem 9.3 asks for this check: it may not import this module.
"""

from __future__ import annotations

import math

import numpy as np

from ckptlab.hf import layer_name
from ckptlab.llama import LlamaConfig


def _rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope(x, theta: float):
    """Rotary embeddings as ``transformers``' Llama applies them, written here apart from the Flax model's:
    ``x * cos + rotate_half(x) * sin``, each head's halves rotated, token t at angle t / theta**(2i / d)."""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(x.shape[0], dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = (np.concatenate([f(angles)] * 2, axis=-1)[:, None, :] for f in (np.cos, np.sin))
    rotate_half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rotate_half * sin


def _rope_pairs(x, theta: float):
    """Rotary embeddings as Meta's original Llama code applies them (``apply_rotary_emb``): each head's
    dimensions taken as complex numbers ``x[2i] + 1j * x[2i + 1]`` (neighbours paired, not halves),
    each multiplied by ``exp(1j * t / theta**(2i / d))``."""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(x.shape[0], dtype=np.float64)[:, None] * inv_freq[None, :]
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * angles)[:, None, :]
    out = np.empty(x.shape, np.float64)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


ROPES = {"halves": _rope, "pairs": _rope_pairs}  # Hugging Face's rotate_half; Meta's original pairs


def hf_logits(get, config: LlamaConfig, tokens, rope: str = "halves") -> np.ndarray:
    """Logits ``(tokens, vocab)`` computed in float64 from Hugging Face's tensors alone (``get(name)``),
    as ``LlamaForCausalLM`` computes them: every ``Linear`` is ``x @ weight.T``; the norms multiply by
    their weight; the output layer is ``lm_head.weight`` or, tied, the embeddings. ``rope="pairs"``
    rotates neighbouring dimensions as Meta's original code does (the layout its q and k rows are in)."""
    c = config
    rotate = ROPES[rope]

    def w(name):
        return np.asarray(get(name), np.float64)

    tokens = np.asarray(tokens)
    t = len(tokens)
    h = w("model.embed_tokens.weight")[tokens]
    groups = c.num_attention_heads // c.num_key_value_heads
    mask = np.tril(np.ones((t, t), bool))
    for i in range(c.num_hidden_layers):
        x = _rms_norm(h, w(layer_name(i, "input_layernorm")), c.rms_norm_eps)
        q = (x @ w(layer_name(i, "self_attn.q_proj")).T).reshape(t, c.num_attention_heads, c.head_dim)
        k = (x @ w(layer_name(i, "self_attn.k_proj")).T).reshape(t, c.num_key_value_heads, c.head_dim)
        v = (x @ w(layer_name(i, "self_attn.v_proj")).T).reshape(t, c.num_key_value_heads, c.head_dim)
        q, k = rotate(q, c.rope_theta), rotate(k, c.rope_theta)
        k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(c.head_dim)
        scores = np.where(mask, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        h = h + np.einsum("hts,shd->thd", weights, v).reshape(t, c.q_size) @ w(layer_name(i, "self_attn.o_proj")).T
        x = _rms_norm(h, w(layer_name(i, "post_attention_layernorm")), c.rms_norm_eps)
        gate = x @ w(layer_name(i, "mlp.gate_proj")).T
        h = h + (gate / (1 + np.exp(-gate)) * (x @ w(layer_name(i, "mlp.up_proj")).T)) @ w(layer_name(i, "mlp.down_proj")).T
    h = _rms_norm(h, w("model.norm.weight"), c.rms_norm_eps)
    return h @ w("lm_head.weight" if not c.tie_word_embeddings else "model.embed_tokens.weight").T


# The relative tolerance on logits, by the dtype the converted weights are stored in: the largest
# |difference| over the largest |logit| of the original. A float32 conversion only reorders
# float32 numbers (what differs is the forward passes' own rounding, float32 beside float64); a
# bfloat16 one rounds every weight to 8 significant bits (a relative error up to 2**-8 each).
# Lesson 9 measures both beside the mistakes, which land orders of magnitude above. Float32's holds
# for a reference whose matmuls are float32 (``ckptlab.llama``'s run at precision="highest"): JAX's
# default on a TPU (one bfloat16 pass) or a recent GPU (TF32) moves them by 4e-4 to 3e-3, over 1e-4
# (Lesson 9 measures it on CPU devices, each matmul's inputs rounded as those passes round them).
TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2, "float16": 1e-2}


def logits_tolerance(dtype: str) -> float:
    return TOLERANCE[_dtype_name(dtype)]


def logits_gap(reference, converted) -> float:
    """The largest |difference| of two models' logits, over the largest |logit| of the first."""
    reference, converted = np.asarray(reference, np.float64), np.asarray(converted, np.float64)
    if reference.shape != converted.shape:
        return math.inf
    return float(np.max(np.abs(reference - converted)) / np.max(np.abs(reference)))



def _dtype_name(dtype) -> str:
    import ml_dtypes  # noqa: F401 - registers bfloat16 with NumPy

    return np.dtype(dtype).name
