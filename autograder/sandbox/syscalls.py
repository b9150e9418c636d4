"""The C library's calls the jail makes (Linux), and the error it raises when the kernel refuses
one: shared by :mod:`~autograder.sandbox.landlock`, :mod:`~autograder.sandbox.seccomp` and
:mod:`~autograder.sandbox.jail`. Standard library only: the worker imports it before its jail is on.
"""

from __future__ import annotations

import ctypes
import os

PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 22, 24, 38


class JailError(RuntimeError):
    """The kernel refused a part of the strict level: says which, and how to get it."""


# ---------------------------------------------------------------------------------------------
# libc

def libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)} (errno {err})")
    return result
