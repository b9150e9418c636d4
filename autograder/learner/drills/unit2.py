"""Unit 2's drills (sharded save layouts): the bytes of a sharded parameter one device holds.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=2``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question, drawn_dtype


def shard_bytes(rng) -> Question:
    dtype, size = drawn_dtype(rng)
    data, model = [(2, 2), (2, 4), (2, 8), (4, 2), (4, 4)][int(rng.integers(5))]  # at most the course's 16
    mesh = {"data": data, "model": model}
    spec = [("data", "model"), (None, "model"), ("data", None), ("model", None)][int(rng.integers(4))]
    shape = tuple(int(rng.choice([1024, 2048, 4096, 8192])) for _ in range(2))
    per = [n // (mesh[a] if a else 1) for n, a in zip(shape, spec)]
    spec_s = "P(" + ", ".join(repr(a) if a else "None" for a in spec) + ")"
    whole = shape[0] * shape[1] * size
    return Question(
        "shard_bytes",
        f"A {dtype} parameter of shape {shape} is sharded {spec_s} on a mesh {mesh}. How many bytes of it "
        "does one device hold?",
        per[0] * per[1] * size, "bytes",
        f"each device holds ({per[0]}, {per[1]}): dimension 0 {'/ ' + str(mesh[spec[0]]) if spec[0] else 'whole'}, "
        f"dimension 1 {'/ ' + str(mesh[spec[1]]) if spec[1] else 'whole'}; {per[0]} x {per[1]} x {size} bytes "
        f"= {per[0] * per[1] * size:,} bytes. Axes not named in the spec replicate.", facts=dict(dtype=dtype, shape=shape, mesh=mesh, spec=spec), unit_of_study=2,
        mistakes=((per[0] * per[1], f"That counts values, not bytes: x {size} bytes per {dtype} value."),
                  (whole, "That is the whole parameter: a device holds only its shard."),
                  (whole / (data * model), "That divides by every mesh axis: an axis the spec does not name "
                                           "replicates, it does not split.")))


DRILLS = (shard_bytes,)
