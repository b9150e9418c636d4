"""What each problem must return: exact type, shape and dtype checks, then value comparison.

These are public (the problem statements say the same); the grader checks the type before it
compares values, so an object that pretends to equal everything earns nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_KIND_NAMES = {"f": "floating", "i": "integer", "u": "unsigned integer", "b": "boolean"}


def _type_name(value) -> str:
    from autograder.codec import JaxArray

    if isinstance(value, JaxArray):
        return f"jax.Array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"np.ndarray of shape {value.shape} and dtype {value.dtype}"
    return type(value).__name__


def _is_int(v) -> bool:
    return (type(v) is int) or isinstance(v, np.integer)


@dataclass(frozen=True)
class ArrayOf:
    """A NumPy or JAX array of a fixed shape whose dtype is of the given kind."""

    shape: tuple
    kind: str = "f"
    rtol: float = 1e-6

    @property
    def describe(self) -> str:
        return f"a {len(self.shape)}-D array of shape {self.shape} with a {_KIND_NAMES[self.kind]} dtype (np.ndarray or jax.Array)"

    def type_error(self, v) -> str | None:
        if not isinstance(v, np.ndarray):
            return f"must return {self.describe}, but returned a {_type_name(v)}"
        if v.shape != self.shape:
            return f"must return an array of shape {self.shape}, but returned shape {v.shape}"
        if v.dtype.kind != self.kind and not (self.kind == "f" and v.dtype.name.startswith(("bfloat16", "float8"))):
            return f"must return an array with a {_KIND_NAMES[self.kind]} dtype, but its dtype is {v.dtype}"
        return None

    def has_nan(self, v) -> bool:
        return bool(np.isnan(np.asarray(v, dtype=np.float64)).any())

    def equal(self, actual, expected) -> bool:
        return bool(np.allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=self.rtol, atol=0))


def _describe(t) -> str:
    if t == "int":
        return "int"
    if t == "str":
        return "str"
    kind = t[0]
    if kind == "tuple":
        return f"tuple of {_describe(t[1])}"
    if kind == "pair":
        return f"(start, stop) pair of {_describe(t[1])}"
    if kind == "list":
        return f"list of {_describe(t[1])}"
    if kind == "dict":
        return f"dict from {_describe(t[1])} to {_describe(t[2])}"
    raise ValueError(t)


def _check(t, v, where: str) -> str | None:
    if t == "int":
        if isinstance(v, (bool, np.bool_)) or not _is_int(v):
            hint = " (counts are whole numbers: use int(...) or //)" if isinstance(v, (float, np.floating)) else ""
            return f"{where} must be an int, but is a {_type_name(v)}{hint}"
        return None
    if t == "str":
        return None if type(v) is str else f"{where} must be a str, but is a {_type_name(v)}"
    kind = t[0]
    if kind in ("tuple", "pair", "list"):
        want = list if kind == "list" else tuple
        if type(v) is not want:
            return f"{where} must be a {want.__name__}, but is a {_type_name(v)}"
        if kind == "pair" and len(v) != 2:
            return f"{where} must have 2 items (start, stop), but has {len(v)}"
        for i, x in enumerate(v):
            bad = _check(t[1], x, f"item {i} of {where}")
            if bad:
                return bad
        return None
    if kind == "dict":
        if type(v) is not dict:
            return f"{where} must be a dict, but is a {_type_name(v)}"
        for k, x in v.items():
            bad = _check(t[1], k, f"a key of {where}") or _check(t[2], x, f"the value for key {k!r} of {where}")
            if bad:
                return bad
        return None
    raise ValueError(t)


def _plain(v):
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    return v


@dataclass(frozen=True)
class Struct:
    """Nested plain data of an exact type, e.g. ``("dict", "int", ("tuple", ("pair", "int")))``.

    Containers must be exactly the declared type (a list is not a tuple); NumPy integers count as
    ints. Values compare exactly.
    """

    type: object

    @property
    def describe(self) -> str:
        text = _describe(self.type)
        return ("an " if text[0] in "aeiou" else "a ") + text

    def type_error(self, v) -> str | None:
        bad = _check(self.type, v, "the result")
        return f"must return {self.describe}: {bad}" if bad else None

    def has_nan(self, v) -> bool:
        return False

    def equal(self, actual, expected) -> bool:
        return _plain(actual) == _plain(expected)


@dataclass(frozen=True)
class Raises:
    """An example whose correct outcome is an exception of this type naming ``mentions``."""

    type: str = "ValueError"
    mentions: str = ""
