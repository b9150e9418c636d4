"""The trusted side's heavy work in short-lived processes of its own, not in the process that holds a
class: one process per problem's references (the cases' files written, the expected outcomes
computed), which ends when they are done, and gives back all it used.

Why: a reference builds models, writes and restores checkpoints and compiles programs. Done in the
grading process, what that leaves (XLA's runtime for 16 devices, compiled programs, a heap that
never shrinks back) stayed for the whole class: ``grade-batch -j 2`` of 8 whole submissions held
1.08 GB resident with nine units. Each process here is forked from a server of the grader's that has
imported the libraries once (JAX, Flax, Orbax: a third of a second to start one, against three
to import them), so the grading process itself never starts JAX for a problem whose references run
here.

The server is this module run as a program (``python -m autograder.engine.trusted_side``), started
by the grader on first use and ended with it. It talks to the grader over an anonymous socket pair
only: each request comes with the write end of a pipe of the grader's, which the forked process
writes its results to and closes (so a process that dies mid-way is an end of file, never a hang).
Nothing is listening at an address a learner's worker could reach.

Learner code never runs here: these processes run the course's own references and the hidden tests'
case writers, and return plain data (paths, numbers, arrays). A process that dies or fails is the
grader's failure on that problem only (the judge says so), never the learner's.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading

# What the server imports once, for every process it forks (then every unit's hidden tests and references).
PRELOAD = ("numpy", "jax", "jax.numpy", "flax.linen", "flax.nnx", "orbax.checkpoint", "tensorstore", "optax",
           "safetensors", "grain", "ckptlab.layout", "ckptlab.models", "ckptlab.hf", "ckptlab.llama",
           "autograder.engine.cases", "autograder.wall.files")
_HEADER = struct.Struct("!Q")
_SERVER: dict = {}
_LOCK = threading.Lock()


class ReferenceProcessFailed(RuntimeError):
    """The references' process ended without a result (killed, or it could not start)."""


def _write(stream, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream):
    """The next message, or None at the end of the stream (a writer that ended, or died, mid-way too)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    size = _HEADER.unpack(header)[0]
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


def _server() -> socket.socket:
    """The grader's end of its server's socket pair, the server started on first use."""
    with _LOCK:
        proc = _SERVER.get("proc")
        if proc is not None and proc.poll() is None:
            return _SERVER["socket"]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        env.setdefault("JAX_PLATFORMS", "cpu")  # (read when the server imports JAX: the course's CPU devices)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the grader's own modules, wherever they are
        try:
            proc = subprocess.Popen([sys.executable, "-m", "autograder.engine.trusted_side", str(theirs.fileno())],
                                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    env=env)
        except OSError as exc:
            ours.close()
            raise ReferenceProcessFailed(f"the references' server could not start: {exc}") from exc
        finally:
            theirs.close()
        if not _SERVER:
            atexit.register(_stop)
        _SERVER.update(proc=proc, socket=ours)
        return ours


def _stop() -> None:
    """The server ended (its end of the pair closed: it exits at the end of its requests)."""
    with _LOCK:
        sock, proc = _SERVER.pop("socket", None), _SERVER.pop("proc", None)
    if sock is not None:
        sock.close()
    if proc is not None:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parts(target: str, *args):
    """Each value the generator ``target(*args)`` (``"module:function"``) yields, run in a process the
    server forks, as it comes; the exception it raised (the same type, where it pickles) raised here."""
    read_end, write_end = os.pipe()
    try:
        request = pickle.dumps((dict(os.environ), os.getcwd(), target, args), protocol=pickle.HIGHEST_PROTOCOL)
        sock = _server()
        with _LOCK:
            try:
                socket.send_fds(sock, [_HEADER.pack(len(request))], [write_end])
                sock.sendall(request)
            except OSError as exc:
                raise ReferenceProcessFailed(f"the references' server is gone ({exc})") from exc
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)  # the forked process holds the only other one: its end is our end of file
    with os.fdopen(read_end, "rb") as stream:
        while True:
            message = _read(stream)
            if message is None:
                raise ReferenceProcessFailed("the references' process ended without a result (killed, or it "
                                             "could not start: its messages are on the grader's standard error)")
            if message[0] == "done":
                return
            if message[0] == "part":
                yield message[1]
                continue
            exc = message[1]
            if message[2]:
                exc.add_note("in the references' process:\n" + message[2])
            raise exc


def references(problem_id: str, raw_args: list, folder: str):
    """The cases' arguments with their files written under ``folder``; then each case's expected
    outcome. Run in a process of the server's by the grader (:func:`parts`)."""
    from autograder import registry
    from autograder.engine.cases import expected_outcome
    from autograder.wall import files
    from ckptlab import setup_devices

    setup_devices()
    problem = registry.get(problem_id)
    args = files.realize(raw_args, folder)
    yield args
    yield [expected_outcome(problem, a) for a in args]


# --- the server ------------------------------------------------------------------------------------

def _run_one(environ: dict, cwd: str, target: str, args: tuple, out) -> None:
    """In a forked process: the grader's environment and folder as they are now, then each value
    ``target(*args)`` yields, written to ``out`` as it comes."""
    import traceback

    def send(message) -> bool:
        try:
            _write(out, message)
            return True
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # a value that does not pickle: its words
            _write(out, ("error", ReferenceProcessFailed(f"{type(exc).__name__} sending a result: {exc}"), ""))
            return False

    try:
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        module, name = target.split(":")
        for value in getattr(importlib.import_module(module), name)(*args):
            if not send(("part", value)):
                return
        send(("done",))
    except BaseException as exc:  # noqa: BLE001 - sent to the grader, which fails this problem with it
        send(("error", exc, traceback.format_exc()))


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(fd: int) -> None:
    """The server: the libraries imported once, then a forked process per request, until the grader's
    end of the pair closes."""
    import signal

    from autograder import registry

    for module in PRELOAD:
        importlib.import_module(module)
    for unit in registry.units():
        for module in (f"autograder.hidden.unit{unit}", f"solutions.unit{unit}"):
            importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked processes are reaped as they end
    sock = socket.socket(fileno=fd)
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 1)
        except OSError:
            return
        if len(header) < _HEADER.size or not fds:
            return  # the grader is gone
        request = _recv_exactly(sock, _HEADER.unpack(header)[0])
        if request is None:
            return
        if os.fork() == 0:
            code = 0
            try:
                sock.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its own children (a job's processes) are waited for
                with os.fdopen(fds[0], "wb") as out:
                    _run_one(*pickle.loads(request), out)
            except BaseException:  # noqa: BLE001 - the grader sees an end of file, and fails the problem
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])


if __name__ == "__main__":
    # (by its own name, not __main__'s: the exceptions it sends must unpickle in the grader)
    importlib.import_module("autograder.engine.trusted_side").serve(int(sys.argv[1]))
