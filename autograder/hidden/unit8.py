"""Hidden cases for Unit 8 (preemption). Problem 8.1's expected ids are Grain's own order, read by
position on this side."""

from __future__ import annotations

from autograder.hidden import Case, Hidden
from autograder.hidden.unit5 import diagnose_run, expected_after_run, plant_table_of, run_outcome, uninterrupted_run
from autograder.wall.kinds import RunFolder, TieredRootArg
from autograder.wall.returns import Raises


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


# ---------------------------------------------------------------------------------------------
# 8.1 host_batch

def _order(seed, examples):
    import grain

    return grain.MapDataset.range(examples).shuffle(seed=seed).repeat()


def _batch_cases(rng):
    seed = int(rng.integers(0, 10_000))
    examples = int(_pick(rng, (37, 45, 53, 61)))  # no global batch below divides it: batches cross epoch ends
    cases = []
    for category, hosts, batch in (("two_hosts", 2, _pick(rng, (4, 6, 8))), ("four_hosts", 4, _pick(rng, (8, 12))),
                                   ("many_hosts", 8, _pick(rng, (8, 16)))):
        step = int(rng.integers(1, examples // batch))  # inside the first epoch
        cases.append(Case(category, (step, int(rng.integers(1, hosts)), hosts, seed, examples, batch)))
    batch = int(_pick(rng, (6, 8)))
    cases.append(Case("one_host", (int(rng.integers(1, examples // batch)), 0, 1, seed, examples, batch)))
    cases.append(Case("first_step", (0, 1, 2, seed, examples, batch)))
    # the same step read by 2 hosts and by 4 (a restart with more hosts): the same global batch
    step = int(rng.integers(1, examples // 8))
    cases += [Case("changed_hosts", (step, h, n, seed, examples, 8)) for n, h in ((2, 1), (4, int(rng.integers(0, 4))))]
    # a batch across the end of an epoch, and one inside a later epoch
    for epoch in (1, 2):
        first = -(-epoch * examples // batch)  # the first step starting in epoch `epoch` or after it
        crossing = first - 1  # ... and the one before it ends in it
        cases.append(Case("epoch_end", (crossing, int(rng.integers(0, 2)), 2, seed, examples, batch)))
    later = int(rng.integers(-(-2 * examples // batch), 3 * examples // batch - 1))
    cases.append(Case("later_epoch", (later, int(rng.integers(0, 2)), 2, seed, examples, batch)))
    cases.append(Case("indivisible", (int(rng.integers(0, 5)), 0, _pick(rng, (3, 5)), seed, examples, batch)))
    cases.append(Case("indivisible", (int(rng.integers(0, 5)), 1, 16, seed, examples, 24)))  # per host 1.5
    cases.append(Case("no_such_host", (int(rng.integers(0, 5)), _pick(rng, (2, 3)), 2, seed, examples, batch)))
    cases.append(Case("no_such_host", (int(rng.integers(0, 5)), -1, 4, seed, examples, 8)))  # ids[-1:] would read
    rng.shuffle(cases)  # called in this order: an answer keeping a position between calls reads the wrong batch
    return cases


def host_batch_truth(step, host, hosts, seed, examples, global_batch):
    if hosts < 1 or global_batch % hosts:
        raise ValueError(f"{hosts} hosts do not divide a global batch of {global_batch}")
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0 to {hosts - 1}")
    order = _order(seed, examples)
    per = global_batch // hosts
    return [int(order[i]) for i in range(step * global_batch + host * per, step * global_batch + (host + 1) * per)]


def _positions(args, which):
    """The positions of the global order a mistaken answer reads (for diagnoses)."""
    step, host, hosts, _, examples, batch = args
    per = batch // hosts
    if which == "strided":  # each host's own slice of the order, batched: ds.slice(host::hosts).batch(per)[step]
        return [hosts * (step * per + i) + host for i in range(per)]
    if which == "from_start":  # the step forgotten: every restart reads the first batch again
        return [host * per + i for i in range(per)]
    if which == "drop_remainder":  # batches never cross an epoch's end: the remainder skipped
        per_epoch = examples // batch
        epoch, k = divmod(step, per_epoch)
        return [epoch * examples + k * batch + host * per + i for i in range(per)]
    if which in ("next_step", "previous_step"):  # the step off by one: another step's batch
        start = (step + (1 if which == "next_step" else -1)) * batch + host * per
        return [start + i for i in range(per)] if start >= 0 else None
    raise ValueError(which)


def _shard_then_shuffle(args):
    """The ids of a host that shards the ids first and shuffles its own shard (the same seed on every
    host), reading its share of each step from it: the global order with one host, not with more."""
    import grain

    step, host, hosts, seed, examples, batch = args
    per = batch // hosts
    mine = grain.MapDataset.range(examples).slice(slice(host, None, hosts)).shuffle(seed=seed).repeat()
    return [int(mine[i]) for i in range(step * per, (step + 1) * per)]


def _diagnose_batch(args, actual, expected):
    step, host, hosts, seed, examples, batch = args
    order = _order(seed, examples)
    if len(actual) != batch // hosts:
        return "rows"
    if len(expected) < 2:
        return None  # one id: any mistake can read the right one, or any other, by chance (from_start outvotes)
    for which in ("strided", "from_start", "drop_remainder", "next_step", "previous_step"):
        if which == "from_start" and step * batch % examples == 0:
            continue  # a step at an epoch's start: reading the first epoch again looks the same there
        positions = _positions(args, which)
        wrong = None if positions is None else [int(order[i]) for i in positions]
        if wrong is not None and wrong != expected and list(actual) == wrong:
            return which
    if hosts > 1 and list(actual) == _shard_then_shuffle(args):
        return "shard_then_shuffle"
    first_epoch = [int(order[i % examples]) for i in range(step * batch + host * (batch // hosts),
                                                           step * batch + (host + 1) * (batch // hosts))]
    if first_epoch != expected and list(actual) == first_epoch:
        return "same_permutation"
    if sorted(actual) == sorted(expected):
        return "row_order"
    return None


def _values_at_fault(args) -> tuple[int, ...]:
    """The values a ValueError's message must give (the statement's rule, the public examples' too):
    the hosts and the global batch they do not divide, or the host and the number of hosts."""
    _, host, hosts, _, _, batch = args
    return (hosts, batch) if hosts < 1 or batch % hosts else (host, hosts)


def _names_the_problem(args, message):
    """A ValueError's message gives the values at fault (the numbers themselves, not their names)."""
    return Raises("ValueError", values=_values_at_fault(args)).message_ok(message)


BATCH = Hidden(
    generate=_batch_cases,
    messages={
        "should_raise": "Raise ValueError when the hosts do not divide the global batch, or when `host` is not one "
                        "of 0 to hosts - 1: a host reading a ragged or made-up share reads examples twice or never.",
        "wrong_exception": "Raise ValueError (or a subclass) for hosts that do not divide the global batch, and for "
                           "a host out of range.",
        "unclear_error": "Your ValueError should say what is wrong, with the values at fault in its message, as the "
                         "statement asks: the numbers themselves (`hosts` and `global_batch`, or `host`), not only their "
                         "names.",
        "rows": "Return global_batch // hosts ids: one per row this host holds of the global batch.",
        "strided": "Each host reads every hosts-th id of the order (its own slice of the data, as "
                   "`ds.slice(slice(host, None, hosts))` gives): the global batch holds the right ids, but in rows "
                   "laid out by the number of hosts, so a restart with other hosts trains on other batches. Host "
                   "`host` reads consecutive rows of the global batch.",
        "from_start": "Every step reads the start of the order again: a pipeline restarted from its beginning after "
                      "a preemption trains on the first batches twice and never reaches the last. The step says where "
                      "the global batch starts: `step * global_batch`.",
        "drop_remainder": "Your batches never cross the end of an epoch (the last, short batch dropped): the ids at the "
                          "end of each epoch are never read. The order is one long sequence: step `step` starts at "
                          "position `step * global_batch` of it, whichever epoch that falls in.",
        "same_permutation": "After the first epoch you read the first epoch's permutation again (position `i % "
                            "examples`): Grain's `.repeat()` after `.shuffle(seed=...)` shuffles each epoch anew. Read "
                            "the repeated dataset itself at the position.",
        "next_step": "You read the global batch of the next step (step + 1): training step `step` counts from 0, "
                     "and its global batch starts at position `step * global_batch` of the order (step 0 reads "
                     "positions 0 to global_batch - 1).",
        "previous_step": "You read the global batch of the step before (step - 1): training step `step` counts from "
                         "0, and its global batch starts at position `step * global_batch` of the order.",
        "shard_then_shuffle": "Each host shuffles its own shard of the ids (the dataset split among the hosts first, "
                              "then shuffled): with one host that is the global order, but with several each host "
                              "reads a permutation of its own, so a restart with another number of hosts reads other "
                              "batches, ids twice or never. Shuffle the one global order first, the same on every "
                              "host, then take this host's rows of the step's global batch.",
        "row_order": "The right ids in the wrong rows: host `host` holds rows `host * global_batch // hosts` onward, "
                     "in the order of the global order.",
        "two_hosts": "Wrong for a job of 2 hosts.",
        "four_hosts": "Wrong for a job of 4 hosts.",
        "many_hosts": "Wrong for a job of 8 hosts.",
        "one_host": "Wrong for a job of one host: it reads the whole global batch.",
        "first_step": "Wrong at step 0.",
        "changed_hosts": "Wrong when the same step is read by a job of another number of hosts (a restart on "
                         "another slice).",
        "epoch_end": "Wrong for a global batch that starts in one epoch and ends in the next.",
        "later_epoch": "Wrong for a step in a later epoch.",
        "indivisible": "Wrong when the hosts do not divide the global batch: raise ValueError.",
        "no_such_host": "Wrong when `host` is not one of 0 to hosts - 1: raise ValueError.",
    },
    diagnose=_diagnose_batch,
    check_raise=_names_the_problem,
    precedence=("from_start",),
    requirements={
        "the same on every host": ("two_hosts", "four_hosts", "many_hosts", "changed_hosts"),
        "Training step `step` (from 0) consumes the next `global_batch` ids of that order": (
            "two_hosts", "one_host", "first_step", "later_epoch"),
        "a job restarted from a checkpoint with another number of hosts reads exactly the batches an uninterrupted "
        "job would read": ("changed_hosts", "four_hosts", "many_hosts"),
        "no id read twice within an epoch, none skipped, across epoch ends too": ("epoch_end", "later_epoch"),
        "`global_batch // hosts` consecutive rows starting at row `host * global_batch // hosts`": (
            "two_hosts", "four_hosts", "many_hosts"),
        "Keep no state between calls: the step alone says where the job is": (
            "two_hosts", "changed_hosts", "later_epoch"),
        "Raise `ValueError` when `hosts` does not divide `global_batch`": ("indivisible",),
        "or `host` is not one of `0` to `hosts - 1`": ("no_such_host",),
        "its message giving the values at fault as numbers": ("indivisible", "no_such_host"),
    },
    on_exception="The arguments are plain ints; build the order with Grain and index it by position.",
    expected=host_batch_truth,
)


# ---------------------------------------------------------------------------------------------
# 8.2 newest_step_across_tiers: each folder written for real by Orbax's emergency CheckpointManager in a
# job of processes joined by jax.distributed (ckptlab.tiers), then damaged; the expected value is what
# Orbax's manager itself restored from it (files.TieredPath.restored), never a model of it.

# Lesson 8's job, the public examples' too (one job writes them and these): 3 slices of one process.
_THREE = (("slices", 3), ("per_slice", 1), ("devices_per_process", 2), ("steps", 12), ("local_every", 2),
          ("local_keep", 3), ("persistent_every", 5), ("persistent_keep", 2), ("seed", 0))


def _pair(steps: int) -> tuple:
    """2 slices of 2 processes: slice 1's processes 2 and 3 each hold half of its copy."""
    return (("slices", 2), ("per_slice", 2), ("devices_per_process", 1), ("steps", steps), ("local_every", 1),
            ("local_keep", 3), ("persistent_every", 4), ("persistent_keep", 1), ("seed", 0))


def _tiers(category, spec, damage=()):
    arg = TieredRootArg(spec, tuple(damage))
    return Case(category, (arg, tuple(tuple(procs) for procs in arg.tier_spec().slice_processes())))


def _tier_cases(rng):
    a, b = (1, 2) if rng.integers(0, 2) else (2, 1)
    pair = _pair(int(_pick(rng, (9, 11, 13))))  # (8.2 reads names only: the values' seed is the lesson's)
    q = int(rng.integers(2, 4))
    return [
        _tiers("whole", _THREE),
        # one process's RAM disk gone: the other local slice still holds the newest step complete
        _tiers("process_lost", _THREE, (("lost", a),)),
        # both local slices gone: the persistent tier, read by the primary slice
        _tiers("slices_lost", _THREE, (("lost", 1), ("lost", 2))),
        # each local slice lacks another step: the newest is complete in one of them
        _tiers("holes", _THREE, (("hole", a, 0), ("hole", b, 1))),
        # both newest local saves cut short: the step before, in both tiers, read locally
        _tiers("cut_tie", _THREE, (("cut", 1), ("cut", 2))),
        # one slice lost, the other's newest gone: a tie again, read by the slice that holds it
        _tiers("tie_other_slice", _THREE, (("lost", a), ("hole", b, 0))),
        # one slice holds only step 8, the other is lost: the persistent tier's 10 is newer, so it wins
        _tiers("persistent_newer", _THREE, (("hole", a, 0), ("hole", a, 0), ("lost", b))),
        _tiers("persistent_cut", _THREE, (("lost", 1), ("lost", 2), ("persistent_cut",))),
        _tiers("nothing", _THREE, (("lost", 1), ("lost", 2), ("persistent_hole", 0), ("persistent_hole", 0))),
        # two processes to a slice: a slice is complete only where both hold the step
        _tiers("pair_whole", pair),
        _tiers("pair_process_lost", pair, (("lost", q),)),
        _tiers("pair_hole", pair, (("hole", q, 0),)),
        # each process of slice 1 lacks another step: complete only below both holes, whatever each one's newest
        _tiers("pair_holes", pair, (("hole", q, 0), ("hole", 5 - q, 1))),
        _tiers("nothing", pair, (("lost", q), ("persistent_hole", 0))),
    ]


def newest_across_tiers_truth(tiers, slices):
    """What Orbax's emergency manager restored from this folder, in a job of its own (on a copy)."""
    restored = getattr(tiers, "restored", "unknown")  # (files.TieredPath)
    if restored == "unknown":
        raise RuntimeError("a tiers folder without Orbax's restore of it: realize it with autograder.wall.files")
    return restored


def _held_model(arg, *, tmp_ok=False):
    """Arithmetic, from the folder's spec, for the diagnoses (tests/solutions/test_tiers.py holds it to the folders
    Orbax writes): each process's committed local steps and the persistent tier's. Orbax's manager
    saves the first step it is offered as well as every interval's (its initial save policy), and keeps
    the newest ``keep``; ``tmp_ok`` also counts a save cut short."""
    spec = arg.tier_spec()

    def kept(every, keep):
        steps = sorted({1} | {s for s in range(every, spec.steps + 1, every)})
        return set(steps[-keep:])

    local = {p: (kept(spec.local_every, spec.local_keep) if spec.slice_of(p) else set()) for p in range(spec.processes)}
    persistent = kept(spec.persistent_every, spec.persistent_keep)

    def harm(steps, kind, k=0):
        newest = sorted(steps, reverse=True)
        if kind == "cut" and newest and not tmp_ok:
            return set(newest[1:])
        if kind == "hole" and k < len(newest):
            return set(newest[:k] + newest[k + 1:])
        return set(steps)

    for d in arg.damage:
        kind = d[0]
        if kind == "lost":
            local[d[1]] = set()
        elif kind in ("cut", "hole"):
            local[d[1]] = harm(local[d[1]], kind, d[-1])
        elif kind == "persistent_cut":
            persistent = harm(persistent, "cut")
        elif kind == "persistent_hole":
            persistent = harm(persistent, "hole", d[-1])
    return local, persistent


def _rule(local, persistent, slices, *, complete=all, tie_local=True):
    """Orbax's rule on steps held (or a mistaken variant of it, for the diagnoses)."""
    by_slice = {}
    for k, procs in enumerate(slices):
        held = [local.get(p, set()) for p in procs]
        if complete is min:  # the oldest of its processes' newest steps, taken as complete
            steps = {min(max(h) for h in held)} if held and all(held) else set()
        else:
            steps = set.intersection(*held) if complete is all else set().union(*held)
        for step in steps:
            by_slice.setdefault(step, k)
    best = max(set(by_slice) | persistent, default=None)
    if best is None:
        return None
    if best in by_slice and (tie_local or best not in persistent):
        return best, by_slice[best]
    return best, 0


def _diagnose_tiers(args, actual, expected):
    arg, slices = args[0], [list(x) for x in args[1]]
    if actual is None:  # (None where only the persistent tier holds a step: that tier was left out)
        return None if expected is None else "persistent_ignored" if expected[1] == 0 else "missed"
    step, where = actual
    local, persistent = _held_model(arg)
    as_process = _rule({k: local.get(k, set()) for k in range(len(slices))}, persistent, [[k] for k in range(len(slices))])
    if expected is not None and step == expected[0]:
        if any(len(s) > 1 for s in slices) and as_process == (step, where):
            # slice k's copy looked for in tiers/local/<k>/ (also a tie given to the persistent tier: the other
            # cases tell them apart, by count)
            return "slice_as_process"
        if expected[1] and where == 0 and step in persistent:
            return "tie_to_persistent"
        if expected[1] and len(slices[expected[1]]) > 1 and where in slices[expected[1]]:
            return "process_number"  # a process of the slice that reads it
        if 0 < where < len(slices):  # a slice that does not hold the step complete
            held = [local.get(p, set()) for p in slices[where]]
            if all(held) and step == min(max(h) for h in held) and not all(step in h for h in held):
                return "oldest_newest"
            if any(step in h for h in held) and not all(step in h for h in held):
                return "any_process"
        return "wrong_slice"
    every = set.intersection(*(local[p] for p in local)) if local else set()
    wrongs = (
        # slice k's copy looked for in tiers/local/<k>/ (first: with one process to a slice it is the rule itself)
        ("slice_as_process", as_process),
        ("every_host", max([(s, 1) for s in every] + [(s, 0) for s in persistent - every], default=None)),
        ("any_process", _rule(local, persistent, slices, complete=any)),
        ("oldest_newest", _rule(local, persistent, slices, complete=min)),
        ("tmp_trusted", _rule(*_held_model(arg, tmp_ok=True), slices)),
        ("persistent_ignored", _rule(local, set(), slices)),
        ("local_ignored", _rule({}, persistent, slices)),
    )
    for name, wrong in wrongs:
        if wrong != expected and wrong is not None and step == wrong[0]:
            return name
    if expected is not None and step < expected[0]:
        return "older"
    return None


TIERS = Hidden(
    generate=_tier_cases,
    messages={
        "missed": "A step can be restored here: return it as (step, slice) rather than None.",
        "every_host": "A replica slice holds a newer step complete in its local tiers, and you returned the persistent "
                      "tier's. With Orbax's emergency manager each slice holds a whole copy, and one complete slice is "
                      "enough: it reads the step and broadcasts it to the others. A step need not be in every process's "
                      "local tier (the primary slice's processes save none), and the persistent tier is the fallback: "
                      "work slice by slice.",
        "any_process": "You counted a step that some process holds locally but no slice holds complete: a slice reads a "
                       "step from its local tiers only where every one of its processes holds its shards of it.",
        "oldest_newest": "A slice is complete at a step only where each of its processes holds that very step: the "
                         "oldest of its processes' newest steps can be missing from one of them (a hole below the newest).",
        "slice_as_process": "`slices[k]` lists slice k's processes, and each process's local tier is "
                            "`tiers/local/<process>/`: slice k's copy lies in its processes' folders, not in "
                            "`tiers/local/<k>/`.",
        "tmp_trusted": "You counted a save that never committed: a '<step>.orbax-checkpoint-tmp-...' folder is a save "
                       "cut short before its rename, whatever it holds.",
        "persistent_ignored": "The persistent tier holds a newer step than any slice's local copy: compare both tiers.",
        "local_ignored": "A newer step is complete in a slice's local tiers: the persistent tier is the fallback, not "
                         "the first choice.",
        "older": "A newer step can be restored: look at every slice and at the persistent tier.",
        "tie_to_persistent": "Right step, but a slice also holds it complete in its local tiers: Orbax reads it there "
                             "(the fast read), so the slice is that one, not 0.",
        "wrong_slice": "Right step, wrong slice: the step is read by the lowest-numbered slice that holds it complete, "
                       "and 0 means it comes from the persistent tier.",
        "process_number": "You returned a process's number where the slice's is asked: `slices[k]` lists slice k's "
                          "processes.",
        "whole": "Wrong on a folder nothing happened to.",
        "process_lost": "Wrong when one process's local tier is empty (its machine was replaced).",
        "slices_lost": "Wrong when every local tier is empty.",
        "holes": "Wrong when two local slices each lack another step.",
        "cut_tie": "Wrong when the newest local saves were cut short and the step before is in both tiers.",
        "tie_other_slice": "Wrong when one slice is lost and the newest step both tiers hold is complete in the other.",
        "persistent_newer": "Wrong when the persistent tier holds a newer step than any slice holds complete.",
        "persistent_cut": "Wrong when the newest persistent save was cut short.",
        "nothing": "Wrong when no step can be restored: return None.",
        "pair_whole": "Wrong for slices of two processes.",
        "pair_process_lost": "Wrong for slices of two processes, one of whose local tiers is empty.",
        "pair_hole": "Wrong for slices of two processes, one of which lacks a step the other holds.",
        "pair_holes": "Wrong for slices of two processes that each lack another step.",
    },
    diagnose=_diagnose_tiers,
    precedence=("tmp_trusted", "every_host", "any_process"),
    requirements={
        "A slice can read a step from the local tiers only where every one of its processes holds it committed": (
            "pair_process_lost", "pair_hole", "pair_holes", "holes"),
        "`slices[k]` listing slice k's process numbers": ("pair_whole", "pair_hole", "pair_process_lost"),
        "A save committed when its step folder is named by the step alone": ("cut_tie", "persistent_cut"),
        "a process's local tier may be empty (its machine was replaced)": ("process_lost", "slices_lost",
                                                                             "pair_process_lost"),
        "the primary slice reads the persistent tier, so its number, `0`, means the step comes from there": (
            "slices_lost", "persistent_cut", "persistent_newer", "pair_process_lost"),
        "The manager restores the newest step it can read anywhere": ("whole", "holes", "persistent_newer",
                                                                     "persistent_cut"),
        "reading a step from the local tiers wherever a slice can, from the lowest-numbered slice that can": (
            "cut_tie", "tie_other_slice", "whole", "process_lost"),
        "Return None when no step can be restored": ("nothing",),
    },
    on_exception="A process's local tier may be empty and a step folder half-written: list folders with os.listdir "
                 "(or Orbax's `ocp.step.checkpoint_steps`), and read nothing else.",
    expected=newest_across_tiers_truth,
)


# ---------------------------------------------------------------------------------------------
# 8.3 train_with_grace: the grader sends the learner's run a real SIGTERM, then SIGKILL after the
# grace window (engine/preempted.py), starts it again, and plants a state before the last run, as
# for 5.3 (whose plant table, expected values and resume diagnoses it shares).

GRACE = 3.0  # seconds between the SIGTERM and the SIGKILL (the statement says it)


def _grace_cases(rng):
    plant = lambda: int(rng.integers(1000, 2**31 - 1))  # noqa: E731
    seed = lambda: int(rng.integers(0, 1000))  # noqa: E731
    # During an evaluation: saves every 2 steps, an evaluation after step 3 (not a save step); the SIGTERM
    # comes while it runs, so the steps finished (3) are newer than any save: the loop must save step 3.
    # Or saves every 3 steps, an evaluation after step 4.
    every, evals, total = (2, 3, 5) if rng.integers(0, 2) else (3, 4, 7)
    cases = [Case("during_evaluation", (RunFolder((("term_eval", every),), plant=plant(), grace=GRACE), total, seed(),
                                        every, evals))]
    # While a periodic save is under way (step 4 of saves every 2): the loop goes on to an evaluation
    # after step 5 unless it stops; a loop that does not answer meets the SIGKILL there. (No evaluation
    # before the signal: one would change nothing here but the grading's time.)
    cases.append(Case("during_save", (RunFolder((("term_save", 4),), plant=plant(), grace=GRACE), 7, seed(), 2, 5)))
    return cases


def _uninterrupted_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    return uninterrupted_run(ckpt_dir, total_steps, seed)


def _grace_outcome(args, out):
    total, every = int(args[1]), int(args[3])
    terms = out.get("terms") or []
    if len(terms) < out.get("planned", 0) or any(t.get("ended_first") for t in terms):
        return "never_signalled"
    killed = [t for t in terms if t.get("killed")]
    if killed:
        # Late, having answered (a save begun or under way: the machine's load may be why, so it is graded
        # once more, alone), or never answering the signal at all (no second grading would change that).
        return "grace_exceeded_saving" if all(t.get("answered") for t in killed) else "grace_exceeded"
    ended = [t for t in terms if not t.get("returned")]
    if ended:
        # A step committed after the signal went: a handler of the learner's saved it, and the process then
        # ended by an exit or an exception of its own (whatever its status: `os._exit(143)` reads as the
        # signal's default action from outside).
        if all(t.get("committed", 0) > t.get("held", t.get("committed", 0)) for t in ended):
            return "exited_after_commit"
        # ended by the SIGTERM's default action (no handler in place), or by an exit or exception after it
        return "ended_by_term" if any(t.get("by_term") for t in ended) else "exited_on_term"
    # the periodic steps, the last, and each step committed on a SIGTERM (newer than any folder then)
    allowed = {s for s in range(every, total + 1, every)} | {total}
    allowed |= {t.get("committed", 0) for t in terms if t.get("committed", 0) > t.get("before", 0)}
    if set(out.get("seen") or ()) - allowed:
        return "saves_between"
    evals = int(args[4])
    for t in terms:  # the evaluation the SIGTERM met (or, during a save, the next one): the step it follows
        before, committed = t.get("before", 0), t.get("committed", 0)
        at = before // evals * evals + (evals if t.get("point") == "term_eval" or before % evals else 0)
        if committed > at:
            return "trained_on"
        if t.get("point") == "term_eval" and committed <= before:
            return "not_saved_on_term"
    return run_outcome(args, out)


def _expected_after_grace(expected, out):
    """5.3's (the parameters a run restoring the planted state ends with, and what its diagnoses
    need), and why the grader could not plant a state, if it could not: a step the loop 'saved' on
    the SIGTERM that holds no state, or another step's, is the root of every mismatch after it."""
    return (*expected_after_run(expected, out), out.get("plant_problem"))


def _diagnose_grace(args, actual, expected):
    if len(expected) > 5 and expected[5]:
        return expected[5]
    return diagnose_run(args, actual, expected)


GRACE_RUN = Hidden(
    generate=_grace_cases,
    messages={
        "never_signalled": "Your run ended before the grader could send its SIGTERM where it planned to: save "
                           "periodically as the statement says (steps that are multiples of save_every), and "
                           "evaluate after the steps it names.",
        "grace_exceeded": "Your run was still running when the grace window closed, and the SIGKILL ended it: after "
                          "a SIGTERM the loop must stop whatever it is doing (an evaluation lasts longer than the "
                          "window: look at the signal inside it too), save, wait for the commit and return.",
        "grace_exceeded_saving": "Your run was still running when the grace window closed, and the SIGKILL ended it, "
                                 "graded twice (the second time with no other grading beside it): it had begun its "
                                 "save, but did not commit it and return within the window. After a SIGTERM save only "
                                 "the steps finished, wait for that one commit, and return at once.",
        "ended_by_term": "Your process ended on the SIGTERM itself, at once, without returning: no SIGTERM handler "
                         "of yours was in place when it came (none installed, or `signal.SIG_DFL` put back), and "
                         "Python's default action for a SIGTERM ends the process on the spot, as Lesson 8 section 1 "
                         "shows: the steps since the last save were lost. Install a handler with "
                         "`signal.signal(signal.SIGTERM, ...)` before the loop starts and keep it until the function "
                         "returns; on a SIGTERM, save the steps finished, wait for the commit, and return.",
        "exited_on_term": "After the SIGTERM your run ended without returning: your code raised or exited (an "
                          "exception, `sys.exit`, which raises SystemExit, or `os._exit`). On a SIGTERM save the steps "
                          "finished, wait for the commit, and return the function's result as a run that ends by "
                          "itself does.",
        "exited_after_commit": "After the SIGTERM your run committed a save, then ended without returning: your "
                               "code ended the process (`sys.exit`, which raises SystemExit, or `os._exit`, whatever "
                               "the exit status) or raised. A job's entrypoint may end its process once the step is "
                               "committed (Lesson 8's does), but the statement asks this function to return within "
                               "the grace window (it runs in your notebook's kernel too, which an exit would end): "
                               "on a SIGTERM save the steps finished, wait for the commit, and return "
                               "`(training.params_of(model), first_step)` as a run that ends by itself does.",
        "trained_on": "After the SIGTERM your run went on training (and saved a later step): it must stop where it "
                      "stands, whatever it is doing, and save the steps it finished then. Training on spends the grace "
                      "window on steps a longer run, or a slower save, would lose to the SIGKILL.",
        "not_saved_on_term": "The SIGTERM came during an evaluation, after a training step that no save held, and your "
                             "run ended without committing that step: the steps since the last periodic save were "
                             "lost. On a SIGTERM, save the steps finished (force the save: it is not a periodic step) "
                             "and wait for it to commit before returning.",
        "saves_between": "Your run committed steps that are neither periodic saves nor the step saved on the "
                         "SIGTERM: save every save_every steps and the last step only (saves are what the grace "
                         "window is about: each costs time), plus one save when the SIGTERM comes.",
        "keys": "Return training.params_of(model) as params: a dict from each parameter's path to its value.",
        "not_resumed": "Right parameters, but the last run did not start from the latest committed step (its "
                       "first_step says where it started): restore the latest step and train only the steps that "
                       "remain.",
        "wrong_first_step": "Right parameters, and your last run went on from what the latest committed step holds "
                            "(it ends as a run restoring that step does), but the first_step it returned is another "
                            "number: return the step this call started training from, the step it restored (0 in a "
                            "fresh folder), not the last step trained or the next one.",
        "never_preempted": "Right parameters, but the grader could not preempt your run where it planned to: save "
                           "periodically as the statement says, and wait for the last save before returning.",
        "plant_unreadable": "The grader could not restore your latest committed step: before the last restart it "
                            "restores that step's `state` item itself, with Orbax. Save real checkpoints, each step "
                            "holding the two items `state` and `data`.",
        "plant_not_state": "Your latest committed step does not hold the training state after that many steps: the "
                           "grader restores its `state` item and compares it, leaf by leaf, with the state after as "
                           "many training steps. On a SIGTERM save the state after the steps finished, under that "
                           "step's number (a copy of an older save under a new number is not it).",
        "not_from_disk": "Your last run did not go on from what its latest committed step holds: before it started, "
                         "the grader replaced that step's state with another valid one, and your run ended as if it "
                         "had not. Restore the state and the position from the step itself.",
        "position_lost": "A resumed run must continue the data where it stopped: yours restored the training state, "
                         "then trained on the batches of a fresh pipeline (epoch 0 again). Save `batches.get_state()` "
                         "as each step's `data` item and put it back with `batches.set_state(...)`.",
        "restarted": "Right parameters, but after the SIGTERM your run saved again a step that was already "
                     "committed: it started over instead of resuming from the latest committed step.",
        "lost_final_save": "Right parameters, but the last save was lost: your function returned while it was still "
                           "committing. Wait for the manager before returning.",
        "during_evaluation": "Sent a SIGTERM during an evaluation and started again, your run does not end with the "
                             "parameters of a run never interrupted.",
        "during_save": "Sent a SIGTERM while a save was under way and started again, your run does not end with the "
                       "parameters of a run never interrupted.",
    },
    diagnose=_diagnose_grace,
    check_outcome=_grace_outcome,
    precedence=("plant_not_state", "plant_unreadable", "grace_exceeded", "grace_exceeded_saving", "ended_by_term",
                "exited_on_term",
                "exited_after_commit", "saves_between", "trained_on", "not_saved_on_term"),
    requirements={
        "never save another step, except on a SIGTERM": ("during_evaluation", "during_save"),
        "On a SIGTERM your loop must stop whatever it is doing": ("during_evaluation", "during_save"),
        "save the state after the last training step it finished": ("during_evaluation", "during_save"),
        "wait until that step is committed, and return within the grace window": ("during_evaluation", "during_save"),
        "a run must go on from the latest committed step": ("during_evaluation", "during_save"),
        "training only the steps that remain": ("during_evaluation", "during_save"),
        "on the batches that come next": ("during_evaluation", "during_save"),
        "the last run's is compared bit for bit with a run never interrupted": ("during_evaluation", "during_save"),
        "the last run must go on from what the step holds": ("during_evaluation", "during_save"),
    },
    expected_after=_expected_after_grace,
    retry_alone=("grace_exceeded_saving",),
    plant_table=plant_table_of,
    on_exception="After a SIGTERM the folder holds the steps that committed: create the CheckpointManager, ask it "
                 "for latest_step(), and restore that step (the state with a target built from your own state, the "
                 "data item as JSON).",
    expected=_uninterrupted_grace,
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "host_batch": BATCH,
    "newest_step_across_tiers": TIERS,
    "train_with_grace": GRACE_RUN,
}
