"""The grader side of the sandbox: start a worker, enforce the time limit, read its plain data."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from autograder import codec

DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY = 4 * 2**30
DEFAULT_FILE_BYTES = 256 * 2**20
# The worker must not see grading secrets; everything else (PATH, HOME, locale) it may.
_SECRET_ENV = ("CKPT_COURSE_SALT",)


@dataclass
class RunResult:
    status: str  # "ok", "timeout", "crashed"
    setup: dict | None = None
    # per case: {"value": decoded, "read_bytes": int | None} or {"error": {...}}
    cases: list = field(default_factory=list)
    seconds: float = 0.0  # wall time of the worker, start-up included
    code_seconds: float = 0.0  # time spent inside the learner's function
    returncode: int | None = None
    stderr_tail: str = ""  # for instructors' debugging logs only, never shown in reports


def new_workdir() -> str:
    """A fresh directory for one worker; it is removed when the worker is done."""
    return tempfile.mkdtemp(prefix="ckpt-worker-")


class Worker:
    """A started worker process; :meth:`wait` enforces the time limit and reads the results."""

    def __init__(self, source: str, function: str, cases: list[tuple], *, timeout: float = DEFAULT_TIMEOUT,
                 memory_bytes: int = DEFAULT_MEMORY, file_bytes: int = DEFAULT_FILE_BYTES, workdir: str | None = None,
                 count_reads: bool = False):
        self.timeout = timeout
        self.workdir = workdir or new_workdir()
        job_path = os.path.join(self.workdir, ".job.json")
        self.result_path = os.path.join(self.workdir, ".result.json")
        with open(job_path, "w") as f:
            json.dump({"source": source, "function": function, "cases": [codec.encode(tuple(c)) for c in cases],
                       "memory_bytes": memory_bytes, "file_bytes": file_bytes, "count_reads": count_reads},
                      f, allow_nan=False)
        env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}
        env.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
        self.log = open(os.path.join(self.workdir, ".log"), "w+b")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autograder.worker", job_path, self.result_path],
            cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True,
        )

    def wait(self) -> RunResult:
        remaining = max(0.0, self.timeout - (time.monotonic() - self.start))
        try:
            self.proc.wait(timeout=remaining)
            status = "ok"
        except subprocess.TimeoutExpired:
            status = "timeout"
        finally:
            _kill_group(self.proc)
        seconds = time.monotonic() - self.start
        self.log.seek(0)
        tail = self.log.read()[-4000:].decode("utf-8", "replace")
        self.log.close()
        result = RunResult(status, seconds=seconds, returncode=self.proc.returncode, stderr_tail=tail)
        try:
            if status == "ok":
                with open(self.result_path) as f:
                    raw = json.load(f)
                result.setup = raw.get("setup")
                result.code_seconds = float(raw.get("code_seconds", 0.0))
                for case in raw.get("cases", []):
                    if "value" in case:
                        result.cases.append({"value": codec.decode(case["value"]), "read_bytes": case.get("read_bytes")})
                    else:
                        result.cases.append({"error": case.get("error") or {"kind": "exception"}})
        except (OSError, ValueError, TypeError, KeyError):
            result.status = "crashed"
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return result

    def kill(self) -> None:
        _kill_group(self.proc)
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the learner's code may have started children
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
