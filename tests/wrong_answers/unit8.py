"""Unit 8's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py). Each
is a silent mistake: it raises nothing on good inputs and returns plausible ids, often the right
ones at step 0 or inside the first epoch."""

from autograder.units.unit8 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

# The checks every answer below makes, unless its mistake is in them.
_CHECKS = """
    if hosts < 1 or global_batch % hosts:
        raise ValueError(f"{hosts} hosts do not divide a global batch of {global_batch}")
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0 to {hosts - 1}")
"""


def _answer(body: str, checks: str = _CHECKS) -> str:
    return "\ndef host_batch(step, host, hosts, seed, examples, global_batch):" + checks + body


BATCH = [
    # Grain's per-process sharding idiom: each host its own strided slice of the order, batched.
    # The global batch holds the right ids, in rows laid out by the number of hosts.
    ("strided_host_slice", _answer("""
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    mine = order.slice(slice(host, None, hosts)).batch(global_batch // hosts)
    return [int(i) for i in mine[step]]
"""), "incorrect", "Each host reads every hosts-th id of the order"),
    # The same layout reached from the global batch: rows host, host + hosts, ... of it.
    ("interleaved_rows_of_the_global_batch", _answer("""
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(i) for i in order.batch(global_batch)[step][host::hosts]]
"""), "incorrect", "Host `host` reads consecutive rows of the global batch"),
    # The step forgotten: a pipeline rebuilt after a restart reads from its beginning.
    ("ignores_the_step", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[i]) for i in range(host * per, (host + 1) * per)]
"""), "incorrect", "a pipeline restarted from its beginning"),
    # Batched before repeating, the remainder dropped: no batch crosses an epoch's end.
    ("batches_inside_each_epoch", _answer("""
    per = global_batch // hosts
    batches = grain.MapDataset.range(examples).shuffle(seed=seed).batch(global_batch, drop_remainder=True).repeat()
    return [int(i) for i in batches[step][host * per:(host + 1) * per]]
"""), "incorrect", "Your batches never cross the end of an epoch"),
    # One epoch's permutation read round and round: Grain reshuffles each epoch of a repeat.
    ("first_epoch_order_repeated", _answer("""
    per = global_batch // hosts
    order = list(grain.MapDataset.range(examples).shuffle(seed=seed))
    start = step * global_batch + host * per
    return [int(order[i % examples]) for i in range(start, start + per)]
"""), "incorrect", "you read the first epoch's permutation again"),
    # Each host's own iterator, kept between calls and advanced one batch a call: the step unused.
    ("keeps_an_iterator_per_host", """
import itertools

_ITERATORS = {}


def host_batch(step, host, hosts, seed, examples, global_batch):""" + _CHECKS + """
    per = global_batch // hosts
    key = (host, hosts, seed, examples, global_batch)
    if key not in _ITERATORS:
        it = iter(grain.MapDataset.range(examples).shuffle(seed=seed).repeat().to_iter_dataset())
        next(itertools.islice(it, host * per, host * per), None)  # to this host's first row
        _ITERATORS[key] = it
    it = _ITERATORS[key]
    ids = [int(i) for i in itertools.islice(it, per)]
    next(itertools.islice(it, global_batch - per, global_batch - per), None)  # the other hosts' rows
    return ids
""", "incorrect", "The step says where the global batch starts"),
    # Every host reads the whole global batch (no share taken).
    ("every_host_reads_the_global_batch", _answer("""
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[i]) for i in range(step * global_batch, (step + 1) * global_batch)]
"""), "incorrect", "Return global_batch // hosts ids"),
    # Floors the share: no ValueError when the hosts do not divide the global batch.
    ("floors_the_share", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[step * global_batch + host * per + r]) for r in range(per)]
""", checks="""
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0 to {hosts - 1}")
"""), "incorrect", "Raise ValueError when the hosts do not divide the global batch"),
    # No check of the host's number: host -1 reads the rows before its step's.
    ("any_host_number", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[step * global_batch + host * per + r]) for r in range(per)]
""", checks="""
    if global_batch % hosts:
        raise ValueError(f"{hosts} hosts do not divide a global batch of {global_batch}")
"""), "incorrect", "Raise ValueError when the hosts do not divide the global batch, or when `host` is not one"),
    # The right checks, with a message that names nothing.
    ("error_names_nothing", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[step * global_batch + host * per + r]) for r in range(per)]
""", checks="""
    if hosts < 1 or global_batch % hosts or not 0 <= host < hosts:
        raise ValueError("bad arguments")
"""), "incorrect", "Your ValueError should say what is wrong"),
    # The right ids, sorted: a set of ids, not rows.
    ("sorted_ids", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return sorted(int(order[step * global_batch + host * per + r]) for r in range(per))
"""), "incorrect", "The right ids in the wrong rows"),
]

# --- 8.2 newest_step_across_tiers (its answers below this line) ---
# Shared pieces of the wrong answers: every host's restorable steps, each proven by a restore of its
# `state` item, unless an answer's mistake is in how it finds them.
_TIER_RESTORES = """
def _restores(step_folder):
    try:
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.restore(os.path.join(step_folder, "state"))
    except Exception:
        return False
    return True


def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier)
            if name.isdigit() and _restores(os.path.join(tier, name))}
"""

_TIER_SOURCE = _TIER_RESTORES + """

def newest_step_across_tiers(tiers):
    local = os.path.join(tiers, "local")
    per_host = [_steps(os.path.join(local, h)) for h in sorted(os.listdir(local), key=int)]
    LOCAL
    persistent = _steps(os.path.join(tiers, "persistent"))
    PICK
"""

_TIER_PICK = """if not common and not persistent:
        return None
    step = max(common | persistent)
    return (step, "local" if step in common else "persistent")"""

_TIER_COMMON = "common = set.intersection(*per_host) if per_host else set()"


def _tier_answer(local=_TIER_COMMON, pick=_TIER_PICK, steps=None):
    source = _TIER_SOURCE.replace("LOCAL", local).replace("PICK", pick)
    return source if steps is None else source.replace(_TIER_RESTORES, steps)


TIERS = [
    # Any host's local tier taken for the job's: the union of the hosts' steps, not their
    # intersection (a host holding a step says nothing of its peers' shards).
    ("newest_of_any_host", _tier_answer(local="common = set().union(*per_host)"), "incorrect",
     "not every host can restore locally"),
    # Each host's newest step, then the oldest of those: right while the hosts' steps run in
    # step, wrong once a host lacks that step while holding a newer one.
    ("oldest_of_the_hosts_newest", _tier_answer(
        local="common = {min(max(s) for s in per_host)} if per_host and all(per_host) else set()"),
     "incorrect", "Intersect the hosts' sets of steps"),
    # The temporary folder of a save cut short taken for its step: the step read from the name's
    # start, the restore tried (and passing: a cut save's files may all be there).
    ("trusts_temporary_folders", _tier_answer(steps=_TIER_RESTORES.replace(
        "name.isdigit()", "name.split('.')[0].isdigit()").replace("int(name)", "int(name.split('.')[0])")),
     "incorrect", "never committed"),
    # Committed taken for restorable: the commit marker checked, the state never restored.
    ("commit_marker_only", _tier_answer(steps='''
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier)
            if name.isdigit() and os.path.isfile(os.path.join(tier, name, "commit_success.txt"))}
'''), "incorrect", "does not restore"),
    # A read-only CheckpointManager's steps per tier: the committed steps, none of them restored.
    ("managers_list_steps_only", _tier_answer(steps='''
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    options = ocp.CheckpointManagerOptions(read_only=True)
    with ocp.CheckpointManager(tier, item_names=("state",), options=options) as manager:
        return set(manager.all_steps())
'''), "incorrect", "does not restore"),
    # The persistent tier preferred on a tie: the same step read from the slow tier.
    ("persistent_wins_a_tie", _tier_answer(pick="""newest_local = max(common, default=None)
    newest_persistent = max(persistent, default=None)
    if newest_persistent is not None and (newest_local is None or newest_persistent >= newest_local):
        return (newest_persistent, "persistent")
    return None if newest_local is None else (newest_local, "local")"""),
     "incorrect", "restore it from there (the fast read)"),
    # The persistent tier first, the local tiers only when it holds nothing.
    ("persistent_first", _tier_answer(pick="""if persistent:
        return (max(persistent), "persistent")
    return (max(common), "local") if common else None"""),
     "incorrect", "the persistent tier is the fallback"),
    # The persistent tier never looked at: None (or an older local step) where it holds the newest.
    ("ignores_the_persistent_tier", _tier_answer(pick="""return (max(common), "local") if common else None"""),
     "incorrect", "compare both tiers"),
    # The state's records read (its metadata), its arrays never: a step whose data is gone passes.
    ("state_metadata_only", _tier_answer(steps='''
def _readable(step_folder):
    try:
        ocp.StandardCheckpointer().metadata(os.path.join(step_folder, "state"))
    except Exception:
        return False
    return True


def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier)
            if name.isdigit() and _readable(os.path.join(tier, name))}
'''), "incorrect", "does not restore"),
    # The lesson's own helper called: the problem's answer, not the learner's.
    ("the_lessons_helper", """
from ckptlab.tiers import newest_restorable


def newest_step_across_tiers(tiers):
    return newest_restorable(tiers)
""", "incorrect", "the course's own ckptlab.tiers"),
]

# --- 8.3 train_with_grace (its answers below this line) ---
# The loop every answer below runs, unless its mistake is in it: a flag set by the SIGTERM handler,
# looked at after each step and inside the evaluation; periodic saves (the last step forced: a
# manager with save_interval_steps skips it otherwise); on a SIGTERM the steps finished saved,
# forced, and waited for.
_GRACE = """
def train_with_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    model = training.make_model(seed)
    optimizer = training.make_optimizer(model)
    batches = training.Batches(seed)
    step = training.train_step()
    stop = []
    HANDLER
    mngr = ocp.CheckpointManager(ckpt_dir, options=ocp.CheckpointManagerOptions(save_interval_steps=save_every))
    first = mngr.latest_step() or 0
    if first:
        restored = mngr.restore(first, args=training.restore_args(model, optimizer))
        training.load_train_state(model, optimizer, restored["state"])
        POSITION
    done = saved = first
    while done < total_steps:
        step(model, optimizer, *next(batches))
        done += 1
        if SAVE_WHEN:
            mngr.save(done, args=training.save_args(training.train_state(model, optimizer), batches.get_state()),
                      force=FORCE)
            saved = done
        if stop:
            break
        if done % eval_every == 0:
            for x, y in training.eval_batches(seed):
                EVAL_LOOK
                training.eval_loss(model, x, y)
            if stop:
                break
    if stop and saved != done:
        ON_SIGTERM
    WAIT
    return training.params_of(model), first
"""


def _grace(handler="signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))",
           position="batches.set_state(restored['data'])", save_when="done % save_every == 0 or done == total_steps",
           force="done == total_steps", eval_look="if stop: break",
           on_sigterm="mngr.save(done, args=training.save_args(training.train_state(model, optimizer), "
                      "batches.get_state()), force=True)",
           wait="mngr.wait_until_finished()", header=""):
    return header + (_GRACE.replace("HANDLER", handler).replace("POSITION", position).replace("SAVE_WHEN", save_when)
                     .replace("FORCE", force).replace("EVAL_LOOK", eval_look).replace("ON_SIGTERM", on_sigterm)
                     .replace("WAIT", wait))


GRACE = [
    # The flag looked at between training steps only: the SIGTERM comes during an evaluation, which
    # runs to its end (seconds), and the SIGKILL lands before the save.
    ("looks_only_between_steps", _grace(eval_look="pass"), "incorrect", "look at the signal inside it too"),
    # No handler: the SIGTERM changes nothing (in the grader's pid namespace the process runs on, as
    # a process that ignores it does) and the SIGKILL ends the run, the steps since the last save lost.
    ("no_handler", _grace(handler="pass"), "incorrect", "the grace window closed"),
    # On a SIGTERM the save is started but not waited for, to leave the window sooner: the process
    # ends with the function's answer, and the background commit dies with it.
    ("returns_before_the_sigterm_save_commits", _grace(wait="if not stop: mngr.wait_until_finished()"),
     "incorrect", "wait for it to commit before returning"),
    # On a SIGTERM a save that is not forced: the manager's save_interval_steps skips a step that is not
    # a multiple of save_every, silently (save() returns False), and nothing is saved.
    ("sigterm_save_not_forced", _grace(on_sigterm="mngr.save(done, args=training.save_args(training.train_state("
                                                  "model, optimizer), batches.get_state()))"),
     "incorrect", "force the save"),
    # A save after every step: the steps between the periodic ones are saves the statement forbids.
    ("saves_every_step", _grace(save_when="True", force="True"), "incorrect", "neither periodic saves nor the step saved on the SIGTERM"),
    # Every step offered to the manager, leaving the choice to save_interval_steps: its default policy
    # also saves the first step it is offered in an empty folder (Orbax's initial save), step 1.
    ("leaves_the_choice_to_save_interval_steps", _grace(save_when="mngr.should_save(done) or done == total_steps"),
     "incorrect", "neither periodic saves nor the step saved on the SIGTERM"),
    # The model restored, the data's position not: the resumed run reads epoch 0's batches again.
    ("forgets_the_data_position", _grace(position="pass"), "incorrect", "continue the data where it stopped"),
    # On a SIGTERM the latest save copied under the steps finished, to save time: an older state
    # under a newer step's number.
    ("copies_the_last_save_under_the_new_step", _grace(
        header="\nimport shutil\n",
        on_sigterm="mngr.wait_until_finished(); shutil.copytree(os.path.join(ckpt_dir, str(saved)), "
                   "os.path.join(ckpt_dir, str(done)))"),
     "incorrect", "a copy of an older save under a new number is not it"),
    # On a SIGTERM the state after `done` steps saved as step done + 1 (the next step to run).
    ("saves_the_next_step_number", _grace(on_sigterm="mngr.save(done + 1, args=training.save_args(training.train_state("
                                                     "model, optimizer), batches.get_state()), force=True)"),
     "incorrect", "under that step's number"),
    # The SIGTERM cuts the evaluation short, and the loop trains on to the end, saving the last step:
    # inside the window here (the steps are fast), but not a stop (found by a second reader: it passed).
    ("trains_on_after_the_sigterm", _GRACE.replace("HANDLER", "signal.signal(signal.SIGTERM, lambda signum, frame: "
                                                               "stop.append(signum))")
     .replace("POSITION", "batches.set_state(restored['data'])")
     .replace("SAVE_WHEN", "done % save_every == 0 or done == total_steps").replace("FORCE", "done == total_steps")
     .replace("        if stop:\n            break\n", "").replace("            if stop:\n                break\n", "")
     .replace("EVAL_LOOK", "if stop: break").replace("    if stop and saved != done:\n        ON_SIGTERM\n", "")
     .replace("WAIT", "mngr.wait_until_finished()"),
     "incorrect", "your run went on training"),
]

WRONG = {
    "host_batch": BATCH,
    "newest_step_across_tiers": TIERS,
    "train_with_grace": GRACE,
}
