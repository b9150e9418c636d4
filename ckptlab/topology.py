"""Restore a checkpoint on another machine: a fresh process with another number of devices.

    from ckptlab.topology import restore_on, restore_each
    restore_on(ckpt_dir, devices=4, how="from_metadata")
    # -> {"ok": True, "leaves": {...}, "peak_bytes": ..., "held_bytes": ..., "error": None}
    restore_each(ckpt_dir, [(1, "no_target"), (4, "numpy")])  # one fresh process each, two at a time

A checkpoint saved by the course's 16 devices is restored in a new Python process that has
``devices`` CPU devices and nothing else running (the machine a job is restored on after a move,
or a laptop with one CPU device). ``how`` is the way practitioners try, in the order they usually
do:

- ``"no_target"``: ``StandardCheckpointer().restore(ckpt_dir)``, no target at all;
- ``"from_metadata"``: a target built from the checkpoint's ``metadata()`` and the new mesh: each
  array split on its first axis over every device where that divides, else replicated;
- ``"replicated"``: the same target with every array replicated (``PartitionSpec()``): one
  whole copy per device;
- ``"numpy"``: ``PyTreeRestore`` with ``RestoreArgs(restore_type=np.ndarray)``: host arrays, no
  devices at all.

The report says whether it restored (else the error's type and first line, as Orbax raised it),
each leaf's type, dtype, device count and ids and a digest of its values, the bytes the devices hold (every
replica counted, as host memory counts them on CPU devices), and ``peak_bytes``: the kernel's
high-water mark of the process's resident set (``VmHWM``) minus its resident set just before the
restore, after a warm-up restore has loaded what a first restore loads once, and once every
device's copy has landed (after ``jax.block_until_ready``: whether ``restore`` returns before they
all have is JAX's to decide, and changed with its version; ``returned_bytes`` is the growth of the
resident set the moment it returned). Linux only.
"""

from __future__ import annotations

import os
import sys

from ckptlab.twohost import run_hosts

HOWS = ("no_target", "from_metadata", "replicated", "numpy")

_CHILD = r"""
import json, os, sys, warnings
from ckptlab import setup_devices

src, n, how, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
setup_devices(n)
warnings.simplefilter("ignore")
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec

from ckptlab.memory import status_bytes as status
from ckptlab.topology import digest

logging.set_verbosity(logging.ERROR)

mesh = jax.make_mesh((n,), ("x",))
checkpointer = ocp.StandardCheckpointer()
small = jax.device_put(np.ones((n, 4), np.float32), NamedSharding(mesh, PartitionSpec("x")))
checkpointer.save(warm, {"w": small})
checkpointer.wait_until_finished()
checkpointer.restore(warm, {"w": jax.ShapeDtypeStruct((n, 4), np.float32, sharding=small.sharding)})
saved = dict(checkpointer.metadata(src).item_metadata.tree)


def spec(m):
    if how == "replicated" or not m.shape or m.shape[0] % n:
        return PartitionSpec()
    return PartitionSpec("x")


target = {name: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=NamedSharding(mesh, spec(m))) for name, m in saved.items()}
before = status("VmRSS")
try:
    if how == "no_target":
        restored = checkpointer.restore(src)
    elif how == "numpy":
        args = {name: ocp.RestoreArgs(restore_type=np.ndarray) for name in saved}
        restored = ocp.PyTreeCheckpointer().restore(src, args=ocp.args.PyTreeRestore(restore_args=args))
    else:
        restored = checkpointer.restore(src, target)
    returned = status("VmRSS") - before
    # restore() may return before every device's copy has landed: the memory is measured once they all have
    jax.block_until_ready(restored)
except Exception as exc:  # the error a practitioner sees, reported as it is
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {message}", "leaves": {}, "held_bytes": 0,
                      "peak_bytes": status("VmHWM") - before, "returned_bytes": None}), flush=True)
    sys.exit(0)
peak = status("VmHWM") - before
leaves, held = {}, 0
for name, value in restored.items():
    shards = getattr(value, "addressable_shards", None)
    nbytes = sum(s.data.nbytes for s in shards) if shards is not None else np.asarray(value).nbytes
    held += nbytes
    leaves[name] = {"type": type(value).__name__, "dtype": str(value.dtype), "shape": list(value.shape),
                    "devices": len(value.sharding.device_set) if shards is not None else 0, "held_bytes": nbytes,
                    "device_ids": sorted(d.id for d in value.sharding.device_set) if shards is not None else [],
                    "sha256": digest(value)}
print(json.dumps({"ok": True, "error": None, "leaves": leaves, "held_bytes": held, "peak_bytes": peak,
                  "returned_bytes": returned if how != "numpy" else None}), flush=True)
"""


def restore_on(ckpt_dir, devices: int, how: str = "from_metadata", timeout: float = 300) -> dict:
    """Restore the Orbax checkpoint ``ckpt_dir`` (a ``StandardCheckpointer`` save of a flat dict of
    arrays) in a fresh process with ``devices`` CPU devices, the way ``how`` says (:data:`HOWS`);
    return what happened (see the module's text)."""
    import tempfile

    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, not {how!r}")
    if int(devices) < 1:
        raise ValueError(f"devices must be at least 1, not {devices!r}")
    with tempfile.TemporaryDirectory(prefix="topology-") as warm:
        (report,) = run_hosts([[sys.executable, "-c", _CHILD, os.path.abspath(ckpt_dir), str(int(devices)), how,
                                os.path.join(warm, "w")]], timeout, "the restoring process")
    return report


def restore_each(ckpt_dir, runs, parallel: int = 2, timeout: float = 300) -> list[dict]:
    """:func:`restore_on` for each ``(devices, how)`` of ``runs``, each in its own fresh process,
    ``parallel`` of them at a time (what each measures is its own process's, so running two at once
    changes no figure, only the wait); the reports in the order of ``runs``."""
    from concurrent.futures import ThreadPoolExecutor

    runs = [(int(n), how) for n, how in runs]
    with ThreadPoolExecutor(max_workers=max(1, int(parallel))) as pool:
        return list(pool.map(lambda run: restore_on(ckpt_dir, run[0], run[1], timeout), runs))


def digest(value) -> str:
    """The digest :func:`restore_on` reports for an array's values (to compare with what was saved)."""
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(np.asarray(value)).tobytes()).hexdigest()
