"""Unit 6, From a training checkpoint to a serving model: its record and its problems. Public:
what learners may see (statements, signatures, hints, public examples). Hidden cases:
``autograder/hidden/unit6.py``, keyed by function name; references: ``solutions/unit6.py``."""

from __future__ import annotations

from autograder.declarations import Example, Problem, Unit
from autograder.wall.kinds import MeshArg, OutputFolder, SafetensorsArg, SpecArg, TrainingCheckpointArg
from autograder.wall.memory import CONVERSION_FACTOR, CONVERSION_SLACK, SERVING_FACTOR, SERVING_SLACK
from autograder.wall.problem_returns import ServedTree, WrittenTree

UNIT = Unit(
    number=6,
    title="From a training checkpoint to a serving model",
    intro=(
        "Serving starts from a training checkpoint that holds far more than the model needs (the "
        "optimizer's moments, float32 weights) on a mesh unlike the serving one. Restore only the "
        "parameters, in bfloat16, straight onto the serving mesh, and turn a safetensors file from a model "
        "hub into a sharded Orbax checkpoint one tensor at a time, each under a host-memory budget: the "
        "grader measures your function's memory from outside, as the kernel counts it. The "
        "lesson is `course/06_restore_for_serving.ipynb`."
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
        "from orbax.checkpoint import v1 as ocp_v1\n"
        "\n"
        "from autograder.notebook import problem"
    ),
)

# A small safetensors file with a hub's names, and ours for them.
_HUB = SafetensorsArg((("model.embed_tokens.weight", (256, 64), "float32"),
                       ("model.layers.0.mlp.up_proj.weight", (64, 256), "float32"),
                       ("model.norm.weight", (64,), "float32")), 7)
_RENAME = {"model.embed_tokens.weight": "embed", "model.layers.0.mlp.up_proj.weight": "w_in", "model.norm.weight": "norm"}

# A small training checkpoint saved FSDP-style on 8 devices (the hidden ones weigh 24-42 MiB).
_TRAINED = TrainingCheckpointArg((("embed", (512, 64), "float32", ("x",)), ("mlp", (64, 256), "float32", (None, "x")),
                                  ("norm", (64,), "float32", ())), (("x", 8),), 6)

PROBLEMS = (
    Problem(
        id="6.1",
        function="restore_for_serving",
        signature=("ckpt_dir", "mesh", "specs"),
        points=15,
        title="Restore the parameters for serving, within a memory budget",
        statement=(
            "`ckpt_dir` holds a training checkpoint saved with `ocp.StandardCheckpointer` on 8 devices: "
            "`{'params': {...}, 'opt_state': {'mu': {...}, 'nu': {...}}, 'step': ...}`, every array "
            "float32. `mesh` is a serving `jax.sharding.Mesh` over the 16 devices and `specs` maps each "
            "parameter's name to its serving `PartitionSpec`. Return the parameters only, as a dict "
            "`{name: jax.Array}`, in bfloat16, each sharded as `NamedSharding(mesh, specs[name])`. The "
            "grader measures your function's own peak host memory from outside (the anonymous memory of "
            "the process running it, sampled, above what it held before your code loaded): it must stay "
            f"under {SERVING_FACTOR} times the bytes of the saved float32 parameters plus {SERVING_SLACK >> 20} MiB: "
            "room for the float32 reads a bfloat16 restore passes through, not for a float32 copy kept beside a "
            "bfloat16 one, nor for the whole training state."
        ),
        returns=ServedTree(),
        hints=(
            "Where do the shapes come from? Orbax's checkpoint metadata describes every saved array without "
            "reading one (a checkpointer's `metadata(ckpt_dir)`).",
            "A restore target can carry a dtype and a sharding per leaf (`jax.ShapeDtypeStruct(shape, dtype, "
            "sharding=...)`): Orbax casts and places as it reads, so the float32 copy of the model is never whole "
            "in memory. `.astype` after a float32 restore holds both.",
            "A target naming only part of the saved tree is a 'wrong tree' unless the restore is told it is "
            "partial (`ocp.args.PyTreeRestore` has a flag for it; so does the v1 API's loading options). "
            "Restoring the whole state first reads the moments too: three times the bytes.",
        ),
        examples=(
            Example((_TRAINED, MeshArg((("data", 2), ("model", 8))),
                     {"embed": SpecArg((None, "model")), "mlp": SpecArg((None, "model")), "norm": SpecArg(())}),
                    None, "FSDP over 8 devices to tensor-parallel over 2 x 8, norm replicated"),
        ),
        measure_memory=True,
        forbidden=("ckptlab.serving",),
        timeout=60.0,
        difficulty="medium",
        category="orbax",
        tags=("serving", "restore", "memory"),
        why=(
            "Everything happens in the target: `partial_restore` leaves the moments unread, a bfloat16 dtype has "
            "TensorStore cast each chunk as it is read, and the serving shardings make each device read its own "
            "slice, so no float32 copy of the model is ever whole."
        ),
        next_question=(
            "A hundred serving replicas start at once from one checkpoint in a bucket: where is the bottleneck, "
            "and how would you cut their start-up time?"
        ),
    ),
    Problem(
        id="6.2",
        function="convert_safetensors",
        signature=("st_path", "out_dir", "rename", "mesh", "specs"),
        points=20,
        title="Convert a safetensors file into a sharded Orbax checkpoint, one tensor at a time",
        statement=(
            "`st_path` is a safetensors file from a model hub (Unit 4's format: an 8-byte length N, a JSON "
            "header, then the data; float32 tensors here). Write an Orbax checkpoint into `out_dir` (it does "
            "not exist yet) holding every tensor of the file, tensor `name` saved as `rename[name]`, with its "
            "dtype and values, placed as `NamedSharding(mesh, specs[rename[name]])`. The grader restores what "
            "you wrote with `ocp.v1.load(out_dir)` in a worker of its own (the arrays come back in "
            "the layout they were saved in) and measures your function's own memory from outside (its anonymous "
            "memory, sampled: the pages of the file a reader maps are not counted): it must stay under "
            f"{CONVERSION_FACTOR} times the bytes of the file's largest tensor, plus {CONVERSION_SLACK >> 20} MiB (a tensor's "
            "host copy, its copy on the devices, and the tensor before it, which JAX may keep until Python's garbage "
            "collector runs). So neither the whole file nor the whole model may be in your memory at "
            "once. What you return is not looked at."
        ),
        returns=WrittenTree(),
        hints=(
            "Read one tensor at a time: the header says where each tensor's bytes are (Unit 4), or the "
            "safetensors library's `safe_open` hands you one tensor without reading the rest.",
            "Place each tensor on the mesh as it is read and add it to the checkpoint before reading the next: "
            "Orbax's v1 API can build a checkpoint a few arrays at a time (`ocp_v1.partial`), then make it one "
            "checkpoint at the end.",
            "One save of the whole tree holds every array and the save's copies of them at once; "
            "`safetensors.numpy.load_file` reads the whole file: both go over the budget.",
        ),
        examples=(
            Example((_HUB, OutputFolder(), _RENAME, MeshArg((("model", 16),)),
                     {"embed": SpecArg((None, "model")), "w_in": SpecArg((None, "model")), "norm": SpecArg(("model",))}),
                    None, "three tensors renamed, each split over the 16 devices"),
        ),
        measure_memory=True,
        forbidden=("ckptlab.serving",),
        mode="readback",
        timeout=90.0,
        difficulty="hard",
        category="formats",
        tags=("serving", "safetensors", "conversion", "memory"),
        why=(
            "Memory stays near one tensor because each is read by its offsets, placed on the mesh and handed to "
            "Orbax's partial save before the next is read, and the checkpoint is finalized once; a whole-file "
            "read or one save of the whole tree holds the model at once."
        ),
        next_question=(
            "The model comes as 30 safetensors files totalling 140 GB: how would you spread the conversion over "
            "several hosts, and what must they agree on?"
        ),
    ),
)
