"""The sandbox side: run one problem's learner function on a list of inputs, return plain data.

Started by :class:`autograder.sandbox.Worker` as ``python -m autograder.worker JOB RESULT`` in a
fresh temporary directory, with memory, file-size and core-dump limits set before anything else
is imported. It never sees expected values; it writes JSON results and nothing else.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import resource
import sys
import traceback

SUBMISSION = "<submission>"
_BLOCKED = ("solutions", "autograder.hidden")


def limit(memory_bytes: int, file_bytes: int) -> None:
    """The worker's limits: address space and file size (0 leaves one unlimited), and no core dumps."""
    for kind, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_FSIZE, file_bytes)):
        if value:
            resource.setrlimit(kind, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _BlockHidden(importlib.abc.MetaPathFinder):
    """Learner code may not import the reference solutions or the hidden tests."""

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in _BLOCKED):
            raise ImportError(f"{name} is not available to submissions")
        return None


def _where(tb) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == SUBMISSION:
            line = lineno
    return line


_LIBRARIES = ("jax", "jaxlib", "flax", "orbax", "numpy", "tensorstore", "ml_dtypes", "safetensors")


def _public_name(cls: type) -> str:
    """An exception's class name, if it is a builtin's or a library's; a class the learner's code
    made could carry any text in its name (even a hidden input), so it is not named."""
    import builtins

    if getattr(builtins, cls.__name__, None) is cls:
        return cls.__name__
    module = sys.modules.get(cls.__module__ or "")
    if (cls.__module__ or "").split(".")[0] in _LIBRARIES and module is not None \
            and getattr(module, cls.__name__, None) is cls:
        return cls.__name__
    return "an exception of a class defined in your code"


def _error(exc: BaseException, kind: str = "exception") -> dict:
    if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)[:500] or "Out of memory" in str(exc)[:500]:
        kind = "memory"
    # The message and class names go to the grader only (to check an expected ValueError); they are
    # never shown in reports, since a message may quote hidden inputs.
    line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == SUBMISSION else _where(exc.__traceback__)
    return {"kind": kind, "type": _public_name(type(exc)), "line": line,
            "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:500]}


def main(job_path: str, result_path: str) -> int:
    with open(job_path) as f:
        job = json.load(f)
    os.unlink(job_path)  # the learner's code has no business reading the job file
    limit(job.get("memory_bytes", 0), job.get("file_bytes", 0))
    sys.meta_path.insert(0, _BlockHidden())
    for name in list(sys.modules):
        if any(name == b or name.startswith(b + ".") for b in _BLOCKED):
            del sys.modules[name]

    from autograder import codec  # numpy only
    from ckptlab.devices import prepare_environment

    results: dict = {"setup": None, "cases": []}

    def write() -> None:
        tmp = result_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, allow_nan=False)
        os.replace(tmp, result_path)

    try:
        # JAX, if the learner's code imports it, starts with the course's devices; if not, no cost.
        prepare_environment(job.get("num_devices", 16))
    except BaseException as exc:  # noqa: BLE001 - report, never crash silently
        results["setup"] = {"kind": "devices", "type": type(exc).__name__, "line": None, "detail": str(exc)}
        write()
        return 0

    count_reads = bool(job.get("count_reads"))
    if count_reads:
        # Every byte must come through a counted read; modules a reader typically uses are loaded
        # now, so that loading them is not counted as reading.
        import math  # noqa: F401
        import struct  # noqa: F401

        from autograder.reads import switch_off_memory_maps
        from ckptlab.readcount import count_reads as _counter

        switch_off_memory_maps()

    namespace = {"__name__": "submission", "__builtins__": __builtins__}
    try:
        code = compile(job["source"], SUBMISSION, "exec")
        exec(code, namespace)  # noqa: S102 - this process exists to run learner code
        fn = namespace[job["function"]]
    except BaseException as exc:  # noqa: BLE001
        results["setup"] = _error(exc, "setup")
        write()
        return 0

    import time

    for encoded_args in job["cases"]:
        try:
            args = codec.materialize(codec.decode(encoded_args))  # meshes and specs become JAX objects
        except BaseException as exc:  # noqa: BLE001
            results["cases"].append({"error": _error(exc, "setup")})
            continue
        start = time.perf_counter()
        read_bytes = None
        try:
            if count_reads:
                with _counter(whole_process=True) as reads:  # reads from the learner's threads count too
                    value = fn(*args)
                read_bytes = reads.bytes
            else:
                value = fn(*args)
            results.setdefault("code_seconds", 0.0)
            results["code_seconds"] += time.perf_counter() - start
        except NotImplementedError as exc:
            results["cases"].append({"error": _error(exc, "not_implemented")})
            continue
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends cost one case only
            results["cases"].append({"error": _error(exc)})
            continue
        try:
            results["cases"].append({"value": codec.encode(value), "read_bytes": read_bytes})
        except BaseException as exc:  # noqa: BLE001 - converting a learner's object runs learner code
            # Only the codec's own words are passed on: any other message could carry hidden inputs.
            detail = str(exc) if type(exc) is codec.EncodeError else "it could not be converted to plain data"
            results["cases"].append({"error": {"kind": "bad_return", "type": type(exc).__name__, "line": None,
                                               "detail": detail}})
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
