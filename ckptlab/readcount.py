"""Count the bytes a piece of code really reads from files, as the Linux kernel counts them.

    from ckptlab.readcount import count_reads
    with count_reads() as reads:
        data = read_my_shard(...)
    reads.bytes   # bytes handed to this process by read(), pread() and friends

The count is the kernel's ``rchar``: every read system call, whatever library made it (Python's
``open``, NumPy's ``fromfile``, ``os.pread``). Buffered reads count what the buffer fetched, not
what you asked for. Memory maps are not reads and are not counted. Linux only: elsewhere
``reads.bytes`` is None.

``count_reads()`` counts the calling thread only (``/proc/thread-self/io``): in Jupyter, the
kernel's own threads read from their sockets and event fds all the time. A process that runs
nothing else (a measuring child, like Lesson 4's around Orbax's loader, whose reads happen on
TensorStore's threads) uses ``count_reads(whole_process=True)``. (The grader counts a graded
function's reads from outside its worker, for every process the function starts: see
:func:`autograder.sandbox.proctree.tree_rchar`.)
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass


def _rchar(whole_process: bool = False) -> tuple[int | None, int]:
    """(bytes this thread or process has read so far, or None; the bytes this reading itself read)."""
    try:
        fd = os.open("/proc/self/io" if whole_process else "/proc/thread-self/io", os.O_RDONLY)
    except OSError:
        return None, 0
    try:
        text = os.read(fd, 4096)
    finally:
        os.close(fd)
    for line in text.split(b"\n"):
        if line.startswith(b"rchar:"):
            return int(line.split()[1]), len(text)
    return None, len(text)


def rchar(whole_process: bool = False) -> int | None:
    """Bytes this thread (or process) has read so far, or None where the kernel does not say."""
    return _rchar(whole_process)[0]


@dataclass
class Reads:
    bytes: int | None = None


@contextmanager
def count_reads(whole_process: bool = False):
    """Count the bytes read by the code in the ``with`` block (see the module's docstring)."""
    out = Reads()
    # The count read before includes neither that reading's own bytes nor the one after's: subtract the
    # first's length as read (it grows by a byte when a counter gains a digit, so it is not a constant).
    before, own = _rchar(whole_process)
    try:
        yield out
    finally:
        after, _ = _rchar(whole_process)
        if before is not None and after is not None:
            out.bytes = max(0, after - before - own)
