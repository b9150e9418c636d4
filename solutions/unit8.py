"""Reference solutions for Unit 8: preemption."""

from __future__ import annotations

import os
import signal

import grain
import jax
import orbax.checkpoint as ocp

from ckptlab import training


def host_batch(step, host, hosts, seed, examples, global_batch):
    if hosts < 1 or global_batch % hosts:
        raise ValueError(f"{hosts} hosts do not divide a global batch of {global_batch}")
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0 to {hosts - 1}")
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    per_host = global_batch // hosts
    start = step * global_batch + host * per_host
    return [int(order[i]) for i in range(start, start + per_host)]


def _committed(tier):
    """The steps a tier's folder holds committed: folders named by the step alone (a save cut short
    keeps its temporary name, ``<step>.orbax-checkpoint-tmp-...``)."""
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit() and os.path.isdir(os.path.join(tier, name))}


def newest_step_across_tiers(tiers, slices):
    local = os.path.join(tiers, "local")
    reader = {}  # step -> the lowest-numbered slice whose every process holds it
    for number, processes in enumerate(slices):
        held = [_committed(os.path.join(local, str(p))) for p in processes]
        for step in set.intersection(*held) if held else ():
            reader.setdefault(step, number)
    steps = set(reader) | _committed(os.path.join(tiers, "persistent"))
    if not steps:
        return None
    newest = max(steps)
    return newest, reader.get(newest, 0)  # 0: the primary slice, reading the persistent tier


class _Preempted(Exception):
    """Raised by the evaluation when a SIGTERM has come: the loop saves and returns."""


def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    signalled = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: signalled.append(signum))
    mngr = ocp.CheckpointManager(ckpt_dir)

    def save(s):
        mngr.save(s, args=ocp.args.Composite(state=ocp.args.StandardSave(training.train_state(model, optimizer)),
                                             data=ocp.args.JsonSave(batches.get_state())), force=True)

    try:
        latest = mngr.latest_step()
        if latest is not None:
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, training.train_state(model, optimizer))
            restored = mngr.restore(latest, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                    data=ocp.args.JsonRestore()))
            training.load_train_state(model, optimizer, restored["state"])
            batches.set_state(restored["data"])
        done = saved = latest or 0
        try:
            for s in range(done, total_steps):
                if signalled:
                    raise _Preempted
                x, y = next(batches)
                step(model, optimizer, x, y)
                done = s + 1
                if done % save_every == 0 or done == total_steps:
                    save(done)
                    saved = done
                if done % eval_every == 0:
                    for ex, ey in training.eval_batches(seed):
                        if signalled:
                            raise _Preempted
                        training.eval_loss(model, ex, ey)
        except _Preempted:
            if done != saved:
                save(done)  # the steps finished since the last save, saved while the window is open
        mngr.wait_until_finished()
    finally:
        mngr.close()
        signal.signal(signal.SIGTERM, previous)
    return training.params_of(model), latest or 0
