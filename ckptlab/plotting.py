"""Every diagram of the course, one function per figure. Inputs are plain shapes and numbers.

Each function draws on ``ax`` when given (so figures can be combined) and returns the Axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from ckptlab import layout

_CMAP = plt.get_cmap("tab20")


def device_colour(device_id: int):
    """The colour of a device, the same in every figure of the course."""
    return _CMAP(device_id % 20)


def _axes(ax, figsize):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _title(ax, label: str, claim: str):
    """A figure's title: what it is, then on a second line the one claim it shows."""
    ax.set_title(f"{label}\n{claim}" if label else claim, fontsize=10)
    return ax


def plot_param_counts(counts: Mapping[str, int], ax=None, title: str = "Parameters per leaf", log: bool | None = None):
    """Horizontal bars: number of parameters in each leaf (path -> count), with the total.

    The axis is logarithmic (``log=None`` decides) when the smallest leaf would be under 2% of
    the largest: a bias next to its kernel is otherwise a bar too thin to see.
    """
    ax = _axes(ax, (7, 0.45 * len(counts) + 1.4))
    names = list(counts)
    values = [int(counts[n]) for n in names]
    top, total = max(values + [1]), sum(values)
    if log is None:
        log = min(values + [top]) < 0.02 * top
    bars = ax.barh(names, values, color=[device_colour(i) for i in range(len(names))], left=0.8 if log else 0)
    ax.invert_yaxis()
    for bar, v in zip(bars, values):
        ax.text(bar.get_x() + bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:,}", va="center", fontsize=9)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(0.8, top * 8)
        ax.set_xlabel("parameters (log scale)")
    else:
        ax.set_xlim(0, top * 1.18)
        ax.set_xlabel("parameters")
    largest = names[values.index(top)] if names else "-"
    return _title(ax, f"{title} (total {total:,})",
                  f"{largest} holds {top / max(total, 1):.1%} of the parameters")


def plot_bytes_by_dtype(num_params: int, itemsizes: Mapping[str, int], ax=None):
    """Bars: bytes to store ``num_params`` parameters in each dtype (dtype name -> bytes per element)."""
    ax = _axes(ax, (6, 3))
    names = list(itemsizes)
    sizes = [num_params * int(itemsizes[n]) for n in names]
    bars = ax.bar(names, sizes, color=[device_colour(2 * i) for i in range(len(names))])
    for bar, s in zip(bars, sizes):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), human_bytes(s), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("bytes")
    ax.set_ylim(0, max(sizes + [1]) * 1.15)
    big, small = names[sizes.index(max(sizes))], names[sizes.index(min(sizes))]
    return _title(ax, f"{num_params:,} parameters stored in each dtype",
                  f"same elements, {max(sizes) // max(min(sizes), 1)}x the bytes in {big} as in {small}")


def human_bytes(n: float) -> str:
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
    sizes = {stop - start for start, stop, _ in bounds}
    if pad and any(p for _, _, p in bounds):
        last = bounds[-1]
        claim = (f"padded to {total_rows} rows: every shard has {total_rows // num_shards}, "
                 f"the last {last[1] - last[0]} real + {last[2]} padding")
    else:
        claim = f"{num_shards} equal shards of {sizes.pop()} rows each" if len(sizes) == 1 else "shards of unequal size"
    _title(ax, title or f"{tuple(global_shape)} split over {num_shards} shards" + (" (padded)" if pad else ""), claim)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return ax


def plot_mesh(mesh_shape: Mapping[str, int], ax=None, title: str | None = None):
    """The devices of a mesh as a grid of coloured cells labelled with their ids (row-major)."""
    ids = layout.mesh_device_ids(mesh_shape)
    names = list(mesh_shape)
    grid = ids if ids.ndim == 2 else ids.reshape(1, -1)
    rows, cols = grid.shape
    ax = _axes(ax, (0.9 * cols + 1.5, 0.9 * rows + 1.2))
    for r in range(rows):
        for c in range(cols):
            d = int(grid[r, c])
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=device_colour(d), edgecolor="white", lw=2))
            ax.text(c + 0.5, r + 0.5, f"d{d}", ha="center", va="center", fontsize=10)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(cols)], [str(i) for i in range(cols)])
    ax.set_yticks([i + 0.5 for i in range(rows)], [str(i) for i in range(rows)])
    ax.set_xlabel(f"mesh axis '{names[-1]}' (size {cols})")
    ax.set_ylabel(f"mesh axis '{names[0]}' (size {rows})" if ids.ndim == 2 else "")
    claim = (f"row-major: along '{names[-1]}' the ids step by 1, along '{names[0]}' by {cols}"
             if ids.ndim == 2 else f"devices d0..d{ids.size - 1} in a row")
    return _title(ax, title or "mesh " + " x ".join(f"{k}={v}" for k, v in mesh_shape.items()), claim)


_CHUNK_EDGE = "#cf222e"  # the saved-chunk grid: dashed, in a colour no device boundary has


def plot_sharded_array(global_shape: Sequence[int], mesh_shape: Mapping[str, int], spec: Sequence,
                       chunk_shape: Sequence[int] | None = None, zarr_format: int = 2, ax=None,
                       title: str | None = None, writers: Mapping[int, Sequence[tuple[int, int]]] | None = None):
    """A 1-D or 2-D array coloured by the device holding each slice (replicas listed together).

    With ``chunk_shape``, the saved-chunk grid is drawn on top, dashed red, and each chunk is
    labelled with its file name. With ``writers`` (``{device id: index domain it writes}``, from
    Orbax's replica slices), each written region takes its writer's colour and every chunk says
    who writes it. Uses JAX's own ``devices_indices_map`` (needs the course's devices).
    """
    one_d = len(global_shape) == 1
    shape = tuple(global_shape) if not one_d else (1, int(global_shape[0]))

    def as_2d(dom):
        return ((0, 1), tuple(dom[0])) if one_d else tuple(tuple(d) for d in dom)

    domains = {d: as_2d(dom) for d, dom in layout.real_index_domains(global_shape, mesh_shape, spec).items()}
    owners: dict = {}
    for d, dom in sorted(domains.items()):
        owners.setdefault(dom, []).append(d)
    written = {d: as_2d(dom) for d, dom in (writers or {}).items()}
    rows, cols = shape
    ax = _axes(ax, (min(11, 2 + cols * 0.22), min(8, 1.8 + rows * 0.22)))
    _draw_holders(ax, owners, written, rows, cols, corner_labels=chunk_shape is not None)
    chunk = None if chunk_shape is None else (tuple(chunk_shape) if not one_d else (1, int(chunk_shape[0])))
    chunk_writer = {} if chunk is None else _draw_chunks(ax, chunk, rows, cols, one_d, zarr_format, written)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xlabel("column")
    ax.set_ylabel("row" if not one_d else "")
    if one_d:
        ax.set_yticks([])
    spec_text = ", ".join(repr(e) for e in spec) or ""
    _title(ax, title or f"{tuple(global_shape)} with P({spec_text}) on "
           + " x ".join(f"{k}={v}" for k, v in mesh_shape.items())
           + (f", chunks {tuple(chunk_shape)}" if chunk_shape is not None else ""),
           _sharded_array_claim(owners, domains, chunk, chunk_writer))
    return ax


def _draw_holders(ax, owners: dict, written: dict, rows: int, cols: int, corner_labels: bool) -> None:
    """Each shard in its first holder's colour and labelled with its holders (in its top corner when
    chunks are drawn over it), then each writer's slice in its colour, each shard outlined above them."""
    for ((r0, r1), (c0, c1)), devs in owners.items():
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=device_colour(devs[0]),
                               alpha=0.35 if written else 1.0, edgecolor="black", lw=1.6, zorder=1))
        label = "d" + ",".join(map(str, devs)) if len(devs) <= 4 else f"d{devs[0]}..d{devs[-1]} ({len(devs)} replicas)"
        if written:
            label = "held by " + label
        if not corner_labels:
            ax.text((c0 + c1) / 2, (r0 + r1) / 2, label, ha="center", va="center", fontsize=9, fontweight="bold")
        else:  # corner label, leaving the middle of each chunk for its file name
            ax.text(c0 + 0.01 * cols, r0 + 0.01 * rows, label, ha="left", va="top", fontsize=9, fontweight="bold",
                    bbox={"facecolor": "white", "alpha": 0.7, "lw": 0, "pad": 1}, zorder=6)
    for d, ((r0, r1), (c0, c1)) in sorted(written.items()):
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=device_colour(d), edgecolor="black",
                               lw=0.6, zorder=2))
    if written:  # each shard's outline again, above its writers' slices
        for ((r0, r1), (c0, c1)) in owners:
            ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, edgecolor="black", lw=2.2, zorder=3))


def _draw_chunks(ax, chunk: tuple, rows: int, cols: int, one_d: bool, zarr_format: int, written: dict) -> dict:
    """The saved-chunk grid, dashed, each chunk labelled with its file name (and its writer, given
    ``written``); returns chunk file name -> the device that writes it."""
    chunk_writer: dict = {}
    n_r, n_c = -(-rows // chunk[0]), -(-cols // chunk[1])
    for i in range(n_r):
        for j in range(n_c):
            name = layout.chunk_name((i, j) if not one_d else (j,), zarr_format)
            r0, c0 = i * chunk[0], j * chunk[1]
            ax.add_patch(Rectangle((c0, r0), chunk[1], chunk[0], fill=False, edgecolor=_CHUNK_EDGE,
                                   lw=1.8, ls=(0, (4, 3)), zorder=4))
            who = [d for d, ((a, b), (c, e)) in sorted(written.items()) if a <= r0 < b and c <= c0 < e]
            if who:
                chunk_writer[name] = who[0]
            text = f"{name} \u2190 d{who[0]}" if who else name
            # below the middle: the device labels sit in the top corners of their slices
            ax.text(c0 + chunk[1] / 2, r0 + chunk[0] * 0.62, text, ha="center", va="center", fontsize=9,
                    family="monospace", zorder=7,
                    bbox={"facecolor": "white", "edgecolor": _CHUNK_EDGE, "lw": 0.6, "pad": 1.5})
    return chunk_writer


def _sharded_array_claim(owners: dict, domains: dict, chunk: tuple | None, chunk_writer: dict) -> str:
    """The one claim :func:`plot_sharded_array` shows, from the same numbers it draws."""
    replicas = {len(devs) for devs in owners.values()}
    if chunk_writer:
        shared = next((devs for devs in owners.values() if len(set(chunk_writer.values()) & set(devs)) > 1), None)
        if shared:
            mine = [(n, d) for n, d in chunk_writer.items() if d in shared][:2]
            return ("replicas share the write: " + ", ".join(f"d{d} writes {n}" for n, d in mine)
                    + f" ({len(chunk_writer)} chunk files, each written once)")
        return f"one replica writes each shard: {len(chunk_writer)} chunk files, each written once"
    if chunk is not None:
        counts = sorted({len(layout.chunks_overlapped(dom, chunk)) for dom in domains.values()})
        return (f"each device's slice overlaps {counts[0]} saved chunk(s)" if len(counts) == 1
                else f"devices' slices overlap {counts[0]} to {counts[-1]} saved chunks")
    if replicas == {1}:
        return f"{len(owners)} devices, {len(owners)} different shards, no replicas"
    return f"{len(owners)} shards, each held by {max(replicas)} devices (replicas)"


_PART_CMAP = plt.get_cmap("Set2")  # tensors within a device's bar: not device colours, so the two never mix


def _device_bars(values_by_device: Mapping[int, float | Mapping[str, float]], ax, ylabel: str, fmt,
                 devices_per_host: int | None = None):
    """One bar per device, in the device's colour; a device given ``{part: value}`` gets a bar
    stacked by part, each part in its own colour with a legend."""
    devices = sorted(values_by_device)
    parts = list(dict.fromkeys(k for d in devices if isinstance(values_by_device[d], Mapping)
                               for k in values_by_device[d]))
    labels = [f"d{d}" for d in devices]
    if parts:
        bottom = np.zeros(len(devices))
        for i, part in enumerate(parts):
            heights = np.array([float(values_by_device[d].get(part, 0)) for d in devices])
            ax.bar(labels, heights, bottom=bottom, color=_PART_CMAP(i % 8), edgecolor="black", lw=0.5,
                   label=f"{part}: {fmt(heights.sum())} in all")
            bottom += heights
        values = list(bottom)
        ax.legend(fontsize=9, loc="upper right", ncol=min(3, len(parts)))
    else:
        values = [values_by_device[d] for d in devices]
        ax.bar(labels, values, color=[device_colour(d) for d in devices], edgecolor="black", lw=0.5)
    top = max(values + [1])
    if devices_per_host:
        for h, start in enumerate(range(0, len(devices), devices_per_host)):
            group = values[start:start + devices_per_host]
            if h % 2 == 0:
                ax.axvspan(start - 0.5, start + len(group) - 0.5, color="0.92", zorder=0)
            ax.text(start + (len(group) - 1) / 2, top * 1.12, f"host {h}: {fmt(sum(group))}", ha="center", fontsize=9)
    ax.set_ylim(0, top * (1.6 if parts else 1.25))
    ax.set_ylabel(ylabel)
    if len(devices) > 12:
        ax.tick_params(axis="x", labelsize=9)
    return values


def _spread(values: Sequence[float], fmt, what: str) -> str:
    lo, hi = min(values), max(values)
    return f"every device {what} {fmt(lo)}" if lo == hi else f"devices {what} from {fmt(lo)} to {fmt(hi)}"


def plot_bytes_per_device(bytes_by_device: Mapping[int, int | Mapping[str, int]], devices_per_host: int | None = None,
                          ax=None, title: str = "Bytes written per device", claim: str | None = None):
    """Bars of bytes per device. A device given ``{tensor: bytes}`` gets a bar stacked by tensor.
    With ``devices_per_host``, hosts are shaded and totalled. The claim under the title says how
    the bytes spread over devices (or hosts), unless ``claim`` gives another."""
    ax = _axes(ax, (max(6, 0.45 * len(bytes_by_device) + 2), 3.4))
    values = _device_bars(bytes_by_device, ax, "bytes", human_bytes, devices_per_host)
    if claim is None:
        if devices_per_host:
            hosts = [sum(values[i:i + devices_per_host]) for i in range(0, len(values), devices_per_host)]
            claim = " / ".join(f"host {h}: {v / max(sum(hosts), 1):.0%}" for h, v in enumerate(hosts)) + " of the bytes"
        else:
            claim = _spread(values, human_bytes, "has")
    return _title(ax, f"{title} (total {human_bytes(sum(values))})", claim)


def plot_chunk_reads(reads_by_device: Mapping[int, int], ax=None, title: str = "Chunks read per device"):
    """Bars: how many saved chunks each target device reads (whole chunks)."""
    ax = _axes(ax, (max(6, 0.4 * len(reads_by_device) + 2), 3.2))
    values = _device_bars({d: int(n) for d, n in reads_by_device.items()}, ax, "chunks read", str)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _title(ax, f"{title} (total {sum(values)})", _spread(values, lambda n: f"{n:g} chunk(s)", "reads"))


def plot_read_amplification(ratios: Mapping[str, float], ax=None, title: str = "Read amplification",
                            parts: Sequence[str] | None = None):
    """Bars: bytes read / bytes needed for several restore layouts (1.0 = nothing read in vain).
    ``parts``: the names in the order a stacked device chart beside it (:func:`plot_bytes_per_device`)
    got them, so that each name has the same colour in both."""
    ax = _axes(ax, (1.6 * len(ratios) + 2, 3.4))
    names = list(ratios)
    values = [float(ratios[n]) for n in names]
    colours = ([_PART_CMAP(list(parts).index(n) % 8) for n in names] if parts is not None else
               [device_colour(2 * i + 1) for i in range(len(names))])
    bars = ax.bar(names, values, color=colours, edgecolor="black", lw=0.5)
    for bar, v in zip(bars, values):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{v:g}x", ha="center", va="bottom", fontsize=10)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_ylim(0, max(values + [1]) * 1.2)
    ax.set_ylabel("bytes read / bytes needed")
    worst, best = names[values.index(max(values))], names[values.index(min(values))]
    return _title(ax, title, f"{worst} reads {max(values):g}x what it needs, {best} {min(values):g}x")


def plot_byte_runs(runs: Sequence[tuple[int, int]], reads: Sequence[tuple[int, int]] | None = None,
                   span: tuple[int, int] | None = None, ax=None, title: str = "Bytes of one shard in the file"):
    """A tensor's bytes as a strip: the shard's runs (top) and, if given, the coalesced reads that
    cover them (bottom), with the bytes read in vain hatched. ``span`` is the tensor's (start, end)
    in the file; offsets are absolute."""
    ax = _axes(ax, (10, 1.6 if reads is None else 2.4))
    runs = sorted(runs)
    start, end = span if span is not None else (runs[0][0], runs[-1][0] + runs[-1][1])
    rows = [("runs", runs)] + ([("reads", sorted(reads))] if reads is not None else [])
    for y, (label, pieces) in enumerate(reversed(rows)):
        ax.add_patch(Rectangle((start, y + 0.15), end - start, 0.7, facecolor="0.93", edgecolor="0.6", lw=0.5))
        for offset, length in pieces:
            colour = device_colour(0) if label == "runs" else device_colour(2)
            ax.add_patch(Rectangle((offset, y + 0.15), length, 0.7, facecolor=colour, edgecolor="black", lw=0.4))
        if label == "reads":  # hatch what a read fetches between the runs it covers
            for offset, length in pieces:
                inside = [(o, n) for o, n in runs if offset <= o < offset + length]
                cursor = offset
                for o, n in inside:
                    if o > cursor:
                        ax.add_patch(Rectangle((cursor, y + 0.15), o - cursor, 0.7, facecolor="white",
                                               hatch="///", edgecolor="0.3", lw=0.3))
                    cursor = max(cursor, o + n)
        needed = sum(n for _, n in pieces)
        ax.text(start - (end - start) * 0.01, y + 0.5, f"{label}: {len(pieces)}\n{human_bytes(needed)}",
                ha="right", va="center", fontsize=9)
    ax.set_xlim(start - (end - start) * 0.13, end + (end - start) * 0.01)
    ax.set_ylim(0, len(rows))
    ax.set_yticks([])
    ax.set_xlabel("byte offset in the file")
    needed = sum(n for _, n in runs)
    if reads is None:
        claim = f"{len(runs)} run(s), {human_bytes(needed)} needed"
    else:
        fetched = sum(n for _, n in reads)
        claim = f"{len(runs)} runs in {len(reads)} read(s): {fetched / max(needed, 1):.3g}x the bytes needed"
    return _title(ax, title, claim)


def plot_presharding_reads(chunks_by_layout: Mapping[str, Mapping[int, int]], ax=None, log: bool = True,
                           title: str = "Chunks each target device reads"):
    """Grouped bars per target device: how many saved chunks it reads from each checkpoint layout
    (``{layout name: {device_id: chunks}}``)."""
    names = list(chunks_by_layout)
    devices = sorted(next(iter(chunks_by_layout.values())))
    ax = _axes(ax, (max(7, 0.5 * len(devices) + 2), 3.4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [chunks_by_layout[name][d] for d in devices]
        ax.bar(np.arange(len(devices)) + (i - (len(names) - 1) / 2) * width, values, width,
               color=device_colour(2 * i + 1), edgecolor="black", lw=0.4,
               label=f"{name}: {sum(values)} chunk reads")
    ax.set_xticks(np.arange(len(devices)), [f"d{d}" for d in devices], fontsize=9)
    top = max(max(v.values()) for v in chunks_by_layout.values())
    if log:
        ax.set_yscale("log", base=2)
        ax.set_ylim(0.5, max(top, 1) * 8)  # room for the legend above the bars
    else:
        ax.set_ylim(0, top * 1.4)
    ax.set_ylabel("chunks read" + (" (log scale)" if log else ""))
    ax.legend(fontsize=9, loc="upper right")
    totals = {name: sum(chunks_by_layout[name].values()) for name in names}
    worst, best = max(totals, key=totals.get), min(totals, key=totals.get)
    return _title(ax, title, f"{worst}: {totals[worst]} chunk reads; {best}: {totals[best]}"
                  + (f" ({totals[worst] / max(totals[best], 1):g}x fewer)" if totals[worst] != totals[best] else ""))


_STATUS_COLOURS = {"mastered": "#1a7f37", "attempted": "#d29922", "not started": "#ffffff"}  # not started: empty


def plot_progress(rows: Sequence[tuple[str, int, float, float, str]], ax=None, title: str = "Best score per problem"):
    """One bar per problem, grouped by unit: the best score as a share of its points, coloured by
    status. ``rows`` are ``(problem id, unit, best score, points, status)``, status one of
    "mastered", "attempted", "not started"."""
    ax = _axes(ax, (max(7, 0.42 * len(rows) + 2), 3.2))
    x, gap, ticks = 0.0, 0.8, []
    last_unit = None
    for pid, unit, best, points, status in rows:
        if last_unit is not None and unit != last_unit:
            x += gap
        last_unit = unit
        share = best / points if points else 0.0
        # The whole problem as an empty outline (dashed for one not started), filled up to the share earned.
        ax.bar(x, 1.0, 0.8, color="white", edgecolor="#8c959f", lw=0.6, ls="--" if status == "not started" else "-")
        if status != "not started":
            ax.bar(x, max(share, 0.02), 0.8, color=_STATUS_COLOURS.get(status, "#8c959f"), edgecolor="black", lw=0.4)
        ticks.append((x, pid))
        x += 1
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=9)
    ax.set_ylim(0, 1.25)
    ax.set_yticks([0, 0.5, 1], ["0", "half", "all"])
    ax.set_ylabel("points earned")
    from matplotlib.patches import Patch

    # Swatches made from the bars' own colours (an empty bar() would take the colour cycle's blue).
    ax.legend(handles=[Patch(facecolor=colour, edgecolor="#8c959f" if status == "not started" else "black",
                             ls="--" if status == "not started" else "-", lw=0.6, label=status)
                       for status, colour in _STATUS_COLOURS.items()], fontsize=9, loc="upper right", ncol=3)
    if rows and all(status == "not started" for *_, status in rows):
        ax.text(x / 2 - 0.5, 0.5, "Nothing graded yet: run make check (or a practice set) to record your scores here",
                ha="center", va="center", fontsize=10, color="#57606a")
    tally = {status: sum(1 for *_, st in rows if st == status) for status in _STATUS_COLOURS}
    return _title(ax, title, ", ".join(f"{n} {status}" for status, n in tally.items()))


def plot_save_timeline(runs: Mapping[str, tuple[float, float, float]], ax=None):
    """Two lanes per run, in seconds from the save's start: training (waiting for the save, then
    training steps) and the save (until it was seen committed). ``runs`` maps a name to
    ``(training resumed, training done, save committed by)``."""
    ax = _axes(ax, (8, 1.1 * len(runs) + 1.4))
    labels = []
    for i, (name, (resumed, trained, committed)) in enumerate(runs.items()):
        y = 2 * i
        ax.barh(y + 0.5, resumed, color="lightgrey", edgecolor="black", lw=0.5,
                label="training waits" if i == 0 else None)
        ax.barh(y + 0.5, trained - resumed, left=resumed, color=device_colour(0), edgecolor="black", lw=0.5,
                label="training steps" if i == 0 else None)
        ax.barh(y - 0.5, committed, color=device_colour(2), edgecolor="black", lw=0.5,
                label="save, until committed" if i == 0 else None)
        labels += [(y - 0.5, f"{name}: save"), (y + 0.5, f"{name}: training")]
    ax.set_yticks([y for y, _ in labels], [text for _, text in labels])
    ax.set_xlabel("seconds from the start of the save")
    ax.legend(loc="lower right", fontsize=8)
    waits = {name: r[0] for name, r in runs.items()}
    fastest, slowest = min(waits, key=waits.get), max(waits, key=waits.get)
    return _title(ax, "Saving while training", f"training waits {waits[slowest] * 1e3:.0f} ms ({slowest}) "
                                                f"vs {waits[fastest] * 1e3:.0f} ms ({fastest})")


def plot_preemption(reports: Mapping[str, object], ax=None, before: float = 1.5):
    """One lane per host of each run (:class:`ckptlab.graceful.Report`), in seconds from the SIGTERM:
    training steps, evaluations and saves as each host logged them, the SIGTERM at 0 and the grace
    window's end (SIGKILL) as lines; a host's lane ends where it ended."""
    ax = _axes(ax, (9, 0.55 * sum(len(r.events) for r in reports.values()) + 1.6))
    labels, y = [], 0
    shown = set()

    def bar(row, start, end, colour, what):
        ax.barh(row, max(end - start, 0.01), left=start, color=colour, edgecolor="black", lw=0.3, height=0.6,
                label=what if what not in shown else None)
        shown.add(what)

    for name, report in reports.items():
        top = y
        for h, events in enumerate(report.events):
            end = report.exited_after[h]
            opened: dict = {}
            for t, event, _ in events:
                if t < -before:
                    continue
                if event in ("eval", "save"):
                    opened[event] = t
                elif event == "eval_done" and "eval" in opened:
                    bar(y, opened.pop("eval"), t, "#f5b041", "evaluation (nothing checked)")
                elif event == "saved":
                    bar(y, opened.pop("save", t - 0.03), t, device_colour(2), "save, committed")
                elif event == "step":
                    bar(y, t, t + 0.04, device_colour(0), "training step")
            for event, t in opened.items():  # cut short by the SIGKILL
                bar(y, t, end, "#f5b041" if event == "eval" else "lightgrey",
                    "evaluation (nothing checked)" if event == "eval" else "save, never committed")
            killed = report.exits[h] == -9
            ax.plot([end], [y], marker="X" if killed else "o", color="red" if killed else "black", ms=8,
                    label=("SIGKILL" if killed else "exit") if ("K" if killed else "E") not in shown else None)
            shown.add("K" if killed else "E")
            labels.append((y, f"{name}: host {h}"))
            y -= 1
        ax.vlines(report.grace, y + 0.6, top + 0.4, color="red", lw=2)  # this run's grace window ends
        ax.hlines(y + 0.5, -before, max(r.grace for r in reports.values()), color="grey", lw=0.5)
    ax.axvline(0, color="red", lw=1.2, ls="--", label="SIGTERM")
    ax.set_yticks([r for r, _ in labels], [text for _, text in labels])
    ax.set_xlim(-before, max(r.grace for r in reports.values()) + 0.3)
    ax.set_xlabel("seconds from the SIGTERM (a red bar: the run's grace window ends, SIGKILL)")
    ax.legend(loc="lower right", fontsize=7)
    return _title(ax, "Preemption: SIGTERM, a grace window, SIGKILL",
                  "the hosts that save in the window lose nothing; the others lose every step since their last save")


def plot_save_times(measured: Mapping[int, float], nbytes: int, bandwidth: float, ax=None):
    """Measured save times (shards -> seconds) beside the bound "slowest host's bytes / its
    bandwidth": flat for one host, P / (N x bandwidth) for N hosts of their own."""
    ax = _axes(ax, (6.5, 3.6))
    shards = sorted(measured)
    ax.plot(shards, [measured[n] * 1e3 for n in shards], "o-", color=device_colour(0), label="measured here (one host)")
    ax.plot(shards, [nbytes / bandwidth * 1e3] * len(shards), "--", color="black", label="bound, one host")
    ax.plot(shards, [nbytes / n / bandwidth * 1e3 for n in shards], ":", color=device_colour(2),
            label="bound, one host per shard (O(P / N))")
    ax.set_xticks(shards)
    ax.set_xlabel("shards")
    ax.set_ylabel("ms per save")
    ax.set_ylim(0, max(max(measured.values()) * 1e3, nbytes / bandwidth * 1e3) * 1.25)
    ax.legend(fontsize=8)
    ratio = measured[shards[-1]] / measured[shards[0]]
    return _title(ax, "Save time against shards", f"{shards[-1]} shards on one host take {ratio:.2f}x the time of "
                                                  f"{shards[0]}, not 1/{shards[-1] // shards[0]}")


def plot_peaks(peaks: Mapping[str, tuple[float, float]], budget: float | None = None, ax=None,
               title: str = "Peak host memory of real restores", claim: str = "",
               inner: str = "bytes of the arrays it ends with"):
    """Measured peaks (label -> (peak bytes, a reference size: by default the bytes the work ends
    with; ``inner`` names it)): a bar for each peak, the reference marked inside it, and a budget
    line if given."""
    ax = _axes(ax, (7.5, 3.8))
    labels = list(peaks)
    mib = 2**20
    ax.bar(range(len(labels)), [peaks[k][0] / mib for k in labels], color=[device_colour(2 * i) for i in range(len(labels))],
           label="peak resident memory (measured)")
    ax.bar(range(len(labels)), [peaks[k][1] / mib for k in labels], width=0.35, color="black", alpha=0.6,
           label=inner)
    if budget is not None:
        ax.axhline(budget / mib, ls="--", color="black", lw=1)
        ax.text(len(labels) - 0.5, budget / mib, " budget", va="bottom", ha="right", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("MiB")
    ax.set_ylim(0, max([peaks[k][0] for k in labels] + [budget or 0]) / mib * 1.3)  # room for the legend
    ax.legend(fontsize=8, loc="upper right")
    return _title(ax, title, claim)


# Lesson 10: a frontier run, simulated (ckptlab.frontier). Times in hours or seconds, as labelled.

def plot_mtbf_scale(gpus: Sequence[int], mtbf_hours: Sequence[float], marked: Mapping[str, tuple[int, float]],
                    ax=None):
    """The job's MTBF (hours) against its GPU count, log-log: ``mtbf_hours[i]`` for ``gpus[i]``, and
    the points in ``marked`` (label -> (GPUs, hours)) on top. Rates add, so the line falls as 1 / N."""
    ax = _axes(ax, (6.5, 3.8))
    ax.loglog(gpus, mtbf_hours, "-", color=device_colour(0), label="job MTBF = GPU MTBF / N")
    for i, (label, (n, hours)) in enumerate(marked.items()):
        ax.plot([n], [hours], "o", color=device_colour(2 + 2 * i), ms=7, zorder=3)
        ax.annotate(f"{label}: {hours:.3g} h", (n, hours), textcoords="offset points", xytext=(8, 6), fontsize=9)
    ax.set_xlabel("GPUs in the job")
    ax.set_ylabel("job MTBF (hours)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=9, loc="upper right")
    return _title(ax, "A job's mean time between failures against its size",
                  f"{gpus[-1] / gpus[0]:.0f}x the GPUs, 1/{mtbf_hours[0] / mtbf_hours[-1]:.0f} the MTBF: rates add")


def plot_goodput_interval(intervals: Sequence[float], exact: Sequence[float],
                          simulated: Mapping[float, tuple[float, float]], optimum: float, marks: Mapping[str, float],
                          ax=None):
    """Goodput against the interval between saves (seconds, log axis): the exact closed form as a
    line, simulated means with their 95% Monte Carlo intervals (interval -> (mean, half-width)) as
    points with bars, and named intervals (Young's, half the optimum ...) as vertical lines."""
    ax = _axes(ax, (7, 3.9))
    ax.semilogx(intervals, exact, "-", color="black", lw=1.2, label="exact closed form")
    taus = sorted(simulated)
    ax.errorbar(taus, [simulated[t][0] for t in taus], yerr=[simulated[t][1] for t in taus], fmt="o",
                color=device_colour(2), ms=5, capsize=3, label="simulated (95% Monte Carlo interval)")
    for i, (label, tau) in enumerate(marks.items()):
        ax.axvline(tau, ls=("--", ":", "-.")[i % 3], color=device_colour(4 + 2 * i), lw=1, label=f"{label}: {tau:.0f} s")
    ax.set_xlabel("training time between saves (s)")
    ax.set_ylabel("goodput")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=9, loc="lower center")
    ax.set_ylim(min(exact) - 0.02, max(exact) + 0.015)
    return _title(ax, "Goodput against the interval between saves",
                  f"flat around the optimum ({optimum:.0f} s); the simulated points lie on the curve")


def plot_time_budget(rows: Mapping[str, Mapping[str, float]], ax=None):
    """Where a run's wall time went, one stacked bar per plan (label -> {part: fraction of the wall
    time}), parts in their order: training kept first."""
    ax = _axes(ax, (8, 0.55 * len(rows) + 1.6))
    labels = list(rows)
    parts = list(next(iter(rows.values())))
    colours = [device_colour(0), "#e15759", "#f28e2b", "#b0b0b0", device_colour(8)]
    left = np.zeros(len(labels))
    for i, part in enumerate(parts):
        widths = np.array([rows[label][part] for label in labels])
        ax.barh(range(len(labels)), widths, left=left, color=colours[i % len(colours)], edgecolor="black", lw=0.4,
                label=part)
        left += widths
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.invert_yaxis()
    kept = {label: rows[label][parts[0]] for label in labels}
    start = max(0.0, np.floor((min(kept.values()) - 0.02) * 20) / 20)  # the costs are the point: start near them
    ax.set_xlim(start, 1)
    ax.set_xlabel(f"share of the run's wall time (the axis starts at {start:.0%})")
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5))
    best, worst = max(kept, key=kept.get), min(kept, key=kept.get)
    return _title(ax, "Where the run's wall time went",
                  f"{parts[0]}: {kept[worst]:.1%} ({worst}) to {kept[best]:.1%} ({best})")


def plot_goodput_scale(gpus: Sequence[int], goodputs: Mapping[str, Sequence[float]], target: float,
                       marked: int | None = None, ax=None):
    """The best goodput against the GPU count (log axis), one line per storage bandwidth (label ->
    goodputs), a target as a horizontal line, a GPU count of note as a vertical one."""
    ax = _axes(ax, (7, 3.9))
    for i, (label, values) in enumerate(goodputs.items()):
        ax.semilogx(gpus, values, "o-", ms=3, color=device_colour(2 * i), label=label)
    ax.axhline(target, ls="--", color="black", lw=1)
    ax.text(gpus[0], target, f" target {target:.0%}", va="bottom", fontsize=9)
    if marked is not None:
        ax.axvline(marked, ls=":", color="grey", lw=1)
    ax.set_xlabel("GPUs in the job")
    ax.set_ylabel("best goodput")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=9, loc="lower left")
    reach = max((n for values in goodputs.values() for n, g in zip(gpus, values) if g >= target), default=gpus[0])
    claim = f"past {reach:,} GPUs no bandwidth drawn reaches {target:.0%}"
    if marked in gpus:
        at = [values[list(gpus).index(marked)] for values in goodputs.values()]
        claim = f"at {marked:,} GPUs the bandwidths span {min(at):.1%} to {max(at):.1%}; " + claim
    return _title(ax, "Goodput against scale, for a few storage bandwidths", claim)
