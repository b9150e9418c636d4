"""Small Flax models used by the lessons, the problems and the grader."""

from __future__ import annotations

from collections.abc import Sequence

from flax import nnx


class MLP(nnx.Module):
    """Linear layers with BatchNorm (then ReLU) between them.

    ``MLP([4, 8, 3], rngs=nnx.Rngs(0))`` has ``layers/0`` (4 -> 8), ``norms/0`` (8 features) and
    ``layers/1`` (8 -> 3). BatchNorm carries parameters (``scale``, ``bias``) and batch statistics
    (``mean``, ``var``): all four are saved in a checkpoint, only the first two are parameters.
    """

    def __init__(self, layer_sizes: Sequence[int], *, rngs: nnx.Rngs):
        sizes = [int(s) for s in layer_sizes]
        if len(sizes) < 2:
            raise ValueError(f"layer_sizes needs at least an input and an output size, got {sizes}")
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.norms = nnx.List([nnx.BatchNorm(s, rngs=rngs) for s in sizes[1:-1]])

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.norms):
                x = nnx.relu(self.norms[i](x))
        return x
