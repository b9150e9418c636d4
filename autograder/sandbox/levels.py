"""The isolation levels a worker runs at (strict, basic), what each holds learner code to on this
machine and by which mechanism, and the choice between them (``auto``: the best available).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from autograder.limits import DEFAULT_FILE_BYTES, SCRATCH_POLL
from autograder.sandbox import cgroups, jail, landlock, worker

STRICT, BASIC, AUTO = jail.STRICT, jail.BASIC, "auto"
NO_CODE_RAN = "none (no learner code ran)"


# ---------------------------------------------------------------------------------------------
# Isolation levels

@dataclass(frozen=True)
class Isolation:
    level: str  # strict or basic
    missing: tuple = ()  # what the strict level lacks here (empty when it is available)

    @property
    def describe(self) -> str:
        if self.level == STRICT:
            how = "user/pid/network namespaces" if worker.strict_namespaces() else "no namespaces (refused here)"
            return (f"strict (Landlock, seccomp, {how}, process limit: learner code reads only "
                    "the public course files, writes only its scratch folder, has no network and cannot signal "
                    "the grader)")
        why = f"; strict is not available here: {'; '.join(self.missing)}" if self.missing else ""
        return "basic (resource limits only: learner code can read, write and signal what the grader can)" + why


def guarantees() -> list[tuple[str, str, str]]:
    """What a strict worker is held to on this machine: (guarantee, the mechanisms that give it
    here, what is missing for it). For ``python -m autograder isolation``."""
    missing = worker.strict_missing()
    abi = landlock.landlock_abi()
    if missing:
        return [("every guarantee of the strict level", "none: workers run at the basic level",
                 "what 'Missing for strict' says above")]
    namespaces = worker.strict_namespaces()
    kinds = set()
    for cgroup in cgroups.worker_cgroups():  # the controllers a worker gets: v1, a folder each; v2, files in one
        kinds |= {k for k, f in (("pids", "pids.max"), ("memory", "memory.max"), ("cpu", "cpu.weight"))
                  if os.path.basename(os.path.dirname(cgroup)) == k or os.path.exists(os.path.join(cgroup, f))}
        cgroups.remove_cgroup(cgroup)
    root = os.geteuid() == 0
    autogroup = jail.setting("/proc/sys/kernel/sched_autogroup_enabled") == "1"
    root_hint = "a grader running as root (or a delegated cgroup) gives each worker cgroups of its own"
    ns_hint = "namespaces of its own (" + worker.namespaces_refused() + ")"
    seccomp_signals = "seccomp lets it signal only itself" if abi < 6 else f"Landlock's signal scope (ABI {abi})"
    if namespaces:
        scratch = ("a tmpfs in its own mount namespace", "")
        network = "seccomp refuses socket(); a network namespace"
        signals = "a pid namespace (no process outside it can be named); seccomp refuses ptrace" + \
            (f"; Landlock's signal scope (ABI {abi})" if abi >= 6 else "")
        processes = ("every process it starts ends with the problem; at most 400",
                     "its own pid namespace, under a minimal init; RLIMIT_NPROC in its own user namespace"
                     + ("; a pids cgroup" if "pids" in kinds else ""), "")
    else:
        scratch = (f"the grader measures the folder every {SCRATCH_POLL:g} s and stops the worker past the limit "
                   f"(what it writes in that time may go over; one file: at most {DEFAULT_FILE_BYTES >> 20} MiB)",
                   "a tmpfs of its own: " + ns_hint)
        network = "seccomp refuses socket()"
        signals = f"{seccomp_signals}; seccomp refuses ptrace"
        per = ("under a real uid of its own" if root else
               "counted with its user's other tasks: grade-batch grades one learner at a time, so that no "
               "classmate shares the count")
        processes = ("starts no process (threads only, at most 400), so nothing outlives it",
                     f"seccomp refuses fork and clone without CLONE_THREAD; RLIMIT_NPROC {per}"
                     + ("; a pids cgroup" if "pids" in kinds else ""),
                     "" if root else f"a count of its own: {ns_hint}, or a grader running as root")
    rows = [
        ("reads only the interpreter, the libraries, the public course files and its cases",
         f"Landlock (ABI {abi})", ""),
        ("writes only its own scratch folder; changes no file's mode, owner, times or attributes",
         f"Landlock (ABI {abi}); seccomp refuses chmod, chown, utime, xattrs, inotify, fanotify"
         + ("; seccomp refuses truncate(2), which Landlock governs from ABI 3" if abi < 3 else ""), ""),
        ("its scratch folder holds at most 512 MiB in 20,000 files", *scratch),
        ("no network", network + (f"; Landlock TCP rules (ABI {abi})" if abi >= 4 else ""), ""),
        ("cannot signal, stop or trace the grader or a classmate", signals, ""),
        processes,
        ("the memory of its whole tree is bounded (memfds and its tmpfs included)",
         "a memory cgroup (4.5 GiB); seccomp refuses memfds and SysV memory" if "memory" in kinds else
         "4 GiB of address space per process; seccomp refuses memfds and SysV memory"
         + ("" if namespaces else "; it is its tree's only process"),
         "" if "memory" in kinds or not namespaces else f"a bound for the whole tree: {root_hint}"),
        ("one equal share of the CPU, however many processes it runs",
         "a cpu cgroup" if "cpu" in kinds else "the scheduler's groups per session (autogroup)"
         + ("" if namespaces else ": one session, its only process's"),
         "" if "cpu" in kinds or (not namespaces and autogroup) else
         ("a share a worker cannot split across new sessions: " if autogroup else
          "the scheduler's autogroup is off (sysctl kernel.sched_autogroup_enabled), and: ") + root_hint),
        ("a read-counted problem (4.4) counts every byte it reads",
         "the kernel's count of the worker's reads (/proc/<pid>/io), read by the grader; its code runs in one "
         "thread and starts no process; seccomp refuses file memory maps and the calls that move bytes uncounted",
         ""),
        ("a memory-measured problem (6.1, 6.2, 7.1, 7.4, 9.1, 9.2) is charged its whole peak",
         "its anonymous memory (RssAnon + RssShmem of /proc/<pid>/status), sampled by the grader from outside every millisecond "
         "above where it stood before its code loaded; seccomp refuses processes, exec, giving pages back "
         "(madvise) and paging out", ""),
        ("never changes a machine-wide setting", "nothing under /proc/sys is written", ""),
    ]
    return rows


def concurrent_workers_fair() -> bool:
    """Whether workers graded at the same time cannot take from one another what the jail
    bounds. Not so where, without namespaces, a normal user's workers share its task count."""
    return not worker.strict_missing() and (worker.strict_namespaces() or os.geteuid() == 0)


def resolve(requested: str) -> Isolation:
    """``strict``: raise :class:`~autograder.sandbox.worker.IsolationUnavailable` (saying what is
    missing) unless available; ``basic``: basic; ``auto``: the best available."""
    if requested not in (STRICT, BASIC, AUTO):
        raise ValueError(f"unknown isolation level {requested!r}: choose strict, basic or auto")
    if requested == BASIC:
        return Isolation(BASIC, worker.strict_missing())
    missing = worker.strict_missing()
    if not missing:
        return Isolation(STRICT)
    if requested == STRICT:
        raise worker.IsolationUnavailable(
            "The strict isolation level is not available on this machine: " + "; ".join(missing) + ". "
            "Grade on a Linux machine that has it (python -m autograder isolation says what this one has), or "
            "pass --isolation basic to grade with resource limits only (learner code can then read the hidden "
            "tests and harm other submissions).")
    return Isolation(BASIC, missing)
