"""What each problem must return: exact type, shape and dtype checks, then value comparison.

These are public (the problem statements say the same); the grader checks the type before it
compares values, so an object that pretends to equal everything earns nothing.

Every spec keeps one contract, :class:`ReturnSpec`. The generic specs are here; those written for
one problem (a checkpoint's contents, each checked from a public example's own arguments) are in
:mod:`autograder.wall.problem_returns`.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

_KIND_NAMES = {"f": "floating", "i": "integer", "u": "unsigned integer", "b": "boolean"}


@runtime_checkable
class ReturnSpec(Protocol):
    """What a problem's function must return, and how a return is judged: the contract of every
    return spec (``Problem.returns``).

    The judge (:mod:`autograder.engine.judge`) takes a worker's answer, plain data decoded on the
    grader's side (see :mod:`autograder.wall.codec`), and asks in this order: :meth:`type_error`
    (``detail=False``: a hidden case's return is never described), :meth:`has_nan`, then
    :meth:`equal` against the expected value. The notebook's check (:mod:`autograder.learner.notebook`) asks
    the same of a public example's return, with ``detail``; or, where :attr:`checks_examples`, only
    :meth:`check_example`, which judges the example from its own arguments (the checkpoint it
    restores, the file it reads: no expected value, no reference).

    Every spec subclasses this explicitly, as a frozen dataclass: it inherits the optional part's
    defaults (:attr:`checks_examples` False, :meth:`check_example` None), and a spec without one of
    the required members cannot be built.
    """

    # Whether a public example is judged by check_example, from its own arguments, in place of
    # type_error, has_nan and equal against the example's expected value.
    checks_examples: ClassVar[bool] = False

    @property
    @abstractmethod
    def describe(self) -> str:
        """What the function must return, in words: messages read "must return <describe>"."""

    @abstractmethod
    def type_error(self, v, detail: bool = True) -> str | None:
        """Why ``v`` is not of the type asked, as a message to follow the function's name ("must
        return ..."), or None. Without ``detail`` (hidden cases) no shape, dtype, key or length of
        ``v`` is shown: they can mirror a hidden input. Checked before any value is compared, so
        that an object that pretends to equal everything earns nothing."""

    @abstractmethod
    def has_nan(self, v) -> bool:
        """Whether ``v`` (of the right type) holds a NaN that is a mistake of its own (a 0/0), told
        apart from a wrong value; False where NaN is a value like any other."""

    @abstractmethod
    def equal(self, actual, expected) -> bool:
        """Whether ``actual`` (of the right type) is right, against ``expected`` (the reference's
        return, or a public example's expected value)."""

    def check_example(self, args, real_args, got) -> str | None:
        """What is wrong with ``got``, the return of a public example, or None: ``args`` are the
        example's arguments as declared, ``real_args`` what the function was called with (files
        written, meshes and specs built). Runs in the learner's kernel, on real arrays. Asked only
        where :attr:`checks_examples`; by default there is nothing to say."""
        return None

    def run_example(self, fn, args, real_args):
        """Call ``fn`` on a public example in the learner's kernel, as the notebook's check does, and
        return what it returned; by default once, on ``real_args``. A spec whose example needs more
        than one call (a run started again in the folder an earlier run left) says how here."""
        return fn(*real_args)


def type_name(value, detail: bool = True) -> str:
    """What the learner returned. Without ``detail`` (hidden cases) no shape or dtype is shown: a
    returned value's shape can mirror a hidden input."""
    from autograder.wall.codec import JaxArray

    if isinstance(value, JaxArray):
        return f"jax.Array of shape {value.shape} and dtype {value.dtype}" if detail else "jax.Array"
    if isinstance(value, np.ndarray):
        return f"np.ndarray of shape {value.shape} and dtype {value.dtype}" if detail else "np.ndarray"
    return type(value).__name__


def is_int(v) -> bool:
    """Whether ``v`` is an int as a count is: a Python int (not a bool) or a NumPy integer."""
    return (type(v) is int) or isinstance(v, np.integer)


@dataclass(frozen=True)
class ArrayOf(ReturnSpec):
    """A NumPy or JAX array of a fixed shape whose dtype is of the given kind."""

    shape: tuple
    kind: str = "f"
    rtol: float = 1e-6

    @property
    def describe(self) -> str:
        return f"a {len(self.shape)}-D array of shape {self.shape} with a {_KIND_NAMES[self.kind]} dtype (np.ndarray or jax.Array)"

    def type_error(self, v, detail: bool = True) -> str | None:
        if not isinstance(v, np.ndarray):
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        if v.shape != self.shape:
            return f"must return an array of shape {self.shape}, but returned " + (
                f"shape {v.shape}" if detail else "another shape")
        if v.dtype.kind != self.kind and not (self.kind == "f" and v.dtype.name.startswith(("bfloat16", "float8"))):
            got = _KIND_NAMES.get(v.dtype.kind, "another")
            text = (f"must return an array with a {_KIND_NAMES[self.kind]} dtype, but it returned an {got} array"
                    if got[0] in "aeiou" else
                    f"must return an array with a {_KIND_NAMES[self.kind]} dtype, but it returned a {got} array")
            text += f" ({v.dtype})" if detail else ""
            if self.kind == "f" and v.dtype.kind in "iub":
                text += ("; `//`, integer inputs or an integer dtype give integers: divide with `/` and build the "
                         "array with a float dtype")
            return text
        return None

    def has_nan(self, v) -> bool:
        return bool(np.isnan(np.asarray(v, dtype=np.float64)).any())

    def equal(self, actual, expected) -> bool:
        return bool(np.allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=self.rtol, atol=0))


def _describe(t) -> str:
    if t in ("int", "float", "bool"):
        return t
    if t == "str":
        return "str"
    kind = t[0]
    if kind == "optional":
        return f"{_describe(t[1])} or None"
    if kind == "fixed":
        return "tuple (" + ", ".join(_describe(x) for x in t[1]) + ")"
    if kind == "record":
        return "dict {" + ", ".join(f"{k!r}: {_describe(x)}" for k, x in t[1]) + "}"
    if kind == "tuple":
        return f"tuple of {_describe(t[1])}"
    if kind == "pair":
        return f"(start, stop) pair of {_describe(t[1])}"
    if kind == "list":
        return f"list of {_describe(t[1])}"
    if kind == "dict":
        return f"dict from {_describe(t[1])} to {_describe(t[2])}"
    raise ValueError(t)


def _check(t, v, where: str, detail: bool = True) -> str | None:
    """Why ``v`` is not of type ``t``, or None. Without ``detail`` no key or length of the value
    is shown (they can mirror hidden inputs)."""
    name = type_name(v, detail)
    if t == "int":
        if isinstance(v, (bool, np.bool_)) or not is_int(v):
            hint = " (counts are whole numbers: use int(...) or //)" if isinstance(v, (float, np.floating)) else ""
            return f"{where} must be an int, but is a {name}{hint}"
        return None
    if t == "str":
        return None if type(v) is str else f"{where} must be a str, but is a {name}"
    if t == "bool":
        return None if isinstance(v, (bool, np.bool_)) else f"{where} must be a bool (True or False), but is a {name}"
    if t == "float":
        if type(v) is float or isinstance(v, np.floating):
            return None
        return f"{where} must be a float, but is a {name} (use / rather than //)"
    kind = t[0]
    if kind == "optional":
        if v is None:
            return None
        bad = _check(t[1], v, where, detail)
        return bad and f"{bad}, or None"
    if kind == "fixed":
        if type(v) is not tuple:
            return f"{where} must be a tuple, but is a {name}"
        if len(v) != len(t[1]):
            return f"{where} must have {len(t[1])} items" + (f", but has {len(v)}" if detail else "")
        for i, (sub, x) in enumerate(zip(t[1], v)):
            bad = _check(sub, x, f"item {i} of {where}", detail)
            if bad:
                return bad
        return None
    if kind == "record":
        if type(v) is not dict:
            return f"{where} must be a dict, but is a {name}"
        keys = [k for k, _ in t[1]]
        if set(v) != set(keys):
            return f"{where} must have exactly the keys {keys}" + (f", but has {sorted(map(str, v))}" if detail else "")
        for k, sub in t[1]:
            bad = _check(sub, v[k], f"{where}[{k!r}]", detail)
            if bad:
                return bad
        return None
    if kind in ("tuple", "pair", "list"):
        want = list if kind == "list" else tuple
        if type(v) is not want:
            return f"{where} must be a {want.__name__}, but is a {name}"
        if kind == "pair" and len(v) != 2:
            return f"{where} must have 2 items (start, stop)" + (f", but has {len(v)}" if detail else "")
        for i, x in enumerate(v):
            bad = _check(t[1], x, f"item {i} of {where}" if detail else f"an item of {where}", detail)
            if bad:
                return bad
        return None
    if kind == "dict":
        if type(v) is not dict:
            return f"{where} must be a dict, but is a {name}"
        for k, x in v.items():
            bad = (_check(t[1], k, f"a key of {where}", detail)
                   or _check(t[2], x, f"the value for key {k!r} of {where}" if detail else f"a value of {where}", detail))
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
    if isinstance(v, np.bool_):
        return bool(v)
    return v


@dataclass(frozen=True)
class ExactArray(ReturnSpec):
    """A NumPy array whose dtype, shape and values must all equal the expected array's exactly."""

    @property
    def describe(self) -> str:
        return "a NumPy array (np.ndarray) with the tensor's dtype"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.codec import JaxArray

        if not isinstance(v, np.ndarray) or isinstance(v, JaxArray):
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        return None

    def has_nan(self, v) -> bool:
        return False  # NaN compares as equal to NaN below: bit-exact reads may contain any value

    def equal(self, actual, expected) -> bool:
        return (actual.dtype == expected.dtype and actual.shape == expected.shape
                and np.array_equal(actual, expected, equal_nan=actual.dtype.kind == "f"))


def exact_arrays_error(v, describe: str, detail: bool = True) -> str | None:
    """:meth:`ExactArrays.type_error`, its messages saying "must return <describe>": for a spec
    whose return holds such a dict (a resumed run's parameters)."""
    from autograder.wall.codec import JaxArray

    if type(v) is not dict:
        return f"must return {describe}, but returned a {type_name(v, detail)}"
    for k, x in v.items():
        if type(k) is not str or not isinstance(x, np.ndarray) or isinstance(x, JaxArray):
            return f"must return {describe}: a key or a value is a {type_name(x if type(k) is str else k, detail)}"
    return None


@dataclass(frozen=True)
class ExactArrays(ReturnSpec):
    """A dict from names to NumPy arrays, each equal to the expected one exactly (dtype, shape and
    every bit): a training run's parameters, against a run that was never interrupted."""

    @property
    def describe(self) -> str:
        return "a dict from each parameter's path (str) to its value (np.ndarray)"

    def type_error(self, v, detail: bool = True) -> str | None:
        return exact_arrays_error(v, self.describe, detail)

    def has_nan(self, v) -> bool:
        return False  # compared bit for bit below, NaN included

    def equal(self, actual, expected) -> bool:
        return set(actual) == set(expected) and all(
            ExactArray().equal(actual[k], expected[k]) for k in expected)


@dataclass(frozen=True)
class Struct(ReturnSpec):
    """Nested plain data of an exact type, e.g. ``("dict", "int", ("tuple", ("pair", "int")))``.

    Containers must be exactly the declared type (a list is not a tuple); NumPy integers count as
    ints. Values compare exactly.
    """

    type: object

    @property
    def describe(self) -> str:
        text = _describe(self.type)
        return ("an " if text[0] in "aeiou" else "a ") + text

    def type_error(self, v, detail: bool = True) -> str | None:
        bad = _check(self.type, v, "the result", detail)
        return f"must return {self.describe}: {bad}" if bad else None

    def has_nan(self, v) -> bool:
        return False

    def equal(self, actual, expected) -> bool:
        return _close(_plain(actual), _plain(expected))


@dataclass(frozen=True)
class Close(ReturnSpec):
    """A float, or a tuple of floats (``names`` says what each is), each compared within a tolerance of
    its own instead of exactly: ``tolerances`` holds, per position, ``("rel", r)`` (relative to the
    expected value) or ``("abs", a)``. For a quantity two right models give a little apart (Young's
    interval and Daly's, the first-order goodput and the exact one, a Monte Carlo estimate): the
    statement gives the tolerances, and answers within them pass."""

    tolerances: tuple[tuple[str, float], ...]
    names: tuple[str, ...] = ()  # none: one bare float

    def __post_init__(self):
        if len(self.tolerances) != max(1, len(self.names)) or any(k not in ("rel", "abs") for k, _ in self.tolerances):
            raise ValueError("one ('rel' | 'abs', tolerance) per float")

    @property
    def describe(self) -> str:
        return "a float" if not self.names else "a tuple (" + ", ".join(f"{n}: float" for n in self.names) + ")"

    def type_error(self, v, detail: bool = True) -> str | None:
        bad = _check(("fixed", ("float",) * len(self.names)) if self.names else "float", v, "the result", detail)
        return f"must return {self.describe}: {bad}" if bad else None

    def _items(self, v) -> tuple:
        return tuple(v) if self.names else (v,)

    def has_nan(self, v) -> bool:
        return any(math.isnan(float(x)) for x in self._items(v))

    def equal(self, actual, expected) -> bool:
        return all(_within(float(a), float(e), kind, tol)
                   for a, e, (kind, tol) in zip(self._items(actual), self._items(expected), self.tolerances))


def _within(a: float, e: float, kind: str, tol: float) -> bool:
    if kind == "rel":
        return math.isclose(a, e, rel_tol=tol, abs_tol=0.0)
    return math.isfinite(a) and math.isfinite(e) and abs(a - e) <= tol


def _close(a, e) -> bool:
    if isinstance(e, float) or isinstance(a, float):
        return isinstance(a, (int, float)) and math.isclose(float(a), float(e), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(e, dict):
        return isinstance(a, dict) and set(a) == set(e) and all(_close(a[k], e[k]) for k in e)
    if isinstance(e, (list, tuple)):
        return type(a) is type(e) and len(a) == len(e) and all(_close(x, y) for x, y in zip(a, e))
    return a == e


def leaves_with_paths(tree, prefix=""):
    """``(path, leaf)`` for every leaf of nested dicts, in order, its keys joined by "/"
    (``"params/layer0/kernel"``); anything that is not a dict is a leaf."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from leaves_with_paths(v, f"{prefix}/{k}" if prefix else str(k))
    else:
        yield prefix, tree


@dataclass(frozen=True)
class ArrayTree(ReturnSpec):
    """Nested dicts of arrays, NumPy or JAX (Unit 7's migrated model): every leaf's path, dtype,
    shape and bytes must match; placement is not looked at."""

    @property
    def describe(self) -> str:
        return "a dict of arrays shaped like the target (nested dicts, NumPy or JAX arrays at the leaves)"

    def type_error(self, v, detail: bool = True) -> str | None:
        if type(v) is not dict:
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        for path, leaf in leaves_with_paths(v):
            if not isinstance(leaf, (np.ndarray, np.generic)):
                return (f"must return {self.describe}, but {repr(path) if detail else 'a leaf'} is a "
                        f"{type_name(leaf, detail)}")
        return None

    def has_nan(self, v) -> bool:
        return False  # (NaNs are values like any other here: compared by their bytes)

    def equal(self, actual, expected) -> bool:
        a = {k: np.asarray(v) for k, v in leaves_with_paths(actual)}
        e = {k: np.asarray(v) for k, v in leaves_with_paths(expected)}
        return set(a) == set(e) and all(
            a[k].dtype == e[k].dtype and a[k].shape == e[k].shape
            and np.ascontiguousarray(a[k]).tobytes() == np.ascontiguousarray(e[k]).tobytes() for k in e)


def names_dimension(message: str, dim: int) -> bool:
    """Does an error message name dimension ``dim`` by its index, as people write it ("dimension 1",
    "dim 1", JAX's "array axis 1", "axis=1", "dimension #1", "dim index 1", "shape[1]")?"""
    import re

    word = rf"\b(?:dimension|dim|axis)\s*(?:index\s*)?[#=:]?\s*{dim}\b"
    return re.search(rf"{word}|shape\s*\[\s*{dim}\s*\]", message, re.I) is not None


@dataclass(frozen=True)
class Raises:
    """An example whose correct outcome is an exception of this type whose message names dimension
    ``dim``, contains ``word``, and gives one of ``values`` (numbers, written as numbers: a message
    naming them in words alone does not say which)."""

    type: str = "ValueError"
    dim: int | None = None
    word: str = ""
    values: tuple = ()

    @property
    def mentions(self) -> str:
        if self.values:
            return " or ".join(str(v) for v in self.values)
        return f"dimension {self.dim}" if self.dim is not None else self.word

    def message_ok(self, message: str) -> bool:
        import re

        if self.dim is not None and not names_dimension(message, self.dim):
            return False
        if self.values and not any(re.search(rf"(?<![\w.]){re.escape(str(v))}(?![\w.]\w|\w)", message)
                                   for v in self.values):
            return False
        return self.word.lower() in message.lower()
