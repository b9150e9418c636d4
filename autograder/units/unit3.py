"""Unit 3, Restore re-sharding: its record and its problems. Public: what learners may see (statements,
signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit3.py``, keyed by function
name; references: ``solutions/unit3.py``."""

from __future__ import annotations

from autograder.declarations import CONVENTIONS, Example, Problem, Unit
from autograder.wall.kinds import CheckpointArg, MeshArg, SpecArg
from autograder.wall.problem_returns import RestoredTree
from autograder.wall.returns import Struct

UNIT = Unit(
    number=3,
    title='Restore re-sharding',
    intro=(
        'Restore a checkpoint saved on 8 devices onto 16, for real: what each target '
        'device must read, why a mismatched layout reads more than it needs, and which '
        'error a bad target raises. The lesson is `course/03_restore_resharding.ipynb`.'
    ),
    notebook='unit3_restore_resharding.ipynb',
    lesson='03_restore_resharding.ipynb',
    lesson_figures=3,
    # the problem notebook's import cell
    imports=(
        'import itertools\n'
        'import math\n'
        '\n'
        'import jax\n'
        'import numpy as np\n'
        'import orbax.checkpoint as ocp\n'
        'from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n'
        '\n'
        'from autograder.notebook import problem'
    ),
)

_CKPT = CheckpointArg((("w", (64, 32), "float32", ("x",)), ("b", (32,), "float32", ())), (("x", 8),), 0)
_CHUNKS = ("dict", "int", ("list", ("tuple", "int")))

PROBLEMS = (
    Problem(
        id="3.1",
        function="chunks_to_read",
        signature=("global_shape", "chunk_shape", "mesh_shape", "spec"),
        points=15,
        title="Which saved chunks each target device reads",
        statement=(
            "A checkpoint stores an array of `global_shape` in chunks of `chunk_shape` (which divides "
            "it). It is restored onto the mesh `mesh_shape` with `spec`. Return `{device_id: sorted "
            "list of chunk coordinates}` for every target device: the chunks its slice overlaps, each "
            "as a tuple of chunk-grid indices (chunk (i, j) covers rows i*c0:(i+1)*c0 and columns "
            "j*c1:(j+1)*c1). A chunk is stored (compressed) as one unit: to get any byte of it, a reader "
            "reads it whole." + CONVENTIONS
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
            Example(((16, 8), (4, 8), {"x": 2, "y": 2}, (("x", "y"),)), {0: [(0, 0)], 1: [(1, 0)], 2: [(2, 0)], 3: [(3, 0)]},
                    "('x', 'y') splits the rows in 4, x the most significant: device 1 (x 0, y 1) holds the second "
                    "quarter"),
        ),
        difficulty="medium",
        category="layout",
        tags=("restore", "reads"),
        why=(
            "A chunk is stored, compressed, as one unit, so a device reads every chunk its slice overlaps, whole:"
            " along a dimension, start // c to ceil(stop / c) - 1, and the chunks are the product of those "
            "ranges."
        ),
        next_question=(
            "If the checkpoint were stored uncompressed, could a reader fetch only the bytes its slice needs, and"
            " what would that cost on disk and on the write side?"
        ),
    ),
    Problem(
        id="3.2",
        function="read_amplification",
        signature=("global_shape", "chunk_shape", "mesh_shape", "spec", "devices_per_host"),
        points=20,
        title="Read amplification of a restore, host by host",
        statement=(
            "With the inputs of problem 3.1, the target devices run on hosts (processes) of "
            "`devices_per_host` devices each: device d is on host d // devices_per_host. Within a host, a "
            "restore reads each chunk its devices overlap once, whole (Orbax de-duplicates and shares reads "
            "within a process); each host reads for itself. Return, as a float, the bytes all hosts read "
            "divided by the bytes they need (each host needs every distinct slice its devices hold, once). "
            "This is the least a restore can read (the lesson measures Orbax at or above it); with "
            "devices_per_host=1 it is the most, with no sharing at all." + CONVENTIONS
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
            Example(((16, 8), (8, 8), {"x": 2, "y": 2}, (("x", "y"),), 2), 1.0,
                    "('x', 'y') splits the rows in 4, x the most significant: host 0's devices hold rows 0-7, one chunk"),
            Example(((64, 32), (8, 32), {"x": 4, "y": 4}, ("x",), 4), 1.0,
                    "rows split over x, replicated over y: a host's 4 devices hold one slice, needed once"),
        ),
        difficulty="hard",
        category="layout",
        tags=("restore", "reads"),
        why=(
            "Within one process Orbax restores identical slices once and TensorStore shares a chunk read in "
            "flight, but hosts share nothing: each reads every chunk its devices overlap at least once. Read cost"
            " grows with hosts, not devices; your ratio is that floor."
        ),
        next_question=(
            "A real restore reads 1.6x this floor on one host: what could explain the excess, and how would you "
            "measure where it comes from?"
        ),
    ),
    Problem(
        id="3.3",
        function="restore_resharded",
        signature=("ckpt_dir", "mesh", "specs"),
        points=15,
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
            "The checkpoint describes itself: `ocp.StandardCheckpointer().metadata(ckpt_dir)` reads each "
            "array's shape and dtype without reading a value. Find them on the public example.",
            "A restore places each array where its target says, and a target need hold no data: a "
            "`jax.ShapeDtypeStruct` is a shape, a dtype and, as a keyword, a sharding. You need one per "
            "name of `specs`, in a tree shaped like the saved one.",
            "Restoring without a target gives the saved 8-device layout: right values, wrong sharding. "
            "With a target, Orbax reads each device's shard straight into the layout you asked for.",
        ),
        examples=(
            Example((_CKPT, MeshArg((("x", 16),)), {"w": SpecArg((None, "x")), "b": SpecArg(())}), None,
                    "w re-sharded by columns over 16 devices, b replicated"),
            Example((CheckpointArg((("w", (64, 32), "bfloat16", ("x",)), ("step", (), "int32", ())), (("x", 8),), 1),
                     MeshArg((("x", 2), ("y", 8))), {"w": SpecArg(("y", "x")), "step": SpecArg(())}), None,
                    "a bfloat16 w and an int32 step, each restored with the dtype it was saved with, onto a 2 x 8 mesh"),
        ),
        timeout=120.0,
        difficulty="medium",
        category="orbax",
        tags=("restore", "orbax"),
        why=(
            "A target of `ShapeDtypeStruct`s with shardings tells Orbax where each array must live, and the "
            "checkpoint's metadata gives shapes and dtypes without a read. Orbax reads each target shard from the"
            " saved chunks, so the 8-device layout is never built."
        ),
        next_question=(
            "What does each host read if the target mesh spans two hosts, and how would you make that read "
            "cheaper?"
        ),
    ),
    Problem(
        id="3.4",
        function="restore_error",
        signature=("saved_shape", "target_shape", "mesh_shape", "spec"),
        points=15,
        title="Name the error a bad restore target raises",
        statement=(
            "An array of `saved_shape` was saved; it is restored with a target of `target_shape` sharded "
            "over `mesh_shape` with `spec`. Return the string naming what happens: 'ok'; 'unknown_axis' "
            "when the spec names an axis the mesh does not have (ValueError: Resource axis ... is not "
            "found in mesh); 'shape_mismatch' when the target shape differs from the saved one "
            "(ValueError: Requested shape ... is not compatible with the stored shape); 'indivisible' when "
            "the mesh does not divide a dimension (IndivisibleError). Each input has at most one problem, and "
            "the mesh has at most the course's 16 devices."
            + CONVENTIONS
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
            Example(((64, 32), (32, 64), {"x": 16}, ("x",)), "shape_mismatch", "the same size, another shape"),
            Example(((64, 32), (64, 32), {"x": 4, "y": 4}, (("x", "z"),)), "unknown_axis",
                    "an axis the mesh lacks, inside a tuple entry"),
            Example(((24, 32), (24, 32), {"x": 4, "y": 4}, (("x", "y"),)), "indivisible",
                    "4 divides 24, but ('x', 'y') splits it in 16"),
        ),
        difficulty="medium",
        category="debugging",
        tags=("restore", "errors"),
        why=(
            "Each refusal comes from its own layer: JAX will not build a sharding on an axis the mesh lacks, "
            "Orbax will not read a shape unlike the stored one, and JAX will not split a dimension the mesh does "
            "not divide. Only `strict=False` pads or truncates instead."
        ),
        next_question=(
            "Which restore mistakes raise nothing at all, and what check would you run before every production "
            "restore to catch them?"
        ),
    ),
)
