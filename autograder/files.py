"""Arguments that are files: checkpoints the grader saves fresh, for each learner, into the
worker's own temporary directory (removed with it). Grader side only: it runs trusted code."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CheckpointArg:
    """A checkpoint saved with Orbax's StandardCheckpointer (OCDBT) on a mesh over the first devices.

    ``arrays`` is ``((name, shape, dtype, spec_entries), ...)``; ``mesh`` is ``((axis, size), ...)``.
    Values are drawn from ``seed``, so the reference and the learner read the same data.
    """

    arrays: tuple
    mesh: tuple
    seed: int

    def values(self) -> dict:
        rng = np.random.default_rng(self.seed)
        out = {}
        for name, shape, dtype, _ in self.arrays:
            if np.dtype(dtype).kind == "f":
                out[name] = rng.standard_normal(shape).astype(dtype)
            else:
                out[name] = rng.integers(-100, 100, size=shape).astype(dtype)
        return out

    def save(self, directory: str) -> str:
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh = course_mesh(dict(self.mesh))
        values = self.values()
        tree = {name: jax.device_put(values[name], NamedSharding(mesh, PartitionSpec(*spec)))
                for name, _, _, spec in self.arrays}
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(directory, tree)
        checkpointer.wait_until_finished()
        return directory


def realize(value, workdir: str):
    """Save every :class:`CheckpointArg` inside ``value`` under ``workdir``; return paths instead."""
    if isinstance(value, CheckpointArg):
        return value.save(os.path.join(workdir, f"ckpt-{uuid.uuid4().hex[:12]}"))
    if isinstance(value, dict):
        return {k: realize(v, workdir) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(realize(v, workdir) for v in value)
    return value


def has_files(value) -> bool:
    if isinstance(value, CheckpointArg):
        return True
    if isinstance(value, dict):
        return any(has_files(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_files(v) for v in value)
    return False
