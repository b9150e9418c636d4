"""What a worker's process starts with: its whole environment (nothing of the grader's), the XLA
flags it computes with, and the zygote strict workers are forked from, started in the background.
"""

from __future__ import annotations

import os
import sys

from autograder.sandbox import landlock, zygote


def worker_env(scratch: str, level: str) -> dict:
    """The worker's whole environment: nothing of the grader's (no salt, no tokens, no home)."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
            "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg", "MPLCONFIGDIR": os.path.join(scratch, ".matplotlib"),
            "CKPT_ISOLATION": level,
            # One BLAS thread: a worker uses one core, and the zygote must stay single-threaded to fork.
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            # XLA's CPU code generator without LLVM's optimisations, and with its older emitter for
            # element-wise fusions: a learner's eager JAX (Flax's init, say) compiles for every new
            # shape, and compiles several times faster so. Without LLVM's optimisations a float
            # computed by XLA may differ in its last bits (far below the tolerance; the emitter
            # changes nothing): float array answers are judged with a relative tolerance of
            # 1e-6, and the arrays judged bit for bit are read from files, never computed.
            "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"}


def worker_xla_flags() -> str:
    """XLA's flags in a worker, its 16 devices included: a trusted process that must compute what a
    worker computes, to the bit, runs with these."""
    return worker_env("/nonexistent", "")["XLA_FLAGS"] + " --xla_force_host_platform_device_count=16"


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
