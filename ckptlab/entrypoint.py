"""The PID 1 trap (Lesson 8): a program with no SIGTERM handler, run as pid 1 of its own pid
namespace, as a container's entrypoint is, beside the same program under a minimal init.

    from ckptlab.entrypoint import run
    ending = run("pid1", grace=3.0)   # ending.status, ending.after, ending.killed, ending.pid_inside

Linux gives pid 1 of a pid namespace only the signals it set a handler for (SIGKILL and SIGSTOP
only from outside the namespace): a default action, such as SIGTERM's (the end of the process),
never applies to it. So a container whose entrypoint is the job itself, with no handler, ignores
the SIGTERM of ``docker stop`` or of Kubernetes, and runs on until the SIGKILL at the end of the
grace window. The program here sleeps in a loop, with no handler (or, ``handler=True``, one that
ends it); how it runs is ``how``:

- ``"plain"``: an ordinary process (the control: not pid 1);
- ``"pid1"``: pid 1 of a new pid namespace (``os.unshare``), as ``docker run`` starts an entrypoint;
- ``"init"``: pid 2 of a new pid namespace whose pid 1 is a minimal init, as ``docker run --init``
  (tini) starts it: the init forwards the signals a job is sent to the program, reaps every process
  that ends, and exits with the program's status (128 + the signal that ended it, as Docker reports).

The scheduler (:func:`run`, in this process) waits for the program's ready line, sends SIGTERM to pid
1 of its namespace (the program, or its init: what ``docker stop`` and the kubelet signal), waits
``grace`` seconds, then SIGKILLs it if it still runs. Every time is measured here, from outside.
A machine that refuses new namespaces (Docker's default seccomp profile, Ubuntu's AppArmor rule for
normal users) refuses the two namespaced runs: their ending says so (``refused``).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

HOWS = ("plain", "pid1", "init")

_CHILD = r"""
import os, signal, sys, time
how, handler = sys.argv[1], sys.argv[2] == "1"

def program():
    if handler:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print("ready", os.getpid(), flush=True)
    while True:
        time.sleep(0.01)

if how == "plain":
    program()
try:  # a user namespace too: a normal user needs one to make a pid namespace (root may do without)
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWPID)
except OSError as exc:
    try:
        os.unshare(os.CLONE_NEWPID)
    except OSError:
        print("refused", exc, flush=True)
        sys.exit(3)
child = os.fork()  # the first process of the new pid namespace: its pid 1
if child:  # out here: report pid 1's number for the signals, then how it ended
    print("pid1", child, flush=True)
    _, status = os.waitpid(child, 0)
    print("status", os.waitstatus_to_exitcode(status), flush=True)
    sys.exit(0)
if how == "pid1":
    program()
# A minimal init, as tini: the signals taken from a wait (no handler of its own), forwarded, and
# every child that ends reaped; its exit code, the program's (128 + the signal that ended it).
forwarded = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}
watched = forwarded | {signal.SIGCHLD}
signal.pthread_sigmask(signal.SIG_BLOCK, watched)
worker = os.fork()
if worker == 0:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
    program()
while True:
    signum = signal.sigwaitinfo(watched).si_signo
    if signum in forwarded:
        os.kill(worker, signum)
        continue
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == worker:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
        if pid == 0:
            break
"""


@dataclass
class Ending:
    """How one run ended, seen from outside."""

    how: str
    handler: bool
    refused: str = ""  # why this machine refused the namespaces ('' where it did not)
    pid_inside: int | None = None  # the program's pid as it saw it (1: it was pid 1 of its namespace)
    status: int | None = None  # how the signalled process ended: its exit code, or -N for signal N
    after: float = 0.0  # seconds from the SIGTERM to that end
    killed: bool = False  # whether it still ran when the grace window closed, and the SIGKILL ended it


def _lines(proc: subprocess.Popen, until, timeout: float) -> dict:
    """The child's lines (``key value``) read until ``until(lines)`` holds, or ``timeout`` seconds."""
    lines, buffer, end = {}, b"", time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while not until(lines) and time.monotonic() < end:
        if not select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        for line in done:
            key, _, value = line.decode().partition(" ")
            lines[key] = value
    return lines


def run(how: str, *, handler: bool = False, grace: float = 3.0) -> Ending:
    """Start the program as ``how`` says, SIGTERM pid 1 of its namespace (the process itself, for
    ``"plain"``) once it is ready, SIGKILL it after ``grace`` seconds if it still runs."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, not {how!r}")
    ending = Ending(how, handler)
    proc = subprocess.Popen([sys.executable, "-I", "-c", _CHILD, how, "1" if handler else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        need = ("ready",) if how == "plain" else ("ready", "pid1")
        lines = _lines(proc, lambda got: "refused" in got or all(k in got for k in need), 30)
        if "refused" in lines:
            ending.refused = lines["refused"] or "refused"
            proc.wait(10)
            return ending
        if not all(k in lines for k in need):
            raise RuntimeError(f"the {how} run never became ready (it said {lines})")
        ending.pid_inside = int(lines["ready"])
        target = proc.pid if how == "plain" else int(lines["pid1"])
        sent = time.monotonic()
        os.kill(target, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            ending.killed = True
            os.kill(target, signal.SIGKILL)  # from outside the namespace: pid 1 too
            proc.wait(10)
        ending.after = time.monotonic() - sent
        if how == "plain":
            ending.status = proc.returncode
        else:
            status = _lines(proc, lambda got: "status" in got, 10).get("status")
            ending.status = None if status is None else int(status)
        return ending
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
