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
    # The lesson's own helper called: the problem's answer, not the learner's.
    ("calls_the_lessons_helper", """
from ckptlab import serving


def restore_for_serving(ckpt_dir, mesh, specs):
    return serving.restore_params(ckpt_dir, mesh, specs)
""", "incorrect", "the course's own ckptlab.serving"),
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

_CONVERT = """
import json

import numpy as np
from orbax.checkpoint import v1 as ocp_v1


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    tree = {}
    with open(st_path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        for name, new in rename.items():
            begin, end = header[name]["data_offsets"]
            f.seek(8 + n + begin)
            host = np.frombuffer(f.read(end - begin), np.float32).reshape(header[name]["shape"])
            array = jax.device_put(host, SHARDING)
            del host
            ADD
    FINISH
"""


def _convert(sharding="NamedSharding(mesh, specs[new])", add="ocp_v1.partial.save(out_dir, {NAME: array})",
             finish="ocp_v1.partial.finalize(out_dir)", name="new"):
    return (_CONVERT.replace("SHARDING", sharding).replace("ADD", add).replace("FINISH", finish)
            .replace("NAME", name))


CONVERT = [
    ("reads_the_whole_file", """
from orbax.checkpoint import v1 as ocp_v1
from safetensors.numpy import load_file


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    tensors = load_file(st_path)   # the whole file in memory at once
    for name, new in rename.items():
        ocp_v1.partial.save(out_dir, {new: jax.device_put(tensors[name], NamedSharding(mesh, specs[new]))})
    ocp_v1.partial.finalize(out_dir)
""", "incorrect", "over the budget"),
    # The whole file's bytes read at once (views of them, no copies): 64 MiB held until the end.
    ("reads_all_the_bytes_at_once", """
import json

import numpy as np
from orbax.checkpoint import v1 as ocp_v1


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    with open(st_path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    for name, new in rename.items():
        begin, end = header[name]["data_offsets"]
        host = np.frombuffer(data, np.float32, (end - begin) // 4, 8 + n + begin).reshape(header[name]["shape"])
        ocp_v1.partial.save(out_dir, {new: jax.device_put(host, NamedSharding(mesh, specs[new]))})
    ocp_v1.partial.finalize(out_dir)
""", "incorrect", "over the budget"),
    # safetensors' lazy reader, but every tensor copied out of it first: the whole model in memory.
    ("safe_open_keeps_every_tensor", """
from orbax.checkpoint import v1 as ocp_v1
from safetensors import safe_open


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    with safe_open(st_path, framework="np") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    for name, new in rename.items():
        ocp_v1.partial.save(out_dir, {new: jax.device_put(tensors[name], NamedSharding(mesh, specs[new]))})
    ocp_v1.partial.finalize(out_dir)
""", "incorrect", "over the budget"),
    ("one_save_of_the_whole_tree", _convert(add="tree[new] = array", finish="ocp_v1.save(out_dir, tree)"),
     "incorrect", "over the budget"),
    ("keeps_the_hubs_names", _convert(name="name"), "incorrect", "the file's own names"),
    ("calls_the_lessons_helper", """
import ckptlab.serving


def convert_safetensors(st_path, out_dir, rename, mesh, specs):
    ckptlab.serving.convert_safetensors(st_path, out_dir, rename, mesh, specs)
""", "incorrect", "the course's own ckptlab.serving"),
    ("no_sharding", _convert(sharding="jax.devices()[0]"), "incorrect", "not saved sharded as the specs say"),
    ("never_finalizes", _convert(finish="pass"), "incorrect", "wrote no checkpoint"),
]

WRONG = {
    "restore_for_serving": SERVE,
    "convert_safetensors": CONVERT,
}


IMPORTS = U6  # what these answers run with
