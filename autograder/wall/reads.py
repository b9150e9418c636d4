"""Grading reads: while a read-counted problem runs, memory maps are switched off, so that every
byte the learner's code takes from a file goes through a read the kernel counts."""

from __future__ import annotations

import sys
from contextlib import contextmanager

MESSAGE = ("memory maps are switched off for this problem, so that the grader can count the bytes you "
           "read: open the file and use f.seek(offset) and f.read(length)")


class _NoMemoryMaps:
    def __new__(cls, *args, **kwargs):
        raise PermissionError(MESSAGE)


def _no_safe_open(*args, **kwargs):
    raise PermissionError("safetensors.safe_open memory-maps the file; " + MESSAGE)


def _targets():
    import mmap

    out = [(mmap, "mmap", _NoMemoryMaps)]
    try:
        import safetensors
    except ImportError:  # pragma: no cover - a pinned dependency
        return out
    out.append((safetensors, "safe_open", _no_safe_open))
    numpy_api = sys.modules.get("safetensors.numpy")
    if numpy_api is not None:
        out.append((numpy_api, "safe_open", _no_safe_open))
    return out


def switch_off_memory_maps() -> None:
    """For the grader's worker, before the learner's code is loaded: for good."""
    for module, name, replacement in _targets():
        setattr(module, name, replacement)


@contextmanager
def memory_maps_off():
    """For a notebook check: switched off inside the block only."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in _targets()]
    switch_off_memory_maps()
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


# Beyond the header and the shard's own bytes, a read-counted function may read this much (a
# buffered header read, a module loaded on first use). Hidden tensors are far larger.
READ_SLACK = 32 * 1024


def read_budget(header_size: int, needed: int) -> int:
    """Bytes a shard read may take: the 8 + N header bytes, the shard's bytes, and the slack."""
    return 8 + header_size + needed + READ_SLACK
