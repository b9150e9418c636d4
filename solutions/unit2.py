"""Reference solutions for Unit 2: sharded save layouts (what Orbax writes, and who writes it).

Conventions: a mesh is an ordered dict {axis_name: size}; devices are numbered row-major over the
mesh (``np.arange(n).reshape(sizes)``); a spec entry is None, an axis name or a tuple of names;
an index domain is a tuple of (start, stop) per dimension.
"""

from __future__ import annotations

import itertools
import math


def entries_of(spec, ndim):
    spec = tuple(spec) + (None,) * (ndim - len(tuple(spec)))
    return [() if e is None else ((e,) if isinstance(e, str) else tuple(e)) for e in spec]


def shard_shape(global_shape, mesh_shape, spec):
    out = []
    for dim, (size, axes) in enumerate(zip(global_shape, entries_of(spec, len(global_shape)))):
        parts = math.prod(mesh_shape[a] for a in axes)
        if size % parts:
            raise ValueError(f"dimension {dim} of size {size} is not divisible by {parts} "
                             f"(mesh axes {', '.join(axes)}): pad it or choose another spec")
        out.append(size // parts)
    return tuple(out)


def device_index_domains(global_shape, mesh_shape, spec):
    names, sizes = list(mesh_shape), [int(s) for s in mesh_shape.values()]
    local = shard_shape(global_shape, mesh_shape, spec)
    entries = entries_of(spec, len(global_shape))
    domains = {}
    for device, coords in enumerate(itertools.product(*(range(s) for s in sizes))):
        at = dict(zip(names, coords))
        dom = []
        for axes, n in zip(entries, local):
            pos = 0
            for a in axes:  # the first axis of a tuple is the most significant
                pos = pos * mesh_shape[a] + at[a]
            dom.append((pos * n, (pos + 1) * n))
        domains[device] = tuple(dom)
    return domains


def _replicas(mesh_shape, spec, ndim):
    used = {a for axes in entries_of(spec, ndim) for a in axes}
    return math.prod(s for a, s in mesh_shape.items() if a not in used)


def _replica_split_axis(local, replicas, replica_parallel):
    """The axis Orbax splits a replicated shard along, or None when one replica writes it all."""
    if not replica_parallel or replicas <= 1 or math.prod(local) == 0:
        return None
    return next((i for i, n in enumerate(local) if n % replicas == 0), None)


def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    local = shard_shape(global_shape, mesh_shape, spec)
    replicas = _replicas(mesh_shape, spec, len(global_shape))
    axis = _replica_split_axis(local, replicas, replica_parallel)
    if axis is None:
        return local
    return tuple(n // replicas if i == axis else n for i, n in enumerate(local))


def chunk_files(global_shape, chunk_shape, zarr_format=2):
    grid = [range(-(-g // c)) for g, c in zip(global_shape, chunk_shape)]
    names = []
    for idx in itertools.product(*grid):
        if int(zarr_format) == 3:
            names.append("/".join(["c", *map(str, idx)]))
        else:
            names.append(".".join(map(str, idx)) if idx else "0")
    return sorted(names)


def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    domains = device_index_domains(global_shape, mesh_shape, spec)
    local = shard_shape(global_shape, mesh_shape, spec)
    replicas = _replicas(mesh_shape, spec, len(global_shape))
    axis = _replica_split_axis(local, replicas, replica_parallel)
    shard_bytes = math.prod(local) * int(itemsize)
    seen: dict = {}
    out = {}
    for device in sorted(domains):
        replica_id = seen.get(domains[device], 0)  # replicas are numbered in device order
        seen[domains[device]] = replica_id + 1
        if axis is not None:
            out[device] = shard_bytes // replicas
        else:
            out[device] = shard_bytes if replica_id == 0 else 0
    return out


def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    per_device = bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel)
    hosts: dict = {}
    for device, n in per_device.items():
        host = device // int(devices_per_host)
        hosts[host] = hosts.get(host, 0) + n
    return hosts

