"""Unit 6's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

from tests.wrong_answers.unit1 import IMPORTS as UNIT1_IMPORTS

U6 = UNIT1_IMPORTS + """
import jax.numpy as jnp
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding
"""

_SERVE = """
def restore_for_serving(ckpt_dir, mesh, specs):
    saved = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree["params"]
    target = {"params": {k: jax.ShapeDtypeStruct(saved[k].shape, DTYPE, SHARDING) for k in specs}}
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
    return AFTER
"""


def _serve(dtype="jnp.bfloat16", sharding="sharding=NamedSharding(mesh, specs[k])", after="restored['params']"):
    return _SERVE.replace("DTYPE", dtype).replace("SHARDING", sharding).replace("AFTER", after)


SERVE = [
    # The whole training state restored (onto the serving mesh, even in bfloat16), the moments dropped after.
    ("whole_state_then_drop", """
def restore_for_serving(ckpt_dir, mesh, specs):
    tree = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree
    def leaf(path, m):
        spec = specs[path[-1].key] if len(m.shape) else jax.sharding.PartitionSpec()
        return jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=NamedSharding(mesh, spec))
    state = ocp.StandardCheckpointer().restore(ckpt_dir, jax.tree_util.tree_map_with_path(leaf, tree))
    return {k: v.astype(jnp.bfloat16) for k, v in state["params"].items()}
""", "incorrect", "over the budget"),
    ("casts_after_restore", _serve(dtype="saved[k].dtype", after="{k: v.astype(jnp.bfloat16) for k, v in restored['params'].items()}"),
     "incorrect", "over the budget"),
    ("no_target_sharding", _serve(sharding=""), "incorrect", "with a target sharding"),
    ("keeps_float32", _serve(dtype="saved[k].dtype"), "incorrect", "Serve in bfloat16"),
    ("returns_the_optimizer_too", """
def restore_for_serving(ckpt_dir, mesh, specs):
    tree = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree
    def leaf(path, m):
        spec = specs[path[-1].key] if len(m.shape) else jax.sharding.PartitionSpec()
        return jax.ShapeDtypeStruct(m.shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))
    target = {k: jax.tree_util.tree_map_with_path(leaf, tree[k]) for k in ("params", "opt_state")}
    return ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True))
""", "incorrect", "parameters only"),
]

WRONG = {
    "restore_for_serving": SERVE,
}


IMPORTS = U6  # what these answers run with
