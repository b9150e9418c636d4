"""What the grading process changes about its own interpreter, threads in mind (the grader's side
only): the GIL's switch interval while grading, and syntax trees built one thread at a time."""

from __future__ import annotations

import ast
import sys
import threading

# CPython 3.11 keeps one AST-building state per interpreter: a thread that starts building a syntax
# tree (ast.parse, and so ast.literal_eval, NumPy's .npy header reader, 3.11's traceback carets) while
# another is half way through one (a garbage collection running a finaliser mid-build lets it in)
# makes the first fail with "SystemError: AST constructor recursion depth mismatch" (CPython issue
# 106905). The grading process builds trees on several threads (learners' sources, the references'
# np.load): every ast.parse in it takes this lock.
SYNTAX_TREES = threading.RLock()
_parse = ast.parse


def _locked_parse(*args, **kwargs):
    with SYNTAX_TREES:
        return _parse(*args, **kwargs)


def serialize_syntax_trees() -> None:
    """Make every ``ast.parse`` of this process (and so ``ast.literal_eval`` and whatever calls them)
    take :data:`SYNTAX_TREES`; idempotent, and for the process's life (a kernel that grades keeps it).
    The grading process calls it before its threads start. Not covered: ``compile(..., ast.PyCF_ONLY_AST)``
    called directly (nothing the grader runs does), and a finaliser that parses on the thread already
    parsing (the lock is re-entrant: it cannot keep a thread from itself)."""
    ast.parse = _locked_parse


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
