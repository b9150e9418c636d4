"""Plain-data encoding for everything that crosses between the grader and a worker: JSON only.

Arrays travel as dtype, shape and their bytes (little-endian, base64): exact to the bit, and for
a (32, 512) float32 shard a quarter of the frame a list of numbers took, written 20 times and read
13 times quicker. Tuples, dicts with non-string keys and NumPy scalars are tagged so that exact
types survive the trip. Nothing is ever pickled, and decoding never builds anything but built-in
types and NumPy arrays.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.wall.kinds import AbstractArg, MeshArg, SpecArg

MAX_ELEMENTS = 2_000_000  # refuse to ship absurd outputs (a learner returning a huge array)


class EncodeError(TypeError):
    """A value that is not plain data (or too big to ship)."""


# The codec's own words for a value it cannot send. The grader shows only these (a worker's frame
# is learner code's word: any other text could carry hidden inputs), and names a type only where
# it is a real class of a library the grader has loaded (see autograder.engine.judge.return_detail).
TOO_DEEP = "value is nested too deeply"
OBJECT_ARRAY = "object arrays are not plain data"
TOO_LARGE = f"arrays of more than {MAX_ELEMENTS:,} elements cannot be returned"
NOT_CONVERTIBLE = "it could not be converted to plain data"
ENCODE_ERRORS = (TOO_DEEP, OBJECT_ARRAY, TOO_LARGE, NOT_CONVERTIBLE)
UNKNOWN_TYPE = "cannot return a value of type {}"


# --- walking an argument tree: dicts' values, lists and tuples, down to the leaves -----------------

def leaves(value):
    """Every leaf of an argument tree, in order."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    else:
        yield value


def map_leaves(value, fn):
    """The tree with each leaf replaced by ``fn(leaf)`` (dicts, and lists and tuples of exactly
    those types, are rebuilt; anything else is a leaf)."""
    if isinstance(value, dict):
        return {k: map_leaves(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(map_leaves(v, fn) for v in value)
    return fn(value)


def materialize(value):
    """Turn :class:`MeshArg` / :class:`SpecArg` / :class:`AbstractArg` inside ``value`` into real JAX objects.

    JAX is imported only when such arguments are present.
    """
    def build(leaf):
        if isinstance(leaf, MeshArg):
            from ckptlab.layout import course_mesh

            return course_mesh(leaf.shape)
        if isinstance(leaf, SpecArg):
            from jax.sharding import PartitionSpec

            return PartitionSpec(*leaf.entries)
        if isinstance(leaf, AbstractArg):
            import jax

            return jax.ShapeDtypeStruct(tuple(leaf.shape), np.dtype(_load_dtype(leaf.dtype)))
        return leaf

    return map_leaves(value, build)


def needs_jax(value) -> bool:
    """Whether :func:`materialize` builds JAX objects from ``value``."""
    return any(isinstance(leaf, (MeshArg, SpecArg, AbstractArg)) for leaf in leaves(value))


def _pinned_sharding_info(value) -> dict:
    """:func:`_sharding_info` in a worker, through the getters :func:`pin_jax_types` took: each
    shard's device is that of the buffer itself."""
    get = _PINNED["get"]
    sharding = get["sharding"].__get__(value)
    shards = []
    for buffer in get["arrays"].__get__(value):
        own = get["sharding"].__get__(buffer)
        if type(buffer) is not _PINNED["array"] or type(own) is not _PINNED["single"]:
            raise EncodeError(NOT_CONVERTIBLE)
        shards.append([int(get["device"].__get__(own).id), [int(n) for n in get["shape"].__get__(buffer)]])
    if type(sharding) is _PINNED["named"]:
        spec = [list(e) if isinstance(e, tuple) else e for e in get["spec"].__get__(sharding)]
        while spec and spec[-1] is None:
            spec.pop()
        mesh = get["mesh"].__get__(sharding)
        info = {"kind": "named", "mesh": [[str(n), int(s)] for n, s in mesh.shape.items()],
                "devices": [int(d.id) for d in np.asarray(mesh.devices).flat], "spec": spec}
    else:
        info = {"kind": type(sharding).__name__, "devices": sorted({d for d, _ in shards})}
    return {"sharding": info, "shards": sorted(shards)}


def _sharding_info(value) -> dict | None:
    """Plain description of a jax.Array's sharding and of the shard each device holds."""
    if _PINNED.get("array") is not None:
        return _pinned_sharding_info(value)
    try:
        from jax.sharding import NamedSharding
    except ImportError:  # pragma: no cover
        return None
    sharding = getattr(value, "sharding", None)
    shards = sorted([int(s.device.id), list(s.data.shape)] for s in value.addressable_shards)
    if isinstance(sharding, NamedSharding):
        spec = [list(e) if isinstance(e, tuple) else e for e in sharding.spec]
        while spec and spec[-1] is None:
            spec.pop()  # P("x") and P("x", None) shard alike
        mesh = sharding.mesh
        info = {"kind": "named", "mesh": [[str(n), int(s)] for n, s in mesh.shape.items()],
                "devices": [int(d.id) for d in np.asarray(mesh.devices).flat], "spec": spec}
    else:
        info = {"kind": type(sharding).__name__, "devices": sorted(int(d.id) for d in sharding.device_set)}
    return {"sharding": info, "shards": shards}


def _dtype_name(dtype: np.dtype) -> str:
    return np.dtype(dtype).name


def _float_out(v: float):
    # JSON has no NaN/inf; tag them so they survive and can be reported as NaN.
    if math.isnan(v):
        return {"$f": "nan"}
    if math.isinf(v):
        return {"$f": "inf" if v > 0 else "-inf"}
    return v


def encode(value: Any, _depth: int = 0, digest: bool = False) -> Any:
    """Turn a value into JSON-compatible data with type tags. ``digest``: arrays travel as their
    dtype, shape, placement and the SHA-256 of their bytes (see :class:`ArrayDigest`), not the bytes."""
    if _depth > 50:
        raise EncodeError(TOO_DEEP)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) is int:
        return value
    if type(value) is float:
        return {"$float": _float_out(value)} if not math.isfinite(value) else value
    if isinstance(value, np.generic):
        item = value.item()
        return {"$scalar": _dtype_name(value.dtype), "v": _float_out(item) if isinstance(item, float) else item}
    if isinstance(value, tuple) and type(value) is tuple:
        return {"$tuple": [encode(v, _depth + 1, digest) for v in value]}
    if type(value) is list:
        return [encode(v, _depth + 1, digest) for v in value]
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {"$dict": {k: encode(v, _depth + 1, digest) for k, v in value.items()}}
        return {"$pairs": [[encode(k, _depth + 1, digest), encode(v, _depth + 1, digest)] for k, v in value.items()]}
    if isinstance(value, MeshArg):
        return {"$mesh": [[n, int(s)] for n, s in value.axes]}
    if isinstance(value, SpecArg):
        return {"$pspec": encode(tuple(value.entries), _depth + 1)}
    if isinstance(value, AbstractArg):
        return {"$abstract": [int(n) for n in value.shape], "dtype": str(value.dtype)}
    lib = "numpy" if isinstance(value, np.ndarray) else _array_lib(value)
    if lib is not None:
        arr = np.asarray(value)
        if arr.dtype == object:
            raise EncodeError(OBJECT_ARRAY)
        if arr.size > MAX_ELEMENTS and not digest:
            raise EncodeError(TOO_LARGE)
        name = _dtype_name(arr.dtype)
        if arr.dtype == bool:  # a bool made from raw bytes (np.frombuffer) may hold any byte: 0 or 1 here
            arr = np.ascontiguousarray(arr).view(np.uint8) != 0
        raw = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).reshape(-1).view(np.uint8)
        if digest:
            out = {"$digest": name, "lib": lib, "shape": list(arr.shape), "sha256": hashlib.sha256(raw.data).hexdigest()}
        else:
            out = {"$array": name, "lib": lib, "shape": list(arr.shape), "bytes": base64.b64encode(raw.data).decode("ascii")}
        del arr, raw  # (one array's copy at a time)
        if lib == "jax":
            out["placement"] = _sharding_info(value)
        return out
    raise EncodeError(UNKNOWN_TYPE.format(f"{type(value).__module__}.{type(value).__qualname__}"))


def _array_lib(value) -> str | None:
    if _PINNED:  # in a worker: JAX's own array type only, as it was before learner code ran
        return "jax" if _PINNED.get("array") is not None and type(value) is _PINNED["array"] else None
    module = type(value).__module__ or ""
    if module.startswith(("jax", "jaxlib")) and hasattr(value, "shape") and hasattr(value, "dtype"):
        return "jax"
    return None


# In a worker, what JAX's arrays and shardings are, taken before any learner code ran (see
# pin_jax_types): their exact classes and the getters the library defines for their sharding and
# per-device buffers. Placement is read through these, never through attributes learner code could
# have replaced on a class since.
_PINNED: dict = {}


def pin_jax_types(load: bool = False) -> None:
    """Called by a worker before it loads any learner code (``load``: import JAX first, for a
    problem whose arguments or answer hold its objects). From then on only an object of JAX's own
    array class is sent as a placed array, its sharding and each device's shard read through the
    getters taken now: an object of another class posing as one (its module named like JAX's), or a
    class given a new ``sharding`` property, is not. Without JAX imported by then, no object is sent
    as a JAX array at all. (What learner code can still do, it does inside its own process: see
    SECURITY.md, placement.)"""
    import sys

    _PINNED["worker"] = True
    if load and "jax" not in sys.modules:
        import jax  # noqa: F401
    if "jax" not in sys.modules:
        return
    import jax

    from ckptlab.adapters.jax_internals import array_type  # (JAX's private names live there only)

    array, getters = array_type()  # the class of every jax.Array (jaxlib's own type), its slots' getters
    _PINNED.update(array=array, single=jax.sharding.SingleDeviceSharding, named=jax.sharding.NamedSharding,
                   get=getters)


def _float_in(v):
    if isinstance(v, dict) and "$f" in v:
        return float(v["$f"])
    return v


# What a worker's answer may hold; checked before anything is built from it.
MAX_DEPTH = 64
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2"})


class _Budget:
    def __init__(self):
        self.left = MAX_ELEMENTS

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ValueError(f"more than {MAX_ELEMENTS:,} elements")


def decode(data: Any, checked: bool = False) -> Any:
    """Inverse of :func:`encode`; JAX arrays come back as NumPy arrays (see :class:`Decoded`).

    ``checked`` (for what a worker sends): nesting depth, element count, array shapes and dtypes are
    checked before anything is built, and anything off raises ValueError."""
    return _decode(data, 0, _Budget() if checked else None)


def _decode(data: Any, depth: int, budget: _Budget | None) -> Any:
    if budget is not None:
        if depth > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
        budget.take(1)
    if isinstance(data, list):
        return [_decode(v, depth + 1, budget) for v in data]
    if not isinstance(data, dict):
        if budget is not None and not (data is None or isinstance(data, (bool, int, float, str))):
            raise ValueError(f"unexpected {type(data).__name__}")
        return data
    if "$float" in data:
        return float(_float_in(data["$float"]))
    if "$scalar" in data:
        return np.dtype(_load_dtype(data["$scalar"], budget)).type(_float_in(data["v"]))
    if "$tuple" in data:
        return tuple(_decode(v, depth + 1, budget) for v in data["$tuple"])
    if "$dict" in data:
        return {k: _decode(v, depth + 1, budget) for k, v in data["$dict"].items()}
    if "$pairs" in data:
        return {_hashable(_decode(k, depth + 1, budget)): _decode(v, depth + 1, budget) for k, v in data["$pairs"]}
    if budget is not None and any(tag in data for tag in ("$mesh", "$pspec", "$abstract")):
        raise ValueError("a mesh, a spec or an abstract array is an argument, never a result")
    if "$mesh" in data:
        return MeshArg(tuple((str(n), int(s)) for n, s in data["$mesh"]))
    if "$pspec" in data:
        return SpecArg(tuple(_decode(data["$pspec"], depth + 1, budget)))
    if "$abstract" in data:
        shape = data["$abstract"]
        if budget is not None and not (isinstance(shape, list) and len(shape) <= 8 and all(type(n) is int and 0 <= n for n in shape)):
            raise ValueError("an array shape must be a short list of sizes")
        return AbstractArg(tuple(shape), _load_dtype(data["dtype"], budget).name)
    if "$array" in data:
        dtype = _load_dtype(data["$array"], budget)
        shape, text = data["shape"], data["bytes"]
        if budget is not None:
            if not (isinstance(shape, list) and len(shape) <= 8 and all(type(n) is int and 0 <= n for n in shape)):
                raise ValueError("an array shape must be a short list of sizes")
            # Sizes checked before a byte is decoded: base64 holds 3 bytes in every 4 characters.
            size = math.prod(shape)
            budget.take(size)
            if not isinstance(text, str) or len(text) != 4 * -(-size * dtype.itemsize // 3):
                raise ValueError("an array's data does not match its shape")
        raw = base64.b64decode(text, validate=True)
        arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<"), count=math.prod(shape)).astype(dtype).reshape(shape)
        if arr.dtype == bool and arr.size and np.frombuffer(raw, np.uint8).max() > 1:
            raise ValueError("a bool array holds bytes other than 0 and 1")
        placement = data.get("placement")
        if budget is not None and placement is not None:
            _plain(placement, depth + 1, budget)  # read by the judge only: plain data of bounded size
        return JaxArray(arr, placement) if data.get("lib") == "jax" else arr
    if "$digest" in data:
        dtype, shape, sha = _load_dtype(data["$digest"], budget), data["shape"], data["sha256"]
        if budget is not None:
            if not (isinstance(shape, list) and len(shape) <= 8 and all(type(n) is int and 0 <= n for n in shape)):
                raise ValueError("an array shape must be a short list of sizes")
            if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
                raise ValueError("an array's digest must be 64 hexadecimal digits")
        placement = data.get("placement")
        if budget is not None and placement is not None:
            _plain(placement, depth + 1, budget)
        return ArrayDigest(dtype, tuple(shape), sha, data.get("lib") == "jax", placement)
    raise ValueError(f"unknown tagged value: {sorted(data)[:5]}")


def _plain(value, depth: int, budget: _Budget) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    budget.take(1)
    if isinstance(value, list):
        for v in value:
            _plain(v, depth + 1, budget)
    elif isinstance(value, dict):
        for v in value.values():
            _plain(v, depth + 1, budget)
    elif not (value is None or isinstance(value, (bool, int, float, str))):
        raise ValueError(f"unexpected {type(value).__name__}")


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _load_dtype(name: str, budget: _Budget | None = None):
    if budget is not None and name not in DTYPES:
        raise ValueError("an array's dtype must be a plain numeric one")
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


class JaxArray(np.ndarray):
    """A NumPy array that remembers it was a ``jax.Array`` in the worker, and how it was placed:
    ``placement`` is ``{"sharding": {...}, "shards": [[device_id, shape], ...]}``."""

    def __new__(cls, arr, placement=None):
        obj = np.asarray(arr).view(cls)
        obj.placement = placement
        return obj

    def __array_finalize__(self, obj):
        self.placement = getattr(obj, "placement", None)

    def __reduce__(self):
        # (pickled, as the references' processes send expected values: NumPy's own pickling keeps no attribute)
        return JaxArray, (np.asarray(self), self.placement)


@dataclass(frozen=True, eq=False)
class ArrayDigest:
    """An array a worker sent as its dtype, shape, placement and the SHA-256 of its bytes
    (little-endian, row-major): a memory-measured problem's return, whose arrays may be far larger
    than a frame, and whose encoding must cost the worker no more than one array's copy. Equal
    values have equal digests; learner code that could forge one must first have the right bytes."""

    dtype: np.dtype
    shape: tuple
    sha256: str
    jax: bool
    placement: Any = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def same(self, other) -> bool:
        return isinstance(other, ArrayDigest) and (self.dtype, self.shape, self.sha256, self.jax, self.placement) == \
            (other.dtype, other.shape, other.sha256, other.jax, other.placement)


def dumps(value: Any, digest: bool = False) -> str:
    return json.dumps(encode(value, digest=digest), allow_nan=False)


def loads(text: str) -> Any:
    return decode(json.loads(text))
