"""Reference solutions for Unit 3: restoring onto another mesh, and what each device must read.

Conventions as in Unit 2. Index domains come from JAX itself, through ckptlab.layout.
"""

from __future__ import annotations

import itertools
import math

import jax
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec

from ckptlab.layout import real_index_domains


def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    out = {}
    for device, domain in real_index_domains(global_shape, mesh_shape, spec).items():
        ranges = [range(start // c, -(-stop // c)) for (start, stop), c in zip(domain, chunk_shape)]
        out[device] = sorted(itertools.product(*ranges))
    return out


def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    reads = chunks_to_read(global_shape, chunk_shape, mesh_shape, spec)
    domains = real_index_domains(global_shape, mesh_shape, spec)
    read = needed = 0
    for host in sorted({device // devices_per_host for device in domains}):
        mine = [device for device in domains if device // devices_per_host == host]
        read += len({chunk for device in mine for chunk in reads[device]}) * math.prod(chunk_shape)
        # The slices of one mesh are identical or disjoint: the host needs each distinct one once.
        slices = {tuple(tuple(bounds) for bounds in domains[device]) for device in mine}
        needed += sum(math.prod(stop - start for start, stop in dom) for dom in slices)
    return read / needed


def restore_resharded(ckpt_dir, mesh, specs):
    checkpointer = ocp.StandardCheckpointer()
    saved = checkpointer.metadata(ckpt_dir).item_metadata.tree
    target = jax.tree.map(
        lambda spec, meta: jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec)),
        specs, dict(saved), is_leaf=lambda x: isinstance(x, PartitionSpec))
    return checkpointer.restore(ckpt_dir, target)


def restore_error(saved_shape, target_shape, mesh_shape, spec):
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    if any(a not in mesh_shape for axes in entries for a in axes):
        return "unknown_axis"
    if tuple(target_shape) != tuple(saved_shape):
        return "shape_mismatch"
    entries += [()] * (len(target_shape) - len(entries))
    if any(n % math.prod(mesh_shape[a] for a in axes) for n, axes in zip(target_shape, entries)):
        return "indivisible"
    return "ok"
