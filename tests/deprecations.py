"""The course's own code that calls the libraries' saves, loads and training APIs, run once on tiny
data (tests/house/test_stack.py runs it with deprecation warnings from the course's modules as errors):
a deprecated call put back in any of these paths fails that test."""

from __future__ import annotations

import os
import shutil


def exercise(folder: str) -> None:
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P
    from safetensors.numpy import save_file

    from ckptlab import layout, serving, training, unstacking
    from ckptlab.explore import placement, save_for_real
    from ckptlab.tool import inspection
    from ckptlab.tool.diffing import diff_checkpoints

    try:
        mesh = layout.course_mesh({"x": 16})
        # Serving: a training state saved, its parameters restored cast, the whole state restored.
        shapes = {"w": (32, 16), "b": (16,)}
        serving.save_training_state(os.path.join(folder, "train"), shapes)
        specs = {"w": P("x"), "b": P("x")}
        params = serving.restore_params(os.path.join(folder, "train"), mesh, specs)
        jax.block_until_ready(params)
        jax.block_until_ready(serving.restore_whole(os.path.join(folder, "train"), mesh, specs))
        # A safetensors file converted each way the lessons convert it.
        save_file({"a": np.ones((32, 16), np.float32), "b": np.zeros(16, np.float32)}, os.path.join(folder, "m.st"))
        for how in ("tensor_by_tensor", "safe_open", "one_save", "load_file"):
            serving.convert_safetensors(os.path.join(folder, "m.st"), os.path.join(folder, f"conv-{how}"),
                                        {"a": "w", "b": "b"}, mesh, specs, how=how)
        # A scanned model unstacked each way.
        unstacking.save_scanned(os.path.join(folder, "scanned"), {"layers": 2}, 0, 16, 32)
        for how in unstacking.HOWS:
            unstacking.unstack(os.path.join(folder, "scanned"), os.path.join(folder, f"unstacked-{how}"), mesh,
                               {"layers": 2}, 0, how=how)
        # Training with its CheckpointManager, resumed once.
        training.run(os.path.join(folder, "run"), 2, save_every=1)
        training.run(os.path.join(folder, "run"), 3, save_every=1)
        # The tool on what was written.
        inspection.inspect_checkpoint(os.path.join(folder, "train"))
        diff_checkpoints(os.path.join(folder, "conv-tensor_by_tensor"), os.path.join(folder, "conv-one_save"))
        placement((64, 32), "float32", {"x": 8}, ("x", None))
        save_for_real((64, 32), "float32", {"x": 8}, ("x", None), directory=os.path.join(folder, "explored"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
