"""The error an adapter raises when a private name is not where it looks (see :mod:`ckptlab.adapters`)."""

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
