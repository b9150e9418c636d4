"""Unit 5's drills (checkpointing a training run): a training state's size, a save's time, the steps a
CheckpointManager keeps.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=5``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question, drawn_dtype, fmt_number


def adam_checkpoint(rng) -> Question:
    billions = int(rng.choice([1, 7, 8, 13, 70, 405]))
    dtype, size = drawn_dtype(rng)
    total = billions * size * 3
    return Question(
        "adam_checkpoint",
        f"A model of {billions} billion {dtype} parameters trains with AdamW (optax's adamw: moments in the "
        "parameters' dtype). How big is a checkpoint of its whole training state, in GB (10^9 bytes)? "
        "Ignore the two step counters.",
        total, "GB",
        f"Three arrays per parameter: the parameter, mu and nu: {billions} x 10^9 x {size} bytes x 3 = {total:,} GB. "
        "Counting only the parameters gives a third of it. Mixed precision that keeps float32 moments beside "
        "bfloat16 weights weighs more again: 2 + 4 + 4 bytes per parameter.", rel_tol=0.01,
        facts=dict(billions=billions, dtype=dtype), unit_of_study=5,
        mistakes=((billions * size, "That counts only the parameters: AdamW keeps mu and nu beside them, each as large."),
                  (billions * size * 2, "That counts one moment; AdamW keeps two (mu and nu) beside the parameters."),
                  (billions * (size + 8), "That keeps the moments in float32; optax's adamw keeps them in the "
                                          "parameters' dtype.")))


def save_time(rng) -> Question:
    gb = int(rng.choice([60, 210, 420, 840, 1215]))
    hosts = int(rng.choice([4, 8, 16, 32, 64]))
    bandwidth = float(rng.choice([0.5, 1.0, 2.0, 4.0]))
    seconds = gb / hosts / bandwidth
    return Question(
        "save_time",
        f"A training state of {gb} GB is sharded FSDP-style over {hosts} hosts, evenly, and each host writes its "
        f"share to storage at {bandwidth:g} GB/s, all at once. How many seconds does the write take, at best?",
        seconds, "s",
        f"The slowest host sets the time: each writes {gb} / {hosts} = {fmt_number(gb / hosts)} GB, at {bandwidth:g} GB/s: "
        f"{fmt_number(seconds)} s. That is the lower bound: it holds while the storage's total bandwidth keeps up with "
        f"{hosts} x {bandwidth:g} GB/s, and an async save hides it from training except for the copy to host "
        "memory (Lesson 5 times both).", rel_tol=0.02,
        facts=dict(gb=gb, hosts=hosts, bandwidth=bandwidth), unit_of_study=5,
        mistakes=((gb / bandwidth, f"That is one host writing all of it; each of the {hosts} writes its 1/{hosts} "
                                   "share, all at once."),
                  (gb / hosts, f"That is each host's share in GB; at {bandwidth:g} GB/s the seconds are that / "
                               f"{bandwidth:g}.")))


def steps_kept(rng) -> Question:
    every = int(rng.choice([100, 250, 500, 1000]))
    keep = int(rng.choice([2, 3, 5]))
    last = every * int(rng.integers(keep + 2, keep + 20)) + int(rng.integers(1, every))
    oldest = (last // every - keep + 1) * every
    return Question(
        "steps_kept",
        f"A CheckpointManager saves every {every} steps (save_interval_steps={every}, steps counted from 0) with "
        f"max_to_keep={keep}. Training is at step {last:,} and every save has committed. What is the OLDEST step "
        "still on disk?",
        oldest, "step",
        f"Saved steps are the multiples of {every}; the newest at or below {last:,} is {last // every * every:,}, and "
        f"the {keep} newest reach back to {last // every * every:,} - {keep - 1} x {every} = {oldest:,}.",
        facts=dict(every=every, keep=keep, last=last), unit_of_study=5,
        mistakes=((last // every * every, f"That is the newest step on disk; max_to_keep={keep} keeps {keep}, and the "
                                          "question asks the oldest."),
                  (oldest - every, f"That is one interval too far back: the newest save is one of the {keep} kept."),
                  (oldest + every, f"That keeps {keep - 1} steps: count the newest save as one of the {keep}."),
                  (last, f"That is the step training is at; saves happen only at multiples of {every}.")))


DRILLS = (adam_checkpoint, save_time, steps_kept)
