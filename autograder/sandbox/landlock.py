"""Landlock (Linux 5.13+): what a strict worker may read, write and execute, and, where the kernel's
ABI has them, the TCP ports it may bind or connect to and whom it may signal. The kernel's ABI here,
and why it is 0. Standard library only: the worker imports it before its jail is on.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

from autograder.sandbox import syscalls

# --- Landlock (linux/landlock.h) ----------------------------------------------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
_FS_ABI1 = (1 << 13) - 1  # execute ... make_sym
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
# Landlock's file rules (ABI 1, Linux 5.13) are what the strict level needs of it: its TCP rules (ABI 4)
# and its scoping of signals and abstract sockets (ABI 6) are used where the kernel has them, on top of
# the network and pid namespaces and seccomp's refusal of socket(), which give the same already.
# Before ABI 3 Landlock does not govern truncate(2): seccomp refuses it.
STRICT_LANDLOCK_ABI = 1
# Test-only: the ABI the jail uses, capped (the kernel's own answer otherwise), to emulate older kernels
# on this one. The kernel enforces whatever ruleset that ABI can express.
_ABI_CAP = "CKPT_TEST_LANDLOCK_ABI"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is off or missing."""
    return landlock_status()[0]


def landlock_status() -> tuple[int, str]:
    """(the Landlock ABI, or 0; why it is 0, and how to get it, from the kernel's own errno)."""
    if sys.platform != "linux":
        return 0, f"Landlock is a Linux feature (this is {sys.platform})"
    libc = syscalls.libc()
    result = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if result >= 0:
        cap = os.environ.get(_ABI_CAP, "")
        return (min(int(result), int(cap)) if cap.isdigit() else int(result)), ""
    err = ctypes.get_errno()
    if err == errno.EOPNOTSUPP:
        return 0, ("Landlock is built into this kernel but not enabled: add 'landlock' to the kernel's lsm= boot "
                   "parameter")
    if err == errno.ENOSYS:
        return 0, "this kernel has no Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
    return 0, (f"Landlock's system calls are refused ({os.strerror(err)}): a seccomp profile (a container's, "
               "say) blocks them; Docker: --security-opt seccomp=<a profile allowing landlock_*>, or a newer "
               "Docker whose default profile allows them")


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def build_ruleset(confinement, libc, abi: int, scoped: bool = True) -> int:
    """A Landlock ruleset (its descriptor) granting what ``confinement`` (a :class:`~autograder.sandbox.jail.Confinement`)
    allows, with the rights ``abi`` can express (``scoped``: signals and abstract unix sockets kept inside its domain)."""
    if abi < STRICT_LANDLOCK_ABI:
        raise syscalls.JailError(landlock_status()[1] or f"Landlock ABI {abi}")
    every = _fs_rights(abi)
    attr = _RulesetAttr(every, (NET_BIND_TCP | NET_CONNECT_TCP) * (abi >= 4),
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) * (abi >= 6 and scoped))
    ruleset = syscalls.check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr),
                                          ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)),
                             "landlock_create_ruleset")
    rules = [(p, READ) for p in confinement.read_paths] + [(p, FS_READ_FILE) for p in confinement.read_files] + \
            [(p, FS_READ_FILE | FS_WRITE_FILE) for p in confinement.rw_files] + [(p, FS_READ_DIR) for p in confinement.list_dirs] + \
            [(confinement.inputs, READ & ~FS_EXECUTE)] * bool(confinement.inputs) + \
            [(confinement.scratch, every), ("/proc/self", FS_READ_FILE | FS_READ_DIR)]  # this process's own /proc entry
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this machine does not have
        try:
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                rights &= _FILE_RIGHTS
            rule = _PathBeneath(rights & every, fd)
            syscalls.check(libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                        ctypes.c_uint32(0)), f"landlock_add_rule({path})")
        finally:
            os.close(fd)
    return ruleset
