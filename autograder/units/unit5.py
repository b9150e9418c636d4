"""Unit 5, Checkpointing a training run: its record and its problems. Public: what learners may see
(statements, signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit5.py``,
keyed by function name; references: ``solutions/unit5.py``."""

from __future__ import annotations

from autograder.declarations import CONVENTIONS, Example, Problem, Unit
from autograder.wall.kinds import PreemptedRootArg, RunFolder
from autograder.wall.returns import Struct
from autograder.wall.run_returns import ResumedRun

UNIT = Unit(
    number=5,
    title="Checkpointing a training run",
    intro=(
        "A training job saves while it trains, keeps the last few steps, and is killed when the "
        "machine is taken back. Predict what a training state really weighs on each host, and find "
        "the step to resume from in a checkpoint folder a real preemption left behind (the grader "
        "kills real savers to make them), and write a training loop that survives being killed: the "
        "grader kills it from outside, starts it again, and compares the bits of the end result. The lesson is `course/05_training_checkpoints.ipynb`."
    ),
    notebook="unit5_training_checkpoints.ipynb",
    lesson="05_training_checkpoints.ipynb",
    lesson_figures=3,
    # the problem notebook's import cell
    imports=(
        "import itertools\n"
        "import math\n"
        "import os\n"
        "\n"
        "import jax\n"
        "import numpy as np\n"
        "import orbax.checkpoint as ocp\n"
        "\n"
        "from autograder.notebook import problem\n"
        "from ckptlab import training"
    ),
)

# A root a saver left when it was killed while its fourth step was being written (POSIX protocol).
# (``steps`` one beyond ``min_committed``: the kill meets that step's save or the saver is made again, never a later one)
_KILLED_IN_TMP = PreemptedRootArg((("kill", "tmp"), ("min_committed", 3), ("max_to_keep", 3), ("seed", 1), ("steps", 4)))

PROBLEMS = (
    Problem(
        id="5.1",
        function="training_state_bytes",
        signature=("params", "specs", "mesh_shape", "devices_per_host", "mu_dtype=None", "accumulate=1"),
        points=15,
        title="What a training state weighs on each host",
        statement=(
            "A job trains with `nnx.Optimizer(model, tx, wrt=nnx.Param)`, where `tx = optax.adamw(learning_rate, "
            "mu_dtype=mu_dtype)` (a constant learning rate; `mu_dtype` None or a dtype's name), wrapped as `optax.MultiSteps(tx, "
            "every_k_schedule=accumulate)` when `accumulate > 1` (gradients accumulated over that many "
            "micro-batches per update). `params` maps each parameter's name to `(shape, dtype)` (dtype "
            "'float32', 'bfloat16' or 'float16'); `specs` maps the same names to their specs. Each array of the "
            "optimizer's state that belongs to a parameter is sharded as that parameter; scalars are "
            "replicated. Return `{host: bytes}` for every host (devices_per_host consecutive device ids each): "
            "the uncompressed bytes its devices write when Orbax saves the parameters and the optimizer's whole "
            "state (`nnx.state(model)`, `nnx.state(optimizer)`), replica-parallel on. Each notebook is graded "
            "with the helpers defined in it: bring problem 2.6's rules in as you choose (your own "
            "`bytes_written_per_host`, or JAX and Orbax asked as Lesson 2's explorer asks them)." + CONVENTIONS
        ),
        returns=Struct(("dict", "int", "int")),
        hints=(
            "Which arrays does the state hold, in which dtypes? Ask optax without allocating anything: "
            "`jax.eval_shape(tx.init, {name: jax.ShapeDtypeStruct(shape, dtype), ...})` lists every leaf. "
            "`nnx.Optimizer` keeps one more, its own `step`.",
            "Read the dtypes it gives rather than assuming them: `mu_dtype` is not the dtype of every moment, and "
            "`MultiSteps` keeps what it accumulates in a dtype of its own, whatever the parameters' dtype.",
            "A leaf's path names the parameter it belongs to (`jax.tree_util.tree_leaves_with_path`). A "
            "replicated scalar has no dimension to split among its replicas: replica 0, the mesh's first "
            "device, writes it.",
        ),
        examples=(
            Example(({"w": ((64, 32), "float32"), "b": ((32,), "float32")}, {"w": ("x",), "b": ()}, {"x": 8}, 4, None, 1),
                    {0: 12488, 1: 12480},
                    "plain AdamW: w (8 KiB) split by rows and b (128 bytes) split among its 8 replicas, three "
                    "times each; host 0 also writes the two step counters"),
            Example(({"w": ((64, 32), "bfloat16"), "b": ((32,), "float32")}, {"w": ("x",), "b": ()}, {"x": 8}, 4,
                     "float32", 4),
                    {0: 12560, 1: 12544},
                    "bfloat16 w, mu kept in float32, gradients accumulated over 4 micro-batches"),
        ),
        difficulty="medium",
        category="accounting",
        tags=("training", "optimizer", "bytes"),
        why=(
            "AdamW's mu and nu are shaped like the parameters and sharded as they are; `mu_dtype` changes mu "
            "alone, `MultiSteps` adds an accumulator of its own, and the scalar counters are written by replica "
            "0. Asking optax with `eval_shape` lists every leaf and dtype."
        ),
        next_question=(
            "Your model's optimizer state no longer fits the hosts at checkpoint time: what would you shard, "
            "offload or cast, and what does each choice cost at resume?"
        ),
    ),
    Problem(
        id="5.2",
        function="latest_restorable_step",
        signature=("ckpt_root",),
        points=15,
        title="The step to resume from, after a preemption",
        statement=(
            "`ckpt_root` is the folder an Orbax `CheckpointManager` saved into, steps 1, 2, ... (or "
            "every few steps), each step holding two items, `state` (a StandardSave) and `data` (a "
            "JsonSave), until the grader killed the saving process with SIGKILL at some point of a save. "
            "It saved with either atomicity protocol: the POSIX one writes `<step>.orbax-checkpoint-tmp` "
            "and renames it once complete; the object-store one writes `<step>/` in place and adds "
            "`commit_success.txt` last. Either way, a step's save committed when its folder is named by "
            "the step alone and holds `commit_success.txt`. Return the latest step (an int) whose save "
            "committed and whose `state` item Orbax restores, or None when there is none. The folder is "
            "read-only to you."
        ),
        returns=Struct(("optional", "int")),
        hints=(
            "Which entries of the folder are steps at all? '4.orbax-checkpoint-tmp' is a save that never "
            "finished its rename.",
            "A step folder without `commit_success.txt` is a save still being written in place when the "
            "process died (the object-store protocol): never resume from it, however complete it looks. "
            "Orbax's own `ocp.step.is_checkpoint_finalized(path)` says True for it unless told the "
            "protocol (its `atomicity_options`).",
            "Committed is not yet restorable: try the newest candidates first, and let a restore of their "
            "`state` item decide (any exception means: not this one). A default `CheckpointManager`'s "
            "`latest_step()` trusts any step folder, as the default check does.",
        ),
        examples=(
            Example((_KILLED_IN_TMP,), 3, "killed while step 4 was in its temporary folder"),
            Example((PreemptedRootArg((("commit_file", True), ("kill", "uncommitted"), ("max_to_keep", None),
                                       ("min_committed", 4), ("seed", 2), ("steps", 5)),
                                      (("state_unreadable", 1), ("data_removed", 2))),), 3,
                    "the object-store protocol, killed while step 5 was written in place (no commit_success.txt); "
                    "step 4's state no longer restores, and steps 3 and 4 lost their data item: step 3's state "
                    "restores"),
            Example((PreemptedRootArg((("kill", "first"), ("seed", 3))),), None,
                    "killed during its first save: no step committed"),
        ),
        timeout=60.0,
        difficulty="medium",
        category="fault-tolerance",
        tags=("training", "preemption", "orbax"),
        why=(
            "A step is safe only once committed: named by its step alone (the rename finished) and holding "
            "`commit_success.txt` (the in-place writer finished). Orbax's default checks trust a step written in "
            "place, and a committed step must still prove itself by restoring."
        ),
        next_question=(
            "Your checkpoints live in a bucket and a preemption hits mid-save: how would you make the resume "
            "logic robust, and how would you test it before it matters?"
        ),
    ),
    Problem(
        id="5.3",
        function="train_with_preemption",
        signature=("ckpt_dir", "total_steps", "seed"),
        points=20,
        title="A training loop that survives preemption",
        statement=(
            "Train `training.make_model(seed)` with `training.make_optimizer(model)` for `total_steps` steps: "
            "training step s (from 0) runs `step(model, optimizer, x, y)`, `step = training.train_step()`, on the "
            "next batch `x, y = next(batches)` of `batches = training.Batches(seed)`. The job checkpoints into "
            "`ckpt_dir` with an Orbax `CheckpointManager` (or Orbax v1's `ocp.v1.training.Checkpointer`, which holds one), "
            "one step per training step: step s holds the state "
            "after s training steps as two items, `state` (`training.train_state(model, optimizer)`) and `data` "
            "(the pipeline's position, `batches.get_state()`). It may be killed at any moment and started again "
            "with the same arguments: a run must then go on from the latest committed step, training only the "
            "steps that remain, on the batches that come next. Return `(training.params_of(model), first_step)`, "
            "first_step being the step this call started training from (0 in a fresh folder); when your "
            "function returns, its last step must be committed on disk (the process ends with it, as a job's "
            "does). The grader kills your process with SIGKILL at moments of its choosing (during saves and "
            "between them), starts it again, and compares what the last run returns, bit for bit, with a run "
            "never interrupted, and its first_step with the step it should have resumed from; then it looks for "
            "your last step on disk, committed. Before the last restart the grader also restores your latest "
            "committed step itself, checks that it holds the training state, and may put another valid state in "
            "its place: the last run must go on from what the step holds. A run that does not resume from disk "
            "fails, however right its parameters."
        ),
        returns=ResumedRun(),
        hints=(
            "A manager tells you where a folder stands: `latest_step()` is None in a fresh one. The loop then runs "
            "from there to total_steps, saving step s + 1 after training step s.",
            "One save holds both items (`ocp.args.Composite`: a `StandardSave` and a `JsonSave`), and a restore "
            "asks for them the same way: the state with a target built from your freshly made state (its shapes, "
            "dtypes and shardings), the position as JSON. `training.load_train_state` and `batches.set_state` "
            "put them back (Lesson 5's `training.save_args(state, batches.get_state())` and "
            "`training.restore_args(model, optimizer)` build the two `Composite`s).",
            "`save()` returns before its step commits, and your process ends with your function: wait for the "
            "manager before returning. A fresh `Batches` serves epoch 0 again: a run that does not restore the "
            "position trains on the wrong batches.",
        ),
        examples=(
            Example((RunFolder(), 3, 0), None, "three steps in a fresh folder, not interrupted"),
            Example((RunFolder(left_at=2, plant=5), 4, 0), None,
                    "a run stopped after step 2 committed (your function, called first with total_steps 2), "
                    "started again for 4 steps: it must go on from step 2, on the batches that come next; before "
                    "the second call the check, as the grader does, puts another valid state in step 2, so only a "
                    "run that restores what the step holds ends right"),
        ),
        timeout=60.0,
        mode="preempted",
        difficulty="hard",
        category="fault-tolerance",
        tags=("training", "preemption", "orbax"),
        why=(
            "A resume is exact only when the model, the optimizer and the data position come from one committed "
            "step: the manager's latest step says where to start, a restore into the fresh state's shapes puts "
            "them back, and waiting for the last commit keeps the final step."
        ),
        next_question=(
            "With async saves, how much training can a preemption cost at worst, and how would you use the "
            "preemption notice to lose less?"
        ),
    ),
)
