"""Count the bytes Orbax's own safetensors loader reads, as the kernel counts them.

    from ckptlab.loadcount import orbax_load_reads
    orbax_load_reads(path, {"embed": (None, "x"), "final_norm.scale": ()})   # -> [bytes read]

The load runs in a fresh process that does nothing else, on the course's 16 devices, so that
every thread's reads count (TensorStore reads on threads of its own) and nothing else's do: the
same file is loaded once to warm up (modules Python loads on first use are reads too), then
counted around a second ``ocp.v1.load``.
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
import orbax.checkpoint.experimental.v1 as ocp1
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec

from ckptlab.layout import course_mesh
from ckptlab.readcount import count_reads

logging.set_verbosity(logging.ERROR)
path, spec_sets = sys.argv[1], json.loads(sys.argv[2])
with open(path, "rb") as f:
    n = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(n))
dtypes = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
mesh = course_mesh({"x": 16})
out = []
for specs in spec_sets:
    abstract = {name: jax.ShapeDtypeStruct(tuple(info["shape"]), dtypes[info["dtype"]],
                                           sharding=NamedSharding(mesh, PartitionSpec(*specs[name])))
                for name, info in header.items() if name != "__metadata__"}
    ctx = ocp1.Context()
    ctx.checkpoint_layout = "safetensors"
    with ctx:
        ocp1.load(path, abstract)  # warm-up
        with count_reads(whole_process=True) as reads:
            jax.block_until_ready(ocp1.load(path, abstract))
    out.append(reads.bytes)
print(json.dumps({"bytes": out}))
"""


def orbax_load_reads(path, *spec_sets: dict, timeout: float = 300) -> list:
    """Bytes ``ocp.v1.load`` reads to load the safetensors file ``path`` onto 16 devices, once per
    spec set: each maps a tensor to its spec (a tuple of mesh-axis names over the mesh
    ``{"x": 16}``, ``()`` for replicated). None where the kernel does not count (not Linux)."""
    plain = [{name: [list(e) if isinstance(e, tuple) else e for e in spec] for name, spec in specs.items()}
             for specs in spec_sets]
    (report,) = run_hosts([[sys.executable, "-c", _CHILD, str(path), json.dumps(plain)]], timeout, "the measuring process")
    return report["bytes"]
