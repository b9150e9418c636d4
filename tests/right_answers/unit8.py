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
    # The values alone in each message (ValueError's arguments, shown as a tuple), checked with assert-like
    # guards; the host's rows read from the order's batches of one host's share.
    ("values_alone_in_the_messages", """
def host_batch(step, host, hosts, seed, examples, global_batch):
    if hosts not in range(1, global_batch + 1) or global_batch % hosts:
        raise ValueError("hosts, global_batch:", hosts, global_batch)
    if host < 0 or host >= hosts:
        raise ValueError("host, hosts:", host, hosts)
    share = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    first = step * global_batch + share * host
    return [int(x) for x in map(order.__getitem__, range(first, first + share))]
"""),
]

# --- 8.2 newest_step_across_tiers (its answers below this line) ---
TIERS = [
    # Orbax's own step listing per tier (its finalized steps), and per slice a Counter of its processes'
    # steps, as Orbax's manager counts them (a step is the slice's where every process has it); the
    # answer is the largest of (step, read locally, -slice).
    ("orbax_steps_and_a_counter", """
import collections


def _finalized(directory):
    return set(ocp.step.checkpoint_steps(directory)) if os.path.isdir(directory) else set()


def newest_step_across_tiers(tiers, slices):
    options = []
    for number, processes in enumerate(slices):
        counts = collections.Counter()
        for p in processes:
            counts.update(_finalized(os.path.join(tiers, "local", str(p))))
        options += [(step, 1, -number) for step, n in counts.items() if n == len(processes)]
    options += [(step, 0, 0) for step in _finalized(os.path.join(tiers, "persistent"))]
    if not options:
        return None
    step, local, minus_slice = max(options)
    return int(step), -minus_slice if local else 0
"""),
    # Newest first over every step any tier names: the first slice whose every process holds it reads
    # it; else the persistent tier, if it holds it. pathlib and a commit by name alone.
    ("newest_first_with_pathlib", """
import re
from pathlib import Path


def _committed(folder: Path):
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"\\d+", p.name)}


def newest_step_across_tiers(tiers, slices):
    root = Path(tiers)
    local = {p: _committed(root / "local" / str(p)) for procs in slices for p in procs}
    persistent = _committed(root / "persistent")
    for step in sorted(set(persistent).union(*local.values()), reverse=True):
        for number, processes in enumerate(slices):
            if processes and all(step in local[p] for p in processes):
                return step, number
        if step in persistent:
            return step, 0
    return None
"""),
    # Orbax's name format finds each tier's steps (as its emergency manager does, through find_all);
    # the slices' complete steps by reducing their sets, the best pick by comparing newest steps.
    ("name_format_and_reduce", """
import functools


def _steps(directory):
    if not os.path.isdir(directory):
        return frozenset()
    return frozenset(m.step for m in ocp.step.standard_name_format().find_all(directory))


def newest_step_across_tiers(tiers, slices):
    complete = [functools.reduce(frozenset.intersection, [_steps(os.path.join(tiers, "local", str(p))) for p in procs])
                for procs in slices]
    newest_local = max((max(c) for c in complete if c), default=-1)
    newest_persistent = max(_steps(os.path.join(tiers, "persistent")), default=-1)
    if newest_local < 0 and newest_persistent < 0:
        return None
    if newest_local >= newest_persistent:
        return newest_local, next(k for k, c in enumerate(complete) if newest_local in c)
    return newest_persistent, 0
"""),
    # Orbax's own CheckpointManager, read-only, lists each tier's steps (all_steps: the committed ones);
    # newest first over every step listed, slices 1 up before the persistent tier.
    ("read_only_managers_newest_first", """
def _all_steps(folder):
    if not os.path.isdir(folder):
        return set()
    manager = ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(read_only=True, create=False))
    try:
        return set(manager.all_steps())
    finally:
        manager.close()


def newest_step_across_tiers(tiers, slices):
    held = {p: _all_steps(os.path.join(tiers, "local", str(p))) for procs in slices for p in procs}
    persistent = _all_steps(os.path.join(tiers, "persistent"))
    for step in sorted(set().union(persistent, *held.values()), reverse=True):
        for k in range(1, len(slices)):
            if all(step in held[p] for p in slices[k]):
                return (step, k)
        if step in persistent:
            return (step, 0)
    return None
"""),
    # os.walk's first level for each tier's step folders (decimal names without a leading zero), NumPy's
    # intersect1d across a slice's processes, and a running best that a later slice replaces only when
    # newer (or when the best so far is the persistent tier's).
    ("os_walk_and_intersect1d", """
def _committed(folder):
    for _, dirs, _ in os.walk(folder):
        return np.array(sorted(int(d) for d in dirs if d.isascii() and d.isdecimal() and d == str(int(d))),
                        dtype=np.int64)
    return np.array([], dtype=np.int64)


def newest_step_across_tiers(tiers, slices):
    best = None
    persistent = _committed(os.path.join(tiers, "persistent"))
    if persistent.size:
        best = (int(persistent.max()), 0)
    for k, procs in enumerate(slices):
        if k == 0:
            continue
        common = _committed(os.path.join(tiers, "local", str(procs[0])))
        for p in procs[1:]:
            common = np.intersect1d(common, _committed(os.path.join(tiers, "local", str(p))))
        if common.size and (best is None or common.max() > best[0] or (common.max() == best[0] and best[1] == 0)):
            best = (int(common.max()), k)
    return best
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
