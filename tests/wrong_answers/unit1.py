"""Unit 1's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

# What these answers run with (later units add to it).
IMPORTS = """
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx
from ckptlab.models import MLP
"""

DENSE = [
    ("forgets_bias", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = params["params"]["kernel"].size
    return jnp.array([total, total / num_shards])
""", "incorrect", "only the kernel was counted"),
    ("integer_division", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return jnp.array([total, total // num_shards], dtype=jnp.float32)
""", "incorrect", "float division"),
    ("batch_dim_as_input_dim", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[0] * features + features
    return np.array([total, total / num_shards])
""", "incorrect", "x.shape[0]"),
    ("no_float_cast", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return jnp.array([total, total / num_shards])
""", "error", "cast seed, num_shards and features with int()"),
    ("wrong_order", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)
    total = sum(l.size for l in jax.tree.leaves(params))
    return np.array([total / num_shards, total])
""", "incorrect", "swapped"),
    ("returns_list", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[-1] * features + features
    return [total, total / num_shards]
""", "incorrect", "must return a 1-D array of shape (2,)"),
    ("integer_dtype", """
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[-1] * features + features
    return np.array([total, total // num_shards])
""", "incorrect", "floating dtype"),
]

NNX_LINEAR = [
    ("forgets_bias", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = model.kernel.get_value().size
    return jnp.array([total, total / int(num_shards)])
""", "incorrect", "only the kernel was counted"),
    ("batch_dim_as_input_dim", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[0], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(num_shards)])
""", "incorrect", "x.shape[0]"),
    ("features_and_shards_swapped", """
def orbax_save_count(seed, x, num_shards, features):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(num_shards)])
""", "error", "wrong order"),
    ("features_and_shards_swapped_in_body", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(num_shards), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / int(features)])
""", "incorrect", "features and num_shards look swapped"),
    ("integer_division", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return np.array([total, total // int(num_shards)], dtype=np.float64)
""", "incorrect", "float division"),
    ("no_float_cast", """
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))
    total = sum(l.size for l in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return jnp.array([total, total / num_shards])
""", "error", "cast seed, features and num_shards with int()"),
]

PARAM_BYTES = [
    ("leaf_dtype", """
def param_bytes(params, dtype):
    return int(sum(l.nbytes for l in jax.tree.leaves(params)))
""", "incorrect", "current dtype, not the requested one"),
    ("bits", """
def param_bytes(params, dtype):
    return int(sum(l.size for l in jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize * 8)
""", "incorrect", "8 times too big"),
    ("counts_leaves", """
def param_bytes(params, dtype):
    return len(jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize
""", "incorrect", "counted leaves"),
    ("top_level_only", """
def param_bytes(params, dtype):
    return int(sum(v.size for v in params.values() if hasattr(v, "size")) * jnp.dtype(dtype).itemsize)
""", "incorrect", "every depth"),
    ("returns_float", """
def param_bytes(params, dtype):
    return sum(l.size for l in jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize / 1.0
""", "incorrect", "must return an int"),
]

NNX_TABLE = [
    ("includes_batch_stats", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): int(v.get_value().size) for p, v in nnx.to_flat_state(nnx.state(model))}
""", "incorrect", "batch statistics"),
    ("dot_separator", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {".".join(map(str, p)): int(v.get_value().size) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "not '.'"),
    ("shape_not_size", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): int(v.get_value().shape[-1]) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "number of elements"),
    ("linear_only", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    out = {}
    for i, layer in enumerate(model.layers):
        out[f"layers/{i}/kernel"] = layer.kernel.get_value().size
        out[f"layers/{i}/bias"] = layer.bias.get_value().size
    return out
""", "incorrect", "scale and bias are parameters"),
    ("shapes_as_values", """
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(seed))
    return {"/".join(map(str, p)): v.get_value().shape for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
""", "incorrect", "must be an int, but is a tuple"),
]

WRONG = {
    "dense_checkpoint_accounting": DENSE,
    "orbax_save_count": NNX_LINEAR,
    "param_bytes": PARAM_BYTES,
    "nnx_param_table": NNX_TABLE,
}
