"""Unit 1's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit1.py."""

from autograder.units.unit1 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

DENSE_CHECKPOINT_ACCOUNTING = [
    # A real (eager) Linen init, leaves walked with flax.traverse_util.flatten_dict and np.prod of
    # each shape; a jnp float32 array back (the reference traces with jax.eval_shape).
    ("eager_init_flatten_dict", '''
def dense_checkpoint_accounting(seed, x, num_shards, features):
    from flax import traverse_util

    variables = nn.Dense(int(features)).init(jax.random.PRNGKey(int(seed)), jnp.asarray(x))
    flat = traverse_util.flatten_dict(variables["params"])
    total = int(sum(np.prod(v.shape) for v in flat.values()))
    return jnp.array([total, total / int(num_shards)], dtype=jnp.float32)
'''),
    # Plain arithmetic from the layer's definition: kernel (in_dim, features) plus bias (features,);
    # no Flax at all.
    ("arithmetic_from_shapes", '''
def dense_checkpoint_accounting(seed, x, num_shards, features):
    in_dim = np.shape(x)[-1]
    features = int(features)
    total = in_dim * features + features
    return np.asarray([total, total / int(num_shards)], dtype=float)
'''),
    # jax.eval_shape over a closure that calls init with the real key and input (the reference
    # passes ShapeDtypeStructs), counted with jax.tree_util.tree_reduce.
    ("eval_shape_closure_tree_reduce", '''
def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    layer = nn.Dense(features)
    abstract = jax.eval_shape(lambda: layer.init(jax.random.PRNGKey(seed), jnp.asarray(x)))
    total = jax.tree_util.tree_reduce(lambda acc, leaf: acc + leaf.size, abstract, 0)
    per_shard = total / num_shards
    return np.array((total, per_shard))
'''),
    # init_with_output on a one-row batch (the batch size does not change the parameters), sizes
    # read from the params' shapes with math.prod; a float64 jnp array from a list.
    ("init_with_output_one_row", '''
import math


def dense_checkpoint_accounting(seed, x, num_shards, features):
    one_row = jnp.ones((1, np.shape(x)[-1]), jnp.float32)
    _, variables = nn.Dense(features=int(features)).init_with_output(jax.random.key(int(seed)), one_row)
    shapes = [p.shape for p in jax.tree.leaves(variables)]
    total = sum(math.prod(s) for s in shapes)
    return jnp.asarray([float(total), float(total) / float(int(num_shards))])
'''),
]

ORBAX_SAVE_COUNT = [
    # nnx.split into (graphdef, params, rest) and the params' leaves counted with np.size; the
    # reference builds an abstract model with nnx.eval_shape.
    ("nnx_split_params", '''
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    _, params, _ = nnx.split(model, nnx.Param, ...)
    total = sum(np.size(leaf) for leaf in jax.tree.leaves(params))
    return np.array([total, total / int(num_shards)], dtype=np.float32)
'''),
    # Walks the model's graph with nnx.iter_graph and keeps the nnx.Param variables.
    ("iter_graph_params", '''
def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(np.shape(x)[-1], int(features), rngs=nnx.Rngs(int(seed)))
    total = 0
    for _path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param):
            total += node.get_value().size
    return jnp.array([total, total / int(num_shards)], dtype=jnp.float32)
'''),
    # Asks Orbax: saves the parameter state into a temporary folder with the StandardCheckpointer
    # and counts the elements of the shapes in the checkpoint's metadata.
    ("orbax_saved_metadata", '''
import os
import tempfile

import orbax.checkpoint as ocp


def orbax_save_count(seed, x, features, num_shards):
    model = nnx.Linear(x.shape[-1], int(features), rngs=nnx.Rngs(int(seed)))
    state = nnx.state(model, nnx.Param)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ckpt")
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(path, state)
        checkpointer.wait_until_finished()
        metadata = checkpointer.metadata(path).item_metadata
        checkpointer.close()
    total = sum(int(np.prod(m.shape)) for m in jax.tree.leaves(metadata))
    return np.array([total, total / int(num_shards)])
'''),
    # Orbax's v1 API: the whole model's state saved with ocp.v1.save (the Param filter applied to the
    # metadata afterwards, by path), the element counts read back from ocp.v1.metadata.
    ("orbax_v1_save_and_metadata", '''
import math
import pathlib
import tempfile

import orbax.checkpoint.experimental.v1 as ocp_v1


def orbax_save_count(seed, x, features, num_shards):
    layer = nnx.Linear(int(np.shape(x)[-1]), int(features), rngs=nnx.Rngs(int(seed)))
    params = nnx.to_pure_dict(nnx.state(layer, nnx.Param))
    with tempfile.TemporaryDirectory() as scratch:
        where = pathlib.Path(scratch) / "linear"
        ocp_v1.save(where, params)
        saved = ocp_v1.metadata(where).metadata
    count = 0
    for _path, leaf in jax.tree_util.tree_leaves_with_path(saved):
        count += math.prod(leaf.shape)
    return np.asarray([count, count / int(num_shards)], dtype=np.float64)
'''),
    # No Flax: nnx.Linear holds a kernel (in, out) and a bias (out), so the count is arithmetic.
    ("arithmetic_kernel_and_bias", '''
def orbax_save_count(seed, x, features, num_shards):
    fan_in, fan_out = int(x.shape[-1]), int(features)
    kernel, bias = fan_in * fan_out, fan_out
    return np.array([kernel + bias, (kernel + bias) / int(num_shards)], dtype=np.float64)
'''),
]

PARAM_BYTES = [
    # A hand-written recursion over the nested dicts (no jax.tree), the itemsize from NumPy's own
    # dtype registry (ml_dtypes names such as 'bfloat16' are registered once JAX is imported).
    ("recursive_walk_numpy_dtype", '''
def param_bytes(params, dtype):
    def count(node):
        if isinstance(node, dict):
            return sum(count(child) for child in node.values())
        return int(np.prod(np.shape(node)))

    return count(params) * np.dtype(dtype).itemsize
'''),
    # Abstract values: every leaf described as a jax.ShapeDtypeStruct of its shape in the target
    # dtype (nothing allocated, and float64 kept even without x64), then size * itemsize added up.
    ("shape_dtype_structs", '''
def param_bytes(params, dtype):
    target = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), dtype), params)
    return sum(s.size * s.dtype.itemsize for s in jax.tree.leaves(target))
'''),
    # flax.traverse_util.flatten_dict for the leaves, ml_dtypes' finfo/iinfo bits for the bytes per element.
    ("flatten_dict_ml_dtypes_bits", '''
import ml_dtypes
from flax import traverse_util


def param_bytes(params, dtype):
    name = str(dtype)
    info = ml_dtypes.iinfo(name) if name.startswith(("int", "uint")) else ml_dtypes.finfo(name)
    elements = sum(np.asarray(v).size for v in traverse_util.flatten_dict(params).values())
    return elements * -(-info.bits // 8)  # whole bytes per element
'''),
    # A stack instead of recursion; the bytes per element from a one-element array of that dtype.
    ("explicit_stack", '''
def param_bytes(params, dtype):
    per_element = np.empty((1,), dtype=dtype).nbytes
    total, stack = 0, [params]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        else:
            total += np.asarray(node).size * per_element
    return int(total)
'''),
]

NNX_PARAM_TABLE = [
    # nnx.split then the pure dict of the params flattened by flax.traverse_util (the reference
    # walks nnx.to_flat_state of an abstract model).
    ("split_pure_dict_flatten", '''
from flax import traverse_util


def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(int(seed)))
    _, params, _ = nnx.split(model, nnx.Param, ...)
    flat = traverse_util.flatten_dict(params.to_pure_dict())
    return {"/".join(map(str, path)): int(np.size(value)) for path, value in flat.items()}
'''),
    # Walks the whole object graph with nnx.iter_graph and keeps nnx.Param nodes (BatchStat is
    # skipped by the isinstance test), reading sizes with v[...].
    ("iter_graph_isinstance", '''
def nnx_param_table(seed, layer_sizes):
    model = MLP(list(layer_sizes), rngs=nnx.Rngs(int(seed)))
    table = {}
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param):
            table["/".join(str(p) for p in path)] = int(node[...].size)
    return table
'''),
    # jax.tree_util key paths over the pure dict of the Param state; DictKey/SequenceKey turned
    # into names by hand.
    ("tree_flatten_with_path", '''
def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(int(seed)))
    pure = nnx.state(model, nnx.Param).to_pure_dict()
    leaves, _ = jax.tree_util.tree_flatten_with_path(pure)

    def name(key):
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    out = {}
    for keypath, leaf in leaves:
        out["/".join(name(k) for k in keypath)] = leaf.size
    return out
'''),
    # From the module tree itself: every Linear and BatchNorm reached by iter_modules, its
    # parameters listed by attribute; sizes from shapes (all variables filtered by nnx.Param).
    ("iter_modules_attributes", '''
import math


def nnx_param_table(seed, layer_sizes):
    model = MLP(layer_sizes, rngs=nnx.Rngs(int(seed)))
    table = {}
    for path, module in model.iter_modules():
        for attr, value in vars(module).items():
            if isinstance(value, nnx.Param):
                key = "/".join([*map(str, path), attr])
                table[key] = math.prod(value.get_value().shape)
    return table
'''),
]

RIGHT = {
    "dense_checkpoint_accounting": DENSE_CHECKPOINT_ACCOUNTING,
    "orbax_save_count": ORBAX_SAVE_COUNT,
    "param_bytes": PARAM_BYTES,
    "nnx_param_table": NNX_PARAM_TABLE,
}
