"""What every kind of argument declares, and what the kinds share.

An argument kind (:class:`ArgumentKind`) says, in its own class, what it is in the learner's terms:
``words()`` (:func:`autograder.wall.words.in_words` shows each argument by its kind's). A kind that
is a file or a folder (:class:`FileKind`) also says how it is made: ``realize(workdir, made)``
writes it under the worker's scratch folder and gives the path the worker gets in its place
(:func:`autograder.wall.files.realize` calls it for each argument); a kind whose arguments are made
together, by one helper process for all of them, names the function that does it
(``make_together(args, roots)``). Neither words nor files are written anywhere else.
"""

from __future__ import annotations

import threading

import numpy as np

# Orbax is not safe to run from two threads of one process at once: its saves share barrier keys
# and temporary folder steps process-wide (two learners' 3.3 references graded at once by
# grade-batch -j 2 failed with FileExistsError on '...orbax-checkpoint-tmp' and TimeoutError on
# 'awaitable_signals_contract_N/step_directory_creation'). Every save and restore on the trusted
# side takes its turn under this lock.
ORBAX = threading.RLock()

MOST_SHOWN = 8  # leaves or tensors a file's words name; more are counted


def named_dtype(name) -> np.dtype:
    """A dtype by its name, bfloat16 (ml_dtypes') included."""
    import ml_dtypes  # noqa: F401 - registers bfloat16 with NumPy

    return np.dtype(name)


class ArgumentKind:
    """An argument beyond plain data. Each kind defines, in its own class body:

    - ``words(self) -> str``: the argument as a public example shows it to the learner (what their
      function receives, never the grader's own names)."""


class FileKind(ArgumentKind):
    """An argument that is a file or a folder the grader makes, fresh for each learner, in the
    worker's own temporary directory. Beside its words, each defines:

    - ``realize(self, workdir, made) -> str``: its file or folder written under ``workdir`` (or,
      for one the learner's code writes, a path for it), and the path the worker gets in its place;
      ``made`` is what ``make_together`` gave for it (``(root, note)``), None for the others;
    - ``make_together``: None, or ``(args, roots) -> notes or None``, a function that makes every
      such argument of one :func:`~autograder.wall.files.realize` call at once, each at its root."""

    make_together = None


class RealizedPath(str):
    """A realized argument's path carrying facts for the grader's own side (a worker gets the path
    alone: it travels as a plain string). ``moved(path)``: what it becomes when its folder is copied
    elsewhere (:func:`autograder.wall.files.mirror`): the path alone, unless the kind keeps its facts."""

    def moved(self, path: str) -> str:
        return path


# --- words several kinds use -----------------------------------------------------------------------

def entries_in_words(entries) -> str:
    """A spec's entries: ``(None, 'x')``."""
    return "(" + ", ".join(repr(e) for e in entries) + ")"


def shape_in_words(shape) -> str:
    return "scalar" if tuple(shape) == () else repr(tuple(shape))


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
