"""A class graded on the same hidden cases (``grade-batch --shared-cases``): the trusted side's work
for each problem (its cases' files, the references' expected outcomes) done once for the whole class,
not once per learner.

By default every learner gets hidden cases of their own (drawn from their id and the course's salt):
a learner who saw a classmate's results could not reuse them. With shared cases, every learner's are
drawn from the class's one id and the salt: the same inputs for all, so each problem's item
statistics compare like with like, and a class of hundreds costs the references one run per problem.
No message shows a hidden input or an expected value either way.

What is kept, and where: each problem's files, written once into a folder of the grader's own (never a
worker's: at the strict level no worker reaches it), and copied into each learner's worker folder (a
learner's code may rewrite every file it is given; the next learner gets the grader's copy); the
expected outcomes in memory, read-only. All of it is removed when the class is done
(:meth:`SharedCases.close`), or with the grader's process.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass

from autograder.sandbox import folders

CLASS_ID = "shared-cases"  # the id every learner's hidden cases are drawn for


@dataclass(frozen=True)
class Written:
    """One problem's cases, prepared once: the folder they were written to (the grader's) and each
    case's arguments there (paths for files), and each case's expected outcome."""

    folder: str
    args: list
    expected: list


class SharedCases:
    """The hidden cases a class shares, and the trusted side's work on them, kept while it is graded.
    Safe to use from several learners' threads at once: a problem's work is done by the first to ask,
    the others wait for it (and get its failure, if it failed, as it did)."""

    def __init__(self, learner: str = CLASS_ID):
        self.learner = learner
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}
        self._closed = False
        atexit.register(self.close)

    def prepared(self, key: tuple, compute) -> Written:
        """The problem's written cases for ``key`` (its id and the salt), computed by ``compute(folder)``
        into a fresh folder of the grader's the first time (the folder is removed if it fails)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this class's shared cases are closed")
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
        return entry.get(compute)

    def close(self) -> None:
        """Remove every folder written; later calls fail."""
        with self._lock:
            self._closed = True
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.remove()


class _Entry:
    def __init__(self):
        self._lock = threading.Lock()
        self._done: Written | None = None
        self._failure: BaseException | None = None
        self._folder: str | None = None

    def get(self, compute) -> Written:
        with self._lock:
            if self._done is None and self._failure is None:
                self._folder = folders.new_workdir()
                try:
                    args, expected = compute(self._folder)
                    self._done = Written(self._folder, args, expected)
                except BaseException as exc:  # noqa: BLE001 - every learner waiting on it gets it
                    self._failure = exc
                    folders.remove_folder(self._folder)
                    self._folder = None
            if self._failure is not None:
                raise self._failure
            return self._done

    def remove(self) -> None:
        with self._lock:
            if self._folder is not None:
                folders.remove_folder(self._folder)
                self._folder = None
