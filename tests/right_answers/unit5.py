"""Unit 5's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit5.py."""

from autograder.units.unit5 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

STATE = [
    # By hand: what optax and NNX keep, from their documentation, and problem 2.6's rules written out
    # (the shard split among its replicas along its first dimension they divide, else replica 0).
    ("by_hand_with_problem_2_6_rules", """
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "uint32": 4}


def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host):
    axes = list(mesh_shape)
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    named = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [n // math.prod(mesh_shape[a] for a in e) for n, e in zip(global_shape, named)]
    used = {a for e in named for a in e}
    replicas = math.prod(mesh_shape[a] for a in axes if a not in used)
    shard = math.prod(local) * itemsize
    split = any(n % replicas == 0 for n in local) and replicas > 1
    hosts = {}
    seen = set()
    for device, coords in enumerate(itertools.product(*(range(mesh_shape[a]) for a in axes))):
        where = dict(zip(axes, coords))
        block = tuple(sum(where[a] * math.prod(mesh_shape[b] for b in e[i + 1:]) for i, a in enumerate(e)) for e in named)
        if split:
            n = shard // replicas
        else:
            n = 0 if block in seen else shard
        seen.add(block)
        host = device // devices_per_host
        hosts[host] = hosts.get(host, 0) + n
    return hosts


def training_state_bytes(params, specs, mesh_shape, devices_per_host, mu_dtype=None, accumulate=1):
    hosts = math.prod(mesh_shape.values()) // devices_per_host
    total = {h: 0 for h in range(hosts)}
    for name, (shape, dtype) in params.items():
        dtypes = [dtype, mu_dtype or dtype, dtype]  # the parameter, mu (mu_dtype), nu (the parameter's)
        if accumulate > 1:
            dtypes.append("float32")  # MultiSteps' accumulated gradients: accumulator_dtype float32
        for dt in dtypes:
            for h, n in bytes_written_per_host(shape, ITEMSIZE[dt], mesh_shape, specs[name], devices_per_host).items():
                total[h] += n
    scalars = 2 + (2 if accumulate > 1 else 0)  # count, step (mini_step, gradient_step)
    total[0] += 4 * scalars  # replicated scalars: replica 0, device 0, host 0
    return total
"""),
    # A real NNX model and optimizer, built abstractly (nnx.eval_shape: nothing allocated), each leaf
    # placed by its path and counted with JAX's own shardings and Orbax's replica slices.
    ("nnx_eval_shape_and_orbax_replica_slices", """
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from orbax.checkpoint._src.serialization import replica_slices


class Weights(nnx.Module):
    def __init__(self, params):
        self.p = nnx.Dict({k: nnx.Param(jnp.zeros(shape, dtype)) for k, (shape, dtype) in params.items()})


def training_state_bytes(params, specs, mesh_shape, devices_per_host, mu_dtype=None, accumulate=1):
    def build():
        tx = optax.adamw(1e-3, mu_dtype=mu_dtype)
        if accumulate > 1:
            tx = optax.MultiSteps(tx, every_k_schedule=accumulate)
        model = Weights(params)
        return nnx.state(model), nnx.state(nnx.Optimizer(model, tx, wrt=nnx.Param))

    abstract = nnx.eval_shape(build)
    n = math.prod(mesh_shape.values())
    mesh = jax.make_mesh(tuple(mesh_shape.values()), tuple(mesh_shape), devices=jax.devices()[:n])
    out = {h: 0 for h in range(n // devices_per_host)}
    for path, leaf in jax.tree_util.tree_leaves_with_path(abstract):
        keys = [getattr(k, "key", None) for k in path]
        name = next((k for k in reversed(keys) if k in params), None)
        spec = PartitionSpec(*specs[name]) if name is not None and leaf.ndim else PartitionSpec()
        sharding = NamedSharding(mesh, spec)
        shard = sharding.shard_shape(leaf.shape)
        array = jax.make_array_from_callback(leaf.shape, sharding, lambda index: np.zeros(shard, leaf.dtype))
        for piece in replica_slices.get_replica_slices(array, 0, True).replica_slices:
            (device,) = piece.unsliced_data.devices()
            elements = math.prod(len(range(*s.indices(dim))) for s, dim in zip(piece.index, leaf.shape))
            out[device.id // devices_per_host] += elements * leaf.dtype.itemsize
    return out
"""),
    # optax's state read with optax.tree_utils-free jax.eval_shape, and the bytes per device from
    # JAX's devices_indices_map: replicas of a block found by grouping devices holding the same index.
    ("eval_shape_and_devices_indices_map", """
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding, PartitionSpec


def _per_host(shape, dtype, spec, mesh, devices_per_host, out):
    sharding = NamedSharding(mesh, PartitionSpec(*spec))
    holders = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        key = tuple(s.indices(d)[:2] for s, d in zip(index, shape))
        holders.setdefault(key, []).append(device)
    itemsize = jnp.dtype(dtype).itemsize
    order = {d.id: i for i, d in enumerate(mesh.devices.flat)}
    for key, devices in holders.items():
        devices.sort(key=lambda d: order[d.id])  # replica ids follow the mesh's order
        local = [b - a for a, b in key]
        nbytes = math.prod(local) * itemsize
        if len(devices) > 1 and any(n % len(devices) == 0 for n in local):
            for d in devices:
                out[d.id // devices_per_host] += nbytes // len(devices)
        else:
            out[devices[0].id // devices_per_host] += nbytes


def training_state_bytes(params, specs, mesh_shape, devices_per_host, mu_dtype=None, accumulate=1):
    tx = optax.adamw(1e-3, mu_dtype=mu_dtype)
    if accumulate > 1:
        tx = optax.MultiSteps(tx, every_k_schedule=accumulate)
    shapes = {k: jax.ShapeDtypeStruct(s, jnp.dtype(d)) for k, (s, d) in params.items()}
    opt_state = jax.eval_shape(tx.init, shapes)
    n = math.prod(mesh_shape.values())
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    out = {h: 0 for h in range(n // devices_per_host)}
    for name, leaf in shapes.items():
        _per_host(leaf.shape, leaf.dtype, specs[name], mesh, devices_per_host, out)
    for path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
        name = path[-1].key if path and isinstance(path[-1], jax.tree_util.DictKey) else None
        _per_host(leaf.shape, leaf.dtype, specs[name] if leaf.ndim else (), mesh, devices_per_host, out)
    out[0] += 4  # nnx.Optimizer's own step (uint32), replicated: written by replica 0
    return out
"""),
]
PREEMPTED = [
    # pathlib and a regular expression for the names; Orbax's PyTreeCheckpointer (not the
    # StandardCheckpointer) to try each committed step's state, newest first.
    ("pathlib_and_pytree_checkpointer", """
import re
from pathlib import Path


def latest_restorable_step(ckpt_root):
    committed = [int(p.name) for p in Path(ckpt_root).iterdir()
                 if re.fullmatch(r"[0-9]+", p.name) and p.is_dir() and (p / "commit_success.txt").is_file()]
    for step in sorted(committed, reverse=True):
        try:
            with ocp.PyTreeCheckpointer() as checkpointer:
                checkpointer.restore(Path(ckpt_root) / str(step) / "state")
        except Exception:
            continue
        return step
    return None
"""),
    # Orbax's own finalized check told the object-store protocol (which a finished save of either
    # protocol passes), and Orbax's v1 API to load the state item of the step.
    ("orbax_check_told_the_protocol_and_v1_load", """
from orbax.checkpoint import options as ocp_options
from orbax.checkpoint import v1 as ocp_v1


def latest_restorable_step(ckpt_root):
    commit_file = ocp_options.AtomicityOptions(mode=ocp_options.AtomicityMode.COMMIT_FILE)
    steps = sorted((int(n) for n in os.listdir(ckpt_root) if n.isdigit()), reverse=True)
    for step in steps:
        folder = os.path.join(ckpt_root, str(step))
        if not ocp.step.is_checkpoint_finalized(folder, atomicity_options=commit_file):
            continue
        try:
            ocp_v1.load(folder, checkpointable_name="state")  # the step folder holds two items
        except Exception:
            continue
        return step
    return None
"""),
    # A read-only CheckpointManager told the object-store protocol lists the committed steps; each is
    # restored through the manager, item by name, newest first.
    ("read_only_manager_told_the_protocol", """
from orbax.checkpoint import options as ocp_options


def latest_restorable_step(ckpt_root):
    options = ocp.CheckpointManagerOptions(
        read_only=True, atomicity_options=ocp_options.AtomicityOptions(mode=ocp_options.AtomicityMode.COMMIT_FILE))
    with ocp.CheckpointManager(ckpt_root, item_names=("state", "data"), options=options) as mngr:
        for step in sorted(mngr.all_steps(), reverse=True):
            if not os.path.isfile(os.path.join(ckpt_root, str(step), "commit_success.txt")):
                continue
            try:
                mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
            except Exception:
                continue
            return step
    return None
"""),
]

TRAIN = [
    # Manager options: folders named step_1, step_2, ... (step_prefix), one save per step, two kept,
    # the items declared up front; the latest step from the manager, as the reference does.
    ("step_prefix_two_kept", """
def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    train = training.train_step()
    options = ocp.CheckpointManagerOptions(step_prefix="step", max_to_keep=2, save_interval_steps=1)
    with ocp.CheckpointManager(ckpt_dir, item_names=("state", "data"), options=options) as mngr:
        first = mngr.latest_step() or 0
        if first:
            like = jax.tree.map(ocp.utils.to_shape_dtype_struct, training.train_state(model, optimizer))
            got = mngr.restore(first, args=ocp.args.Composite(state=ocp.args.StandardRestore(like),
                                                              data=ocp.args.JsonRestore()))
            training.load_train_state(model, optimizer, got.state)
            batches.set_state(got.data)
        for done in range(first + 1, total_steps + 1):
            train(model, optimizer, *next(batches))
            mngr.save(done, args=ocp.args.Composite(
                state=ocp.args.StandardSave(training.train_state(model, optimizer)),
                data=ocp.args.JsonSave(batches.get_state())))
        mngr.wait_until_finished()
    return training.params_of(model), first
"""),
    # Synchronous saves with the handlers given per item, zero-padded step folders (00000001, ...),
    # and the fresh state itself as the restore's template (its arrays' shapes, dtypes, shardings).
    ("synchronous_fixed_length_names", """
def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    train = training.train_step()
    mngr = ocp.CheckpointManager(
        ckpt_dir,
        item_handlers={"state": ocp.StandardCheckpointHandler(), "data": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(step_format_fixed_length=8, enable_async_checkpointing=False))
    steps = mngr.all_steps()
    start = max(steps) if steps else 0
    if start:
        restored = mngr.restore(start, args=ocp.args.Composite(state=ocp.args.StandardRestore(training.train_state(model, optimizer)),
                                                               data=ocp.args.JsonRestore()))
        training.load_train_state(model, optimizer, restored["state"])
        batches.set_state(restored["data"])
    step = start
    while step < total_steps:
        x, y = next(batches)
        train(model, optimizer, x, y)
        step += 1
        mngr.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(training.train_state(model, optimizer)),
            data=ocp.args.JsonSave(batches.get_state())))
    mngr.close()
    return training.params_of(model), start
"""),
    # Orbax's v1 API: a training Checkpointer saving every step (a fixed interval of 1: its default
    # policy skips a step while a save is under way) with both items as checkpointables.
    ("orbax_v1_training_checkpointer", """
from orbax.checkpoint import v1 as ocp_v1


def train_with_preemption(ckpt_dir, total_steps, seed):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    train = training.train_step()
    every_step = ocp_v1.training.save_decision_policies.FixedIntervalPolicy(1)
    with ocp_v1.training.Checkpointer(ckpt_dir, save_decision_policy=every_step) as ckptr:
        latest = ckptr.latest
        first = latest.step if latest is not None else 0
        if latest is not None:
            abstract = {"state": jax.tree.map(ocp.utils.to_shape_dtype_struct, training.train_state(model, optimizer)),
                        "data": None}
            loaded = ckptr.load_checkpointables(latest, abstract)
            training.load_train_state(model, optimizer, loaded["state"])
            batches.set_state(loaded["data"])
        for s in range(first, total_steps):
            train(model, optimizer, *next(batches))
            ckptr.save_checkpointables_async(s + 1, {"state": training.train_state(model, optimizer),
                                                     "data": batches.get_state()})
        ckptr.wait()
    return training.params_of(model), first
"""),
]

RIGHT = {
    "training_state_bytes": STATE,
    "latest_restorable_step": PREEMPTED,
    "train_with_preemption": TRAIN,
}
