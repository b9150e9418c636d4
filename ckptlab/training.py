"""A small training run to checkpoint for real (Unit 5): an NNX model, an ``nnx.Optimizer`` with
optax's AdamW, a data pipeline with a position (:class:`Batches`), and a loop that saves with
Orbax's ``CheckpointManager`` and resumes from the latest complete step.

Each step of a manager holds two items: the training state, and the pipeline's position
(``batches.get_state()``). A run resumed from step k restores both (``batches.set_state``), so it
trains on the batches that come next and computes, bit for bit, what an uninterrupted run computes.
(:func:`batch`, a pure function of ``(seed, step)``, is the lesson's batch for timing steps.)

Run as a program (``python -m ckptlab.training ROOT --steps N``) it is the process the lesson
kills from outside; it prints one line per event (``resume k``, ``step k``, ``save k``, ``done``),
flushed.
"""

from __future__ import annotations

import argparse
import os
import sys

# Imported here, not in each function: the grader's zygote preloads this module (and so these)
# for the workers of problem 5.3. Importing it starts no JAX backend.
import jax
import numpy as np
import optax
from flax import nnx

SIZES = (32, 64, 64, 8)  # the lesson's MLP: 32 -> 64 -> 64 -> 8
BATCH = 16
ITEMS = ("state", "data")  # what each step of a manager holds: the training state, the data position


def make_model(seed: int = 0, sizes=SIZES):

    class Regressor(nnx.Module):
        """Linear layers with a GELU between them (no BatchNorm: parameters are all there is)."""

        def __init__(self, sizes, rngs: nnx.Rngs):
            self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])

        def __call__(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < len(self.layers) - 1:
                    x = nnx.gelu(x)
            return x

    return Regressor(tuple(int(s) for s in sizes), nnx.Rngs(seed))


def make_optimizer(model, learning_rate: float = 1e-2):

    return nnx.Optimizer(model, optax.adamw(learning_rate, weight_decay=1e-4), wrt=nnx.Param)


def batch(seed: int, step: int, sizes=SIZES):
    """The batch of step ``step``: a pure function of (seed, step), whatever ran before."""

    key = jax.random.fold_in(jax.random.key(seed), step)
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (BATCH, sizes[0]))
    w = jax.random.normal(jax.random.key(seed + 1), (sizes[0], sizes[-1]))  # the target map, fixed
    return x, jax.numpy.tanh(x @ w) + 0.01 * jax.random.normal(kw, (BATCH, sizes[-1]))


class Batches:
    """A data pipeline with a position to checkpoint: epochs of :data:`EPOCH` examples, shuffled
    afresh each epoch, served :data:`BATCH` at a time. ``next(batches)`` gives ``(x, y)``;
    ``get_state()`` is the position as a JSON-able dict, and ``set_state(state)`` goes back to it.
    Started afresh, it serves epoch 0 again: a resumed run must restore the position it saved."""

    EPOCH = 64

    def __init__(self, seed: int, sizes=SIZES):
        self.seed, self.sizes = int(seed), tuple(sizes)
        self.epoch, self.index = 0, 0

    def __iter__(self):
        return self

    def __next__(self):
        order = np.random.default_rng([self.seed, self.epoch]).permutation(self.EPOCH)
        rows = order[self.index * BATCH:(self.index + 1) * BATCH]
        self.index += 1
        if self.index * BATCH >= self.EPOCH:
            self.epoch, self.index = self.epoch + 1, 0
        key = jax.random.key(self.seed)
        x_all = jax.random.normal(key, (self.EPOCH, self.sizes[0]))
        w = jax.random.normal(jax.random.fold_in(key, 1), (self.sizes[0], self.sizes[-1]))
        x = x_all[rows]
        return x, jax.numpy.tanh(x @ w)

    def get_state(self) -> dict:
        return {"seed": self.seed, "epoch": self.epoch, "index": self.index}

    def set_state(self, state: dict) -> None:
        if int(state["seed"]) != self.seed:
            raise ValueError(f"this position is of the pipeline with seed {state['seed']}, not {self.seed}")
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


def train_step():
    """The jitted training step: ``step(model, optimizer, x, y)`` updates both in place and
    returns the loss (mean squared error)."""

    @nnx.jit
    def step(model, optimizer, x, y):
        def loss_fn(m):
            return ((m(x) - y) ** 2).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return step


# An evaluation (problem 8.3's loop runs one after some steps): EVAL_BATCHES batches, each of which
# waits EVAL_WAIT seconds on its input first, as a real evaluation set's reads do: 4.5 s in all,
# longer than problem 8.3's grace window (3 s) by more than a save, whatever the machine's speed.
# A process whose environment sets EVAL_WAIT_VARIABLE waits that long instead: the grader's runs of
# 8.3 that it sends no signal to (their evaluations change nothing but the time they take). One whose
# environment names a pipe in EVAL_FEED_VARIABLE waits on it instead, a byte a batch: the grader's run
# that a SIGTERM is planned for, paced by the grader, which sends the signal at the batch it chose as
# the run reads it (never at a moment the run's own files or pauses could time).
EVAL_BATCHES = 90
EVAL_WAIT = 0.05
EVAL_WAIT_VARIABLE = "CKPTLAB_EVAL_WAIT"
EVAL_FEED_VARIABLE = "CKPTLAB_EVAL_FEED"


def eval_batches(seed: int, sizes=SIZES):
    """The evaluation set, batch by batch: ``for x, y in eval_batches(seed)``. Each batch waits
    :data:`EVAL_WAIT` seconds before it comes (Python runs a signal handler during the wait, and
    the loop goes on after it)."""
    import os
    import time

    wait = EVAL_WAIT
    try:
        wait = max(0.0, float(os.environ.get(EVAL_WAIT_VARIABLE, EVAL_WAIT)))
    except ValueError:
        pass
    feed = None
    if os.environ.get(EVAL_FEED_VARIABLE):
        try:
            feed = os.open(os.environ[EVAL_FEED_VARIABLE], os.O_RDONLY)
        except OSError:
            feed = None
    try:
        for i in range(EVAL_BATCHES):
            if feed is not None:
                if not os.read(feed, 1):  # (the grader's end closed: no pace any more)
                    os.close(feed)
                    feed = None
            else:
                time.sleep(wait)
            yield batch(seed + 7919, i, sizes)
    finally:
        if feed is not None:
            os.close(feed)


class evaluations_at_once:  # noqa: N801 - used as a function: `with training.evaluations_at_once():`
    """Inside it, :func:`eval_batches` waits nothing (:data:`EVAL_WAIT_VARIABLE` set to 0 in this
    process's environment, put back after): a public check's runs of problem 8.3 that it sends no
    signal to, as the grader's."""

    def __enter__(self):
        self.before = os.environ.get(EVAL_WAIT_VARIABLE)
        os.environ[EVAL_WAIT_VARIABLE] = "0"
        return self

    def __exit__(self, *exc):
        if self.before is None:
            os.environ.pop(EVAL_WAIT_VARIABLE, None)
        else:
            os.environ[EVAL_WAIT_VARIABLE] = self.before
        return False


def eval_loss(model, x, y):
    """The model's mean squared error on one evaluation batch (changes nothing)."""
    return float(((model(x) - y) ** 2).mean())


def train_state(model, optimizer) -> dict:
    """What a training checkpoint holds: the model's parameters and the optimizer's state (AdamW's
    step count, first and second moments, and the optimizer's own step)."""

    return {"model": nnx.state(model), "optimizer": nnx.state(optimizer)}


def load_train_state(model, optimizer, restored: dict) -> None:

    nnx.update(model, restored["model"])
    nnx.update(optimizer, restored["optimizer"])


def manager(root: str, *, save_every: int = 1, max_to_keep: int | None = 3, commit_file: bool = False,
            enable_async: bool = True):
    """An Orbax ``CheckpointManager`` for ``root``. ``commit_file`` picks the atomicity protocol
    meant for object stores (write in place, then ``commit_success.txt``) over the POSIX one
    (write a ``.orbax-checkpoint-tmp`` folder, then rename it)."""
    import orbax.checkpoint as ocp
    from orbax.checkpoint import options as ocp_options

    mode = ocp_options.AtomicityMode.COMMIT_FILE if commit_file else ocp_options.AtomicityMode.ATOMIC_RENAME
    options = ocp.CheckpointManagerOptions(
        save_interval_steps=save_every, max_to_keep=max_to_keep, enable_async_checkpointing=enable_async,
        atomicity_options=ocp_options.AtomicityOptions(mode=mode))
    return ocp.CheckpointManager(os.path.abspath(root), options=options)


def save_args(state: dict, position: dict):
    """What one step of a manager saves: the training state (``StandardSave``) and the data
    pipeline's position (``JsonSave`` of ``batches.get_state()``), the two items of :data:`ITEMS`."""
    import orbax.checkpoint as ocp

    if not isinstance(position, dict):
        raise TypeError(f"the data item is the pipeline's position, batches.get_state() (a dict), not {position!r}")
    return ocp.args.Composite(state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(position))


def restore_args(model, optimizer):
    import orbax.checkpoint as ocp

    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, train_state(model, optimizer))
    return ocp.args.Composite(state=ocp.args.StandardRestore(abstract), data=ocp.args.JsonRestore())


def run(root: str, steps: int, *, seed: int = 0, save_every: int = 1, max_to_keep: int | None = 3,
        commit_file: bool = False, log=None) -> tuple[object, object, list[int]]:
    """Train to ``steps`` steps on ``Batches(seed)``, resuming from the latest step in ``root`` (a
    step is the number of steps trained: its training state and the pipeline's position, both
    restored); save every ``save_every`` steps and at the end. Returns (model, optimizer, the steps
    this call ran)."""
    model = make_model(seed)
    optimizer = make_optimizer(model)
    batches = Batches(seed)
    step_fn = train_step()
    mngr = manager(root, save_every=save_every, max_to_keep=max_to_keep, commit_file=commit_file)
    start = mngr.latest_step() or 0
    if start:
        restored = mngr.restore(start, args=restore_args(model, optimizer))
        load_train_state(model, optimizer, restored["state"])
        batches.set_state(restored["data"])
    say = log or (lambda line: None)
    say(f"resume {start}")
    ran = []
    for step in range(start, steps):
        x, y = next(batches)
        step_fn(model, optimizer, x, y)
        ran.append(step)
        say(f"step {step}")
        if (step + 1) % save_every == 0 or step + 1 == steps:
            mngr.save(step + 1, args=save_args(train_state(model, optimizer), batches.get_state()))
            say(f"save {step + 1}")
    mngr.wait_until_finished()
    mngr.close()
    say("done")
    return model, optimizer, ran


def params_of(model) -> dict:
    """The model's parameters as NumPy arrays, by path: to compare two runs bit for bit."""

    flat = jax.tree_util.tree_leaves_with_path(nnx.state(model, nnx.Param))
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}


def uninterrupted_params(total_steps: int, seed: int) -> dict:
    """What a run of problem 5.3 ends with when nothing interrupts it and nothing is saved: the
    parameters it is compared with, bit for bit."""
    model = make_model(seed)
    optimizer = make_optimizer(model)
    batches = Batches(seed)
    step = train_step()
    for _ in range(int(total_steps)):
        x, y = next(batches)
        step(model, optimizer, x, y)
    return params_of(model)


def resumed_without_position(total_steps: int, seed: int, at: int) -> dict:
    """What a run of problem 5.3 ends with when it is started again at step ``at`` and restores the
    training state but not the pipeline's position: the state after ``at`` steps, then the steps that
    remain on a fresh ``Batches(seed)``, epoch 0 again (a resume that saved the step as its data item,
    or never called ``batches.set_state``). The notebook's check tells this mistake by it."""
    model = make_model(seed)
    optimizer = make_optimizer(model)
    step = train_step()
    batches = Batches(seed)
    for _ in range(int(at)):
        step(model, optimizer, *next(batches))
    batches = Batches(seed)  # the position lost
    for _ in range(int(total_steps) - int(at)):
        step(model, optimizer, *next(batches))
    return params_of(model)


def state_path(path) -> str:
    """A leaf's path in a training state as ``model/layers/0/kernel``: the same whether the tree is
    the live one (``nnx.State``, whose leaves end in ``.value``), a pure dict, or one restored
    with no target (string keys): how the grader matches a checkpoint's leaves with its own."""
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
    if parts and parts[-1] == "value":
        parts.pop()
    return "/".join(parts)


def flat_state(tree) -> dict:
    """A training state's leaves as NumPy arrays, by :func:`state_path`."""

    return {state_path(path): np.asarray(leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def planted_runs(total_steps: int, seed: int, plant_seed: int) -> dict:
    """What problem 5.3's grader needs to prove a resume from what was saved, for every step s a
    run may stand at (1..total_steps): ``saved[s]``, the training state after s steps of the run
    (what a committed step s must hold, by :func:`state_path`); ``planted[s]``, another valid state
    after s steps, of a run the learner cannot compute (another model, another pipeline, from
    ``plant_seed``), which the grader writes into that step in place of the saved one; and
    ``final[s]``, the parameters a run ends with (by :func:`params_of`'s paths) when it restores
    that planted state and the saved data position and trains the steps that remain;
    ``fresh_data[s]``, what it ends with when it restores the planted state but not the position (a
    fresh pipeline, epoch 0 again: the mistake the grader names); and ``uninterrupted``, the
    parameters after all the steps, nothing planted (:func:`uninterrupted_params`)."""
    total_steps = int(total_steps)
    step = train_step()
    # One model and optimizer for every run, loaded with each run's values: a new model would
    # make the jitted step trace again (half a second each).
    model = make_model(seed)
    optimizer = make_optimizer(model)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(train_state(model, optimizer))

    def load(flat: dict) -> None:
        values = [jax.numpy.asarray(flat[state_path(path)]) for path, _ in leaves]
        load_train_state(model, optimizer, jax.tree_util.tree_unflatten(treedef, values))

    other_model = make_model(plant_seed)
    starts = {seed: flat_state(train_state(model, optimizer)),
              plant_seed: flat_state(train_state(other_model, make_optimizer(other_model)))}

    def states(model_seed: int, data_seed: int):
        load(starts[model_seed])
        batches = Batches(data_seed)
        out = {}
        for s in range(1, total_steps + 1):
            step(model, optimizer, *next(batches))
            out[s] = (flat_state(train_state(model, optimizer)), batches.get_state())
        return out

    saved = states(seed, seed)
    uninterrupted = params_of(model)
    other = states(plant_seed, plant_seed)
    final, fresh_data = {}, {}
    for s in range(1, total_steps + 1):
        for out, position in ((final, saved[s][1]), (fresh_data, None)):
            load(other[s][0])
            batches = Batches(seed)
            if position is not None:
                batches.set_state(position)
            for _ in range(total_steps - s):
                step(model, optimizer, *next(batches))
            out[s] = params_of(model)
    return {"saved": {s: v[0] for s, v in saved.items()}, "planted": {s: v[0] for s, v in other.items()},
            "final": final, "fresh_data": fresh_data, "uninterrupted": uninterrupted}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptlab.training", description=__doc__.split("\n\n")[0])
    parser.add_argument("root")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-every", type=int, default=1)
    parser.add_argument("--max-to-keep", type=int, default=3)
    parser.add_argument("--commit-file", action="store_true")
    parser.add_argument("--out", help="write the final parameters here (.npz)")
    args = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu")

    def log(line: str) -> None:
        print(line, flush=True)

    model, _, _ = run(args.root, args.steps, seed=args.seed, save_every=args.save_every,
                      max_to_keep=args.max_to_keep, commit_file=args.commit_file, log=log)
    if args.out:
        np.savez(args.out, **params_of(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
