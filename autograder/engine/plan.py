"""One problem of one submission on its way through grading: what the engine knows of it, and what
the trusted side prepares for it ahead of its worker (its cases' files, then the expected outcomes),
each a future that a runner waits on and that carries the trusted side's failure, if any."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from autograder.declarations import Problem
from autograder.engine.results import ProblemResult
from autograder.hidden import Hidden


@dataclass(frozen=True)
class Prepared:
    """A problem's cases written for its worker: the worker's folder (the runner that takes it removes
    it) and each case's arguments as the worker gets them (paths for files)."""

    workdir: str
    worker_args: list


@dataclass
class Plan:
    problem: Problem
    result: ProblemResult | None = None  # decided without running it (not attempted, a forbidden module)
    source: str = ""  # the learner's code the function needs
    hidden: Hidden | None = None
    cases: list = field(default_factory=list)  # public examples, then hidden cases
    timeout: float = 0.0
    files: Future = field(default_factory=Future)  # -> Prepared
    expected: Future = field(default_factory=Future)  # -> each case's expected outcome
    _taken: threading.Event = field(default_factory=threading.Event)

    def take(self) -> Prepared:
        """The prepared files, once written; the caller owns their folder from now on (removes it).
        Raises what the trusted side raised preparing them."""
        prepared = self.files.result()
        self._taken.set()
        return prepared

    def expected_outcomes(self) -> list:
        """Each case's expected outcome, once computed; raises what the trusted side raised."""
        return self.expected.result()

    def fail(self, exc: BaseException) -> None:
        """The trusted side failed on this problem: whoever waits on it gets ``exc``."""
        for future in (self.files, self.expected):
            if not future.done():
                future.set_exception(exc)

    def untaken_folder(self) -> str | None:
        """The folder its files were written to, if no runner took it (to remove)."""
        if self._taken.is_set() or not self.files.done() or self.files.exception() is not None:
            return None
        workdir = self.files.result().workdir
        return workdir if os.path.isdir(workdir) else None
