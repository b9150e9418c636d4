"""How the course measures the host memory a piece of work takes: the tools, with nothing of a
lesson's in them (Lesson 6's :mod:`ckptlab.serving`, Lesson 9's :mod:`ckptlab.hfconvert`, the
re-shard's, the planner's and topology's measured runs, and the grader's workers for problems 6.1
and 6.2 all use these same ones).

    from ckptlab.memory import prepare_measurement, reset_peak, status_bytes, AnonymousPeak
    prepare_measurement(scratch); reset_peak(); before = status_bytes("VmRSS")
    ...                                          # the work
    status_bytes("VmHWM") - before               # its peak resident set, above where it began
    AnonymousPeak(pid).stop()                    # another process's anonymous memory's peak, sampled
    run_measured(code, job, prefix=..., timeout=...)  # a fresh process's output and that peak: it says
                                                 # "ready", is sampled from then on, and is sent "go"

:func:`prepare_measurement` makes a peak about the work alone: freed blocks given back to the
kernel (:func:`give_back_freed_memory`), and what a first Orbax save and restore allocate once
allocated already. :func:`measured_tempdir` is a folder on disk for the files a measured process
reads (a tmpfs's pages are charged to whoever maps them). Linux only.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def give_back_freed_memory(threshold: int = 256 * 1024) -> None:
    """Have the C library map blocks over ``threshold`` bytes and unmap them when freed, and trim its
    heap above 1 MiB: a process's resident set then falls when big arrays are freed (by default
    the threshold grows with the blocks freed, and a freed block stays resident). Linux (glibc)."""
    if sys.platform == "linux":
        try:
            libc = ctypes.CDLL(None)
            libc.mallopt(_M_MMAP_THRESHOLD, threshold)
            libc.mallopt(_M_TRIM_THRESHOLD, 1024 * 1024)
        except (OSError, AttributeError):
            pass


def trim_free_pages() -> None:
    """Give the kernel every whole free page of the C library's heaps now, the middle of a heap too
    (glibc's ``malloc_trim(0)``; its trim threshold only gives back a heap's top). Linux (glibc)."""
    if sys.platform == "linux":
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass


# Where a peak is measured, every block of 16 KiB or more is mapped on its own: an array split over
# 16 devices is 16 blocks of a sixteenth of it each, and blocks below the threshold, freed, stay in
# the heap's free lists, resident, fragmented, and counted again as the next array's.
MEASURED_MMAP_THRESHOLD = 16 * 1024


def prepare_measurement(scratch: str) -> None:
    """Make a peak measured from now on about the work alone: freed blocks are given back to the
    kernel (:func:`give_back_freed_memory`), and what a process's first Orbax restore and save
    allocate once (thread pools, TensorStore's context, XLA's compiler) is allocated already."""
    give_back_freed_memory(MEASURED_MMAP_THRESHOLD)
    if "jax" in sys.modules:
        _warm_jit()
    if "orbax.checkpoint" in sys.modules:
        _warm_orbax(os.path.join(scratch, "ckpt-warm-up"))  # (v1 refuses to load a folder named .*)


def _warm_jit() -> None:
    """What a process's first compiled programs allocate once (JAX's tracing and lowering machinery,
    XLA's compiler and its CPU client's pools: about 16 MiB, however many programs follow), paid here
    by a few tiny ones of the kinds a conversion runs: a stack, a transpose and cast, a sharded one."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    devices = jax.devices()
    mesh = jax.make_mesh((len(devices),), ("x",), devices=devices)
    parts = [np.ones((2, len(devices)), np.float32) for _ in range(3)]
    stacked = jax.jit(lambda *a: jnp.stack(a))(*parts)
    placed = jax.device_put(stacked, NamedSharding(mesh, PartitionSpec(None, None, "x")))
    jax.jit(lambda a: a.swapaxes(-1, -2).astype(jnp.bfloat16))(placed).block_until_ready()
    jnp.concatenate([stacked[0], stacked[1]], axis=-1).block_until_ready()


def _warm_orbax(path: str) -> None:
    import shutil

    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    devices = jax.devices()
    mesh = jax.make_mesh((len(devices),), ("x",), devices=devices)
    small = jax.device_put(np.ones((len(devices), 8), np.float32), NamedSharding(mesh, PartitionSpec("x")))
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, {"w": small})
    checkpointer.wait_until_finished()
    checkpointer.restore(path, {"w": jax.ShapeDtypeStruct(small.shape, jax.numpy.bfloat16, sharding=small.sharding)})
    checkpointer.close()
    shutil.rmtree(path, ignore_errors=True)
    # Orbax's v1 API, imported with orbax.checkpoint (``orbax.checkpoint.v1`` is an attribute, not a
    # module of that name: ``orbax.checkpoint.experimental.v1``), allocates on its first save and load too.
    from orbax.checkpoint import v1 as ocp_v1

    ocp_v1.partial.save(path, {"w": small})
    # A replicated array: Orbax saves it by slicing each replica's part with a compiled program, and
    # a process's first compilation starts XLA's compiler (tens of MiB, once).
    ocp_v1.partial.save(path, {"b": jax.device_put(np.ones((len(devices), 8), np.float32), NamedSharding(mesh, PartitionSpec()))})
    ocp_v1.partial.finalize(path)
    ocp_v1.load(path)
    shutil.rmtree(path, ignore_errors=True)


def status_bytes(key: str, pid: int | str = "self") -> int | None:
    """``VmRSS``, ``VmHWM``... of ``/proc/<pid>/status``, in bytes (None where there is none)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


_TMPFS_MAGIC = 0x01021994


def on_tmpfs(path: str) -> bool:
    """Whether ``path`` lies on a tmpfs: its files' pages are shared memory, and a process that maps
    them is charged them as its own (``RssShmem``). Linux."""
    class _StatFs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_long * 15)]

    if sys.platform != "linux":
        return False
    try:
        buf = _StatFs()
        return ctypes.CDLL(None, use_errno=True).statfs(os.fsencode(path), ctypes.byref(buf)) == 0 and \
            buf.f_type == _TMPFS_MAGIC
    except (OSError, AttributeError):
        return False


def measured_tempdir(prefix: str) -> str:
    """A fresh temporary folder for files a memory-measured process reads, on disk where the machine
    has one: where the temporary folder is a tmpfs (Debian 13's /tmp), ``/var/tmp`` or the user's
    cache folder; else (none on disk) the temporary folder, and a reader that maps its files is
    charged their pages. The grader's workers and Lesson 6 both put their inputs here."""
    import tempfile

    where = None
    if on_tmpfs(tempfile.gettempdir()):
        cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ckpt-course")
        for folder in ("/var/tmp", cache):
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError:
                continue
            if os.access(folder, os.W_OK) and not on_tmpfs(folder):
                where = folder
                break
    return tempfile.mkdtemp(prefix=prefix, dir=where)


class AnonymousPeak:
    """The peak of another process's anonymous memory (``RssAnon`` + ``RssShmem`` of
    ``/proc/<pid>/status``: what it allocated, not the file pages it maps), sampled from outside
    every ``interval`` seconds on a thread of the caller's, above what it held when sampling began.

    The kernel keeps a peak of the whole resident set (``VmHWM``), file pages included: a reader
    that maps a file (``safetensors.safe_open``, ``np.memmap``) is charged every page it touches,
    though those pages are the page cache's, shared and dropped by the kernel when it needs them. It
    keeps no peak of the anonymous part alone, so this samples it: a bound from below, within
    ``interval`` of the truth for memory held that long (a whole file held while it is converted is
    held for far longer)."""

    def __init__(self, pid: int, interval: float = 0.001, folder: str | None = None):
        import threading

        # ``folder``: a tmpfs of the process's own (seen through /proc/<pid>/root): its pages are memory
        # the process filled, in no process's RssAnon or RssShmem, so each sample adds what it holds.
        self.pid, self.interval, self.folder = pid, interval, folder
        self._lock = threading.Lock()  # a sample is taken by the sampling thread and by the caller
        self.base = self._now()
        self.peak = 0 if self.base is None else self.base
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ckpt-anon-peak")
        self._thread.start()

    def _now(self) -> int | None:
        """RssAnon + RssShmem, from one read of the status file (None once the process is gone)."""
        anon = shmem = None
        try:
            with open(f"/proc/{self.pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"RssAnon:"):
                        anon = int(line.split()[1]) * 1024
                    elif line.startswith(b"RssShmem:"):
                        shmem = int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            return None
        return None if anon is None else anon + (shmem or 0) + self._in_folder()

    def _in_folder(self) -> int:
        """The bytes the tmpfs ``folder`` holds (0 without one, or once it cannot be looked at)."""
        if self.folder is None:
            return 0
        import os

        try:
            st = os.statvfs(self.folder)
        except OSError:
            return 0
        return max(0, st.f_blocks - st.f_bfree) * st.f_frsize

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            if self.sample() is None:
                return

    def sample(self) -> int | None:
        """Look now; the peak so far above the start, in bytes (None once the process is gone)."""
        now = self._now()
        if now is None or self.base is None:
            return None
        with self._lock:
            self.peak = max(self.peak, now)
            return self.peak - self.base

    def stop(self) -> int | None:
        """Stop sampling (after one last look); the peak above the start, in bytes."""
        self._done.set()
        self._thread.join()
        last = self.sample()
        return last if last is not None else (None if self.base is None else self.peak - self.base)


def settle() -> None:
    """Before a baseline is read: Python's garbage collected and every free page of the C library's
    heaps given back (``malloc_trim``), so that the work measured next cannot reuse memory freed
    before it began and look smaller than what it holds (Linux, glibc)."""
    import gc

    gc.collect()
    if sys.platform == "linux":
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass


def reset_peak() -> None:
    """Reset this process's peak resident set to its present one (``/proc/self/clear_refs``)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


# ---------------------------------------------------------------------------------------------
# A fresh process measured from outside: a ready/go handshake, its anonymous memory sampled between

def wait_for_line(proc, line: str, timeout: float) -> bool:
    """Read ``proc``'s output until ``line``, for ``timeout`` seconds at most; whether it came."""
    import selectors
    import time

    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(max(0.0, deadline - time.monotonic())):
                return False
            got = proc.stdout.readline()
            if not got:
                return False
            if got.strip() == line:
                return True
    return False


def run_measured(code: str, job: dict, *, prefix: str, timeout: float, finished=lambda output: True) -> tuple[str, int]:
    """Run ``code`` (``python -c``, JAX on the CPU) in a fresh process given ``job`` as JSON in ``sys.argv[1]``,
    with ``"scratch"``, a temporary folder of its own (named ``prefix...``). It prints ``ready`` once its baseline
    is taken and waits for a line: from then on its anonymous memory is sampled from here (:class:`AnonymousPeak`),
    and it is sent ``go``. Returns what it printed after ``ready`` and that peak above where it stood when
    ready. Raises RuntimeError with its last messages where it failed: an exit code not 0, no ``ready``
    within ``timeout`` seconds, or an output that ``finished`` refuses. Linux only."""
    import json
    import subprocess
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch, tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([sys.executable, "-c", code, json.dumps({**job, "scratch": scratch})], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True)
        sampler, output = None, ""
        try:
            if wait_for_line(proc, "ready", timeout):
                sampler = AnonymousPeak(proc.pid)
                output, _ = proc.communicate("go\n", timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        peak = sampler.stop() if sampler is not None else None
        if proc.returncode != 0 or not finished(output) or peak is None:
            errors.seek(0)
            tail = "\n".join(errors.read().strip().splitlines()[-15:])
            raise RuntimeError(f"the measuring process failed (exit code {proc.returncode}). Its last messages:\n{tail}")
    return output, peak
