"""Workers that do not pay start-up: a trusted template process they are forked from.

Starting Python and importing JAX, Flax and Orbax costs a worker about a second, every problem.
The zygote pays it once: it imports the libraries workers need, one module at a time, and forks
a worker on the grader's request once that worker's libraries are imported (the grader reads, never
runs, the import statements of its code: :func:`needs`). The fork (single-threaded, whatever the
zygote had) runs
:func:`autograder.sandbox.inside.main` exactly as a freshly started worker would: it enters its
own jail (:func:`autograder.sandbox.jail.enter`: namespaces, Landlock, seccomp, limits) before it
reads any learner code.

What keeps this as safe as a fresh start:

- The zygote is trusted code only. It never runs learner code, and never imports the reference
  solutions or the hidden tests: its memory, which every worker inherits, holds public libraries,
  from a fixed list (:data:`PRELOAD`, :data:`ON_DEMAND`); a name learner code imports counts only
  if it is on that list.
  Its environment is the workers' own (nothing of the grader's).
- A worker gets its pipes and log file from the grader through this zygote (``SCM_RIGHTS``), and
  closes the zygote's socket before doing anything else.
- Jailed workers cannot reach the zygote: Landlock keeps them out of its ``/proc`` entry and
  scopes their signals, seccomp refuses ptrace. So only the strict level forks workers from it;
  at the basic level, whose workers can reach whatever the grader can, each starts afresh. A
  zygote that dies is replaced, and the worker it was starting is started fresh.
- The zygote dies with the grader, and its workers die with it (parent-death signals).

Grader side: :func:`spawn`. Process side: :func:`serve`, run as ``python -I -B zygote.py FD PID``.
Set ``CKPT_ZYGOTE=0`` to start every worker fresh (slower; for comparison).
"""

from __future__ import annotations

import array
import atexit
import gc
import json
import os
import select
import socket
import subprocess
import sys
import threading

if __name__ == "__main__":  # run as the zygote: this copy of the course, whatever else is installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from autograder.sandbox import inside  # noqa: E402
from autograder.source import imported  # noqa: E402
from autograder.wall import libraries  # noqa: E402

# Imported here, one module at a time, for the workers forked after. Never the references or the
# hidden tests. First what every worker uses; a worker is forked once these are imported (a bare
# one, the grader's check of the level, at once).
PRELOAD = ("numpy", "jax", "jax.numpy", "jax.sharding", "ml_dtypes", "ckptlab.layout", "autograder.wall.codec",
           "autograder.wall.reads")
# Then, and only then, these: before a worker is forked, those its code imports (:func:`needs`);
# and while no worker waits and a core is free, those the grader said the problems it grades
# import (:meth:`_Zygote.want`). So a learner's Unit 1 does not wait for Flax's NNX, nor share the cores
# with Orbax being imported (half a second), unless its code imports them.
ON_DEMAND = tuple(dict.fromkeys((*libraries.ON_DEMAND, *inside.PRELOAD_FOR_READS)))
_MAX_RECORD = 1 << 16


def needs(source: str, count_reads: bool = False) -> list[str]:
    """The modules of :data:`ON_DEMAND` a worker running ``source`` will import: its import
    statements, read (never run) on the grader's side. A read-counted worker loads the modules
    :data:`~autograder.sandbox.inside.PRELOAD_FOR_READS` before its code."""
    found = set(inside.PRELOAD_FOR_READS) if count_reads else set()
    for name in imported(source):
        if name == "flax":
            name = "flax.linen"  # Flax's package imports Linen
        found.update(m for m in ON_DEMAND if name == m or name.startswith(m + "."))
    return [m for m in ON_DEMAND if m in found]


_NO_JAX = ("tensorstore", "safetensors", "safetensors.numpy")  # (of ON_DEMAND: the libraries that do not import JAX)


def imports_jax(source: str) -> bool:
    """Whether ``source`` imports JAX, the course's ``ckptlab`` (whose functions do), or a library of :data:`ON_DEMAND` that does (its import
    statements, read, never run): a worker running it may return JAX arrays, so it takes JAX's
    types before that code loads."""
    return any(name.split(".")[0] in ("jax", "jaxlib", "ckptlab") for name in imported(source)) or \
        any(m in libraries.ON_DEMAND and m not in _NO_JAX for m in needs(source))


# ---------------------------------------------------------------------------------------------
# The zygote process

def _single_threaded() -> bool:
    return len(os.listdir("/proc/self/task")) == 1


def serve(sock_fd: int, grader: int) -> int:
    """The zygote's life: ready at once, then each request's worker forked once its libraries are
    imported here, and the libraries the grader wants imported while idle."""
    from autograder.sandbox import jail

    jail.die_with_parent()
    if os.getppid() != grader:
        return 1
    sock = socket.socket(fileno=sock_fd)
    from ckptlab.devices import prepare_environment

    prepare_environment(16)  # before JAX is imported: every worker's JAX starts with 16 devices
    import importlib

    loaded: set[str] = set()  # tried: a library that does not load here loads in the worker, or fails there

    def load(name: str) -> None:
        loaded.add(name)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass

    if not _single_threaded():
        sock.send(json.dumps({"ready": False, "why": "the zygote started with threads"}).encode())
        return 1
    # Ready at once: a worker that needs no library (the grader's first, which checks the level of
    # isolation) is forked while JAX is imported here.
    sock.send(json.dumps({"ready": True}).encode())
    me = os.getpid()
    forkable = True  # single-threaded: after an import that started a thread, workers start afresh
    wanted: list[str] = list(PRELOAD)
    pending: list[tuple[dict, array.array]] = []  # fork requests, oldest first, with their descriptors
    # Each worker's pidfd (None where the kernel has none): readable the moment the worker ends, so
    # it is reaped and the grader told at once, not at the next 50 ms tick (half a tick, on
    # average, for every problem).
    children: dict[int, int | None] = {}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    while True:
        work = bool(pending) or (len(children) < cores and any(name not in loaded for name in wanted))
        readable, _, _ = select.select([sock, *(fd for fd in children.values() if fd is not None)], [], [],
                                       0 if work else 0.05)
        _reap(sock, children)
        if sock in readable:
            if not _receive(sock, wanted, pending):
                return 0  # the grader is gone
            continue  # every message first: a request that needs nothing more is served at once
        # The oldest request whose worker's libraries are here is forked; else the oldest request's
        # next library is imported; else, idle, the next library the grader said it will want.
        ready = next((i for i, (request, _) in enumerate(pending) if not _missing(request, loaded)), None)
        if ready is not None:
            request, fds = pending.pop(ready)
            _serve_request(request, fds, sock, me, forkable, children)
            continue
        # (Idle: only with a core no worker uses; an import beside busy workers slows them down.)
        missing = _missing(pending[0][0], loaded) if pending else \
            [n for n in wanted if n not in loaded] if len(children) < cores else []
        if missing and forkable:
            load(missing[0])
            forkable = _single_threaded()  # else workers start afresh from now on
        elif missing:
            loaded.update(missing)  # no fork will come of it: the request is answered "start afresh"


def _reap(sock: socket.socket, children: dict[int, int | None]) -> None:
    """Reap every worker that has ended, and tell the grader of each (its pidfd closed)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        pidfd = children.pop(pid, None)
        if pidfd is not None:
            os.close(pidfd)
        sock.send(json.dumps({"exited": pid, "status": os.waitstatus_to_exitcode(status)}).encode())


def _receive(sock: socket.socket, wanted: list[str], pending: list[tuple[dict, array.array]]) -> bool:
    """Take the grader's next message: libraries it will want (added to ``wanted``), or a fork request
    with its descriptors (added to ``pending``). False where the grader is gone."""
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(_MAX_RECORD, socket.CMSG_SPACE(3 * fds.itemsize))
    if not data:
        return False
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    request = json.loads(data)
    if "want" in request:
        wanted.extend([name for name in request["want"] if name in ON_DEMAND and name not in wanted])
        for fd in fds:
            os.close(fd)
    else:
        pending.append((request, fds))
    return True


def _serve_request(request: dict, fds: array.array, sock: socket.socket, me: int, forkable: bool,
                   children: dict[int, int | None]) -> None:
    """Fork ``request``'s worker (where the zygote can: else it starts afresh) and tell the grader its
    pid; the zygote's copies of its descriptors closed either way."""
    try:
        pid = _fork(request, fds, sock, me) if len(fds) == 3 and forkable else None
    except OSError:  # no process to be had: this worker starts afresh, or fails to
        pid = None
    for fd in fds:
        os.close(fd)
    if pid:
        try:
            children[pid] = os.pidfd_open(pid)
        except (AttributeError, OSError):  # Linux before 5.3: reaped at the next tick
            children[pid] = None
    sock.send(json.dumps({"id": request.get("id"), "pid": pid}).encode())


def _missing(request: dict, loaded: set[str]) -> list[str]:
    """What the zygote must import before forking the worker of ``request``: the libraries every
    worker uses, and those its code imports; nothing for a bare worker (the grader's probe)."""
    needs = () if request.get("bare") else (*PRELOAD, *(n for n in request.get("needs", ()) if n in ON_DEMAND))
    return [name for name in needs if name not in loaded]


def _fork(request: dict, fds: array.array, sock: socket.socket, me: int) -> int:
    """Fork a worker running :func:`autograder.sandbox.inside.main` on ``fds``; its pid."""
    to_r, from_w, log = fds
    # The libraries' objects go to the collector's permanent generation: a worker's collections
    # then skip them, and do not copy the pages they share with the zygote (bench/bench_grading.py
    # shows the time inside learner functions).
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            sock.close()
            os.setsid()
            os.dup2(log, 1)
            os.dup2(log, 2)
            keep = {0, 1, 2, to_r, from_w}
            for fd in [int(n) for n in os.listdir("/proc/self/fd")]:
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.environ["XLA_FLAGS"] = (request["env"].get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=16").strip()
            import tempfile

            tempfile.tempdir = None  # found again from this worker's TMPDIR
            sys.argv = [inside.__file__, str(to_r), str(from_w), str(me)]  # as a worker started afresh
            code = inside.main(to_r, from_w, me)
        finally:
            os._exit(code)
    return pid


# ---------------------------------------------------------------------------------------------
# The grader's side

class Forked:
    """A worker forked by the zygote, with the parts of ``subprocess.Popen`` the grader uses."""

    def __init__(self, zygote: _Zygote, pid: int):
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def reaped(self) -> bool:
        """Whether the zygote has reaped it (it says so at once): from then on its pid may be another
        process's, and nothing may be signalled by that number."""
        with self.zygote.changed:
            return self.returncode is not None or self.pid in self.zygote.exited or self.zygote.dead

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        with self.zygote.changed:
            if not self.zygote.changed.wait_for(lambda: self.pid in self.zygote.exited or self.zygote.dead, timeout):
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            # A zygote that died took its workers with it (parent-death signal): killed.
            self.returncode = self.zygote.exited.pop(self.pid, -9)
        return self.returncode


class _Zygote:
    def __init__(self, env: dict):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.changed = threading.Condition()
        self.exited: dict[int, int] = {}
        self.replies: dict[int, int | None] = {}
        self.dead, self.ready, self.next_id = False, None, 0
        self.send_lock = threading.Lock()
        started = threading.Event()

        def anchor():
            # The zygote's parent-death signal follows the thread that started it: this one, which
            # lives as long as the zygote does.
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", __file__, str(theirs.fileno()), str(os.getpid())],
                    pass_fds=(theirs.fileno(),), env=env, cwd="/", stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            except OSError:
                self.proc = None
            finally:
                theirs.close()
                started.set()
            if self.proc is not None:
                self.proc.wait()

        self.anchor = threading.Thread(target=anchor, daemon=True, name="ckpt-zygote-anchor")
        self.anchor.start()
        started.wait()
        atexit.register(self.stop)
        threading.Thread(target=self._read, daemon=True, name="ckpt-zygote-reader").start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MAX_RECORD)
            except OSError:
                data = b""
            with self.changed:
                if not data:
                    self.dead = True
                    self.changed.notify_all()
                    return
                message = json.loads(data)
                if "ready" in message:
                    self.ready = bool(message["ready"])
                elif "exited" in message:
                    self.exited[int(message["exited"])] = int(message["status"])
                elif "id" in message:
                    self.replies[int(message["id"])] = message.get("pid")
                self.changed.notify_all()

    def stop(self) -> None:
        """End the zygote and reap it (at the grader's exit): its parent-death signal alone would
        end it a moment after the grader, when a list of processes could still show it."""
        if self.proc is not None:
            try:
                self.proc.kill()
            except OSError:
                pass
            self.anchor.join(5)

    def wait_ready(self, timeout: float) -> bool:
        with self.changed:
            self.changed.wait_for(lambda: self.ready is not None or self.dead, timeout)
            return bool(self.ready) and not self.dead

    def want(self, names) -> None:
        """Say which of :data:`ON_DEMAND` the coming workers will need: imported while none waits."""
        with self.send_lock:
            try:
                self.sock.send(json.dumps({"want": list(names)}).encode())
            except OSError:
                pass

    def spawn(self, fds: tuple[int, int, int], cwd: str, env: dict, needs=(), timeout: float = 10.0) -> Forked | None:
        request = {"cwd": cwd, "env": env, "needs": list(needs or ()), "bare": needs is None}
        with self.send_lock:
            self.next_id += 1
            ident = self.next_id
            try:
                self.sock.sendmsg([json.dumps({"id": ident, **request}).encode()],
                                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            except OSError:
                return None
        with self.changed:
            if not self.changed.wait_for(lambda: ident in self.replies or self.dead, timeout):
                return None
            pid = self.replies.pop(ident, None)
        return Forked(self, pid) if pid else None


_lock = threading.Lock()
_current: _Zygote | None = None
_failed = False


def enabled() -> bool:
    return sys.platform == "linux" and os.environ.get("CKPT_ZYGOTE", "1") != "0"


def start(env: dict, wants=()) -> None:
    """Start the zygote now (it takes a second to import its libraries), if none is running; tell
    it the libraries of :data:`ON_DEMAND` the coming workers will need (:func:`needs`)."""
    if enabled():
        threading.Thread(target=_get, args=(env, tuple(wants)), daemon=True).start()


def _get(env: dict, wants=()) -> _Zygote | None:
    global _current, _failed
    with _lock:
        if _failed:
            return None
        if _current is None or _current.dead:
            _current = _Zygote(env)
            _current.want(wants)  # queued: read when the zygote starts serving
            if not _current.wait_ready(120):
                _failed = True  # this machine cannot: every worker starts fresh
                _current = None
        elif wants:
            _current.want(wants)
        return _current


def spawn(fds: tuple[int, int, int], cwd: str, env: dict, base_env: dict, needs=()) -> Forked | None:
    """Fork a worker running :func:`autograder.sandbox.inside.main` on ``fds`` (its input pipe,
    its output pipe, its log), in ``cwd`` with ``env``, once the zygote has imported :data:`PRELOAD`
    and ``needs`` (None: at once, bare); None where no zygote can (start afresh)."""
    if not enabled():
        return None
    zygote = _get(base_env)
    return zygote.spawn(fds, cwd, env, needs) if zygote is not None else None


if __name__ == "__main__":
    from autograder.sandbox.zygote import serve as _serve  # this file, as a module of that copy

    sys.exit(_serve(int(sys.argv[1]), int(sys.argv[2])))
