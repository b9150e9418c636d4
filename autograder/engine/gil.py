"""What the grading process changes about its own interpreter, threads in mind (the grader's side
only): the GIL's switch interval while grading (syntax trees built one thread at a time:
:mod:`autograder.source`)."""

from __future__ import annotations

import sys
import threading


class _ShortGilSlices:
    """While anything is graded in this process, a thread gets the GIL within 0.5 ms of asking,
    not Python's 5 ms: each case's round trip with a worker waits for the GIL on the grader's side,
    while the references of later problems are computed (bench/bench_grading.py shows the overhead
    per problem beyond the learner's function). Restored when the last grading in the process ends."""

    def __init__(self):
        self.lock, self.users, self.saved = threading.Lock(), 0, 0.005

    def hold(self) -> None:
        with self.lock:
            if not self.users:
                self.saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self.saved, 0.0005))
            self.users += 1

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if not self.users:
                sys.setswitchinterval(self.saved)


SHORT_GIL_SLICES = _ShortGilSlices()
