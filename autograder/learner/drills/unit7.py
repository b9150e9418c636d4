"""Unit 7's drills (when the machine or the code changed): a restore onto another mesh, a counter cast
to float32, the peak of unstacking a scanned model.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=7``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

import numpy as np

from autograder.learner.drills import Question, drawn_dtype


def moved_restore_bytes(rng) -> Question:
    rows, cols = int(rng.choice([32_000, 50_000, 128_000])), int(rng.choice([1024, 2048, 4096]))
    dtype, size = drawn_dtype(rng)
    saved = {"data": int(rng.choice([1, 2])), "model": int(rng.choice([2, 4, 8]))}
    new = {"data": 16 // 4, "model": 4} if saved["model"] != 4 else {"data": 2, "model": 8}
    spec = str(rng.choice(["model", "data"]))
    named = new[spec]
    total = rows * cols * size * (16 // named)
    one = rows * cols * size
    return Question(
        "moved_restore_bytes",
        f"A {dtype} array of shape ({rows:,}, {cols:,}) was saved sharded PartitionSpec('{spec}') on a mesh of "
        f"(data {saved['data']}, model {saved['model']}) devices. It is restored onto 16 CPU devices, a mesh of "
        f"(data {new['data']}, model {new['model']}), with the spec it was saved with. How many bytes do the 16 devices "
        "hold together, every copy counted (answer with a unit if you like, e.g. 2 GiB)?",
        total, "bytes",
        f"The array is {rows:,} x {cols:,} x {size} = {rows * cols * size:,} bytes. On the new mesh '{spec}' splits it "
        f"{named} ways; the axis the spec does not name ({16 // named} devices) replicates each piece: "
        f"{16 // named} copies, {total:,} bytes. The saved mesh plays no part: a restore places as its target says "
        "(Lesson 7 measures what the devices hold).", rel_tol=0.01,
        facts=dict(rows=rows, cols=cols, dtype=dtype, saved=saved, new=new, spec=spec), unit_of_study=7,
        mistakes=((one, f"That is one copy; the axis the spec does not name ({16 // named} devices) replicates each "
                        "piece."),
                  (one * (saved["data"] * saved["model"] // saved[spec]), "That counts the saved mesh's copies; a "
                   "restore places as its target says: the new mesh's."),
                  (one * 16, f"That gives every device a whole copy; '{spec}' splits it {named} ways.")))


def silent_cast(rng) -> Question:
    step = int(rng.integers(2**24 + 1, 2**26)) | 1  # odd: above 2^24, no float32 holds it
    back = int(np.float32(step))
    spacing = 2 ** (step.bit_length() - 24)  # the gap between neighbouring float32 values there
    return Question(
        "silent_cast",
        f"A training state's int32 step counter, {step:,}, is restored into a target that says float32 (a model "
        "rebuilt with every leaf float32). Orbax casts without a word. Which step does the restored counter say?",
        back, "step",
        f"A float32 has a 24-bit significand: from 2^{step.bit_length() - 1} = {2 ** (step.bit_length() - 1):,} to "
        f"2^{step.bit_length()} it holds only every {'second' if step.bit_length() == 25 else 'fourth'} integer, and rounds to the nearest (ties to even): {step:,} becomes "
        f"{back:,}. A run resumed from it repeats or skips {abs(back - step)} step(s) of its data and schedule; "
        "compare the target's dtypes with the checkpoint's metadata before restoring (Lesson 7).",
        facts=dict(step=step), unit_of_study=7,
        mistakes=((step, "That is the counter unchanged; no float32 holds it: above 2^24 float32 rounds."),
                  (step - step % spacing, "That rounds down (truncates); float32 rounds to the nearest it holds "
                                          "(ties to even).")))


def unstack_peak(rng) -> Question:
    layers, width = int(rng.choice([16, 32, 48, 64])), int(rng.choice([2048, 4096, 8192]))
    dtype, size = drawn_dtype(rng)
    data, model = [(1, 16), (2, 8), (4, 4), (8, 2)][int(rng.integers(4))]
    stacked = layers * width * width * size
    total = 2 * stacked * data
    return Question(
        "unstack_peak",
        f"A scanned model's stacked {dtype} kernel of shape ({layers}, {width:,}, {width:,}) is restored onto 16 CPU "
        f"devices, a mesh of (data {data}, model {model}), with PartitionSpec(None, 'model'). A migration then slices "
        f"it into {layers} per-layer kernels (each slice a new array, placed as the stack was) and drops the stacked one "
        "only once every slice exists. How many bytes do the devices hold at that moment, every copy counted (answer "
        "with a unit if you like, e.g. 12 GiB)?",
        total, "bytes",
        f"The stack is {layers} x {width:,} x {width:,} x {size} = {stacked:,} bytes, split over the {model} devices "
        f"of 'model' and held once per 'data' replica ({data}): {stacked * data:,} bytes on the devices. The slices "
        f"together are as large again, and both are alive: {total:,} bytes. A lower bound on the host's peak (the "
        "restore keeps more than the arrays), and it stays while the stack is alive, however early each slice is "
        "made. Lesson 7 measures it beside one array at a time (problem 7.4's way: one stack and its layers alive).", rel_tol=0.01,
        facts=dict(layers=layers, width=width, dtype=dtype, data=data, model=model), unit_of_study=7,
        mistakes=((stacked * data, "That is the stack alone; its slices are alive too, as large again."),
                  (2 * stacked, f"That leaves out the replicas: each of the {data} 'data' replicas holds a copy."),
                  (2 * stacked * 16, f"That gives every device a whole copy; 'model' splits it {model} ways.")))


DRILLS = (moved_restore_bytes, silent_cast, unstack_peak)
