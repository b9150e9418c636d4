"""Every diagram of the course, one function per figure. Inputs are plain shapes and numbers.

Each function draws on ``ax`` when given (so figures can be combined) and returns the Axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ckptlab import layout

_CMAP = plt.get_cmap("tab20")


def device_colour(device_id: int):
    """The colour of a device, the same in every figure of the course."""
    return _CMAP(device_id % 20)


def _axes(ax, figsize):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_param_counts(counts: Mapping[str, int], ax=None, title: str = "Parameters per leaf"):
    """Horizontal bars: number of parameters in each leaf (path -> count), with the total."""
    ax = _axes(ax, (7, 0.45 * len(counts) + 1.2))
    names = list(counts)
    values = [int(counts[n]) for n in names]
    bars = ax.barh(names, values, color=[device_colour(i) for i in range(len(names))])
    ax.invert_yaxis()
    for bar, v in zip(bars, values):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:,}", va="center", fontsize=9)
    ax.set_xlabel("parameters")
    ax.set_title(f"{title} (total {sum(values):,})")
    ax.set_xlim(0, max(values + [1]) * 1.18)
    return ax


def plot_bytes_by_dtype(num_params: int, itemsizes: Mapping[str, int], ax=None):
    """Bars: bytes to store ``num_params`` parameters in each dtype (dtype name -> bytes per element)."""
    ax = _axes(ax, (6, 3))
    names = list(itemsizes)
    sizes = [num_params * int(itemsizes[n]) for n in names]
    bars = ax.bar(names, sizes, color=[device_colour(2 * i) for i in range(len(names))])
    for bar, s in zip(bars, sizes):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), _human(s), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("bytes")
    ax.set_title(f"{num_params:,} parameters stored in each dtype")
    ax.set_ylim(0, max(sizes + [1]) * 1.15)
    return ax


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def plot_row_shards(global_shape: Sequence[int], num_shards: int, ax=None, pad: bool = False,
                    labels: Sequence[str] | None = None, title: str | None = None):
    """A 2-D tensor split along its rows into ``num_shards`` shards, one colour per device.

    With ``pad=True`` a dimension that does not divide is padded by hand and the padded rows are
    drawn hatched; without it, such a split raises :class:`ckptlab.layout.IndivisibleShardingError`
    just as JAX refuses it.
    """
    rows, cols = int(global_shape[0]), int(global_shape[1]) if len(global_shape) > 1 else 1
    if pad:
        bounds = layout.padded_bounds(rows, num_shards)
    else:
        bounds = [(a, b, 0) for a, b in layout.split_bounds(rows, num_shards)]
    total_rows = rows + sum(p for _, _, p in bounds) if pad else rows
    ax = _axes(ax, (min(8, 1.5 + cols * 0.5), min(9, 1 + total_rows * 0.32)))
    y = 0
    for i, (start, stop, padding) in enumerate(bounds):
        colour = device_colour(i)
        if stop > start:
            ax.add_patch(Rectangle((0, y), cols, stop - start, facecolor=colour, edgecolor="black", lw=1))
        if padding:
            ax.add_patch(Rectangle((0, y + stop - start), cols, padding, facecolor="white", edgecolor=colour,
                                   hatch="///", lw=1))
        label = labels[i] if labels else f"shard {i}: rows {start}:{stop}" + (f" + {padding} pad" if padding else "")
        ax.text(cols + 0.2, y + (stop - start + padding) / 2, label, va="center", fontsize=9)
        y += stop - start + padding
    for r in range(1, total_rows):
        ax.axhline(r, color="white", lw=0.3)
    ax.set_xlim(0, cols * 2.4 + 2)
    ax.set_ylim(total_rows, 0)
    ax.set_xticks([])
    ax.set_ylabel("row")
    ax.set_title(title or f"{tuple(global_shape)} split over {num_shards} shards" + (" (padded)" if pad else ""))
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return ax


def shard_table(global_shape: Sequence[int], num_shards: int) -> np.ndarray:
    """Which shard owns each row of a row-sharded tensor (-1 for none), for quick printing."""
    owner = np.full(int(global_shape[0]), -1)
    for i, (a, b) in enumerate(layout.split_bounds(int(global_shape[0]), num_shards)):
        owner[a:b] = i
    return owner
