"""The course's only doors into the libraries' private names: one module per library.

Everything else in the course (lessons, references, the grader, the tool) uses public APIs. Where a
library offers none for what the course needs (which device writes which bytes, the box a read
reserves, the exact arrays class), the private name is taken here, and only here, so that a new
release that moves it breaks one module, whose :func:`check` says which name, in which version.

- :mod:`~ckptlab.adapters.jax_internals`: JAX's arrays class and the slots its getters read.
- :mod:`~ckptlab.adapters.orbax_internals`: Orbax's replica slices (who writes what), its read
  reservation, and its safetensors byte-run helpers.

``python -m ckptlab.adapters`` checks both against the installed libraries (the test suite does).
"""

from __future__ import annotations

from importlib import metadata


class MovedError(ImportError):
    """A private name the course relies on is not where this adapter looks: a new release moved it."""


def moved(library: str, distribution: str, name: str, adapter: str, exc: BaseException) -> MovedError:
    """The error that says which private name moved, in which installed version, and where to fix it."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    return MovedError(f"{library} {version} has no {name} ({type(exc).__name__}: {exc}); the course reaches it only "
                      f"through {adapter}: update that module for this release, or install the version pyproject.toml pins")


def check() -> list[str]:
    """Every private name the adapters use, looked up in the installed libraries: the problems found
    (each naming the library's version), empty when all are where the adapters look."""
    from ckptlab.adapters import jax_internals, orbax_internals

    return [*jax_internals.check(), *orbax_internals.check()]
