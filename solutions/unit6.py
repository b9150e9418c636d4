"""Reference solutions for Unit 6: from a training checkpoint to a serving model."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding


def restore_for_serving(ckpt_dir, mesh, specs):
    saved = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree["params"]
    target = {"params": {name: jax.ShapeDtypeStruct(saved[name].shape, jnp.bfloat16,
                                                    sharding=NamedSharding(mesh, spec))
                         for name, spec in specs.items()}}
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
    return restored["params"]
