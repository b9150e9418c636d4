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
    # The right checks, each message naming the quantities in words without their values: which job was
    # misconfigured is not said (the statement asks for the values).
    ("error_names_quantities_without_values", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    return [int(order[step * global_batch + host * per + r]) for r in range(per)]
""", checks="""
    if hosts < 1 or global_batch % hosts:
        raise ValueError("the number of hosts does not divide the global batch")
    if not 0 <= host < hosts:
        raise ValueError("the host is not one of the job's hosts")
"""), "incorrect", "with the values at fault in its message"),
    # The step off by one: the batch of step + 1 read (the next step to run, taken for the one asked).
    # Before its diagnosis: told its batches never cross an epoch's end, or that it is wrong for 2 hosts.
    ("reads_the_next_steps_batch", _answer("""
    per = global_batch // hosts
    order = grain.MapDataset.range(examples).shuffle(seed=seed).repeat()
    start = (step + 1) * global_batch + host * per
    return [int(order[i]) for i in range(start, start + per)]
"""), "incorrect", "You read the global batch of the next step (step + 1)"),
    # Sharded, then shuffled: each host its strided shard of the ids, shuffled with the seed, its share of
    # each step read from it. Right on one host; before its diagnosis, told it is wrong for 2 hosts, or (a
    # single id read right by chance) that every step reads the start of the order again.
    ("shards_then_shuffles", _answer("""
    per = global_batch // hosts
    mine = grain.MapDataset.range(examples).slice(slice(host, None, hosts)).shuffle(seed=seed).repeat()
    return [int(mine[i]) for i in range(step * per, (step + 1) * per)]
"""), "incorrect", "Each host shuffles its own shard of the ids"),
]

# --- 8.2 newest_step_across_tiers (its answers below this line) ---
# Shared pieces of the wrong answers: each tier's committed steps (folders named by the step alone),
# then a rule, unless an answer's mistake is in how it lists them.
_TIER_SOURCE = """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    local = os.path.join(tiers, "local")
    persistent = _steps(os.path.join(tiers, "persistent"))
    by_slice = {}
    for k, procs in enumerate(slices):
        held = [_steps(os.path.join(local, str(p))) for p in procs]
        SLICE
        for s in steps:
            by_slice.setdefault(s, k)
    PICK
"""

_TIER_SLICE = "steps = set.intersection(*held) if held else set()"
_TIER_PICK = """newest = max(set(by_slice) | persistent, default=None)
    if newest is None:
        return None
    return newest, by_slice.get(newest, 0)"""


def _tier_answer(slice_=_TIER_SLICE, pick=_TIER_PICK, steps=None):
    source = _TIER_SOURCE.replace("SLICE", slice_).replace("PICK", pick)
    return source if steps is None else source.replace(
        "return {int(name) for name in os.listdir(tier) if name.isdigit()}", steps)


TIERS = [
    # The rule Lesson 8 taught before Orbax's own manager ran: a step is local only where every host's
    # local tier holds it, as if the hosts shared one copy. The primary slice saves no local step, so
    # nothing is ever local: the persistent tier's step every time.
    ("every_host_must_hold_it", """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    hosts = [p for procs in slices for p in procs]
    common = set.intersection(*(_steps(os.path.join(tiers, "local", str(p))) for p in hosts))
    persistent = _steps(os.path.join(tiers, "persistent"))
    ranked = [(s, 1) for s in common] + [(s, 0) for s in persistent - common]
    if not ranked:
        return None
    step, local = max(ranked)
    return step, 1 if local else 0
""", "incorrect", "one complete slice is enough"),
    # Any process holding a step taken for its slice's copy: the union of a slice's processes' steps.
    ("any_process_of_the_slice", _tier_answer(slice_="steps = set().union(*held)"),
     "incorrect", "no slice holds complete"),
    # The temporary folder of a save cut short taken for its step: the step read from the name's start.
    ("trusts_temporary_folders", _tier_answer(
        steps="return {int(name.split('.')[0]) for name in os.listdir(tier) if name.split('.')[0].isdigit()}"),
     "incorrect", "never committed"),
    # The persistent tier preferred on a tie: the same step read from the slow tier.
    ("persistent_wins_a_tie", _tier_answer(pick="""newest = max(set(by_slice) | persistent, default=None)
    if newest is None:
        return None
    return (newest, 0) if newest in persistent else (newest, by_slice[newest])"""),
     "incorrect", "Orbax reads it there (the fast read)"),
    # The last slice that holds the step complete, not the first: a dict overwritten slice by slice.
    ("highest_slice_reads_it", _tier_answer(slice_="steps = set.intersection(*held) if held else set()\n"
                                                   "        by_slice.update({s: k for s in steps})"),
     "incorrect", "lowest-numbered slice"),
    # The first process of the reading slice returned, not the slice: right wherever a slice is one process.
    ("process_for_slice", _tier_answer(pick="""newest = max(set(by_slice) | persistent, default=None)
    if newest is None:
        return None
    return newest, slices[by_slice[newest]][0] if newest in by_slice else 0"""),
     "incorrect", "the slice's is asked"),
    # The local tiers alone: None (or an older step) where only the persistent tier holds one.
    ("ignores_the_persistent_tier", _tier_answer(pick="""if not by_slice:
        return None
    newest = max(by_slice)
    return newest, by_slice[newest]"""), "incorrect", "compare both tiers"),
    # The persistent tier first, the local tiers only when it holds nothing.
    ("persistent_first", _tier_answer(pick="""if persistent:
        return max(persistent), 0
    return (max(by_slice), by_slice[max(by_slice)]) if by_slice else None"""),
     "incorrect", "one complete slice is enough"),
    # Every slice's local steps pooled and the newest taken from the newest process's folder listing,
    # the slices ignored: process numbers stand for slices.
    ("processes_as_slices", """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    local = os.path.join(tiers, "local")
    best = None
    for p in sorted(int(n) for n in os.listdir(local)):
        for s in _steps(os.path.join(local, str(p))):
            if best is None or s > best[0]:
                best = (s, p)
    newest_p = max(_steps(os.path.join(tiers, "persistent")), default=None)
    if newest_p is not None and (best is None or newest_p > best[0]):
        return newest_p, 0
    return best
""", "incorrect", "no slice holds complete"),
    # Local first: the newest step some slice holds complete, the persistent tier only when no slice holds
    # one (Orbax takes the newest of both: a persistent step newer than every complete slice's wins).
    ("local_first_persistent_as_fallback", _tier_answer(pick="""if by_slice:
        return max(by_slice), by_slice[max(by_slice)]
    return (max(persistent), 0) if persistent else None"""),
     "incorrect", "compare both tiers"),
    # A slice taken as complete up to the oldest of its processes' newest steps: wrong where a process of
    # it lacks a step below its newest (a hole), which its partner holds.
    ("slice_complete_to_its_oldest_newest", _tier_answer(
        slice_="steps = {min(max(h) for h in held)} if held and all(held) else set()"),
     "incorrect", "that very step"),
    # The hosts agree on the oldest of their newest local steps (the primary slice's, which hold none, left
    # out), read by the first slice that holds it; the persistent tier where it is newer.
    ("oldest_of_the_hosts_newest", """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    held = {p: _steps(os.path.join(tiers, "local", str(p))) for procs in slices[1:] for p in procs}
    newest = [max(h) for h in held.values() if h]
    persistent = _steps(os.path.join(tiers, "persistent"))
    if newest and min(newest) >= max(persistent, default=-1):
        step = min(newest)
        k = next((k for k, procs in enumerate(slices[1:], 1) if all(step in held[p] for p in procs)), 1)
        return step, k
    return (max(persistent), 0) if persistent else None
""", "incorrect", "one complete slice is enough"),
    # Step folders compared by name: as strings, "8" is newer than "12" and "10".
    ("names_compared_as_strings", """
def _names(tier):
    return {n for n in os.listdir(tier) if n.isdigit()} if os.path.isdir(tier) else set()


def newest_step_across_tiers(tiers, slices):
    best = None
    persistent = _names(os.path.join(tiers, "persistent"))
    if persistent:
        best = (max(persistent), 0)
    for k, procs in enumerate(slices[1:], 1):
        held = set.intersection(*(_names(os.path.join(tiers, "local", str(p))) for p in procs))
        if held and (best is None or max(held) > best[0] or (max(held) == best[0] and best[1] == 0)):
            best = (max(held), k)
    return None if best is None else (int(best[0]), best[1])
""", "incorrect", "A newer step can be restored"),
    # The local slices numbered from 0 among themselves (the primary holds no local step): slice 1 returned
    # as 0, which says the persistent tier.
    ("local_slices_numbered_from_zero", """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    persistent = _steps(os.path.join(tiers, "persistent"))
    complete = {}
    for k, procs in enumerate(slices[1:]):
        for s in set.intersection(*(_steps(os.path.join(tiers, "local", str(p))) for p in procs)):
            complete.setdefault(s, k)
    steps = set(complete) | persistent
    if not steps:
        return None
    return max(steps), complete.get(max(steps), 0)
""", "incorrect", "Right step, wrong slice"),
    # Slice k's copy looked for in tiers/local/<k>/, the slices' process lists unread: right wherever a
    # slice is one process.
    ("slice_k_in_local_k", """
def _steps(tier):
    if not os.path.isdir(tier):
        return set()
    return {int(name) for name in os.listdir(tier) if name.isdigit()}


def newest_step_across_tiers(tiers, slices):
    persistent = _steps(os.path.join(tiers, "persistent"))
    complete = {}
    for k in range(1, len(slices)):
        for s in _steps(os.path.join(tiers, "local", str(k))):
            complete.setdefault(s, k)
    steps = set(complete) | persistent
    if not steps:
        return None
    return max(steps), complete.get(max(steps), 0)
""", "incorrect", "not in `tiers/local/<k>/`"),
    # The lesson's own helper module called: it runs jobs, it is not the answer, and it is forbidden.
    ("the_lessons_helper", """
from ckptlab.tiers import held


def newest_step_across_tiers(tiers, slices):
    return held(tiers, None)
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
    # No handler: the SIGTERM's default action ends the process at once, as on any machine (at the
    # strict level too: the learner's process is not pid 1 of its pid namespace, whose init is), the
    # steps since the last save lost. Before the init, it ran on to the SIGKILL and was told to look
    # at the signal inside its evaluation, advice for a handler it never wrote.
    ("no_handler", _grace(handler="pass"), "incorrect", "no SIGTERM handler of yours was in place"),
    # SIG_DFL set explicitly: the same default action.
    ("sets_sig_dfl", _grace(handler="signal.signal(signal.SIGTERM, signal.SIG_DFL)"), "incorrect",
     "no SIGTERM handler of yours was in place"),
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
    # On a SIGTERM the steps finished saved and committed, then the process ended with the status a job
    # killed by the signal reports (128 + 15), as an entrypoint may: the function never returns. Before,
    # read from outside as the signal's default action, it was told no handler of its was in place.
    ("commits_then_exits_143", _grace(wait="mngr.wait_until_finished()\n    if stop:\n        os._exit(143)"),
     "incorrect", "your run committed a save, then ended without returning"),
    # The same, ended with sys.exit(0) as Lesson 8's own loop ends its process (a SystemExit out of the function).
    ("commits_then_sys_exit_0", _grace(header="\nimport sys\n",
                                       wait="mngr.wait_until_finished()\n    if stop:\n        sys.exit(0)"),
     "incorrect", "your run committed a save, then ended without returning"),
    # Resumed right, but first_step returned as the latest committed step once training ends (the last step),
    # not the one this call restored. Before, told it did not start from the latest committed step.
    ("returns_the_last_step_as_first_step", _grace(wait="mngr.wait_until_finished()\n    first = mngr.latest_step()"),
     "incorrect", "but the first_step it returned is another number"),
]

WRONG = {
    "host_batch": BATCH,
    "newest_step_across_tiers": TIERS,
    "train_with_grace": GRACE,
}
