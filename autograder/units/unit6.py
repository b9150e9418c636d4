"""Unit 6, From a training checkpoint to a serving model: its record and its problems. Public:
what learners may see (statements, signatures, hints, public examples). Hidden cases:
``autograder/hidden/unit6.py``, keyed by function name; references: ``solutions/unit6.py``."""

from __future__ import annotations

from autograder.declarations import Example, Problem, Unit
from autograder.wall.codec import MeshArg, SpecArg
from autograder.wall.files import TrainingCheckpointArg
from autograder.wall.returns import ServedTree

UNIT = Unit(
    number=6,
    title="From a training checkpoint to a serving model",
    intro=(
        "Serving starts from a training checkpoint that holds far more than the model needs (the "
        "optimizer's moments, float32 weights) on a mesh unlike the serving one. Restore only the "
        "parameters, in bfloat16, straight onto the serving mesh, and keep the host's memory under a "
        "budget: the grader measures your function's peak resident memory from outside, as the kernel "
        "counts it. The lesson is `course/06_restore_for_serving.ipynb`."
    ),
    notebook="unit6_restore_for_serving.ipynb",
    lesson="06_restore_for_serving.ipynb",
    lesson_figures=2,
    # the problem notebook's import cell
    imports=(
        "import json\n"
        "import math\n"
        "import os\n"
        "\n"
        "import jax\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n"
        "import orbax.checkpoint as ocp\n"
        "from jax.sharding import NamedSharding, PartitionSpec\n"
        "\n"
        "from autograder.notebook import problem"
    ),
)

# A small training checkpoint saved FSDP-style on 8 devices (the hidden ones weigh 24-64 MiB).
_TRAINED = TrainingCheckpointArg((("embed", (512, 64), "float32", ("x",)), ("mlp", (64, 256), "float32", (None, "x")),
                                  ("norm", (64,), "float32", ())), (("x", 8),), 6)

PROBLEMS = (
    Problem(
        id="6.1",
        function="restore_for_serving",
        signature=("ckpt_dir", "mesh", "specs"),
        points=20,
        title="Restore the parameters for serving, within a memory budget",
        statement=(
            "`ckpt_dir` holds a training checkpoint saved with `ocp.StandardCheckpointer` on 8 devices: "
            "`{'params': {...}, 'opt_state': {'mu': {...}, 'nu': {...}}, 'step': ...}`, every array "
            "float32. `mesh` is a serving `jax.sharding.Mesh` over the 16 devices and `specs` maps each "
            "parameter's name to its serving `PartitionSpec`. Return the parameters only, as a dict "
            "`{name: jax.Array}`, in bfloat16, each sharded as `NamedSharding(mesh, specs[name])`. The "
            "grader measures your function's peak host memory from outside (the kernel's peak resident "
            "set of the process running it, above what it held before your code loaded): it must stay "
            "under twice the bytes of the saved float32 parameters plus 16 MiB, less than the whole "
            "training state weighs. Restore the parameters alone, cast on restore, onto the target."
        ),
        returns=ServedTree(),
        hints=(
            "`ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree['params']` gives each "
            "parameter's shape without reading an array.",
            "A target of `jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))` "
            "casts on restore: the float32 copy is never whole in memory. `.astype` after a float32 "
            "restore holds both.",
            "`ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(item={'params': "
            "target}, restore_args=ocp.checkpoint_utils.construct_restore_args({'params': target}), "
            "partial_restore=True))` reads only the parameters; restoring the whole state first reads "
            "the moments too (three times the bytes).",
        ),
        examples=(
            Example((_TRAINED, MeshArg((("data", 2), ("model", 8))),
                     {"embed": SpecArg((None, "model")), "mlp": SpecArg((None, "model")), "norm": SpecArg(())}),
                    None, "FSDP over 8 devices to tensor-parallel over 2 x 8, norm replicated"),
        ),
        measure_memory=True,
        timeout=60.0,
        tags=("serving", "restore", "memory"),
    ),
)
