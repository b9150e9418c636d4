"""What a source says without running it (the grader's side): its syntax tree, built one thread at a
time, and the modules its import statements name, read once per source. The ground floor: it imports
nothing of the grader's, and the engine, the sandbox and the wall all read sources through it."""

from __future__ import annotations

import ast
import threading
from functools import lru_cache

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


def parse(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time (:data:`SYNTAX_TREES`)."""
    with SYNTAX_TREES:
        return _parse(source)


@lru_cache(maxsize=256)
def imported(source: str) -> tuple[str, ...]:
    """The modules ``source``'s import statements name (read, never run): ``a.b`` for ``import a.b``,
    ``m`` and ``m.x`` for ``from m import x`` (``m.x`` may be a module or a name in ``m``). Relative
    imports name nothing here. Empty for a source that does not parse. Read once per source: the
    zygote, the worker's preloads and its JAX types all ask."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return tuple(names)
