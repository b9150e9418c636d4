"""Each figure of the lessons shows its one claim: checked on what is drawn (colours, labels,
counts, what lies on top of what), with the lessons' own inputs, not only that it draws."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import same_color, to_hex  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from ckptlab import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _rects(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def _texts(ax):
    return {t.get_text(): t for t in ax.texts}


def test_a_bias_next_to_its_kernel_is_a_visible_bar():
    # Lesson 1: nn.Dense(256) on inputs of 512
    ax = plotting.plot_param_counts({"params/bias": 256, "params/kernel": 131072}, title="nn.Dense(256)")
    ax.figure.canvas.draw()
    width = ax.get_window_extent().width
    bars = [p for p in _rects(ax) if p.get_width() > 0]
    assert len(bars) == 2 and ax.get_xscale() == "log"
    for bar in bars:  # on screen, each bar is at least a tenth of the axis wide
        (x0, _), (x1, _) = ax.transData.transform([(bar.get_x(), 0), (bar.get_x() + bar.get_width(), 0)])
        assert x1 - x0 > 0.1 * width
    assert "params/kernel holds 99.8% of the parameters" in ax.get_title()
    even = plotting.plot_param_counts({"a": 10, "b": 12})
    assert even.get_xscale() == "linear"


def test_replica_parallel_figure_shows_who_writes_each_chunk():
    # Lesson 2: kernel (64, 32) as P('x', None) on x=4, y=2; Orbax's replica slices: device d writes rows 8d:8d+8
    writers = {d: ((8 * d, 8 * d + 8), (0, 32)) for d in range(8)}
    ax = plotting.plot_sharded_array((64, 32), {"x": 4, "y": 2}, ("x", None), chunk_shape=(8, 32), writers=writers)
    texts = _texts(ax)
    assert {f"{i}.0 \u2190 d{i}" for i in range(8)} <= set(texts)
    assert "d0,1" not in "".join(t for t in texts if "\u2190" in t)
    for d in range(8):  # the slice a device writes is filled with that device's colour, opaque
        filled = [p for p in _rects(ax) if p.get_fill() and p.get_xy() == (0, 8 * d) and p.get_height() == 8]
        assert filled and same_color(filled[0].get_facecolor(), plotting.device_colour(d))
    assert not same_color(plotting.device_colour(0), plotting.device_colour(1))
    assert "replicas share the write: d0 writes 0.0, d1 writes 1.0" in ax.get_title()
    off = plotting.plot_sharded_array((64, 32), {"x": 4, "y": 2}, ("x", None), chunk_shape=(16, 32),
                                      writers={d: ((16 * (d // 2), 16 * (d // 2) + 16), (0, 32)) for d in (0, 2, 4, 6)})
    assert "one replica writes each shard" in off.get_title()


@pytest.mark.parametrize("mesh,spec,overlaps", [({"x": 8}, ("x",), 1), ({"x": 16}, ("x",), 1), ({"x": 16}, (None, "x"), 8)])
def test_saved_chunk_lines_lie_above_device_boundaries_and_labels_are_not_struck_through(mesh, spec, overlaps):
    # Lesson 3: chunks (8, 32) saved on 8 devices, seen from three targets
    ax = plotting.plot_sharded_array((64, 32), mesh, spec, chunk_shape=(8, 32))
    chunk_lines = [p for p in _rects(ax) if not p.get_fill()]
    devices = [p for p in _rects(ax) if p.get_fill()]
    assert len(chunk_lines) == 8 and len(devices) == 16 if mesh["x"] == 16 else len(devices) == 8
    top_device = max(p.get_zorder() for p in devices)
    for line in chunk_lines:  # drawn over the device boundaries, dashed, in a colour no boundary has
        assert line.get_zorder() > top_device and line.get_linestyle() != "-"
        assert not any(same_color(line.get_edgecolor(), p.get_edgecolor()) for p in devices)
    texts = _texts(ax)
    for i in range(8):  # "0.0", not "0 0": a white box above every line
        label = texts[f"{i}.0"]
        box = label.get_bbox_patch()
        assert box is not None and same_color(box.get_facecolor(), "white")
        assert label.get_zorder() > max(line.get_zorder() for line in chunk_lines)
    assert f"each device's slice overlaps {overlaps} saved chunk(s)" in ax.get_title()


def test_sharded_array_without_chunks_says_whether_devices_are_replicas():
    replicated = plotting.plot_sharded_array((64, 32), {"x": 4, "y": 2}, ("x", None))
    assert "4 shards, each held by 2 devices (replicas)" in replicated.get_title()
    assert "d0,1" in _texts(replicated)
    blocks = plotting.plot_sharded_array((64, 32), {"x": 4, "y": 2}, ("x", "y"))
    assert "8 devices, 8 different shards, no replicas" in blocks.get_title()


def test_reads_by_tensor_are_stacked_with_a_legend_in_the_bars_colours():
    # Lesson 4: each of 16 devices reads 1/16 of embed and wi, and all of the replicated scale
    per_device = {d: {"embed": 512, "layers.0.mlp.wi": 512, "final_norm.scale": 32} for d in range(16)}
    ax = plotting.plot_bytes_per_device(per_device, title="Bytes each device reads")
    legend = ax.get_legend()
    names = [t.get_text().split(":")[0] for t in legend.texts]
    assert names == ["embed", "layers.0.mlp.wi", "final_norm.scale"]
    assert "final_norm.scale: 512 B in all" in [t.get_text() for t in legend.texts]
    bar_colours = {to_hex(p.get_facecolor()) for p in _rects(ax)}
    swatches = [to_hex(h.get_facecolor()) for h in legend.legend_handles]
    assert len(set(swatches)) == 3 and set(swatches) <= bar_colours
    heights = sorted({round(p.get_height()) for p in _rects(ax) if p.get_width() > 0})
    assert heights == [32, 512] and len(_rects(ax)) >= 48  # 16 devices x 3 tensors
    amp = plotting.plot_read_amplification({"embed": 1, "layers.0.mlp.wi": 1, "final_norm.scale": 16})
    assert "final_norm.scale reads 16x what it needs, embed 1x" in amp.get_title()


def test_bytes_per_host_and_chunk_reads_say_their_spread():
    ax = plotting.plot_bytes_per_device({d: 1024 if d < 2 else 0 for d in range(8)}, devices_per_host=4)
    assert "host 0: 100% / host 1: 0% of the bytes" in ax.get_title()
    assert {"host 0: 2.0 KiB", "host 1: 0 B"} <= set(_texts(ax))
    reads = plotting.plot_chunk_reads({d: 8 for d in range(16)})
    assert "every device reads 8 chunk(s)" in reads.get_title()
    assert all(float(t).is_integer() for t in reads.get_yticks())


def test_row_shards_mesh_runs_and_presharding_titles_state_what_they_show():
    padded = plotting.plot_row_shards((10, 3), 4, pad=True)
    assert "padded to 12 rows: every shard has 3, the last 1 real + 2 padding" in padded.get_title()
    hatched = [p for p in _rects(padded) if p.get_hatch()]
    assert sum(p.get_height() for p in hatched) == 2
    assert "4 equal shards of 3 rows each" in plotting.plot_row_shards((12, 3), 4).get_title()
    mesh = plotting.plot_mesh({"x": 4, "y": 2})
    assert "along 'y' the ids step by 1, along 'x' by 2" in mesh.get_title()
    assert [t.get_text() for t in mesh.texts][:3] == ["d0", "d1", "d2"]
    runs = [(1000 + 128 * i, 16) for i in range(16)]
    one = plotting.plot_byte_runs(runs, [(1000, 128 * 15 + 16)])
    assert "16 runs in 1 read(s): 7.56x the bytes needed" in one.get_title()
    pre = plotting.plot_presharding_reads({"expert-parallel": {d: 16 for d in range(16)},
                                           "pre-sharded FSDP": {d: 1 for d in range(16)}})
    assert "expert-parallel: 256 chunk reads; pre-sharded FSDP: 16 (16x fewer)" in pre.get_title()
    dtypes = plotting.plot_bytes_by_dtype(100, {"float32": 4, "bfloat16": 2, "int8": 1})
    assert "4x the bytes in float32 as in int8" in dtypes.get_title()


def _every_figure():
    """One of each figure the lessons draw (as above), and the explorer's."""
    return [
        plotting.plot_param_counts({"params/bias": 256, "params/kernel": 131072}, title="nn.Dense(256)"),
        plotting.plot_sharded_array((64, 32), {"x": 16}, (None, "x"), chunk_shape=(8, 32), title="target"),
        plotting.plot_sharded_array((64, 32), {"x": 4, "y": 2}, ("x", "y")),
        plotting.plot_bytes_per_device({d: {"a": 1024, "b": 512} for d in range(16)}, title="Bytes each device reads"),
        plotting.plot_bytes_per_device({d: 1024 if d < 2 else 0 for d in range(8)}, devices_per_host=4),
        plotting.plot_read_amplification({"embed": 1, "layers.0.mlp.wi": 1, "final_norm.scale": 16}),
        plotting.plot_chunk_reads({d: 8 for d in range(16)}),
        plotting.plot_row_shards((10, 3), 4, pad=True),
        plotting.plot_mesh({"x": 4, "y": 2}),
        plotting.plot_presharding_reads({"expert-parallel": {d: 16 for d in range(16)},
                                         "pre-sharded FSDP": {d: 1 for d in range(16)}}),
        plotting.plot_bytes_by_dtype(100, {"float32": 4, "bfloat16": 2, "int8": 1}),
        plotting.plot_progress([("1.1", 1, 10, 10, "mastered"), ("1.2", 1, 5, 10, "attempted"),
                                ("2.1", 2, 0, 10, "not started")]),
        *_frontier_figures(),
    ]


def _frontier_figures():
    """Lesson 10's four, on small inputs shaped as the lesson's."""
    gpus = [1024, 4096, 16384, 65536]
    return [
        plotting.plot_mtbf_scale(gpus, [50000 / n for n in gpus], {"Llama 3": (16384, 3.09)}),
        plotting.plot_goodput_interval([30, 100, 300, 1000, 3000], [0.85, 0.9, 0.92, 0.9, 0.8],
                                       {100: (0.901, 0.002), 300: (0.919, 0.002)}, 304.5, {"Young": 307.3}),
        plotting.plot_time_budget({"persistent only": {"kept": 0.87, "lost": 0.06, "saving": 0.01, "restarting": 0.06},
                                   "two local copies": {"kept": 0.93, "lost": 0.01, "saving": 0.0, "restarting": 0.06}}),
        plotting.plot_goodput_scale(gpus, {"2 TB/s": [0.98, 0.96, 0.92, 0.8], "200 GB/s": [0.97, 0.94, 0.88, 0.7]},
                                    0.9, marked=16384),
    ]


def test_lesson_10s_figures_state_what_their_inputs_show():
    """Each title's claim is computed from what is drawn: the MTBF's fall with scale, the optimum, the
    time shares (each bar adds up to the wall time), the GPU count past which no bandwidth drawn
    reaches the target."""
    mtbf, interval, budget, scale = _frontier_figures()
    assert "64x the GPUs, 1/64 the MTBF" in mtbf.get_title()
    assert "(304 s)" in interval.get_title() and len(interval.lines) >= 2
    bars = _rects(budget)
    widths = {}
    for bar in bars:
        widths.setdefault(round(bar.get_y(), 3), []).append(bar.get_width())
    assert len(widths) == 2 and all(sum(w) == pytest.approx(1.0) for w in widths.values())
    assert "87.0% (persistent only) to 93.0% (two local copies)" in budget.get_title()
    assert "at 16,384 GPUs the bandwidths span 88.0% to 92.0%" in scale.get_title()
    assert "past 16,384 GPUs no bandwidth drawn reaches 90%" in scale.get_title()


def test_every_label_is_at_least_9_pt_on_screen_at_100_percent_zoom():
    """JupyterLab shows an inline figure at one image pixel per CSS pixel (96 to the inch): a text of
    s points drawn at the figure's dpi is s * dpi / 96 points on screen. Every visible text of every
    figure, titles, ticks, legends and labels inside the axes, is at least 9. Before: 7 and 8 point
    labels at 100 dpi, and the explorer's whole figure at 72 dpi (5 to 6 px). Tick labels side by side
    do not overlap."""
    import matplotlib.pyplot as plt

    from ckptlab import explore

    small, overlapping = [], []
    for ax in _every_figure():
        fig = ax.figure
        fig.canvas.draw()
        for text in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text")):
            if text.get_visible() and text.get_text().strip():
                on_screen = text.get_fontsize() * fig.dpi / 96
                if on_screen < 9:
                    small.append((ax.get_title()[:40], text.get_text()[:30], round(on_screen, 1)))
        renderer = fig.canvas.get_renderer()
        for axis in fig.axes:  # tick labels side by side never overlap
            for ticks in (axis.get_xticklabels(), axis.get_yticklabels()):
                boxes = [t.get_window_extent(renderer) for t in ticks if t.get_visible() and t.get_text()]
                overlapping.extend((axis.get_title()[:40], i) for i, (a, b) in enumerate(zip(boxes, boxes[1:]))
                                   if a.overlaps(b))
        plt.close(fig)
    assert small == []
    assert overlapping == []
    assert "dpi=100" in Path(explore.__file__).read_text()  # the explorer's PNG, at the figures' own dpi


def test_a_tensor_has_the_same_colour_in_the_stacked_reads_and_in_the_amplification_beside_them():
    """Lesson 4's two panels: a tensor's colour in the device chart's stack is its bar's colour in the
    amplification chart. Before: the second chart coloured its bars by position."""
    from matplotlib.colors import to_hex

    per_device = {d: {"embed": 64, "final_norm.scale": 16} for d in range(4)}
    left = plotting.plot_bytes_per_device(per_device)
    legend = {t.get_text().split(":")[0]: to_hex(h.get_facecolor())
              for t, h in zip(left.get_legend().texts, left.get_legend().legend_handles)}
    right = plotting.plot_read_amplification({"final_norm.scale": 4, "embed": 1}, parts=["embed", "final_norm.scale"])
    bars = {t.get_text(): to_hex(p.get_facecolor()) for t, p in zip(right.get_xticklabels(), right.patches)}
    assert bars == legend


@pytest.mark.parametrize("figsize,panels", [
    ((17, 4.5), [({"x": 8}, ("x",)), ({"x": 16}, ("x",)), ({"x": 16}, (None, "x"))]),  # lesson 3's three panels
    ((12, 4.5), [({"x": 4, "y": 2}, ("x", "y")), ({"x": 4, "y": 4}, ("x", "y"))]),
])
def test_labels_inside_a_sharded_array_do_not_overlap(figsize, panels):
    """Device labels and chunk labels drawn on one array never cover each other. Before: lesson 3's
    'another axis' panel put chunk 0.0's label over d7 and d8."""
    fig, axes = plt.subplots(1, len(panels), figsize=figsize)
    for ax, (mesh, spec) in zip(axes, panels):
        plotting.plot_sharded_array((64, 32), mesh, spec, chunk_shape=(8, 32), ax=ax)
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text().strip()]
        clashes = [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]
        assert clashes == [], (ax.get_title(), clashes)
    plt.close(fig)
