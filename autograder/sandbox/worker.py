"""The trusted side of a worker: start it in its jail, feed it cases, read its frames, measure it.

Nothing here runs learner code. The worker's frames are bounded and checked before anything is
built from them (:mod:`autograder.sandbox.wire`, :func:`autograder.wall.codec.decode`); the bytes a
read-counted problem reads are counted here, from the kernel's counters of every process in the
worker's tree, around each case; the worker and everything it started are killed when the
problem ends.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache

from autograder.limits import (
    DEFAULT_FILE_BYTES,
    DEFAULT_MEMORY,
    DEFAULT_TIMEOUT,
    JOIN_MARGIN,
    SCRATCH_BYTES,
    SCRATCH_INODES,
    SCRATCH_POLL,
    WALL_FACTOR,
)
from autograder.sandbox import cgroups, environment, folders, inside, jail, landlock, proctree, wire, zygote
from autograder.sandbox.jail import BASIC, STRICT
from autograder.wall import codec

# Where a series of workers sharing a kept scratch folder (problem 5.3's runs of one case) keeps the
# programs JAX compiled, for the next run: a restarted job recompiles nothing it compiled before
# (on a restart, compiling is most of a small model's time). The learner's own folder: only that
# learner's later runs read it.
COMPILE_CACHE = ".jax-compiled"


class IsolationUnavailable(RuntimeError):
    """The strict level was required and this machine cannot give it."""


@dataclass
class RunResult:
    # "ok", "timeout", "crashed", "malformed", "failed_start" (before any learner code ran),
    # "machine_killed" (the kernel's OOM killer ended it for the machine's or the container's memory,
    # not for its own limit), "container_memory" (so, but it held half the container's memory itself)
    status: str
    setup: dict | None = None
    # per case: {"value": decoded, "read_bytes": int | None, "peak_bytes": int | None} or {"error": {...}}
    cases: list = field(default_factory=list)
    seconds: float = 0.0  # wall time of the worker, start-up included
    code_seconds: float = 0.0  # time spent inside the learner's function (as the worker says: not scored)
    returncode: int | None = None
    stderr_tail: str = ""  # for instructors' debugging logs only, never shown in reports
    detail: str = ""  # why a frame was refused (for instructors' logs)
    peak_bytes: int = 0  # the largest resident set of a process of the worker's tree (benchmarks)
    waited: float = 0.0  # before the worker started, for the zygote to import its libraries (benchmarks)
    killed_seconds: float = 0.0  # of ``seconds``, in workers the grader preempted (problem 5.3; benchmarks)


# ---------------------------------------------------------------------------------------------
# What the strict level has on this machine, found by starting a strict worker: beside the Worker,
# whose default (namespaces=None) asks it (the levels themselves and their text: levels.py)

def strict_missing() -> tuple:
    """What this machine lacks for the strict level (empty: it has it all)."""
    return _strict_probe()[1]


def strict_namespaces() -> bool:
    """Whether strict workers get namespaces of their own here (else: :func:`jail.enter`'s
    strict level without them)."""
    return _strict_probe()[0]


def namespaces_refused() -> str:
    """Why this machine refuses strict workers namespaces of their own ('' where it does not)."""
    return _strict_probe()[2]


@lru_cache(maxsize=1)
def _strict_probe() -> tuple[bool, tuple, str]:
    """(namespaces, missing, why no namespaces): found by starting a real strict worker and asking
    it to run a one-line function; with namespaces of its own first, then without."""
    if sys.platform != "linux":
        return False, (f"kernel isolation needs Linux (this is {sys.platform})",), ""
    abi, why = landlock.landlock_status()
    if abi < landlock.STRICT_LANDLOCK_ABI:
        return False, (why,), ""
    refused = ""
    for namespaces in (True, False):
        try:
            # Bare: forked as soon as the zygote runs, while it imports JAX for the workers after.
            run = Worker("def probe():\n    return 1\n", "probe", [()], timeout=60, level=STRICT, bare=True,
                         namespaces=namespaces).wait()
        except IsolationUnavailable as exc:
            return False, (str(exc),), refused
        if run.status == "ok" and not run.setup and run.cases and run.cases[0].get("value") == 1:
            return namespaces, (), refused
        lines = [line[len("jail: "):] for line in run.stderr_tail.splitlines() if line.startswith("jail: ")]
        reason = lines[-1] if lines else f"a strict worker did not start ({run.status}): {run.stderr_tail[-300:]}"
        if namespaces and "unshare" in reason:
            refused = f"{reason} — {jail.namespace_advice()}"
            continue
        return False, (reason,), refused
    return False, (refused,), refused


# ---------------------------------------------------------------------------------------------
# The worker

def _preload(source: str) -> list[str]:
    from autograder.wall.memory import preload

    return preload(source)


class Worker:
    """A started worker; :meth:`wait` returns its :class:`RunResult` within the time limit.

    ``cases`` are argument tuples. Files in them (:mod:`autograder.wall.files`) must already be written
    into ``workdir``, except for a read-counted problem, whose files are written one case at a
    time, inside the window in which its reads are counted (so no code can read them earlier).
    A ``bare`` strict worker is forked before the zygote has imported JAX (for code needing none).
    ``env``: variables added to the worker's environment (:func:`environment.worker_env`), never the
    grader's own."""

    def __init__(self, source: str, function: str, cases: list[tuple], *, timeout: float = DEFAULT_TIMEOUT,
                 memory_bytes: int = DEFAULT_MEMORY, file_bytes: int = DEFAULT_FILE_BYTES, workdir: str | None = None,
                 count_reads: bool = False, level: str = BASIC, bare: bool = False, namespaces: bool | None = None,
                 keep_scratch: bool = False, exit_when_done: bool = False, measure_memory: bool = False,
                 digest_arrays: bool | None = None, compile_cache: bool = False, env: dict | None = None):
        self.timeout, self.level, self.count_reads, self.measure_memory = timeout, level, count_reads, measure_memory
        self.memory_base: tuple[int, int] | None = None  # (pid, resident bytes) before the learner's code
        self.anonymous = None  # its anonymous memory's peak, sampled from then on (ckptlab.memory.AnonymousPeak)
        self.held = None  # what any other worker's process holds, sampled less often from its start (_watch_memory)
        self.keep_scratch = keep_scratch  # the scratch folder (and workdir) outlive it: the caller removes them
        self.workdir = workdir or folders.new_workdir()
        self.cases = list(cases)
        self.result = RunResult("crashed")
        self._reaping = threading.Lock()  # held to reap the launcher and to signal its group: see _kill_group
        self._confine(memory_bytes, file_bytes, namespaces)
        (to_r, self.to_w), (self.from_r, from_w) = os.pipe(), os.pipe()
        self.log = tempfile.TemporaryFile(prefix="ckpt-worker-log-")  # unlinked: the worker cannot find it
        # exit_when_done: the worker's process ends as soon as it has answered (one case), taking any
        # thread it left with it (problem 5.3: a save still committing is lost, as in a job that ends).
        # A memory-measured worker's arrays come back as digests (see codec.ArrayDigest), as do those
        # of a worker asked for them.
        digest = measure_memory if digest_arrays is None else digest_arrays
        self.job = {"source": source, "function": function, "exit_when_done": exit_when_done,
                    # JAX's types taken before the code loads (codec.pin_jax_types): where the cases hold
                    # its objects, arrays come back as digests, or the code imports it
                    "jax": any(codec.needs_jax(c) for c in self.cases) or digest or zygote.imports_jax(source),
                    "digest_arrays": digest, "preload": _preload(source) if measure_memory else [],
                    # compile_cache (a kept scratch folder's series of workers, problem 5.3): JAX's
                    # compiled programs kept in the scratch folder, for the next worker of the series
                    "compile_cache": os.path.join(os.path.realpath(self.scratch), COMPILE_CACHE)
                    if compile_cache and keep_scratch else None}
        self.namespace: str | None = None
        self._namespace_fd: int | None = None  # open on it until this worker's end is done (proctree.pid_namespace)
        self.started = False  # whether the worker said its own start was over (learner code runs after)
        self.oom_kills = cgroups.oom_kills()  # the machine's OOM kills so far: one more, and a SIGKILL is the machine's
        self._spawn(to_r, from_w, source, bare, env)
        os.set_blocking(self.to_w, False)
        self.thread = threading.Thread(target=self._drive, daemon=True)
        self.thread.start()
        if self.watch_scratch:
            threading.Thread(target=self._watch, daemon=True).start()

    def _confine(self, memory_bytes: int, file_bytes: int, namespaces: bool | None) -> None:
        """Its scratch folder (all it writes: at the strict level, a tmpfs of its own), cgroups and jail."""
        self.scratch = os.path.join(self.workdir, "scratch")
        os.makedirs(self.scratch, exist_ok=True)
        self.cgroups = cgroups.worker_cgroups(memory_bytes) if self.level == STRICT else []
        # It reads its cases' files in workdir, and writes only in its scratch folder.
        self.confinement = jail.confinement_for(
            self.level, os.path.realpath(self.scratch), memory_bytes=memory_bytes, file_bytes=file_bytes, count_reads=self.count_reads,
            inputs=os.path.realpath(self.workdir), cgroups=self.cgroups, measure_memory=self.measure_memory)
        if self.level == STRICT:
            self.confinement.namespaces = strict_namespaces() if namespaces is None else namespaces
            # Without namespaces, a root grader's worker counts its threads under a uid of its own; not a
            # read-counted one, which starts none (its count must stay readable by this grader, which
            # may lack CAP_SYS_PTRACE: see jail.seal_tasks).
            if not self.confinement.namespaces and os.geteuid() == 0 and not self.count_reads:
                self.confinement.uid = jail.worker_uid()
        self.confinement.tmpfs_scratch = not self.keep_scratch
        # A scratch folder with no tmpfs of its own (no mount namespace, or kept): its size watched from here.
        self.watch_scratch = self.level == STRICT and not (self.confinement.namespaces and self.confinement.tmpfs_scratch)
        self.scratch_full = False

    def _spawn(self, to_r: int, from_w: int, source: str, bare: bool, env: dict | None) -> None:
        """Start it on ``to_r``, ``from_w`` (closed here): at the strict level, forked from the zygote once that has imported its
        code's libraries; else (and at the basic level, whose workers can reach whatever the grader can) started afresh."""
        asked = time.monotonic()
        try:
            self.proc = zygote.spawn((to_r, from_w, self.log.fileno()), self.scratch,
                                     {**environment.worker_env(self.scratch, self.level), **(env or {})}, environment.zygote_env(),
                                     None if bare else zygote.needs(source, self.count_reads)) if self.level == STRICT else None
            # The worker's time (and its time limit) starts now: the zygote's imports before the fork
            # are the grader's start-up, done once (a fresh worker's own imports count as its time).
            self.start = time.monotonic()
            self.result.waited = self.start - asked
            if self.proc is None:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", inside.__file__, str(to_r), str(from_w), str(os.getpid())],
                    pass_fds=(to_r, from_w), cwd=self.scratch,
                    env={**environment.worker_env(self.scratch, self.level), **(env or {})},
                    stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True)
        finally:
            os.close(to_r)
            os.close(from_w)

    def _watch(self) -> None:
        """Kill the worker once its scratch folder holds more than a tmpfs of its own would: checked
        every :data:`SCRATCH_POLL` seconds while it lives."""
        while self.thread.is_alive():
            if folders.scratch_over(self.scratch, SCRATCH_BYTES, SCRATCH_INODES):
                self.scratch_full = True
                self._kill_group()
                return
            time.sleep(SCRATCH_POLL)

    # -- the conversation ------------------------------------------------------------------------
    def _drive(self) -> None:
        from autograder.wall import files

        # The time limit is the worker tree's own CPU time as well as the clock's: a machine busy
        # with other work does not use it up (up to a cap on the clock: code that waits uses none).
        deadline = self.start + WALL_FACTOR * self.timeout
        result = self.result
        try:
            wire.send(self.to_w, {"confinement": self.confinement.to_json()}, deadline)
            wire.send(self.to_w, {"job": self.job}, deadline)
            self._wait_for_answer(deadline)
            first = wire.recv(self.from_r, deadline)
            if first == {"started": True}:  # its own start is over: from here on, learner code runs
                self.started = True
                self._watch_memory()
                self._wait_for_answer(deadline)
                first = wire.recv(self.from_r, deadline)
            if self.measure_memory and first == {"ready": True}:  # no learner code has run yet
                self._measure_from()
                wire.send(self.to_w, {"go": True}, deadline)
                self._wait_for_answer(deadline)
                first = wire.recv(self.from_r, deadline)
            if first is None:
                if not self.started:  # it died before running any learner code: the grader's failure
                    result.status = "failed_start"
                return
            self._hold_namespace()
            if not isinstance(first, dict) or not first.get("loaded"):
                result.setup = wire.clean_error(first.get("setup") if isinstance(first, dict) else None)
                result.status = "ok"
                return
            # One count per case: a case's window opens where the last one closed (before its file
            # exists), so whatever the worker reads between cases is counted too, never missed.
            before = proctree.tree_rchar(self.proc.pid) if self.count_reads else None
            for args in self.cases:
                if self.count_reads:
                    args = files.realize(args, self.workdir)
                sent = wire.send(self.to_w, {"args": codec.encode(tuple(args))}, deadline)
                self._wait_for_answer(deadline)
                answer = wire.recv(self.from_r, deadline)
                if answer is None:
                    return  # the worker died: crashed
                read_bytes = None
                if self.count_reads:
                    # What the worker read of the frame itself is the grader's, not the learner's.
                    after = proctree.tree_rchar(self.proc.pid)
                    read_bytes = None if before is None or after is None else max(0, after - before - sent)
                    before = after
                    files.remove(args)
                result.cases.append(self._case(answer, read_bytes, self._peak()))
            result.status = "ok"
        except wire.FrameError as exc:
            timed_out = time.monotonic() >= deadline or str(exc) == "timeout"
            result.status, result.detail = ("timeout", "") if timed_out else ("malformed", str(exc))
            if not self.started:  # nothing of the learner's had run yet: whatever happened is the grader's
                result.status = "failed_start"
        except (ValueError, TypeError, KeyError, RecursionError, OverflowError) as exc:
            result.status, result.detail = "malformed", f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            self._stop()

    def _wait_for_answer(self, deadline: float) -> None:
        """Until the worker has something to say. :class:`wire.FrameError` ("timeout") once
        :attr:`timeout` seconds have passed on the clock *and* its tree has used as much CPU time
        (never sooner than a limit on the clock alone, so a tree running several threads is not
        cut short), or at the wall-clock cap ``deadline``. The tree's CPU time is read only after
        the first :attr:`timeout` seconds: a worker that finishes in time costs no look at /proc."""
        limit = self.start + self.timeout
        while True:
            now = time.monotonic()
            if now >= deadline or (now >= limit and self.cpu_seconds() >= self.timeout):
                raise wire.FrameError("timeout")
            wait = (deadline if now >= limit else limit) - now
            if select.select([self.from_r], [], [], min(wait, 0.2) if now >= limit else wait)[0]:
                return

    def cpu_seconds(self) -> float:
        """CPU time used so far by the worker's tree, as the kernel counts it: each live process's
        own, and that of the children each one has reaped."""
        return proctree.tree_cpu_seconds(self.proc.pid)

    def _hold_namespace(self) -> None:  # its name, and a descriptor keeping it ours (proctree.pid_namespace)
        if self.level == STRICT and self.confinement.namespaces:
            self.namespace, self._namespace_fd = proctree.pid_namespace(self.proc.pid) or (None, None)

    # -- memory, measured from here -------------------------------------------------------------
    def _learner_pid(self) -> int | None:
        """The process that runs the learner's code: pid 2 of the worker's own pid namespace (the
        child of its init, which is the launcher's one child), else the worker itself."""
        if self.level == STRICT and self.confinement.namespaces:
            return proctree.namespace_worker(self.proc.pid)
        return self.proc.pid

    def _measure_from(self) -> None:
        """Before the learner's code loads: reset the kernel's peak of the process that will run it
        to its present resident set (``/proc/<pid>/clear_refs``: 5), and note that set. Its code can
        neither undo this nor reset the peak itself (see :func:`jail.seal_memory`)."""
        pid = self._learner_pid()
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except (OSError, TypeError):
            return
        base = proctree.proc_number(pid, "status", b"VmRSS:")
        self.memory_base = None if base is None else (pid, base * 1024)
        if base is not None:
            from ckptlab.memory import AnonymousPeak

            self.anonymous = AnonymousPeak(pid)

    def _peak(self) -> int | None:
        """Of a memory-measured worker, its peak resident set so far above the set it had before its
        code loaded, in bytes (as the kernel keeps it); None where not measured."""
        if not self.measure_memory or self.memory_base is None:
            return None
        pid, base = self.memory_base
        peak = proctree.proc_number(pid, "status", b"VmHWM:")
        return None if peak is None else max(0, peak * 1024 - base)

    def _anonymous_peak(self) -> int | None:
        """Of a memory-measured worker, the peak of its anonymous memory so far (sampled from here:
        the file pages it maps are not counted) above what it held before its code loaded."""
        return None if self.anonymous is None else self.anonymous.sample()

    def _case(self, answer, read_bytes, peak_bytes=None) -> dict:
        if not isinstance(answer, dict):
            raise ValueError("a case frame is not an object")
        seconds = answer.get("seconds")
        if isinstance(seconds, (int, float)) and 0 <= seconds < 1e6:
            self.result.code_seconds += float(seconds)
        peaks = {} if peak_bytes is None else {"peak_bytes": peak_bytes, "anonymous_peak_bytes": self._anonymous_peak()}
        if "value" in answer:
            return {"value": codec.decode(answer["value"], checked=True), "read_bytes": read_bytes, **peaks}
        return {"error": wire.clean_error(answer.get("error")), **peaks}

    # -- the end ----------------------------------------------------------------------------------
    def _stop(self) -> None:
        """Kill the worker and everything it started; in the strict level, wait until its pid
        namespace is empty."""
        with self._reaping:  # (not through a number that may be another process's by now)
            live = not self._reaped()
            if self.namespace is None and live:
                self._hold_namespace()
            namespace = self.namespace
            if live:
                self.result.peak_bytes = proctree.tree_peak_bytes(self.proc.pid)
        if namespace:
            # Pid 2 first: its init exits with its status and the kernel ends the namespace; the init only if
            # still there (the launcher, killed first, would leave it to the machine's init).
            with self._reaping:
                for targets in (lambda: [self._learner_pid()], lambda: proctree.children(self.proc.pid)):
                    for pid in [] if self._reaped() else filter(None, targets()):
                        proctree.kill(pid)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=5)
                        break
        self._kill_group()  # the launcher's group (basic: the worker's group)
        with self._reaping:
            self.proc.wait()
        if namespace:
            proctree.wait_gone(namespace)
        if self._namespace_fd is not None:  # (from now on its name may be another namespace's)
            os.close(self._namespace_fd)
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        held = self._held_peak()
        # (before its cgroups go: they say whether a kill was for its own limit)
        machine_killed = self.result.status == "crashed" and self.proc.returncode in (-9, 128 + 9) \
            and self._machine_killed()
        for cgroup in self.cgroups:
            cgroups.remove_cgroup(cgroup)
        if self.scratch_full:
            self.result.status = "scratch_full"
        elif machine_killed and held is not None and held >= cgroups.container_limits()[0] // 2:
            # It held half the container's memory itself: its own doing, whoever's limit was reached.
            self.result.status, self.result.peak_bytes = "container_memory", held
        elif machine_killed:
            self.result.status = "machine_killed"
        self.result.seconds = time.monotonic() - self.start
        # The time inside the learner's function is the worker's own word: never more than it lived.
        self.result.code_seconds = min(self.result.code_seconds, self.result.seconds)
        self.result.returncode = self.proc.returncode

    def _watch_memory(self) -> None:
        """Sample what the learner's process holds itself (anonymous and shared memory, and the pages
        of its scratch tmpfs, every 20 ms), from its start: should the kernel's OOM killer end it, this
        says whether it was the one holding the memory (:meth:`_stop`). (The tmpfs's pages, in no
        process's resident memory, are charged to the container: a learner's own, not the machine's.)"""
        from ckptlab.memory import AnonymousPeak

        pid = self._learner_pid()
        if pid is not None and not self.measure_memory:
            tmpfs = self.confinement.namespaces and self.confinement.tmpfs_scratch
            folder = f"/proc/{pid}/root{os.path.realpath(self.scratch)}" if tmpfs else None
            self.held = AnonymousPeak(pid, interval=0.02, folder=folder)

    def _held_peak(self) -> int | None:
        """The most the learner's process held at once, as sampled (None where not sampled)."""
        sampler = self.anonymous or self.held
        if sampler is None:
            return None
        sampler.stop()
        return sampler.peak

    def _machine_killed(self) -> bool:
        """Whether the kernel's OOM killer, not the worker's own limit, ended it: a kill counted on the
        machine since it started, and its own memory cgroup never at its limit. A worker that kills
        itself adds no OOM kill: it stays the learner's."""
        before = self.oom_kills
        return before >= 0 and cgroups.oom_kills() > before and not cgroups.own_limit_reached(self.cgroups)

    def wait(self) -> RunResult:
        # The drive ends by its own deadline (the clock cap, twice the limit): a worker that is slow
        # on a busy machine but within its CPU time is never cut short here.
        self.thread.join(max(0.0, self.start + WALL_FACTOR * self.timeout - time.monotonic()) + JOIN_MARGIN)
        if self.thread.is_alive():  # cannot happen short of a grader bug: the drive has a deadline
            self._kill_group()
            self.thread.join()
        if self.log.closed:  # waited for already (kill() after wait())
            return self.result
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - 4000))
        self.result.stderr_tail = self.log.read().decode("utf-8", "replace")
        self.log.close()
        if not self.keep_scratch:
            folders.remove_folder(self.workdir)
        return self.result

    def preempt(self) -> None:
        """SIGKILL the worker and all it started, now, as a preemption would (any thread); :meth:`wait` collects it."""
        with self._reaping:
            if self._reaped():
                return  # reaped: its pid may be another process's now
            children = proctree.children(self.proc.pid)
            for pid in children:
                proctree.kill(pid)
            # In a pid namespace of its own, killing pid 1 (the launcher's one child) kills every
            # process in it, and the launcher, which waits for it, reaps it and exits. Killed with it,
            # the launcher would leave pid 1 to whichever process adopts orphans here, which reaps it
            # when it gets to it, while the grader waits for the namespace to empty.
            if not (children and self.level == STRICT and self.confinement.namespaces):
                proctree.kill(-self.proc.pid)

    def terminate(self) -> None:  # SIGTERM the learner's process (pid 2, never its init): 8.3's notice, any thread
        with self._reaping:
            if not self._reaped() and (pid := self._learner_pid()) is not None:
                proctree.kill(pid, 15)  # SIGTERM

    def _kill_group(self) -> None:
        """SIGKILL the launcher's process group, only while the launcher is not reaped: until then its
        pid, the group's id, cannot be another process's. Once reaped, the number is free, and pids
        come round again quickly (32,768 of them on many machines, one per thread: a JAX worker
        starts dozens), so a late kill (a preemption timed after the worker ended) could reach
        another learner's worker that has taken it."""
        with self._reaping:
            if not self._reaped():
                proctree.kill(-self.proc.pid)

    def _reaped(self) -> bool:
        """Whether the launcher has been reaped: by this grader (``subprocess.Popen``), or by the zygote
        that forked it, which reaps it the moment it ends and says so (:class:`zygote.Forked`)."""
        reaped = getattr(self.proc, "reaped", None)
        return reaped() if reaped is not None else self.proc.returncode is not None

    def kill(self) -> None:
        self.preempt()
        self.wait()
