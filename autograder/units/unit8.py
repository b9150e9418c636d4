"""Unit 8, Preemption: its record and its problems. Public: what learners may see (statements,
signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit8.py``, keyed by function
name; references: ``solutions/unit8.py``."""

from __future__ import annotations

from autograder.declarations import Example, Problem, Unit
from autograder.wall.kinds import RunFolder, TieredRootArg
from autograder.wall.returns import Raises, Struct
from autograder.wall.run_returns import GraceRun

# A job of 3 processes, one per replica slice: slice 0 saves the persistent tier every 5 steps (2 kept),
# slices 1 and 2 their local tiers every 2 (3 kept); 12 steps (Lesson 8's job).
_TIERS = (("slices", 3), ("per_slice", 1), ("devices_per_process", 2), ("steps", 12), ("local_every", 2),
          ("local_keep", 3), ("persistent_every", 5), ("persistent_keep", 2), ("seed", 0))
_SLICES = ((0,), (1,), (2,))
# Lesson 8's second job: 2 slices of 2 processes (slice 1 is processes 2 and 3), the same cadence.
_PAIRS = (("slices", 2), ("per_slice", 2), ("devices_per_process", 1), ("steps", 12), ("local_every", 2),
          ("local_keep", 3), ("persistent_every", 5), ("persistent_keep", 2), ("seed", 0))


UNIT = Unit(
    number=8,
    title="Preemption",
    intro=(
        "Clusters take machines back with a SIGTERM, a grace window, then a SIGKILL, and a job of several "
        "hosts must agree on what to save. Say which examples each host reads at a step, whatever the "
        "number of hosts the job restarts with; say which step Orbax's emergency CheckpointManager restores, "
        "and which replica slice reads it, when the checkpoints live in tiers (a fast local one per host, a "
        "slow persistent one) and hosts' local tiers are gone; and write a training loop that saves where it stands when the grader sends it a "
        "real SIGTERM, wherever the signal lands, within the grace window. The lesson is "
        "`course/08_preemption.ipynb`."
    ),
    notebook="unit8_preemption.ipynb",
    lesson="08_preemption.ipynb",
    lesson_figures=1,
    # the problem notebook's import cell
    imports=(
        "import os\n"
        "import signal\n"
        "\n"
        "import grain\n"
        "import jax\n"
        "import numpy as np\n"
        "import orbax.checkpoint as ocp\n"
        "\n"
        "from autograder.notebook import problem\n"
        "from ckptlab import training"
    ),
)

PROBLEMS = (
    Problem(
        id="8.1",
        function="host_batch",
        signature=("step", "host", "hosts", "seed", "examples", "global_batch"),
        points=15,
        title="Which examples a host reads, whatever the number of hosts",
        statement=(
            "A data-parallel job of `hosts` processes trains on a dataset of `examples` records, ids `0` to "
            "`examples - 1`, read in one global order, the same on every host: the order of "
            "`grain.MapDataset.range(examples).shuffle(seed=seed).repeat()` (each epoch a new permutation). "
            "Training step `step` (from 0) consumes the next `global_batch` ids of that order, so that a job "
            "restarted from a checkpoint with another number of hosts reads exactly the batches an "
            "uninterrupted job would read: no id read twice within an epoch, none skipped, across epoch ends "
            "too. Host `host` reads its rows of the global batch, `global_batch // hosts` consecutive rows "
            "starting at row `host * global_batch // hosts` (the layout in which "
            "`jax.make_array_from_process_local_data` assembles the global batch). Return the ids host "
            "`host` reads at step `step`, a list of ints in row order. Keep no state between calls: the step "
            "alone says where the job is. Raise `ValueError` when `hosts` does not divide `global_batch` or "
            "`host` is not one of `0` to `hosts - 1`, its message giving the values at fault as numbers (`hosts` "
            "and `global_batch`, or `host`): a message naming them without their values does not say "
            "which job was misconfigured."
        ),
        returns=Struct(("list", "int")),
        raises=("ValueError",),
        hints=(
            "Where does step `step`'s global batch start in the global order? Its position alone, never "
            "a host's own iterator, survives a change in the number of hosts.",
            "A Grain `MapDataset` is indexed like a list, `ds[i]`, at any position, without reading what "
            "comes before it; `.repeat()` makes it as long as you like.",
            "An epoch's length need not be a multiple of the global batch: a batch may start in one epoch and "
            "end in the next. Grain's repeat reshuffles each epoch, so position `i` of the repeated order is "
            "not position `i % examples` of the first epoch.",
        ),
        examples=(
            Example((0, 0, 2, 0, 10, 4), [0, 4], "step 0 of 2 hosts: host 0 reads rows 0-1 of the first global batch"),
            Example((0, 1, 2, 0, 10, 4), [6, 7], "the same step, host 1: rows 2-3"),
            Example((0, 0, 1, 0, 10, 4), [0, 4, 6, 7], "the same step on one host: the same global batch"),
            Example((2, 1, 2, 0, 10, 4), [5, 7], "step 2 crosses the end of the first epoch (positions 8 to 11: ids 5, 2 of the first, 5, 7 of the second)"),
            Example((1, 0, 1, 0, 10, 4), [8, 3, 1, 9], "step 1 on one host: rows 0-3 in row order, not sorted"),
            Example((0, 0, 3, 0, 10, 4), Raises("ValueError", values=(3, 4)),
                    "a global batch of 4 rows cannot be split among 3 hosts: the message gives 3 or 4"),
            Example((0, 2, 2, 0, 10, 4), Raises("ValueError", values=(2,)),
                    "host 2 is not one of the 2 hosts 0 and 1: the message gives 2"),
        ),
        difficulty="medium",
        category="fault-tolerance",
        tags=("preemption", "data", "grain"),
        seen_in="MaxText issue #2537 (the number of chips changed between save and load), grain issue #938",
        why=(
            "Each host's iterator state describes its own slice of the data, so it means nothing once the "
            "number of hosts changes; the global step, saved with the model, fixes the global batch, and "
            "each host reads its rows of it by position."
        ),
        next_question=(
            "Your pipeline filters and packs examples, so a step no longer maps to fixed positions: how "
            "would you make a restart with fewer hosts read every example once?"
        ),
    ),
    Problem(
        id="8.2",
        function="newest_step_across_tiers",
        signature=("tiers", "slices"),
        points=15,
        title="The step Orbax's multi-tier manager restores, and the slice that reads it",
        statement=(
            "A job of several processes trained with Orbax's emergency (multi-tier) `CheckpointManager` "
            "(`orbax.checkpoint.experimental.emergency.checkpoint_manager`) and checkpointed into the folder "
            "`tiers`. Its mesh has a replica axis: the processes form replica slices, `slices[k]` listing slice "
            "k's process numbers, and each slice holds a whole copy of the state, every process its shards of it. "
            "Slice 0, the primary, saved the whole state to the persistent tier `tiers/persistent/`, rarely. Every "
            "other slice saved to its processes' local tiers, `tiers/local/<process>/` (a RAM disk in production), "
            "often, each process its own shards. A save committed when its step folder is named by the step alone "
            "(Orbax writes a save into a temporary folder, `<step>.orbax-checkpoint-tmp-...`, puts its "
            "`commit_success.txt` there, then renames it to the step: a folder so named holds that file too). "
            "Then the job was preempted: a process's local tier may be empty (its machine was replaced), a save "
            "may have been cut short, a step may be missing from a process's tier. Return `(step, slice)`: the "
            "step the manager restores when the job starts again, and the replica slice that reads it (the "
            "others receive it by broadcast). A slice can read a step from the local tiers only where every one "
            "of its processes holds it committed; the primary slice reads the persistent tier, so its number, "
            "`0`, means the step comes from there. The manager restores the newest step it can read anywhere, "
            "reading a step from the local tiers wherever a slice can, from the lowest-numbered slice that can. "
            "Return None when no step can be restored. The folder is read-only to you; Orbax trusts the names "
            "of committed steps, and so may you."
        ),
        returns=Struct(("optional", ("fixed", ("int", "int")))),
        hints=(
            "Each local tier alone tells you nothing: a process holds only its shards. Group the processes by "
            "their slice first, and ask of each slice which steps all its processes hold committed.",
            "One complete slice is enough for the job: the others get the state by broadcast. So the local "
            "steps are those of any slice, not those every process holds (the primary slice's processes hold no "
            "local step at all).",
            "Put the persistent tier's committed steps beside them: the newest step wins; a step both tiers "
            "hold is read locally, by the lowest-numbered slice that holds it complete.",
        ),
        examples=(
            Example((TieredRootArg(_TIERS), _SLICES), (12, 1),
                    "nothing lost: slices 1 and 2 each hold step 12 complete; slice 1 reads it"),
            Example((TieredRootArg(_TIERS, (("lost", 2),)), _SLICES), (12, 1),
                    "process 2's local tier lost: slice 1 still holds step 12, so it is restored from there"),
            Example((TieredRootArg(_TIERS, (("hole", 1, 0), ("hole", 2, 1))), _SLICES), (12, 2),
                    "holes: process 1 lacks step 12, process 2 lacks step 10: slice 2 reads step 12"),
            Example((TieredRootArg(_TIERS, (("cut", 1), ("cut", 2))), _SLICES), (10, 1),
                    "both newest local saves cut short (left with temporary names): step 10, in both tiers, read "
                    "locally by slice 1"),
            Example((TieredRootArg(_TIERS, (("lost", 1), ("lost", 2))), _SLICES), (10, 0),
                    "both local slices lost: the persistent tier's step 10, read by the primary slice"),
            Example((TieredRootArg(_PAIRS, (("hole", 3, 0),)), ((0, 1), (2, 3))), (10, 1),
                    "slices of two processes: process 3 lacks step 12, which process 2 holds, so slice 1 is "
                    "complete only up to step 10, read locally"),
            Example((TieredRootArg(_PAIRS, (("hole", 2, 1), ("hole", 3, 0))), ((0, 1), (2, 3))), (10, 0),
                    "process 2 lacks step 10, process 3 step 12: slice 1 is complete only at step 8, so the "
                    "persistent tier's step 10, newer, is read by the primary slice"),
        ),
        timeout=60.0,
        forbidden=("ckptlab.tiers",),
        difficulty="medium",
        category="fault-tolerance",
        tags=("preemption", "tiers", "orbax"),
        seen_in="Orbax's emergency (multi-tier) checkpointing; MaxText issue #1153, axlearn issue #1332",
        why=(
            "Orbax's emergency manager keeps one copy of the state per replica slice, so a step restores from "
            "the local tiers wherever one slice holds it complete: that slice reads it and broadcasts it. A lost "
            "host costs only its own slice; the persistent tier, written by the primary slice, is the floor."
        ),
        next_question=(
            "The manager trusts committed names: what happens to the job when the one slice holding the newest "
            "step has a damaged shard, and what would you check before restoring?"
        ),
    ),
    Problem(
        id="8.3",
        function="train_with_grace",
        signature=("ckpt_dir", "total_steps", "seed", "save_every", "eval_every"),
        points=20,
        title="A training loop that answers a SIGTERM within its grace window",
        statement=(
            "Train as problem 5.3 does: `training.make_model(seed)` with `training.make_optimizer(model)`, training "
            "step s (from 0) running `step(model, optimizer, x, y)`, `step = training.train_step()`, on "
            "`x, y = next(batches)` of `batches = training.Batches(seed)`, for `total_steps` steps. Checkpoint into "
            "`ckpt_dir` with an Orbax `CheckpointManager` (or Orbax v1's `ocp.v1.training.Checkpointer`): step s "
            "holds the state after s training steps, as two items, `state` (`training.train_state(model, "
            "optimizer)`) and `data` (`batches.get_state()`). Save periodically, after training step s - 1 when s "
            "is a multiple of `save_every`, and the last step, `total_steps`; never save another step, except on "
            "a SIGTERM. After training step s - 1 when s is a multiple of `eval_every` (after that step's periodic "
            "save, if it has one), evaluate the model: `training.eval_loss(model, x, y)` on every batch of "
            "`training.eval_batches(seed)`, which takes seconds. The grader sends your process a real SIGTERM at "
            "a moment of its choosing (while a save is under way, or during an evaluation), and a SIGKILL 3 "
            "seconds later (the grace window); all your runs of one grading together get 5 minutes on the clock "
            "(the reference's take well under one). Your function runs as one process without `jax.distributed` (the "
            "grader's sandbox has no network), so JAX's preemption sync point is not available to it (Orbax's "
            "`reached_preemption` is always False there): your loop answers the SIGTERM itself. On a SIGTERM your "
            "loop must stop whatever it is doing, save the "
            "state after the last training step it finished, wait until that step is committed, and return "
            "within the grace window (return, not end the process: your function runs in your notebook's kernel too, "
            "which `sys.exit` or `os._exit` would end). Started again with the same arguments, a run must go on from the latest "
            "committed step, training only the steps that remain, on the batches that come next. Return "
            "`(training.params_of(model), first_step)`, first_step being the step this call started training from "
            "(0 in a fresh folder); the last run's is compared bit for bit with a run never interrupted. Before "
            "the last restart the grader restores your latest committed step, checks that it holds the training "
            "state after that many steps, and may put another valid state in its place: the last run must go on "
            "from what the step holds."
        ),
        returns=GraceRun(),
        hints=(
            "A signal handler runs between two Python bytecodes of the main thread, whatever the loop is doing; "
            "`signal.signal(signal.SIGTERM, handler)` installs one. What should it change, and where does the "
            "loop look at that change?",
            "An evaluation is a loop of its own and lasts longer than the grace window: a loop that looks only "
            "between training steps answers the SIGTERM too late, and its SIGKILL lands before its save.",
            "On a SIGTERM the step to save is the number of training steps finished: it may not be a multiple of "
            "save_every (a manager with `save_interval_steps` saves it with `force=True`). `save()` returns before "
            "its step commits: wait for the manager before returning.",
        ),
        examples=(
            Example((RunFolder((("term_eval", 2),), plant=8, grace=3.0), 4, 0, 2, 3), None,
                    "four steps in a fresh folder, saves at 2 and 4, sent a real SIGTERM during the evaluation after "
                    "step 3: your run must save step 3, wait for its commit and return within 3 s; then, after the "
                    "check (as the grader does) puts another valid state in step 3, started again it must go on from "
                    "what step 3 holds"),
            Example((RunFolder(), 4, 0, 2, 3), None, "four steps in a fresh folder, not interrupted: saves at 2 and 4, "
                                                     "an evaluation after step 3"),
            Example((RunFolder(left_at=2), 4, 0, 2, 3), None,
                    "a run stopped after step 2 committed (your function, called first with total_steps 2), started "
                    "again for 4 steps: it must go on from step 2, on the batches that come next"),
        ),
        timeout=90.0,
        mode="preempted",
        difficulty="hard",
        category="fault-tolerance",
        tags=("training", "preemption", "signals", "orbax"),
        seen_in="goodfire-ai/spd issue #741 (the SIGTERM-triggered save fired 0 times: the signal came during "
                "evaluation)",
        why=(
            "The handler only records the SIGTERM; every loop that runs longer than the grace window, evaluation "
            "included, looks at it, and the loop then saves the steps it finished, waits for the commit, and "
            "exits while the window is open. As a container's entrypoint (pid 1) only a handler lets the SIGTERM in."
        ),
        next_question=(
            "On several hosts only one may get the SIGTERM first: how do they agree on one step to save, and "
            "what does JAX's preemption sync point cost at every step?"
        ),
    ),
)
