"""Count the bytes real Orbax restores read, in each process, as the kernel counts them.

    from ckptlab.restorecount import restore_reads
    restore_reads(ckpt_dir, [{"w": (None, "x")}], processes=2)   # -> [[bytes of process 0, of process 1]]

Each restore runs in fresh processes that do nothing else (one, or several joined by
``jax.distributed`` on localhost, as hosts of one job), on 16 CPU devices in all: the target
mesh ``{"x": 16}`` spans every process, process ``p`` holding mesh positions ``p * n`` to
``(p + 1) * n - 1`` (``n`` = 16 / processes). Each process counts its own reads (``rchar``, every
thread's) around a ``StandardCheckpointer.restore``, after one restore of the same target to warm
up (modules Python loads on first use are reads too; the warm-up's pages in the kernel's cache do
not change ``rchar``, which counts every read call however it is served).
"""

from __future__ import annotations

import json
import os
import sys

from ckptlab.twohost import free_port, run_hosts

_CHILD = r"""
import json, sys
args = json.loads(sys.argv[1])
from ckptlab.devices import prepare_environment

prepare_environment(16 // args["processes"])
import jax

if args["processes"] > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{args['port']}", num_processes=args["processes"],
                               process_id=args["process"], initialization_timeout=120)
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ckptlab.readcount import count_reads

logging.set_verbosity(logging.ERROR)
mesh = Mesh(np.array(sorted(jax.devices(), key=lambda d: d.id)), ("x",))
checkpointer = ocp.StandardCheckpointer()
saved = checkpointer.metadata(args["path"]).item_metadata.tree
out = []
for specs in args["spec_sets"]:
    target = {name: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=NamedSharding(mesh, PartitionSpec(*specs[name])))
              for name, m in saved.items()}
    jax.block_until_ready(checkpointer.restore(args["path"], target))  # warm-up
    with count_reads(whole_process=True) as reads:
        jax.block_until_ready(checkpointer.restore(args["path"], target))
    out.append(reads.bytes)
print(json.dumps({"process": jax.process_index(), "devices": sorted(d.id for d in jax.local_devices()),
                  "bytes": out}), flush=True)
if args["processes"] > 1:
    jax.distributed.shutdown()
"""


def restore_reads(ckpt_dir, spec_sets: list, processes: int = 1, timeout: float = 300) -> list[list]:
    """Bytes each process read to restore the Orbax checkpoint ``ckpt_dir`` onto 16 devices
    split over ``processes`` processes, once per spec set: each maps every saved array to its
    spec over the mesh axis ``"x"`` (``()`` for replicated). One list per spec set, process 0
    first; None where the kernel does not count (not Linux)."""
    if 16 % processes:
        raise ValueError(f"16 devices cannot be split over {processes} processes evenly")
    plain = [{name: [list(e) if isinstance(e, tuple) else e for e in spec] for name, spec in specs.items()}
             for specs in spec_sets]
    port = free_port()
    commands = [[sys.executable, "-c", _CHILD, json.dumps({"path": os.path.abspath(ckpt_dir), "spec_sets": plain,
                                                           "processes": processes, "process": i, "port": port})]
                for i in range(processes)]
    reports = sorted(run_hosts(commands, timeout, "restoring process"), key=lambda r: r["process"])
    return [[r["bytes"][k] for r in reports] for k in range(len(spec_sets))]
