"""Layout math behind the lessons and diagrams: how a dimension splits into shards.

Pure Python and NumPy (no JAX), so figures, lessons and the grader can all use it. It follows
what JAX really does: a dimension that the shard count does not divide is an error
(``IndivisibleError`` in JAX), and padding is something you do by hand.
"""

from __future__ import annotations

import math


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
