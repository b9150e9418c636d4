"""The processes of a worker's tree, read from /proc by the grader: the bytes they read (the
kernel's count, around each case of a read-counted problem), their CPU time and peak memory, the
worker's pid namespace, and killing them. Linux; nothing here trusts what a worker says.
"""

from __future__ import annotations

import os
import signal
import time


def _tree(root: int) -> list[tuple[int, int]]:
    """(depth, pid) of ``root`` and every process descending from it, deepest first."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    out = []
    for pid in parents:
        depth, p = 0, pid
        while p != root and p in parents and depth < 10_000:
            p, depth = parents[p], depth + 1
        if p == root:
            out.append((depth, pid))
    return sorted(out, reverse=True)


def tree_rchar(root: int) -> int | None:
    """Bytes read so far by ``root`` and its descendants, as the kernel counts them (rchar), or
    None where the kernel does not say: not Linux, or a process whose count this grader may not
    read (never taken as 0). A process reaped during the count has its bytes added to its reaper,
    an ancestor read after it (deepest first): a read is never missed, at worst counted twice."""
    if not os.path.exists(f"/proc/{root}/io"):
        return None
    total = 0
    for _, pid in _tree(root):
        try:
            with open(f"/proc/{pid}/io", "rb") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith(b"rchar:"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone: its reaper has its count
        except (OSError, ValueError, IndexError, StopIteration):
            return None  # (PermissionError: another uid, and no CAP_SYS_PTRACE)
    return total


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(root: int) -> float:
    """User and system CPU time of ``root`` and its descendants, with that of the children they
    reaped (0 where the kernel does not say)."""
    ticks = 0
    for _, pid in _tree(root):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return ticks / _TICKS


def tree_peak_bytes(root: int) -> int:
    """The largest peak resident set (VmHWM) among ``root`` and its descendants, in bytes."""
    return max([(proc_number(pid, "status", b"VmHWM:") or 0) * 1024 for _, pid in _tree(root)] + [0])


def proc_number(pid: int, name: str, key: bytes) -> int | None:
    """The number after ``key`` in ``/proc/<pid>/<name>``, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def kill(pid: int, signum: int = signal.SIGKILL) -> None:
    """SIGKILL a process (or, for a negative pid, a process group) that may be gone already (or send
    it ``signum``)."""
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``."""
    return [pid for depth, pid in _tree(parent) if depth == 1]


WORKER_PID = 2  # the worker's pid in its own pid namespace: the first process its init (pid 1) forks


def namespace_worker(launcher: int) -> int | None:
    """The process running the learner's code in the worker's pid namespace, by this grader's pid:
    the child of the namespace's init (the launcher's one child) that is pid 2 inside (orphans the
    init adopted are its children too); None when there is none."""
    found = [pid for depth, pid in _tree(launcher) if depth == 2 and inner_pid(pid) == WORKER_PID]
    return found[0] if len(found) == 1 else None


def inner_pid(pid: int) -> int | None:
    """A process's pid in its own (innermost) pid namespace: the last of its ``NSpid`` (None when gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return next(int(line.split()[-1]) for line in f if line.startswith(b"NSpid:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def pid_namespace(launcher: int) -> tuple[str, int] | None:
    """The pid namespace of the launcher's children, if it is not this grader's own (never one
    whose processes are not all the worker's): its name, and a descriptor open on it, to close once
    done with the name. While that is open the namespace outlives its processes and its name stays
    its own: the kernel gives an ended namespace's number to the next namespace made, at once
    (another worker's, whose processes a look for this one's would find, and kill)."""
    try:
        fd = os.open(f"/proc/{launcher}/ns/pid_for_children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        namespace = f"pid:[{os.fstat(fd).st_ino}]"  # (as its link reads: the namespace's number)
        if namespace != os.readlink("/proc/self/ns/pid"):
            return namespace, fd
    except OSError:
        pass
    os.close(fd)
    return None


def namespace_pids(namespace: str) -> list[int]:
    """The processes in the pid namespace ``namespace`` (as :func:`pid_namespace` names it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def wait_gone(namespace: str, seconds: float = 5.0) -> None:
    """Until no process is left in ``namespace`` (any left is killed), for at most ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = namespace_pids(namespace)
        if not left:
            return
        for pid in left:  # not expected: the kernel kills them when pid 1 dies
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
