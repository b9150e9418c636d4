"""Grading memory: a memory-measured problem's host memory, measured by the grader from outside
(``/proc/<pid>/status``, above what the worker held just before the learner's code loaded: the
peak of its anonymous memory, sampled; see :class:`autograder.sandbox.worker.Worker`).

Before that point the worker (trusted code, no learner code yet) makes the measure about the
learner's code alone, as Lesson 6 measures (:func:`ckptlab.memory.prepare_measurement`): it imports
the libraries that code imports, does one tiny Orbax save and restore (what the first restore of a
process allocates once), and has large blocks given back to the kernel when freed (else a freed
block stays resident and the next case starts above the last one's peak).
"""

from __future__ import annotations

import importlib

MiB = 2**20
# Problem 6.1's budget: 1.85 times the bytes of the saved float32 parameters, plus this (what any
# restore allocates beside its arrays: a frame, Orbax's metadata, a thread's buffers). Restored
# straight into bfloat16, the parameters pass through float32 read buffers on their way; restored in
# float32 and cast after, the float32 arrays and their bfloat16 copy are alive together beside the
# same buffers, as is the whole training state restored in bfloat16; the whole state in float32 is
# three times the parameters, and its buffers more. The budget lies between the two kinds, where the
# curated right and wrong answers fall apart (bench/bench_budgets.py prints where each peaks: on JAX
# 0.12 the right answers rose from 0.81 to 0.88 of a 1.7-times budget, the wrong stayed above 1.48).
SERVING_FACTOR = 1.85
SERVING_SLACK = 8 * MiB


def serving_budget(param_bytes: int) -> int:
    """Bytes a restore of ``param_bytes`` of saved float32 parameters may peak at, for serving."""
    return int(SERVING_FACTOR * param_bytes) + SERVING_SLACK


# Problem 6.2's budget: three times the bytes of the file's largest tensor (its host copy and its copy
# on the devices while it is saved, and the previous tensor's host copy: JAX 0.12's device_put leaves
# a NumPy array to Python's cycle collector, so an honest loop that drops each tensor still holds
# the last one until a collection; on JAX 0.10 right answers peaked at 0.60 of a twice-the-tensor
# budget, on 0.12 at 0.91), plus this. Reading the whole file first holds it all beside the arrays
# it becomes; saving the whole tree at once holds every array and the save's copies of them: each
# at least the file (bench/bench_budgets.py prints where each answer peaks).
CONVERSION_FACTOR = 3
CONVERSION_SLACK = 16 * MiB


def conversion_budget(largest_tensor_bytes: int) -> int:
    """Bytes a conversion of a safetensors file whose largest tensor is ``largest_tensor_bytes`` may peak at."""
    return CONVERSION_FACTOR * largest_tensor_bytes + CONVERSION_SLACK


def preload(source: str) -> list[str]:
    """The library modules ``source`` imports (its import statements, read, never run; only those of
    :data:`~autograder.wall.libraries.LIBRARIES`), for :func:`prepare` to import before the baseline:
    a module's import is the library's cost, not the learner's, and ``orbax.checkpoint`` (its v1 API
    with it) alone is tens of MiB. Grader side."""
    from autograder.source import imported
    from autograder.wall.libraries import LIBRARIES

    names = imported(source)
    return sorted({n for n in names if n.split(".")[0] in LIBRARIES})


def prepare(modules, scratch: str) -> None:
    """In the worker, before its baseline is taken."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:  # ("from numpy import pi" names no module: only modules are preloaded)
            pass
    from ckptlab.memory import prepare_measurement

    prepare_measurement(scratch)


# Problem 7.1's budget: three times the bytes the devices hold once the arrays are placed as asked
# (replicas counted: an array split over one axis of a 4 x 4 mesh is on the devices 4 times), plus
# this: room for a restore's read buffers beside the placed arrays. A replicated restore holds a
# whole copy per device: 16 times the saved bytes.
PLACED_SLACK = 16 * MiB
PLACED_FACTOR = 3


def held_bytes(shape, itemsize: int, mesh_shape: dict, spec) -> int:
    """Bytes every device together holds of an array placed as ``NamedSharding(mesh, spec)``: the
    array's bytes times the sizes of the mesh axes the spec does not use."""
    import math

    used = {a for entry in spec if entry is not None for a in ((entry,) if isinstance(entry, str) else entry)}
    return math.prod(shape) * itemsize * math.prod(n for a, n in mesh_shape.items() if a not in used)


def placed_budget(held: int) -> int:
    """Bytes a restore onto a layout that holds ``held`` bytes may peak at."""
    return PLACED_FACTOR * held + PLACED_SLACK


# Problem 7.4's budget: three times the bytes the devices hold of the checkpoint's largest array
# placed as saved (a stacked array, its layers, and a restore's buffers for it), plus this: what the
# libraries keep beside the arrays (Orbax's buffers and metadata, and each program JAX compiles to
# slice a stack of another shape or sharding: a case has a dozen). The whole model at once is
# several times its largest array (bench/bench_budgets.py prints where each answer peaks).
UNSTACK_SLACK = 16 * MiB
UNSTACK_FACTOR = 3


def unstack_budget(largest_held: int) -> int:
    """Bytes an unstacking whose largest array the devices hold as ``largest_held`` bytes may peak at."""
    return UNSTACK_FACTOR * largest_held + UNSTACK_SLACK


# Unit 9's budgets: a measured fixed cost, plus a factor times the bytes of the checkpoint's largest
# leaf (a stacked leaf: every layer's tensor of one kind; float32 for 9.1's checkpoint, the files'
# dtype for 9.2), plus, for 9.1, one output file's limit.
# - The fixed cost is what the libraries allocate for a conversion whatever its data: measured by
#   the same answers on the hidden tests' small models (tiny shapes, the same operations, in the same
#   worker, just before the large ones), at most 3 MiB on JAX 0.12 once the worker has compiled a few
#   tiny programs itself before its baseline (ckptlab.memory.prepare_measurement: a process's first
#   compiled program costs about 16 MiB, however many follow, and a right answer that jits one
#   jnp.stack was charged with it). HF_FIXED is that, with room.
# - The data: for 9.1, the leaf restored, its per-layer tensors transformed and cast, and the leaf
#   before it, which JAX may keep until Python's cycle collector runs, beside a file's tensors held
#   until it is written; for 9.2, a leaf's layers read, the stack made of them, its copy on the
#   devices and the copy Orbax's save makes of it to write. The hidden large models' leaves are of
#   like sizes, so the whole model is 5.3 to 6.5 times its largest leaf, and a conversion holding it
#   (plus what it converts at the time) is well over HF_FACTOR of them. bench/bench_budgets.py
#   prints, per answer, its fixed cost and where it peaks against these budgets.
HF_FACTOR = 5
HF_READ_FACTOR = 5
HF_FIXED = 8 * MiB


def hf_budget(largest_leaf_bytes: int, shard_bytes: int = 0, factor: int = HF_FACTOR) -> int:
    """Bytes a conversion of a model whose largest leaf is ``largest_leaf_bytes`` may peak at."""
    return HF_FIXED + factor * largest_leaf_bytes + shard_bytes
