"""Layout math behind the lessons and diagrams: how a dimension splits into shards.

Pure Python and NumPy (no JAX), so figures, lessons and the grader can all use it. It follows
what JAX really does: a dimension that the shard count does not divide is an error
(``IndivisibleError`` in JAX), and padding is something you do by hand.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


class IndivisibleShardingError(ValueError):
    """A dimension that the number of shards does not divide (JAX raises IndivisibleError)."""


def per_shard(total: int, num_shards: int) -> float:
    """Average elements per shard: a float, because it need not be whole."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    return total / num_shards


def split_bounds(dim: int, num_shards: int) -> list[tuple[int, int]]:
    """(start, stop) of each shard of a dimension split evenly, as JAX splits it."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    if dim % num_shards:
        raise IndivisibleShardingError(
            f"a dimension of size {dim} does not split into {num_shards} equal shards "
            f"({dim} % {num_shards} = {dim % num_shards}); JAX raises IndivisibleError here. "
            f"Pad it to {padded_size(dim, num_shards)} first (see padded_bounds)."
        )
    size = dim // num_shards
    return [(i * size, (i + 1) * size) for i in range(num_shards)]


def padded_size(dim: int, num_shards: int) -> int:
    """The smallest size >= dim that num_shards divides."""
    return math.ceil(dim / num_shards) * num_shards


def padded_bounds(dim: int, num_shards: int) -> list[tuple[int, int, int]]:
    """Shards of a dimension padded by hand: (start, stop, padding) per shard.

    ``start:stop`` is the real data a shard holds (clipped to ``dim``), ``padding`` how many
    padded rows follow it. Every shard has ``padded_size(dim, n) // n`` rows in all.
    """
    size = padded_size(dim, num_shards) // num_shards
    out = []
    for i in range(num_shards):
        start, stop = min(i * size, dim), min((i + 1) * size, dim)
        out.append((start, stop, size - (stop - start)))
    return out


def chunk_name(index, zarr_format: int = 2) -> str:
    """A chunk's file name (key) from its grid position: ``0.1`` in zarr 2, ``c/0/1`` in zarr 3."""
    return ".".join(map(str, index)) if zarr_format == 2 else "c/" + "/".join(map(str, index))


def chunks_overlapped(domain, chunk_shape) -> list[tuple[int, ...]]:
    """Grid positions of the chunks an index domain overlaps: the chunks a device reads, whole."""
    ranges = [range(start // c, -(-stop // c)) for (start, stop), c in zip(domain, chunk_shape)]
    return sorted(itertools.product(*ranges))


def mesh_device_ids(mesh_shape) -> np.ndarray:
    """Device ids laid out on the mesh: row-major, ``np.arange(n).reshape(sizes)``."""
    sizes = tuple(int(s) for s in mesh_shape.values())
    return np.arange(math.prod(sizes)).reshape(sizes)


def course_mesh(mesh_shape):
    """A real ``jax.sharding.Mesh`` over the first devices, laid out row-major like
    :func:`mesh_device_ids` (call :func:`ckptlab.setup_devices` first)."""
    import jax
    from jax.sharding import Mesh

    ids = mesh_device_ids(mesh_shape)
    # A fresh kernel that skipped the set-up cell: JAX has not started, so it can still make the
    # course's devices (JAX refuses the setting once it has started: the check below then speaks).
    try:
        jax.config.update("jax_num_cpu_devices", max(16, int(ids.size)))
    except RuntimeError:
        pass
    devices = jax.devices()
    if len(devices) < ids.size:
        from ckptlab.devices import DeviceSetupError

        raise DeviceSetupError(
            f"this mesh needs {ids.size} devices and JAX is running with {len(devices)}: the course's 16 "
            "simulated CPU devices can only be made before JAX starts. Restart the kernel and run the set-up "
            "cell (`from ckptlab import setup_devices; setup_devices()`) first.")
    return Mesh(np.array(devices[: ids.size]).reshape(ids.shape), tuple(mesh_shape))


def real_index_domains(global_shape, mesh_shape, spec) -> dict:
    """``{device_id: ((start, stop), ...)}`` from JAX's own ``devices_indices_map``.

    Builds a real mesh over the first devices (call :func:`ckptlab.setup_devices` first), so the
    figures show what JAX really does.
    """
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(course_mesh(mesh_shape), PartitionSpec(*spec))
    return {d.id: tuple(sl.indices(n)[:2] for sl, n in zip(index, global_shape))
            for d, index in sharding.devices_indices_map(tuple(global_shape)).items()}
