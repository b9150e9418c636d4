"""Orbax checkpoints the grader saves (StandardCheckpointer, OCDBT) on a mesh over the first devices:
a checkpoint of named arrays (:class:`CheckpointArg`), a training run's (:class:`TrainingCheckpointArg`),
a model's nested dicts (:class:`TreeCheckpointArg`). Each says what it places on the devices
(``placed``); :meth:`CheckpointArg.save` saves it, for every one of them."""

from __future__ import annotations

import math
import os
import uuid
from dataclasses import dataclass

import numpy as np

from autograder.wall.kinds.base import (
    MOST_SHOWN,
    ORBAX,
    FileKind,
    entries_in_words,
    named_dtype,
    shape_in_words,
)


def saved_on(arg: CheckpointArg) -> str:
    """Where a checkpoint was saved, in words: one device, or its mesh."""
    shape = dict(arg.mesh)
    n = math.prod(shape.values())
    return "saved on 1 device" if n == 1 else f"saved on {n} devices, mesh {shape!r}"


def leaves_in_words(arg: CheckpointArg) -> str:
    """Each leaf's name, shape, dtype and (on more than one device) spec."""
    placed = math.prod(dict(arg.mesh).values()) > 1
    shown = []
    for name, shape, dtype, spec in arg.arrays[:MOST_SHOWN]:
        where = "" if not placed else " replicated" if all(e is None for e in spec) else " as P" + entries_in_words(spec)
        shown.append(f"{name} {shape_in_words(shape)} {dtype}{where}")
    if len(arg.arrays) > MOST_SHOWN:
        shown.append(f"and {len(arg.arrays) - MOST_SHOWN} more")
    return ", ".join(shown)


@dataclass(frozen=True)
class CheckpointArg(FileKind):
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
            dtype = named_dtype(dtype)
            if dtype.kind == "f" or dtype.name == "bfloat16":
                out[name] = rng.standard_normal(shape).astype(dtype)
            else:
                out[name] = rng.integers(-100, 100, size=shape).astype(dtype)
        return out

    def placed(self) -> dict:
        """The tree this checkpoint holds, each leaf on the devices as it is saved."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh = course_mesh(dict(self.mesh))
        values = self.values()
        return {name: jax.device_put(values[name], NamedSharding(mesh, PartitionSpec(*spec)))
                for name, _, _, spec in self.arrays}

    def save(self, directory: str) -> str:
        """Save :meth:`placed` (each kind's own tree) to ``directory`` with Orbax's StandardCheckpointer."""
        import orbax.checkpoint as ocp

        tree = self.placed()  # (the host copies it drew are gone: the grader's memory holds the devices' alone)
        with ORBAX:
            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory

    def realize(self, workdir: str, made=None) -> str:
        return self.save(os.path.join(workdir, f"ckpt-{uuid.uuid4().hex[:12]}"))

    def words(self) -> str:
        return f"<a checkpoint folder (Orbax StandardCheckpointer) {saved_on(self)}: {leaves_in_words(self)}>"


@dataclass(frozen=True)
class TrainingCheckpointArg(CheckpointArg):
    """A training run's checkpoint, as Unit 6 starts from: ``{"params": ..., "opt_state": {"mu":
    ..., "nu": ...}, "step": ...}`` saved with Orbax's StandardCheckpointer on the training mesh.
    ``values()`` are the parameters (``arrays`` as for :class:`CheckpointArg`); the optimizer's
    moments have the parameters' shapes, dtypes and specs, drawn from ``seed`` too."""

    step: int = 1000

    def state(self) -> dict:
        params = self.values()
        rng = np.random.default_rng(self.seed + 1)
        moments = {k: {name: (rng.standard_normal(v.shape) * scale).astype(v.dtype) for name, v in params.items()}
                   for k, scale in (("mu", 1e-3), ("nu", 1e-6))}
        return {"params": params, "opt_state": moments, "step": np.int64(self.step)}

    def specs(self) -> dict:
        return {name: spec for name, _, _, spec in self.arrays}

    def placed(self) -> dict:
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh, specs = course_mesh(dict(self.mesh)), self.specs()

        def place(path, value):
            spec = specs[path[-1].key] if np.ndim(value) else ()
            return jax.device_put(value, NamedSharding(mesh, PartitionSpec(*spec)))

        return jax.tree_util.tree_map_with_path(place, self.state())

    def words(self) -> str:
        return (f"<a training checkpoint folder (Orbax StandardCheckpointer) of step {self.step}, {saved_on(self)}: "
                f"'params' ({leaves_in_words(self)}), 'opt_state' (AdamW's 'mu' and 'nu', each shaped, typed and "
                "sharded as the parameters) and 'step'>")


def _edit_in_words(edit) -> str:
    kind, path, *rest = edit
    return {
        "drop": lambda: f"{path} is left out",
        "add": lambda: f"{path} {shape_in_words(rest[0])} {rest[1]} is added",
        "cast": lambda: f"{path} is cast to {rest[0]}",
        "reshape": lambda: f"{path} is reshaped to {shape_in_words(rest[0])} (new values)",
        "scale": lambda: f"{path}'s values are scaled by {rest[0]!r}",
        "set": lambda: f"one element of {path} is changed",
    }[kind]()


@dataclass(frozen=True)
class TreeCheckpointArg(CheckpointArg):
    """A model's checkpoint as nested dicts, as training code saves one (Unit 7): ``arrays`` names
    each leaf by its path (``"params/layer0/kernel"``). Integers are drawn above what the float of
    their width holds exactly (2**24 for int32, 2**53 for int64), so that a cast shows. ``edits``
    change what ``seed`` draws, in order: two checkpoints of one model that differ as planted.
    Each leaf is placed as ``NamedSharding(mesh, PartitionSpec(*spec_entries))``.

    Edits: ``("drop", path)``, ``("add", path, shape, dtype)``, ``("cast", path, dtype)``,
    ``("reshape", path, shape)`` (new values), ``("scale", path, factor)``, ``("set", path, index,
    value)`` (one element of the flattened array)."""

    edits: tuple = ()

    def values(self) -> dict:
        def draw(rng, shape, dtype):
            dtype = named_dtype(dtype)
            if dtype.kind in "iu":
                low = {4: 2**24, 8: 2**53}.get(dtype.itemsize, 0)
                return rng.integers(low, np.iinfo(dtype).max // 2, size=shape, endpoint=True).astype(dtype)
            return rng.standard_normal(shape).astype(dtype)

        rng = np.random.default_rng(self.seed)
        out = {path: draw(rng, shape, dtype) for path, shape, dtype, _ in self.arrays}
        for number, (kind, path, *rest) in enumerate(self.edits):
            edit_rng = np.random.default_rng((self.seed, number))
            if kind == "drop":
                del out[path]
            elif kind == "add":
                out[path] = draw(edit_rng, *rest)
            elif kind == "cast":
                out[path] = out[path].astype(named_dtype(rest[0]))
            elif kind == "reshape":
                out[path] = draw(edit_rng, rest[0], out[path].dtype.name)
            elif kind == "scale":
                out[path] = (out[path].astype(np.float64) * rest[0]).astype(out[path].dtype)
            elif kind == "set":
                changed = out[path].copy()
                changed.reshape(-1)[rest[0]] = rest[1]
                out[path] = changed
            else:
                raise ValueError(f"unknown edit {kind!r}")
        return out

    def placed(self) -> dict:
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh = course_mesh(dict(self.mesh))
        specs = {path: spec for path, _, _, spec in self.arrays}
        tree: dict = {}
        for path, value in self.values().items():
            keys = path.split("/")
            where = tree
            for key in keys[:-1]:
                where = where.setdefault(key, {})
            # A 64-bit integer stays NumPy (JAX without x64 would make it int32), as a data
            # loader's counters are saved beside a model's jax.Arrays.
            big = value.dtype.kind in "iu" and value.dtype.itemsize == 8 and not jax.config.jax_enable_x64
            spec = PartitionSpec(*specs.get(path, ()))  # (a leaf an edit added: replicated)
            where[keys[-1]] = value if big else jax.device_put(value, NamedSharding(mesh, spec))
        return tree

    def words(self) -> str:
        text = (f"<a checkpoint folder of nested dicts (Orbax StandardCheckpointer) {saved_on(self)}: "
                f"{leaves_in_words(self)}")
        if self.edits:
            text += ", except that " + ", ".join(_edit_in_words(edit) for edit in self.edits)
        return text + ">"
