"""Unit 1, Parameter accounting: its record and its problems. Public: what learners may see (statements,
signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit1.py``, keyed by function
name; references: ``solutions/unit1.py``."""

from __future__ import annotations

import numpy as np

from autograder.declarations import Example, Problem, Unit
from autograder.wall.returns import ArrayOf, Struct

UNIT = Unit(
    number=1,
    title='Parameter accounting',
    intro=(
        'Count what a checkpoint holds: the parameters of Linen `nn.Dense` and NNX '
        '`nnx.Linear`, how many land on each shard, and how many bytes they take in a '
        'given dtype. The lesson is `course/01_parameter_accounting.ipynb`.'
    ),
    notebook='unit1_parameter_accounting.ipynb',
    lesson='01_parameter_accounting.ipynb',
    lesson_figures=4,
    # the problem notebook's import cell
    imports=(
        'import jax\n'
        'import jax.numpy as jnp\n'
        'import numpy as np\n'
        'from flax import linen as nn\n'
        'from flax import nnx\n'
        '\n'
        'from ckptlab.models import MLP\n'
        'from autograder.notebook import problem'
    ),
)

PROBLEMS = (
    Problem(
        id="1.1",
        function="dense_checkpoint_accounting",
        signature=("seed", "x", "num_shards", "features"),
        points=10,
        title="Parameters of a Linen Dense layer, in total and per shard",
        statement=(
            "Initialise `nn.Dense(features)` with `jax.random.PRNGKey(seed)` on `x` of shape "
            "(N, in_dim). Return a 1-D array of shape (2,): `[total_params, per_shard]` with "
            "`per_shard = total_params / num_shards` (float division): the even-split planning figure, "
            "the average per shard. No device holds a fraction of a parameter: what each one really holds "
            "depends on how each array is split (Lesson 1). `seed`, `num_shards` and `features` arrive as "
            "floats: cast them to int."
        ),
        returns=ArrayOf((2,), "f"),
        hints=(
            "A Linen module holds no weights: its `init` (given a random key and an example input) "
            "returns them as nested dicts. Print their shapes on the public example: which arrays does "
            "one Dense layer have?",
            "Every array counts, at any depth of the tree (`jax.tree.leaves` flattens one), and an "
            "array's `.size` is its number of elements. Check your total by hand on the example: "
            "in_dim x features, plus what the bias adds.",
            "The arguments arrive as floats, which neither a random key nor a layer width accepts. "
            "The per-shard figure is an average, so a float: true division (`/`), not floor division (`//`); both "
            "numbers go into one 1-D array.",
        ),
        examples=(
            Example((0.0, np.ones((2, 4), np.float32), 4.0, 3.0), np.array([15.0, 3.75]),
                    "kernel (4, 3) + bias (3,) = 15 parameters over 4 shards"),
            Example((1.0, np.ones((5, 10), np.float32), 2.0, 8.0), np.array([88.0, 44.0])),
        ),
        difficulty="easy",
        category="accounting",
        tags=("linen", "counting"),
        why=(
            "A Linen module holds no weights: `init` returns them as a tree, a kernel (in_dim, features) and a "
            "bias (features,), and the count is the sum of its leaves' sizes. The input matters only through its "
            "last axis. The per-shard figure is an average: JAX splits each array into equal whole shards only."
        ),
        next_question=(
            "A 7B-parameter model is sharded over 256 devices: why is total / 256 not what the fullest device "
            "holds, and how would you compute what it really holds?"
        ),
    ),
    Problem(
        id="1.2",
        function="orbax_save_count",
        signature=("seed", "x", "features", "num_shards"),
        points=10,
        title="Parameters an NNX Linear layer saves, in total and per shard",
        statement=(
            "Build `nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))` and count the "
            "parameters in its state (`nnx.state(model, nnx.Param)`): that is what a checkpoint "
            "of it holds. Return a 1-D array of shape (2,): `[total_params, per_shard]` with "
            "`per_shard = total_params / num_shards`, the average per shard (as in problem 1.1, a planning "
            "figure, not what any one device holds). Note the argument order: features comes "
            "before num_shards here. Numbers arrive as floats: cast them to int."
        ),
        returns=ArrayOf((2,), "f"),
        hints=(
            "The input dimension is the last axis of x, whatever the batch size.",
            "An NNX model holds its variables itself; `nnx.state(model, nnx.Param)` is the tree of "
            "its parameters, what a checkpoint of it holds. Print it on the public example: which "
            "arrays, of which shapes?",
            "From there it is problem 1.1's count: elements summed over the tree's arrays, and the "
            "average per shard, a float.",
        ),
        examples=(
            Example((0.0, np.ones((2, 4), np.float32), 3.0, 4.0), np.array([15.0, 3.75])),
            Example((7.0, np.ones((3, 16), np.float32), 16.0, 8.0), np.array([272.0, 34.0])),
        ),
        difficulty="easy",
        category="accounting",
        tags=("nnx", "counting"),
        why=(
            "An NNX module keeps its variables on itself, and `nnx.state(model, nnx.Param)` is exactly the tree a"
            " checkpoint of its parameters holds: the same kernel and bias as Linen's Dense, reached through the "
            "object rather than returned by `init`."
        ),
        next_question=(
            "The same layer is trained with AdamW in float32: how many bytes does its training checkpoint weigh, "
            "and which part of it does a server need?"
        ),
    ),
    Problem(
        id="1.3",
        function="param_bytes",
        signature=("params", "dtype"),
        points=10,
        title="Bytes of a parameter tree stored in a given dtype",
        statement=(
            "`params` is a pytree (nested dicts) of arrays; `dtype` is a dtype name such as "
            "'float32', 'bfloat16', 'float16', 'int8', 'float8_e4m3fn'. Return, as an int, the "
            "number of bytes the tree takes when every leaf is stored in `dtype` (whatever dtype "
            "the leaves have now)."
        ),
        returns=Struct("int"),
        hints=(
            "Bytes = number of elements x bytes per element, summed over all leaves, at every "
            "depth of the tree.",
            "Bytes per element are the *target* dtype's, not the leaves' own: a dtype object knows "
            "its `itemsize`, and `jnp.dtype` makes one from names NumPy alone does not know, such as "
            "'bfloat16' (2 bytes) and 'float8_e4m3fn' (1).",
            "A count of bytes is a whole number: return a Python int, not a NumPy or JAX scalar.",
        ),
        examples=(
            Example(({"params": {"bias": np.zeros(3, np.float32), "kernel": np.zeros((4, 3), np.float32)}}, "bfloat16"), 30),
            Example(({"a": np.zeros((2, 5), np.float32), "b": {"c": np.zeros(6, np.float32)}}, "float32"), 64),
        ),
        difficulty="easy",
        category="accounting",
        tags=("dtypes", "bytes"),
        why=(
            "A checkpoint's bytes are elements x the stored dtype's itemsize. The shapes fix the element count, "
            "so a cast changes only the itemsize; `jnp.dtype` knows names NumPy alone does not, such as bfloat16 "
            "and float8_e4m3fn."
        ),
        next_question=(
            "A 70B model trained with float32 master weights is served in bfloat16: how much disk and host memory"
            " does each copy take, and where could a float32 copy sneak back into the serving path?"
        ),
    ),
    Problem(
        id="1.4",
        function="nnx_param_table",
        signature=("seed", "layer_sizes"),
        points=15,
        title="Per-leaf parameter table of an NNX model",
        statement=(
            "Build `ckptlab.models.MLP(layer_sizes, rngs=nnx.Rngs(seed))` (Linear layers with "
            "BatchNorm between them) and return a dict mapping each parameter's path, joined "
            "with '/' (e.g. 'layers/0/kernel'), to its number of elements. Only `nnx.Param` "
            "variables are parameters: batch statistics are state, not parameters."
        ),
        returns=Struct(("dict", "str", "int")),
        hints=(
            "`nnx.state(model, nnx.Param)` keeps only parameters. Print it on the public example and "
            "see how each one's path is nested: attribute names, and list indices for the layers.",
            "`nnx.to_flat_state` turns a state into (path, variable) pairs, a path being a tuple of "
            "keys and ints such as ('layers', 0, 'kernel'): the table's key is that path as text, "
            "joined with '/'. A variable holds its array (`get_value()`).",
            "BatchNorm's `mean` and `var` are `nnx.BatchStat`, not `nnx.Param`: they must not "
            "appear. Its `scale` and `bias` are parameters and must.",
        ),
        examples=(
            Example((0, [4, 8, 3]), {"layers/0/kernel": 32, "layers/0/bias": 8, "layers/1/kernel": 24,
                                       "layers/1/bias": 3, "norms/0/scale": 8, "norms/0/bias": 8}),
        ),
        difficulty="medium",
        category="accounting",
        tags=("nnx", "pytrees"),
        why=(
            "NNX types its variables: filtering the state by `nnx.Param` keeps kernels, biases and BatchNorm's "
            "scale and bias, and leaves out its running mean and var (`nnx.BatchStat`). The flat state's paths "
            "are the names a checkpoint gives its arrays."
        ),
        next_question=(
            "An eval job restores only the `nnx.Param` leaves of a training checkpoint into a model with "
            "BatchNorm: what does BatchNorm normalise with, and how would you catch it before serving?"
        ),
    ),
)
