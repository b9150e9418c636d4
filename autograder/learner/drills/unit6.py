"""Unit 6's drills (from a training checkpoint to a serving model): what a server holds, the training
state against it, replicated copies on one host.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=6``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question


def serving_bytes(rng) -> Question:
    billions = int(rng.choice([1, 7, 8, 13, 70, 405]))
    data, model = int(rng.choice([1, 2, 4])), int(rng.choice([8, 16]))
    total = billions * 2 * data
    return Question(
        "serving_bytes",
        f"A model of {billions} billion parameters was trained with AdamW, all in float32; its checkpoint holds the "
        "parameters and both moments. A server restores only the parameters, cast to bfloat16 on restore, onto a "
        f"mesh of (data {data}, model {model}) devices, every spec naming the model axis only. How many GB (10^9 "
        "bytes) do its devices hold, every copy counted?",
        total, "GB",
        f"Only the parameters, 2 bytes each in bfloat16: {billions} x 10^9 x 2 = {billions * 2:,} GB, split over the "
        f"{model} devices of the model axis and held once per data replica ({data}): {total:,} GB. The checkpoint "
        f"holds {billions * 12:,} GB (4 bytes x 3 arrays per parameter); a partial restore reads the parameters' "
        f"{billions * 4:,} GB of it, in float32, a chunk at a time, and never the moments.",
        facts=dict(billions=billions, data=data, model=model), unit_of_study=6,
        mistakes=((billions * 4 * data, "That keeps float32 (4 bytes); the server casts to bfloat16, 2 bytes a "
                                        "parameter."),
                  (billions * 12, "That is the whole checkpoint; the server restores only the parameters."),
                  (billions * 2, f"That is one copy; each of the {data} data replicas holds one."),
                  (billions * 2 * data / model, "That is what one device holds; the question counts every device's.")))


def state_to_serving(rng) -> Question:
    param_dtype, param_size = ("float32", 4) if rng.random() < 0.5 else ("bfloat16", 2)
    ratio = (param_size + 4 + 4) / 2
    return Question(
        "state_to_serving",
        f"A training state holds {param_dtype} parameters and AdamW's two moments in float32. How many times the "
        "bytes of a bfloat16 copy of the parameters (what a server keeps) does the whole training state weigh?",
        ratio, "x",
        f"Per parameter: {param_size} bytes ({param_dtype}) + 4 (mu) + 4 (nu) = {param_size + 8} bytes, against 2 in "
        f"bfloat16: {ratio:g}x. Restoring the whole state to keep the parameters reads {ratio:g} times what the server "
        "keeps (Lesson 6 measures the peak too).",
        facts=dict(param_dtype=param_dtype), unit_of_study=6,
        mistakes=((ratio / 2, "That compares with 4 bytes a parameter; a bfloat16 copy has 2."),
                  (param_size / 2, "That leaves out the moments: mu and nu, 4 bytes each in float32.")))


def replicated_copies(rng) -> Question:
    rows = int(rng.choice([32_000, 50_000, 128_000, 152_000]))
    cols = int(rng.choice([1024, 2048, 4096]))
    devices = int(rng.choice([4, 8, 16]))
    one = rows * cols * 2
    return Question(
        "replicated_copies",
        f"A bfloat16 embedding of shape ({rows:,}, {cols:,}) is replicated (PartitionSpec()) over the {devices} "
        "devices of one host, CPU devices whose memory is the host's. How many bytes of host memory do the device "
        "copies take (answer with a unit if you like, e.g. 4 GiB)?",
        one * devices, "bytes",
        f"One copy is {rows:,} x {cols:,} x 2 = {one:,} bytes; replicated, each of the {devices} devices holds a full "
        f"copy: {one * devices:,} bytes. Lesson 6 measures the growth for 16 devices: serving "
        "specs replicate only what is small.", rel_tol=0.01,
        facts=dict(rows=rows, cols=cols, devices=devices), unit_of_study=6,
        mistakes=((one, f"That is one copy; replicated, each of the {devices} devices holds a whole copy."),
                  (rows * cols * 4 * devices, "That counts 4 bytes a value; bfloat16 is 2."),
                  (one / devices, "That splits it over the devices; PartitionSpec() replicates: each holds all of it.")))


DRILLS = (serving_bytes, state_to_serving, replicated_copies)
