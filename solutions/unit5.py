"""Reference solutions for Unit 5: checkpointing a training run.

Problem 5.1 asks optax what the optimizer's state holds (``jax.eval_shape`` of its ``init``) and JAX
and Orbax what each array's save writes (``ckptlab.explore.placement``, the lessons' explorer), as a
learner may; problem 2.6 predicts the same, and the hidden tests' diagnoses use it.
"""

from __future__ import annotations

import os

import jax
import orbax.checkpoint as ocp

from ckptlab import training
from ckptlab.explore import placement


def training_state_bytes(params, specs, mesh_shape, devices_per_host, mu_dtype=None, accumulate=1):
    import jax.numpy as jnp
    import optax

    # Ask optax what its state holds (shapes and dtypes, nothing allocated), as a learner may.
    abstract = {name: jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype)) for name, (shape, dtype) in params.items()}
    tx = optax.adamw(1e-3, mu_dtype=mu_dtype)
    if accumulate > 1:
        tx = optax.MultiSteps(tx, every_k_schedule=accumulate)
    state = {"params": abstract, "opt_state": jax.eval_shape(tx.init, abstract),
             "step": jax.ShapeDtypeStruct((), jnp.uint32)}  # nnx.Optimizer's own step

    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        keys = [getattr(k, "key", None) for k in path]
        name = next((k for k in reversed(keys) if k in params), None)
        spec = specs[name] if name is not None and leaf.ndim else ()  # a scalar is replicated
        # what JAX and Orbax say this array's save writes, per host
        for host, n in placement(leaf.shape, leaf.dtype, mesh_shape, spec, devices_per_host)["bytes_per_host"].items():
            out[host] = out.get(host, 0) + n
    return out


def latest_restorable_step(ckpt_root):
    steps = sorted((int(name) for name in os.listdir(ckpt_root)
                    if name.isdigit() and os.path.isdir(os.path.join(ckpt_root, name))), reverse=True)
    for step in steps:
        folder = os.path.join(ckpt_root, str(step))
        if not os.path.isfile(os.path.join(folder, "commit_success.txt")):
            continue  # never committed: a save written in place, cut short
        try:
            ocp.StandardCheckpointer().restore(os.path.join(folder, "state"))
        except Exception:  # noqa: BLE001 - any failure to restore means: not this step
            continue
        return step
    return None


def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    mngr = ocp.CheckpointManager(ckpt_dir)
    latest = mngr.latest_step()
    if latest is not None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, training.train_state(model, optimizer))
        restored = mngr.restore(latest, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                data=ocp.args.JsonRestore()))
        training.load_train_state(model, optimizer, restored["state"])
        batches.set_state(restored["data"])
    for s in range(latest or 0, total_steps):
        x, y = next(batches)
        step(model, optimizer, x, y)
        mngr.save(s + 1, args=ocp.args.Composite(state=ocp.args.StandardSave(training.train_state(model, optimizer)),
                                                 data=ocp.args.JsonSave(batches.get_state())))
    mngr.wait_until_finished()
    mngr.close()
    return training.params_of(model), latest or 0
