"""Kernel-enforced isolation for the process that runs learner code (Linux).

Two levels (see SECURITY.md):

- ``strict``: the worker runs in its own user, pid, network, IPC and mount namespaces, as pid 1
  of its pid namespace (so every process it starts dies with it, however it detached); Landlock
  lets it read only the interpreter, the libraries, the public course files and its cases' files,
  write only its own scratch folder (a size- and inode-limited tmpfs of its own), connect or bind
  no TCP port, and send no signal and reach no abstract unix socket outside its sandbox; a seccomp
  filter refuses sockets, ptrace, file metadata changes, memfds and other escape hatches (and, for
  read-counted problems, file memory maps, the calls that move file bytes without a counted read,
  and new processes); all capabilities are dropped; a process-count limit (RLIMIT_NPROC, counted
  in the worker's own user namespace) stops fork bombs; a root grader also puts the worker's whole
  tree in cgroups of its own (processes, memory, an equal CPU share). The worker is first in line
  for the OOM killer. Nothing here ever changes a machine-wide setting (no /proc/sys).
- ``basic``: resource limits, a scrubbed environment, its own scratch folder and process group.
  Nothing stops the code from reading, writing or signalling what its user can.

Both levels keep the memory, file-size, core-dump and time limits. Everything here runs in the
worker process *before* any learner code, while it is single-threaded; the module imports only
the standard library and :mod:`autograder.limits` (which imports nothing).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import resource
import struct
import sys
from dataclasses import dataclass, field

from autograder.limits import MAX_TASKS, SCRATCH_BYTES, SCRATCH_INODES

STRICT, BASIC = "strict", "basic"
# The real uid a root grader's worker takes before its namespaces: the kernel never applies
# RLIMIT_NPROC to a process whose real uid is the machine's root, even inside a user namespace.
# Its effective uid (and so its file access) stays the grader's; the count is per user namespace,
# so each worker has its own.
NPROC_UID = 65534

# --- Landlock (linux/landlock.h) ----------------------------------------------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
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

# --- namespaces, mounts, prctl, capabilities -----------------------------------------------------
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = \
    0x00020000, 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 22, 24, 38
_CAP_LAST = 63

# --- seccomp -------------------------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Calls no course code needs, refused always: (name: errno).
_DENY = {"socket": errno.EACCES, "ptrace": errno.EPERM, "process_vm_readv": errno.EPERM,
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
_DENY.update({name: errno.EPERM for name in (
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "setxattrat", "removexattrat", "inotify_init", "inotify_init1", "inotify_add_watch",
    "fanotify_init", "fanotify_mark")})
# For read-counted problems: every byte of a file must come through a read the kernel counts.
_DENY_UNCOUNTED = {"splice": errno.EPERM, "tee": errno.EPERM, "vmsplice": errno.EPERM,
                   "sendfile": errno.EPERM, "copy_file_range": errno.EPERM}
# For memory-measured problems: the process whose memory the grader measures is the only one, for
# good: no exec (a new program starts a new peak), and no advice that gives pages back: pages it held
# before its baseline (freed heap, library pages), given back, would let it allocate as much unseen
# (MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTNEED_LOCKED: dropped; MADV_COLD, MADV_PAGEOUT: to
# swap). The C library's own uses of them (trimming a thread's heap) ignore a refusal: that memory
# stays, counted, as held.
_DENY_UNMEASURED = {"execve": errno.EPERM, "execveat": errno.EPERM, "process_madvise": errno.EPERM}
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


class JailError(RuntimeError):
    """The kernel refused a part of the strict level: says which, and how to get it."""


@dataclass
class Plan:
    """What one worker's jail allows: built on the grader's side, applied in the worker."""

    level: str
    scratch: str  # the only folder it writes (strict: a tmpfs of its own, mounted there)
    memory_bytes: int = 0
    file_bytes: int = 0
    count_reads: bool = False
    measure_memory: bool = False  # the grader reads this process's peak resident set (see seal_memory)
    read_paths: list = field(default_factory=list)  # [path, ...] readable (and executable)
    read_files: list = field(default_factory=list)  # single files readable
    rw_files: list = field(default_factory=list)  # single files readable and writable (/dev/null)
    list_dirs: list = field(default_factory=list)  # folders whose entries may be listed, no more
    inputs: str = ""  # a folder it may read: its cases' files
    cgroups: list = field(default_factory=list)  # cgroup folders to join (a root grader's: pids, memory, cpu)
    landlock_abi: int = 0  # the Landlock ABI to use, as the grader found it (0: the kernel's)
    namespaces: bool = True  # False where the machine refuses them (see :func:`enter`)
    uid: int = 0  # without namespaces, the real uid a root grader's worker takes (0: keeps root's)
    # False: the scratch folder stays a plain folder, which outlives the worker (a run killed and
    # started again finds its files), its size watched from outside as without namespaces.
    tmpfs_scratch: bool = True

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls(**json.loads(text))


# ---------------------------------------------------------------------------------------------
# libc

def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)} (errno {err})")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is off or missing."""
    return landlock_status()[0]


def landlock_status() -> tuple[int, str]:
    """(the Landlock ABI, or 0; why it is 0, and how to get it, from the kernel's own errno)."""
    if sys.platform != "linux":
        return 0, f"Landlock is a Linux feature (this is {sys.platform})"
    libc = _libc()
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


def _landlock(plan: Plan, libc, abi: int) -> int:
    if abi < STRICT_LANDLOCK_ABI:
        raise JailError(landlock_status()[1] or f"Landlock ABI {abi}")
    every = _fs_rights(abi)
    attr = _RulesetAttr(every, (NET_BIND_TCP | NET_CONNECT_TCP) * (abi >= 4),
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) * (abi >= 6))
    ruleset = _check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    rules = [(p, READ) for p in plan.read_paths] + [(p, FS_READ_FILE) for p in plan.read_files] + \
            [(p, FS_READ_FILE | FS_WRITE_FILE) for p in plan.rw_files] + [(p, FS_READ_DIR) for p in plan.list_dirs] + \
            [(plan.inputs, READ & ~FS_EXECUTE)] * bool(plan.inputs) + \
            [(plan.scratch, every), ("/proc/self", FS_READ_FILE | FS_READ_DIR)]  # this process's own /proc entry
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this machine does not have
        try:
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                rights &= _FILE_RIGHTS
            rule = _PathBeneath(rights & every, fd)
            _check(libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)),
                   f"landlock_add_rule({path})")
        finally:
            os.close(fd)
    return ruleset


CLONE_THREAD = 0x00010000


# The calls that signal a process, and those naming it by a pidfd (to signal it later).
_SIGNAL_BY_PID = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the target is argument 0
_SIGNAL_OTHERS = ("tkill", "pidfd_open", "pidfd_send_signal")


def _seccomp_program(deny: dict, *, guard_pdeathsig: bool, forbid_file_maps: bool,
                     forbid_processes: bool = False, forbid_threads: bool = False, signals_only_to: int = 0,
                     forbid_reclaim_advice: bool = False) -> bytes:
    machine = platform.machine()
    if machine not in _NR:
        raise JailError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 have one)")
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
        prog += [jeq(nr["prctl"], 0, 3), op(0x20, 0, 0, 16), jeq(PR_SET_PDEATHSIG, 0, 1),
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


def _seccomp(program: bytes, libc) -> None:
    """Install a filter on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    _check(libc.syscall(_NR[platform.machine()]["seccomp"], 1, 1, ctypes.byref(fprog)), "seccomp filter")


def seal_tasks(plan: Plan) -> None:
    """For a read-counted problem, before the learner's code: no new task, thread or process. A
    child reaped by the kernel itself (its parent ignoring SIGCHLD) would take its reads out of
    every count, and the count needs no uid of the worker's own (see :func:`enter`)."""
    if plan.level == STRICT and plan.count_reads:
        _seccomp(_seccomp_program({}, guard_pdeathsig=False, forbid_file_maps=False, forbid_threads=True), _libc())


def seal_memory(plan: Plan) -> None:
    """For a memory-measured problem, before the learner's code: this process stays the only one
    and keeps its peak. No new process (a child's memory would be another's peak, gone once it is
    reaped), no exec (a new program starts a new peak), no advice that moves pages out unnoted. A
    filter of its own; filters only ever add up. (Writing ``/proc/self/clear_refs``, which resets
    the peak, Landlock refuses: this process's /proc entry is read-only to it.)"""
    if plan.level == STRICT and plan.measure_memory:
        _seccomp(_seccomp_program(_DENY_UNMEASURED, guard_pdeathsig=False, forbid_file_maps=False,
                                  forbid_processes=True, forbid_reclaim_advice=True), _libc())


def seal_reads(plan: Plan) -> None:
    """For a read-counted problem, once the worker has loaded what it needs and before the
    learner's code: no more file memory maps, no call that moves file bytes without a read the
    kernel counts, and no new process (threads only): a child reaped by the kernel itself (its
    parent ignoring SIGCHLD) would take its reads out of every count. A second seccomp filter;
    filters only ever add up."""
    if plan.level == STRICT and plan.count_reads:
        _seccomp(_seccomp_program(_DENY_UNCOUNTED, guard_pdeathsig=False, forbid_file_maps=True,
                                  forbid_processes=True), _libc())


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc) -> None:
    """No capability now or after any exec. The bounding set needs CAP_SETPCAP to change; a
    process without it (a normal user's, without a user namespace) keeps it, harmlessly: capset
    empties what it holds, and no_new_privs keeps an exec from granting any."""
    for cap in range(_CAP_LAST + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            err = ctypes.get_errno()
            if err in (errno.EINVAL, errno.EPERM):  # past the kernel's last capability; no CAP_SETPCAP
                break
            _check(-1, "dropping the capability bounding set")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _check(libc.capset(ctypes.byref(header), data), "capset")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _namespaces(plan: Plan, libc) -> None:
    """New user, pid, network, IPC and mount namespaces for this process (pid: for its next child)."""
    uid, gid = os.geteuid(), os.getegid()
    for cgroup in plan.cgroups:  # root: join the cgroups the grader made for this worker, while still root
        _write(os.path.join(cgroup, "cgroup.procs"), str(os.getpid()))
    if uid == 0:  # root: a real uid RLIMIT_NPROC binds (see NPROC_UID); no limit on it machine-wide
        os.setresuid(NPROC_UID, 0, 0)
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS),
           "unshare (user, pid, network, IPC and mount namespaces)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _limit_tasks() -> None:
    """The process-count limit, counted in this worker's own user namespace. It binds every real
    uid but the machine's root, which a root grader's worker has left (:data:`NPROC_UID`). The
    jail never writes ``/proc/sys``: before Linux 6.14, ``kernel.pid_max`` is the machine's."""
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_TASKS, MAX_TASKS))


def _scratch(plan: Plan, libc) -> None:
    """Mount a tmpfs of :data:`SCRATCH_BYTES` and :data:`SCRATCH_INODES` on the scratch folder,
    in this worker's own mount namespace (nothing propagates out of it)."""
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "making mounts private")
    options = f"size={SCRATCH_BYTES},nr_inodes={SCRATCH_INODES},mode=0700".encode()
    _check(libc.mount(b"tmpfs", plan.scratch.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options),
           "mounting the scratch tmpfs")


def first_for_the_oom_killer() -> None:
    """Should the machine run out of memory, this process goes before any other (the grader
    never does while a worker lives). Raising one's own score needs no privilege."""
    try:
        _write("/proc/self/oom_score_adj", "1000")
    except OSError:
        pass


def limit(memory_bytes: int, file_bytes: int) -> None:
    """Address space and file size (0 leaves one unlimited), and no core dumps."""
    for kind, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_FSIZE, file_bytes)):
        if value:
            resource.setrlimit(kind, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it ends (Linux; elsewhere nothing)."""
    if sys.platform == "linux":
        _libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def enter(plan: Plan, close_in_launcher: tuple = ()) -> None:
    """Make this (single-threaded) process the jailed worker that ``plan`` describes.

    At the strict level the process forks: the parent stays outside, waits for the child and exits
    with its status (it never returns); the child, pid 1 of the new pid namespace, returns from
    here inside the jail. Raises :class:`JailError` when the kernel refuses a part of it."""
    limit(plan.memory_bytes, plan.file_bytes)
    first_for_the_oom_killer()
    if plan.level == BASIC:
        os.chdir(plan.scratch)
        return
    libc = _libc()
    if not plan.namespaces:
        return _enter_without_namespaces(plan, libc)
    try:
        _namespaces(plan, libc)
    except (JailError, OSError) as exc:
        sys.stderr.write(f"jail: {exc}\n")  # the grader's probe reads this line
        os._exit(3)
    alive_r, alive_w = os.pipe()  # open in the launcher for as long as it lives
    child = os.fork()
    if child:  # the launcher: outside the pid namespace, runs no learner code
        os.close(alive_r)
        for fd in close_in_launcher:
            os.close(fd)
        _, status = os.waitpid(child, 0)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
    try:
        os.close(alive_w)
        _check(libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "parent-death signal")
        import select

        if select.select([alive_r], [], [], 0)[0]:  # end of file: the launcher died before PDEATHSIG was set
            os._exit(1)
        os.close(alive_r)
        _limit_tasks()
        if plan.tmpfs_scratch:
            _scratch(plan, libc)
        os.chdir(plan.scratch)  # (after the mount: into the tmpfs)
        _confine(plan, libc, own_pid_namespace=True)
    except BaseException as exc:  # noqa: BLE001 - the child must never return un-jailed
        sys.stderr.write(f"jail: {exc}\n")
        os._exit(3)


def _confine(plan: Plan, libc, *, own_pid_namespace: bool) -> None:
    """Landlock, no capabilities, seccomp: the part of the jail that needs no namespace."""
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    abi = min(landlock_abi(), plan.landlock_abi or 1 << 30)
    ruleset = _landlock(plan, libc, abi)
    _drop_capabilities(libc)
    _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    os.close(ruleset)
    deny = {**_DENY, **({"truncate": errno.EPERM} if abi < 3 else {})}  # not Landlock's before ABI 3
    # Without a pid namespace of its own: no new process (each would outlive a killed worker, and
    # count against its user's processes), and, where Landlock cannot scope signals (ABI 6), none
    # sent but to itself.
    _seccomp(_seccomp_program(deny, guard_pdeathsig=True, forbid_file_maps=False,
                              forbid_processes=not own_pid_namespace,
                              signals_only_to=0 if own_pid_namespace or abi >= 6 else os.getpid()), libc)


def _enter_without_namespaces(plan: Plan, libc) -> None:
    """The strict level where the machine refuses new namespaces (Docker's default seccomp
    profile, Ubuntu 24.04's AppArmor rule for normal users): no fork, the process jails itself.

    Landlock and seccomp give the same file, network and signal rules; the worker starts no
    process (threads only), so nothing of it outlives it (it dies with its parent); its threads
    are bounded by RLIMIT_NPROC: for a root grader, under a real uid of its own
    (:attr:`Plan.uid`), else the tasks its user has now and :data:`MAX_TASKS` more. Its scratch
    folder is a plain folder, whose size the grader watches from outside."""
    try:
        for cgroup in plan.cgroups:
            _write(os.path.join(cgroup, "cgroup.procs"), str(os.getpid()))
        if os.geteuid() == 0:
            if plan.uid:  # its own real uid, which RLIMIT_NPROC counts; file access stays root's
                os.setresuid(plan.uid, 0, 0)
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_TASKS, MAX_TASKS))
        else:
            tasks = tasks_of_user(os.getuid()) + MAX_TASKS
            resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
        os.chdir(plan.scratch)
        _confine(plan, libc, own_pid_namespace=False)
    except BaseException as exc:  # noqa: BLE001 - never return un-jailed
        sys.stderr.write(f"jail: {exc}\n")
        os._exit(3)


def tasks_of_user(uid: int) -> int:
    """Tasks (threads included) whose real uid is ``uid``, as RLIMIT_NPROC counts them."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", "rb") as f:
                    fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
                if int(fields[b"Uid"].split()[0]) == uid:
                    count += int(fields[b"Threads"])
            except (OSError, KeyError, ValueError, IndexError):
                continue
    return count


# ---------------------------------------------------------------------------------------------
# What a worker may read: the interpreter, the libraries and the public course files

def _course_dirs() -> tuple[list[str], list[str], list[str]]:
    """Every copy of the course's packages this interpreter could import, on any sys.path entry or
    through an editable install's finder: (ckptlab folders, autograder folders, solutions folders)."""
    import importlib.util

    found: dict[str, set] = {"ckptlab": set(), "autograder": set(), "solutions": set()}
    for name, places in found.items():
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            places.update(os.path.realpath(p) for p in spec.submodule_search_locations)
        for entry in sys.path:
            if entry and os.path.isdir(os.path.join(entry, name)):
                places.add(os.path.realpath(os.path.join(entry, name)))
    return sorted(found["ckptlab"]), sorted(found["autograder"]), sorted(found["solutions"])


def _is_public_course_file(path: str) -> bool:
    """The autograder files the learner bundle ships (see :mod:`autograder.release`)."""
    parts = path.split(os.sep)
    if "__pycache__" in parts:
        return False
    if len(parts) >= 2 and parts[-2] == "hidden":
        return parts[-1] == "__init__.py"
    return path.endswith(".py")


def _grant_tree(path: str, course: list[str], out: Plan) -> None:
    """Grant ``path`` readable, except the course's own packages below it; a source checkout (a
    folder holding a course package that is not a library folder) gets nothing at all."""
    real = os.path.realpath(path)
    below = [c for c in course if c == real or c.startswith(real + os.sep)]
    if not below:
        out.read_paths.append(real)
        return
    if real in course or (any(os.path.dirname(c) == real for c in below) and not _is_library_dir(real)):
        return
    out.list_dirs.append(real)  # list it, and grant each entry but the course's
    try:
        entries = sorted(os.listdir(real))
    except OSError:
        return
    for name in entries:
        _grant_tree(os.path.join(real, name), course, out)


def plan_for(level: str, scratch: str, *, memory_bytes: int, file_bytes: int, count_reads: bool,
             inputs: str = "", cgroups=(), measure_memory: bool = False) -> Plan:
    """The jail of one worker. Grader side: decides what the worker may read."""
    plan = Plan(level, scratch, memory_bytes, file_bytes, count_reads, measure_memory=measure_memory, inputs=inputs,
                cgroups=list(cgroups), landlock_abi=landlock_abi() if level == STRICT else 0)
    if level == BASIC:
        return plan
    base = _readable()
    for name in ("read_paths", "read_files", "rw_files", "list_dirs"):
        setattr(plan, name, list(getattr(base, name)))
    return plan


_READABLE: Plan | None = None


def _readable() -> Plan:
    """What every strict worker may read (computed once per process)."""
    global _READABLE
    if _READABLE is not None:
        return _READABLE
    plan = Plan(STRICT, "")
    public, autograder, secret = _course_dirs()
    course = sorted(set(public + autograder + secret))
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots |= {p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)}
    for root in sorted(roots):
        _grant_tree(root, course, plan)
    plan.read_paths += [os.path.realpath(p) for p in public]
    for folder in autograder:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            plan.list_dirs.append(os.path.realpath(dirpath))
            for name in filenames:
                full = os.path.realpath(os.path.join(dirpath, name))
                if _is_public_course_file(full):
                    plan.read_files.append(full)
    plan.read_paths += [p for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib",
                                    "/usr/share/zoneinfo", "/sys/devices/system/cpu") if os.path.exists(p)]
    plan.read_paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    plan.read_files += [p for p in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group",
                                    "/etc/nsswitch.conf", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                                    "/dev/urandom", "/dev/random") if os.path.exists(p)]
    plan.rw_files += ["/dev/null", "/dev/zero"]
    for name in ("read_paths", "read_files", "rw_files", "list_dirs"):
        setattr(plan, name, sorted(set(getattr(plan, name))))
    _READABLE = plan
    return plan


def _is_library_dir(path: str) -> bool:
    return os.path.basename(path) in ("site-packages", "dist-packages")
