"""Measure the host memory a real re-shard (an Orbax restore onto another layout, then a save) needs.

    from ckptlab.memcount import reshard_peak
    reshard_peak(src_dir, dst_dir, {"wi_0": (None, None, "x")})   # -> {"peak_bytes": ..., "weights_bytes": ...}

The re-shard runs in a fresh process on the course's 16 devices that does nothing else: it
restores one small array first (so that what Python and the libraries load on first use is in its
memory already), reads its resident set, then restores ``src_dir`` onto the target specs and saves
the result to ``dst_dir``. ``peak_bytes`` is the kernel's high-water mark of the process's
resident set (``VmHWM``) minus the resident set just before: the memory the re-shard itself took
at its worst. Linux only.
"""

from __future__ import annotations

import json
import sys

from ckptlab.twohost import run_hosts

_CHILD = r"""
import json, sys
from ckptlab import setup_devices

setup_devices()
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec

from ckptlab.layout import course_mesh
from ckptlab.memory import status_bytes as status

logging.set_verbosity(logging.ERROR)
src, dst, specs, warm = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]

mesh = course_mesh({"x": 16})
checkpointer = ocp.StandardCheckpointer()
small = jax.device_put(np.ones((16, 16), np.float32), NamedSharding(mesh, PartitionSpec("x")))
checkpointer.save(warm, {"w": small})
checkpointer.wait_until_finished()
checkpointer.restore(warm, {"w": jax.ShapeDtypeStruct((16, 16), np.float32, sharding=small.sharding)})
saved = checkpointer.metadata(src).item_metadata.tree
target = {name: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=NamedSharding(mesh, PartitionSpec(*specs[name])))
          for name, m in saved.items()}
before = status("VmRSS")
restored = checkpointer.restore(src, target)
after_restore = status("VmHWM")
checkpointer.save(dst, restored)
checkpointer.wait_until_finished()
weights = sum(a.nbytes for a in jax.tree.leaves(restored))
print(json.dumps({"peak_bytes": status("VmHWM") - before, "restore_peak_bytes": after_restore - before,
                  "weights_bytes": weights}), flush=True)
"""


def reshard_peak(src_dir, dst_dir, specs: dict, timeout: float = 600) -> dict:
    """Re-shard the Orbax checkpoint ``src_dir`` onto ``specs`` (name -> spec over the mesh axis
    ``"x"`` of 16 devices) and save it to ``dst_dir``, in a fresh process; return its
    ``peak_bytes`` (restore and save), ``restore_peak_bytes`` (the restore alone) and
    ``weights_bytes`` (the arrays' own bytes)."""
    import os
    import tempfile

    plain = {name: [list(e) if isinstance(e, tuple) else e for e in spec] for name, spec in specs.items()}
    with tempfile.TemporaryDirectory(prefix="memcount-") as warm:
        (report,) = run_hosts([[sys.executable, "-c", _CHILD, os.path.abspath(src_dir), os.path.abspath(dst_dir),
                                json.dumps(plain), os.path.join(warm, "w")]], timeout, "the measuring process")
    return report
