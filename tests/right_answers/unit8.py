"""Unit 8's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit8.py."""

from autograder.units.unit8 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

BATCH = [
    # A Python slice of the repeated MapDataset: Grain answers it with a MapDataset of those
    # positions (a SliceMapDataset), read here in order.
    ("python_slice_of_the_repeated_order", """
def host_batch(step, host, hosts, seed, examples, global_batch):
    if hosts <= 0 or global_batch % hosts != 0:
        raise ValueError(f"a global batch of {global_batch} does not split evenly over {hosts} hosts")
    if host not in range(hosts):
        raise ValueError(f"host {host} is out of range for a job of {hosts} hosts")
    rows = global_batch // hosts
    start = step * global_batch + host * rows
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(i) for i in order[start:start + rows]]
"""),
    # The repeated order batched by the global batch (batches then cross epoch ends), the step's
    # batch read by index and this host's rows cut from it with NumPy.
    ("global_batches_then_rows", """
def host_batch(step, host, hosts, seed, examples, global_batch):
    share, left = divmod(global_batch, hosts) if hosts > 0 else (0, 1)
    if left:
        raise ValueError(f"global_batch={global_batch} is not a multiple of hosts={hosts}")
    if host < 0 or host >= hosts:
        raise ValueError(f"host={host}: expected 0 <= host < {hosts}")
    batches = grain.MapDataset.range(examples).shuffle(seed=seed).repeat().batch(global_batch)
    return np.asarray(batches[step])[host * share:(host + 1) * share].tolist()
"""),
    # Batched by the host's share instead: the global batch of step s is the shares
    # s * hosts to s * hosts + hosts - 1, in host order.
    ("per_host_batches_by_index", """
def host_batch(step, host, hosts, seed, examples, global_batch):
    problems = []
    if hosts < 1 or global_batch % hosts:
        problems.append(f"{hosts} hosts do not divide the global batch of {global_batch}")
    elif not 0 <= host < hosts:
        problems.append(f"host {host} is not among the {hosts} hosts")
    if problems:
        raise ValueError("; ".join(problems))
    shares = grain.MapDataset.range(examples).shuffle(seed=seed).repeat().batch(global_batch // hosts)
    return list(map(int, shares[step * hosts + host]))
"""),
    # An iterator over the order, placed by its state (Grain's checkpointable position, here
    # computed from the step, never kept between calls), read one id at a time.
    ("iterator_placed_by_its_state", """
def host_batch(step, host, hosts, seed, examples, global_batch):
    if not hosts or global_batch % hosts:
        raise ValueError(f"cannot split {global_batch} rows among {hosts} hosts")
    if not (0 <= host < hosts):
        raise ValueError(f"no host number {host} with {hosts} hosts")
    per = global_batch // hosts
    it = iter(grain.MapDataset.range(examples).shuffle(seed=seed).repeat().to_iter_dataset())
    it.set_state({"next_index": step * global_batch + host * per})
    out = []
    while len(out) < per:
        out.append(int(next(it)))
    return out
"""),
]

# --- 8.2 newest_step_across_tiers (its answers below this line) ---
TIERS = [
    # Orbax's step helpers list each tier's finalized steps; every step either tier holds is tried
    # newest first, locally on every host (all() stops at the first host that fails), then from the
    # persistent tier, each load through Orbax v1; the first step that loads is the answer.
    ("v1_loads_newest_first", """
def _loads(step_dir):
    try:
        ocp.v1.load_checkpointables(step_dir, {"state": None})
    except Exception:
        return False
    return True


def newest_step_across_tiers(tiers):
    local_root = os.path.join(tiers, "local")
    host_dirs = [os.path.join(local_root, h) for h in os.listdir(local_root)]
    persistent_dir = os.path.join(tiers, "persistent")
    on_host = [set(ocp.step.checkpoint_steps(d)) for d in host_dirs]
    in_persistent = set(ocp.step.checkpoint_steps(persistent_dir))
    candidates = set(in_persistent).union(*on_host)
    for step in sorted(candidates, reverse=True):
        if host_dirs and all(step in held for held in on_host) and all(
                _loads(os.path.join(d, str(step))) for d in host_dirs):
            return step, "local"
        if step in in_persistent and _loads(os.path.join(persistent_dir, str(step))):
            return step, "persistent"
    return None
"""),
    # One read-only CheckpointManager per tier lists its committed steps and restores the `state`
    # item by name; the hosts' sets are intersected, and the best (step, tier) is the largest of
    # (step, preference) pairs, the local tier preferred on a tie.
    ("read_only_managers_per_tier", """
import functools


def _restorable(directory):
    options = ocp.CheckpointManagerOptions(read_only=True)
    with ocp.CheckpointManager(directory, item_names=("state",), options=options) as manager:
        good = set()
        for step in manager.all_steps():
            try:
                manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
            except Exception:
                continue
            good.add(step)
        return good


def newest_step_across_tiers(tiers):
    hosts = sorted(os.scandir(os.path.join(tiers, "local")), key=lambda e: int(e.name))
    per_host = [_restorable(e.path) for e in hosts]
    common = functools.reduce(set.intersection, per_host) if per_host else set()
    ranked = [(s, 1, "local") for s in common]
    ranked += [(s, 0, "persistent") for s in _restorable(os.path.join(tiers, "persistent"))]
    if not ranked:
        return None
    step, _, tier = max(ranked)
    return int(step), tier
"""),
    # The persistent tier first (its newest step that restores is the floor), then only the local
    # steps above or at that floor, host by host, each step's state restored with its own metadata
    # as the target: a step a host cannot restore is dropped for every host.
    ("persistent_floor_then_local", """
import re


def _committed(directory):
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted((int(n) for n in names if re.fullmatch(r"[0-9]+", n)
                   and os.path.isdir(os.path.join(directory, n))), reverse=True)


def _state_restores(step_dir):
    path = os.path.join(step_dir, "state")
    checkpointer = ocp.StandardCheckpointer()
    try:
        meta = checkpointer.metadata(path)
        tree = meta.item_metadata if hasattr(meta, "item_metadata") else meta
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), tree)
        checkpointer.restore(path, target)
    except Exception:
        return False
    finally:
        checkpointer.close()
    return True


def newest_step_across_tiers(tiers):
    persistent = os.path.join(tiers, "persistent")
    floor = next((s for s in _committed(persistent) if _state_restores(os.path.join(persistent, str(s)))), None)
    local = os.path.join(tiers, "local")
    hosts = os.listdir(local)
    candidates = None
    for host in hosts:
        mine = {s for s in _committed(os.path.join(local, host)) if floor is None or s >= floor}
        candidates = mine if candidates is None else candidates & mine
    for step in sorted(candidates or (), reverse=True):
        if all(_state_restores(os.path.join(local, h, str(step))) for h in hosts):
            return step, "local"
    return None if floor is None else (floor, "persistent")
"""),
    # epath and Orbax's step-name format find each tier's step folders (temporary ones excluded),
    # the state restored with a PyTreeCheckpointer; NumPy intersects the hosts' steps.
    ("epath_name_format_and_numpy", """
from etils import epath


def _good_steps(directory):
    directory = epath.Path(directory)
    good = []
    for meta in ocp.step.standard_name_format().find_all(directory):
        if ocp.step.is_tmp_checkpoint(meta.path) or meta.path.name != str(meta.step):
            continue
        try:
            with ocp.PyTreeCheckpointer() as checkpointer:
                checkpointer.restore(meta.path / "state")
        except Exception:
            continue
        good.append(meta.step)
    return np.array(sorted(good), dtype=np.int64)


def newest_step_across_tiers(tiers):
    root = epath.Path(tiers)
    hosts = [p for p in (root / "local").iterdir()]
    common = None
    for host in hosts:
        steps = _good_steps(host)
        common = steps if common is None else np.intersect1d(common, steps)
    persistent = _good_steps(root / "persistent")
    best_local = int(common.max()) if common is not None and common.size else -1
    best_persistent = int(persistent.max()) if persistent.size else -1
    if best_local < 0 and best_persistent < 0:
        return None
    if best_local >= best_persistent:
        return best_local, "local"
    return best_persistent, "persistent"
"""),
]

# --- 8.3 train_with_grace (its answers below this line) ---
GRACE = [
    # A manager whose save_interval_steps is save_every: the periodic saves go through, the last step and
    # the step saved on a SIGTERM are forced. The handler only appends to a list, which the loop reads
    # after each step and at each evaluation batch; the previous handler comes back at the end.
    ("manager_interval_force", """
def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    stop = []

    def on_term(signum, frame):
        stop.append(signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    options = ocp.CheckpointManagerOptions(save_interval_steps=save_every)
    mngr = ocp.CheckpointManager(ckpt_dir, options=options)
    try:
        first = mngr.latest_step() or 0
        if first:
            restored = mngr.restore(first, args=training.restore_args(model, optimizer))
            training.load_train_state(model, optimizer, restored["state"])
            batches.set_state(restored["data"])

        def save(s, force=False):
            mngr.save(s, args=training.save_args(training.train_state(model, optimizer), batches.get_state()),
                      force=force)
            return s

        done = saved = first
        while done < total_steps and not stop:
            x, y = next(batches)
            step(model, optimizer, x, y)
            done += 1
            if done % save_every == 0 or done == total_steps:
                saved = save(done, force=done == total_steps)
            if done % eval_every == 0:
                for ex, ey in training.eval_batches(seed):
                    if stop:
                        break
                    training.eval_loss(model, ex, ey)
        if stop and saved != done:
            save(done, force=True)  # not a multiple of save_every: the manager saves it only when forced
        mngr.wait_until_finished()
    finally:
        mngr.close()
        signal.signal(signal.SIGTERM, previous)
    return training.params_of(model), first
"""),
    # Orbax's v1 training Checkpointer, its policy a fixed interval of save_every: every step is offered
    # to it, the last one forced; the SIGTERM sets a threading.Event, looked at inside the evaluation.
    ("orbax_v1_event", """
import threading


def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    policies = ocp.v1.training.save_decision_policies
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    term = threading.Event()
    before = signal.signal(signal.SIGTERM, lambda signum, frame: term.set())
    try:
        with ocp.v1.training.Checkpointer(
                ckpt_dir, save_decision_policy=policies.FixedIntervalPolicy(save_every)) as ckptr:
            latest = ckptr.latest
            start = 0 if latest is None else latest.step
            if start:
                like = {"state": jax.tree.map(ocp.utils.to_shape_dtype_struct,
                                              training.train_state(model, optimizer)), "data": None}
                loaded = ckptr.load_checkpointables(start, like)
                training.load_train_state(model, optimizer, loaded["state"])
                batches.set_state(loaded["data"])
            last_saved = start
            finished = start
            for s in range(start + 1, total_steps + 1):
                x, y = next(batches)
                step(model, optimizer, x, y)
                finished = s
                # the policy keeps the multiples of save_every; the last step is forced
                if ckptr.save_checkpointables_async(
                        s, {"state": training.train_state(model, optimizer), "data": batches.get_state()},
                        force=s == total_steps) is not None:
                    last_saved = s
                if term.is_set():
                    break
                if s % eval_every == 0:
                    for x_eval, y_eval in training.eval_batches(seed):
                        training.eval_loss(model, x_eval, y_eval)
                        if term.is_set():
                            break
                if term.is_set():
                    break
            if term.is_set() and last_saved != finished:
                ckptr.save_checkpointables_async(
                    finished, {"state": training.train_state(model, optimizer), "data": batches.get_state()},
                    force=True)
            ckptr.wait()
    finally:
        signal.signal(signal.SIGTERM, before)
    return training.params_of(model), start
"""),
    # The handler raises, but only while an evaluation runs (it changes nothing: leaving it at any
    # bytecode is safe); during a training step or a save it only notes the signal, so no state is
    # left half-updated. Synchronous saves, by hand, forced, in folders named ckpt_<step>.
    ("raises_out_of_the_evaluation", """
class _LeaveEvaluation(Exception):
    pass  # raised by the SIGTERM handler to leave an evaluation at once


def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    # The handler raises only while an evaluation runs (it changes nothing, so leaving it anywhere
    # is safe); during a training step or a save it only notes the signal, for the loop to see.
    status = {"evaluating": False, "term": False}

    def on_sigterm(signum, frame):
        status["term"] = True
        if status["evaluating"]:
            status["evaluating"] = False
            raise _LeaveEvaluation()

    mngr = ocp.CheckpointManager(
        ckpt_dir,
        item_handlers={"state": ocp.StandardCheckpointHandler(), "data": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(step_prefix="ckpt", enable_async_checkpointing=False))

    def checkpoint(n):
        mngr.save(n, args=ocp.args.Composite(state=ocp.args.StandardSave(training.train_state(model, optimizer)),
                                             data=ocp.args.JsonSave(batches.get_state())), force=True)

    old_handler = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        steps = mngr.all_steps()
        resumed = max(steps) if steps else 0
        if resumed:
            got = mngr.restore(resumed, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(training.train_state(model, optimizer)), data=ocp.args.JsonRestore()))
            training.load_train_state(model, optimizer, got["state"])
            batches.set_state(got["data"])
        trained = on_disk = resumed
        while trained < total_steps and not status["term"]:
            x, y = next(batches)
            step(model, optimizer, x, y)
            trained += 1
            if trained % save_every == 0 or trained == total_steps:
                checkpoint(trained)  # synchronous: committed when it returns
                on_disk = trained
            if trained % eval_every == 0 and not status["term"]:
                try:
                    status["evaluating"] = True
                    losses = [training.eval_loss(model, *b) for b in training.eval_batches(seed)]
                    status["evaluating"] = False
                except _LeaveEvaluation:
                    pass
        if status["term"] and on_disk != trained:
            checkpoint(trained)
    finally:
        status["evaluating"] = False
        signal.signal(signal.SIGTERM, old_handler)
        mngr.close()
    return training.params_of(model), resumed
"""),
    # A context manager installs the handler and puts the old one back; the manager's should_save_fn
    # keeps the multiples of save_every of the steps offered to it; the evaluation is cut short with
    # itertools.takewhile. Zero-padded step folders, three kept.
    ("should_save_fn_and_a_guard", """
import itertools


# Notes a SIGTERM while it is active; the handler it replaced comes back on exit.
class _TermGuard:

    def __init__(self):
        self.received = False

    def __enter__(self):
        self._previous = signal.signal(signal.SIGTERM, self._note)
        return self

    def _note(self, signum, frame):
        self.received = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self._previous)
        return False


def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    update = training.train_step()
    periodic = lambda step, last: step % save_every == 0  # noqa: E731
    options = ocp.CheckpointManagerOptions(should_save_fn=periodic, max_to_keep=3, step_format_fixed_length=6)
    with _TermGuard() as guard, ocp.CheckpointManager(ckpt_dir, item_names=("state", "data"),
                                                      options=options) as mngr:
        first = mngr.latest_step() or 0
        if first:
            back = mngr.restore(first, args=training.restore_args(model, optimizer))
            training.load_train_state(model, optimizer, back.state)
            batches.set_state(back.data)

        def save(step, force):
            return mngr.save(step, args=training.save_args(training.train_state(model, optimizer),
                                                           batches.get_state()), force=force)

        trained, latest_saved = first, first
        while trained < total_steps:
            update(model, optimizer, *next(batches))
            trained += 1
            # every step is offered to the manager: should_save_fn keeps the periodic ones
            if save(trained, force=trained == total_steps):
                latest_saved = trained
            if guard.received:
                break
            if trained % eval_every == 0:
                evaluation = itertools.takewhile(lambda _: not guard.received, training.eval_batches(seed))
                mean = np.mean([training.eval_loss(model, ex, ey) for ex, ey in evaluation] or [np.nan])
                if guard.received:
                    break
        if guard.received and latest_saved != trained:
            save(trained, force=True)
        mngr.wait_until_finished()
    return training.params_of(model), first
"""),
]

RIGHT = {
    "host_batch": BATCH,
    "newest_step_across_tiers": TIERS,
    "train_with_grace": GRACE,
}
