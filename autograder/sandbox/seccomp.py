"""Seccomp filters: the system calls a strict worker is refused (always, and for read-counted and
memory-measured problems), as a BPF program for this machine's architecture, installed on every
thread. Standard library only: the worker imports it before its jail is on.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

from autograder.sandbox import syscalls

# --- seccomp -------------------------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Calls no course code needs, refused always: (name: errno).
DENY = {"socket": errno.EACCES, "ptrace": errno.EPERM, "process_vm_readv": errno.EPERM,
        "process_vm_writev": errno.EPERM, "io_uring_setup": errno.EPERM, "io_uring_enter": errno.EPERM,
        "io_uring_register": errno.EPERM, "io_setup": errno.EPERM, "io_submit": errno.EPERM, "bpf": errno.EPERM,
        "perf_event_open": errno.EPERM, "userfaultfd": errno.EPERM, "keyctl": errno.EPERM,
        "add_key": errno.EPERM, "request_key": errno.EPERM, "unshare": errno.EPERM, "setns": errno.EPERM,
        "mount": errno.EPERM, "umount2": errno.EPERM, "pivot_root": errno.EPERM, "kcmp": errno.EPERM,
        "pidfd_getfd": errno.EPERM, "personality": errno.EPERM,
        # memory held outside any process's address space (and its limit): memfds, SysV segments
        "memfd_create": errno.EPERM, "memfd_secret": errno.EPERM, "shmget": errno.EPERM,
        # and the other System V and POSIX IPC objects, which outlive a process without an IPC namespace
        "msgget": errno.EPERM, "semget": errno.EPERM, "mq_open": errno.EPERM,
        # a session of its own: the scheduler gives each session (autogroup) a share as large as a
        # whole worker's, so a tree of busy processes each in its own session would starve its
        # classmates where no cgroup of the worker's own holds its CPU (a normal-user grader)
        "setsid": errno.EPERM}
# File metadata, which Landlock does not cover: modes (a setuid bit on a root-owned program, a
# classmate's scratch folder made unreadable), owners, times, extended attributes, and watching
# folders for a classmate's new files. Refused everywhere, the scratch folder included.
DENY.update({name: errno.EPERM for name in (
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "setxattrat", "removexattrat", "inotify_init", "inotify_init1", "inotify_add_watch",
    "fanotify_init", "fanotify_mark")})
# For read-counted problems: every byte of a file must come through a read the kernel counts.
DENY_UNCOUNTED = {"splice": errno.EPERM, "tee": errno.EPERM, "vmsplice": errno.EPERM,
                  "sendfile": errno.EPERM, "copy_file_range": errno.EPERM}
# For memory-measured problems: the process whose memory the grader measures is the only one, for
# good: no exec (a new program starts a new peak), and no advice that gives pages back: pages it held
# before its baseline (freed heap, library pages), given back, would let it allocate as much unseen
# (MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTNEED_LOCKED: dropped; MADV_COLD, MADV_PAGEOUT: to
# swap). The C library's own uses of them (trimming a thread's heap) ignore a refusal: that memory
# stays, counted, as held.
DENY_UNMEASURED = {"execve": errno.EPERM, "execveat": errno.EPERM, "process_madvise": errno.EPERM}
_MADV_RECLAIM = (4, 8, 9, 20, 21, 24)  # DONTNEED, FREE, REMOVE, COLD, PAGEOUT, DONTNEED_LOCKED
_NR = {
    "x86_64": {"socket": 41, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "io_setup": 206,
               "io_submit": 209, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250,
               "add_key": 248, "request_key": 249, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
               "pivot_root": 155, "kcmp": 312, "pidfd_getfd": 438, "personality": 135, "splice": 275, "tee": 276,
               "vmsplice": 278, "sendfile": 40, "copy_file_range": 326, "prctl": 157, "mmap": 9, "seccomp": 317,
               "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93,
               "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235, "utimensat": 280, "futimesat": 261,
               "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
               "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466, "inotify_init": 253,
               "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_init": 300, "fanotify_mark": 301,
               "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "memfd_create": 319, "memfd_secret": 447,
               "shmget": 29, "landlock_create_ruleset": 444, "truncate": 76, "kill": 62, "tkill": 200,
               "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_open": 434,
               "pidfd_send_signal": 424, "msgget": 68, "semget": 64, "mq_open": 240, "execve": 59, "execveat": 322,
               "madvise": 28, "process_madvise": 440, "setsid": 112},
    "aarch64": {"socket": 198, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "io_setup": 0,
                "io_submit": 2, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219,
                "add_key": 217, "request_key": 218, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
                "pivot_root": 41, "kcmp": 272, "pidfd_getfd": 438, "personality": 92, "splice": 76, "tee": 77,
                "vmsplice": 75, "sendfile": 71, "copy_file_range": 285, "prctl": 167, "mmap": 222, "seccomp": 277,
                "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchownat": 54, "fchown": 55, "utimensat": 88,
                "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
                "fremovexattr": 16, "setxattrat": 463, "removexattrat": 466, "inotify_init1": 26,
                "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263, "clone": 220, "clone3": 435,
                "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "landlock_create_ruleset": 444,
                "truncate": 45, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
                "rt_tgsigqueueinfo": 240, "pidfd_open": 434, "pidfd_send_signal": 424, "msgget": 186,
                "semget": 190, "mq_open": 180, "execve": 221, "execveat": 281, "madvise": 233,
                "process_madvise": 440, "setsid": 157},
}
_MAP_ANONYMOUS = 0x20
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000


CLONE_THREAD = 0x00010000


# The calls that signal a process, and those naming it by a pidfd (to signal it later).
_SIGNAL_BY_PID = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the target is argument 0
_SIGNAL_OTHERS = ("tkill", "pidfd_open", "pidfd_send_signal")


def program(deny: dict, *, guard_pdeathsig: bool, forbid_file_maps: bool,
            forbid_processes: bool = False, forbid_threads: bool = False, signals_only_to: int = 0,
            forbid_reclaim_advice: bool = False) -> bytes:
    """A filter for this machine's architecture refusing the calls of ``deny`` (name: errno), and
    what each flag asks for besides."""
    machine = platform.machine()
    if machine not in _NR:
        raise syscalls.JailError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 have one)")
    nr = _NR[machine]

    def op(code, jt, jf, k):
        return struct.pack("=HBBI", code, jt, jf, k)

    ld_arch, ld_nr = op(0x20, 0, 0, 4), op(0x20, 0, 0, 0)
    ret = lambda k: op(0x06, 0, 0, k)  # noqa: E731
    jeq = lambda k, jt, jf: op(0x15, jt, jf, k)  # noqa: E731
    prog = [ld_arch, jeq(_AUDIT_ARCH[machine], 1, 0), ret(_RET_KILL), ld_nr]
    if machine == "x86_64":  # the x32 ABI numbers every call again, above 0x40000000
        prog += [op(0x35, 0, 1, 0x40000000), ret(_RET_ERRNO | errno.ENOSYS)]  # jge
    for name, err in deny.items():
        if name in nr:  # (aarch64 has no chmod, chown, utime, fork...: only their *at forms)
            prog += [jeq(nr[name], 0, 1), ret(_RET_ERRNO | err)]
    if guard_pdeathsig:  # prctl(PR_SET_PDEATHSIG, ...): the worker dies with its launcher, and may not change that
        prog += [jeq(nr["prctl"], 0, 3), op(0x20, 0, 0, 16), jeq(syscalls.PR_SET_PDEATHSIG, 0, 1),
                 ret(_RET_ERRNO | errno.EPERM), ld_nr]
    if forbid_processes or forbid_threads:  # clone3 (whose flags a filter cannot read) answers ENOSYS, so the
        # C library makes its threads with clone; fork and vfork refused
        prog += [jeq(nr["clone3"], 0, 1), ret(_RET_ERRNO | errno.ENOSYS)]
        prog += [jeq(nr["fork"], 0, 1), ret(_RET_ERRNO | errno.EPERM)] if "fork" in nr else []
        prog += [jeq(nr["vfork"], 0, 1), ret(_RET_ERRNO | errno.EPERM)] if "vfork" in nr else []
        if forbid_threads:  # no new task at all
            prog += [jeq(nr["clone"], 0, 1), ret(_RET_ERRNO | errno.EAGAIN)]
        else:  # threads only: clone without CLONE_THREAD refused
            prog += [jeq(nr["clone"], 0, 4), op(0x20, 0, 0, 16), op(0x45, 1, 0, CLONE_THREAD),  # jset
                     ret(_RET_ERRNO | errno.EPERM), ld_nr]
    if signals_only_to:  # where no pid namespace or Landlock scope keeps signals in: only to this process
        for name in _SIGNAL_OTHERS:
            prog += [jeq(nr[name], 0, 1), ret(_RET_ERRNO | errno.EPERM)]
        for name in _SIGNAL_BY_PID:  # allowed when argument 0 (its low 32 bits) is this process's pid
            prog += [jeq(nr[name], 0, 4), op(0x20, 0, 0, 16), jeq(signals_only_to, 1, 0),
                     ret(_RET_ERRNO | errno.EPERM), ld_nr]
    if forbid_reclaim_advice:  # madvise(addr, len, advice) giving pages back (_MADV_RECLAIM): argument 2
        for advice in _MADV_RECLAIM:
            prog += [jeq(nr["madvise"], 0, 4), op(0x20, 0, 0, 16 + 8 * 2), jeq(advice, 0, 1),
                     ret(_RET_ERRNO | errno.EPERM), ld_nr]
    if forbid_file_maps:  # mmap of a file (not MAP_ANONYMOUS): bytes the kernel would not count as read
        prog += [jeq(nr["mmap"], 0, 4), op(0x20, 0, 0, 16 + 8 * 3), op(0x45, 1, 0, _MAP_ANONYMOUS),  # jset
                 ret(_RET_ERRNO | errno.EACCES), ld_nr]
    prog.append(ret(_RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes, libc) -> None:
    """Install a filter on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    syscalls.check(libc.syscall(_NR[platform.machine()]["seccomp"], 1, 1, ctypes.byref(fprog)), "seccomp filter")
