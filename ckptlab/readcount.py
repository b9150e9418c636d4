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


def rchar(whole_process: bool = False) -> int | None:
    """Bytes this thread (or process) has read so far, or None where the kernel does not say."""
    try:
        fd = os.open("/proc/self/io" if whole_process else "/proc/thread-self/io", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096)
    finally:
        os.close(fd)
    for line in text.split(b"\n"):
        if line.startswith(b"rchar:"):
            return int(line.split()[1])
    return None


def _own_cost(whole_process: bool) -> int:
    """What one reading of the counter adds to the count itself."""
    a, b = rchar(whole_process), rchar(whole_process)
    return 0 if a is None or b is None else b - a


@dataclass
class Reads:
    bytes: int | None = None


@contextmanager
def count_reads(whole_process: bool = False):
    """Count the bytes read by the code in the ``with`` block (see the module's docstring)."""
    out = Reads()
    cost = _own_cost(whole_process)
    before = rchar(whole_process)
    try:
        yield out
    finally:
        after = rchar(whole_process)
        if before is not None and after is not None:
            out.bytes = max(0, after - before - cost)
