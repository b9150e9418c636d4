"""The kinds of argument (:mod:`autograder.wall.kinds`) in the learner's terms: what the learner's
function receives, the JAX object or the file or folder the grader makes, never the grader's own
names. That is how a public example shows its arguments (the notebook's check, practice sets,
``python -m autograder check``); ``repr`` stays each dataclass's own.

    >>> from autograder.wall.kinds import MeshArg, SpecArg
    >>> in_words((MeshArg((("x", 16),)), {"w": SpecArg((None, "x"))}))
    "(Mesh {'x': 16}, {'w': PartitionSpec(None, 'x')})"

Each kind says what it is in its own class (its ``words``); this module holds the generic part:
containers, arrays, plain values. A kind without words of its own raises: each new kind says what
it is (tests/learner/test_practice.py holds every public example and every variant to it, and
tests/wall/test_wall_kinds.py every kind to its own words).
"""

from __future__ import annotations

import numpy as np

from autograder.wall.kinds import DAMAGE, KINDS, ArgumentKind

__all__ = ["DAMAGE", "in_words"]  # (DAMAGE: each safetensors damage in words, as its kind says it)

# The kinds that declare words in their own class (each of them: tests/learner/test_practice.py holds them to it).
_WORDS = {kind: vars(kind)["words"] for kind in KINDS if "words" in vars(kind)}


def in_words(value) -> str:
    """An argument as a learner reads it: each kind by its own words, a NumPy array by its shape and
    dtype, containers element by element, anything else by its ``repr``."""
    if isinstance(value, ArgumentKind):
        if not hasattr(value, "words"):
            raise TypeError(f"{type(value).__name__} has no words: its class in autograder/wall/kinds/ declares none")
        return value.words()
    if isinstance(value, np.ndarray):
        return f"<array shape={value.shape} dtype={value.dtype}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {in_words(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(in_words(v) for v in value) + "]"
    if type(value) is tuple:
        return "(" + ", ".join(in_words(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)
