"""Kernel-enforced isolation for the process that runs learner code (Linux).

Two levels (see SECURITY.md):

- ``strict``: the worker runs in its own user, pid, network, IPC and mount namespaces, as pid 2
  of its pid namespace under a minimal init (:mod:`~autograder.sandbox.pid1`: so its signals act as
  on any machine, and every process it starts dies with it, however it detached); Landlock
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
the standard library, :mod:`autograder.limits` (which imports nothing) and the modules of each
mechanism (:mod:`~autograder.sandbox.landlock`, :mod:`~autograder.sandbox.seccomp`,
:mod:`~autograder.sandbox.syscalls`, the C library's calls, and :mod:`~autograder.sandbox.pid1`, the
namespace's init), which import only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import sys
from dataclasses import dataclass, field

from autograder.limits import MAX_TASKS, SCRATCH_BYTES, SCRATCH_INODES
from autograder.sandbox import landlock, pid1, seccomp, syscalls
from autograder.sandbox.syscalls import PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, JailError

STRICT, BASIC = "strict", "basic"
# The real uid a root grader's worker takes before its namespaces: the kernel never applies
# RLIMIT_NPROC to a process whose real uid is the machine's root, even inside a user namespace.
# Its effective uid (and so its file access) stays the grader's; the count is per user namespace,
# so each worker has its own.
NPROC_UID = 65534


# --- namespaces, mounts, prctl, capabilities -----------------------------------------------------
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = \
    0x00020000, 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18
_CAP_LAST = 63


@dataclass
class Confinement:
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
    def from_json(cls, text: str) -> Confinement:
        return cls(**json.loads(text))


def seal_tasks(confinement: Confinement) -> None:
    """For a read-counted problem, before the learner's code: no new task, thread or process. A
    child reaped by the kernel itself (its parent ignoring SIGCHLD) would take its reads out of
    every count, and the count needs no uid of the worker's own (see :func:`enter`)."""
    if confinement.level == STRICT and confinement.count_reads:
        seccomp.install(seccomp.program({}, guard_pdeathsig=False, forbid_file_maps=False, forbid_threads=True),
                        syscalls.libc())


def seal_memory(confinement: Confinement) -> None:
    """For a memory-measured problem, before the learner's code: this process stays the only one
    and keeps its peak. No new process (a child's memory would be another's peak, gone once it is
    reaped), no exec (a new program starts a new peak), no advice that moves pages out unnoted. A
    filter of its own; filters only ever add up. (Writing ``/proc/self/clear_refs``, which resets
    the peak, Landlock refuses: this process's /proc entry is read-only to it.)"""
    if confinement.level == STRICT and confinement.measure_memory:
        seccomp.install(seccomp.program(seccomp.DENY_UNMEASURED, guard_pdeathsig=False, forbid_file_maps=False,
                                        forbid_processes=True, forbid_reclaim_advice=True), syscalls.libc())


def seal_reads(confinement: Confinement) -> None:
    """For a read-counted problem, once the worker has loaded what it needs and before the
    learner's code: no more file memory maps, no call that moves file bytes without a read the
    kernel counts, and no new process (threads only): a child reaped by the kernel itself (its
    parent ignoring SIGCHLD) would take its reads out of every count. A second seccomp filter;
    filters only ever add up."""
    if confinement.level == STRICT and confinement.count_reads:
        seccomp.install(seccomp.program(seccomp.DENY_UNCOUNTED, guard_pdeathsig=False, forbid_file_maps=True,
                                        forbid_processes=True), syscalls.libc())


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
            syscalls.check(-1, "dropping the capability bounding set")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    syscalls.check(libc.capset(ctypes.byref(header), data), "capset")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _namespaces(confinement: Confinement, libc) -> None:
    """New user, pid, network, IPC and mount namespaces for this process (pid: for its next child)."""
    uid, gid = os.geteuid(), os.getegid()
    for cgroup in confinement.cgroups:  # root: join the cgroups the grader made for this worker, while still root
        _write(os.path.join(cgroup, "cgroup.procs"), str(os.getpid()))
    if uid == 0:  # root: a real uid RLIMIT_NPROC binds (see NPROC_UID); no limit on it machine-wide
        os.setresuid(NPROC_UID, 0, 0)
    syscalls.check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS),
                   "unshare (user, pid, network, IPC and mount namespaces)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _limit_tasks() -> None:
    """The process-count limit, counted in this worker's own user namespace. It binds every real
    uid but the machine's root, which a root grader's worker has left (:data:`NPROC_UID`). The
    jail never writes ``/proc/sys``: before Linux 6.14, ``kernel.pid_max`` is the machine's."""
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_TASKS, MAX_TASKS))


def _scratch(confinement: Confinement, libc) -> None:
    """Mount a tmpfs of :data:`SCRATCH_BYTES` and :data:`SCRATCH_INODES` on the scratch folder,
    in this worker's own mount namespace (nothing propagates out of it)."""
    syscalls.check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "making mounts private")
    options = f"size={SCRATCH_BYTES},nr_inodes={SCRATCH_INODES},mode=0700".encode()
    syscalls.check(libc.mount(b"tmpfs", confinement.scratch.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                              options), "mounting the scratch tmpfs")


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
        syscalls.libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def enter(confinement: Confinement, close_in_launcher: tuple = ()) -> None:
    """Make this (single-threaded) process the jailed worker that ``confinement`` describes.

    At the strict level the process forks: the parent stays outside, waits for the child and exits
    with its status (it never returns); the child, pid 1 of the new pid namespace, forks again and
    stays as the namespace's init (:mod:`~autograder.sandbox.pid1`: it jails itself, and never
    returns either); its child, pid 2, jails itself and returns from here. Raises
    :class:`JailError` when the kernel refuses a part of it."""
    limit(confinement.memory_bytes, confinement.file_bytes)
    first_for_the_oom_killer()
    if confinement.level == BASIC:
        os.chdir(confinement.scratch)
        return
    libc = syscalls.libc()
    if not confinement.namespaces:
        return _enter_without_namespaces(confinement, libc)
    try:
        _namespaces(confinement, libc)
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
        syscalls.check(libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "parent-death signal")
        import select

        if select.select([alive_r], [], [], 0)[0]:  # end of file: the launcher died before PDEATHSIG was set
            os._exit(1)
        os.close(alive_r)
        _limit_tasks()
        if confinement.tmpfs_scratch:
            _scratch(confinement, libc)
        os.chdir(confinement.scratch)  # (after the mount: into the tmpfs)
        # This process stays pid 1, the namespace's init, and never returns; its child, pid 2, is the
        # worker: an ordinary process, whose signals act as on any machine. Each jails itself, so that
        # each has Landlock's rule for its own /proc entry; the init's domain scopes no signal (it
        # forwards them to the worker, outside it), the worker's does (it cannot signal the init).
        pid1.start(close=close_in_launcher, jail=lambda: _confine(confinement, libc, own_pid_namespace=True,
                                                                  scoped=False))
        _confine(confinement, libc, own_pid_namespace=True)
    except BaseException as exc:  # noqa: BLE001 - the child must never return un-jailed
        sys.stderr.write(f"jail: {exc}\n")
        os._exit(3)


def _confine(confinement: Confinement, libc, *, own_pid_namespace: bool, scoped: bool = True) -> None:
    """Landlock, no capabilities, seccomp: the part of the jail that needs no namespace (``scoped``:
    Landlock's scope of signals and abstract sockets too, where its ABI has it)."""
    syscalls.check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    abi = min(landlock.landlock_abi(), confinement.landlock_abi or 1 << 30)
    ruleset = landlock.build_ruleset(confinement, libc, abi, scoped=scoped)
    _drop_capabilities(libc)
    syscalls.check(libc.syscall(landlock.SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    os.close(ruleset)
    deny = {**seccomp.DENY, **({"truncate": errno.EPERM} if abi < 3 else {})}  # not Landlock's before ABI 3
    # Without a pid namespace of its own: no new process (each would outlive a killed worker, and
    # count against its user's processes), and, where Landlock cannot scope signals (ABI 6), none
    # sent but to itself.
    seccomp.install(seccomp.program(deny, guard_pdeathsig=True, forbid_file_maps=False,
                                    forbid_processes=not own_pid_namespace,
                                    signals_only_to=0 if own_pid_namespace or abi >= 6 else os.getpid()), libc)


def _enter_without_namespaces(confinement: Confinement, libc) -> None:
    """The strict level where the machine refuses new namespaces (Docker's default seccomp
    profile, Ubuntu 24.04's AppArmor rule for normal users): no fork, the process jails itself.

    Landlock and seccomp give the same file, network and signal rules; the worker starts no
    process (threads only), so nothing of it outlives it (it dies with its parent); its threads
    are bounded by RLIMIT_NPROC: for a root grader, under a real uid of its own
    (:attr:`Confinement.uid`), else the tasks its user has now and :data:`MAX_TASKS` more. Its scratch
    folder is a plain folder, whose size the grader watches from outside."""
    try:
        for cgroup in confinement.cgroups:
            _write(os.path.join(cgroup, "cgroup.procs"), str(os.getpid()))
        if os.geteuid() == 0:
            if confinement.uid:  # its own real uid, which RLIMIT_NPROC counts; file access stays root's
                os.setresuid(confinement.uid, 0, 0)
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_TASKS, MAX_TASKS))
        else:
            tasks = tasks_of_user(os.getuid()) + MAX_TASKS
            resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
        os.chdir(confinement.scratch)
        _confine(confinement, libc, own_pid_namespace=False)
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
# On the grader's side: a real uid for a worker's task count, and why this machine refuses namespaces

_uids = iter(range(1 << 30))


def worker_uid() -> int:
    """A real uid no other worker of this grader has (for RLIMIT_NPROC's count): high in the uid
    range this process's user namespace maps, away from the accounts a machine gives out."""
    try:
        ranges = [tuple(int(x) for x in line.split()) for line in open("/proc/self/uid_map").read().splitlines()]
    except OSError:
        ranges = []
    start, _, count = max(ranges, key=lambda r: r[2], default=(0, 0, 1 << 32))
    span = min(count // 4, 1_000_000)
    base = start + count // 2 if count < (1 << 31) else 2_000_000_000
    return base + (os.getpid() * 1000 + next(_uids)) % max(span, 1)


def setting(path: str) -> str:
    """A setting this machine shows in a file (under ``/proc/sys``), or '' where it shows none: read,
    never written."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def namespace_advice() -> str:
    """Why this machine refuses new user namespaces, and how to allow them, from what it shows
    (its settings are read, never written)."""
    if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" and os.geteuid() != 0:
        return ("Ubuntu's AppArmor rule refuses user namespaces to normal users: "
                "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or run the grader as root")
    if setting("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are switched off: `sudo sysctl user.max_user_namespaces=15000`"
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return ("this container's seccomp profile refuses them (Docker's default does): run it with "
                "`--security-opt seccomp=<a profile allowing unshare and clone with namespace flags>`, or "
                "`--security-opt seccomp=unconfined` on a machine you trust")
    return ("user namespaces are refused to this process: a seccomp profile (a container's), an AppArmor or "
            "SELinux rule, or sysctl user.max_user_namespaces=0; allow unshare(CLONE_NEWUSER) for the grader")


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
    """The autograder files the learner bundle ships (see :mod:`autograder.exports.release`)."""
    parts = path.split(os.sep)
    if "__pycache__" in parts:
        return False
    if len(parts) >= 2 and parts[-2] == "hidden":
        return parts[-1] == "__init__.py"
    return path.endswith(".py")


def _grant_tree(path: str, course: list[str], out: Confinement) -> None:
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


def confinement_for(level: str, scratch: str, *, memory_bytes: int, file_bytes: int, count_reads: bool,
             inputs: str = "", cgroups=(), measure_memory: bool = False) -> Confinement:
    """The jail of one worker. Grader side: decides what the worker may read."""
    confinement = Confinement(level, scratch, memory_bytes, file_bytes, count_reads, measure_memory=measure_memory, inputs=inputs,
                cgroups=list(cgroups), landlock_abi=landlock.landlock_abi() if level == STRICT else 0)
    if level == BASIC:
        return confinement
    base = _readable()
    for name in ("read_paths", "read_files", "rw_files", "list_dirs"):
        setattr(confinement, name, list(getattr(base, name)))
    return confinement


_READABLE: Confinement | None = None


def _readable() -> Confinement:
    """What every strict worker may read (computed once per process)."""
    global _READABLE
    if _READABLE is not None:
        return _READABLE
    confinement = Confinement(STRICT, "")
    public, autograder, secret = _course_dirs()
    course = sorted(set(public + autograder + secret))
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots |= {p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)}
    for root in sorted(roots):
        _grant_tree(root, course, confinement)
    confinement.read_paths += [os.path.realpath(p) for p in public]
    for folder in autograder:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            confinement.list_dirs.append(os.path.realpath(dirpath))
            for name in filenames:
                full = os.path.realpath(os.path.join(dirpath, name))
                if _is_public_course_file(full):
                    confinement.read_files.append(full)
    confinement.read_paths += [p for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib",
                                    "/usr/share/zoneinfo", "/sys/devices/system/cpu") if os.path.exists(p)]
    confinement.read_paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    confinement.read_files += [p for p in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group",
                                    "/etc/nsswitch.conf", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                                    "/dev/urandom", "/dev/random") if os.path.exists(p)]
    confinement.rw_files += ["/dev/null", "/dev/zero"]
    for name in ("read_paths", "read_files", "rw_files", "list_dirs"):
        setattr(confinement, name, sorted(set(getattr(confinement, name))))
    _READABLE = confinement
    return confinement


def _is_library_dir(path: str) -> bool:
    return os.path.basename(path) in ("site-packages", "dist-packages")
