"""The one declaration of every problem: lessons, notebook checks, the grader and exports read it.

Each entry is public: what learners may see (statement, signature, hints, public examples). The
hidden part of an entry (case generators and failure messages) lives in the module named by
``hidden`` and is loaded only by the grader; the learner bundle does not contain it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autograder.codec import MeshArg, SpecArg
from autograder.files import CheckpointArg, SafetensorsArg
from autograder.limits import DEFAULT_TIMEOUT
from autograder.reads import READ_SLACK
from autograder.returns import ArrayOf, Raises, RestoredTree, SafetensorsShard, Struct

# A Markdown code span: hints and messages name code this way.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Example:
    """A public example: arguments and the expected return value."""

    args: tuple
    expected: Any
    note: str = ""


@dataclass(frozen=True)
class Problem:
    id: str  # "1.1": unit 1, problem 1
    function: str
    signature: tuple[str, ...]  # as the learner writes it, defaults included ("zarr_format=2")
    points: int
    title: str
    statement: str
    returns: Any
    hints: tuple[str, ...]
    examples: tuple[Example, ...]
    hidden: str  # "module:attribute" of the hidden cases, loaded only by the grader
    notebook: str  # where the learner writes it, relative to problems/
    timeout: float = DEFAULT_TIMEOUT  # seconds for all of this problem's cases, worker start-up included
    raises: tuple[str, ...] = ()  # exceptions that are a correct outcome on some inputs
    count_reads: bool = False  # the grader counts the bytes the function reads from files
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def unit(self) -> int:
        return int(self.id.split(".")[0])

    @property
    def params(self) -> tuple[str, ...]:
        """Parameter names, without the defaults the signature may show."""
        return tuple(s.split("=")[0] for s in self.signature)

    @property
    def call(self) -> str:
        return f"{self.function}({', '.join(self.signature)})"

    def hint_for(self, message: str) -> str:
        """The hint to show beside a grader's message: the first hint that names code the message
        names (a `//` in both, say), else the first hint."""
        spans = set(_CODE_SPAN.findall(message))
        return next((h for h in self.hints if spans & set(_CODE_SPAN.findall(h))), self.hints[0])


_U1 = "unit1_parameter_accounting.ipynb"

UNITS: dict[int, tuple[str, str]] = {
    1: ("Parameter accounting",
        "Count what a checkpoint holds: the parameters of Linen `nn.Dense` and NNX `nnx.Linear`, how "
        "many land on each shard, and how many bytes they take in a given dtype. The lesson is "
        "`course/01_parameter_accounting.ipynb`."),
    2: ("Sharded save layouts",
        "Predict what a sharded save puts on disk: which device holds which slice, the chunk "
        "shape and chunk files Orbax writes, and how many bytes each device and each host "
        "writes, replicas included. The lesson is `course/02_sharded_save_layouts.ipynb`."),
    3: ("Restore re-sharding",
        "Restore a checkpoint saved on 8 devices onto 16, for real: what each target device must "
        "read, why a mismatched layout reads more than it needs, and which error a bad target "
        "raises. The lesson is `course/03_restore_resharding.ipynb`."),
    4: ("Reading only a shard's bytes, and pre-sharding",
        "Load a safetensors file the way Orbax does: parse its header, turn a shard's index domain "
        "into byte runs, coalesce them into reads, and read exactly those bytes (the grader counts "
        "them). Then choose the pre-sharded chunk shape that makes a target mesh load fastest. The "
        "lesson is `course/04_shard_reads_and_presharding.ipynb`."),
}

PROBLEMS: tuple[Problem, ...] = (
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
            "`params = nn.Dense(features).init(jax.random.PRNGKey(seed), x)` gives a nested dict; "
            "`jax.tree.leaves(params)` lists its arrays.",
            "Every leaf counts: the kernel is (in_dim, features) and there is a bias of (features,). "
            "Sum `leaf.size` over the leaves.",
            "Cast first: `seed, num_shards, features = int(seed), int(num_shards), int(features)`; "
            "then `per_shard = total / num_shards` with `/`, not `//`, and return "
            "`jnp.array([total, per_shard], dtype=jnp.float32)`.",
        ),
        examples=(
            Example((0.0, np.ones((2, 4), np.float32), 4.0, 3.0), np.array([15.0, 3.75]),
                    "kernel (4, 3) + bias (3,) = 15 parameters over 4 shards"),
            Example((1.0, np.ones((5, 10), np.float32), 2.0, 8.0), np.array([88.0, 44.0])),
        ),
        hidden="autograder.hidden.unit1:DENSE",
        notebook=_U1,
        tags=("linen", "counting"),
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
            "The input dimension is the last axis of x: `x.shape[-1]`, whatever the batch size.",
            "`state = nnx.state(model, nnx.Param)`; `jax.tree.leaves(state)` gives the kernel "
            "and the bias arrays.",
            "`total = sum(leaf.size for leaf in jax.tree.leaves(state))`, then "
            "`jnp.array([total, total / num_shards], dtype=jnp.float32)`.",
        ),
        examples=(
            Example((0.0, np.ones((2, 4), np.float32), 3.0, 4.0), np.array([15.0, 3.75])),
            Example((7.0, np.ones((3, 16), np.float32), 16.0, 8.0), np.array([272.0, 34.0])),
        ),
        hidden="autograder.hidden.unit1:NNX_LINEAR",
        notebook=_U1,
        tags=("nnx", "counting"),
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
            "`jnp.dtype(dtype).itemsize` gives bytes per element of the *target* dtype, e.g. 2 for "
            "'bfloat16' and 1 for 'float8_e4m3fn'. Do not use the leaves' own dtype.",
            "`sum(leaf.size for leaf in jax.tree.leaves(params)) * jnp.dtype(dtype).itemsize`, "
            "returned as a Python int.",
        ),
        examples=(
            Example(({"params": {"bias": np.zeros(3, np.float32), "kernel": np.zeros((4, 3), np.float32)}}, "bfloat16"), 30),
            Example(({"a": np.zeros((2, 5), np.float32), "b": {"c": np.zeros(6, np.float32)}}, "float32"), 64),
        ),
        hidden="autograder.hidden.unit1:PARAM_BYTES",
        notebook=_U1,
        tags=("dtypes", "bytes"),
    ),
    Problem(
        id="1.4",
        function="nnx_param_table",
        signature=("seed", "layer_sizes"),
        points=10,
        title="Per-leaf parameter table of an NNX model",
        statement=(
            "Build `ckptlab.models.MLP(layer_sizes, rngs=nnx.Rngs(seed))` (Linear layers with "
            "BatchNorm between them) and return a dict mapping each parameter's path, joined "
            "with '/' (e.g. 'layers/0/kernel'), to its number of elements. Only `nnx.Param` "
            "variables are parameters: batch statistics are state, not parameters."
        ),
        returns=Struct(("dict", "str", "int")),
        hints=(
            "`nnx.state(model, nnx.Param)` keeps only parameters; `nnx.to_flat_state(state)` "
            "yields `(path, variable)` pairs where path is a tuple like ('layers', 0, 'kernel').",
            "Join the path with `'/'.join(str(p) for p in path)`; the count is the variable's "
            "size, e.g. `variable.get_value().size`.",
            "BatchNorm's `mean` and `var` are `nnx.BatchStat`, not `nnx.Param`: they must not "
            "appear. Its `scale` and `bias` are parameters and must.",
        ),
        examples=(
            Example((0, [4, 8, 3]), {"layers/0/kernel": 32, "layers/0/bias": 8, "layers/1/kernel": 24,
                                       "layers/1/bias": 3, "norms/0/scale": 8, "norms/0/bias": 8}),
        ),
        hidden="autograder.hidden.unit1:NNX_TABLE",
        notebook=_U1,
        tags=("nnx", "pytrees"),
    ),
)

_U2 = "unit2_sharded_save_layouts.ipynb"
_CONVENTIONS = (
    " Conventions: `mesh_shape` is an ordered dict `{axis_name: size}`; devices are numbered "
    "row-major over the mesh (`np.arange(n).reshape(sizes)`); `spec` is a tuple whose entries are "
    "None, an axis name, or a tuple of axis names (the first one most significant), and may be "
    "shorter than the array's rank (missing entries are None)."
)
_DOMAINS = ("dict", "int", ("tuple", ("pair", "int")))

PROBLEMS += (
    Problem(
        id="2.1",
        function="shard_shape",
        signature=("global_shape", "mesh_shape", "spec"),
        points=10,
        title="The shape of each shard",
        statement=(
            "Return, as a tuple of ints, the shape of the shard every device holds when an array "
            "of `global_shape` is sharded over the mesh with `spec`. When a dimension is not "
            "divisible by the number of shards along it, raise `ValueError` with a message naming "
            "that dimension, e.g. 'dimension 1 of size 10 is not divisible by 4' (JAX raises "
            "IndivisibleError, a ValueError, there too)." + _CONVENTIONS
        ),
        returns=Struct(("tuple", "int")),
        raises=("ValueError",),
        hints=(
            "Dimension i is split into the product of the sizes of the mesh axes in spec[i] "
            "(1 for None). Pad spec with None up to len(global_shape).",
            "An entry can be a tuple of axis names: ('x', 'y') splits the dimension "
            "mesh_shape['x'] * mesh_shape['y'] ways.",
            "Check `size % parts` before dividing; `//` on an indivisible size silently gives a "
            "wrong shape, and JAX never pads for you.",
        ),
        examples=(
            Example(((64, 32), {"x": 4, "y": 2}, ("x", None)), (16, 32)),
            Example(((64, 32), {"x": 4, "y": 2}, ("x", "y")), (16, 16)),
            Example(((16, 8), {"x": 2, "y": 4}, (("x", "y"),)), (2, 8), "x and y together split dimension 0 in 8"),
            Example(((10, 4), {"x": 4}, ("x",)), Raises("ValueError", dim=0)),
        ),
        hidden="autograder.hidden.unit2:SHARD_SHAPE",
        notebook=_U2,
        tags=("sharding",),
    ),
    Problem(
        id="2.2",
        function="device_index_domains",
        signature=("global_shape", "mesh_shape", "spec"),
        points=10,
        title="Which slice each device holds",
        statement=(
            "Return a dict `{device_id: index_domain}` for every device of the mesh, where an "
            "index domain is a tuple of `(start, stop)` per dimension (stop exclusive): what "
            "`NamedSharding(mesh, spec).devices_indices_map(global_shape)` gives, with slices "
            "turned into (start, stop) pairs. Replicated devices share a domain." + _CONVENTIONS
        ),
        returns=Struct(_DOMAINS),
        hints=(
            "Give each device its mesh coordinates: `np.unravel_index(device_id, sizes)` (row-major).",
            "For a spec entry ('x', 'y'), the shard position along that dimension is "
            "`coord_x * mesh_shape['y'] + coord_y`: the first axis is the most significant.",
            "The domain along a dimension is `(pos * n, (pos + 1) * n)` with n the shard size along "
            "it; an unsharded dimension is `(0, size)`.",
        ),
        examples=(
            Example(((8, 4), {"x": 2, "y": 2}, ("x", None)),
                    {0: ((0, 4), (0, 4)), 1: ((0, 4), (0, 4)), 2: ((4, 8), (0, 4)), 3: ((4, 8), (0, 4))}),
            Example(((8,), {"x": 4}, ("x",)), {0: ((0, 2),), 1: ((2, 4),), 2: ((4, 6),), 3: ((6, 8),)}),
        ),
        hidden="autograder.hidden.unit2:DOMAINS",
        notebook=_U2,
        tags=("sharding",),
    ),
    Problem(
        id="2.3",
        function="orbax_chunk_shape",
        signature=("global_shape", "mesh_shape", "spec", "replica_parallel=True"),
        points=10,
        title="The chunk shape Orbax writes",
        statement=(
            "Return, as a tuple, the chunk shape Orbax writes for this array. A chunk is normally "
            "one shard. Replicated shards are written once in total: with `replica_parallel=True` "
            "(Orbax's default unless the JAX_PLATFORMS environment variable names gpu or cuda, so a GPU "
            "job that leaves it unset has it on) the R replicas of a shard split it along its first "
            "dimension divisible by R, each writing one slice, so the chunk is that slice; when no "
            "dimension is divisible, or `replica_parallel=False`, one replica writes the whole "
            "shard." + _CONVENTIONS
        ),
        returns=Struct(("tuple", "int")),
        hints=(
            "Start from the shard shape. R, the number of replicas of each shard, is the product of "
            "the sizes of the mesh axes that the spec does not use.",
            "With replica_parallel and R > 1, find the first i with shard[i] % R == 0 and divide "
            "that dimension by R. Only that one.",
            "A fully replicated (64, 32) on 8 devices gives chunks (8, 32); a replicated (12,) on "
            "8 devices gives (12,), since 12 is not divisible by 8.",
        ),
        examples=(
            Example(((64, 32), {"x": 8}, (), True), (8, 32)),
            Example(((64, 32), {"x": 8}, (), False), (64, 32)),
            Example(((64, 32), {"x": 4, "y": 2}, ("x", None), True), (8, 32)),
            Example(((12,), {"x": 8}, (None,), True), (12,)),
        ),
        hidden="autograder.hidden.unit2:CHUNK_SHAPE",
        notebook=_U2,
        tags=("orbax", "replicas"),
    ),
    Problem(
        id="2.4",
        function="chunk_files",
        signature=("global_shape", "chunk_shape", "zarr_format=2"),
        points=10,
        title="The chunk files inside a leaf's folder",
        statement=(
            "Return the names of the chunk files Orbax writes inside an array's folder (the layout "
            "with `use_ocdbt=False`), sorted as strings, like `sorted(os.listdir(...))`. The chunk "
            "grid has ceil(global / chunk) chunks along each dimension. zarr 2 names a chunk by its "
            "grid indices joined with '.', e.g. '0.1' ('0' for a scalar); zarr 3 writes "
            "'c/0/1' ('c' for a scalar)."
        ),
        returns=Struct(("list", "str")),
        hints=(
            "`itertools.product(*(range(ceil(g / c)) for g, c in zip(global_shape, chunk_shape)))` "
            "walks the chunk grid.",
            "zarr 2: '.'.join(map(str, idx)); zarr 3: '/'.join(['c', *map(str, idx)]).",
            "Sort the names as strings: '10.0' comes before '2.0'. A scalar has one chunk.",
        ),
        examples=(
            Example(((64, 32), (16, 32), 2), ["0.0", "1.0", "2.0", "3.0"]),
            Example(((64, 32), (32, 16), 3), ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]),
            Example(((), (), 2), ["0"]),
        ),
        hidden="autograder.hidden.unit2:CHUNK_FILES",
        notebook=_U2,
        tags=("orbax", "zarr"),
    ),
    Problem(
        id="2.5",
        function="bytes_written_per_device",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "replica_parallel=True"),
        points=10,
        title="Bytes each device writes",
        statement=(
            "Return `{device_id: bytes}` for every device of the mesh (0 for devices that write "
            "nothing): the uncompressed bytes each device writes when Orbax saves the array. "
            "Replicated data is written once in total. With `replica_parallel=True`, each of the "
            "R replicas writes its slice of the shard (see problem 2.3); otherwise, or when no "
            "dimension is divisible by R, only replica 0 writes. Replica 0 of a shard is the first device "
            "holding it in the mesh's own device order (JAX's `replica_id`), not the lowest id: on the "
            "course's meshes, built in id order, the two agree (Lesson 2 shows a mesh where they do not)."
            + _CONVENTIONS
        ),
        returns=Struct(("dict", "int", "int")),
        hints=(
            "Bytes of one shard = prod(shard shape) * itemsize. The total over all devices must "
            "equal the array's bytes, however it is replicated.",
            "Group devices by their index domain (problem 2.2): the devices of a group are the "
            "replicas of one shard, numbered in device order.",
            "With replica_parallel and a divisible dimension, every device writes shard_bytes // R; "
            "without, the first device of each group writes shard_bytes and the others 0.",
        ),
        examples=(
            Example(((64, 32), 4, {"x": 4, "y": 2}, ("x", None), True), {i: 1024 for i in range(8)}),
            Example(((64, 32), 4, {"x": 4, "y": 2}, ("x", None), False),
                    {0: 2048, 1: 0, 2: 2048, 3: 0, 4: 2048, 5: 0, 6: 2048, 7: 0}),
        ),
        hidden="autograder.hidden.unit2:BYTES_PER_DEVICE",
        notebook=_U2,
        tags=("orbax", "replicas", "bytes"),
    ),
    Problem(
        id="2.6",
        function="bytes_written_per_host",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "devices_per_host",
                   "replica_parallel=True"),
        points=10,
        title="Bytes each host writes",
        statement=(
            "Devices are grouped into hosts of `devices_per_host` consecutive device ids (host h "
            "has devices h * devices_per_host to (h + 1) * devices_per_host - 1). Return "
            "`{host_id: bytes}` for every host: the uncompressed bytes its devices write when "
            "Orbax saves the array, as in problem 2.5." + _CONVENTIONS
        ),
        returns=Struct(("dict", "int", "int")),
        hints=(
            "Compute the bytes per device first (problem 2.5), then add them up per host.",
            "Host of a device: `device_id // devices_per_host`, not `device_id % ...`.",
            "Every host appears, even one that writes nothing.",
        ),
        examples=(
            Example(((64, 32), 4, {"x": 8}, (), 4, True), {0: 4096, 1: 4096}),
            Example(((64, 32), 4, {"x": 8}, (), 4, False), {0: 8192, 1: 0}),
        ),
        hidden="autograder.hidden.unit2:BYTES_PER_HOST",
        notebook=_U2,
        tags=("orbax", "hosts", "bytes"),
    ),
)

_U3 = "unit3_restore_resharding.ipynb"
_CKPT = CheckpointArg((("w", (64, 32), "float32", ("x",)), ("b", (32,), "float32", ())), (("x", 8),), 0)
_CHUNKS = ("dict", "int", ("list", ("tuple", "int")))

PROBLEMS += (
    Problem(
        id="3.1",
        function="chunks_to_read",
        signature=("global_shape", "chunk_shape", "mesh_shape", "spec"),
        points=10,
        title="Which saved chunks each target device reads",
        statement=(
            "A checkpoint stores an array of `global_shape` in chunks of `chunk_shape` (which divides "
            "it). It is restored onto the mesh `mesh_shape` with `spec`. Return `{device_id: sorted "
            "list of chunk coordinates}` for every target device: the chunks its slice overlaps, each "
            "as a tuple of chunk-grid indices (chunk (i, j) covers rows i*c0:(i+1)*c0 and columns "
            "j*c1:(j+1)*c1). A chunk is stored (compressed) as one unit: to get any byte of it, a reader "
            "reads it whole." + _CONVENTIONS
        ),
        returns=Struct(_CHUNKS),
        hints=(
            "Start from each device's index domain (Unit 2): `NamedSharding(mesh, P(*spec))."
            "devices_indices_map(global_shape)` on a real mesh gives it, or compute it yourself.",
            "Along a dimension, a slice start:stop overlaps chunks `start // c` up to `ceil(stop / c) - 1`; "
            "the stop is exclusive, so a slice ending exactly on a boundary does not touch the next chunk.",
            "The chunks a device reads are the product of its per-dimension ranges: "
            "`sorted(itertools.product(*ranges))`. A scalar has the single chunk ().",
        ),
        examples=(
            Example(((64, 32), (8, 32), {"x": 16}, ("x",)), {d: [(d // 2, 0)] for d in range(16)},
                    "same axis: each saved chunk is split between two devices"),
            Example(((64, 32), (8, 32), {"x": 16}, (None, "x")), {d: [(i, 0) for i in range(8)] for d in range(16)},
                    "another axis: every device touches every chunk"),
        ),
        hidden="autograder.hidden.unit3:CHUNKS_TO_READ",
        notebook=_U3,
        tags=("restore", "reads"),
    ),
    Problem(
        id="3.2",
        function="read_amplification",
        signature=("global_shape", "chunk_shape", "mesh_shape", "spec", "devices_per_host"),
        points=10,
        title="Read amplification of a restore, host by host",
        statement=(
            "With the inputs of problem 3.1, the target devices run on hosts (processes) of "
            "`devices_per_host` devices each: device d is on host d // devices_per_host. Within a host, a "
            "restore reads each chunk its devices overlap once, whole (Orbax de-duplicates and shares reads "
            "within a process); each host reads for itself. Return, as a float, the bytes all hosts read "
            "divided by the bytes they need (each host needs every distinct slice its devices hold, once). "
            "This is the least a restore can read (the lesson measures Orbax at or above it); with "
            "devices_per_host=1 it is the most, with no sharing at all." + _CONVENTIONS
        ),
        returns=Struct("float"),
        hints=(
            "The itemsize cancels out: count elements. Group the devices of 3.1's answer by host, "
            "`device // devices_per_host`.",
            "Read = for each host, the number of distinct chunks its devices overlap (a set), summed over "
            "hosts, x elements per chunk.",
            "Needed = for each host, the elements of each distinct slice its devices hold (two devices holding "
            "the same slice count once), summed over hosts. Return read / needed.",
        ),
        examples=(
            Example(((64, 32), (8, 32), {"x": 16}, ("x",), 16), 1.0, "one host: each chunk is read once"),
            Example(((64, 32), (8, 32), {"x": 16}, (None, "x"), 4), 4.0,
                    "another axis, 4 hosts: each host needs a quarter of the columns but reads every chunk"),
            Example(((64, 32), (8, 32), {"x": 16}, (None, "x"), 1), 16.0,
                    "one device per host: the bound with no sharing, every device reads every chunk"),
        ),
        hidden="autograder.hidden.unit3:AMPLIFICATION",
        notebook=_U3,
        tags=("restore", "reads"),
    ),
    Problem(
        id="3.3",
        function="restore_resharded",
        signature=("ckpt_dir", "mesh", "specs"),
        points=20,
        title="Restore a checkpoint onto another mesh",
        statement=(
            "`ckpt_dir` holds a checkpoint saved with `ocp.StandardCheckpointer` on 8 devices; `mesh` is a "
            "`jax.sharding.Mesh` over all 16; `specs` is a dict of `PartitionSpec`s with the same keys as "
            "the saved tree. Read the checkpoint's own metadata for shapes and dtypes, build the target "
            "from `jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))` and restore "
            "with Orbax. Return the restored dict of jax.Arrays, each sharded as asked. The grader saves a "
            "fresh checkpoint for you and checks values, shardings and the shard on every device."
        ),
        returns=RestoredTree(),
        hints=(
            "`ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree` maps each name to an "
            "ArrayMetadata with `.shape` and `.dtype`.",
            "Build the target with a dict comprehension over `specs`: "
            "`jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec))`.",
            "`ocp.StandardCheckpointer().restore(ckpt_dir, target)` returns arrays placed as the target "
            "says. Restoring without a target gives the saved 8-device layout: right values, wrong sharding.",
        ),
        examples=(
            Example((_CKPT, MeshArg((("x", 16),)), {"w": SpecArg((None, "x")), "b": SpecArg(())}), None,
                    "w re-sharded by columns over 16 devices, b replicated"),
        ),
        hidden="autograder.hidden.unit3:RESTORE",
        notebook=_U3,
        timeout=120.0,
        tags=("restore", "orbax"),
    ),
    Problem(
        id="3.4",
        function="restore_error",
        signature=("saved_shape", "target_shape", "mesh_shape", "spec"),
        points=10,
        title="Name the error a bad restore target raises",
        statement=(
            "An array of `saved_shape` was saved; it is restored with a target of `target_shape` sharded "
            "over `mesh_shape` with `spec`. Return the string naming what happens: 'ok'; 'unknown_axis' "
            "when the spec names an axis the mesh does not have (ValueError: Resource axis ... is not "
            "found in mesh); 'shape_mismatch' when the target shape differs from the saved one "
            "(ValueError: Requested shape ... is not compatible with the stored shape); 'indivisible' when "
            "the mesh does not divide a dimension (IndivisibleError). Each input has at most one problem."
            + _CONVENTIONS
        ),
        returns=Struct("str"),
        hints=(
            "Check the axis names first: every name in the spec must be a key of mesh_shape.",
            "Then compare the shapes as tuples.",
            "Then, as in problem 2.1, each dimension must be divisible by the product of its axes' sizes.",
        ),
        examples=(
            Example(((64, 32), (64, 32), {"x": 16}, ("x",)), "ok"),
            Example(((64, 32), (64, 16), {"x": 16}, ("x",)), "shape_mismatch"),
            Example(((60, 32), (60, 32), {"x": 16}, ("x",)), "indivisible"),
            Example(((64, 32), (64, 32), {"x": 16}, ("y",)), "unknown_axis"),
        ),
        hidden="autograder.hidden.unit3:ERRORS",
        notebook=_U3,
        tags=("restore", "errors"),
    ),
)

_U4 = "unit4_shard_reads_and_presharding.ipynb"
_EXAMPLE_FILE = SafetensorsArg((("embed", (8, 4), "float32"), ("norm.scale", (4,), "float16")), 0, (("format", "np"),))
_ENTRY = ("record", (("dtype", "str"), ("shape", ("list", "int")), ("data_offsets", ("list", "int"))))
_RUNS = ("list", ("fixed", ("int", "int")))
_MOE = {"ep16": (1, 2, 64, 16), "fsdp16": (16, 2, 4, 16)}

PROBLEMS += (
    Problem(
        id="4.1",
        function="parse_safetensors_header",
        signature=("path",),
        points=10,
        title="Parse a safetensors header",
        statement=(
            "A safetensors file starts with 8 bytes: N, the header's length, a little-endian unsigned "
            "integer. Then come N bytes of UTF-8 JSON mapping each tensor's name to `{\"dtype\", \"shape\", "
            "\"data_offsets\": [begin, end]}` (offsets relative to the data section), plus an optional "
            "`\"__metadata__\"` entry. The data section starts at byte 8 + N. Return `(header, data_start)`: "
            "the header as a dict, without `\"__metadata__\"`, entries exactly as in the JSON (lists stay "
            "lists), and `data_start` as an int. Raise ValueError for a damaged file, with a message that "
            "says what is wrong: it must contain 'truncated' when the file ends too early (fewer than 8 "
            "bytes, fewer than N after them, or a tensor's data running past the end), and 'corrupt' when "
            "the header is not UTF-8 JSON, not an object, or has an entry without a str dtype, a list shape "
            "and two [begin, end] offsets."
        ),
        returns=Struct(("fixed", (("dict", "str", _ENTRY), "int"))),
        hints=(
            "`n = int.from_bytes(f.read(8), 'little')`; compare n with `os.path.getsize(path) - 8` BEFORE "
            "reading n bytes: a damaged length can claim a terabyte.",
            "`json.loads(raw.decode('utf-8'))` raises UnicodeDecodeError or json.JSONDecodeError on garbage: "
            "catch both and raise `ValueError('corrupt header: ...')`. Then check it is a dict and pop "
            "`'__metadata__'`.",
            "For each entry check the dtype, shape and offsets, and that `8 + n + end <= file size` "
            "(else 'truncated'). data_start is `8 + n`: the header is padded with spaces, so it is not "
            "just the JSON's length.",
        ),
        examples=(
            Example((_EXAMPLE_FILE,),
                    ({"embed": {"dtype": "F32", "shape": [8, 4], "data_offsets": [0, 128]},
                      "norm.scale": {"dtype": "F16", "shape": [4], "data_offsets": [128, 136]}}, 168),
                    "written with safetensors.numpy.save_file: a 160-byte header, padded to a multiple of 8"),
            Example((SafetensorsArg(_EXAMPLE_FILE.tensors, 0, (), "header_cut"),), Raises("ValueError", word="truncated"),
                    "the file was cut in the middle of its header"),
        ),
        hidden="autograder.hidden.unit4:HEADER",
        notebook=_U4,
        raises=("ValueError",),
        tags=("safetensors", "format"),
    ),
    Problem(
        id="4.2",
        function="index_domain_to_byte_runs",
        signature=("bounds", "global_shape", "itemsize", "base"),
        points=10,
        title="From a shard's index domain to byte runs",
        statement=(
            "A tensor of `global_shape` is stored row-major (C order) from byte `base` of a file, "
            "`itemsize` bytes per element. A shard is the index domain `bounds`: a (start, stop) pair per "
            "dimension, stop exclusive (empty for a scalar). Return the bytes the shard occupies as a list "
            "of (offset, length) tuples, sorted by offset, with runs that touch merged: trailing dimensions "
            "taken in full continue the run, so a shard of the leading dimension is one run and a shard of "
            "an inner dimension is one run per row. A scalar is `[(base, itemsize)]`. This is Orbax's own "
            "`index_domain_to_byte_runs`."
        ),
        returns=Struct(_RUNS),
        hints=(
            "Row-major byte strides: the last dimension's is itemsize, and each one before is the next "
            "stride times the next dimension's size.",
            "Walk from the last dimension backwards while the bounds cover the whole dimension, (0, n): "
            "those bytes are contiguous. The first dimension k that is not whole ends each run: "
            "length = (stop_k - start_k) * stride_k.",
            "One run starts at every index of the dimensions before k: "
            "`base + start_k * stride_k + sum(i_d * stride_d)` over `itertools.product` of their ranges. "
            "If every dimension is whole, the tensor is one run.",
        ),
        examples=(
            Example((((0, 4), (0, 4)), (4, 8), 4, 0), [(0, 16), (32, 16), (64, 16), (96, 16)],
                    "the left half of a (4, 8) float32 tensor: one run per row"),
            Example((((2, 4), (0, 8)), (4, 8), 4, 100), [(164, 64)], "two whole rows: one run"),
            Example(((), (), 2, 10), [(10, 2)], "a scalar"),
        ),
        hidden="autograder.hidden.unit4:RUNS",
        notebook=_U4,
        tags=("safetensors", "reads"),
    ),
    Problem(
        id="4.3",
        function="coalesce_runs",
        signature=("runs", "max_gap"),
        points=10,
        title="Coalesce byte runs into fewer reads",
        statement=(
            "Each read has a fixed cost, so nearby runs are better read together, gap included. Given "
            "`runs`, a list of (offset, length) tuples in any order, return the reads as a list of "
            "(offset, length) tuples sorted by offset: covering every run, merging a run into the current "
            "read when it overlaps it or the gap between them is at most `max_gap` bytes. This is what "
            "Orbax's `_partition_runs` does with `min_coalesce_gap=max_gap` and no over-read ratio."
        ),
        returns=Struct(_RUNS),
        hints=(
            "Sort by offset first, then sweep once, keeping the current read as (start, end).",
            "The gap to the next run is `offset - end`: zero when they touch, negative when they overlap. "
            "Merge when `gap <= max_gap`.",
            "A merged read ends at `max(end, offset + length)`: a run inside the current read must not "
            "shorten it. Return (start, end - start).",
        ),
        examples=(
            Example(([(0, 16), (32, 16), (64, 16)], 16), [(0, 80)], "gaps of exactly 16 bytes merge"),
            Example(([(0, 16), (32, 16), (64, 16)], 15), [(0, 16), (32, 16), (64, 16)]),
            Example(([(100, 10), (0, 10), (5, 10)], 0), [(0, 15), (100, 10)], "unsorted and overlapping"),
        ),
        hidden="autograder.hidden.unit4:COALESCE",
        notebook=_U4,
        tags=("reads",),
    ),
    Problem(
        id="4.4",
        function="read_shard",
        signature=("path", "name", "bounds"),
        points=20,
        title="Read one shard, and only its bytes",
        statement=(
            "Return the shard `bounds` of tensor `name` in the safetensors file `path` as a NumPy array with "
            "the tensor's dtype (F64, F32, F16, I64, I32, I16, I8, U8 or BOOL) and shape (stop - start per "
            "dimension). Read only the bytes the shard needs: the header, then each byte run with "
            "`f.seek(offset)` and `f.read(length)` (use problems 4.1 and 4.2). The grader counts every byte "
            "your process reads while the function runs (the kernel's count) and allows the 8 + N header "
            f"bytes, the shard's bytes and {READ_SLACK // 1024} KiB more: reading the whole tensor fails. "
            "Memory maps (np.memmap, safetensors.safe_open) are switched off while grading, and so are new "
            "threads and processes (your function runs in one thread); a buffered file fetches a whole buffer "
            "(the file's st_blksize, often 4 KiB) per small read, so open the file with `open(path, 'rb', buffering=0)`."
        ),
        returns=SafetensorsShard(),
        hints=(
            "`header, data_start = parse_safetensors_header(path)`; the tensor starts at "
            "`data_start + header[name]['data_offsets'][0]`.",
            "Map the dtype string to NumPy, e.g. {'F32': np.float32, 'F16': np.float16, 'I8': np.int8, "
            "'U8': np.uint8, 'BOOL': np.bool_, ...}, then "
            "`runs = index_domain_to_byte_runs(bounds, shape, dtype.itemsize, base)`.",
            "With `open(path, 'rb', buffering=0)`, `f.seek(offset); f.read(length)` for each run, join the "
            "pieces with `b''.join(...)`, then `np.frombuffer(data, dtype).reshape(shape)`.",
        ),
        examples=(
            Example((SafetensorsArg((("extra", (3, 5), "int8"), ("w", (256, 256), "float32")), 0), "w",
                     ((0, 256), (64, 96))), None,
                    "columns 64:96 of a (256, 256) float32 tensor: 256 strided runs of 128 bytes"),
            Example((SafetensorsArg((("step", (), "int64"), ("mask", (6, 4), "bool")), 1), "step", ()), None,
                    "a scalar"),
            Example((SafetensorsArg((("extra", (3, 5), "int8"), ("w", (256, 256), "float32")), 0), "extra",
                     ((1, 3), (0, 5))), None,
                    "rows 1:3 of an int8 tensor stored after a 256 KiB one: it starts at data_start + "
                    "data_offsets[0], not where the data section starts"),
        ),
        hidden="autograder.hidden.unit4:READ",
        notebook=_U4,
        count_reads=True,
        tags=("safetensors", "reads", "io"),
    ),
    Problem(
        id="4.5",
        function="best_presharding",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "candidates", "devices_per_host"),
        points=10,
        title="Which pre-sharded chunk shape loads fastest",
        statement=(
            "A weight of `global_shape` (`itemsize` bytes per element) will be loaded onto the mesh "
            "`mesh_shape` with `spec`, by hosts of `devices_per_host` devices each (device d on host "
            "d // devices_per_host). `candidates` maps a name to the chunk shape of a checkpoint pre-sharded "
            "that way (each divides the global shape). As in problem 3.2, a host reads each chunk its "
            "devices overlap once, whole. Return `(best, reads)`: `reads` maps each candidate's name to the "
            "bytes all hosts read together (an int), and `best` is the name with the fewest; on a tie, the "
            "name that sorts first." + _CONVENTIONS
        ),
        returns=Struct(("fixed", ("str", ("dict", "str", "int")))),
        hints=(
            "This is problems 3.1 and 3.2 counted in bytes: for each device's index domain, the chunks it "
            "overlaps along a dimension are `start // c` to `ceil(stop / c) - 1`.",
            "Collect each host's chunks in a set (`device // devices_per_host`); the bytes read are the sizes "
            "of those sets, summed over hosts, times `math.prod(chunk) * itemsize`.",
            "`best = min(sorted(reads), key=reads.get)` picks the fewest bytes and breaks ties by name.",
        ),
        examples=(
            Example(((16, 2, 64, 16), 2, {"x": 16}, (None, None, "x"), _MOE, 4),
                    ("fsdp16", {"ep16": 262144, "fsdp16": 65536}),
                    "4 hosts: on an FSDP target each host reads every expert-sharded chunk, 4x what a "
                    "pre-sharded checkpoint costs it"),
        ),
        hidden="autograder.hidden.unit4:PRESHARD",
        notebook=_U4,
        tags=("presharding", "reads"),
    ),
)

_BY_KEY = {p.id: p for p in PROBLEMS} | {p.function: p for p in PROBLEMS}


def get(key: str) -> Problem:
    """Look a problem up by id ("1.1") or function name."""
    try:
        return _BY_KEY[key]
    except KeyError:
        names = ", ".join(f"{p.id} {p.function}" for p in PROBLEMS)
        raise KeyError(f"no problem {key!r}; known problems: {names}") from None


def units() -> list[int]:
    return sorted({p.unit for p in PROBLEMS})
