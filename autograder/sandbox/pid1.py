"""The init of a strict worker's pid namespace: pid 1, so that the learner's process is not.

Linux gives pid 1 of a pid namespace no signal it has no handler for (SIGTERM's default action,
which ends any other process at once, does not apply to it), and makes it the parent of every
orphan in the namespace. So a container runs a minimal init as pid 1 (``docker run --init``, tini,
Kubernetes' ``shareProcessNamespace``) and its program as an ordinary process. This is that init,
for the worker. :func:`autograder.sandbox.jail.enter` calls :func:`start` inside the namespaces,
with the limits set, before any learner code and before any seal that forbids new processes; the
init and the worker then each jail themselves (Landlock, no capabilities, seccomp), the init before
it does anything else: each with Landlock's rule for its own /proc entry (a rule made before the fork
would name the init's, and the worker could not read its own), and the init without Landlock's scope
of signals, which would keep it from signalling the worker, outside its domain (the worker's domain
keeps that scope: it cannot signal the init). The worker goes on only once the init is jailed: an init
whose jail fails ends the worker before any learner code (a failed start, the grader's own failure,
never a learner's crash). The init runs no learner code, reads nothing, forwards the
signals a job is sent (:data:`FORWARDED`) to the worker, reaps every process that ends in the
namespace, and exits with the worker's status as the launcher reads it (an exit code, or 128 + the
signal that ended it, as for the worker alone before). The kernel ends every other process in the
namespace with it.

Standard library only: the worker imports it before its jail is on.
"""

from __future__ import annotations

import os
import signal

# What tini forwards: the signals a job is sent (a cluster's SIGTERM, a terminal's SIGINT, SIGHUP,
# SIGQUIT, a job's own SIGUSR1 and SIGUSR2, an alarm, a window change), never one the kernel raises
# for a fault of the init's own (SIGSEGV, SIGBUS, SIGFPE...). SIGKILL and SIGSTOP cannot be caught:
# sent from inside the namespace the kernel drops them, sent by the grader they end the namespace.
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGWINCH)
FAILED = 70  # the init's own failure (never expected): the kernel then ends the namespace, the worker with it


def start(close: tuple = (), jail=None) -> None:
    """Fork the worker. In the worker (pid 2) this returns once the init is jailed, its signal mask
    and every disposition as this process had them (the default ones, where nothing set another).
    This process stays as the init: it calls ``jail`` (its own jail) first, closes ``close`` (the
    worker's pipes), and never returns; should its jail fail, it ends, and the worker with it, before
    this returns there."""
    watched = {*FORWARDED, signal.SIGCHLD}
    # Blocked before the fork and taken by sigwaitinfo: a signal that comes at any moment waits for
    # the loop, and no disposition is changed (a handler would be inherited by the worker).
    before = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    jailed_r, jailed_w = os.pipe()
    worker = os.fork()
    if worker == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        # Not a step further until the init is jailed: should its jail fail, this process ends here, before
        # any learner code (the grader's failure, a failed start), never in the middle of the learner's.
        os.close(jailed_w)
        jailed = os.read(jailed_r, 1)
        os.close(jailed_r)
        if not jailed:
            os._exit(FAILED)
        return
    os.close(jailed_r)
    code = FAILED
    try:
        if jail is not None:
            jail()
        os.write(jailed_w, b"1")
        os.close(jailed_w)
        for fd in close:
            os.close(fd)
        code = serve(worker, watched)
    except BaseException as exc:  # noqa: BLE001 - never serves un-jailed, never returns
        os.write(2, f"jail: the namespace's init: {exc}\n".encode())
    finally:
        os._exit(code)


def serve(worker: int, watched: set) -> int:
    """Forward each signal of :data:`FORWARDED` to ``worker``, reap whatever ends, until ``worker``
    has ended: its status, as an exit code (128 + a signal that ended it)."""
    while True:
        signum = signal.sigwaitinfo(watched).si_signo
        if signum != signal.SIGCHLD:
            try:  # (not reaped yet: the number is still the worker's)
                os.kill(worker, signum)
            except OSError:
                pass
        while True:  # every child that has ended, at each wake (SIGCHLDs merge, and may wait behind others)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return FAILED  # not expected: the worker is a child until it is reaped here
            if pid == 0:
                break
            if pid == worker:
                code = os.waitstatus_to_exitcode(status)
                return code if code >= 0 else 128 - code
