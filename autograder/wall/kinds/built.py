"""The kinds built in the worker from what crosses the wall (:mod:`autograder.wall.codec` encodes
them and builds the JAX objects): a mesh, a ``PartitionSpec``, an abstract array."""

from __future__ import annotations

from dataclasses import dataclass

from autograder.wall.kinds.base import ArgumentKind, entries_in_words


@dataclass(frozen=True)
class MeshArg(ArgumentKind):
    """A mesh to build in the worker: ``{axis: size}`` over the first devices, row-major."""

    axes: tuple  # ((name, size), ...)

    @property
    def shape(self) -> dict:
        return dict(self.axes)

    def words(self) -> str:
        return f"Mesh {self.shape!r}"


@dataclass(frozen=True)
class SpecArg(ArgumentKind):
    """A ``PartitionSpec`` to build in the worker."""

    entries: tuple

    def words(self) -> str:
        return "PartitionSpec" + entries_in_words(self.entries)


@dataclass(frozen=True)
class AbstractArg(ArgumentKind):
    """A ``jax.ShapeDtypeStruct`` (an array's shape and dtype, no values) to build in the worker: a
    model's abstract tree, as ``jax.eval_shape`` gives it."""

    shape: tuple
    dtype: str

    def words(self) -> str:
        return f"ShapeDtypeStruct(shape={tuple(self.shape)!r}, dtype={self.dtype})"
