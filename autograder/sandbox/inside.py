"""The untrusted side: the one process that runs learner code, inside its jail.

Started by :class:`autograder.sandbox.worker.Worker` as ``python -I -B .../inside.py IN_FD
OUT_FD GRADER_PID``: isolated from the environment, and importing the very copy of the course's packages the
grader uses (the folder holding this package). It reads its confinement (what its jail allows) from ``IN_FD`` and enters the
jail (:mod:`autograder.sandbox.jail`) before anything else is imported, then reads the job (the
learner's module source and the function's name), loads the code, and answers one frame per case
on ``OUT_FD``: the encoded return value, or what went wrong. It never sees expected values, and
nothing it sends is trusted: the grader bounds and checks every frame, and measures what scores
depend on (time, bytes read) from outside this process.
"""

from __future__ import annotations

import os
import sys

SUBMISSION = "<submission>"
_TRUSTED = 2**31 - 1  # what the grader sends is not bounded here
# Loaded before a read-counted problem's code: once its cases run, file memory maps are refused, so
# C extensions a reader may import inside its function must be loaded already.
PRELOAD_FOR_READS = ("array", "binascii", "bisect", "csv", "datetime", "hashlib", "heapq", "io", "json", "math",
                     "mmap", "pickle", "random", "struct", "zlib", "safetensors", "safetensors.numpy")


class _SayHidden:
    """A clear ImportError for learner code that imports the references or the hidden tests. A
    courtesy, not a protection: at the strict level the kernel refuses to read those files."""

    _BLOCKED = ("solutions", "autograder.hidden")

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in self._BLOCKED):
            raise ImportError(f"{name} is not available to submissions")
        return None


class _LateExtension(ImportError):
    def __init__(self, module: str, message: str):
        super().__init__(message)
        self.module = module


class _NoLateExtensions:
    """A clear ImportError for a compiled extension module imported by a read-counted problem's
    code: once reads are counted, file memory maps are refused, and loading one needs them."""

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            raise _LateExtension(name, f"{name} is a compiled extension module, which cannot be loaded while the bytes "
                              "your code reads are counted (memory maps are off); the modules already loaded "
                              f"for you include {', '.join(PRELOAD_FOR_READS)}")
        return None


def _where(tb) -> int | None:
    import traceback

    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == SUBMISSION:
            line = lineno
    return line


def _public_name(cls: type) -> str:
    """An exception's class name, if it is a builtin's or a library's; a class the learner's code
    made could carry any text in its name (even a hidden input), so it is not named."""
    import builtins

    from autograder.wall.libraries import LIBRARIES  # (after the jail: this module imports nothing before it)

    if getattr(builtins, cls.__name__, None) is cls:
        return cls.__name__
    module = sys.modules.get(cls.__module__ or "")
    if (cls.__module__ or "").split(".")[0] in LIBRARIES and module is not None \
            and getattr(module, cls.__name__, None) is cls:
        return cls.__name__
    return "an exception of a class defined in your code"


_EXIT = os._exit  # taken before learner code runs (which could rebind the module's)


def _error(exc: BaseException, kind: str = "exception") -> dict:
    if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)[:500] or "Out of memory" in str(exc)[:500]:
        kind = "memory"
    # The message and class names go to the grader only (to check an expected ValueError); they are
    # never shown in reports, since a message may quote hidden inputs.
    line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == SUBMISSION else _where(exc.__traceback__)
    frame = {"kind": kind, "type": _public_name(type(exc)), "line": line,
             "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:500]}
    if isinstance(exc, _LateExtension):
        frame["extension"] = exc.module
    return frame


def _keep_compiled(folder: str) -> None:
    """JAX's persistent compilation cache in ``folder`` (the worker's kept scratch folder, shared by
    the workers of one series only), every program kept however fast it compiled."""
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def main(in_fd: int, out_fd: int, grader: int) -> int:
    """The worker's life: its jail entered, its libraries and the learner's code loaded, then one
    answer per case (:func:`_answer_cases`)."""
    from autograder.sandbox import jail, wire

    # This process dies with the grader's thread that started it (killed, or Ctrl-C), and so does
    # everything below it: at the strict level pid 1 dies with this process, the namespace with it.
    jail.die_with_parent()
    if os.getppid() != grader:  # the grader died before that was set
        return 1
    from ckptlab.devices import prepare_environment  # standard library only; the grader's own copy

    confinement = jail.Confinement.from_json(wire.recv(in_fd, limit=_TRUSTED)["confinement"])
    jail.enter(confinement, close_in_launcher=(in_fd, out_fd))
    job = wire.recv(in_fd, limit=_TRUSTED)["job"]
    send = _sender(wire, out_fd)  # (after the jail's fork: the process that runs learner code)

    from autograder.wall import codec  # numpy only (after the jail: loading numpy starts threads)

    if not _start_jax(job, send, prepare_environment):
        return 0
    if confinement.count_reads:
        _preload_for_reads()

    # Whatever ends this process before this frame is the grader's failure, never the learner's.
    send({"started": True})
    sys.meta_path.insert(0, _SayHidden())
    # What a JAX array is, taken now, before any learner code: a placement is read only through it.
    codec.pin_jax_types(load=bool(job.get("jax")))
    jail.seal_tasks(confinement)  # a read-counted problem's code runs in this one thread
    if confinement.measure_memory and not _measured_from_here(job, confinement, send, jail, wire, in_fd):
        return 0
    if job.get("compile_cache"):
        _keep_compiled(job["compile_cache"])
    # The kernel's read seal comes before any learner code, its module's top level included: code
    # that runs first could rebind the seal (it is looked up at call time) and never be sealed. So a
    # read-counted module's imports find their compiled extensions loaded already (PRELOAD_FOR_READS),
    # or are told clearly why one cannot load (_NoLateExtensions).
    jail.seal_reads(confinement)
    if confinement.count_reads and confinement.level == jail.STRICT:  # (where the seal refuses maps)
        sys.meta_path.insert(0, _NoLateExtensions())
    namespace = {"__name__": "submission", "__builtins__": __builtins__}
    try:
        code = compile(job["source"], SUBMISSION, "exec")
        exec(code, namespace)  # noqa: S102 - this process exists to run learner code
        fn = namespace[job["function"]]
    except BaseException as exc:  # noqa: BLE001
        send({"setup": _error(exc, "setup")})
        return 0
    send({"loaded": True})
    return _answer_cases(fn, job, confinement, send, wire, codec, in_fd)


def _sender(wire, out_fd: int):
    """``send``: a frame to the grader on ``out_fd``, from this process only (taken in the process
    that runs learner code)."""
    worker = os.getpid()

    def send(message) -> None:
        if os.getpid() != worker:  # a process learner code forked, come back here: it says nothing
            _EXIT(0)
        wire.send(out_fd, message)

    return send


def _grader_failure(exc: BaseException) -> dict:
    """A setup frame for the grader's own code failing before any learner code ran (said as the devices')."""
    return {"setup": {"kind": "devices", "type": type(exc).__name__, "line": None, "detail": str(exc)[:300]}}


def _start_jax(job: dict, send, prepare_environment) -> bool:
    """JAX's devices prepared and, where it is imported, its backend started; False (the grader told)
    where that failed."""
    try:
        # JAX, if the learner's code imports it, starts with the course's devices; if not, no cost.
        # (A worker forked from the zygote has JAX imported, its devices prepared by the zygote.)
        if "jax" not in sys.modules:
            prepare_environment(job.get("num_devices", 16))
        if job.get("jax") and "jax" not in sys.modules:
            import jax  # noqa: F401
        if "jax" in sys.modules:
            # XLA reads its flags as its backend starts, and jaxlib ends a process whose flags it does
            # not know: so the backend starts here (15 ms), before any learner code.
            sys.modules["jax"].devices()
    except BaseException as exc:  # noqa: BLE001 - report, never crash silently
        send(_grader_failure(exc))
        return False
    return True


def _preload_for_reads() -> None:
    """The modules of :data:`PRELOAD_FOR_READS` loaded, then file memory maps refused from here on."""
    import importlib

    for name in PRELOAD_FOR_READS:
        importlib.import_module(name)
    from autograder.wall.reads import switch_off_memory_maps

    switch_off_memory_maps()


def _measured_from_here(job: dict, confinement, send, jail, wire, in_fd: int) -> bool:
    """The grader takes this process's resident set now, before any learner code, as the point its
    peak is measured from; then says go (see worker.Worker._measure_from). False: stop here."""
    from autograder.wall import memory

    try:
        memory.prepare(job.get("preload", ()), confinement.scratch)
    except BaseException as exc:  # noqa: BLE001 - the grader's own code: say so, as for devices
        send(_grader_failure(exc))
        return False
    jail.seal_memory(confinement)
    send({"ready": True})
    return wire.recv(in_fd, limit=_TRUSTED) is not None


def _answer_cases(fn, job: dict, confinement, send, wire, codec, in_fd: int) -> int:
    """Run ``fn`` on each case the grader sends, until it sends none, and answer each: the value
    encoded, or what went wrong (``wire`` and ``codec`` are those taken before learner code ran)."""
    import time

    def answer(message) -> None:
        send(message)
        if job.get("exit_when_done"):
            # The process ends with its work, as a job's does: no thread it left (a save still
            # committing in the background) outlives the answer.
            _EXIT(0)

    while True:
        message = wire.recv(in_fd, limit=_TRUSTED)
        if message is None:
            return 0
        try:
            args = codec.materialize(codec.decode(message["args"]))  # meshes and specs become JAX objects
        except BaseException as exc:  # noqa: BLE001
            send({"error": _error(exc, "setup")})
            continue
        if confinement.measure_memory:
            _forget_compiled()
        start = time.perf_counter()
        try:
            value = fn(*args)
        except NotImplementedError as exc:
            answer({"error": _error(exc, "not_implemented"), "seconds": time.perf_counter() - start})
            continue
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends cost one case only
            answer({"error": _error(exc), "seconds": time.perf_counter() - start})
            continue
        seconds = time.perf_counter() - start
        try:
            encoded = codec.encode(value, digest=bool(job.get("digest_arrays")))
        except BaseException as exc:  # noqa: BLE001 - converting a learner's object runs learner code
            # Only the codec's own words are passed on: any other message could carry hidden inputs.
            detail = str(exc) if type(exc) is codec.EncodeError else codec.NOT_CONVERTIBLE
            answer({"error": {"kind": "bad_return", "type": type(exc).__name__, "line": None, "detail": detail},
                    "seconds": seconds})
            continue
        answer({"value": encoded, "seconds": seconds})
        value = encoded = None  # not held while the next case runs (its memory may be measured)


def _forget_compiled() -> None:
    """Between two cases of a memory-measured worker: JAX keeps every program it compiles (about 2
    MiB each on 16 devices, one per shape and sharding) for the process's life, and a case is charged
    the largest peak so far: the programs of one case, kept, would be charged to the next as its own."""
    import gc

    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            jax.clear_caches()
        except Exception:  # noqa: BLE001 - learner code may have replaced it: its own memory, then
            pass
    gc.collect()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from autograder.sandbox.inside import main as _main  # this file, as a module of that copy

    sys.exit(_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
