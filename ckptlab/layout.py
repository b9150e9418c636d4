"""Layout math behind the lessons and diagrams: how a dimension splits into shards.

Pure Python and NumPy (no JAX), so figures, lessons and the grader can all use it. It follows
what JAX really does: a dimension that the shard count does not divide is an error
(``IndivisibleError`` in JAX), and padding is something you do by hand.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np


class IndivisibleShardingError(ValueError):
    """A dimension that the number of shards does not divide (JAX raises IndivisibleError)."""


_MESH_PAIR = re.compile(r"([A-Za-z_]\w*)\s*[=:]\s*(\d+)")


def parse_mesh(text: str) -> dict[str, int]:
    """The course's one mesh grammar (the explorer's and the checkpoint tool's): ``data=2, model=8`` (or
    ``data:2,model:8``) -> ``{"data": 2, "model": 8}``; ValueError saying what to type for anything else."""
    mesh: dict[str, int] = {}
    for part in [p.strip() for p in str(text).split(",") if p.strip()]:
        m = _MESH_PAIR.fullmatch(part)
        if not m or int(m.group(2)) < 1:
            raise ValueError(f"mesh {text!r}: write it as axis=size pairs, e.g. data=2,model=8")
        if m.group(1) in mesh:
            raise ValueError(f"mesh {text!r} names the axis {m.group(1)!r} twice: write axis=size pairs with "
                             "different names, e.g. data=2,model=8")
        mesh[m.group(1)] = int(m.group(2))
    if not mesh:
        raise ValueError("the mesh is empty: write it as axis=size pairs, e.g. data=2,model=8")
    return mesh


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


def chunk_position(name: str):
    """A chunk's grid position from its key (the inverse of :func:`chunk_name`): ``0.3`` (zarr 2),
    ``c/0/3`` or ``c.0.3`` (zarr 3); None for a key that is not a chunk (``.zarray``, ``zarr.json``)."""
    if name == "c":
        return ()
    if name.startswith(("c/", "c.")):
        name = name[2:]
    parts = re.split(r"[./]", name)
    if not all(p.isascii() and p.isdigit() and len(p) <= 30 for p in parts):
        return None  # (a number too long to be a position: never one a save wrote)
    return tuple(int(p) for p in parts)


def chunk_index(keys) -> dict:
    """{array key: {storage key: grid position}} for the ``keys`` that are chunks, each key read
    once: a chunk's key is the array's, "/", its grid position (``x/0.1``, ``x/c/0/1``), not a header
    (``x/.zarray``) nor another array's chunk under a longer name (``x/y/0`` is not one of ``x``'s). A
    key that splits into an array and a position at several of its "/" counts for each such array, as
    a look under each array's name would find it; a position has at most 32 dimensions (TensorStore's
    most), so only a key's last 33 "/" are tried."""
    index: dict = {}
    for k in keys:
        parts = k.split("/")
        for at in range(max(1, len(parts) - 33), len(parts)):
            position = chunk_position("/".join(parts[at:]))
            if position is not None:
                index.setdefault("/".join(parts[:at]), {})[k] = position
    return index


def chunks_overlapped(domain, chunk_shape) -> list[tuple[int, ...]]:
    """Grid positions of the chunks an index domain overlaps: the chunks a device reads, whole (in
    order; :func:`iter_chunks_overlapped` yields them one at a time, :func:`count_chunks_overlapped`
    counts them without listing one)."""
    return list(iter_chunks_overlapped(domain, chunk_shape))


def iter_chunks_overlapped(domain, chunk_shape):
    """:func:`chunks_overlapped`, one position at a time (row-major order), never a list of them."""
    return itertools.product(*(range(start // c, -(-stop // c)) for (start, stop), c in
                               zip(domain, (max(1, int(c)) for c in chunk_shape))))


def count_chunks_overlapped(domain, chunk_shape) -> int:
    """How many chunks an index domain overlaps, by arithmetic: ``len(chunks_overlapped(...))``."""
    return math.prod(max(0, -(-stop // c) - start // c) for (start, stop), c in
                     zip(domain, (max(1, int(c)) for c in chunk_shape)))


def grid_size(shape, chunk_shape) -> int:
    """The chunks of a chunk grid, by arithmetic: the product of ``ceil(dim / chunk)`` (a scalar has
    one; a dimension of size 0, none)."""
    return math.prod(-(-int(n) // max(1, int(c))) for n, c in zip(shape, chunk_shape))


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
