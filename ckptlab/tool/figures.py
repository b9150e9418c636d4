"""A figure of one array of a checkpoint: where its pieces lived when saved, its chunks on top
(``python -m ckptlab inspect PATH --figure ARRAY``)."""

from __future__ import annotations

import math

from ckptlab.tool.inspection import CheckpointInfo, NotACheckpoint, spec_text


def placement_figure(info: CheckpointInfo, array_path: str, out):
    """Draw where each piece of ``array_path`` lived when it was saved (its mesh positions, replicas
    together) with the saved chunk grid on top, to the image file ``out``; 1-D and 2-D arrays. Needs
    JAX with as many devices as the saved mesh (``setup_devices``, before JAX starts)."""
    import jax
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ckptlab.plotting import plot_sharded_array

    found = {a.path: a for a in info.arrays}
    if array_path not in found:
        raise NotACheckpoint(f"no array {array_path!r} in {info.path}; its arrays: {', '.join(sorted(found))}")
    a = found[array_path]
    if len(a.shape) not in (1, 2):
        raise NotACheckpoint(f"{array_path} has {len(a.shape)} dimensions: a figure draws a 1-D or 2-D array")
    if a.grid > 4096:  # each chunk is drawn and named: more is unreadable, and a checkpoint may declare any number
        raise NotACheckpoint(f"{array_path} has {a.grid:,} chunks: a figure draws at most 4,096; pass another array")
    mesh = a.mesh or {"device": 1}
    if len(jax.devices()) < math.prod(mesh.values()):
        raise NotACheckpoint(f"{array_path} was saved on {math.prod(mesh.values())} devices and JAX runs with "
                             f"{len(jax.devices())}: its figure needs as many (in Python, setup_devices(N) before JAX "
                             "starts, then placement_figure)")
    whole = "" if a.mesh else " (one piece, d0 here)"
    fig, ax = plt.subplots()
    plot_sharded_array(a.shape, mesh, a.spec if a.spec is not None else (), chunk_shape=a.chunk_shape, ax=ax,
                       title=f"{array_path}: saved on {a.saved_on}{whole}, spec {spec_text(a.spec)}; chunks dashed")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
