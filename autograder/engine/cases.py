"""A learner's cases and their expected outcomes: public examples, then hidden cases drawn from
the course's salt and the learner id, and the references (or the hidden tests' own formulas)."""

from __future__ import annotations

import copy
import hashlib
import importlib
import os

import numpy as np

from autograder import registry
from autograder.hidden import Case, Hidden, load
from autograder.wall import codec
from autograder.wall.returns import Raises

DEFAULT_SALT = "sharded-ckpt-course/2026"


def course_salt() -> str:
    return os.environ.get("CKPT_COURSE_SALT", DEFAULT_SALT)


def case_seed(learner: str, problem_id: str, salt: str | None = None) -> int:
    """Same learner and problem, same cases; another learner, other cases."""
    # surrogateescape: a learner id from a file name that is not UTF-8 is its bytes
    digest = hashlib.sha256(f"{salt or course_salt()}\x00{learner}\x00{problem_id}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "little")


def hidden_cases(problem: registry.Problem, learner: str, salt: str | None = None) -> tuple[Hidden, list[Case]]:
    hidden = load(problem)
    public = [Case("public", tuple(ex.args)) for ex in problem.examples]
    return hidden, public + hidden.cases(np.random.default_rng(case_seed(learner, problem.id, salt)))


def reference(problem: registry.Problem):
    return getattr(importlib.import_module(f"solutions.unit{problem.unit}"), problem.function)


def expected_outcome(problem: registry.Problem, args: tuple):
    """The reference's return value, or a :class:`Raises` where raising is the right answer
    (from the hidden tests' own ``expected``, held equal to the reference, where they have one)."""
    compute = load(problem).expected or reference(problem)
    try:
        value = compute(*codec.materialize(copy.deepcopy(args)))
        # Through the codec, as the worker's answer comes: both sides compare as the same plain data.
        return codec.loads(codec.dumps(value, digest=problem.measure_memory))
    except Exception as exc:
        if type(exc).__name__ in problem.raises or any(c.__name__ in problem.raises for c in type(exc).__mro__):
            return Raises(next(c.__name__ for c in type(exc).__mro__ if c.__name__ in problem.raises))
        raise
