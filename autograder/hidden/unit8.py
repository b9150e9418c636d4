"""Hidden cases for Unit 8 (preemption). Problem 8.1's expected ids are Grain's own order, read by
position on this side."""

from __future__ import annotations

from autograder.hidden import Case, Hidden
from autograder.hidden.unit5 import _diagnose_run, _expected_after, _plant_table, _run_outcome, _uninterrupted
from autograder.wall.kinds import RunFolder, TieredRootArg


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
    raise ValueError(which)


def _diagnose_batch(args, actual, expected):
    step, host, hosts, seed, examples, batch = args
    order = _order(seed, examples)
    if len(actual) != batch // hosts:
        return "rows"
    for which in ("strided", "from_start", "drop_remainder"):
        if which == "from_start" and step * batch % examples == 0:
            continue  # a step at an epoch's start: reading the first epoch again looks the same there
        wrong = [int(order[i]) for i in _positions(args, which)]
        if wrong != expected and list(actual) == wrong:
            return which
    first_epoch = [int(order[i % examples]) for i in range(step * batch + host * (batch // hosts),
                                                           step * batch + (host + 1) * (batch // hosts))]
    if first_epoch != expected and list(actual) == first_epoch:
        return "same_permutation"
    if sorted(actual) == sorted(expected):
        return "row_order"
    return None


def _names_the_problem(args, message):
    """A ValueError's message says what is wrong: the hosts that do not divide, or the host's number."""
    step, host, hosts, _, _, batch = args
    text = message.lower()
    return str(hosts) in text or str(host) in text or str(batch) in text


BATCH = Hidden(
    generate=_batch_cases,
    messages={
        "should_raise": "Raise ValueError when the hosts do not divide the global batch, or when `host` is not one "
                        "of 0 to hosts - 1: a host reading a ragged or made-up share reads examples twice or never.",
        "wrong_exception": "Raise ValueError (or a subclass) for hosts that do not divide the global batch, and for "
                           "a host out of range.",
        "unclear_error": "Your ValueError should say what is wrong: name the number of hosts, the host or the "
                         "global batch.",
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
    },
    on_exception="The arguments are plain ints; build the order with Grain and index it by position.",
    expected=host_batch_truth,
)


# ---------------------------------------------------------------------------------------------
# 8.2 newest_step_across_tiers: each folder written by real Orbax saves (ckptlab.tiers), then damaged.

def _tiers(category, **spec):
    return Case(category, (TieredRootArg(tuple(sorted(spec.items()))),))


def _tier_cases(rng):
    seed = lambda: int(rng.integers(0, 1000))  # noqa: E731
    hosts = lambda: int(_pick(rng, (2, 3)))  # noqa: E731
    h3 = int(rng.integers(0, 3))
    cases = [
        # nothing lost: the newest local step is newer than the newest persistent one
        _tiers("whole", hosts=hosts(), steps=int(_pick(rng, (8, 9))), local_every=int(_pick(rng, (1, 2))), local_keep=2,
               persistent_every=5, persistent_keep=1, seed=seed()),
        # the newest step in both tiers: the local read wins
        _tiers("tie", hosts=hosts(), steps=int(_pick(rng, (8, 12))), local_every=2, local_keep=2, persistent_every=4,
               persistent_keep=1, seed=seed()),
        # one host's machine replaced: no step is common to every host's local tier
        _tiers("host_lost", hosts=3, steps=int(_pick(rng, (8, 9))), local_every=1, local_keep=2,
               persistent_every=int(_pick(rng, (3, 4))), persistent_keep=2, seed=seed(), damage=(("lost", h3),)),
        _tiers("host_lost", hosts=2, steps=int(_pick(rng, (9, 11))), local_every=1, local_keep=3, persistent_every=5,
               persistent_keep=1, seed=seed(), damage=(("lost", int(rng.integers(0, 2))),)),
        # one host's newest local save cut short: the step before it, common to all, newer than the persistent one
        _tiers("cut", hosts=hosts(), steps=int(_pick(rng, (10, 11))), local_every=1, local_keep=3, persistent_every=4,
               persistent_keep=1, seed=seed(), damage=(("cut", int(rng.integers(0, 2))),)),
        # holes in two hosts' local tiers at different steps: only the oldest local step is common
        _tiers("holes", hosts=2, steps=int(_pick(rng, (11, 13))), local_every=1, local_keep=3, persistent_every=5,
               persistent_keep=1, seed=seed(), damage=(("unreadable", 0, 0), ("unreadable", 1, 1))),
        # a host lost, and the newest persistent save cut short or unreadable: the one before it
        _tiers("persistent_cut", hosts=2, steps=int(_pick(rng, (9, 10))), local_every=1, local_keep=2,
               persistent_every=3, persistent_keep=2, seed=seed(), damage=(("lost", 0), ("persistent_cut",))),
        _tiers("persistent_unreadable", hosts=2, steps=int(_pick(rng, (9, 10))), local_every=1, local_keep=2,
               persistent_every=3, persistent_keep=2, seed=seed(), damage=(("lost", 1), ("persistent_unreadable", 0))),
        # nothing restorable anywhere
        _tiers("nothing", hosts=2, steps=6, local_every=2, local_keep=1, persistent_every=5, persistent_keep=1,
               seed=seed(), damage=(("lost", int(rng.integers(0, 2))), ("persistent_cut",))),
        _tiers("nothing", hosts=2, steps=6, local_every=2, local_keep=1, persistent_every=5, persistent_keep=1,
               seed=seed(), damage=(("cut", int(rng.integers(0, 2))), ("persistent_unreadable", 0))),
        _tiers("one_host", hosts=1, steps=int(_pick(rng, (7, 9))), local_every=int(_pick(rng, (1, 3))), local_keep=2,
               persistent_every=4, persistent_keep=1, seed=seed(), damage=(("unreadable", 0, 0),)),
    ]
    return cases


def _tier_model(arg, *, tmp_ok=False, unreadable_ok=False):
    """Arithmetic, from the folder's spec: each host's restorable local steps and the persistent
    tier's (or, for diagnoses, what an answer trusting a cut save or an unreadable step counts)."""
    spec = dict(arg.spec)
    damage = [tuple(h) for h in spec.get("damage", ())]

    def kept(every, keep):
        steps = [s for s in range(1, spec["steps"] + 1) if s % every == 0]
        return steps[-keep:] if keep else steps

    hosts = {h: kept(spec.get("local_every", 2), spec.get("local_keep", 3)) for h in range(spec.get("hosts", 2))}
    persistent = kept(spec.get("persistent_every", 5), spec.get("persistent_keep", 2))

    def harm(steps, kind, k=0):
        steps = sorted(steps, reverse=True)
        if kind == "cut" and steps and not tmp_ok:
            steps = steps[1:]
        elif kind == "unreadable" and k < len(steps) and not unreadable_ok:
            steps = steps[:k] + steps[k + 1:]
        return set(steps)

    hosts = {h: set(v) for h, v in hosts.items()}
    persistent = set(persistent)
    for d in damage:
        if d[0] == "lost":
            hosts[d[1]] = set()
        elif d[0] == "cut":
            hosts[d[1]] = harm(hosts[d[1]], "cut")
        elif d[0] == "unreadable":
            hosts[d[1]] = harm(hosts[d[1]], "unreadable", d[2])
        elif d[0] == "persistent_cut":
            persistent = harm(persistent, "cut")
        elif d[0] == "persistent_unreadable":
            persistent = harm(persistent, "unreadable", d[1])
    return hosts, persistent


def _best(common, persistent):
    """The newest of the steps every host restores locally and the persistent tier's (a tie: local)."""
    return max([(s, "local") for s in common] + [(s, "persistent") for s in persistent - common], default=None)


def tier_truth_model(arg):
    hosts, persistent = _tier_model(arg)
    return _best(set.intersection(*hosts.values()) if hosts else set(), persistent)


def newest_across_tiers_truth(tiers):
    """The truth, from Orbax: every tier's committed steps restored (ckptlab.tiers)."""
    from ckptlab.tiers import newest_restorable

    found = newest_restorable(tiers)
    return None if found is None else (int(found[0]), found[1])


def _diagnose_tiers(args, actual, expected):
    arg = args[0]
    if actual is None:  # (where only the persistent tier has a step: it was not looked at)
        return "persistent_ignored" if expected is not None and expected[1] == "persistent" else "missed"
    step, tier = actual
    hosts, persistent = _tier_model(arg)
    common = set.intersection(*hosts.values()) if hosts else set()
    if tier not in ("local", "persistent"):
        return "tier_name"
    if expected is not None and step == expected[0] and tier != expected[1]:
        return "tie_to_persistent" if expected[1] == "local" else "not_common"
    if tier == "local" and step in common and expected is not None and expected[1] == "persistent":
        return "persistent_ignored"  # a step every host restores, older than the persistent tier's
    union = _best(set().union(*hosts.values()), persistent)
    if union != expected and actual == union:
        return "not_common"  # the union of the hosts' steps (where it answers as another mistake would too)
    for name, (h, p) in (("tmp_trusted", _tier_model(arg, tmp_ok=True)),
                         ("unrestored", _tier_model(arg, unreadable_ok=True))):
        wrong = _best(set.intersection(*h.values()) if h else set(), p)
        if wrong != expected and actual == wrong:
            return name
    if tier == "local" and step not in common and any(step in v for v in hosts.values()):
        return "not_common"  # some host restores it, not every one (the oldest of the hosts' newest steps)
    if expected is not None and expected[1] == "local" and tier == "persistent" and step < expected[0]:
        return "local_ignored"
    return None


TIERS = Hidden(
    generate=_tier_cases,
    messages={
        "missed": "A step can be restored here: return it as (step, tier) rather than None.",
        "tier_name": "Name the tier as \"local\" or \"persistent\".",
        "not_common": "You returned a step as restorable from the local tier that not every host can restore "
                      "locally: each host's local tier holds only its own shards, so the job restores a step "
                      "locally only where every host holds it, committed and readable. Intersect the hosts' sets of "
                      "steps (the oldest of their newest steps is not enough: a host may lack it and hold a newer one).",
        "tmp_trusted": "You counted a save that never committed: a '<step>.orbax-checkpoint-tmp' folder is a save "
                       "cut short before its rename, whatever it holds.",
        "unrestored": "You returned a step that looks committed but whose `state` item does not restore: prove each "
                      "candidate by restoring it, and take a failure as 'not this step'.",
        "tie_to_persistent": "Every host holds that step in its local tier too: restore it from there (the fast "
                             "read), and say \"local\".",
        "local_ignored": "A newer step can be restored from the local tiers: the persistent tier is the fallback, "
                         "not the first choice.",
        "persistent_ignored": "The persistent tier holds a newer restorable step than any common local one: compare "
                              "both tiers.",
        "whole": "Wrong on a folder nothing happened to.",
        "tie": "Wrong when the newest step is in both tiers.",
        "host_lost": "Wrong when one host's local tier is empty (its machine was replaced).",
        "cut": "Wrong when one host's newest local save was cut short.",
        "holes": "Wrong when two hosts each lack a different local step.",
        "persistent_cut": "Wrong when the newest persistent save was cut short.",
        "persistent_unreadable": "Wrong when the newest persistent step does not restore.",
        "nothing": "Wrong when no step can be restored from either tier: return None.",
        "one_host": "Wrong for a job of one host.",
    },
    diagnose=_diagnose_tiers,
    precedence=("tmp_trusted", "unrestored", "not_common"),
    requirements={
        "A step can be restored from the local tier only when every host's local tier holds it committed and its "
        "`state` restores there": ("host_lost", "cut", "holes", "one_host"),
        "from the persistent tier when it is committed there and its `state` restores": (
            "persistent_cut", "persistent_unreadable", "nothing"),
        "a step's save committed when its folder is named by the step alone": ("cut", "persistent_cut", "nothing"),
        "Return `(step, tier)` for the newest step the job can restore": ("whole", "cut", "host_lost", "holes"),
        "`tier` being `\"local\"` when every host can restore it locally (the fast path)": ("tie", "whole", "cut"),
        "None when no step can be restored": ("nothing",),
    },
    on_exception="A host's local tier may be empty and a step folder half-written: list folders with os.listdir, "
                 "and treat any failure to restore a step as 'not this step'.",
    expected=newest_across_tiers_truth,
)


# ---------------------------------------------------------------------------------------------
# 8.3 train_with_grace: the grader sends the learner's run a real SIGTERM, then SIGKILL after the
# grace window (engine/preempted.py), starts it again, and plants a state before the last run, as
# for 5.3 (whose plant table, expected values and resume diagnoses it shares).

GRACE = 2.0  # seconds between the SIGTERM and the SIGKILL (the statement says it)


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
    # after step 6 unless it stops; a loop that does not answer meets the SIGKILL there.
    cases.append(Case("during_save", (RunFolder((("term_save", 4),), plant=plant(), grace=GRACE), 7, seed(), 2, 3)))
    return cases


def _uninterrupted_grace(ckpt_dir, total_steps, seed, save_every, eval_every):
    return _uninterrupted(ckpt_dir, total_steps, seed)


def _grace_outcome(args, out):
    total, every = int(args[1]), int(args[3])
    terms = out.get("terms") or []
    if len(terms) < out.get("planned", 0) or any(t.get("ended_first") for t in terms):
        return "never_signalled"
    if any(t.get("killed") for t in terms):
        return "grace_exceeded"
    if not all(t.get("returned") for t in terms):
        return "ended_by_term"
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
    return _run_outcome(args, out)


def _expected_after_grace(expected, out):
    """5.3's (the parameters a run restoring the planted state ends with, and what its diagnoses
    need), and why the grader could not plant a state, if it could not: a step the loop 'saved' on
    the SIGTERM that holds no state, or another step's, is the root of every mismatch after it."""
    return (*_expected_after(expected, out), out.get("plant_problem"))


def _diagnose_grace(args, actual, expected):
    if len(expected) > 5 and expected[5]:
        return expected[5]
    return _diagnose_run(args, actual, expected)


GRACE_RUN = Hidden(
    generate=_grace_cases,
    messages={
        "never_signalled": "Your run ended before the grader could send its SIGTERM where it planned to: save "
                           "periodically as the statement says (steps that are multiples of save_every), and "
                           "evaluate after the steps it names.",
        "grace_exceeded": "Your run was still running when the grace window closed, and the SIGKILL ended it: after "
                          "a SIGTERM the loop must stop whatever it is doing (an evaluation lasts longer than the "
                          "window: look at the signal inside it too), save, wait for the commit and return.",
        "ended_by_term": "Your process ended on the SIGTERM itself instead of returning: Python's default action ends "
                         "it at once, whatever it was saving. Install a handler (`signal.signal`), save the steps "
                         "finished, wait for the commit, and return.",
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
    precedence=("plant_not_state", "plant_unreadable", "grace_exceeded", "ended_by_term", "saves_between",
                "trained_on", "not_saved_on_term"),
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
    plant_table=_plant_table,
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
