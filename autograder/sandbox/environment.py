"""What a worker's process starts with: its whole environment (nothing of the grader's), the XLA
flags it computes with, and the zygote strict workers are forked from, started in the background.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from importlib import metadata

from autograder.sandbox import landlock, zygote

# XLA's flags for a worker, each with the jaxlib releases that know it: [first, gone). jaxlib aborts a
# process whose XLA_FLAGS names a flag it lacks ("Unknown flag in XLA_FLAGS: ..."; 0.12.0 dropped the
# second), so each is passed only to a jaxlib inside its range (tests/sandbox/test_environment.py starts
# the installed jaxlib with the flags chosen for it). Both make XLA's CPU compiler faster, not
# other: its code generator without LLVM's optimisations, and its older emitter for element-wise
# fusions. A learner's eager JAX (Flax's init, say) compiles for every new shape, and compiles
# several times faster so. Without LLVM's optimisations a float computed by XLA may differ in its
# last bits (far below the tolerance; the emitter changes nothing): float array answers are judged
# with a relative tolerance of 1e-6, and the arrays judged bit for bit are read from files, never
# computed.
XLA_SPEED_FLAGS = (
    ("--xla_backend_optimization_level=0", (0, 4), None),
    ("--xla_cpu_use_fusion_emitters=false", (0, 10), (0, 12)),  # (0.10.2 and 0.11.0 seen to know it)
)


def release(version: str) -> tuple[int, ...]:
    """A release's leading numbers: '0.12.0.1' -> (0, 12, 0, 1), '0.5.0.dev20250101' -> (0, 5, 0)."""
    numbers = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
        if digits != part:
            break
    return tuple(numbers)


def jaxlib_version() -> str:
    """The installed jaxlib's version, read from its metadata (JAX is not imported); '' if none."""
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return ""


def xla_flags_for(version: str) -> str:
    """The flags of :data:`XLA_SPEED_FLAGS` that jaxlib ``version`` knows ('' for an unknown version:
    none is needed to grade, and an unknown flag stops every worker)."""
    have = release(version)
    return " ".join(flag for flag, first, gone in XLA_SPEED_FLAGS
                    if have and have >= first and (gone is None or have < gone))


def worker_env(scratch: str, level: str) -> dict:
    """The worker's whole environment: nothing of the grader's (no salt, no tokens, no home)."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
            "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg", "MPLCONFIGDIR": os.path.join(scratch, ".matplotlib"),
            "CKPT_ISOLATION": level,
            # One BLAS thread: a worker uses one core, and the zygote must stay single-threaded to fork.
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "XLA_FLAGS": _xla_flags()}


@functools.lru_cache(maxsize=1)
def _xla_flags() -> str:
    return xla_flags_for(jaxlib_version())


def worker_xla_flags() -> str:
    """XLA's flags in a worker, its 16 devices included: a trusted process that must compute what a
    worker computes, to the bit, runs with these."""
    return (_xla_flags() + " --xla_force_host_platform_device_count=16").strip()


def zygote_env() -> dict:
    """The zygote's environment: a worker's, with no home or scratch (it writes nothing; each
    worker it forks gets its own environment)."""
    return {**worker_env("/nonexistent", ""), "CKPT_ISOLATION": ""}


def start_zygote(sources=()) -> None:
    """Start the zygote strict workers are forked from, in the background (it imports for a
    second), unless this machine surely lacks the strict level (no Landlock). ``sources``, pairs
    of a worker's code and whether its reads are counted, say what the coming workers import."""
    if sys.platform == "linux" and landlock.landlock_abi() >= landlock.STRICT_LANDLOCK_ABI:
        wants = {name for source, count_reads in sources for name in zygote.needs(source, count_reads)}
        zygote.start(zygote_env(), [name for name in zygote.ON_DEMAND if name in wants])
