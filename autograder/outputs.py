"""What the grader's outputs share: each status's label and colour, and writing a file whole or not
at all. Light (no sandbox, no JAX): a learner's kernel imports it for its check cells."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LABELS = {"correct": "correct", "incorrect": "incorrect", "not_attempted": "not attempted", "error": "error",
          "timeout": "timeout", "skipped": "skipped"}
COLOURS = {"correct": "#1a7f37", "incorrect": "#cf222e", "not_attempted": "#6e7781", "error": "#cf222e",
           "timeout": "#9a6700", "skipped": "#6e7781"}


def label(status: str) -> str:
    """How a status reads ("not attempted"); :func:`str.capitalize` it to start a line."""
    return LABELS[status]


@contextlib.contextmanager
def replacing(path: Path):
    """Yield a temporary path beside ``path``; when the block ends without an error, the temporary
    file takes ``path``'s place in one step (readers see the old file or the new one, never half of
    one). The temporary name is the process's own, so two writers never share it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole (flushed to disk first) or not at all."""
    with replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
