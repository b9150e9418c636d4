"""A small Llama-shaped model in Flax NNX (Lesson 9 and Unit 9), its weights drawn from a seed.

Its checkpoint layout is a JAX stack's, not Hugging Face's (``ckptlab.hf`` converts between them):

- ``embed/embedding`` ``(vocab, dim)``; the output layer is the embedding's transpose when the
  embeddings are tied, else ``lm_head/kernel`` ``(dim, vocab)``;
- the layers stacked on a leading axis (as ``nnx.scan`` or Linen's ``nn.scan`` train them):
  ``layers/attn/qkv/kernel`` ``(layers, dim, (heads + 2 * kv_heads) * head_dim)``, one fused
  projection whose columns are every query head, then every key head, then every value head;
  ``layers/attn/o/kernel``, ``layers/mlp/{gate,up,down}/kernel``: ``(in, out)`` like every Flax
  ``Dense``/``nnx.Linear`` kernel;
- ``layers/attn_norm/scale``, ``layers/mlp_norm/scale`` and ``final_norm/scale``: RMSNorm scales
  stored around zero (the norm multiplies by ``1 + scale``, as Gemma's does).

The forward pass is Llama's: RMSNorm, grouped-query attention with rotary position embeddings
(the two halves of each head rotated, as Hugging Face's ``rotate_half``), a SiLU-gated MLP. Its
matmuls run at ``precision="highest"`` unless told otherwise: JAX's default float32 matmul is float32
on CPU devices, but one bfloat16 pass on a TPU and TF32 on recent NVIDIA GPUs (inputs rounded to 8 and
11 significant bits), which moves the logits by about a bfloat16 conversion's gap (Lesson 9).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class LlamaConfig:
    """The model's sizes, named as Hugging Face's ``config.json`` names them."""

    vocab_size: int = 256
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    tie_word_embeddings: bool = True
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                             f"num_key_value_heads ({self.num_key_value_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (rotary embeddings rotate pairs), got {self.head_dim}")

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def hf_config(self, torch_dtype: str = "float32") -> dict:
        """The ``config.json`` Hugging Face's ``LlamaForCausalLM`` reads."""
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **asdict(self),
                "hidden_act": "silu", "torch_dtype": torch_dtype}

    @classmethod
    def from_hf(cls, config: dict) -> LlamaConfig:
        """From a ``config.json``'s dict (keys it does not know are ignored)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in config.items() if k in names})

    @classmethod
    def read(cls, path: str) -> LlamaConfig:
        with open(path) as f:
            return cls.from_hf(json.load(f))


def param_shapes(config: LlamaConfig) -> dict:
    """Every leaf's path (``"layers/attn/qkv/kernel"``) and shape, in the JAX stack's layout."""
    c, n = config, config.num_hidden_layers
    d, f = c.hidden_size, c.intermediate_size
    shapes = {
        "embed/embedding": (c.vocab_size, d),
        "layers/attn_norm/scale": (n, d),
        "layers/attn/qkv/kernel": (n, d, c.q_size + 2 * c.kv_size),
        "layers/attn/o/kernel": (n, c.q_size, d),
        "layers/mlp_norm/scale": (n, d),
        "layers/mlp/gate/kernel": (n, d, f),
        "layers/mlp/up/kernel": (n, d, f),
        "layers/mlp/down/kernel": (n, f, d),
        "final_norm/scale": (d,),
    }
    if not c.tie_word_embeddings:
        shapes["lm_head/kernel"] = (d, c.vocab_size)
    return shapes


def random_params(config: LlamaConfig, seed: int, dtype="float32") -> dict:
    """Weights drawn from ``seed`` (NumPy's generator: the same on every machine), flat by path.
    Kernels are scaled by 1/sqrt(fan-in), norm scales drawn around zero, so that every weight
    changes the logits."""
    rng = np.random.default_rng(seed)
    out = {}
    for path, shape in param_shapes(config).items():
        if path.endswith("scale"):
            value = 0.2 * rng.standard_normal(shape)
        elif path == "embed/embedding":
            value = rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape) / np.sqrt(shape[-2])
        out[path] = value.astype(dtype)
    return out


def fsdp_spec(shape: tuple, axis: str = "x", size: int = 8) -> tuple:
    """The partition spec entries that split an array of ``shape`` over a mesh axis of ``size``
    devices as FSDP training saves it: on its second-to-last dimension, else its last (a vector's
    one), where ``size`` divides it; replicated where it divides neither."""
    spec = [None] * len(shape)
    dim = next((d for d in (len(shape) - 2, len(shape) - 1) if d >= 0 and shape[d] % size == 0), None)
    if dim is not None:
        spec[dim] = axis
    return tuple(spec)


def nest(flat: dict) -> dict:
    """``{"a/b": x}`` as ``{"a": {"b": x}}``."""
    tree: dict = {}
    for path, value in flat.items():
        keys = path.split("/")
        functools.reduce(lambda branch, key: branch.setdefault(key, {}), keys[:-1], tree)[keys[-1]] = value
    return tree


def flatten(tree, prefix: str = "") -> dict:
    """A nested dict's leaves by path: the inverse of :func:`nest`."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    return {path: leaf for key, branch in tree.items()
            for path, leaf in flatten(branch, f"{prefix}/{key}" if prefix else str(key)).items()}


def linen_tree(flat: dict) -> dict:
    """The tree a Linen model's checkpoint holds: the same leaves under ``params``."""
    return {"params": nest(flat)}


def _rms_norm(x, scale, eps):
    import jax.numpy as jnp

    return x * jnp.reciprocal(jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)) * (1.0 + scale)


def rotary(x, positions, theta: float):
    """Rotary position embeddings on ``x`` ``(..., tokens, heads, head_dim)``: each head's two halves
    rotated (Hugging Face's ``rotate_half``). Works on NumPy or JAX arrays."""
    xp = np if isinstance(x, np.ndarray) else __import__("jax.numpy", fromlist=["numpy"])
    half = x.shape[-1] // 2
    inv_freq = 1.0 / (theta ** (np.arange(0, half, dtype=np.float64) * 2 / x.shape[-1]))
    angles = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]  # (tokens, half)
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :].astype(x.dtype)
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :].astype(x.dtype)
    rotated = xp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


# The mantissa bits (stored, beside the implicit leading one) a matmul's inputs keep where an
# accelerator rounds them: one bfloat16 pass (a TPU's default for float32) or TF32 (recent NVIDIA
# GPUs'). CPU devices round neither, so the lesson shows what they do by rounding the inputs itself.
ROUNDED_INPUTS = {"bfloat16": 7, "tensorfloat32": 10}


def _matmul(spec: str, a, b, precision: str, round_inputs: str | None):
    """``einsum(spec, a, b)`` at JAX's ``precision`` (``"highest"``, or ``"default"``: the backend's
    choice), its inputs first rounded as an accelerator's pass rounds them when ``round_inputs`` names
    one (a key of :data:`ROUNDED_INPUTS`: products of the rounded inputs, summed in float32)."""
    import jax
    import jax.numpy as jnp

    if round_inputs is not None:
        bits = ROUNDED_INPUTS[round_inputs]
        a, b = (jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=bits) for x in (a, b))
        precision = "highest"
    return jnp.einsum(spec, a, b, precision=jax.lax.Precision(precision))


def _module_class():
    from flax import nnx

    class Bag(nnx.Module):
        """A module holding named parameters (or other bags): its attributes are the tree's keys."""

        def __init__(self, tree: dict):
            for key, value in tree.items():
                setattr(self, key, Bag(value) if isinstance(value, dict) else nnx.Param(value))

    class Llama(Bag):
        """The course's Llama-shaped model. ``model(tokens)`` gives logits ``(tokens, vocab)``, every
        matmul at ``precision`` (JAX's: ``"highest"``, or ``"default"``, the backend's choice), its
        inputs rounded first as ``round_inputs`` says (None, or a key of :data:`ROUNDED_INPUTS`)."""

        def __init__(self, config: LlamaConfig, params: dict):
            import jax.numpy as jnp

            self.config = config
            super().__init__(nest({k: jnp.asarray(v) for k, v in params.items()}))

        def __call__(self, tokens, precision: str = "highest", round_inputs: str | None = None):
            import jax
            import jax.numpy as jnp

            def mm(spec, a, b):
                return _matmul(spec, a, b, precision, round_inputs)

            c = self.config
            tokens = jnp.asarray(tokens)
            t = tokens.shape[0]
            h = self.embed.embedding[...][tokens]
            groups = c.num_attention_heads // c.num_key_value_heads
            mask = jnp.tril(jnp.ones((t, t), bool))
            positions = np.arange(t)
            L = self.layers
            for i in range(c.num_hidden_layers):
                x = _rms_norm(h, L.attn_norm.scale[i], c.rms_norm_eps)
                qkv = mm("td,de->te", x, L.attn.qkv.kernel[i])
                q = qkv[:, :c.q_size].reshape(t, c.num_attention_heads, c.head_dim)
                k = qkv[:, c.q_size:c.q_size + c.kv_size].reshape(t, c.num_key_value_heads, c.head_dim)
                v = qkv[:, c.q_size + c.kv_size:].reshape(t, c.num_key_value_heads, c.head_dim)
                q, k = rotary(q, positions, c.rope_theta), rotary(k, positions, c.rope_theta)
                k, v = jnp.repeat(k, groups, axis=1), jnp.repeat(v, groups, axis=1)
                scores = mm("thd,shd->hts", q, k) / np.sqrt(c.head_dim)
                weights = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)
                attended = mm("hts,shd->thd", weights, v).reshape(t, c.q_size)
                h = h + mm("tq,qd->td", attended, L.attn.o.kernel[i])
                x = _rms_norm(h, L.mlp_norm.scale[i], c.rms_norm_eps)
                gated = jax.nn.silu(mm("td,df->tf", x, L.mlp.gate.kernel[i])) * mm("td,df->tf", x, L.mlp.up.kernel[i])
                h = h + mm("tf,fd->td", gated, L.mlp.down.kernel[i])
            h = _rms_norm(h, self.final_norm.scale[...], c.rms_norm_eps)
            if c.tie_word_embeddings:
                return mm("td,vd->tv", h, self.embed.embedding[...])
            return mm("td,dv->tv", h, self.lm_head.kernel[...])

    return Llama


_LLAMA = None


def model(config: LlamaConfig, params: dict):
    """The model (an ``nnx.Module``) holding ``params`` (flat by path, the layout above; NumPy or JAX
    arrays: ``random_params(config, seed)``, or a checkpoint's leaves restored)."""
    global _LLAMA
    if _LLAMA is None:
        _LLAMA = _module_class()
    missing = set(param_shapes(config)) - set(params)
    if missing:
        raise ValueError(f"the parameters lack {sorted(missing)}")
    return _LLAMA(config, params)


def params_of(module) -> dict:
    """A model's parameters, flat by path (the leaves a checkpoint of ``nnx.state(module)`` holds)."""
    from flax import nnx

    return flatten(nnx.to_pure_dict(nnx.state(module, nnx.Param)))


def logits(config: LlamaConfig, params: dict, tokens, precision: str = "highest",
           round_inputs: str | None = None) -> np.ndarray:
    """The model's logits on ``tokens`` (float32, every matmul at ``precision="highest"``: float32 on
    any backend), as NumPy. ``precision`` and ``round_inputs`` as the model's call takes them."""
    import jax.numpy as jnp

    module = model(config, {k: jnp.asarray(v, jnp.float32) for k, v in params.items()})
    return np.asarray(module(tokens, precision=precision, round_inputs=round_inputs))


# ---------------------------------------------------------------------------------------------
# A checkpoint of the model: which tree it is, and one leaf of it read alone.

def restore_leaf(ckpt_dir: str, saved_path: str):
    """The leaf at ``saved_path`` (a value of :func:`saved_paths`) alone, to the host."""
    import orbax.checkpoint as ocp

    item, args = nest({saved_path: 0}), nest({saved_path: ocp.RestoreArgs(restore_type=np.ndarray)})
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=item, restore_args=args, partial_restore=True))
    return flatten(restored)[saved_path]


TREES = ("nnx", "nnx_state", "linen")  # how a checkpoint of the model holds its leaves (see saved_paths)


def tree_paths(tree: str, paths) -> dict:
    """The model's leaf paths as a checkpoint of each kind holds them: ``"nnx"``, an NNX model's pure
    dict (``nnx.to_pure_dict``: the paths themselves); ``"nnx_state"``, an ``nnx.State`` saved as it is
    (each path ending in ``value``); ``"linen"``, a Linen model's variables (under ``params``)."""
    return {p: {"nnx": p, "nnx_state": f"{p}/value", "linen": f"params/{p}"}[tree] for p in paths}


def saved_paths(ckpt_dir: str) -> dict:
    """Where a checkpoint of the model holds each leaf: ``{model path: saved path}``, whichever of
    :data:`TREES` it was saved as (read from its metadata, nothing restored)."""
    import orbax.checkpoint as ocp

    saved = set(flatten(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree))
    for tree in TREES:
        where = tree_paths(tree, [p.removeprefix("params/").removesuffix("/value") for p in saved])
        if set(where.values()) == saved:
            return where
    raise ValueError(f"{ckpt_dir} holds no tree of the model's: its leaves are {sorted(saved)[:4]}...")
