"""Reference solutions for Unit 1: parameter accounting for Linen Dense and NNX Linear."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx

from ckptlab.models import MLP


def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), jnp.asarray(x))
    total = sum(leaf.size for leaf in jax.tree.leaves(params))
    return np.array([total, total / num_shards], dtype=np.float64)


def orbax_save_count(seed, x, features, num_shards):
    seed, features, num_shards = int(seed), int(features), int(num_shards)
    model = nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))
    total = sum(leaf.size for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return np.array([total, total / num_shards], dtype=np.float64)


def param_bytes(params, dtype):
    itemsize = jnp.dtype(dtype).itemsize
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(params)) * itemsize)


def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(int(seed)))
    state = nnx.state(model, nnx.Param)
    return {"/".join(str(k) for k in path): int(var.get_value().size) for path, var in nnx.to_flat_state(state)}
