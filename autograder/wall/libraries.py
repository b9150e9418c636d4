"""The libraries learner code may use, as both sides of the wall know them: one list, for a unit
that needs another library to extend (a sandbox change: review it as one).

- :data:`LIBRARIES`: top-level packages whose classes a message may name (an exception a worker
  says its code raised, a type it could not send), and whose imports a unit's notebook may hold;
- :data:`ON_DEMAND`: modules the zygote imports only when a worker's code imports them (or while
  a core is idle), after its preloaded ones.
"""

LIBRARIES = ("jax", "jaxlib", "flax", "orbax", "numpy", "tensorstore", "ml_dtypes", "safetensors", "optax", "grain")
# (orbax.checkpoint brings its v1 API: ``orbax.checkpoint.v1`` is an attribute of it, no module of that name.)
ON_DEMAND = ("flax.linen", "flax.nnx", "ckptlab.models", "tensorstore", "orbax.checkpoint", "safetensors",
             "safetensors.numpy", "optax", "ckptlab.training", "grain")
