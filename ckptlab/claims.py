"""Claims as code: a lesson states what its run shows, with the figures it rests on, and fails when the run contradicts it.

    from ckptlab.claims import claim
    claim("every peak at or above what the devices hold", all(p >= h for p, h in pairs), peaks=..., held=...)
    # prints: every peak at or above what the devices hold: True  (peaks: ..., held: ...)

A lesson's sentence that states a number, a bound, a comparison or an outcome is one call: the
sentence as ``text``, whether this run bears it out as ``holds``, and the numbers it was decided on
as keyword arguments, printed beside it so that a reader sees what the verdict rests on. When it
does not hold the call raises :class:`ClaimFailed` (an ``AssertionError``) naming the claim and its
figures, so the cell, the notebook and the test that runs it fail, instead of a ``False`` printed
under prose that says ``True``. The prose around it says no more than the claim checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["ClaimFailed", "claim", "figure"]


class ClaimFailed(AssertionError):
    """A claim a lesson makes that its own run contradicts."""


def figure(value) -> str:
    """A figure as a reader wants it: whole numbers with thousands separators, others to 4 significant digits."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, int):  # separators for large counts only: a device id 2048 stays as it is
        return f"{value:,}" if abs(value) >= 100_000 else str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return figure(int(value))
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {figure(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(figure(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    try:  # a NumPy or JAX scalar
        return figure(value.item())
    except (AttributeError, ValueError, TypeError):
        return str(value)


def claim(text: str, holds, **figures) -> None:
    """Print ``text: holds`` and the figures it rests on; raise :class:`ClaimFailed` unless it holds.

    It returns nothing, so that a claim ending a cell adds no stray ``True`` below it. ``holds``
    must be a plain truth value (a Python or NumPy bool): an array, whose truth is ambiguous, or
    anything else is refused, so that a claim is never decided by accident.
    """
    if hasattr(holds, "item") and getattr(holds, "shape", None) == ():
        holds = holds.item()
    if not isinstance(holds, bool):
        raise TypeError(f"claim {text!r}: holds must be True or False, not {type(holds).__name__}")
    shown = f"  ({', '.join(f'{k}: {figure(v)}' for k, v in figures.items())})" if figures else ""
    print(f"{text}: {holds}{shown}")
    if not holds:
        raise ClaimFailed(f"the run contradicts the lesson's claim {text!r}{shown}")
