"""The course's only doors into the libraries' private names: one module per library.

Everything else in the course (lessons, references, the grader, the tool) uses public APIs. Where a
library offers none for what the course needs (which device writes which bytes, the box a read
reserves, the exact arrays class), the private name is taken here, and only here, so that a new
release that moves it breaks one module, whose :func:`check` says which name, in which version.

- :mod:`~ckptlab.adapters.jax_internals`: JAX's arrays class and the slots its getters read.
- :mod:`~ckptlab.adapters.errors`: the error that names what moved, and in which version.
- :mod:`~ckptlab.adapters.orbax_internals`: Orbax's replica slices (who writes what), its read
  reservation, its safetensors byte-run helpers, and the device-id map its emergency (multi-tier)
  ``CheckpointManager`` needs on CPU processes.

``python -m ckptlab.adapters`` checks both against the installed libraries (the test suite does).
"""

from __future__ import annotations

from ckptlab.adapters.errors import MovedError, moved

__all__ = ["MovedError", "check", "moved"]


def check() -> list[str]:
    """Every private name the adapters use, looked up in the installed libraries: the problems found
    (each naming the library's version), empty when all are where the adapters look."""
    from ckptlab.adapters import jax_internals, orbax_internals

    return [*jax_internals.check(), *orbax_internals.check()]
