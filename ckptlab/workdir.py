"""A lesson's work folder: every file a lesson writes goes under it, and it is removed when the
lesson's kernel ends, whatever ended it.

    from ckptlab.workdir import lesson_workdir
    workdir = lesson_workdir("unit8-")        # a fresh folder under the temporary folder
    workdir = lesson_workdir("unit6-", on_disk=True)   # on disk where /tmp is a tmpfs (ckptlab.memory)

A lesson removes its folder in its last cell; a cell that fails stops it before then, and a learner
restarts or closes the kernel wherever they are. So the folder is removed twice over:

- at the kernel's normal end (``atexit``): Jupyter asks a kernel to shut down (a restart, closing
  the notebook, ``nbclient`` after a failing cell), and the kernel's interpreter ends normally;
- by a watcher, a small process of its own session (so that a signal to the kernel's process group
  does not reach it), which waits for the kernel to end and then removes the folder: the kernel
  killed (SIGKILL: Jupyter's last resort when a busy kernel does not stop in time), or crashed, where
  no ``atexit`` runs. It ends with the kernel; it reads nothing else and writes nothing else.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["lesson_workdir"]

# The watcher: its standard input is a pipe from the kernel, which no other process holds; it
# reaches its end when the kernel ends, however it ended. Its parent changing says the same, in
# case a process forked from the kernel (without exec) still holds the pipe.
_WATCHER = r"""
import os, select, shutil, sys
folder, kernel = sys.argv[1], int(sys.argv[2])
while os.getppid() == kernel:
    ready, _, _ = select.select([0], [], [], 1.0)
    if ready and not os.read(0, 1):
        break
shutil.rmtree(folder, ignore_errors=True)
"""

_watchers: list = []  # kept so that the pipes stay open while the kernel lives


def lesson_workdir(prefix: str, on_disk: bool = False) -> Path:
    """A fresh folder named ``prefix...`` in the temporary folder (``on_disk``: on disk, as
    :func:`ckptlab.memory.measured_tempdir` finds one), removed when this process ends: at its normal
    end, and by a watcher process when it is killed."""
    if on_disk:
        from ckptlab.memory import measured_tempdir

        folder = Path(measured_tempdir(prefix))
    else:
        folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    _watchers.append(subprocess.Popen(
        [sys.executable, "-S", "-c", _WATCHER, str(folder), str(os.getpid())], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/"))
    return folder
