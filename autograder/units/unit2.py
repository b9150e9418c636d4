"""Unit 2, Sharded save layouts: its record and its problems. Public: what learners may see (statements,
signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit2.py``, keyed by function
name; references: ``solutions/unit2.py``."""

from __future__ import annotations

from autograder.declarations import CONVENTIONS, Example, Problem, Unit
from autograder.wall.returns import Raises, Struct

UNIT = Unit(
    number=2,
    title='Sharded save layouts',
    intro=(
        'Predict what a sharded save puts on disk: which device holds which slice, the '
        'chunk shape and chunk files Orbax writes, and how many bytes each device and '
        'each host writes, replicas included. The lesson is '
        '`course/02_sharded_save_layouts.ipynb`.'
    ),
    notebook='unit2_sharded_save_layouts.ipynb',
    lesson='02_sharded_save_layouts.ipynb',
    lesson_figures=5,
    # the problem notebook's import cell
    imports=(
        'import itertools\n'
        'import math\n'
        '\n'
        'import jax\n'
        'import numpy as np\n'
        'from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n'
        '\n'
        'from autograder.notebook import problem'
    ),
)

_DOMAINS = ("dict", "int", ("tuple", ("pair", "int")))

PROBLEMS = (
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
            "that dimension by its index, e.g. 'dimension 1 of size 10 is not divisible by 4' (JAX raises "
            "IndivisibleError, a ValueError, there too)." + CONVENTIONS
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
        difficulty="easy",
        category="layout",
        tags=("sharding",),
        why=(
            "A `NamedSharding` splits dimension i into as many equal shards as the product of the sizes of the "
            "mesh axes `spec[i]` names. JAX raises rather than pad, so every device's shard has the same shape "
            "and an uneven dimension is padded by hand."
        ),
        next_question=(
            "Your vocabulary of 50,257 rows must be split over 8 devices: how would you pad it, where would you "
            "record the real size, and what must every restore then do?"
        ),
    ),
    Problem(
        id="2.2",
        function="device_index_domains",
        signature=("global_shape", "mesh_shape", "spec"),
        points=15,
        title="Which slice each device holds",
        statement=(
            "Return a dict `{device_id: index_domain}` for every device of the mesh, where an "
            "index domain is a tuple of `(start, stop)` per dimension (stop exclusive): what "
            "`NamedSharding(mesh, spec).devices_indices_map(global_shape)` gives, with slices "
            "turned into (start, stop) pairs. Replicated devices share a domain." + CONVENTIONS
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
            Example(((8, 4), {"x": 2, "y": 2}, (("x", "y"),)),
                    {0: ((0, 2), (0, 4)), 1: ((2, 4), (0, 4)), 2: ((4, 6), (0, 4)), 3: ((6, 8), (0, 4))},
                    "('x', 'y') splits dimension 0 in 4, x the most significant; the spec, shorter than the rank, "
                    "leaves dimension 1 whole"),
        ),
        difficulty="medium",
        category="layout",
        tags=("sharding",),
        why=(
            "A device's mesh coordinates come from its row-major position, and a dimension split over ('x', 'y') "
            "numbers its shards with x most significant. Devices that differ only along axes the spec does not "
            "use hold the same domain: they are replicas."
        ),
        next_question=(
            "On a real pod the mesh's device order follows the physical topology, not device ids: how would you "
            "find which host holds which slice, and why does that matter to a save?"
        ),
    ),
    Problem(
        id="2.3",
        function="orbax_chunk_shape",
        signature=("global_shape", "mesh_shape", "spec", "replica_parallel=True"),
        points=15,
        title="The chunk shape Orbax writes",
        statement=(
            "Return, as a tuple, the chunk shape Orbax writes for this array. A chunk is normally "
            "one shard. Replicated shards are written once in total: with `replica_parallel=True` "
            "(Orbax's default unless the JAX_PLATFORMS environment variable names gpu or cuda, so a GPU "
            "job that leaves it unset has it on) the R replicas of a shard split it along its first "
            "dimension divisible by R, each writing one slice, so the chunk is that slice; when no "
            "dimension is divisible, or `replica_parallel=False`, one replica writes the whole "
            "shard." + CONVENTIONS
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
        difficulty="medium",
        category="layout",
        tags=("orbax", "replicas"),
        why=(
            "Orbax writes each shard once in total: with replica-parallel saving, the R replicas split it along "
            "the first dimension R divides and each writes its slice, so the chunk is that slice; otherwise "
            "replica 0 writes the whole shard. Only who writes changes."
        ),
        next_question=(
            "With replica-parallel on, a replicated bias is saved as eight tiny chunks: what does that cost on "
            "object storage, and when would you turn it off?"
        ),
    ),
    Problem(
        id="2.4",
        function="chunk_files",
        signature=("global_shape", "chunk_shape", "zarr_format=2"),
        points=15,
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
            Example(((12,), (1,), 2), ["0", "1", "10", "11", "2", "3", "4", "5", "6", "7", "8", "9"],
                    "12 chunks: sorted as strings, '10' and '11' come before '2'"),
            Example(((10, 4), (4, 4), 3), ["c/0/0", "c/1/0", "c/2/0"], "10 rows in chunks of 4: 3 chunks, the last one partial"),
        ),
        difficulty="medium",
        category="layout",
        tags=("orbax", "zarr"),
        why=(
            "With `use_ocdbt=False` every chunk is its own file, named by its grid position ('0.1' in zarr 2, "
            "'c/0/1' in zarr 3), and the grid has ceil(global / chunk) chunks per dimension."
        ),
        next_question=(
            "A large model saved one file per chunk writes hundreds of thousands of small files: what does that "
            "cost on GCS or a parallel file system, and how does OCDBT, Orbax's default, avoid it?"
        ),
    ),
    Problem(
        id="2.5",
        function="bytes_written_per_device",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "replica_parallel=True"),
        points=20,
        title="Bytes each device writes",
        statement=(
            "Return `{device_id: bytes}` for every device of the mesh (0 for devices that write "
            "nothing): the uncompressed bytes each device writes when Orbax saves the array. "
            "Replicated data is written once in total. With `replica_parallel=True`, each of the "
            "R replicas writes its slice of the shard (see problem 2.3); otherwise, or when no "
            "dimension is divisible by R, only replica 0 writes. Replica 0 of a shard is the first device "
            "holding it in the mesh's own device order (JAX's `replica_id`), not the lowest id: on the "
            "course's meshes, built in id order, the two agree (Lesson 2 shows a mesh where they do not)."
            + CONVENTIONS
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
            Example(((12,), 4, {"x": 8}, (), True), {0: 48, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0},
                    "12 elements on 8 replicas: no dimension divisible by 8, so replica 0 writes the whole shard"),
        ),
        difficulty="hard",
        category="accounting",
        tags=("orbax", "replicas", "bytes"),
        why=(
            "A shard's replicas are the devices with its index domain, and together they write it once: "
            "replica-parallel splits its bytes R ways, otherwise replica 0, the first in the mesh's device order,"
            " writes it all. The devices' bytes always add up to the array's."
        ),
        next_question=(
            "If replica 0 of every shard sits on one host, what happens to save time, and what would you change "
            "to spread the writes?"
        ),
    ),
    Problem(
        id="2.6",
        function="bytes_written_per_host",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "devices_per_host",
                   "replica_parallel=True"),
        points=15,
        title="Bytes each host writes",
        statement=(
            "Devices are grouped into hosts of `devices_per_host` consecutive device ids (host h "
            "has devices h * devices_per_host to (h + 1) * devices_per_host - 1). Return "
            "`{host_id: bytes}` for every host: the uncompressed bytes its devices write when "
            "Orbax saves the array, as in problem 2.5." + CONVENTIONS
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
            Example(((64, 32), 4, {"x": 2, "y": 4}, ("x",), 4, False), {0: 4096, 1: 4096},
                    "replica 0 of each half of the rows is device 0 or device 4: host 0 holds devices 0-3, host 1 "
                    "devices 4-7"),
        ),
        difficulty="medium",
        category="accounting",
        tags=("orbax", "hosts", "bytes"),
        why=(
            "A host writes what its devices write, and a save takes about the slowest host's bytes over that "
            "host's bandwidth: summing problem 2.5's bytes by host gives the very figure that sets the save time."
        ),
        next_question=(
            "A 64-host job takes 10 minutes to checkpoint while the storage could take far more: how would you "
            "find out whether one host is the bottleneck, and what would you change first?"
        ),
    ),
)
