"""Unit 8's drills (preemption): steps lost to a preemption, whether a save fits the grace window,
where a host reads after a restart on another number of hosts.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=8``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question, fmt_number


def steps_lost(rng) -> Question:
    every = int(rng.choice([50, 100, 250, 500, 1000]))
    done = every * int(rng.integers(3, 40)) + int(rng.integers(1, every))
    last = done - done % every
    lost = done - last
    return Question(
        "steps_lost",
        f"A job saves a checkpoint every {every} steps and handles no signal. A preemption's SIGTERM arrives "
        f"while it trains step {done + 1} (step {done} was the last to finish; every periodic save up to it "
        "committed). How many finished steps does the restarted job train again?",
        lost, "steps",
        f"Without a handler the SIGTERM ends the process at once: it resumes from the last periodic save, step "
        f"{last} ({done} - {done} mod {every}), and trains steps {last + 1} to {done} again: {lost}. A handler that "
        "saves on SIGTERM within the grace window loses none of them (Lesson 8 measures both).",
        facts=dict(every=every, done=done), unit_of_study=8,
        mistakes=((every, f"That is the whole interval; only the steps since the last save, step {last}, are lost."),
                  (lost + 1, f"That counts step {done + 1}, which had not finished: it is trained once, after the "
                             "restart, like every step after it.")))


def save_in_grace(rng) -> Question:
    gb = int(rng.choice([80, 160, 420, 840]))
    hosts = int(rng.choice([8, 16, 32, 64]))
    bandwidth = float(rng.choice([0.5, 1.0, 2.0]))
    check = float(rng.choice([1.0, 2.0, 5.0, 10.0]))
    grace = 30.0
    seconds = gb / hosts / bandwidth + check
    margin = grace - seconds
    return Question(
        "save_in_grace",
        f"A training state of {gb} GB is sharded evenly over {hosts} hosts, each writing its share at {bandwidth:g} "
        f"GB/s. The loop checks for a preemption notice at most every {check:g} s (between evaluation batches, "
        f"say), and GKE's grace window is {grace:g} s. How many seconds are left of the window once the save, "
        "started at the next check, has been written (negative: it does not fit)?",
        margin, "s",
        f"The worst case waits a whole {check:g} s for the next check, then writes {gb} / {hosts} = {fmt_number(gb / hosts)} "
        f"GB per host at {bandwidth:g} GB/s ({fmt_number(gb / hosts / bandwidth)} s): {fmt_number(seconds)} s of the {grace:g}, "
        f"leaving {fmt_number(margin)} s. Where it does not fit, save more often or write less (a local tier, fewer "
        "bytes): the SIGKILL does not wait.", rel_tol=0.02,
        facts=dict(gb=gb, hosts=hosts, bandwidth=bandwidth, check=check), unit_of_study=8,
        mistakes=((grace - gb / hosts / bandwidth, "That leaves out the wait for the next check: the signal can "
                                                   "arrive just after one."),
                  (grace - gb / bandwidth - check, f"That is one host writing everything; each of the {hosts} writes "
                                                   "its share at once.")))


def restart_position(rng) -> Question:
    batch = int(rng.choice([256, 512, 1024, 2048]))
    old, new = (int(x) for x in rng.choice([(8, 4), (16, 8), (4, 8), (8, 16), (32, 16)]))
    step = int(rng.integers(100, 5000))
    host = int(rng.integers(1, new))
    first = step * batch + host * (batch // new)
    return Question(
        "restart_position",
        f"A job with a global batch of {batch} examples saved at global step {step} on {old} hosts and restarts "
        f"on {new} hosts, every host reading by position in one global order (host h reads rows h x "
        f"{batch} / hosts onward of each global batch). At which position of the global order does host {host} "
        "start reading after the restart?",
        first, "position",
        f"Step {step}'s global batch starts at {step} x {batch} = {step * batch:,}; on {new} hosts each reads "
        f"{batch // new} rows, so host {host} starts {host} x {batch // new} later: {first:,}. The number of hosts "
        "before the restart does not enter: the step alone says where the job is.",
        facts=dict(batch=batch, old=old, new=new, step=step, host=host), unit_of_study=8,
        mistakes=((step * batch + host * (batch // old), f"That splits the batch among the {old} hosts of the saved "
                                                          f"job; the restarted job has {new}."),
                  (step * batch // new + host, "That is a per-host count, not a position in the global order.")))


DRILLS = (steps_lost, save_in_grace, restart_position)
