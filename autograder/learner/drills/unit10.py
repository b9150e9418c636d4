"""Unit 10's drills (checkpointing a frontier run): what a checkpoint of a mixed-precision Adam run
weighs, a job's MTBF at scale, Young's interval between saves.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=10``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

import math

from autograder.learner.drills import Question, fmt_number

YEAR_HOURS = 8766  # 365.25 days


def restart_checkpoint(rng) -> Question:
    billions = int(rng.choice([7, 8, 13, 34, 70, 175, 405, 671]))
    total = billions * 12
    return Question(
        "restart_checkpoint",
        f"A model of {billions} billion parameters trains with mixed-precision Adam: bfloat16 weights and "
        "gradients for the passes, float32 master weights and Adam's two moments for the update. A checkpoint "
        "holds what a restart cannot do without. How big is it, in GB (10^9 bytes)?",
        total, "GB",
        f"The float32 master weights (4 bytes), Adam's first and second moments (4 + 4): 12 bytes a parameter, "
        f"{billions} x 10^9 x 12 = {total:,} GB. The bfloat16 weights are the master weights rounded (made again "
        "on restore), and the gradients are remade by the next step: the whole training state, 16 bytes a "
        "parameter, holds them too.", rel_tol=0.01,
        facts=dict(billions=billions), unit_of_study=10,
        mistakes=((billions * 16, "That is the whole training state: the bfloat16 weights and the gradients are "
                                  "remade after a restart, never saved."),
                  (billions * 2, "That is the bfloat16 weights alone: a restart needs the float32 master weights "
                                 "and Adam's two moments to go on exactly."),
                  (billions * 4, "That is the float32 master weights alone: Adam's two moments, 4 bytes each, are "
                                 "needed too."),
                  (billions * 14, "That keeps the bfloat16 weights too: they are the master weights rounded, "
                                  "remade on restore.")))


def job_mtbf(rng) -> Question:
    years = int(rng.choice([3, 4, 5, 6, 8, 10]))
    gpus = int(rng.choice([1024, 4096, 8192, 16_384, 32_768, 65_536, 131_072]))
    hours = years * YEAR_HOURS / gpus
    return Question(
        "job_mtbf",
        f"One GPU fails on average once every {years} years (a year: {YEAR_HOURS:,} hours), independently of the "
        f"others and at a constant rate. A synchronous job on {gpus:,} of them stops at any GPU's failure. What is "
        "the job's mean time between failures, in hours?",
        hours, "hours",
        f"Rates add: the job fails {gpus:,} times as often as one GPU, so its MTBF is one GPU's over {gpus:,}: "
        f"{years} x {YEAR_HOURS:,} / {gpus:,} = {fmt_number(hours)} hours. Llama 3's 16,384 GPUs failed about every "
        "3 hours this way; 8 times as many would fail every 23 minutes.", rel_tol=0.01,
        facts=dict(years=years, gpus=gpus), unit_of_study=10,
        mistakes=((years * YEAR_HOURS, "That is one GPU's MTBF: any of the GPUs stops the job, so the job fails "
                                       f"{gpus:,} times as often."),
                  (years * YEAR_HOURS / (gpus // 8), "That divides by the hosts (8 GPUs each): every GPU fails on "
                                                     "its own, so divide by the GPUs."),
                  (hours * 60, "That is minutes: the question asks for hours.")))


def young_minutes(rng) -> Question:
    blocking = int(rng.choice([1, 2, 5, 10, 20, 30]))
    write = int(rng.choice([30, 60, 120, 240]))
    mtbf_hours = float(rng.choice([1.5, 2, 3, 4, 6, 8]))
    minutes = math.sqrt(2 * blocking * mtbf_hours * 3600) / 60
    return Question(
        "young_minutes",
        f"A job's MTBF is {mtbf_hours:g} hours. Each save stops training for {blocking} s, then its write goes on "
        f"for {write} s while training runs. How many minutes of training between saves does Young's interval "
        "give?",
        minutes, "minutes",
        f"Young's interval is sqrt(2 delta M), with delta the time a save stops training, {blocking} s (the "
        f"asynchronous write costs no training), and M in seconds, {fmt_number(mtbf_hours * 3600)}: "
        f"sqrt(2 x {blocking} x {fmt_number(mtbf_hours * 3600)}) = {fmt_number(minutes * 60)} s, "
        f"{fmt_number(minutes)} minutes.", rel_tol=0.02,
        facts=dict(blocking=blocking, write=write, mtbf_hours=mtbf_hours), unit_of_study=10,
        mistakes=((math.sqrt(2 * (blocking + write) * mtbf_hours * 3600) / 60,
                   "That counts the asynchronous write as blocking: only the copy stops training."),
                  (math.sqrt(blocking * mtbf_hours * 3600) / 60, "That leaves out Young's 2: sqrt(2 delta M)."),
                  (math.sqrt(2 * blocking * mtbf_hours) / 60, "That takes M in hours: delta is in seconds, so M "
                                                              "must be too."),
                  (minutes * 60, "That is seconds: the question asks for minutes.")))


DRILLS = (restart_checkpoint, job_mtbf, young_minutes)
