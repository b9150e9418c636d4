"""Reference solutions for Unit 1: parameter accounting for Linen Dense and NNX Linear.

Counting needs shapes, not values: ``jax.eval_shape`` and ``nnx.eval_shape`` trace the layer's
initialisation without compiling or running it, so a count costs milliseconds whatever the shapes
(an eager ``init`` compiles for every new shape). The tests check these counts against eager
Flax initialisations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn, nnx

from ckptlab.models import MLP


def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # the shape of jax.random.PRNGKey(seed): the seed does not matter
    params = jax.eval_shape(nn.Dense(features).init, key, jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype))
    total = sum(leaf.size for leaf in jax.tree.leaves(params))
    return np.array([total, total / num_shards], dtype=np.float64)


def orbax_save_count(seed, x, features, num_shards):
    seed, features, num_shards = int(seed), int(features), int(num_shards)
    model = nnx.eval_shape(lambda: nnx.Linear(np.shape(x)[-1], features, rngs=nnx.Rngs(seed)))
    total = sum(leaf.size for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return np.array([total, total / num_shards], dtype=np.float64)


def param_bytes(params, dtype):
    itemsize = jnp.dtype(dtype).itemsize
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(params)) * itemsize)


def nnx_param_table(seed, layer_sizes):
    model = nnx.eval_shape(lambda: MLP(layer_sizes, rngs=nnx.Rngs(int(seed))))
    state = nnx.state(model, nnx.Param)
    return {"/".join(str(k) for k in path): int(var.get_value().size) for path, var in nnx.to_flat_state(state)}
